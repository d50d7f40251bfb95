"""fio JSON -> per-job rows."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from workers.errors import ParseError
from workers.traces import Summary, parse_file
from workers.traces.fio import parse_fio_json


def test_fio_333_randrw(data_dir: Path) -> None:
    """fio 3.33: bw in bytes/s and KiB/s, IOPS and clat percentiles in ns."""
    rows = parse_fio_json(data_dir / "fio-3.33_randrw.json")
    assert len(rows) == 1
    r = rows[0]
    assert r["jobname"] == "rr" and r["options"]["rw"] == "randrw"
    assert r["read_bw_bytes"] == pytest.approx(r["read_bw_kib"] * 1024, rel=0.01)
    assert r["read_clat_p50_ns"] == 47360.0 and r["read_clat_p99_ns"] == 230400.0
    assert r["read_clat_mean_ns"] == pytest.approx(50832.59596)


def test_fio_31_without_bw_bytes(data_dir: Path) -> None:
    """fio 3.1 (no bw_bytes) derives bytes/s from KiB/s."""
    summary = parse_file(data_dir / "fio-3.1_randread.json")
    assert isinstance(summary, Summary) and summary.kind == "fio"
    r = summary.rows[0]
    assert r["fio_version"] == "fio-3.1"
    assert r["read_bw_bytes"] == r["read_bw_kib"] * 1024 and r["read_iops"] > 0


def test_fio2_microseconds_and_leading_warning(tmp_path: Path) -> None:
    """fio 2.x clat in us is converted to ns; text before the JSON is skipped."""
    p = tmp_path / "f.json"
    p.write_text('fio: some warning\n{"fio version": "fio-2.2", "jobs": [{"jobname": "j", '
                 '"read": {"bw": 100, "iops": 25, "clat": {"mean": 12.5, "percentile": '
                 '{"99.000000": 40}}}}]}')
    r = parse_fio_json(p)[0]
    assert r["read_clat_mean_ns"] == 12500.0 and r["read_clat_p99_ns"] == 40000.0


def test_not_fio(tmp_path: Path) -> None:
    """JSON without jobs is refused with a reason."""
    p = tmp_path / "f.json"
    p.write_text('{"fio version": "x"}')
    with pytest.raises(ParseError, match="jobs"):
        parse_fio_json(p)


def _job(base: dict[str, Any], name: str, scale: int, wbw: int) -> dict[str, Any]:
    """A copy of the 3.33 job with its own name, read numbers scaled and its own write bw."""
    job = copy.deepcopy(base)
    job["jobname"] = name
    job["groupid"] = scale - 1
    job["job options"] = {"rw": "randread" if wbw == 0 else "randrw", "bs": f"{4 * scale}k"}
    rd = job["read"]
    for key in ("bw", "bw_bytes", "io_bytes", "total_ios"):
        rd[key] = rd[key] * scale
    rd["iops"] = 1000.0 * scale
    rd["clat_ns"]["mean"] = 1000.0 * scale
    rd["clat_ns"]["percentile"] = {"50.000000": 700 * scale, "99.000000": 9000 * scale}
    job["write"]["bw"] = wbw
    job["write"]["bw_bytes"] = wbw * 1024
    job["usr_cpu"] = 1.5 * scale
    return job


def test_fio_several_jobs_one_row_each(data_dir: Path, tmp_path: Path) -> None:
    """A fio report with three jobs (the 3.33 job duplicated with other numbers) gives one row
    per job, in order, each with its own bandwidth, IOPS, percentiles and options."""
    data = json.loads((data_dir / "fio-3.33_randrw.json").read_text())
    base = data["jobs"][0]
    data["jobs"] = [base, _job(base, "two", 2, 100), _job(base, "three", 3, 0)]
    p = tmp_path / "multi.json"
    p.write_text(json.dumps(data))
    rows = parse_fio_json(p, name="multi.json")
    assert [r["jobname"] for r in rows] == ["rr", "two", "three"]
    assert [r["groupid"] for r in rows] == [base["groupid"], 1, 2]
    assert [r["read_bw_bytes"] for r in rows] == [57929142.0, 2 * 57929142.0, 3 * 57929142.0]
    assert [r["read_bw_kib"] for r in rows] == [56571.0, 2 * 56571.0, 3 * 56571.0]
    assert [r["read_io_bytes"] for r in rows] == [405504, 2 * 405504, 3 * 405504]
    assert [r["read_total_ios"] for r in rows] == [99, 198, 297]
    assert rows[0]["read_iops"] == pytest.approx(14142.857143)
    assert [r["read_iops"] for r in rows[1:]] == [2000.0, 3000.0]
    assert [r["read_clat_p50_ns"] for r in rows] == [47360.0, 1400.0, 2100.0]
    assert [r["read_clat_p99_ns"] for r in rows] == [230400.0, 18000.0, 27000.0]
    assert [r["read_clat_mean_ns"] for r in rows[1:]] == [2000.0, 3000.0]
    assert "read_clat_p95_ns" not in rows[1]  # only the percentiles the job printed
    assert [r["write_bw_bytes"] for r in rows[1:]] == [102400.0, 0.0]
    assert [r["options"].get("bs") for r in rows] == [base["job options"].get("bs"), "8k", "12k"]
    assert [r["usr_cpu"] for r in rows[1:]] == [3.0, 4.5]
    assert {r["source"] for r in rows} == {"multi.json"}
