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


def decimate_minmax(values: npt.NDArray[np.int64], max_points: int) -> npt.NDArray[np.intp]:
    """Indices (sorted) keeping min and max of ``values`` in each of max_points/2 slices."""
    n = len(values)
    if n <= max_points:
        return np.arange(n, dtype=np.intp)
    k = max(1, max_points // 2)
    m = -(-n // k)  # slice length
    pad = k * m - n
    v = np.concatenate((values, np.full(pad, values[-1]))) if pad else values
    grid = v.reshape(k, m)
    base = np.arange(k, dtype=np.intp) * m
    lo = base + np.argmin(grid, axis=1)
    hi = base + np.argmax(grid, axis=1)
    idx = np.unique(np.concatenate((lo, hi)))
    return idx[idx < n]


def lba_scatter(table: EventTable, sr: StageRows, t0: int, *, max_points: int = 20000,
                timed: bool = True) -> dict[str, Any]:
    """Decimated ``t_s``, ``sector``, ``write`` lists for one device at its stage.

    Without timestamps (``timed`` False) ``t_s`` holds the issue-order index and ``x`` says
    ``"order"`` instead of ``"time"``.
    """
    rows = sr.rows
    sec = table.sector[rows].astype(np.int64)
    keep = decimate_minmax(sec, max_points)
    r = rows[keep]
    return {
        "total": int(len(rows)),
        "points": int(len(r)),
        "decimated": bool(len(r) < len(rows)),
        "x": "time" if timed else "order",
        "t_s": (np.round((table.time_ns[r] - t0) / 1e9, 6).tolist() if timed
                else keep.tolist()),
        "sector": table.sector[r].tolist(),
        "nr_sectors": table.nr_sectors[r].tolist(),
        "write": ((table.rwbs[r] & RWBS_WRITE) != 0).astype(np.int8).tolist(),
    }
