"""Binary blktrace parsing equals what blkparse prints, field by field.

Golden files in tests/data/traces/ hold blkparse 1.2.0's output, so the comparison runs where
blkparse is missing; tests marked ``blkparse`` regenerate that output with the real binary.
"""

from __future__ import annotations

import io
import lzma
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from workers.events import (
    ACT_BACKMERGE,
    ACT_BOUNCE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_SLEEPRQ,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    EventTable,
)
from workers.traces import ingest, parse_file
from workers.traces.blkparse_text import parse_blkparse_text
from workers.traces.blktrace_bin import merge_raw, parse_blktrace_bytes
from workers.traces.synth import all_actions_table
from workers.traces.writers import encode_blktrace, write_blkparse

BLKPARSE = shutil.which("blkparse")
needs_blkparse = pytest.mark.skipif(BLKPARSE is None, reason="blkparse not installed")

# actions whose text omits the sector when the size is 0 ("[comm]" only)
_NO_SECTOR_WHEN_EMPTY = [ACT_QUEUE, ACT_INSERT, ACT_ISSUE, ACT_BOUNCE, ACT_GETRQ, ACT_SLEEPRQ,
                         ACT_BACKMERGE, ACT_FRONTMERGE, ACT_PLUG, ACT_UNPLUG_IO,
                         ACT_UNPLUG_TIMER]


def event_lines(text: str) -> list[str]:
    """blkparse output without its summary and "Input file" trailer lines."""
    from workers.traces.blkparse_text import EVENT_START_RE

    return [ln for ln in text.splitlines() if EVENT_START_RE.match(ln)]


def render(table: EventTable) -> str:
    """Our table in blkparse's layout."""
    out = io.StringIO()
    write_blkparse(table, out)
    return out.getvalue()


def assert_fields_equal(ours: EventTable, golden: EventTable) -> None:
    """Compare every field blkparse prints: time, cpu, seq, pid, action, RWBS, sector, size,
    comm or error, and the split/remap/unplug numbers."""
    from workers.events import ACTION_LETTERS

    printed = np.isin(ours.action, list(ACTION_LETTERS))
    ours = ours.take(np.flatnonzero(printed & (ours.action < 16) | (ours.action == 64)))
    assert len(ours) == len(golden)
    for col in ("dev", "cpu", "seq", "time_ns", "pid", "action", "rwbs", "aux", "aux2",
                "error"):
        np.testing.assert_array_equal(getattr(ours, col), getattr(golden, col), err_msg=col)
    sized = ours.action != 13  # X prints "sector / new_sector", no size
    np.testing.assert_array_equal(ours.nr_sectors[sized], golden.nr_sectors[sized])
    shown = ~(np.isin(ours.action, _NO_SECTOR_WHEN_EMPTY) & (ours.nr_sectors == 0))
    shown &= ours.action != 64
    np.testing.assert_array_equal(ours.sector[shown], golden.sector[shown], err_msg="sector")
    has_comm = ~np.isin(ours.action, [6, 8, 15])  # R and C print the error, A neither
    ours_comm = [ours.comms[i] for i in ours.comm[has_comm]]
    golden_comm = [golden.comms[i] for i in golden.comm[has_comm]]
    assert ours_comm == golden_comm


def _golden_table(tmp_path: Path, text: str) -> EventTable:
    p = tmp_path / "golden.txt"
    p.write_text(text)
    return parse_blkparse_text(p)


def _xz(data_dir: Path, name: str, dest: Path) -> Path:
    dest.write_bytes(lzma.decompress((data_dir / name).read_bytes()))
    return dest


@pytest.mark.parametrize("big_endian", [False, True])
def test_all_actions_stream_matches_golden(tmp_path: Path, data_dir: Path,
                                           big_endian: bool) -> None:
    """Every action type, one merged stream, both byte orders: our parse == blkparse text."""
    data = encode_blktrace(all_actions_table(), big_endian=big_endian)
    ours = merge_raw([parse_blktrace_bytes(data, name="all.bin")])
    golden_text = (data_dir / "all_actions.blkparse.txt").read_text()
    assert render(ours).splitlines() == event_lines(golden_text)
    assert_fields_equal(ours, _golden_table(tmp_path, golden_text))


