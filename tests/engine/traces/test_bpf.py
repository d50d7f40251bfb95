"""bpftrace printf (seed 001) and bcc biosnoop -> EventTable."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.errors import ParseError
from workers.events import ACT_COMPLETE, ACT_ISSUE, RWBS_WRITE, make_dev
from workers.traces import ingest, parse_file
from workers.traces.bpf import parse_biosnoop

SEED001_BPFTRACE = """\
3) no matter if your patch is applied or not, the following pattern
is always observed:

117828811               dd 1475 0: blk_mq_start_request ublkb0 bio 0-524288
117828823               dd 1475 0: blk_mq_start_request ublkb0 bio 400-524288
117828825               dd 1475 0: blk_mq_start_request ublkb0 bio 800-4096
"""


def test_seed001_bpftrace_with_manifest(tmp_path: Path) -> None:
    """Seed 001's kprobe lines: hex sectors, byte sizes, us times; ublkb0 mapped by manifest."""
    trace = tmp_path / "bpf.txt"
    trace.write_text(SEED001_BPFTRACE)
    manifest = tmp_path / "blkreview.toml"
    manifest.write_text('kernel = "6.5.0"\n[devices]\nublkb0 = "259,0"\n')
    result = ingest([trace, manifest], names=["bpf.txt", "blkreview.toml"])
    t = result.table
    assert result.warnings == []
    assert t.sector.tolist() == [0, 0x400, 0x800]  # 0, 512 KiB, 1 MiB
    assert t.nr_sectors.tolist() == [1024, 1024, 8]  # 512 KiB, 512 KiB, 4 KiB
    assert t.time_ns.tolist() == [0, 12_000, 14_000]
    assert set(t.action.tolist()) == {ACT_ISSUE}
    assert set(t.dev.tolist()) == {make_dev(259, 0)}
    assert t.pid.tolist() == [1475] * 3 and t.comm_of(0) == "dd"
    assert t.device_name(make_dev(259, 0)) == "ublkb0"
    assert result.manifest is not None and result.manifest.kernel == "6.5.0"


def test_seed001_bpftrace_without_manifest(tmp_path: Path) -> None:
    """Without a manifest the disk keeps its name on a placeholder number, with a warning."""
    trace = tmp_path / "bpf.txt"
    trace.write_text(SEED001_BPFTRACE)
    result = ingest([trace])
    assert result.table.device_name(make_dev(0, 1)) == "ublkb0"
    assert any("ublkb0" in w and "placeholder" in w for w in result.warnings)


def test_biosnoop_example(data_dir: Path) -> None:
    """bcc's biosnoop example: D at TIME-LAT, C at TIME; prose and iostat tables skipped."""
    t = parse_file(data_dir / "biosnoop_example.txt")
    assert t.action_counts() == {"D": 21, "C": 21}
    names = {info.name for info in t.devices.values()}
    assert {"xvda1", "xvdb", "xvdc"} <= names
    d = [i for i in range(len(t)) if t.action[i] == ACT_ISSUE]
    first = d[0]
    assert t.sector[first] == 13092560 and t.nr_sectors[first] == 8
    assert t.rwbs[first] == RWBS_WRITE and t.comm_of(first) == "supervise"
    c = [i for i in range(len(t)) if t.action[i] == ACT_COMPLETE and t.sector[i] == 13092560]
    # LAT 0.74 ms between issue and completion
    assert t.time_ns[c[0]] - t.time_ns[first] == 740_000


def test_biosnoop_comm_with_spaces_and_queue_column(tmp_path: Path) -> None:
    """COMM with spaces and the optional QUE(ms) column parse from the right."""
    p = tmp_path / "b.txt"
    p.write_text("TIME(s)     COMM           PID    DISK    T SECTOR     BYTES  QUE(ms) LAT(ms)\n"
                 "1.000000    Web Content    77     nvme0n1 R 2048       65536     0.01    0.20\n")
    t = parse_biosnoop(p)
    assert t.comm_of(0) == "Web Content" and t.pid[0] == 77 and t.nr_sectors[0] == 128


def test_biosnoop_bad_number(tmp_path: Path) -> None:
    """A data row with a non-numeric sector is a ParseError with its line."""
    p = tmp_path / "b.txt"
    p.write_text("TIME(s)     COMM           PID    DISK    T SECTOR     BYTES   LAT(ms)\n"
                 "1.000000    dd             77     sda     R 20x48      4096       0.20\n")
    with pytest.raises(ParseError) as ei:
        parse_biosnoop(p, name="b.txt")
    assert ei.value.line == 2


@pytest.mark.parametrize(("row", "what"), [
    ("1.000000    dd  77  sda  R -2048       4096       0.20", "negative sector"),
    ("1.000000    dd  77  sda  R 2048       4096       nan", "NaN latency"),
    ("1" + "0" * 30 + ".0  dd  77  sda  R 2048  4096  0.20", "time past int64 ns"),
    ("1.000000    dd  77  sda  R 2048       -4096       0.20", "negative size"),
])
def test_biosnoop_numbers_out_of_range(tmp_path: Path, row: str, what: str) -> None:
    """Numbers that fit no column are a ParseError with the line, never an OverflowError."""
    p = tmp_path / "b.txt"
    p.write_text("TIME(s)     COMM           PID    DISK    T SECTOR     BYTES   LAT(ms)\n"
                 + row + "\n")
    with pytest.raises(ParseError) as ei:
        parse_biosnoop(p, name="b.txt")
    assert ei.value.line == 2 and "out of range" in ei.value.reason, what


def test_bpftrace_time_past_int64_is_parse_error(tmp_path: Path) -> None:
    """A microsecond stamp whose nanoseconds overflow int64 is refused with its line."""
    p = tmp_path / "bpf.txt"
    p.write_text(SEED001_BPFTRACE.replace("117828825", "9" * 17))
    with pytest.raises(ParseError) as ei:
        parse_file(p, name="bpf.txt", fmt="bpftrace")
    assert ei.value.line == 6 and "out of range" in ei.value.reason
