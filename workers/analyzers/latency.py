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

from workers.analyzers.common import StageMatcher, log2_bucket, percentiles
from workers.events import EventTable

#: The stage pairs btt reports, in its order.
LATENCY_PAIRS: tuple[tuple[str, str], ...] = (
    ("Q", "G"), ("G", "I"), ("I", "D"), ("D", "C"), ("Q", "C"),
)


def distribution(ns: npt.NDArray[np.int64], qs: tuple[float, ...]) -> dict[str, Any]:
    """Summary and log2-microsecond histogram of latencies given in ns.

    Bucket 0 is ``[0, 1) us``, bucket k >= 1 is ``[2**(k-1), 2**k) us``. Without pairs the
    mean, min and max are None (null, never 0: a latency of 0 would read as a measurement and
    drag a mean over several runs), under the same keys as with pairs.
    """
    n = len(ns)
    if n == 0:
        return {"count": 0, "mean_ns": None, "max_ns": None, "min_ns": None,
                "percentiles_ns": {}, "edges_us": [0], "counts": []}
    us = np.clip(ns, 0, None) // 1000
    counts = np.bincount(log2_bucket(us))
    return {
        "count": int(n),
        "mean_ns": float(ns.mean()),
        "max_ns": int(ns.max()),
        "min_ns": int(ns.min()),
        "percentiles_ns": percentiles(ns, qs),
        "edges_us": [0] + [1 << i for i in range(len(counts))],
        "counts": [int(c) for c in counts],
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
