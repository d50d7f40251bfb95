"""LBA scatter decimation keeps extremes and stays under the point cap."""

from __future__ import annotations

import numpy as np
from analyzer_helpers import requests, stream

from workers.analyzers import analyze
from workers.analyzers.common import stage_rows
from workers.analyzers.lba import decimate_minmax, lba_scatter
from workers.events import DeviceInfo, make_dev


def test_small_stream_is_not_decimated() -> None:
    """Fewer points than the cap: every point, times relative to t0 in seconds."""
    t = stream([10, 20, 30], 8, times=[1000, 2000, 3000])
    s = lba_scatter(t, stage_rows(t, make_dev(8, 0)), 1000, max_points=10)
    assert s["sector"] == [10, 20, 30] and not s["decimated"]
    assert s["t_s"] == [0.0, 1e-6, 2e-6] and s["write"] == [0, 0, 0]


def test_decimation_keeps_outliers_and_cap() -> None:
    """A single far seek in 100k sequential requests survives decimation to 1000 points."""
    v = np.arange(100_000, dtype=np.int64) * 8
    v[54_321] = 10**9
    idx = decimate_minmax(v, 1000)
    assert len(idx) <= 1000 and 54_321 in idx and 0 in idx
    assert np.all(np.diff(idx) > 0)


def test_decimation_uneven_length() -> None:
    """Lengths that do not divide evenly still give valid sorted indices."""
    v = np.random.default_rng(3).integers(0, 1000, size=1001)
    idx = decimate_minmax(v, 10)
    assert idx.max() < 1001 and len(idx) <= 10
    assert v.argmax() in idx or v[idx].max() == v.max()


def test_empty_device_known_answer() -> None:
    """A device without events (named by the manifest only): an empty scatter, not decimated,
    drawn against time, with every list present and empty."""
    t = requests([(0, 8, "R", {"D": 0, "C": 10_000})])
    sdb = make_dev(8, 16)
    t.devices[sdb] = DeviceInfo(sdb, name="sdb")
    lba = analyze(t)["devices"]["8,16"]["lba"]
    assert lba == {"total": 0, "points": 0, "decimated": False, "x": "time", "t_s": [],
                   "sector": [], "nr_sectors": [], "write": []}
    assert lba_scatter(t, stage_rows(t, sdb), 0, max_points=1)["points"] == 0


def test_single_request_known_answer() -> None:
    """One write: one point at its D time (seconds from the trace's first event, the Q), its
    sector and size, marked as a write; a cap of 1 point keeps it."""
    t = requests([(123456, 64, "W", {"Q": 5_000_000, "D": 5_250_000, "C": 6_000_000})])
    lba = analyze(t)["devices"]["8,0"]["lba"]
    assert lba == {"total": 1, "points": 1, "decimated": False, "x": "time",
                   "t_s": [0.00025], "sector": [123456], "nr_sectors": [64], "write": [1]}
    capped = lba_scatter(t, stage_rows(t, make_dev(8, 0)), 5_000_000, max_points=1)
    assert capped["sector"] == [123456] and capped["t_s"] == [0.00025]


def test_single_request_without_timestamps() -> None:
    """A quoted trace without times: the lone point is drawn at issue-order index 0."""
    t = requests([(800, 8, "R", {"D": 0})])
    t.time_known = False
    lba = analyze(t)["devices"]["8,0"]["lba"]
    assert (lba["x"], lba["t_s"], lba["sector"], lba["write"]) == ("order", [0], [800], [0])
