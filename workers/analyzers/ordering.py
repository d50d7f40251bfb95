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

from workers.analyzers.common import StageRows, exact_sum, log2_bucket, time_order
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


def _kb_hist(counts: list[int]) -> dict[str, Any]:
    return {"edges_kb": [0] + [1 << i for i in range(len(counts))], "counts": list(counts)}


def _add_hist(hist: list[int], more: list[int]) -> list[int]:
    out = hist + [0] * max(0, len(more) - len(hist))
    for i, c in enumerate(more):
        out[i] += c
    return out


class OrderAcc:
    """Backward dispatches of one device's stage rows fed in consecutive pieces.

    Carried: the previous request (the first of a piece is judged against it), per process
    its counts, the end of its previous request and the comm of its first one, the distance
    histogram and sum, and the first lines.
    """

    def __init__(self, first_n: int, stage: str | None) -> None:
        self.first_n = first_n
        self.stage = stage
        self.n = 0
        self.backward = 0
        self.dist_sum = 0
        self.hist: list[int] = []
        self.procs: dict[int, list[int]] = {}  # pid -> [requests, backward, own, last end, comm]
        self.lines: list[dict[str, Any]] = []
        self._prev: tuple[int, int] | None = None

    def add(self, sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any],
            pid: npt.NDArray[Any], comm: npt.NDArray[Any], time_ns: npt.NDArray[Any],
            rwbs: npt.NDArray[Any], comms: list[str]) -> None:
        sec = np.asarray(sectors).astype(np.int64)
        nr = np.asarray(nr_sectors).astype(np.int64)
        n = len(sec)
        if not n:
            return
        for i in range(min(n, max(0, self.first_n - len(self.lines)))):
            self.lines.append({"t_ns": int(time_ns[i]), "action": self.stage or "",
                               "rwbs": rwbs_to_text(int(rwbs[i])), "sector": int(sec[i]),
                               "nr_sectors": int(nr[i]), "pid": int(pid[i]),
                               "comm": comms[int(comm[i])]})
        if self._prev is None:
            back, dist = backward_mask(sec, nr)
            judged = 1  # the first request has no previous one
        else:
            back, dist = backward_mask(np.concatenate(([self._prev[0]], sec)),
                                       np.concatenate(([self._prev[1]], nr)))
            judged = 0
        self.backward += int(np.count_nonzero(back))
        self.dist_sum += exact_sum(dist[back])
        if back.any():
            self.hist = _add_hist(self.hist, [int(c) for c in
                                              np.bincount(log2_bucket(dist[back] >> 1))])
        # per process: vs the device's previous request, and vs the process's own one
        pids, inv = np.unique(pid, return_inverse=True)
        inv = inv.reshape(-1)
        req = np.bincount(inv, minlength=len(pids))
        b_dev = np.bincount(inv[judged:][back], minlength=len(pids))
        order = np.argsort(inv, kind="stable")  # per process, issue order kept
        s_o, n_o, g_o = sec[order], nr[order], inv[order]
        same = g_o[1:] == g_o[:-1]
        own = same & ((s_o[:-1] + n_o[:-1]) > s_o[1:])
        b_own = np.bincount(g_o[1:][own], minlength=len(pids))
        starts = np.r_[0, np.flatnonzero(~same) + 1]
        ends = np.r_[starts[1:], n] - 1
        for i, p in enumerate(int(x) for x in pids):
            st = self.procs.get(p)
            first = int(order[starts[i]])
            if st is None:
                st = self.procs[p] = [0, 0, 0, 0, int(comm[first])]
            elif st[3] > int(sec[first]):  # vs the last request of this process before
                st[2] += 1
            st[0] += int(req[i])
            st[1] += int(b_dev[i])
            st[2] += int(b_own[i])
            last = int(order[ends[i]])
            st[3] = int(sec[last] + nr[last])
        self._prev = (int(sec[-1]), int(nr[-1]))
        self.n += n

    def result(self, comms: list[str]) -> dict[str, Any]:
        n = self.n
        per: list[dict[str, Any]] = []
        if self.procs:
            pids = sorted(self.procs)
            req = np.array([self.procs[p][0] for p in pids], dtype=np.int64)
            for i in np.argsort(-req, kind="stable")[:MAX_PROCESSES]:
                st = self.procs[pids[int(i)]]
                per.append({"pid": pids[int(i)], "comm": comms[st[4]], "requests": st[0],
                            "backward": st[1], "backward_own": st[2]})
        return {
            "requests": n,
            "backward": self.backward,
            "backward_share": float(self.backward / (n - 1)) if n > 1 else 0.0,
            "backward_distance": _kb_hist(self.hist),
            "backward_distance_mean_bytes": ((self.dist_sum / self.backward) * 512
                                             if self.backward else None),
            "per_process": per,
            "first": list(self.lines),
        }


