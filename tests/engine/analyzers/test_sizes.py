"""Request sizes: histogram buckets, exact sizes, percentiles, directions."""

from __future__ import annotations

import numpy as np
from analyzer_helpers import stream

from workers.analyzers.common import stage_rows
from workers.analyzers.sizes import size_stats, size_stats_from_arrays
from workers.events import RWBS_READ, RWBS_WRITE, EventTable, make_dev


def test_known_sizes_histogram_and_exact_table() -> None:
    """Sizes 4K x3, 96K x1, 512K x2 give known buckets, exact table and percentiles."""
    nr = np.array([8, 8, 8, 192, 1024, 1024])
    rw = np.array([RWBS_READ] * 4 + [RWBS_WRITE] * 2)
    s = size_stats_from_arrays(nr, rw)
    assert s.count == 6 and s.reads == 4 and s.writes == 2
    assert s.bytes_total == (24 + 192 + 2048) * 512
    assert s.write_bytes == 2048 * 512
    # buckets [0,1) [1,2) [2,4) [4,8) ... KB: 4K -> [4,8) idx 3; 96K -> [64,128) idx 7;
    # 512K -> [512,1024) idx 10
    assert s.counts[3] == 3 and s.counts[7] == 1 and s.counts[10] == 2 and sum(s.counts) == 6
    assert s.edges_kb[:4] == (0, 1, 2, 4) and len(s.edges_kb) == len(s.counts) + 1
    assert s.exact_sectors[:2] == (8, 1024) and s.exact_counts[:2] == (3, 2)
    assert s.distinct == 3 and s.exact_other == 0
    assert s.pct["p50"] == 4096 and s.pct["p90"] == 512 * 1024
    assert s.min == 4096 and s.max == 512 * 1024


def test_empty_sizes() -> None:
    """No requests: zero counts, no percentiles."""
    s = size_stats_from_arrays(np.zeros(0), np.zeros(0, dtype=np.uint16))
    assert s.count == 0 and s.pct == {} and s.to_json()["count"] == 0


def test_exact_table_is_capped_with_other() -> None:
    """More distinct sizes than the cap: the rest is counted under 'other'."""
    nr = np.arange(1, 101)
    s = size_stats_from_arrays(nr, np.zeros(100, dtype=np.uint16), max_exact=10)
    assert len(s.exact_sectors) == 10 and s.exact_other == 90 and s.distinct == 100


def test_size_stats_from_table_rows() -> None:
    """size_stats reads the stage rows of one device only."""
    t = EventTable.concat([stream([0, 8], [8, 16]), stream([0], 256, dev=make_dev(8, 16))])
    s = size_stats(t, stage_rows(t, make_dev(8, 0)))
    assert s.count == 2 and s.max == 16 * 512
