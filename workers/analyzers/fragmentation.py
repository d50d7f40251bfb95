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
                        configured: int | None) -> tuple[int, str]:
    """max_sectors of a device and where it came from: limits, config or largest seen."""
    info = table.devices.get(dev)
    lim = _limit_sectors(info.limits, ("max_sectors_kb",), ("max_sectors",)) if info else None
    if lim:
        return lim, "limits"
    if configured:
        return int(configured), "config"
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


def fragmentation(table: EventTable, sr: StageRows, *, max_sectors: int | None = None,
                  chunk_sectors: int | None = None,
                  dev_rows: np.ndarray[Any, Any] | None = None) -> dict[str, Any]:
    """Fragmentation numbers of one device at its stage (see the module docstring)."""
    rows = sr.rows
    sec = table.sector[rows].astype(np.int64)
    nr = table.nr_sectors[rows].astype(np.int64)
    n = len(rows)
    maxs, max_src = resolve_max_sectors(table, sr.dev, nr, max_sectors)
    chunk, chunk_src = resolve_chunk(table, sr.dev, chunk_sectors)

    below = nr < maxs if maxs else np.zeros(n, dtype=bool)
    sandwiched = np.zeros(n, dtype=bool)
    if n >= 3 and maxs:
        full = nr == maxs
        mid = below[1:-1] & full[:-2] & full[2:]
        continues = sec[1:-1] == sec[:-2] + nr[:-2]
        sandwiched[1:-1] = mid & ~continues
    sw_idx = np.flatnonzero(sandwiched)
    sw_sizes, sw_counts = np.unique(nr[sw_idx], return_counts=True)

    def _aligned(step: int | None) -> dict[str, Any] | None:
        if not step or n == 0:
            return None
        return {"sectors": int(step),
                "start_aligned": int(np.count_nonzero(sec % step == 0)),
                "end_aligned": int(np.count_nonzero((sec + nr) % step == 0)),
                "start_share": float(np.count_nonzero(sec % step == 0) / n),
                "end_share": float(np.count_nonzero((sec + nr) % step == 0) / n)}

    base = np.flatnonzero(table.dev == sr.dev) if dev_rows is None else dev_rows
    counts = np.bincount(table.action[base], minlength=256)
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

    return {
        "requests": n,
        "max_sectors": maxs,
        "max_sectors_source": max_src,
        "below_max": int(below.sum()),
        "below_max_share": float(below.sum() / n) if n else 0.0,
        "at_max": int(np.count_nonzero(nr == maxs)) if maxs else 0,
        "sandwiched": int(len(sw_idx)),
        "sandwiched_share": float(len(sw_idx) / n) if n else 0.0,
        "sandwiched_sizes": {"sectors": [int(s) for s in sw_sizes],
                             "counts": [int(c) for c in sw_counts]},
        "sandwiched_examples": [
            {"index": int(i), "sector": int(sec[i]), "nr_sectors": int(nr[i]),
             "prev_sector": int(sec[i - 1]), "next_sector": int(sec[i + 1])}
            for i in sw_idx[:MAX_EXAMPLES]],
        "align_max": _aligned(maxs),
        "chunk_sectors": chunk,
        "chunk_source": chunk_src,
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
