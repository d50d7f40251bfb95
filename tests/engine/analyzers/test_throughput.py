"""Throughput series and the iostat -x-like table, with hand-computed answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from analyzer_helpers import requests, two_cpu_reads

from workers.analyzers import analyze
from workers.analyzers.common import StageMatcher
from workers.analyzers.throughput import (
    IOSTAT_COLUMNS,
    group_name,
    iostat_row,
    mean_rows,
    nice_bin_ns,
    union_length,
)
from workers.events import ACTION_CODES, RWBS_READ, DeviceInfo, EventTable, make_dev
from workers.traces import ingest
from workers.traces.writers import encode_blktrace

MS = 1_000_000
SDA = make_dev(8, 0)


def _two_reads_one_write() -> EventTable:
    """Read A: G 0, D 1ms, C 3ms; read B: G 2ms, D 2ms, C 6ms; write: G 6, D 7, C 10ms."""
    return requests([
        (0, 256, "R", {"Q": 0, "G": 0, "D": 1 * MS, "C": 3 * MS}),
        (1000, 128, "R", {"Q": 2 * MS, "G": 2 * MS, "D": 2 * MS, "C": 6 * MS}),
        (5000, 8, "W", {"Q": 6 * MS, "G": 6 * MS, "D": 7 * MS, "C": 10 * MS}),
    ])


def test_iostat_row_by_hand() -> None:
    """r/s, rMB/s, r_await, rareq-sz, aqu-sz and %util match hand-computed values."""
    t = _two_reads_one_write()
    row = iostat_row(t, SDA, StageMatcher(t), 10 * MS)
    assert row["r/s"] == pytest.approx(200.0)  # 2 reads in 10 ms
    assert row["w/s"] == pytest.approx(100.0)
    assert row["rMB/s"] == pytest.approx(384 * 512 / 2**20 / 0.01)
    assert row["r_await"] == pytest.approx((3 + 4) / 2)  # G->C: 3 ms and 4 ms
    assert row["w_await"] == pytest.approx(4.0)
    assert row["rareq-sz"] == pytest.approx(96.0)  # 192 KB / 2
    assert row["aqu-sz"] == pytest.approx((3 + 4 + 4) / 10)
    # busy D..C: [1,3) u [2,6) u [7,10) = 5 + 3 = 8 ms of 10
    assert row["%util"] == pytest.approx(80.0)
    assert row["rrqm/s"] == 0 and row["%rrqm"] == 0


def test_merges_and_q_fallback_for_await() -> None:
    """M events count as rrqm; a device without G measures await from Q."""
    t = requests([(0, 8, "R", {"Q": 0, "C": 2 * MS}), (8, 8, "R", {"Q": 1 * MS})])
    m = np.flatnonzero(t.action == ACTION_CODES["Q"])[1]
    t.action[m] = ACTION_CODES["M"]
    row = iostat_row(t, SDA, StageMatcher(t), 4 * MS)
    assert row["r_await"] == pytest.approx(2.0)
    assert row["rrqm/s"] == pytest.approx(250.0) and row["%rrqm"] == pytest.approx(50.0)
    assert row["%util"] == pytest.approx(50.0)  # Q..C without D


def test_union_length_overlaps() -> None:
    """Union of overlapping and nested intervals, unsorted input."""
    s = np.array([5, 0, 1, 20], dtype=np.int64)
    e = np.array([7, 4, 2, 21], dtype=np.int64)
    assert union_length(s, e) == 4 + 2 + 1


def test_nice_bins() -> None:
    """Bin widths are 1/2/5 x 10^k and give at most the target count."""
    assert nice_bin_ns(10_000, 200) == 50
    assert nice_bin_ns(1_000_000_000, 200) == 5_000_000
    assert nice_bin_ns(0, 200) == 1


def test_group_names_and_mean_row() -> None:
    """sda/sdb group as sd*, the mean row averages each column; md0 stays out."""
    assert group_name("sdb") == "sd*" and group_name("254,16") == "254,*"
    assert group_name("md0") is None
    rows = {"8,0": {c: 1.0 for c in ("r/s", "%util")}, "8,16": {c: 3.0 for c in ("r/s", "%util")}}
    from workers.analyzers.throughput import IOSTAT_COLUMNS

    full = {k: {c: v.get(c, 0.0) for c in IOSTAT_COLUMNS} for k, v in rows.items()}
    g = mean_rows(full, {"8,0": "sda", "8,16": "sdb"})
    assert g[0]["name"] == "sd*" and g[0]["row"]["r/s"] == 2.0


def test_time_series_in_analyze() -> None:
    """Completed bytes land in their time bins; totals and shared bins are reported."""
    t = _two_reads_one_write()
    res = analyze(t)
    assert res["bin_ns"] == 50_000 and res["nbins"] == 201
    th = res["devices"]["8,0"]["throughput"]
    assert th["source"] == "C" and th["total_ios"] == 3
    assert sum(th["read_iops"]) * res["bin_ns"] / 1e9 == pytest.approx(2)
    assert len(th["read_mbps"]) == res["nbins"]
    assert th["iostat"]["r/s"] == pytest.approx(200.0)


def test_empty_and_discard_rows() -> None:
    """A device with only Q events has zero rates; discards are counted apart from reads."""
    t = EventTable.from_columns(time_ns=[0, 10], dev=[SDA, SDA], action=[1, 8],
                                rwbs=[RWBS_READ | 4, RWBS_READ | 4], sector=[0, 0],
                                nr_sectors=[64, 64])
    row = iostat_row(t, SDA, StageMatcher(t), 10)
    assert row["r/s"] == 0 and row["d/s"] > 0


def test_single_request_and_zero_interval() -> None:
    """One completed request: await is known; a zero-length interval has no rates (None)."""
    t = requests([(0, 8, "R", {"G": 0, "D": 0, "C": 2 * MS})])
    row = iostat_row(t, SDA, StageMatcher(t), 2 * MS)
    assert row["r/s"] == pytest.approx(500.0) and row["r_await"] == pytest.approx(2.0)
    assert row["%util"] == pytest.approx(100.0) and row["aqu-sz"] == pytest.approx(1.0)
    only = requests([(0, 8, "R", {"C": 5})])
    zero = iostat_row(only, SDA, StageMatcher(only), 0)
    assert zero["r/s"] is None and zero["rMB/s"] is None and zero["aqu-sz"] is None
    assert zero["rareq-sz"] == pytest.approx(4.0) and zero["note"] == "no timestamps"
    res = analyze(only)
    assert res["span_ns"] == 0 and res["devices"]["8,0"]["throughput"]["mb_per_s"] is None


def test_no_completions_give_none_not_zero() -> None:
    """G-stage lines only (seed 000's quote): every iostat column is None, with the reason."""
    t = requests([(0, 128, "R", {"G": 0}), (128, 128, "R", {"G": 1 * MS}),
                  (4096, 128, "R", {"G": 2 * MS})])
    res = analyze(t)
    row = res["devices"]["8,0"]["throughput"]["iostat"]
    assert all(row[c] is None for c in IOSTAT_COLUMNS)
    assert row["note"] == "no D/C events: stage G" and row["ios"] == 0.0
    frag = res["devices"]["8,0"]["fragmentation"]
    assert frag["pieces_per_bio"] is None and frag["merged_share"] is None
    rows = {"8,0": row, "8,16": {**row, "r/s": 4.0}}
    g = mean_rows(rows, {"8,0": "sda", "8,16": "sdb"})
    assert g[0]["row"]["r/s"] == 4.0 and g[0]["row"]["w/s"] is None


def test_overlapping_requests_in_flight() -> None:
    """Two requests in flight together: aqu-sz counts both, %util counts the union once."""
    t = requests([(0, 8, "R", {"G": 0, "D": 0, "C": 4 * MS}),
                  (100, 8, "R", {"G": 1 * MS, "D": 1 * MS, "C": 3 * MS})])
    row = iostat_row(t, SDA, StageMatcher(t), 4 * MS)
    assert row["aqu-sz"] == pytest.approx((4 + 2) / 4)
    assert row["%util"] == pytest.approx(100.0)


def _assert_two_cpu_answers(res: dict[str, object]) -> None:
    """Known answers for two_cpu_reads(): 8 x 64 KiB reads, Q->C 0.6 ms, D->C 0.5 ms, 7.6 ms."""
    dev = res["devices"]["8,0"]  # type: ignore[index]
    row = dev["throughput"]["iostat"]
    span_s = 7.6e-3
    assert res["span_ns"] == 7_600_000  # type: ignore[index]
    assert row["r/s"] == pytest.approx(8 / span_s)
    assert row["rMB/s"] == pytest.approx(0.5 / span_s)
    assert row["r_await"] == pytest.approx(0.6) and row["rareq-sz"] == pytest.approx(64.0)
    assert row["aqu-sz"] == pytest.approx(8 * 0.6e-3 / span_s)
    assert row["%util"] == pytest.approx(100 * 4e-3 / span_s)  # 8 disjoint 0.5 ms [D, C)
    assert row["note"] is None and row["matched_start"] == 8
    series = dev["throughput"]
    assert series["source"] == "C" and series["total_ios"] == 8 and series["total_mb"] == 0.5
    bin_ns = res["bin_ns"]  # type: ignore[index]
    want = np.zeros(res["nbins"], dtype=np.int64)  # type: ignore[index]
    for i in range(8):
        want[(1_500_000 + i * MS - 900_000) // bin_ns] += 1
    iops = np.asarray(series["read_iops"]) * bin_ns / 1e9
    np.testing.assert_allclose(iops, want, atol=1e-6)
    assert dev["seek"]["cnt"] == 7 and dev["seek"]["zero_cnt"] == 7


def test_per_cpu_rows_not_monotone_throughput() -> None:
    """Rows in per-CPU blocks (times not monotone across CPUs) give the iostat row and the
    binned series of the time-sorted table, and the hand-computed values."""
    t = two_cpu_reads()
    assert np.any(np.diff(t.time_ns) < 0)
    res = analyze(t)
    _assert_two_cpu_answers(res)
    srt = analyze(t.sorted_by_time())["devices"]["8,0"]
    assert res["devices"]["8,0"]["throughput"] == srt["throughput"]


def test_sequence_wrap_through_binary_per_cpu_files(tmp_path: Path) -> None:
    """Two per-CPU binary files whose sequence numbers wrap past 2**32 - 1 ingest without a
    sequence-gap diagnostic and analyze to the same known answers (seek and throughput)."""
    t = two_cpu_reads(seq_start=2**32 - 3)
    paths = []
    for cpu in (0, 1):
        p = tmp_path / f"sda.blktrace.{cpu}"
        p.write_bytes(encode_blktrace(t.take(np.flatnonzero(t.cpu == cpu)),
                                      time_base_ns=10**9))
        paths.append(p)
    result = ingest(paths)
    assert not [d for d in result.table.meta.get("diagnostics", [])
                if d["kind"] == "sequence_gap"]
    assert result.table.seq.min() == 0 and result.table.seq.max() == 2**32 - 1
    _assert_two_cpu_answers(analyze(result.table))


def test_empty_device_iostat_note() -> None:
    """A device named by the manifest without events, and one with only plug events: every
    iostat column is null and the note says why (not "stage None")."""
    t = requests([(0, 8, "R", {"D": 0, "C": 2 * MS})])
    sdb, sdc = make_dev(8, 16), make_dev(8, 32)
    t.devices[sdb] = DeviceInfo(sdb, name="sdb")
    plug = requests([(0, 0, "R", {"P": 1 * MS})], dev=sdc)
    t2 = EventTable.concat([t, plug]).sorted_by_time()
    t2.devices[sdb] = DeviceInfo(sdb, name="sdb")
    devs = analyze(t2)["devices"]
    for dev, note in (("8,16", "no events"), ("8,32", "no Q/G/I/D/C events")):
        row = devs[dev]["throughput"]["iostat"]
        assert row["note"] == note
        assert all(row[c] is None for c in IOSTAT_COLUMNS)
        assert devs[dev]["throughput"]["total_ios"] == 0
    assert devs["8,0"]["throughput"]["iostat"]["r/s"] == pytest.approx(500.0)  # 1 in 2 ms
