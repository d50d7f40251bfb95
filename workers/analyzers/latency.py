"""Per-stage latencies, btt-style: Q2G, G2I, I2D, D2C and Q2C per device.

btt (blktrace's btt) follows a request from its queueing (Q) through request allocation (G),
insertion into the scheduler (I), issue to the driver (D) to completion (C), matching events
by device and sector. :class:`~workers.analyzers.common.StageMatcher` does the matching; this
module turns matched pairs into distributions: p50/p90/p99/max/mean and a log2 histogram in
microseconds (biolatency's buckets) for the chart.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import (
    StageMatcher,
    ValueCounts,
    exact_sum,
    log2_counts,
    percentiles_from_counts,
)
from workers.events import EventTable

#: The stage pairs btt reports, in its order.
LATENCY_PAIRS: tuple[tuple[str, str], ...] = (
    ("Q", "G"), ("G", "I"), ("I", "D"), ("D", "C"), ("Q", "C"),
)


def distribution(ns: npt.NDArray[np.int64], qs: tuple[float, ...]) -> dict[str, Any]:
    """Summary and log2-microsecond histogram of latencies given in ns (see
    :func:`distribution_of`)."""
    return distribution_of(*ValueCounts.of(ns), qs)


def distribution_of(values: npt.NDArray[np.int64], counts: npt.NDArray[np.int64],
                    qs: tuple[float, ...]) -> dict[str, Any]:
    """Summary and log2-microsecond histogram of the latency multiset ``values`` (ns, sorted
    distinct) x ``counts``.

    Bucket 0 is ``[0, 1) us``, bucket k >= 1 is ``[2**(k-1), 2**k) us``. Without pairs the
    mean, min and max are None (null, never 0: a latency of 0 would read as a measurement and
    drag a mean over several runs), under the same keys as with pairs. The mean is the exact
    sum over the count (numpy's float mean whenever the sum is below 2**53).
    """
    n = int(counts.sum())
    if n == 0:
        return {"count": 0, "mean_ns": None, "max_ns": None, "min_ns": None,
                "percentiles_ns": {}, "edges_us": [0], "counts": []}
    hist = log2_counts(np.clip(values, 0, None) // 1000, counts)
    return {
        "count": n,
        "mean_ns": exact_sum(values, counts) / n,
        "max_ns": int(values[-1]),
        "min_ns": int(values[0]),
        "percentiles_ns": percentiles_from_counts(values, counts, qs),
        "edges_us": [0] + [1 << i for i in range(len(hist))],
        "counts": hist,
    }


def latencies(table: EventTable, dev: int, matcher: StageMatcher,
              qs: tuple[float, ...]) -> dict[str, Any]:
    """``{"Q2G": {...}, ..., "Q2C": {...}}`` for one device (pairs on that device only)."""
    out: dict[str, Any] = {}
    for a, b in LATENCY_PAIRS:
        ra, rb = matcher.pairs_for(a, b, dev)
        dt = table.time_ns[rb] - table.time_ns[ra]
        out[f"{a}2{b}"] = distribution(dt.astype(np.int64), qs)
    return out
