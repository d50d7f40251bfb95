"""iostat -x text and JSON -> per-device rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.errors import ParseError
from workers.traces import ingest, parse_file
from workers.traces.iostat import parse_iostat_json, parse_iostat_text

SEED000_BEFORE = """\
> Test results:
> Before this patch
> 1) iostat results:
> Device r/s rMB/s rrqm/s %rrqm r_await rareq-sz aqu-sz %util
> md0 52430.00 3276.87 0.00 0.00 0.62 64.00 32.60 80.10
> sd* 4487.00 409.00 2054.00 31.40 0.82 93.34 3.68 71.20
> 2) blktrace G stage:
"""


def test_seed000_quoted_iostat(tmp_path: Path) -> None:
    """Seed 000's quoted iostat table: MB/s converted to kB/s, %util and rareq-sz kept."""
    p = tmp_path / "iostat.txt"
    p.write_text(SEED000_BEFORE)
    rows = parse_iostat_text(p)
    assert [r["device"] for r in rows] == ["md0", "sd*"]
    md0 = rows[0]
    assert md0["rkB/s"] == pytest.approx(3276.87 * 1024)
    assert md0["r/s"] == 52430.0 and md0["util"] == 80.1 and md0["units"] == "MB"
    assert rows[1]["rareq-sz"] == 93.34 and rows[1]["rrqm"] == 31.4


def test_sysstat_12_6_text_k_and_m_agree(data_dir: Path) -> None:
    """-x and -x -m outputs of sysstat 12.6.1 give the same kB/s within rounding."""
    k = parse_iostat_text(data_dir / "iostat-x_sysstat12.6.1.txt")
    m = parse_iostat_text(data_dir / "iostat-xm_sysstat12.6.1.txt")
    assert [r["sample"] for r in k] == [0, 1]
    assert k[0]["device"] == "vda" and k[0]["release"] == "6.18.44-fc-v782"
    for key in ("d/s", "f/s", "f_await", "dareq-sz", "aqu-sz", "util"):
        assert key in k[0]
    assert m[0]["rkB/s"] == pytest.approx(k[0]["rkB/s"], rel=0.01)


def test_old_sysstat_columns(tmp_path: Path) -> None:
    """sysstat 11 'Device:' header with avgrq-sz/avgqu-sz/svctm parses by name."""
    p = tmp_path / "old.txt"
    p.write_text("Device:         rrqm/s   wrqm/s     r/s     w/s    rkB/s    wkB/s avgrq-sz "
                 "avgqu-sz   await r_await w_await  svctm  %util\n"
                 "sda               0.00     0.50    1.00    2.00     4.00     8.00     8.00 "
                 "    0.01    0.50    0.40    0.55   0.30   0.09\n")
    rows = parse_iostat_text(p)
    assert rows[0]["aqu-sz"] == 0.01 and rows[0]["svctm"] == 0.3 and rows[0]["avgrq-sz"] == 8.0


def test_sysstat_fixture_ten_rows(data_dir: Path) -> None:
    """sysstat's own test fixture: 2 reports x 5 devices."""
    rows = parse_iostat_text(data_dir / "sysstat_expected.iostat-x")
    assert len(rows) == 10 and rows[0]["device"] == "sda" and rows[0]["rkB/s"] == 222.14


def test_iostat_json(data_dir: Path) -> None:
    """iostat -o JSON rows use the same keys as the text parser."""
    rows = parse_iostat_json(data_dir / "iostat-x-json_sysstat12.6.1.json")
    text = parse_iostat_text(data_dir / "iostat-x_sysstat12.6.1.txt")
    assert len(rows) == 2
    assert set(text[0]) - {"timestamp"} <= set(rows[0]) | {"rrqm", "wrqm", "drqm"}
    assert rows[0]["util"] == 6.18 and rows[0]["units"] == "kB"


def test_ingest_puts_iostat_in_summaries(data_dir: Path, tmp_path: Path) -> None:
    """ingest() routes iostat rows to summaries['iostat'], not into the event table."""
    trace = tmp_path / "g.txt"
    trace.write_text("8,0 0 1 0.000000001 843 G R 14071424 + 128 [dd]\n")
    result = ingest([data_dir / "iostat-x-json_sysstat12.6.1.json", trace])
    assert len(result.summaries["iostat"]) == 2 and len(result.table) == 1


