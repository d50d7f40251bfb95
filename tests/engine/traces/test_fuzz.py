"""Property tests: random and mutated inputs give a valid table or a ParseError, nothing else.

Every parser has its own test (parametrized by format), so an example count is per parser.
CI runs small counts; ``make fuzz`` sets ``FUZZ_EXAMPLES`` (default 100000) and every test
then draws that many examples per parser, without the per-test time limit.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.errors import ParseError, UnknownFormatError, UnpackError
from workers.events import COLUMNS, EventTable
from workers.traces import Summary, ingest, parse_file
from workers.traces.blktrace_bin import merge_raw, parse_blktrace_bytes
from workers.traces.synth import all_actions_table
from workers.traces.writers import encode_blktrace

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
# No per-example deadline: the first example pays numba's one-time compile (tens of seconds on a
# fresh checkout) and the machine is shared. "Never a hang" is the module's pytest timeout.
#: ``make fuzz``: examples per parser (0 = the CI counts below).
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0") or 0)


def examples(ci: int) -> int:
    return FUZZ_EXAMPLES or ci


SETTINGS = settings(max_examples=examples(150), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
#: per-format tests: CI draws fewer per format (about the old shared count in total)
PER_FORMAT = settings(max_examples=examples(20), deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.timeout(0 if FUZZ_EXAMPLES else 600)

BINARY_SEED = encode_blktrace(all_actions_table())


def _to_v2(v1: bytes) -> bytes:
    """The same records in the 64-byte v2 layout (version 0x08, 64-bit action), for fuzzing
    the v2 decoder from a valid stream of every action, notes included."""
    out = bytearray()
    pos = 0
    while pos < len(v1):
        (_magic, seq, t, sector, nbytes, action, pid, dev, cpu, err,
         pdu_len) = struct.unpack_from("<IIQQIIIIIHH", v1, pos)
        out += struct.pack("<IIQQIIQIIHH12x", 0x65617408, seq, t, sector, nbytes, pid, action,
                           dev, cpu, err, pdu_len)
        out += v1[pos + 48:pos + 48 + pdu_len]
        pos += 48 + pdu_len
    return bytes(out)


BINARY_SEED_V2 = _to_v2(BINARY_SEED)
TEXT_SEEDS = {
    "blkparse": (DATA / "demo.blkparse.txt").read_bytes(),
    "ftrace": b"".join((DATA / "ftrace_linux6.18.txt").read_bytes().splitlines(True)[:60]),
    "bpftrace": b"117828811               dd 1475 0: blk_mq_start_request ublkb0 bio 0-524288\n"
                b"117828823               dd 1475 0: blk_mq_start_request ublkb0 bio 400-4096\n",
    "biosnoop": b"".join((DATA / "biosnoop_example.txt").read_bytes().splitlines(True)[:30]),
    "iostat": (DATA / "iostat-x_sysstat12.6.1.txt").read_bytes(),
    "iostat-json": (DATA / "iostat-x-json_sysstat12.6.1.json").read_bytes(),
    "fio-json": (DATA / "fio-3.33_randrw.json").read_bytes(),
    "manifest": (DATA / "k61_raid5_blkreview.toml").read_bytes()[:600],
    "sysfs-queue": (DATA / "k61_raid5_queue_limits.txt").read_bytes()[:800],
    "mdstat": (DATA / "k61_raid5_mdstat").read_bytes(),
}


def _warm_up() -> None:
    """Compile the numba kernels once so example timings measure parsing, not compiling."""
    from workers.traces.blkparse_text import _parse_fast
    from workers.traces.blktrace_bin import _event_offset

    merge_raw([parse_blktrace_bytes(BINARY_SEED)])
    _event_offset(np.frombuffer(BINARY_SEED, dtype=np.uint8), False, 7, 3)
    _parse_fast(DATA / "demo.blkparse.txt")


_warm_up()


MANIFEST_FORMATS = ("manifest", "sysfs-queue", "mdstat")


def _manifest_then_bpftrace(path: Path, fmt: str) -> EventTable:
    """Read a manifest-like file, then use it the way ingest does: to map the bpftrace
    seed's disk name to a device, and to give device infos; the result must be JSON."""
    import json

    from workers.traces.bpf import parse_bpftrace
    from workers.traces.manifest import build_manifest

    m = build_manifest([(path, "m", fmt)])
    json.dumps(m.to_json(), allow_nan=False)
    bp = path.with_name("bp.txt")
    bp.write_bytes(TEXT_SEEDS["bpftrace"])
    table = parse_bpftrace(bp, name="bp", manifest=m)
    m.device_infos([int(d) for d in np.unique(table.dev)], table.devices)
    return table


