"""In-flight and scheduler occupancy over time, per device.

``D..C``: requests issued to the driver and not yet completed, i.e. what the driver's tags hold.
``G..D``: requests allocated (a tag of the scheduler's pool) and not yet issued, i.e. what waits
in the scheduler or the plug. Each request is one interval between its matched events
(:class:`~workers.analyzers.common.StageMatcher`, btt's pairing by device and sector); the
occupancy is the number of open intervals, a step function, reported per time bin as its
time-weighted mean and its maximum. The model's replay emits the same events, so a predicted
table gets the same view (seed 003's tag contention).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import StageMatcher
from workers.events import EventTable

#: (key, start stage, end stage, what it holds)
OCCUPANCY_PAIRS: tuple[tuple[str, str, str, str], ...] = (
    ("inflight", "D", "C", "issued, not completed (driver tags)"),
    ("scheduler", "G", "D", "allocated, not issued (scheduler / plug)"),
)


def step_occupancy(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], t0: int,
                   bin_ns: int, nbins: int) -> tuple[list[float], list[int], float, int]:
    """Time-weighted mean and maximum per bin of the number of open ``[start, end)`` intervals,
    plus the overall time-weighted mean (over the bins' span) and maximum."""
    if len(start) == 0 or bin_ns <= 0:
        return [0.0] * nbins, [0] * nbins, 0.0, 0
    edges = t0 + bin_ns * np.arange(nbins + 1, dtype=np.int64)
    times = np.concatenate([start, end, edges])
    delta = np.concatenate([np.ones(len(start), dtype=np.int64),
                            -np.ones(len(end), dtype=np.int64),
                            np.zeros(len(edges), dtype=np.int64)])
    # ends before starts at the same instant: a request completing as another issues is not
    # two in flight
    order = np.lexsort((delta, times))
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)  # after each event
    seg_len = np.diff(times)
    seg_level = level[:-1]
    seg_bin = np.clip((times[:-1] - t0) // bin_ns, -1, nbins)
    inside = (seg_bin >= 0) & (seg_bin < nbins) & (seg_len > 0)
    area = np.bincount(seg_bin[inside], weights=(seg_level[inside] * seg_len[inside]),
                       minlength=nbins)
    mx = np.zeros(nbins, dtype=np.int64)
    np.maximum.at(mx, seg_bin[inside], seg_level[inside])
    # a level reached and left within one instant still counts for the maximum
    at = np.clip((times - t0) // bin_ns, 0, nbins - 1)
    ok = (times >= t0) & (times < t0 + bin_ns * nbins)
    np.maximum.at(mx, at[ok], level[ok])
    span = bin_ns * nbins
    return ([float(a / bin_ns) for a in area], [int(x) for x in mx],
            float(area.sum() / span) if span else 0.0, int(level.max(initial=0)))


def occupancy(table: EventTable, dev: int, matcher: StageMatcher, t0: int, bin_ns: int,
              nbins: int) -> dict[str, Any]:
    """``{"bin_ns", "t_s": [...], "inflight": {"mean": [...], "max": [...], "overall_mean",
    "overall_max", "requests", "what"}, "scheduler": {...}}`` for one device."""
    out: dict[str, Any] = {"bin_ns": int(bin_ns),
                           "t_s": [round(i * bin_ns / 1e9, 9) for i in range(nbins)]}
    for key, a, b, what in OCCUPANCY_PAIRS:
        ra, rb = matcher.pairs_for(a, b, dev)
        start = table.time_ns[ra].astype(np.int64)
        end = table.time_ns[rb].astype(np.int64)
        mean, mx, overall, peak = step_occupancy(start, end, t0, bin_ns, nbins)
        out[key] = {"mean": mean, "max": mx, "overall_mean": overall, "overall_max": peak,
                    "requests": int(len(ra)), "what": what}
    return out
