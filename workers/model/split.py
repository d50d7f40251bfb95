"""Splitting a bio against queue limits: ``bio_split_to_limits`` (block/blk-merge.c, blk.h).

Rules (kernel-model.md section 1(b)):

* READ/WRITE: the front piece ends at ``get_max_io_size`` (max_sectors, bounded by the
  chunk_sectors boundary, end aligned to the physical block size) or where ``max_segments``
  segments are used up (end aligned to the logical block size), whichever comes first
  (``bio_split_rw_at`` walking multipage bvecs, v5.1+).
* DISCARD / SECURE_ERASE: ``bio_split_discard``: max_discard_sectors rounded down to the
  granularity, and the front shortened so the *next* piece starts on a granularity boundary.
* WRITE_ZEROES: ``get_max_io_size`` with max_write_zeroes_sectors. ZONE_APPEND never splits.

``bio_submit_split`` takes the **front** piece, marks it REQ_NOMERGE and resubmits the remainder;
every split emits a ``block_split`` (X) event with the remainder's start as the new sector.

The segment model: a bio's memory is a sequence of physically contiguous runs of ``seg_bytes``
bytes counted from the bio's first byte (``0`` = one contiguous run). A segment never exceeds
``max_segment_size`` nor crosses a run; each run, and the remaining bio after a split, starts a
new segment at its own first byte (``bvec_split_segs``), so a 96K run at max_segment_size 64K
costs two segments (:func:`segment_reach`). A bio whose trace shows a layout no uniform run
length explains carries its own runs (:class:`MemoryLayout`, read from the trace's X events by
:mod:`workers.model.layout`). ``virt_boundary_mask`` and ``seg_boundary_mask`` are not modelled.

:func:`split_bio` is the scalar reference; :func:`split_many` splits many bios at once with numpy
(one vector step per piece index, so the work is O(bios) array operations per level).
:func:`front_len` is the per-piece step the replay driver and the timing simulator call.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from workers.events import RWBS_DISCARD, RWBS_SECURE, RWBS_WRITE, RWBS_WRITE_ZEROES
from workers.model.limits import QueueLimits

# REQ_OP_* numbers (include/linux/blk_types.h).
OP_READ = 0
OP_WRITE = 1
OP_FLUSH = 2
OP_DISCARD = 3
OP_SECURE_ERASE = 5
OP_WRITE_ZEROES = 9
OP_ZONE_APPEND = 13

#: UINT_MAX >> 9: bio_allowed_max_sectors' ceiling for discards.
_UINT_MAX_SECTORS = 0xFFFFFFFF >> 9


def op_from_rwbs(rwbs: int) -> int:
    """REQ_OP of an RWBS bit set (trace letters to the op the split code switches on)."""
    if rwbs & RWBS_SECURE:
        return OP_SECURE_ERASE
    if rwbs & RWBS_DISCARD:
        return OP_DISCARD
    if rwbs & RWBS_WRITE_ZEROES and not rwbs & RWBS_WRITE:
        return OP_WRITE_ZEROES
    if rwbs & RWBS_WRITE:
        return OP_WRITE
    return OP_READ


def is_discard_op(op: int) -> bool:
    return op in (OP_DISCARD, OP_SECURE_ERASE)


def get_max_io_size(sector: int, lim: QueueLimits, op: int = OP_READ) -> int:
    """Sectors the front piece may hold at ``sector`` (``get_max_io_size``, blk-merge.c).

    max_sectors (or max_write_zeroes_sectors), bounded by the sectors left to the next
    chunk_sectors boundary (``blk_boundary_sectors_left``; non-power-of-2 allowed), and the
    end aligned down to the physical block size; if that leaves nothing, max rounded to lbs.
    """
    max_sectors = lim.max_write_zeroes_sectors if op == OP_WRITE_ZEROES else lim.max_sectors
    if lim.chunk_sectors:
        left = lim.chunk_sectors - sector % lim.chunk_sectors
        max_sectors = min(max_sectors, left)
    pbs = lim.pbs_sectors
    start = sector % pbs
    end = (start + max_sectors) - (start + max_sectors) % pbs
    if end > start:
        return end - start
    lbs = lim.lbs_sectors
    return max_sectors - max_sectors % lbs


def segment_unit(lim: QueueLimits, seg_bytes: int) -> int:
    """Bytes per segment under the run model of the module docstring."""
    if seg_bytes <= 0:
        return lim.max_segment_size
    return min(seg_bytes, lim.max_segment_size)


def segment_reach(offset_bytes: int, max_segments: int, max_segment_size: int,
                  seg_bytes: int) -> int:
    """Bytes from byte ``offset_bytes`` of the bio that ``max_segments`` segments cover.

    ``bvec_split_segs``: each run (bvec) is cut into segments of at most max_segment_size
    starting at the run's first byte, and the remaining bio starts its first segment at its
    own first byte (``get_max_segment_size`` only looks at seg_boundary_mask). So the partial
    run at ``offset_bytes`` costs ceil(left / m) segments and every full run ceil(r / m).
    """
    m, segs = max_segment_size, max_segments
    if seg_bytes <= 0:
        return segs * m
    first = seg_bytes - offset_bytes % seg_bytes
    c0 = -(-first // m)
    if segs <= c0:
        return min(segs * m, first)
    k, rest = divmod(segs - c0, -(-seg_bytes // m))
    return first + k * seg_bytes + rest * m


@dataclass(frozen=True)
class MemoryLayout:
    """The physically contiguous runs of one bio's memory, as read from a trace.

    ``ends`` are the byte offsets (from the bio's first byte, ascending) where each run ends;
    bytes past the last end are one contiguous run. ``bio_iov_iter_get_pages`` ->
    ``bio_add_page`` merges a page into the previous bvec when it is physically adjacent
    (``bvec_try_merge_page``), so each run is one multi-page bvec, and ``bio_split_rw_at``
    counts its segments with ``bvec_split_segs``: ceil(run / max_segment_size), the remaining
    bio after a split starting its first segment at its own first byte. The uniform
    ``seg_bytes`` model is the special case of equal runs; a trace whose splits no uniform
    layout explains (255 pages in 254 segments, 256 pages in 4 pieces of 62 segments) gets
    its own runs (:mod:`workers.model.layout`).
    """

    ends: tuple[int, ...]

    def uniform(self) -> int:
        """The run length when every run has it (the ``seg_bytes`` model then says the same:
        runs of that length from the bio's first byte on), else 0."""
        if not self.ends:
            return 0
        first = self.ends[0]
        ok = all(b - a == first for a, b in zip(self.ends, self.ends[1:]))
        return first if ok else 0

    def reach(self, offset_bytes: int, max_segments: int, max_segment_size: int) -> int:
        """Bytes from ``offset_bytes`` that ``max_segments`` segments cover (``bvec_split_segs``
        walking the bvecs until ``nsegs`` reaches ``max_segments``)."""
        m, segs, pos = max_segment_size, max_segments, offset_bytes
        i = bisect_right(self.ends, pos)
        while i < len(self.ends):
            run = self.ends[i] - pos
            need = -(-run // m)
            if segs < need:
                return pos + segs * m - offset_bytes
            segs -= need
            pos = self.ends[i]
            i += 1
            if segs == 0:
                return pos - offset_bytes
        return pos + segs * m - offset_bytes

    def nsegs(self, offset_bytes: int, nbytes: int, max_segment_size: int) -> int:
        """Segments of the ``nbytes`` from ``offset_bytes`` (``bio_split_rw_at``'s count, which
        ``blk_mq_submit_bio`` hands to the merge code)."""
        m, pos, end = max_segment_size, offset_bytes, offset_bytes + nbytes
        count = 0
        i = bisect_right(self.ends, pos)
        while pos < end:
            stop = min(self.ends[i], end) if i < len(self.ends) else end
            count += -(-(stop - pos) // m)
            pos = stop
            i += 1
        return max(count, 1)


def max_sectors_by_segments(offset_bytes: int, lim: QueueLimits, seg_bytes: int,
                            layout: MemoryLayout | None = None) -> int:
    """Sectors from byte ``offset_bytes`` of the bio that fit in ``max_segments`` segments."""
    if layout is not None:
        reach = layout.reach(offset_bytes, lim.max_segments, lim.max_segment_size)
    else:
        reach = segment_reach(offset_bytes, lim.max_segments, lim.max_segment_size, seg_bytes)
    sectors = reach >> 9
    lbs = lim.lbs_sectors
    return sectors - sectors % lbs


def discard_front_len(sector: int, nr_sectors: int, lim: QueueLimits) -> int:
    """Front piece of a discard (``bio_split_discard``); ``nr_sectors`` when no split."""
    g = max(lim.discard_granularity >> 9, 1)
    max_discard = min(lim.max_discard_sectors, _UINT_MAX_SECTORS - _UINT_MAX_SECTORS %
                      lim.lbs_sectors)
    max_discard -= max_discard % g
    if max_discard <= 0 or nr_sectors <= max_discard:
        return nr_sectors
    split = max_discard
    tmp = (sector + split - ((lim.discard_alignment >> 9) % g)) % g
    if split > tmp:
        split -= tmp
    return split


def front_len(sector: int, nr_sectors: int, lim: QueueLimits, op: int = OP_READ,
              offset_bytes: int = 0, seg_bytes: int = 0,
              layout: MemoryLayout | None = None) -> int:
    """Sectors of the front piece ``bio_split_to_limits`` cuts (``nr_sectors`` = no split).

    Args:
        sector: start of the (remaining) bio.
        nr_sectors: its length.
        lim: the queue's limits.
        op: REQ_OP_* of the bio.
        offset_bytes: where the remaining bio starts within the original bio's memory (for the
            segment model; 0 for a fresh bio).
        seg_bytes: contiguous-run length of the bio's memory (0 = contiguous).
        layout: the bio's own runs (replaces ``seg_bytes`` when given).
    """
    if nr_sectors <= 0:
        return nr_sectors
    if is_discard_op(op):
        return discard_front_len(sector, nr_sectors, lim)
    if op == OP_ZONE_APPEND:
        return nr_sectors
    if op == OP_WRITE_ZEROES:
        if lim.max_write_zeroes_sectors <= 0:
            return nr_sectors
        return min(nr_sectors, get_max_io_size(sector, lim, op))
    by_size = get_max_io_size(sector, lim, op)
    by_segs = max_sectors_by_segments(offset_bytes, lim, seg_bytes, layout)
    n = min(by_size, by_segs)
    if n <= 0:  # a single segment larger than the limits: take what the size limit allows
        n = max(by_size, lim.lbs_sectors)
    n = min(n, nr_sectors)
    return n


@dataclass(frozen=True)
class SplitResult:
    """Pieces of one bio, front first, and the X (block_split) events the split emits.

    ``splits`` holds (sector of the bio being split, new sector) pairs: blkparse prints them as
    ``X R <sector> / <new sector>``.
    """

    pieces: tuple[tuple[int, int], ...]
    splits: tuple[tuple[int, int], ...]

    @property
    def split_points(self) -> tuple[int, ...]:
        return tuple(new for _, new in self.splits)


def split_bio(sector: int, nr_sectors: int, lim: QueueLimits, *, op: int = OP_READ,
              seg_bytes: int = 0, layout: MemoryLayout | None = None) -> SplitResult:
    """Split one bio completely (the remainder is split again on resubmission).

    >>> split_bio(0, 2056, QueueLimits(max_sectors=1024)).pieces
    ((0, 1024), (1024, 1024), (2048, 8))
    """
    pieces: list[tuple[int, int]] = []
    splits: list[tuple[int, int]] = []
    s, n, off = int(sector), int(nr_sectors), 0
    while n > 0:
        f = front_len(s, n, lim, op, off, seg_bytes, layout)
        pieces.append((s, f))
        if f < n:
            splits.append((s, s + f))
        s += f
        n -= f
        off += f << 9
    return SplitResult(tuple(pieces), tuple(splits))


@dataclass(frozen=True)
class SplitPieces:
    """Pieces of many bios, grouped by bio in submission order, fronts first.

    Attributes:
        bio: index of the source bio of each piece.
        sector: piece start.
        nr_sectors: piece length.
        nomerge: the piece is a split front (``bio_submit_split`` sets REQ_NOMERGE).
        index: piece number within its bio (0 = first).
    """

    bio: npt.NDArray[np.int64]
    sector: npt.NDArray[np.int64]
    nr_sectors: npt.NDArray[np.int64]
    nomerge: npt.NDArray[np.bool_]
    index: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.bio)


def _vec_max_io(sector: npt.NDArray[np.int64], lim: QueueLimits,
                op: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    max_sectors = np.where(op == OP_WRITE_ZEROES, lim.max_write_zeroes_sectors,
                           lim.max_sectors).astype(np.int64)
    if lim.chunk_sectors:
        max_sectors = np.minimum(max_sectors, lim.chunk_sectors - sector % lim.chunk_sectors)
    pbs = lim.pbs_sectors
    start = sector % pbs
    end = (start + max_sectors) - (start + max_sectors) % pbs
    lbs = lim.lbs_sectors
    return np.where(end > start, end - start, max_sectors - max_sectors % lbs)


def max_io_sizes(sector: npt.NDArray[np.int64], lim: QueueLimits,
                 op: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """:func:`get_max_io_size` over arrays of sectors and ops."""
    return _vec_max_io(np.asarray(sector, np.int64), lim, np.asarray(op, np.int64))


def _vec_segment_reach(off: npt.NDArray[np.int64], lim: QueueLimits,
                       seg: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """:func:`segment_reach` over arrays."""
    m, segs = lim.max_segment_size, lim.max_segments
    r = np.where(seg > 0, seg, 1)
    first = r - off % r
    c0 = -(-first // m)
    c = -(-r // m)
    k, rest = np.divmod(np.maximum(segs - c0, 0), c)
    runs = np.where(segs <= c0, np.minimum(segs * m, first), first + k * r + rest * m)
    return np.where(seg > 0, runs, segs * m)


def split_many(sector: npt.ArrayLike, nr_sectors: npt.ArrayLike, lim: QueueLimits, *,
               ops: npt.ArrayLike | int = OP_READ,
               seg_bytes: npt.ArrayLike | int = 0) -> SplitPieces:
    """Vectorized :func:`split_bio` over arrays of bios (same results, piece for piece)."""
    s0 = np.asarray(sector, dtype=np.int64).ravel()
    n0 = np.asarray(nr_sectors, dtype=np.int64).ravel()
    nb = len(s0)
    op_arr = np.broadcast_to(np.asarray(ops, dtype=np.int64), (nb,))
    seg_arr = np.broadcast_to(np.asarray(seg_bytes, dtype=np.int64), (nb,))
    idx = np.arange(nb, dtype=np.int64)
    s, n, off, opv, segv = s0.copy(), n0.copy(), np.zeros(nb, np.int64), op_arr.copy(), \
        seg_arr.copy()
    keep = n > 0
    idx, s, n, off, opv, segv = idx[keep], s[keep], n[keep], off[keep], opv[keep], segv[keep]
    out_bio, out_s, out_n, out_nm, out_i = [], [], [], [], []
    step = 0
    g = max(lim.discard_granularity >> 9, 1)
    max_discard = min(lim.max_discard_sectors, _UINT_MAX_SECTORS - _UINT_MAX_SECTORS %
                      lim.lbs_sectors)
    max_discard -= max_discard % g
    while len(idx):
        discard = (opv == OP_DISCARD) | (opv == OP_SECURE_ERASE)
        by_size = _vec_max_io(s, lim, opv)
        by_segs = _vec_segment_reach(off, lim, segv) >> 9
        by_segs -= by_segs % lim.lbs_sectors
        f = np.minimum(np.minimum(by_size, by_segs), n)
        f = np.where(f <= 0, np.maximum(by_size, lim.lbs_sectors), f)
        # discards
        if discard.any():
            if max_discard <= 0:
                fd = n
            else:
                split = np.full_like(n, max_discard)
                tmp = (s + split - ((lim.discard_alignment >> 9) % g)) % g
                split = np.where(split > tmp, split - tmp, split)
                fd = np.where(n <= max_discard, n, split)
            f = np.where(discard, fd, f)
        nowz = (opv == OP_WRITE_ZEROES) & (lim.max_write_zeroes_sectors <= 0)
        f = np.where(nowz | (opv == OP_ZONE_APPEND), n, f)
        f = np.minimum(f, n)
        out_bio.append(idx)
        out_s.append(s)
        out_n.append(f)
        out_nm.append(f < n)
        out_i.append(np.full(len(idx), step, dtype=np.int64))
        s = s + f
        off = off + (f << 9)
        n = n - f
        alive = n > 0
        idx, s, n, off, opv = idx[alive], s[alive], n[alive], off[alive], opv[alive]
        segv = segv[alive]
        step += 1
    if not out_bio:
        e = np.empty(0, np.int64)
        return SplitPieces(e, e, e, np.empty(0, bool), e)
    bio_c = np.concatenate(out_bio)
    i_c = np.concatenate(out_i)
    order = np.lexsort((i_c, bio_c))
    return SplitPieces(bio_c[order], np.concatenate(out_s)[order], np.concatenate(out_n)[order],
                       np.concatenate(out_nm)[order], i_c[order])