def check_table(table: EventTable) -> None:
    """Aligned columns of the declared dtypes, comm indices inside the string table."""
    n = len(table)
    for name, dtype in COLUMNS:
        col = getattr(table, name)
        assert col.dtype == np.dtype(dtype) and len(col) == n
    if n:
        assert int(table.comm.max()) < len(table.comms)


#: Tokens that break number handling: overflow of int64/uint64/dev_t, signs, non-finite floats.
NUMBER_TOKENS = [b"99999999999999999999999", b"18446744073709551616", b"9223372036854775808",
                 b"-1", b"-", b"nan", b"NaN", b"inf", b"Infinity", b"1e400", b"4096", b"0x",
                 b"1048576", b"65536", b"4294967296", b"9" * 400]


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """Flip, overwrite, insert, delete or truncate bytes of a valid input, or splice in a
    number that does not fit its field."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "number"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = draw(st.integers(0, 255))
        elif op == "number":
            data[i:i + draw(st.integers(0, 3))] = draw(st.sampled_from(NUMBER_TOKENS))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 64))]
        else:
            del data[i:]
    return bytes(data)


#: Findings about a whole file, which have no line to point at.
WHOLE_FILE_REASONS = ("no iostat -x device rows", "not iostat JSON", "iostat JSON holds no",
                      "unexpected fio JSON layout", "not fio JSON output", "JSON file too large",
                      "manifest file too large", "invalid JSON: nested too deeply")


def check_error(exc: ParseError) -> None:
    """The guarantee: the file, a reason, and a line or byte offset unless the reason is about
    the whole file (or it is an unknown format / unsafe archive, which name the file only)."""
    assert exc.reason and exc.path
    if isinstance(exc, (UnknownFormatError, UnpackError)):
        return
    if not exc.reason.startswith(WHOLE_FILE_REASONS):
        assert exc.line is not None or exc.offset is not None, exc.message


def _run_file(data: bytes, fn: Callable[[Path], Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "input"
        p.write_bytes(data)
        try:
            out = fn(p)
        except ParseError as exc:
            check_error(exc)
            return
        if isinstance(out, EventTable):
            check_table(out)
        elif isinstance(out, Summary):
            assert isinstance(out.rows, list)
        else:
            check_table(out.table)


@SETTINGS
@given(st.sampled_from([b"\x07tae", b"\x08tae", b"eat\x07", b"eat\x08"]),
       st.binary(max_size=2048))
def test_binary_random_bytes(magic: bytes, data: bytes) -> None:
    """Random bytes after a v1/v2 magic of either byte order: table or ParseError."""
    try:
        check_table(merge_raw([parse_blktrace_bytes(magic + data)]))
    except ParseError as exc:
        assert exc.offset is not None or "magic" in exc.reason


@pytest.mark.parametrize("seed", [BINARY_SEED, BINARY_SEED_V2], ids=["v1", "v2"])
@SETTINGS
@given(st.data())
def test_binary_mutated(seed: bytes, data_: st.DataObject) -> None:
    """Mutations of a valid every-action stream (v1 or v2): table or ParseError with an offset."""
    data = data_.draw(mutated(seed))
    try:
        check_table(merge_raw([parse_blktrace_bytes(data)]))
    except ParseError as exc:
        assert exc.offset is not None


def test_v2_seed_decodes_like_v1() -> None:
    """The v2 fuzz seed is valid: same events as its v1 original, version 8."""
    v1 = merge_raw([parse_blktrace_bytes(BINARY_SEED)])
    raw2 = parse_blktrace_bytes(BINARY_SEED_V2)
    v2 = merge_raw([raw2])
    assert raw2.version == 8 and len(v2) == len(v1) > 20
    for name in ("time_ns", "action", "rwbs", "sector", "nr_sectors", "pid", "dev", "aux"):
        np.testing.assert_array_equal(getattr(v2, name), getattr(v1, name))


@pytest.mark.parametrize("fmt", sorted(TEXT_SEEDS))
@PER_FORMAT
@given(st.data())
def test_text_formats_mutated(fmt: str, data: st.DataObject) -> None:
    """Mutations of every text format, parsed as that format: result or ParseError."""
    blob = data.draw(mutated(TEXT_SEEDS[fmt]))
    if fmt in MANIFEST_FORMATS:
        _run_file(blob, lambda p: _manifest_then_bpftrace(p, fmt))
    else:
        _run_file(blob, lambda p: parse_file(p, name="input", fmt=fmt))


@SETTINGS
@given(st.binary(max_size=1024))
def test_text_formats_random(data: bytes) -> None:
    """Random bytes through detection and ingest: result or ParseError."""
    _run_file(data, lambda p: ingest([p], names=["input"]))


@pytest.mark.parametrize("fmt", sorted(TEXT_SEEDS))
@PER_FORMAT
@given(st.text(max_size=300))
def test_text_lines_random(fmt: str, text: str) -> None:
    """Random unicode text parsed as each text format: result or ParseError."""
    blob = text.encode("utf-8", errors="replace")
    if fmt in MANIFEST_FORMATS:
        _run_file(blob, lambda p: _manifest_then_bpftrace(p, fmt))
    else:
        _run_file(blob, lambda p: parse_file(p, name="input", fmt=fmt))


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
@settings(max_examples=examples(20), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_archives_mutated(kind: str, data: st.DataObject) -> None:
    """Mutated archives holding a valid trace: result or a ParseError/UnpackError."""
    import io
    import tarfile
    import zipfile

    buf = io.BytesIO()
    payload = TEXT_SEEDS["blkparse"]
    if kind == "zip":
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("t/demo.txt", payload)
    else:
        with tarfile.open(fileobj=buf, mode="w:gz" if kind == "tar.gz" else "w") as tf:
            info = tarfile.TarInfo("t/demo.txt")
            info.size = len(payload)
            tf.addfile(info, io.BytesIO(payload))
    blob = data.draw(mutated(buf.getvalue()))
    _run_file(blob, lambda p: ingest([p], names=[f"b.{kind}"]))


@SETTINGS
@given(mutated(TEXT_SEEDS["blkparse"] + (DATA / "all_actions.blkparse.txt").read_bytes()))
def test_fast_blkparse_scanner_mutated(data: bytes) -> None:
    """The numba text scanner on mutated blkparse output: a valid table or a refusal (None),
    and when it accepts, the exact parser agrees."""
    from workers.traces._textio import open_lines
    from workers.traces.blkparse_text import _parse_fast, parse_lines

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "t.txt"
        p.write_bytes(data)
        fast = _parse_fast(p)
        if fast is None:
            return
        check_table(fast)
        exact = parse_lines(open_lines(p, "t"), "t")
        for name, _ in COLUMNS:
            if name != "comm":
                np.testing.assert_array_equal(getattr(fast, name), getattr(exact, name))
        assert [fast.comms[i] for i in fast.comm] == [exact.comms[i] for i in exact.comm]


def test_fast_blkparse_scanner_treats_stray_cr_as_space(tmp_path: Path) -> None:
    """A CR at the start of an event line (hypothesis found it) is whitespace to both parsers:
    the numba scanner must not skip the line as prose while the exact parser reads it."""
    from workers.traces._textio import open_lines
    from workers.traces.blkparse_text import _parse_fast, parse_lines

    src = TEXT_SEEDS["blkparse"]
    p = tmp_path / "t.txt"
    p.write_bytes(b"\r" + src[1:])
    fast = _parse_fast(p)
    exact = parse_lines(open_lines(p, "t"), "t")
    assert fast is not None and len(fast) == len(exact) == 29
    np.testing.assert_array_equal(fast.time_ns, exact.time_ns)


@pytest.mark.parametrize(("old", "new", "line", "reason"), [
    (b"<- (8,1) 0", b"<- (8,1)!0", 2, "remap"),
    (b"0.000033000   777  G", b"0.000033000   7G", 16, "malformed"),
])
def test_fast_blkparse_scanner_defers_what_the_exact_parser_refuses(
        tmp_path: Path, old: bytes, new: bytes, line: int, reason: str) -> None:
    """Lines hypothesis found the numba scanner reading while the exact parser refuses them
    (a remap tail ``(8,1)!0``, a pid glued to its action ``7G``): the scanner defers, and the
    exact parser reports the line."""
    from workers.traces.blkparse_text import _parse_fast, parse_blkparse_text

    src = TEXT_SEEDS["blkparse"]
    assert src.count(old) == 1
    p = tmp_path / "t.txt"
    p.write_bytes(src.replace(old, new))
    assert _parse_fast(p) is None
    with pytest.raises(ParseError) as ei:
        parse_blkparse_text(p, name="t.txt")
    assert ei.value.line == line and reason in ei.value.reason
