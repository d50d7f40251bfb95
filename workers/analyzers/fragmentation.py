"""Fragmentation: requests below max_sectors, sandwiched fragments, alignment, splits, merges.

Seed 001 (Ed Tsai, "block: Check the queue limit before bio submitting") shows direct-I/O bios
of ~1028 KB split at max_sectors (512 KB, ``bio_split_to_limits`` -> ``bio_split_rw``) leaving a
4..96 KB remainder, which is then issued *between* the full-size pieces of the next bio::

    block_rq_issue: 8,32 R 524288 () 86928008 + 1024
    block_rq_issue: 8,32 R 49152 () 86927912 + 96      <- tail of the previous bio
    block_rq_issue: 8,32 R 524288 () 86929032 + 1024

A **sandwiched fragment** is, in issue order, a request smaller than max_sectors whose two
neighbours are max_sectors requests and which does not continue the request before it (a
remainder issued right after the piece it was split from is just the last piece of its bio,
in place; one that lands after another bio's piece is out of place).

max_sectors comes from the device's queue limits when known (``max_sectors_kb`` in the
manifest or sysfs), else the configuration, else the largest request seen (and the result
says which). The chunk (md/RAID, or ``chunk_sectors`` of a zoned/striped device) comes from
the limits or the configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from workers.analyzers.common import StageRows
from workers.events import (
    ACT_BACKMERGE,
    ACT_FRONTMERGE,
    ACT_QUEUE,
    ACT_SPLIT,
    ACTION_CODES,
    EventTable,
)

MAX_EXAMPLES = 20


def _limit_sectors(limits: Mapping[str, Any], names_kb: tuple[str, ...],
                   names_sectors: tuple[str, ...]) -> int | None:
    for k in names_sectors:
        if k in limits:
            try:
                v = int(limits[k])
            except (TypeError, ValueError):
                continue
            if v > 0:
                return v
    for k in names_kb:
        if k in limits:
            try:
                v = int(float(limits[k]) * 2)
            except (TypeError, ValueError):
                continue
            if v > 0:
                return v
    return None


def resolve_max_sectors(table: EventTable, dev: int, nr: np.ndarray[Any, Any],
                        configured: int | None, largest: int | None = None) -> tuple[int, str]:
    """max_sectors of a device and where it came from: limits, config or largest seen
    (``largest``, else the largest of ``nr``)."""
    info = table.devices.get(dev)
    lim = _limit_sectors(info.limits, ("max_sectors_kb",), ("max_sectors",)) if info else None
    if lim:
        return lim, "limits"
    if configured:
        return int(configured), "config"
    if largest is not None:
        return int(largest), "largest seen"
    return (int(nr.max()) if len(nr) else 0), "largest seen"


def resolve_chunk(table: EventTable, dev: int, configured: int | None
                  ) -> tuple[int | None, str | None]:
    """Chunk size in sectors and its source, or (None, None) when unknown."""
    info = table.devices.get(dev)
    lim = (_limit_sectors(info.limits, ("chunk_kb", "chunk_size_kb"), ("chunk_sectors",))
           if info else None)
    if lim:
        return lim, "limits"
    if configured:
        return int(configured), "config"
    return None, None


class FragAcc:
    """The fragmentation counts of one device's stage rows fed in consecutive pieces.

    A request is judged sandwiched with both neighbours in view, so the last two requests of
    a piece are carried into the next (the first of them is already judged, the second is
    judged there); the rest are counts, the sizes seen and the first examples.
    """

    def __init__(self, max_sectors: int, chunk: int | None) -> None:
        self.maxs = max_sectors
        self.chunk = chunk
        self.n = 0
        self.below = 0
        self.at_max = 0
        self.sandwiched = 0
        self.sw_sizes: dict[int, int] = {}
        self.examples: list[dict[str, int]] = []
        self.aligned: dict[int, list[int]] = {}
        self._tail_sec = np.zeros(0, np.int64)
        self._tail_nr = np.zeros(0, np.int64)

    def add(self, sectors: np.ndarray[Any, Any], nr_sectors: np.ndarray[Any, Any]) -> None:
        sec = np.asarray(sectors).astype(np.int64)
        nr = np.asarray(nr_sectors).astype(np.int64)
        if not len(sec):
            return
        maxs = self.maxs
        if maxs:
            self.below += int(np.count_nonzero(nr < maxs))
            self.at_max += int(np.count_nonzero(nr == maxs))
        for step in {maxs, self.chunk or 0} - {0}:
            got = self.aligned.setdefault(step, [0, 0])
            got[0] += int(np.count_nonzero(sec % step == 0))
            got[1] += int(np.count_nonzero((sec + nr) % step == 0))
        es = np.concatenate((self._tail_sec, sec))
        en = np.concatenate((self._tail_nr, nr))
        first = self.n - len(self._tail_sec)  # request index of es[0]
        if len(es) >= 3 and maxs:
            full = en == maxs
            mid = (en[1:-1] < maxs) & full[:-2] & full[2:] & ~(es[1:-1] == es[:-2] + en[:-2])
            idx = np.flatnonzero(mid) + 1
            self.sandwiched += len(idx)
            sizes, counts = np.unique(en[idx], return_counts=True)
            for sz, c in zip(sizes, counts):
                self.sw_sizes[int(sz)] = self.sw_sizes.get(int(sz), 0) + int(c)
            for i in idx[:max(0, MAX_EXAMPLES - len(self.examples))]:
                self.examples.append({"index": first + int(i), "sector": int(es[i]),
                                      "nr_sectors": int(en[i]), "prev_sector": int(es[i - 1]),
                                      "next_sector": int(es[i + 1])})
        self._tail_sec, self._tail_nr = es[-2:].copy(), en[-2:].copy()
        self.n += len(sec)

    def result(self, max_source: str, chunk_source: str | None,
               action_counts: np.ndarray[Any, Any]) -> dict[str, Any]:
        """The section, given the device's action counts (by code) for the split numbers."""
        n, maxs, chunk = self.n, self.maxs, self.chunk

        def _aligned(step: int | None) -> dict[str, Any] | None:
            if not step or n == 0:
                return None
            start, end = self.aligned[step]
            return {"sectors": int(step), "start_aligned": start, "end_aligned": end,
                    "start_share": float(start / n), "end_share": float(end / n)}

        counts = action_counts
        nq = int(counts[ACT_QUEUE])
        nx = int(counts[ACT_SPLIT])
        nd = int(counts[ACTION_CODES["D"]])
        nm = int(counts[ACT_BACKMERGE] + counts[ACT_FRONTMERGE])
        if nq and nx:
            pieces, splits_src = (nq + nx) / nq, "X events"
        elif nq and nd:
            pieces, splits_src = nd / nq, "Q vs D counts"
        else:
            pieces, splits_src = None, None  # no Q events: bios are not in the trace
        sw = sorted(self.sw_sizes.items())
        return {
            "requests": n,
            "max_sectors": maxs,
            "max_sectors_source": max_source,
            "below_max": self.below,
            "below_max_share": float(self.below / n) if n else 0.0,
            "at_max": self.at_max,
            "sandwiched": self.sandwiched,
            "sandwiched_share": float(self.sandwiched / n) if n else 0.0,
            "sandwiched_sizes": {"sectors": [s for s, _ in sw], "counts": [c for _, c in sw]},
            "sandwiched_examples": list(self.examples),
            "align_max": _aligned(maxs),
            "chunk_sectors": chunk,
            "chunk_source": chunk_source,
            "align_chunk": _aligned(chunk),
            "queued": nq,
            "splits": nx,
            "issued": nd,
            "merges": nm,
            "pieces_per_bio": None if pieces is None else float(pieces),
            "splits_per_bio": None if pieces is None else float(pieces - 1.0),
            "splits_source": splits_src,
            "q_per_d": float(nq / nd) if nd else None,
            "merged_share": float(nm / nq) if nq else None,  # None: no Q events to merge into
        }


def fragmentation(table: EventTable, sr: StageRows, *, max_sectors: int | None = None,
                  chunk_sectors: int | None = None,
                  dev_rows: np.ndarray[Any, Any] | None = None) -> dict[str, Any]:
    """Fragmentation numbers of one device at its stage (see the module docstring)."""
    rows = sr.rows
    nr = table.nr_sectors[rows]
    maxs, max_src = resolve_max_sectors(table, sr.dev, nr, max_sectors)
    chunk, chunk_src = resolve_chunk(table, sr.dev, chunk_sectors)
    acc = FragAcc(maxs, chunk)
    acc.add(table.sector[rows], nr)
    base = np.flatnonzero(table.dev == sr.dev) if dev_rows is None else dev_rows
    return acc.result(max_src, chunk_src, np.bincount(table.action[base], minlength=256))