@pytest.mark.parametrize("big_endian", [False, True])
def test_all_actions_per_cpu_files_match_golden(tmp_path: Path, data_dir: Path,
                                                big_endian: bool) -> None:
    """The same events split into per-CPU files are merged back by time like blkparse does."""
    table = all_actions_table()
    paths = []
    for cpu in np.unique(table.cpu).tolist():
        p = tmp_path / f"all.blktrace.{cpu}"
        p.write_bytes(encode_blktrace(table.take(table.cpu == cpu), big_endian=big_endian))
        paths.append(p)
    ours = ingest(list(reversed(paths))).table
    golden_text = (data_dir / "all_actions.blkparse.txt").read_text()
    assert render(ours).splitlines() == event_lines(golden_text)


@pytest.mark.blkparse
@needs_blkparse
@pytest.mark.parametrize("big_endian", [False, True])
def test_all_actions_against_blkparse_binary(tmp_path: Path, data_dir: Path,
                                             big_endian: bool) -> None:
    """Debian's blkparse prints the generated file exactly as the golden file says."""
    data = encode_blktrace(all_actions_table(), big_endian=big_endian)
    out = subprocess.run([BLKPARSE, "-q", "-i", "-"], input=data, capture_output=True,
                         check=True).stdout.decode()
    assert event_lines(out) == event_lines((data_dir / "all_actions.blkparse.txt").read_text())
    ours = merge_raw([parse_blktrace_bytes(data)])
    assert_fields_equal(ours, _golden_table(tmp_path, out))


@pytest.mark.blkparse
@needs_blkparse
def test_per_cpu_files_against_blkparse_binary(tmp_path: Path) -> None:
    """blkparse -i NAME over per-CPU files agrees with ingest() of the same files."""
    table = all_actions_table()
    paths = []
    for cpu in np.unique(table.cpu).tolist():
        p = tmp_path / f"pc.blktrace.{cpu}"
        p.write_bytes(encode_blktrace(table.take(table.cpu == cpu)))
        paths.append(p)
    out = subprocess.run([BLKPARSE, "-q", "-i", "pc"], cwd=tmp_path, capture_output=True,
                         check=True).stdout.decode()
    assert render(ingest(paths).table).splitlines() == event_lines(out)


def test_comm_first_note_read_wins(tmp_path: Path) -> None:
    """A pid noted differently on two CPUs takes the note of the lower CPU file (blkparse)."""
    from workers.events import RWBS_READ, make_dev

    t = EventTable({"time_ns": [150, 100, 200], "dev": [make_dev(8, 0)] * 3, "cpu": [0, 1, 0],
                    "pid": [500] * 3, "action": [ACT_QUEUE] * 3, "rwbs": [RWBS_READ] * 3,
                    "sector": [1, 2, 3], "nr_sectors": [8] * 3, "seq": [1, 1, 2],
                    "comm": [1, 2, 1]}, comms=["(null)", "zero", "one"])
    for cpu in (0, 1):
        (tmp_path / f"rv.blktrace.{cpu}").write_bytes(encode_blktrace(t.take(t.cpu == cpu)))
    merged = ingest([tmp_path / "rv.blktrace.1", tmp_path / "rv.blktrace.0"]).table
    # blkparse 1.2.0 prints [zero] on all three lines (checked with the binary)
    assert [merged.comm_of(i) for i in range(3)] == ["zero"] * 3
    assert merged.time_ns.tolist() == [0, 50, 100]


