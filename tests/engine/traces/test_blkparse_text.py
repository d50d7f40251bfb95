"""blkparse default text -> EventTable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workers.errors import ParseError
from workers.events import (
    ACT_GETRQ,
    ACT_MESSAGE,
    ACTION_CODES,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    make_dev,
    rwbs_to_text,
)
from workers.traces import ingest, parse_file

SEED000_BEFORE = """\
> 2) blktrace G stage:
> 8,0 0 486445 11.357392936 843 G R 14071424 + 128 [dd]
> 8,0 0 486451 11.357466360 843 G R 14071168 + 128 [dd]
> 8,0 0 486454 11.357515868 843 G R 14071296 + 128 [dd]
> 8,0 0 486468 11.357968099 843 G R 14072192 + 128 [dd]
> 8,0 0 486474 11.358031320 843 G R 14071936 + 128 [dd]
> 8,0 0 486480 11.358096298 843 G R 14071552 + 128 [dd]
> 8,0 0 486490 11.358303858 843 G R 14071808 + 128 [dd]
> 3) io seek for sdx
"""

SEED000_AFTER = """\
8,0 0 206296 5.354894072 664 G R 7156992 + 128 [dd]
8,0 0 206305 5.355018179 664 G R 7157248 + 128 [dd]
8,0 0 206316 5.355204438 664 G R 7157504 + 128 [dd]
8,0 0 206319 5.355241048 664 G R 7157760 + 128 [dd]
8,0 0 206333 5.355500923 664 G R 7158016 + 128 [dd]
8,0 0 206344 5.355837806 664 G R 7158272 + 128 [dd]
8,0 0 206353 5.355960395 664 G R 7158528 + 128 [dd]
8,0 0 206357 5.356020772 664 G R 7158784 + 128 [dd]
"""


def _write(tmp_path: Path, text: str, name: str = "t.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_seed000_g_stage_before(tmp_path: Path) -> None:
    """Seed 000's 7 mail-quoted G lines (before the patch) parse to their sectors, pid, times."""
    t = parse_file(_write(tmp_path, SEED000_BEFORE))
    assert len(t) == 7
    assert t.sector.tolist() == [14071424, 14071168, 14071296, 14072192, 14071936, 14071552,
                                 14071808]
    assert set(t.nr_sectors.tolist()) == {128}
    assert set(t.pid.tolist()) == {843}
    assert t.seq.tolist()[:2] == [486445, 486451]
    assert t.time_ns[0] == 11_357_392_936 and t.time_ns[-1] == 11_358_303_858
    assert (t.action == ACT_GETRQ).all()
    assert (t.rwbs == RWBS_READ).all()
    assert set(t.dev.tolist()) == {make_dev(8, 0)}
    assert {t.comm_of(i) for i in range(len(t))} == {"dd"}
    # 128 sectors = 64 KiB; the out-of-order sequence the seed complains about
    assert np.diff(t.sector.astype(np.int64)).tolist()[:2] == [-256, 128]


def test_seed000_g_stage_after(tmp_path: Path) -> None:
    """Seed 000's 8 G lines after the patch: strictly sequential 64 KiB reads."""
    t = parse_file(_write(tmp_path, SEED000_AFTER))
    assert len(t) == 8
    assert t.sector[0] == 7156992
    assert (np.diff(t.sector.astype(np.int64)) == 256).all()
    assert set(t.pid.tolist()) == {664}
    assert t.time_ns[-1] == 5_356_020_772


