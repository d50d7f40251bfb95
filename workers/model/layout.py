"""The memory layout of trace bios, read from where the kernel split them (X events).

A bio is cut by ``bio_split_to_limits`` (block/blk-merge.c: ``__bio_split_to_limits`` ->
``bio_split_rw`` -> ``bio_split_rw_at``) either where its size limits end
(``get_max_io_size``: max_sectors, chunk_sectors, physical block alignment) or where
``max_segments`` segments are used up (``bvec_split_segs``). The second cut depends on the
physical layout of the submitter's buffer: ``bio_iov_iter_get_pages`` adds the pinned user pages
one by one and ``bio_add_page`` merges a page into the previous bvec only when the two are
physically adjacent, so a 1 MiB ``dd`` buffer of scattered pages is 256 bvecs and splits on a
62-segment disk, while the same buffer in a huge page is one bvec and does not. The layout is a
property of the memory, not of the kernel policy: the replay must take it from the trace and apply
it under the baseline's and the patched kernel's rules alike.

The trace records every cut: ``trace_block_split`` (X) gives the front piece (sector, size) and
the remainder's start, on the device whose ``blk_mq_submit_bio`` (a disk) or ``->submit_bio``
(md) split it, which is the top device or a member below a dm target (dm does not split normal
bios to its limits: ``dm_split_and_process_bio`` calls ``bio_split_to_limits`` only for
abnormal I/O, so ``dm-linear`` and ``dm-crypt`` reads are cut by the member disk). Remap (A)
events lead a member's X back to the top bio and its byte offset
(:func:`split_evidence`). :func:`layouts_from_evidence` keeps the cuts the size limits do not
explain and builds runs that reproduce them: a front piece cut by segments used exactly
``max_segments`` segments (the cut falls where ``bio_split_rw_at`` finds ``nsegs ==
max_segments`` at the next bvec), so its bytes are spread over that many runs; bytes the trace
shows no segment cut in are pages (at most the queue's ``max_segments`` runs, since they fitted).
Where runs fall inside such a piece the trace does not say; they are spread evenly, which gives
the same cuts under the same limits and a plausible guess under others.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from workers.events import ACT_REMAP, ACT_SPLIT, EventTable
from workers.model.limits import QueueLimits
from workers.model.split import OP_READ, OP_WRITE, MemoryLayout, max_io_sizes, op_from_rwbs

#: Bytes of a page: the run of memory one bvec holds when no two pages of a buffer are adjacent.
PAGE_BYTES = 4096

#: Columns of :func:`split_evidence`'s rows.
EV_Q, EV_DEV, EV_SECTOR, EV_FRONT, EV_OFF, EV_RWBS = range(6)

#: How many of a device's most recent bios a remap or split is looked up in (a split or a remap
#: follows its bio's Q closely; the bound keeps a long trace linear).
_RECENT = 512


def split_evidence(table: EventTable, q_rows: npt.NDArray[np.intp], top_dev: int
                   ) -> npt.NDArray[np.int64] | None:
    """Every X of the trace tied to the top bio it cut: rows of (top Q index, device, front
    sector on that device, front sectors, byte offset of the front in the top bio, rwbs).

    X events whose remainder starts where the front does (dm's ``trace_block_split`` of the
    remainder it resubmits) carry no cut and are left out. A member's X is traced back through
    the remap (A) events to the top bio (``aux2``/``aux``: the device and sector remapped from).
    None when the trace has no X.
    """
    act = table.action
    sec = table.sector.astype(np.int64)
    aux = table.aux.astype(np.int64)
    is_x = (act == ACT_SPLIT) & (aux > sec)
    if not bool(np.any(is_x)):
        return None
    dev = table.dev.astype(np.int64)
    below = bool(np.any(is_x & (dev != top_dev)))
    n = len(q_rows)
    qpos = np.full(len(table), -1, dtype=np.int64)
    qpos[q_rows] = np.arange(n)
    want = is_x | (qpos >= 0)
    if below:
        want |= (act == ACT_REMAP) & (table.nr_sectors > 0)
    nr = table.nr_sectors.astype(np.int64)
    src = table.aux2.astype(np.int64)
    # where a bio (or a split's remainder) starts: (device, sector) -> (top Q index, byte offset
    # in the top bio); an X is looked up here first (its front starts where its bio does)
    starts: dict[tuple[int, int], tuple[int, int]] = {}
    # per device: recent bios as (start, end, top Q index, byte offset of start in the top bio),
    # for a remap from the middle of a bio above (kept only when a member splits)
    recent: dict[int, list[tuple[int, int, int, int]]] = {}
    out: list[tuple[int, int, int, int, int, int]] = []

    def find(d: int, s: int) -> tuple[int, int] | None:
        lst = recent.get(d)
        if not lst:
            return None
        for start, end, q, off in reversed(lst):
            if start <= s < end:
                return q, off + ((s - start) << 9)
        return None

    def add(d: int, s: int, end: int, q: int, off: int) -> None:
        starts[(d, s)] = (q, off)
        if not below:
            return
        lst = recent.setdefault(d, [])
        lst.append((s, end, q, off))
        if len(lst) > 2 * _RECENT:
            del lst[:_RECENT]

    rwbs = table.rwbs
    for r in np.flatnonzero(want).tolist():
        d, s = int(dev[r]), int(sec[r])
        if qpos[r] >= 0:
            add(d, s, s + int(nr[r]), int(qpos[r]), 0)
        elif act[r] == ACT_REMAP:
            hit = find(int(src[r]), int(aux[r]))
            if hit is not None:
                add(d, s, s + int(nr[r]), hit[0], hit[1])
        else:  # an X
            hit = starts.pop((d, s), None) or find(d, s)
            if hit is not None:
                new = int(aux[r])
                out.append((hit[0], d, s, new - s, hit[1], int(rwbs[r])))
                starts[(d, new)] = (hit[0], hit[1] + ((new - s) << 9))
    if not out:
        return np.zeros((0, 6), dtype=np.int64)
    return np.array(out, dtype=np.int64)


def _spread(nbytes: int, runs: int) -> list[int]:
    """``nbytes`` in ``runs`` runs as even as whole pages allow (sectors if pages cannot)."""
    unit = PAGE_BYTES if nbytes >= runs * PAGE_BYTES else 512
    units, rest = divmod(nbytes, unit)
    runs = max(min(runs, units), 1)
    base, extra = divmod(units, runs)
    out = [(base + (1 if i < extra else 0)) * unit for i in range(runs)]
    out[-1] += rest
    return out


def _pages(nbytes: int, max_runs: int) -> list[int]:
    """Bytes no segment cut was seen in: pages, or at most ``max_runs`` runs (they fitted)."""
    if nbytes <= 0:
        return []
    return _spread(nbytes, min(-(-nbytes // PAGE_BYTES), max_runs))


def layouts_from_evidence(evidence: npt.NDArray[np.int64], nr_sectors: npt.NDArray[np.int64],
                          limits: Mapping[int, QueueLimits]) -> dict[int, MemoryLayout]:
    """The runs of every top bio the trace shows cut by ``max_segments`` (index -> layout).

    A cut is a segment cut when its front is shorter than ``get_max_io_size`` allows at that
    device and holds between ``max_segments`` pages and ``max_segments`` full segments;
    reads and writes only (``bio_split_discard`` does not count segments). Bios with no such cut
    keep the uniform model (none is returned for them).
    """
    ev = np.asarray(evidence, dtype=np.int64).reshape(-1, 6)
    rw = ev[:, EV_RWBS]
    ops = _ops_of(rw)
    keep = np.zeros(len(ev), dtype=bool)
    segs = np.zeros(len(ev), dtype=np.int64)
    for d in np.unique(ev[:, EV_DEV]).tolist():
        lim = limits.get(int(d))
        if lim is None:
            continue
        m = (ev[:, EV_DEV] == d) & ((ops == OP_READ) | (ops == OP_WRITE))
        nbytes = ev[m, EV_FRONT] << 9
        # max_segments segments hold at least a page each (the buffer is page-aligned, each
        # bvec at least one page unless max_segment_size is smaller) and at most
        # max_segment_size: a cut outside that is no segment cut
        ok = (ev[m, EV_FRONT] < max_io_sizes(ev[m, EV_SECTOR], lim, ops[m])) & \
            (nbytes >= lim.max_segments * min(PAGE_BYTES, lim.max_segment_size)) & \
            (nbytes <= lim.max_segments * lim.max_segment_size)
        idx = np.flatnonzero(m)[ok]
        keep[idx] = True
        segs[idx] = lim.max_segments
    pieces: dict[int, list[tuple[int, int, int]]] = {}
    for q, f, off, sg in zip(ev[keep, EV_Q].tolist(), ev[keep, EV_FRONT].tolist(),
                             ev[keep, EV_OFF].tolist(), segs[keep].tolist()):
        pieces.setdefault(q, []).append((off, off + (f << 9), sg))
    out: dict[int, MemoryLayout] = {}
    # a dd reuses one buffer: its bios share their cuts, and their layout is built once
    made: dict[tuple[int, tuple[tuple[int, int, int], ...]], MemoryLayout] = {}
    for q, cuts in pieces.items():
        total = int(nr_sectors[q]) << 9
        key = (total, tuple(sorted(set(cuts))))
        lay = made.get(key)
        if lay is None:
            lay = made[key] = _layout(total, key[1])
        out[q] = lay
    return out


def _ops_of(rwbs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """:func:`op_from_rwbs` of every row (once per distinct bit set)."""
    uniq, inv = np.unique(rwbs, return_inverse=True)
    return np.array([op_from_rwbs(int(r)) for r in uniq.tolist()], dtype=np.int64)[inv]


def _layout(total: int, cuts: tuple[tuple[int, int, int], ...]) -> MemoryLayout:
    """Runs of a ``total``-byte bio with segment cuts (start, end, max_segments), sorted."""
    least = min(c[2] for c in cuts)
    runs: list[int] = []
    pos = 0
    for start, end, segs in cuts:
        if start < pos or end > total:
            continue  # overlaps a cut already taken (two members of a mirror)
        runs += _pages(start - pos, least)
        runs += _spread(end - start, segs)
        pos = end
    runs += _pages(total - pos, least)
    return MemoryLayout(tuple(np.cumsum(runs).tolist()))
