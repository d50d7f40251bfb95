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
    max_points`` every value is kept. The state is one lowest and one highest candidate per
    slice (arrays of ``max_points / 2``), updated by each piece: a later value replaces a
    candidate only when strictly lower (higher), so the first of equal values stays.
    """

    def __init__(self, n: int, max_points: int) -> None:
        self.n = n
        self.keep_all = n <= max_points
        k = max(1, max_points // 2)
        self.m = max(1, -(-n // k))  # slice length
        self.slices = n if self.keep_all else -(-n // self.m)
        self.pos = 0
        self._seen = np.zeros(self.slices, bool)
        self._ends: list[dict[str, Any]] = [
            {"value": np.zeros(self.slices, np.int64), "index": np.zeros(self.slices, np.int64),
             "payload": None} for _ in range(1 if self.keep_all else 2)]

    def add(self, values: npt.NDArray[Any], *payload: npt.NDArray[Any]) -> None:
        v = np.asarray(values).astype(np.int64)
        n = len(v)
        if not n:
            return
        g0 = self.pos
        self.pos += n
        for end in self._ends:
            if end["payload"] is None:
                end["payload"] = [np.zeros(self.slices, np.asarray(p).dtype) for p in payload]
        if self.keep_all:
            end = self._ends[0]
            sl = slice(g0, g0 + n)
            end["index"][sl] = np.arange(g0, g0 + n)
            for dst, src in zip(end["payload"], payload):
                dst[sl] = src
            self._seen[sl] = True
            return
        sid = (g0 + np.arange(n, dtype=np.int64)) // self.m
        starts = np.r_[0, np.flatnonzero(sid[1:] != sid[:-1]) + 1]
        seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
        touched = sid[starts]
        seen = self._seen[touched]
        for end, red, better in zip(self._ends, (np.minimum, np.maximum), (np.less, np.greater)):
            ext = red.reduceat(v, starts)
            hit = np.flatnonzero(v == ext[seg])
            first = hit[np.r_[True, seg[hit][1:] != seg[hit][:-1]]]  # first of equal ones
            upd = ~seen | better(ext, end["value"][touched])
            to = touched[upd]
            end["value"][to] = ext[upd]
            end["index"][to] = g0 + first[upd]
            for dst, src in zip(end["payload"], payload):
                dst[to] = np.asarray(src)[first[upd]]
        self._seen[touched] = True

    def kept(self) -> tuple[npt.NDArray[np.intp], list[npt.NDArray[Any]]]:
        """Kept indices (ascending) and their payloads (one array per payload field)."""
        seen = self._seen
        idx = np.concatenate([end["index"][seen] for end in self._ends])
        if not len(idx) or self._ends[0]["payload"] is None:
            return np.unique(idx).astype(np.intp), []
        pays = [np.concatenate([end["payload"][k][seen] for end in self._ends])
                for k in range(len(self._ends[0]["payload"]))]
        idx, first = np.unique(idx, return_index=True)
        return idx.astype(np.intp), [p[first] for p in pays]


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
