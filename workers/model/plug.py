"""Requests, merges and the per-thread plug (block/blk-mq.c, block/blk-merge.c).

* :func:`attempt_bio_merge`: ``blk_attempt_bio_merge`` = ``blk_rq_merge_ok`` +
  ``blk_try_merge`` + ``ll_back_merge_fn`` / ``ll_front_merge_fn`` /
  ``bio_attempt_discard_merge``. A merge that would exceed ``blk_rq_get_max_sectors`` marks the
  request NOMERGE (``req_set_nomerge``), so a full request never accepts another bio.
* :class:`Plug`: ``blk_add_rq_to_plug`` (flush on count or when the checked request holds
  >= BLK_PLUG_FLUSH_SIZE), ``blk_attempt_plug_merge`` (which request is tried depends on
  ``plug_merge_candidate``) and ``blk_mq_flush_plug_list`` (issue order depends on
  ``plug_order``: LIFO direct issue pops the newest first, the multi-queue path groups by queue
  and re-reverses each group to FIFO, ``fifo_sorted`` sorts by queue and sector).

The plug keeps its requests in submission order; "newest"/"oldest" and the flush order are
computed from it, which is equivalent to the kernel's singly linked list with head or tail
insertion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workers.model.limits import QueueLimits
from workers.model.policy import Policy
from workers.model.split import OP_WRITE_ZEROES, MemoryLayout, is_discard_op

#: BLK_PLUG_FLUSH_SIZE (128 KiB) in sectors.
BLK_PLUG_FLUSH_SECTORS = 256
_UINT_MAX_SECTORS = 0xFFFFFFFF >> 9

# bio flag bits (a subset of REQ_*).
F_NOMERGE = 1
F_SYNC = 2
F_IDLE = 4
F_META = 8
F_PRIO = 16
F_BACKGROUND = 32
F_FUA = 64
F_PREFLUSH = 128
#: the bio's op never merges (``rq_mergeable``: REQ_OP_WRITE_ZEROES ...); unlike REQ_NOMERGE
#: md does not clear it, and clones and split pieces keep it
F_UNMERGEABLE = 256

MERGE_NONE = 0
MERGE_BACK = 1
MERGE_FRONT = 2
MERGE_DISCARD = 3


class Bio:
    """A bio in flight through the model (one per submitted or split or cloned bio).

    Plain slots object: the recursion of ``__submit_bio_noacct`` is sequential, per-bio state
    is small, and the columnar output is built from a recorder, not from these objects.
    """

    __slots__ = ("dev", "sector", "nr", "op", "rwbs", "flags", "unit", "up", "off", "seg",
                 "fresh", "pid", "layout")

    def __init__(self, dev: int, sector: int, nr: int, op: int, rwbs: int, flags: int,
                 unit: object, up: MdPiece | None, off: int, seg: int, pid: int,
                 fresh: bool = True, layout: MemoryLayout | None = None) -> None:
        self.dev = dev
        self.sector = sector
        self.nr = nr
        self.op = op
        self.rwbs = rwbs
        self.flags = flags
        self.unit = unit
        self.up = up
        self.off = off
        self.seg = seg
        self.fresh = fresh
        self.pid = pid
        #: the submitted bio's own memory runs (``off`` counts from its first byte); None:
        #: the uniform ``seg`` model
        self.layout = layout

    def piece(self, nr: int) -> Bio:
        """The front ``nr`` sectors as a new bio (``bio_split``)."""
        return Bio(self.dev, self.sector, nr, self.op, self.rwbs, self.flags, self.unit,
                   self.up, self.off, self.seg, self.pid, fresh=False, layout=self.layout)

    def advance(self, nr: int) -> None:
        """Drop the front ``nr`` sectors (``bio_advance`` of the remainder)."""
        self.sector += nr
        self.nr -= nr
        self.off += nr << 9
        self.fresh = False

    def __repr__(self) -> str:
        return f"Bio({self.dev}:{self.sector}+{self.nr})"


class MdPiece:
    """A stacked-device bio waiting for its member bios (bio_chain / endio counting)."""

    __slots__ = ("dev", "sector", "nr", "rwbs", "remaining", "up", "pid")

    def __init__(self, dev: int, sector: int, nr: int, rwbs: int, up: MdPiece | None,
                 pid: int) -> None:
        self.dev = dev
        self.sector = sector
        self.nr = nr
        self.rwbs = rwbs
        self.remaining = 0
        self.up = up
        self.pid = pid


class Request:
    """A blk-mq request: contiguous sectors (or discard ranges) and the bios it carries."""

    __slots__ = ("dev", "sector", "nr", "op", "rwbs", "nomerge", "nsegs", "bios", "pid", "rid",
                 "t_insert", "post_flush")

    def __init__(self, bio: Bio, nsegs: int, rid: int) -> None:
        self.dev = bio.dev
        self.sector = bio.sector
        self.nr = bio.nr
        self.op = bio.op
        self.rwbs = bio.rwbs
        # rq_mergeable: REQ_NOMERGE_FLAGS, and REQ_OP_WRITE_ZEROES never merges
        self.nomerge = bool(bio.flags & (F_NOMERGE | F_UNMERGEABLE)) or bio.op == OP_WRITE_ZEROES
        self.nsegs = nsegs
        self.bios = [bio]
        self.pid = bio.pid
        self.rid = rid
        self.t_insert = 0
        #: a flush follows its completion (``blk_insert_flush``: REQ_FUA on a queue without it)
        self.post_flush = False

    @property
    def end(self) -> int:
        return self.sector + self.nr

    def __repr__(self) -> str:
        return f"Request({self.dev}:{self.sector}+{self.nr})"


def rq_max_sectors(op: int, offset: int, lim: QueueLimits) -> int:
    """``blk_rq_get_max_sectors``: discard cap, or max_sectors bounded by the chunk boundary."""
    if is_discard_op(op):
        return min(lim.max_discard_sectors, _UINT_MAX_SECTORS)
    if not lim.chunk_sectors:
        return lim.max_sectors
    return min(lim.chunk_sectors - offset % lim.chunk_sectors, lim.max_sectors)


def attempt_bio_merge(rq: Request, bio: Bio, nsegs: int, lim: QueueLimits) -> int:
    """Try to merge ``bio`` into ``rq``; returns MERGE_* (and updates ``rq`` on success)."""
    if rq.nomerge or bio.flags & (F_NOMERGE | F_UNMERGEABLE) or rq.op != bio.op or \
            rq.dev != bio.dev or bio.op == OP_WRITE_ZEROES:
        return MERGE_NONE
    discard = is_discard_op(rq.op)
    if discard and lim.max_discard_segments > 1:
        if rq.nsegs >= lim.max_discard_segments or \
                rq.nr + bio.nr > rq_max_sectors(rq.op, rq.sector, lim):
            rq.nomerge = True  # bio_attempt_discard_merge: no_merge -> req_set_nomerge
            return MERGE_NONE
        rq.nr += bio.nr
        rq.nsegs += 1
        rq.bios.append(bio)
        return MERGE_DISCARD
    if rq.end == bio.sector:
        if rq.nr + bio.nr > rq_max_sectors(rq.op, rq.sector, lim):
            rq.nomerge = True
            return MERGE_NONE
        if not discard and rq.nsegs + nsegs > lim.max_segments:
            rq.nomerge = True
            return MERGE_NONE
        rq.nr += bio.nr
        rq.nsegs += 0 if discard else nsegs
        rq.bios.append(bio)
        return MERGE_BACK
    if rq.sector - bio.nr == bio.sector:
        if rq.nr + bio.nr > rq_max_sectors(rq.op, bio.sector, lim):
            rq.nomerge = True
            return MERGE_NONE
        if not discard and rq.nsegs + nsegs > lim.max_segments:
            rq.nomerge = True
            return MERGE_NONE
        rq.sector = bio.sector
        rq.nr += bio.nr
        rq.nsegs += 0 if discard else nsegs
        rq.bios.insert(0, bio)
        return MERGE_FRONT
    return MERGE_NONE


def attempt_rq_merge(front: Request, back: Request, lim: QueueLimits) -> bool:
    """Merge request ``back`` into ``front`` when contiguous (elevator insert merge)."""
    if front.nomerge or back.nomerge or front.op != back.op or front.end != back.sector:
        return False
    if front.nr + back.nr > rq_max_sectors(front.op, front.sector, lim):
        return False
    if not is_discard_op(front.op) and front.nsegs + back.nsegs > lim.max_segments:
        return False
    front.nr += back.nr
    front.nsegs += back.nsegs
    front.bios.extend(back.bios)
    return True


@dataclass
class FlushGroup:
    """Requests of one queue, in the order the flush hands them to that queue."""

    dev: int
    requests: list[Request]
    direct: bool  # direct issue (no elevator, single queue, not from schedule)


class Plug:
    """A task's ``struct blk_plug`` under one policy.

    ``flush_cb(groups, from_schedule)`` receives the flushed requests; the replay driver
    issues or inserts them. ``limits_of(dev)`` gives the queue limits for merge checks.
    """

    def __init__(self, policy: Policy, limits_of: Callable[[int], QueueLimits],
                 has_elevator_of: Callable[[int], bool],
                 flush_cb: Callable[[list[FlushGroup], bool], None]) -> None:
        self.policy = policy
        self.limits_of = limits_of
        self.has_elevator_of = has_elevator_of
        self.flush_cb = flush_cb
        self.rqs: list[Request] = []
        self.multiple_queues = False
        self.has_elevator = False
        #: called with the request whose queue gets a P (block_plug) event
        self.on_plug: Callable[[Request], None] | None = None

    # --- merge -----------------------------------------------------------------------------
    def try_merge(self, bio: Bio, nsegs: int) -> tuple[Request, int] | None:
        """``blk_attempt_plug_merge`` with the policy's candidate rule."""
        if not self.rqs:
            return None
        lim = self.limits_of(bio.dev)
        mode = self.policy.plug_merge_candidate
        if mode == "scan":
            for rq in reversed(self.rqs):
                if rq.dev != bio.dev:
                    continue
                kind = attempt_bio_merge(rq, bio, nsegs, lim)
                if kind:
                    return rq, kind
            return None
        lifo = self.policy.plug_order == "lifo"
        if mode == "newest" and not lifo:
            # after "use plug request list tail for one-shot backmerge attempt": the tail first
            tail = self.rqs[-1]
            if tail.dev == bio.dev:
                kind = attempt_bio_merge(tail, bio, nsegs, lim)
                return (tail, kind) if kind else None
            if not self.multiple_queues:
                return None
        # rq_list_for_each from the head: newest first in a LIFO list, oldest first in FIFO;
        # only the first request of this queue is tried
        order = reversed(self.rqs) if lifo else iter(self.rqs)
        for rq in order:
            if rq.dev == bio.dev:
                kind = attempt_bio_merge(rq, bio, nsegs, lim)
                return (rq, kind) if kind else None
            if not self.multiple_queues:
                return None
        return None

    # --- add -------------------------------------------------------------------------------
    def max_count(self) -> int:
        factor = (4 if self.policy.max_plug_count <= 16 else 2) if self.multiple_queues else 1
        return self.policy.max_plug_count * factor

    def add(self, rq: Request) -> bool:
        """``blk_add_rq_to_plug``; returns True when the plug was flushed first."""
        flushed = False
        last: Request | None = None
        if self.rqs:
            last = self.rqs[-1] if self.policy.plug_flush_check == "newest" else self.rqs[0]
            nomerges = self.limits_of(rq.dev).nomerges
            if len(self.rqs) >= self.max_count() or \
                    (not nomerges and last.nr >= BLK_PLUG_FLUSH_SECTORS):
                self.flush(False)
                flushed = True
                # the list is empty now: the request added next is alone in the plug and does
                # not make it multi-queue (``last = NULL`` after the flush in
                # blk_add_rq_to_plug; 5.x peeked the list after the flush). The 6.1 raid5
                # capture proves it: each 512k member request flushes the previous one and no
                # U (blk_mq_dispatch_plug_list) appears, so the flush took the direct path.
                last = None
                if self.on_plug is not None:
                    self.on_plug(rq)  # trace_block_plug after the flush
        elif self.on_plug is not None:
            self.on_plug(rq)  # trace_block_plug: the plug was empty
        if last is not None and last.dev != rq.dev:
            self.multiple_queues = True
        if self.has_elevator_of(rq.dev):
            self.has_elevator = True
        self.rqs.append(rq)
        return flushed

    # --- flush -----------------------------------------------------------------------------
    def flush(self, from_schedule: bool) -> None:
        """``blk_mq_flush_plug_list``: hand the requests over in the policy's order."""
        if not self.rqs:
            return
        rqs = self.rqs
        self.rqs = []
        order = self.policy.plug_order
        popped = list(reversed(rqs)) if order == "lifo" else list(rqs)
        multi = self.multiple_queues
        if order == "fifo_sorted" and multi and len(popped) > 1:
            popped.sort(key=lambda r: (r.dev, r.sector))
        groups: list[FlushGroup] = []
        if not multi and not self.has_elevator and not from_schedule:
            groups.append(FlushGroup(popped[0].dev, popped, True))
        else:
            by_dev: dict[int, list[Request]] = {}
            for rq in popped:
                by_dev.setdefault(rq.dev, []).append(rq)
            for dev, lst in by_dev.items():
                if order == "lifo":
                    lst.reverse()  # blk_mq_dispatch_plug_list: list_add re-reverses to FIFO
                groups.append(FlushGroup(dev, lst, False))
        self.multiple_queues = False
        self.has_elevator = False
        self.flush_cb(groups, from_schedule)