def test_demo_sample_both_byte_orders(data_dir: Path) -> None:
    """The synthetic demo sample (2 CPUs, LE and BE copies) equals demo.blkparse.txt."""
    golden = event_lines((data_dir / "demo.blkparse.txt").read_text())
    for stem in ("demo", "demo_be"):
        table = ingest([data_dir / f"{stem}.blktrace.0", data_dir / f"{stem}.blktrace.1"]).table
        assert render(table).splitlines() == golden


def test_takeoverjp_sample_matches_golden(tmp_path: Path, data_dir: Path) -> None:
    """The real NVMe sample with remaps and no PROCESS notes equals blkparse -i - output."""
    trace = _xz(data_dir, "takeoverjp.blktrace.xz", tmp_path / "sample.blktrace.0")
    golden_text = lzma.decompress((data_dir / "takeoverjp.blkparse.txt.xz").read_bytes()).decode()
    ours = parse_file(trace)
    assert isinstance(ours, EventTable)
    assert render(ours).splitlines() == event_lines(golden_text)
    assert_fields_equal(ours, _golden_table(tmp_path, golden_text))
    assert {ours.comms[i] for i in np.unique(ours.comm[ours.action == ACT_QUEUE])} == {"(null)"}


def test_kernel61_sample_matches_golden(tmp_path: Path, data_dir: Path) -> None:
    """A Debian 6.1 per-CPU capture (vda, splits at max_sectors 512k) equals blkparse -i vda."""
    p0 = _xz(data_dir, "k61_vda.blktrace.0.xz", tmp_path / "vda.blktrace.0")
    p1 = _xz(data_dir, "k61_vda.blktrace.1.xz", tmp_path / "vda.blktrace.1")
    golden_text = lzma.decompress((data_dir / "k61_vda.blkparse.txt.xz").read_bytes()).decode()
    result = ingest([p0, p1], names=["vda.blktrace.0", "vda.blktrace.1"])
    assert render(result.table).splitlines() == event_lines(golden_text)
    assert_fields_equal(result.table, _golden_table(tmp_path, golden_text))
    assert result.table.device_name(result.table.device_ids()[0]) == "vda"


@pytest.mark.blkparse
@needs_blkparse
def test_shared_samples_against_blkparse_binary(samples_dir: Path) -> None:
    """Every per-CPU capture under the shared samples' kernel/ (``$BLKREVIEW_SHARED``, else
    shared/ beside the repository) equals blkparse's output; a samples tree without the captures fails."""
    root = samples_dir / "kernel"
    assert root.is_dir(), f"{samples_dir} has no kernel/ captures"
    checked = 0
    for first in sorted(root.glob("*/*/*.blktrace.0")):
        stem = first.name.split(".blktrace.")[0]
        files = sorted(first.parent.glob(f"{stem}.blktrace.*"))
        out = subprocess.run([BLKPARSE, "-q", "-i", stem], cwd=first.parent,
                             capture_output=True, check=True).stdout.decode()
        assert render(ingest(files).table).splitlines() == event_lines(out), first
        checked += 1
    assert checked >= 4


def test_cgroup_flag_payload_skipped() -> None:
    """With __BLK_TA_CGROUP the 8-byte cgroup id precedes the split payload.

    blkparse 1.2.0 predates the flag and prints "Bad fs action" for such records; we decode
    them as the kernel wrote them.
    """
    def rec(seq: int, t: int, action: int, pdu: bytes) -> bytes:
        return struct.pack("<IIQQIIIIIHH", 0x65617407, seq, t, 100, 8192, action, 42,
                           8 << 20, 0, 0, len(pdu)) + pdu

    cg = struct.pack("<Q", 0xABCDEF)
    data = rec(1, 1000, 0x00110001 | 0x100, cg) + rec(2, 2000, 0x0001000D | 0x100,
                                                      cg + struct.pack(">Q", 108))
    t = merge_raw([parse_blktrace_bytes(data)])
    assert t.action.tolist() == [ACT_QUEUE, 13]
    assert t.aux.tolist() == [0, 108]
    assert t.nr_sectors.tolist() == [16, 16]
