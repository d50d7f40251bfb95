"""LBA scatter decimation keeps extremes and stays under the point cap."""

from __future__ import annotations

import numpy as np
from analyzer_helpers import stream

from workers.analyzers.common import stage_rows
from workers.analyzers.lba import decimate_minmax, lba_scatter
from workers.events import make_dev


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
