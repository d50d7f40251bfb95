"""A binary blktrace file parsed as byte ranges (workers/traces/byterange.py) and put back
together gives exactly the whole-file parse: rows, PROCESS notes, messages, genesis, warnings
and diagnostics; through ``ingest(parsed=)`` and through the chunked merge, the EventTable and
the analyzers' results of the single-task path (issue 12: shards at record boundaries)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from workers.analyzers import analyze
from workers.errors import ParseError
from workers.events import COLUMNS, EventTable
from workers.traces import ingest
from workers.traces.blktrace_bin import MAGIC, VERSION_V1, parse_blktrace_raw
from workers.traces.byterange import (
    NotCombinable,
    RangedPartFile,
    combine_parts,
    find_boundary,
    nominal,
    parse_in_ranges,
    parse_range,
    parse_range_fetched,
    range_count,
)
from workers.traces.shards import PartFile, write_part
from workers.traces.streammerge import ingest_stored
from workers.traces.synth import all_actions_table, realistic_table
from workers.traces.writers import _note, encode_blktrace


def _trace(events: int = 40_000, seed: int = 3, cpus: int = 4) -> EventTable:
    """A merged multi-cpu stream with messages and every action (notes, remaps, splits)."""
    t = realistic_table(events, seed=seed, cpus=cpus)
    extra = all_actions_table()
    extra.time_ns = extra.time_ns + int(t.time_ns[len(t) // 2])
    both = EventTable.concat([t, extra])
    return both.take(np.argsort(both.time_ns, kind="stable"))


def _raw_json(raw) -> dict:
    return {"processes": raw.processes, "timestamps": raw.timestamps,
            "messages": raw.messages, "warnings": raw.warnings,
            "diagnostics": raw.diagnostics, "genesis": raw.genesis,
            "version": raw.version, "big_endian": raw.big_endian}


def _same_part(path: Path, count: int, *, name: str | None = None) -> None:
    name = name or path.name
    whole = parse_blktrace_raw(path, name=name)
    parts = [parse_range(path, name, i, count) for i in range(count)]
    assert sum(p.events for p in parts) == len(whole.table)
    combined = combine_parts(parts)
    assert _raw_json(combined.raw) == _raw_json(whole)
    for col, _ in COLUMNS:
        assert np.array_equal(getattr(combined.table, col), getattr(whole.table, col)), col


def test_ranges_agree_on_boundaries_at_record_starts(tmp_path):
    """Every boundary is a record start of the whole file's chain; ranges hold the records
    starting between their boundaries, whatever the count (more ranges than records: empty
    ones)."""
    data = encode_blktrace(_trace(3000))
    path = tmp_path / "one.blktrace"
    path.write_bytes(data)
    starts, pos = set(), 0
    while pos < len(data):
        starts.add(pos)
        pos += 48 + struct.unpack_from("<H", data, pos + 46)[0]
    buf = np.frombuffer(data, np.uint8)
    for off in range(0, len(data), 997):
        b = find_boundary(buf, off, base=0, size=len(data), big=False, version=VERSION_V1)
        assert b in starts and b >= off and not any(off <= s < b for s in starts)
    for count in (1, 2, 3, 7, 40, 5000):
        parts = [parse_range(path, path.name, i, count) for i in range(count)]
        spans = [(p.byte_range["start"], p.byte_range["stop"]) for p in parts]
        assert spans[0][0] == 0 and spans[-1][1] == len(data)
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
        if count == 5000:
            assert sum(p.events == 0 for p in parts) > 1000  # ranges with no record start
        _same_part(path, count)


def test_single_file_in_ranges_equals_the_single_task_path(tmp_path):
    """One merged file of a bundle split into ranges: the same Ingest and results through
    ingest(parsed=) and through the chunked merge of the ranges' part files."""
    path = tmp_path / "all.blktrace"
    path.write_bytes(encode_blktrace(_trace(60_000)))
    paths, names = [path], [path.name]
    single = ingest(paths, names=names)
    size = path.stat().st_size
    count = range_count(size, -(-size // 6))
    assert count == 6
    parts = [parse_range(path, path.name, i, count) for i in range(count)]
    viamem = ingest(paths, names=names, parsed={path.name: combine_parts(parts)})
    files = []
    for i, p in enumerate(parts):
        with open(tmp_path / f"{i}.part", "wb") as fh:
            write_part(p, fh)
        files.append(PartFile(tmp_path / f"{i}.part"))
    stored = ingest_stored(paths, names=names, strict=False,
                           parts={path.name: RangedPartFile(files)}, out=tmp_path / "store",
                           rows=7777)
    assert stored is not None
    a = single.table
    for b, warnings in ((viamem.table, viamem.warnings),
                        (stored.store.to_table(), stored.warnings)):
        for col, _ in COLUMNS:
            assert np.array_equal(getattr(a, col), getattr(b, col)), col
        assert a.comms == b.comms and a.meta == b.meta
        assert single.warnings == warnings
        ra = json.dumps(analyze(a), sort_keys=True, default=str)
        assert ra == json.dumps(analyze(b), sort_keys=True, default=str)
    assert RangedPartFile(files).load().raw.processes == parse_blktrace_raw(path).processes


def test_multi_file_trace_with_some_files_in_ranges(tmp_path):
    """Per-CPU files (one empty), ties in time across files: two files cut in ranges, the
    others whole; the chunked merge equals the single-task ingest."""
    t = _trace(50_000, seed=5)
    t.time_ns = (t.time_ns // 20_000) * 20_000 + 10_000_000
    paths = []
    for c in range(5):
        p = tmp_path / f"sdx.blktrace.{c}"
        rows = np.flatnonzero(t.cpu == c)
        p.write_bytes(encode_blktrace(t.take(rows), process_notes=c == 1) if len(rows) else b"")
        paths.append(p)
    names = [p.name for p in paths]
    single = ingest(paths, names=names)
    parts = {}
    for i, p in enumerate(paths[:4]):
        count = 1 if i % 2 else 4
        if count == 1:
            out = tmp_path / f"{i}.part"
            with open(out, "wb") as fh:
                write_part(parse_blktrace_part(p), fh)
            parts[p.name] = PartFile(out)
            continue
        files = []
        for k in range(count):
            out = tmp_path / f"{i}-{k}.part"
            with open(out, "wb") as fh:
                write_part(parse_range(p, p.name, k, count), fh)
            files.append(PartFile(out))
        parts[p.name] = RangedPartFile(files)
    stored = ingest_stored(paths, names=names, strict=False, parts=parts,
                           out=tmp_path / "store", rows=5000)
    assert stored is not None
    a, b = single.table, stored.store.to_table()
    for col, _ in COLUMNS:
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert a.comms == b.comms and a.meta == b.meta and single.warnings == stored.warnings
    assert json.dumps(analyze(a), sort_keys=True, default=str) == json.dumps(
        analyze(b), sort_keys=True, default=str)


def parse_blktrace_part(path: Path):
    from workers.traces.shards import parse_shard

    return parse_shard(path, path.name, manifest=None)


def test_damage_gaps_and_unknown_actions_report_as_the_whole_file(tmp_path):
    """Corrupt regions, relay drops (sequence gaps, one across a boundary), an unknown action
    and a per-CPU name with other cpus: the same warnings and diagnostics, in order."""
    t = _trace(30_000, seed=7)
    t = t.take(np.flatnonzero(np.arange(len(t)) % 5000 != 17))  # gaps (relay drops)
    data = bytearray(encode_blktrace(t))
    # garbage inside a record's header and a payload length pointing nowhere
    for at in (len(data) // 3 + 5, 2 * len(data) // 3 + 11):
        data[at:at + 40] = b"\xee" * 40
    # an unknown action code on one record
    pos = 0
    for _ in range(1000):
        pos += 48 + struct.unpack_from("<H", data, pos + 46)[0]
    act = struct.unpack_from("<I", data, pos + 28)[0]
    if not act & (1 << 26):
        struct.pack_into("<I", data, pos + 28, (act & ~0xFFFF) | 0x3F)
    path = tmp_path / "sdz.blktrace.0"
    path.write_bytes(bytes(data))
    whole = parse_blktrace_raw(path)
    kinds = [d["kind"] for d in whole.diagnostics]
    assert "corrupt_record" in kinds and "sequence_gap" in kinds
    assert any("unknown action" in w for w in whole.warnings)
    assert any("records of cpu" in w for w in whole.warnings)
    for count in (2, 5, 9, 31):
        _same_part(path, count)


def test_a_gap_across_a_boundary_is_reported(tmp_path):
    """A relay drop exactly where a range starts: no range sees it, the combination does."""
    t = realistic_table(20_000, seed=11, cpus=1, devices=1)
    data = encode_blktrace(t)
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos += 48 + struct.unpack_from("<H", data, pos + 46)[0]
    starts.append(len(data))
    # the dropped record: the one the middle of the shortened file falls on
    i = next(j for j in range(1, len(starts) - 1)
             if starts[j - 1] < (len(data) - (starts[j + 1] - starts[j])) // 2 <= starts[j])
    gap, prev = starts[i], starts[i - 1]
    cut = data[:gap] + data[starts[i + 1]:]  # record i dropped: the next one starts at gap
    path = tmp_path / "x.blktrace"
    path.write_bytes(cut)
    whole = parse_blktrace_raw(path)
    assert [(d["kind"], d["offset"]) for d in whole.diagnostics] == [("sequence_gap", gap)]
    size = len(cut)
    k, count = 1, 2
    assert prev < nominal(size, k, count) <= gap
    parts = [parse_range(path, path.name, j, count) for j in range(count)]
    assert parts[k].byte_range["start"] == gap
    assert sum(p.byte_range["gaps"][0] for p in parts) == 0
    _same_part(path, count)
    _same_part(path, 3)


def _message(text: bytes, time_ns: int) -> bytes:
    return _note(2, time_ns=time_ns, pid=1, dev=(8 << 20), cpu=0, payload=text,
                 big_endian=False)


def test_a_payload_quoting_the_magic_is_not_a_boundary(tmp_path):
    """A message note whose payload holds a record header (this file's magic and version):
    a header that does not chain is passed over; one crafted to chain into the next record
    makes the ranges disagree, which the combination refuses, and the file is parsed whole."""
    t = realistic_table(6000, seed=2, cpus=1, devices=1)
    body = encode_blktrace(t)
    half = len(body) // 2
    pos = 0
    while pos < half:
        pos += 48 + struct.unpack_from("<H", body, pos + 46)[0]
    t_mid = struct.unpack_from("<Q", body, pos + 8)[0]
    fake = struct.pack("<IIQQIIIIIHH", MAGIC | VERSION_V1, 9, t_mid, 0, 0, 1 << 16 | 1, 1,
                       8 << 20, 0, 0, 500)  # pdu_len 500: leads nowhere
    note = _message(b"x" * 300 + fake + b"y" * 40, t_mid)
    data = body[:pos] + note + body[pos:]
    path = tmp_path / "m.blktrace"
    path.write_bytes(data)
    size = len(data)
    # a nominal offset just before the fake header: the boundary is the next real record
    fake_at = pos + 48 + 300
    b = find_boundary(np.frombuffer(data, np.uint8), fake_at - 3, base=0, size=size,
                      big=False, version=VERSION_V1)
    assert b == pos + len(note)
    k, count = next((k, c) for c in range(2, 200) for k in range(1, c)
                    if pos + 48 < nominal(size, k, c) <= fake_at)
    assert parse_range(path, path.name, k, count).byte_range["start"] == pos + len(note)
    for c in (count, 2, 3, 64):
        _same_part(path, c)
    # a fake header whose length leads exactly to the record after the note: it chains
    tail = b"y" * 40
    fake = struct.pack("<IIQQIIIIIHH", MAGIC | VERSION_V1, 9, t_mid, 0, 0, 1 << 16 | 1, 1,
                       8 << 20, 0, 0, len(tail))
    note = _message(b"x" * 300 + fake + tail, t_mid)
    data = body[:pos] + note + body[pos:]
    path.write_bytes(data)
    fake_at = pos + 48 + 300
    whole = parse_blktrace_raw(path)
    k, cut = next((k, c) for c in range(2, 200) for k in range(1, c)
                  if pos + 48 < nominal(len(data), k, c) <= fake_at)
    parts = [parse_range(path, path.name, i, cut) for i in range(cut)]
    assert parts[k].byte_range["start"] == fake_at  # fooled
    with pytest.raises(NotCombinable, match="crosses its end boundary"):
        combine_parts(parts)
    assert _raw_json(parse_in_ranges(path, path.name, cut).raw) == _raw_json(whole)


def test_the_last_range_and_a_truncated_file(tmp_path):
    """The last range ends at the file's end; a file cut inside its last record fails in
    ranges with the whole file's error."""
    data = encode_blktrace(realistic_table(5000, seed=4))
    path = tmp_path / "t.blktrace"
    path.write_bytes(data[:-7])
    with pytest.raises(ParseError) as whole:
        parse_blktrace_raw(path, name=path.name)
    with pytest.raises(ParseError) as last:
        parse_range(path, path.name, 3, 4)
    assert (last.value.offset, str(last.value)) == (whole.value.offset, str(whole.value))
    with pytest.raises(ParseError) as viaranges:
        parse_in_ranges(path, path.name, 4)
    assert str(viaranges.value) == str(whole.value)
    path.write_bytes(data)
    last_part = parse_range(path, path.name, 3, 4)
    assert last_part.byte_range["stop"] == last_part.byte_range["end"] == len(data)


def test_a_range_fetched_in_a_window_equals_the_mapped_file(tmp_path):
    """Ranges read from a window of the file (a ranged GET), the window grown while a
    boundary lies past it, equal the ranges of the whole mapped file."""
    data = encode_blktrace(_trace(20_000, seed=9))
    path = tmp_path / "w.blktrace"
    path.write_bytes(data)
    fetched = []

    def fetch(offset: int, length: int, fh) -> None:
        fetched.append((offset, length))
        fh.write(data[offset:offset + length])

    count = 5
    for i in range(count):
        a = parse_range(path, path.name, i, count)
        b = parse_range_fetched(fetch, size=len(data), head=data[:4], index=i, count=count,
                                name=path.name, basename=path.name, slack=64)
        assert a.byte_range == b.byte_range
        assert _raw_json(a.raw) == _raw_json(b.raw)
        for col, _ in COLUMNS:
            assert np.array_equal(getattr(a.table, col), getattr(b.table, col)), col
    assert max(length for _, length in fetched) < len(data) // 2
    assert len(fetched) > count  # some windows were grown


def test_a_big_endian_file_in_ranges(tmp_path):
    """A trace written in the tracing host's big-endian order: same boundaries logic, same
    result."""
    path = tmp_path / "be.blktrace"
    path.write_bytes(encode_blktrace(_trace(15_000, seed=12), big_endian=True))
    assert parse_blktrace_raw(path).big_endian
    for count in (3, 17):
        _same_part(path, count)


def _v2(v1: bytes, order: str) -> bytes:
    """The records of a v1 stream in the 64-byte v2 layout (64-bit action), in byte order
    ``order`` ("<" or ">")."""
    out, pos = bytearray(), 0
    while pos < len(v1):
        (_m, seq, t, sector, nbytes, action, pid, dev, cpu, err,
         pdu) = struct.unpack_from("<IIQQIIIIIHH", v1, pos)
        body = v1[pos + 48:pos + 48 + pdu]  # event payloads are big-endian on every host
        out += struct.pack(order + "IIQQIIQIIHH12x", 0x65617408, seq, t, sector, nbytes, pid,
                           action, dev, cpu, err, pdu) + body
        pos += 48 + pdu
    return bytes(out)


def test_v2_records_of_a_big_endian_host(tmp_path):
    """v2's action is 64 bits: a big-endian host writes its low half (category and action
    bits, TC_NOTIFY among them) second. Pass 1 read the high half and counted every note as an
    event (then wrote past the note arrays); both byte orders now give the same table, and the
    same in ranges."""
    v1 = encode_blktrace(_trace(8000, seed=13))
    le, be = tmp_path / "le.blktrace", tmp_path / "be.blktrace"
    le.write_bytes(_v2(v1, "<"))
    be.write_bytes(_v2(v1, ">"))
    a, b = parse_blktrace_raw(le, name="x"), parse_blktrace_raw(be, name="x")
    assert (a.version, a.big_endian, b.big_endian) == (8, False, True)
    assert a.processes == b.processes and a.messages == b.messages and len(a.processes) > 0
    assert a.warnings == b.warnings and a.genesis == b.genesis
    for col, _ in COLUMNS:
        assert np.array_equal(getattr(a.table, col), getattr(b.table, col)), col
    for path in (le, be):
        _same_part(path, 5)