def ordering(table: EventTable, sr: StageRows, *, first_n: int = 50) -> dict[str, Any]:
    """Backward dispatches overall and per process, distance histogram, first N lines."""
    rows = sr.rows
    acc = OrderAcc(first_n, sr.stage)
    acc.add(table.sector[rows], table.nr_sectors[rows], table.pid[rows], table.comm[rows],
            table.time_ns[rows], table.rwbs[rows], table.comms)
    return acc.result(table.comms)


class RemapAcc:
    """Remap (A) order per top device, fed the A rows with data in consecutive pieces."""

    def __init__(self, first_n: int) -> None:
        self.first_n = first_n
        self.tops: dict[int, dict[str, Any]] = {}

    def add(self, top: npt.NDArray[Any], orig: npt.NDArray[Any], nr_sectors: npt.NDArray[Any],
            member: npt.NDArray[Any], sector: npt.NDArray[Any],
            time_ns: npt.NDArray[Any]) -> None:
        for t in np.unique(top):
            sel = np.flatnonzero(top == t)
            o = np.asarray(orig[sel]).astype(np.int64)
            nr = np.asarray(nr_sectors[sel]).astype(np.int64)
            st = self.tops.setdefault(int(t), {"remaps": 0, "out_of_order": 0, "prev": None,
                                               "members": {}, "first": []})
            prev = st["prev"]
            if prev is None:
                back, _ = backward_mask(o, nr)
            else:
                back, _ = backward_mask(np.concatenate(([prev[0]], o)),
                                        np.concatenate(([prev[1]], nr)))
            st["out_of_order"] += int(np.count_nonzero(back))
            st["remaps"] += len(sel)
            st["prev"] = (int(o[-1]), int(nr[-1]))
            members, mcounts = np.unique(member[sel], return_counts=True)
            for m, c in zip(members, mcounts):
                st["members"][int(m)] = st["members"].get(int(m), 0) + int(c)
            for x in sel[:max(0, self.first_n - len(st["first"]))]:
                st["first"].append({"t_ns": int(time_ns[x]), "orig_sector": int(orig[x]),
                                    "nr_sectors": int(nr_sectors[x]),
                                    "member": dev_str(int(member[x])),
                                    "sector": int(sector[x])})

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for top in sorted(self.tops):
            st = self.tops[top]
            r = st["remaps"]
            out[dev_str(top)] = {
                "remaps": r,
                "out_of_order": st["out_of_order"],
                "out_of_order_share": float(st["out_of_order"] / (r - 1)) if r > 1 else 0.0,
                "members": {dev_str(m): c for m, c in sorted(st["members"].items())},
                "first": list(st["first"]),
            }
        return out


def remap_order(table: EventTable, *, first_n: int = 50) -> dict[str, Any]:
    """Per top device (the original device of A events): order of pieces across members."""
    rows = time_order(table, np.flatnonzero((table.action == ACT_REMAP)
                                            & (table.nr_sectors > 0)))
    acc = RemapAcc(first_n)
    acc.add(table.aux2[rows], table.aux[rows], table.nr_sectors[rows], table.dev[rows],
            table.sector[rows], table.time_ns[rows])
    return acc.result()
