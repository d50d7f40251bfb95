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

from workers.analyzers.common import StageMatcher, exact_sum
from workers.events import EventTable

#: (key, start stage, end stage, what it holds)
OCCUPANCY_PAIRS: tuple[tuple[str, str, str, str], ...] = (
    ("inflight", "D", "C", "issued, not completed (driver tags)"),
    ("scheduler", "G", "D", "allocated, not issued (scheduler / plug)"),
)


class StepSweep:
    """The number of open intervals over time, swept in time order from +1 (start) and -1
    (end) events fed in pieces.

    Events are ordered by time, ends before bin edges before starts at the same instant (a
    request completing as another issues is not two in flight); a piece's events at its last
    instant wait for the next piece (``safe_ns``), so an instant is never split. Carried: the
    last event's time and level. Per bin it sums level x time and keeps the highest level
    (also one reached and left within one instant); over all time the peak and the busy
    time (level above 0: the union of the intervals, iostat's %util).
    """

    def __init__(self, t0: int, bin_ns: int, nbins: int) -> None:
        self.t0, self.bin_ns, self.nbins = t0, bin_ns, nbins
        self.area = np.zeros(nbins, np.int64)
        self.mx = np.zeros(nbins, np.int64)
        self.peak = 0
        self.busy = 0
        self.starts = 0
        self._last: tuple[int, int] | None = None  # time and level after the last event
        edges = (t0 + bin_ns * np.arange(nbins + 1, dtype=np.int64) if bin_ns > 0
                 else np.zeros(0, np.int64))
        self._buf_t = [edges]
        self._buf_d = [np.zeros(len(edges), np.int64)]

    def push(self, times: npt.NDArray[np.int64], deltas: npt.NDArray[np.int64],
             safe_ns: int | None = None) -> None:
        """Add events; sweep every buffered one before ``safe_ns`` (None: all of them)."""
        self.starts += int(np.count_nonzero(deltas > 0))
        self._buf_t.append(np.asarray(times, dtype=np.int64))
        self._buf_d.append(np.asarray(deltas, dtype=np.int64))
        t = np.concatenate(self._buf_t)
        d = np.concatenate(self._buf_d)
        if safe_ns is None:
            now = np.ones(len(t), dtype=bool)
        else:
            now = t < safe_ns
        self._buf_t, self._buf_d = [t[~now]], [d[~now]]
        t, d = t[now], d[now]
        if len(t):
            order = np.lexsort((d, t))
            self._sweep(t[order], d[order])

    def _sweep(self, times: npt.NDArray[np.int64], delta: npt.NDArray[np.int64]) -> None:
        prev_t, prev_level = self._last if self._last is not None else (int(times[0]), 0)
        level = prev_level + np.cumsum(delta)  # after each event
        seg_start = np.concatenate(([prev_t], times[:-1]))
        seg_level = np.concatenate(([prev_level], level[:-1]))
        seg_len = times - seg_start
        self.busy += exact_sum(seg_len[seg_level > 0])
        if self.bin_ns > 0:
            t0, w, nb = self.t0, self.bin_ns, self.nbins
            seg_bin = np.clip((seg_start - t0) // w, -1, nb)
            inside = (seg_bin >= 0) & (seg_bin < nb) & (seg_len > 0)
            np.add.at(self.area, seg_bin[inside], seg_level[inside] * seg_len[inside])
            np.maximum.at(self.mx, seg_bin[inside], seg_level[inside])
            # a level reached and left within one instant still counts for the maximum
            at = np.clip((times - t0) // w, 0, nb - 1)
            ok = (times >= t0) & (times < t0 + w * nb)
            np.maximum.at(self.mx, at[ok], level[ok])
        self.peak = max(self.peak, int(level.max(initial=0)))
        self._last = (int(times[-1]), int(level[-1]))

    def flush(self) -> None:
        """Sweep the events still waiting (after the last piece)."""
        self.push(np.zeros(0, np.int64), np.zeros(0, np.int64))

    def result(self) -> tuple[list[float], list[int], float, int]:
        """Time-weighted mean and maximum per bin, overall mean (over the bins' span) and
        maximum; all 0 without intervals."""
        self.flush()
        nbins, bin_ns = self.nbins, self.bin_ns
        if not self.starts or bin_ns <= 0:
            return [0.0] * nbins, [0] * nbins, 0.0, 0
        span = bin_ns * nbins
        return ([float(a / bin_ns) for a in self.area], [int(x) for x in self.mx],
                float(int(self.area.sum()) / span) if span else 0.0, self.peak)


def step_occupancy(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], t0: int,
                   bin_ns: int, nbins: int) -> tuple[list[float], list[int], float, int]:
    """Time-weighted mean and maximum per bin of the number of open ``[start, end)`` intervals,
    plus the overall time-weighted mean (over the bins' span) and maximum."""
    sweep = StepSweep(t0, bin_ns, nbins)
    sweep.push(np.concatenate([start, end]).astype(np.int64),
               np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)]))
    return sweep.result()


def occupancy_result(sweeps: dict[str, tuple[tuple[list[float], list[int], float, int], int]],
                     bin_ns: int, nbins: int) -> dict[str, Any]:
    """The section from each pair's sweep result and its number of requests."""
    out: dict[str, Any] = {"bin_ns": int(bin_ns),
                           "t_s": [round(i * bin_ns / 1e9, 9) for i in range(nbins)]}
    for key, _a, _b, what in OCCUPANCY_PAIRS:
        (mean, mx, overall, peak), requests = sweeps[key]
        out[key] = {"mean": mean, "max": mx, "overall_mean": overall, "overall_max": peak,
                    "requests": int(requests), "what": what}
    return out


def occupancy(table: EventTable, dev: int, matcher: StageMatcher, t0: int, bin_ns: int,
              nbins: int) -> dict[str, Any]:
    """``{"bin_ns", "t_s": [...], "inflight": {"mean": [...], "max": [...], "overall_mean",
    "overall_max", "requests", "what"}, "scheduler": {...}}`` for one device."""
    sweeps = {}
    for key, a, b, _what in OCCUPANCY_PAIRS:
        ra, rb = matcher.pairs_for(a, b, dev)
        sweeps[key] = (step_occupancy(table.time_ns[ra].astype(np.int64),
                                      table.time_ns[rb].astype(np.int64), t0, bin_ns, nbins),
                       len(ra))
    return occupancy_result(sweeps, bin_ns, nbins)