def test_demo_all_actions(data_dir: Path) -> None:
    """The synthetic demo output (every action type) parses with summaries skipped."""
    t = parse_file(data_dir / "demo.blkparse.txt")
    assert len(t) == 29  # "Events (demo): 29 entries"
    counts = t.action_counts()
    assert counts == {"Q": 7, "M": 1, "F": 1, "G": 3, "R": 1, "D": 4, "C": 3, "P": 1, "U": 1,
                      "UT": 1, "I": 3, "X": 1, "A": 1, "m": 1}
    a = int(np.flatnonzero(t.action == ACTION_CODES["A"])[0])
    assert (t.sector[a], t.nr_sectors[a], t.aux[a], t.aux2[a]) == (2048, 8, 0, make_dev(8, 1))
    x = int(np.flatnonzero(t.action == ACTION_CODES["X"])[0])
    assert (t.sector[x], t.aux[x], t.comm_of(x)) == (100000, 100256, "dd")
    u = int(np.flatnonzero(t.action == ACTION_CODES["UT"])[0])
    assert (t.aux[u], t.comm_of(u)) == (3, "(null)")
    c_err = np.flatnonzero((t.action == ACTION_CODES["C"]) & (t.error != 0))
    assert t.error[c_err].tolist() == [5] and t.sector[c_err[0]] == 100256
    m = int(np.flatnonzero(t.action == ACT_MESSAGE)[0])
    assert t.comm_of(m) == "demo start"
    fws = int(np.flatnonzero(t.rwbs == rwbs_from("FWS"))[0])
    assert (t.sector[fws], t.nr_sectors[fws]) == (0, 0)
    assert rwbs_to_text(int(t.rwbs[fws])) == "FWS"


def rwbs_from(text: str) -> int:
    """Helper: RWBS bits of a blkparse string."""
    from workers.events import rwbs_from_text

    return rwbs_from_text(text)


def test_summary_blocks_not_events(tmp_path: Path) -> None:
    """CPU/Total summary blocks and trailer lines never become events."""
    text = (
        "  8,0    0        1     0.000000000  42  Q  WS 8 + 8 [fio]\n"
        "CPU0 (sda):\n"
        " Reads Queued:           0,        0KiB\t Writes Queued:          32,      140KiB\n"
        " Read depth:             0        \t Write depth:             6\n"
        "Total (sda):\n"
        " IO unplugs:             3        \t Timer unplugs:           0\n"
        "Throughput (R/W): 0KiB/s / 28KiB/s\n"
        "Events (sda): 799 entries\n"
        "Skips: 0 forward (0 -   0.0%)\n"
        "Input file sda.blktrace.0 added\n"
    )
    t = parse_file(_write(tmp_path, text))
    assert len(t) == 1
    assert int(t.rwbs[0]) == RWBS_WRITE | RWBS_SYNC
    assert t.meta["skipped_lines"] == 9


def test_multi_device_and_elapsed(tmp_path: Path) -> None:
    """Several devices interleave; -t elapsed fields and zero-size forms are accepted."""
    text = (
        "  9,0    0        1     0.000000000  1316  Q   R 0 + 4096 [dd]\n"
        "254,112  1        5     0.000100000  1316  C   R 4096 + 1024 (   12345) [0]\n"
        "  8,0    0        7     0.000200000     0  C   N [0]\n"
        "  8,0    0        8     0.000300000  99  D   R 36 (12 01 00 00) [sg_inq]\n"
    )
    t = parse_file(_write(tmp_path, text))
    assert [int(d) for d in t.dev] == [make_dev(9, 0), make_dev(254, 112), make_dev(8, 0),
                                       make_dev(8, 0)]
    assert t.cpu.tolist() == [0, 1, 0, 0]
    assert t.nr_sectors.tolist() == [4096, 1024, 0, 0]
    assert t.comm_of(3) == "sg_inq"


@pytest.mark.parametrize(("line", "reason"), [
    ("  8,0    0        1     0.000000000  42  Q  WS 8 + [fio]", "bad Q tail"),
    ("  8,0    0        1     0.000000000  42  Z  WS 8 + 8 [fio]", "unknown action"),
    ("  8,0    0        1     0.000000000  42  Q  WQ 8 + 8 [fio]", "unknown RWBS letter"),
    ("  8,0    0        1     0.000000000  42  C   W 8 + 8 [x]", "bad error value"),
    ("  8,0    0        1     0.000000000  42  X   W 8 + 8 [x]", "bad split tail"),
])
def test_malformed_event_line_reports_line(tmp_path: Path, line: str, reason: str) -> None:
    """An event-shaped line that does not parse is a ParseError with its line number."""
    p = _write(tmp_path, "header prose\n" + line + "\n", name="bad.txt")
    with pytest.raises(ParseError) as ei:
        parse_file(p, name="user/bad.txt", fmt="blkparse")
    assert ei.value.line == 2
    assert ei.value.path == "user/bad.txt"
    assert reason in ei.value.reason


