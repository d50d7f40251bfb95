"""Ordering: backward dispatches, their distances, stacked-device piece order, first lines.

A split bio whose pieces are issued out of order (seed 000: ``0 -> 1M -> 512k -> 1536k``
before ``submit_bio_noacct_nocheck`` put split bios at the head of ``current->bio_list``)
shows up on a disk as a **backward dispatch**: a request starting below the end of the
previous request on the same device, in issue order. They are counted overall and per
process: ``backward`` against the device's previous request (what the disk sees, attributed to
the process of the backward request) and ``backward_own`` against the same process's previous
request (what that process's own stream looks like).

For a stacked device, A (remap) events record which piece of the top device's address space
went to which member and when; the sequence of original sectors in remap order is the issue
order of the pieces across members, and a remap starting below the end of the previous one on
the same top device is an out-of-order piece.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import StageRows, log2_bucket, time_order
from workers.events import ACT_REMAP, EventTable, dev_str, rwbs_to_text

MAX_PROCESSES = 50


def backward_mask(sec: npt.NDArray[np.int64], nr: npt.NDArray[np.int64]
                  ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """For requests 1.. in issue order: backward flag and distance (prev end - start) sectors."""
    if len(sec) < 2:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    prev_end = sec[:-1] + nr[:-1]
    dist = prev_end - sec[1:]
    return dist > 0, dist


def _kb_hist(dist_sectors: npt.NDArray[np.int64]) -> dict[str, Any]:
    if len(dist_sectors) == 0:
        return {"edges_kb": [0], "counts": []}
    counts = np.bincount(log2_bucket(dist_sectors >> 1))
    return {"edges_kb": [0] + [1 << i for i in range(len(counts))],
            "counts": [int(c) for c in counts]}


def ordering(table: EventTable, sr: StageRows, *, first_n: int = 50) -> dict[str, Any]:
    """Backward dispatches overall and per process, distance histogram, first N lines."""
    rows = sr.rows
    sec = table.sector[rows].astype(np.int64)
    nr = table.nr_sectors[rows].astype(np.int64)
    pid = table.pid[rows]
    back, dist = backward_mask(sec, nr)
    n = len(rows)

    # per process: backward vs the device's previous request, and vs the process's own one
    per: list[dict[str, Any]] = []
    if n:
        pids, inv = np.unique(pid, return_inverse=True)
        req = np.bincount(inv, minlength=len(pids))
        b_dev = np.bincount(inv[1:][back], minlength=len(pids))
        order = np.argsort(inv, kind="stable")  # per process, issue order kept
        s_o, n_o, g_o = sec[order], nr[order], inv[order]
        same = g_o[1:] == g_o[:-1]
        own = same & ((s_o[:-1] + n_o[:-1]) > s_o[1:])
        b_own = np.bincount(g_o[1:][own], minlength=len(pids))
        first_row = rows[order[np.r_[0, np.flatnonzero(~same) + 1]]]
        top = np.argsort(-req, kind="stable")[:MAX_PROCESSES]
        for i in top:
            per.append({"pid": int(pids[i]), "comm": table.comms[int(table.comm[first_row[i]])],
                        "requests": int(req[i]), "backward": int(b_dev[i]),
                        "backward_own": int(b_own[i])})

    lines = []
    for r in rows[:first_n]:
        lines.append({"t_ns": int(table.time_ns[r]), "action": sr.stage or "",
                      "rwbs": rwbs_to_text(int(table.rwbs[r])), "sector": int(table.sector[r]),
                      "nr_sectors": int(table.nr_sectors[r]), "pid": int(table.pid[r]),
                      "comm": table.comms[int(table.comm[r])]})
    return {
        "requests": n,
        "backward": int(back.sum()),
        "backward_share": float(back.sum() / (n - 1)) if n > 1 else 0.0,
        "backward_distance": _kb_hist(dist[back]),
        "backward_distance_mean_bytes": float(dist[back].mean() * 512) if back.any() else None,
        "per_process": per,
        "first": lines,
    }


def remap_order(table: EventTable, *, first_n: int = 50) -> dict[str, Any]:
    """Per top device (the original device of A events): order of pieces across members."""
    rows = time_order(table, np.flatnonzero((table.action == ACT_REMAP)
                                            & (table.nr_sectors > 0)))
    out: dict[str, Any] = {}
    if len(rows) == 0:
        return out
    tops = table.aux2[rows]
    for top in np.unique(tops):
        r = rows[tops == top]
        orig = table.aux[r].astype(np.int64)
        nr = table.nr_sectors[r].astype(np.int64)
        back, _ = backward_mask(orig, nr)
        members, mcounts = np.unique(table.dev[r], return_counts=True)
        out[dev_str(int(top))] = {
            "remaps": int(len(r)),
            "out_of_order": int(back.sum()),
            "out_of_order_share": float(back.sum() / (len(r) - 1)) if len(r) > 1 else 0.0,
            "members": {dev_str(int(m)): int(c) for m, c in zip(members, mcounts)},
            "first": [{"t_ns": int(table.time_ns[x]), "orig_sector": int(table.aux[x]),
                       "nr_sectors": int(table.nr_sectors[x]), "member": dev_str(int(table.dev[x])),
                       "sector": int(table.sector[x])} for x in r[:first_n]],
        }
    return out
