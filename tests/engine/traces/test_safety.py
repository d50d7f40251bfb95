"""Corrupt, truncated and hostile binary inputs: one typed error with offset and reason."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from workers.errors import ParseError
from workers.events import ACT_QUEUE, RWBS_READ, EventTable, make_dev
from workers.traces import ingest, parse_file
from workers.traces.blktrace_bin import parse_blktrace_bytes
from workers.traces.writers import encode_blktrace


def _queue_table(n: int, *, seq: list[int] | None = None) -> EventTable:
    """n Q events on 8,0 cpu 0 with seq 1..n (or the given numbers)."""
    return EventTable({"time_ns": [1000 * (i + 1) for i in range(n)],
                       "seq": seq or list(range(1, n + 1)), "dev": [make_dev(8, 0)] * n,
                       "cpu": [0] * n, "pid": [7] * n, "action": [ACT_QUEUE] * n,
                       "rwbs": [RWBS_READ] * n, "sector": [8 * i for i in range(n)],
                       "nr_sectors": [8] * n})


def _records(n: int, **kw: object) -> bytes:
    return encode_blktrace(_queue_table(n, **kw), process_notes=False)  # type: ignore[arg-type]


def test_payload_length_past_the_end(tmp_path: Path) -> None:
    """A pdu_len reaching beyond the file names the record's offset and the length."""
    data = bytearray(_records(3))
    struct.pack_into("<H", data, 96 + 46, 4000)  # third record claims a 4000-byte payload
    p = tmp_path / "x.blktrace.0"
    p.write_bytes(bytes(data))
    with pytest.raises(ParseError) as ei:
        parse_file(p, name="sda.blktrace.0")
    assert ei.value.offset == 96
    assert ei.value.path == "sda.blktrace.0"
    assert "payload length 4000 runs past the end of the file (144 bytes)" in ei.value.reason


def test_bad_magic_in_the_middle() -> None:
    """Garbage after two good records is reported at its offset with the magic it found
    (strict mode; by default it is skipped and reported, see test_corruption.py)."""
    data = bytearray(_records(4))
    data[96:100] = b"\xde\xad\xbe\xef"
    with pytest.raises(ParseError) as ei:
        parse_blktrace_bytes(bytes(data), name="t", strict=True)
    assert ei.value.offset == 96
    assert "bad magic 0xefbeadde" in ei.value.reason


def test_truncated_header() -> None:
    """A capture cut inside a record header names the offset and how many bytes are left."""
    data = _records(2)[:48 + 20]
    with pytest.raises(ParseError) as ei:
        parse_blktrace_bytes(data, name="t")
    assert ei.value.offset == 48
    assert "truncated header: 20 bytes left" in ei.value.reason


def test_unsupported_version() -> None:
    """Version bytes other than 0x07/0x08 are refused like blkparse does."""
    data = bytearray(_records(1))
    data[0] = 0x06
    with pytest.raises(ParseError, match="unsupported trace version 0x06"):
        parse_blktrace_bytes(bytes(data))


def test_version_change_mid_file() -> None:
    """A v2 magic inside a v1 stream is an error at that record."""
    data = bytearray(_records(3))
    data[48] = 0x08
    with pytest.raises(ParseError) as ei:
        parse_blktrace_bytes(bytes(data))
    assert ei.value.offset == 48 and "version changes" in ei.value.reason


def test_sequence_gap_is_a_diagnostic_with_offset(tmp_path: Path) -> None:
    """Sequences 1, 2, 5, 6 parse (blkparse says nothing) but the gap is reported at the
    offset of the record after it."""
    p = tmp_path / "sda.blktrace.0"
    p.write_bytes(_records(4, seq=[1, 2, 5, 6]))
    result = ingest([p], names=["sda.blktrace.0"])
    assert len(result.table) == 4
    gaps = [d for d in result.table.meta["diagnostics"] if d["kind"] == "sequence_gap"]
    assert gaps == [{"file": "sda.blktrace.0", "offset": 96, "kind": "sequence_gap", "gaps": 1,
                     "reason": gaps[0]["reason"]}]
    assert "(2 -> 5)" in gaps[0]["reason"]
    assert any("byte 96: sequence gap" in w for w in result.warnings)


def test_sequence_wrap_is_not_a_gap() -> None:
    """Wrapping from 2**32-1 to 0 is legal."""
    raw = parse_blktrace_bytes(_records(3, seq=[2**32 - 2, 2**32 - 1, 0]))
    assert raw.diagnostics == []


def test_v2_records() -> None:
    """64-byte v2 records with a 64-bit action decode (write-zeroes category bit)."""
    def rec2(seq: int, t: int, action: int, pdu: bytes = b"") -> bytes:
        return struct.pack("<IIQQIIQIIHH12x", 0x65617408, seq, t, 2048, 4096, 9, action,
                           make_dev(259, 0), 1, 0, len(pdu)) + pdu

    q_wz = 0x00100001 | (1 << 38)
    split = 13 | (1 << 17)
    data = rec2(1, 100, q_wz) + rec2(2, 200, split, struct.pack(">Q", 2052))
    raw = parse_blktrace_bytes(data)
    t = raw.table
    assert raw.version == 8
    assert t.action.tolist() == [ACT_QUEUE, 13]
    assert t.nr_sectors.tolist() == [8, 8] and t.aux.tolist() == [0, 2052]
    from workers.events import RWBS_WRITE, RWBS_WRITE_ZEROES

    assert int(t.rwbs[0]) & RWBS_WRITE_ZEROES and int(t.rwbs[1]) & RWBS_WRITE


def test_empty_and_tiny_files(tmp_path: Path) -> None:
    """A 3-byte file is too short for a header; an empty per-CPU file is skipped."""
    with pytest.raises(ParseError, match="truncated header"):
        parse_blktrace_bytes(b"\x07ta")
    good = tmp_path / "sda.blktrace.0"
    good.write_bytes(_records(2))
    empty = tmp_path / "sda.blktrace.1"
    empty.write_bytes(b"")
    result = ingest([good, empty])
    assert len(result.table) == 2
    assert {Path(f.name).name: f.format for f in result.files} == {"sda.blktrace.0": "blktrace",
                                                                    "sda.blktrace.1": "empty"}


def test_merged_stream_under_per_cpu_name(tmp_path: Path, data_dir: Path) -> None:
    """A merged stream named like one CPU's file (the takeoverjp sample) is read whole, with
    one warning explaining what blkparse -i NAME would complain about."""
    import lzma

    p = tmp_path / "sample.blktrace.0"
    p.write_bytes(lzma.decompress((data_dir / "takeoverjp.blktrace.xz").read_bytes()))
    result = ingest([p], names=["sample.blktrace.0"])
    assert len(result.table) == 6741
    cpu_warnings = [w for w in result.warnings if "in the file for cpu 0" in w]
    assert len(cpu_warnings) == 1 and "records of cpu 1" in cpu_warnings[0]