def test_bad_json_reports_line(tmp_path: Path) -> None:
    """Broken JSON is a ParseError with the line json reports."""
    p = tmp_path / "x.json"
    p.write_text('{"sysstat": {\n "hosts": [\n oops ]}}\n')
    with pytest.raises(ParseError) as ei:
        parse_iostat_json(p, name="x.json")
    assert ei.value.line == 3 and "invalid JSON" in ei.value.reason


def test_no_rows_is_parse_error(tmp_path: Path) -> None:
    """A Device header without rows is refused."""
    p = tmp_path / "x.txt"
    p.write_text("Device r/s w/s\n\n")
    with pytest.raises(ParseError, match="no iostat"):
        parse_file(p, fmt="iostat")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e400"])
def test_json_non_finite_numbers_are_refused_with_line(tmp_path: Path, value: str) -> None:
    """NaN/Infinity/overflowing floats (Python's json reads them, jsonb does not) are a
    ParseError on their line rather than rows that cannot be stored."""
    p = tmp_path / "fio.json"
    p.write_text('{"fio version": "fio-3.33",\n "jobs": [{"jobname": "j",\n "read": {"bw": '
                 + value + '}}]}\n')
    with pytest.raises(ParseError) as ei:
        parse_file(p, name="fio.json", fmt="fio-json")
    assert ei.value.line == 3 and "not a finite number" in ei.value.reason


def test_text_number_overflowing_float_is_parse_error(tmp_path: Path) -> None:
    """A 400-digit value in an iostat row (float('9' * 400) is inf) is refused with its line."""
    p = tmp_path / "iostat.txt"
    p.write_text("Device            r/s     rkB/s\nsda  " + "9" * 400 + "  1.00\n")
    with pytest.raises(ParseError) as ei:
        parse_iostat_text(p, name="iostat.txt")
    assert ei.value.line == 2 and "out of range" in ei.value.reason


def test_sysstat_multi_device_json_rows_per_device(data_dir: Path) -> None:
    """sysstat's own iostat -x -p ALL -o JSON test output: two reports, 22 and 21 devices
    (disks, partitions, dm-2, sr0), one row per device per report with its numbers."""
    rows = parse_iostat_json(data_dir / "sysstat_expected.iostat-x-p-ALL.json",
                             name="all.json")
    first = [r for r in rows if r["sample"] == 0]
    second = [r for r in rows if r["sample"] == 1]
    assert len(rows) == 43 and len(first) == 22 and len(second) == 21
    assert [r["device"] for r in first][:3] == ["sda", "sda1", "sda2"]
    assert "dm-2" in {r["device"] for r in first} and "dm-2" not in {r["device"] for r in second}
    assert len({r["device"] for r in first}) == 22  # no device twice in one report
    by = {(r["sample"], r["device"]): r for r in rows}
    sda = by[0, "sda"]
    assert (sda["r/s"], sda["w/s"], sda["rkB/s"], sda["wkB/s"]) == (6.90, 1.69, 222.14, 57.08)
    assert (sda["rrqm/s"], sda["rrqm"], sda["r_await"], sda["rareq-sz"]) == (0.39, 5.38, 12.58,
                                                                           32.21)
    assert (sda["aqu-sz"], sda["util"], sda["units"]) == (0.10, 0.46, "kB")
    sdr = by[1, "sdr"]
    assert (sdr["r/s"], sdr["w/s"], sdr["wkB/s"], sdr["w_await"], sdr["wrqm"], sdr["util"]) == (
        3.21, 1.60, 16.04, 40.00, 66.67, 6.42)
    sdq = by[1, "sdq"]
    assert (sdq["d/s"], sdq["dkB/s"], sdq["d_await"], sdq["dareq-sz"]) == (3.21, 16.04, 20.00,
                                                                         5.00)
    assert by[1, "sda"]["r/s"] == 0.0
    assert {(r["host"], r["release"], r["source"]) for r in rows} == {
        ("SYSSTAT.TEST", "1.2.3-TEST", "all.json")}
