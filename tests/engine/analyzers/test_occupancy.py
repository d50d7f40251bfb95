"""In-flight (D..C) and scheduler (G..D) occupancy over time: known answers and the real 6.1
raid5 capture (tests/data/model, from ../shared/samples/kernel)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from workers.analyzers import analyze
from workers.analyzers.common import StageMatcher
from workers.analyzers.occupancy import step_occupancy
from workers.traces import ingest

MODEL = Path(__file__).resolve().parents[2] / "data" / "model"


def test_step_occupancy_known_answer() -> None:
    """Two overlapping requests: 1, then 2 while both are out, then 1."""
    mean, mx, overall, peak = step_occupancy(np.array([0, 500]), np.array([1000, 1500]),
                                             0, 500, 3)
    assert mean == [1.0, 2.0, 1.0] and mx == [1, 2, 1]
    assert overall == pytest.approx(2000 / 1500) and peak == 2
    # back to back (one completes as the next issues) is never two in flight
    mean, mx, _, peak = step_occupancy(np.array([0, 1000]), np.array([1000, 2000]), 0, 1000, 2)
    assert mx == [1, 1] and peak == 1 and mean == [1.0, 1.0]
    # a request shorter than a bin counts for the bin's mean by its share and for its max
    mean, mx, _, _ = step_occupancy(np.array([100]), np.array([200]), 0, 1000, 1)
    assert mean == [0.1] and mx == [1]
    assert step_occupancy(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0, 10, 2) \
        == ([0.0, 0.0], [0, 0], 0.0, 0)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("k61")
    for suffix in (".blkparse.txt.xz", ".blkreview.toml"):
        shutil.copy(MODEL / f"6.1_W1b{suffix}", d / f"6.1_W1b{suffix}")
    ing = ingest(sorted(d.iterdir()))
    return ing.table, analyze(ing.table)


def test_real_capture_members_in_flight(capture) -> None:
    """Each member of the 6.1 raid5: 50 requests issued and completed; the time-integral of the
    in-flight count is the sum of the D2C times (exactly), and md0 (bio-based, no D) has no
    driver occupancy."""
    table, res = capture
    occ = res["devices"]["254,0"]["occupancy"]
    inflight = occ["inflight"]
    assert inflight["requests"] == 50 and inflight["overall_max"] >= 1
    matcher = StageMatcher(table)
    ra, rb = matcher.pairs_for("D", "C", 0xFE00000)  # 254,0
    busy = int((table.time_ns[rb].astype(np.int64) - table.time_ns[ra].astype(np.int64)).sum())
    span = occ["bin_ns"] * len(occ["t_s"])
    assert inflight["overall_mean"] * span == pytest.approx(busy, rel=1e-9)
    assert sum(m * occ["bin_ns"] for m in inflight["mean"]) == pytest.approx(busy, rel=1e-9)
    assert occ["scheduler"]["requests"] == 50  # G..D on a disk without a scheduler
    assert res["devices"]["9,0"]["occupancy"]["inflight"]["requests"] == 0
