"""LBA over time: sector vs time scatter per device (seekwatcher / iowatcher style).

A 10M-event trace cannot ship every point to a browser, so the scatter is decimated on the
server: the stage rows are cut into ``max_points / 2`` consecutive slices in issue order and
each slice keeps its lowest and highest sector (with their own times). Isolated far seeks,
which are what a reviewer looks for, survive; a dense sequential run collapses to its ends.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import StageRows
from workers.events import RWBS_WRITE, EventTable


class MinMaxDecimator:
    """Min/max decimation of a stream of ``n`` values (known up front) fed in pieces.

    The stream is cut into ``max_points / 2`` slices of ``ceil(n / slices)`` values in order
    and each slice keeps the index of its lowest and of its highest value (the first of equal
    ones), with a payload per kept value (the row's time, sector, ...); with ``n <=
    max_points`` every value is kept. Only the slice in progress is carried between pieces.
    """

    def __init__(self, n: int, max_points: int) -> None:
        self.n = n
        self.keep_all = n <= max_points
        k = max(1, max_points // 2)
        self.m = max(1, -(-n // k))  # slice length
        self.pos = 0
        self._idx: list[npt.NDArray[np.int64]] = []
        self._pay: list[tuple[npt.NDArray[Any], ...]] = []
        self._cur: list[Any] | None = None  # slice, lo value, lo index, lo payload, hi ...

    def add(self, values: npt.NDArray[Any], *payload: npt.NDArray[Any]) -> None:
        v = np.asarray(values).astype(np.int64)
        n = len(v)
        if not n:
            return
        g0 = self.pos
        self.pos += n
        if self.keep_all:
            self._idx.append(g0 + np.arange(n, dtype=np.int64))
            self._pay.append(tuple(np.array(p) for p in payload))
            return
        sl = (g0 + np.arange(n, dtype=np.int64)) // self.m
        starts = np.r_[0, np.flatnonzero(sl[1:] != sl[:-1]) + 1]
        seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
        picks = []
        for red in (np.minimum, np.maximum):
            ext = red.reduceat(v, starts)
            hit = np.flatnonzero(v == ext[seg])
            first = hit[np.r_[True, seg[hit][1:] != seg[hit][:-1]]]
            picks.append((ext, first))
        (lo_v, lo_i), (hi_v, hi_i) = picks
        for j in range(len(starts)):
            s = int(sl[starts[j]])
            lo = [int(lo_v[j]), g0 + int(lo_i[j]), tuple(p[lo_i[j]] for p in payload)]
            hi = [int(hi_v[j]), g0 + int(hi_i[j]), tuple(p[hi_i[j]] for p in payload)]
            cur = self._cur
            if cur is not None and cur[0] == s:  # the slice goes on from the last piece
                if lo[0] < cur[1][0]:
                    cur[1] = lo
                if hi[0] > cur[2][0]:
                    cur[2] = hi
                continue
            self._close()
            self._cur = [s, lo, hi]

    def _close(self) -> None:
        if self._cur is not None:
            _, lo, hi = self._cur
            for point in (lo, hi) if hi[1] != lo[1] else (lo,):
                self._idx.append(np.array([point[1]], dtype=np.int64))
                self._pay.append(tuple(np.array([x]) for x in point[2]))
            self._cur = None

    def kept(self) -> tuple[npt.NDArray[np.intp], list[npt.NDArray[Any]]]:
        """Kept indices (ascending) and their payloads (one array per payload field)."""
        self._close()
        if not self._idx:
            return np.zeros(0, dtype=np.intp), []
        idx = np.concatenate(self._idx)
        order = np.argsort(idx, kind="stable")
        pay = [np.concatenate([p[k] for p in self._pay])[order]
               for k in range(len(self._pay[0]))]
        self._idx, self._pay = [idx[order]], [tuple(pay)]
        return idx[order].astype(np.intp), pay


def decimate_minmax(values: npt.NDArray[np.int64], max_points: int) -> npt.NDArray[np.intp]:
    """Indices (sorted) keeping min and max of ``values`` in each of max_points/2 slices."""
    dec = MinMaxDecimator(len(values), max_points)
    dec.add(values)
    return dec.kept()[0]


def lba_points(dec: MinMaxDecimator, t0: int, timed: bool) -> dict[str, Any]:
    """The section from a decimator fed sector, time, nr_sectors and rwbs per request."""
    keep, payload = dec.kept()
    empty = np.zeros(0, np.int64)
    t, sector, nr, rwbs = payload if payload else (empty,) * 4
    return {
        "total": int(dec.n),
        "points": int(len(keep)),
        "decimated": bool(len(keep) < dec.n),
        "x": "time" if timed else "order",
        "t_s": (np.round((t.astype(np.int64) - t0) / 1e9, 6).tolist() if timed
                else keep.tolist()),
        "sector": sector.astype(np.uint64).tolist(),
        "nr_sectors": nr.astype(np.uint32).tolist(),
        "write": ((rwbs.astype(np.uint16) & RWBS_WRITE) != 0).astype(np.int8).tolist(),
    }


def lba_scatter(table: EventTable, sr: StageRows, t0: int, *, max_points: int = 20000,
                timed: bool = True) -> dict[str, Any]:
    """Decimated ``t_s``, ``sector``, ``write`` lists for one device at its stage.

    Without timestamps (``timed`` False) ``t_s`` holds the issue-order index and ``x`` says
    ``"order"`` instead of ``"time"``.
    """
    rows = sr.rows
    dec = MinMaxDecimator(len(rows), max_points)
    dec.add(table.sector[rows], table.time_ns[rows], table.sector[rows],
            table.nr_sectors[rows], table.rwbs[rows])
    return lba_points(dec, t0, timed)