def test_overlong_line_is_parse_error(tmp_path: Path) -> None:
    """A single huge line is refused with its line number instead of being buffered."""
    p = tmp_path / "huge.txt"
    p.write_bytes(b"  8,0    0        1     0.000000000  42  Q  WS 8 + 8 [fio]\n" + b"x" * 200_000)
    with pytest.raises(ParseError) as ei:
        parse_file(p, fmt="blkparse")
    assert ei.value.line == 2 and "longer than" in ei.value.reason


def test_ingest_reports_file(tmp_path: Path) -> None:
    """ingest() returns the table, a FileReport with the user-facing name, no manifest."""
    p = _write(tmp_path, SEED000_AFTER, name="upload-123.tmp")
    result = ingest([p], names=["after.txt"])
    assert len(result.table) == 8
    assert result.files[0].name == "after.txt"
    assert result.files[0].format == "blkparse"
    assert result.files[0].events == 8
    assert result.manifest is None


def _same(a: object, b: object) -> None:
    """Two tables hold the same columns and comm strings."""
    from workers.events import COLUMNS, EventTable

    assert isinstance(a, EventTable) and isinstance(b, EventTable)
    for name, _ in COLUMNS:
        if name == "comm":
            assert [a.comms[i] for i in a.comm] == [b.comms[i] for i in b.comm]
        else:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.meta["skipped_lines"] == b.meta["skipped_lines"]


@pytest.mark.parametrize("golden", ["demo.blkparse.txt", "all_actions.blkparse.txt",
                                    "takeoverjp.blkparse.txt.xz", "k61_vda.blkparse.txt.xz"])
def test_fast_scanner_equals_exact_parser(tmp_path: Path, data_dir: Path, golden: str) -> None:
    """The numba scanner and the line parser give identical tables on blkparse output."""
    import lzma

    from workers.traces._textio import open_lines
    from workers.traces.blkparse_text import _parse_fast, parse_lines

    raw = (data_dir / golden).read_bytes()
    p = tmp_path / "g.txt"
    p.write_bytes(lzma.decompress(raw) if golden.endswith(".xz") else raw)
    fast = _parse_fast(p)
    assert fast is not None
    _same(fast, parse_lines(open_lines(p, "g"), "g"))


@pytest.mark.parametrize("line", [
    "> 8,0 0 486445 11.357392936 843 G R 14071424 + 128 [dd]",  # mail quote
    "  8,0    0        8     0.000300000  99  D   R 36 (12 01 00 00) [sg_inq]",  # passthrough
    "  8,0    0        1     0.000000000  42  Q  WS 8 + [fio]",  # malformed
])
def test_fast_scanner_defers_to_exact_parser(tmp_path: Path, line: str) -> None:
    """Unusual lines make the scanner give up; parse_file still returns the exact result
    (or the exact error with its line number) for a large file."""
    from workers.traces.blkparse_text import FAST_PATH_MIN_BYTES, _parse_fast

    good = "  8,0    0        1     0.000000001  42  Q  WS 8 + 8 [fio]\n"
    body = good * (FAST_PATH_MIN_BYTES // len(good) + 10)
    p = tmp_path / "big.txt"
    p.write_text(body + line + "\n")
    assert _parse_fast(p) is None
    if "+ [fio]" in line:
        with pytest.raises(ParseError) as ei:
            parse_file(p, fmt="blkparse")
        assert ei.value.line == body.count("\n") + 1
    else:
        t = parse_file(p, fmt="blkparse")
        assert len(t) == body.count("\n") + 1
