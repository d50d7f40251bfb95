"""fio JSON -> per-job rows."""

from __future__ import annotations

from pathlib import Path

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
