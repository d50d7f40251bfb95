"""Submission: ``current->bio_list`` recursion, stacked drivers and ``blk_mq_submit_bio``.

:class:`Engine` holds the state one replay needs (stack, limits, plug of the running thread,
device queues, the event recorder) and implements, in kernel order:

* ``submit_bio_noacct_nocheck(bio, split)`` (block/blk-core.c): with ``current->bio_list``
  active, append the bio to list[0] (or, for a split remainder under ``split_remainder=head``,
  prepend it: b2f5974079d8); else run ``__submit_bio_noacct_mq`` (blk-mq disk: one list, FIFO)
  or ``__submit_bio_noacct`` (bio-based md/bcache: a fresh list per level; after each
  ``->submit_bio`` the new bios are sorted into lower-level first, then same level, then the
  older pending list[1]). Q is traced when a bio first enters (not for remainders).
* ``md_submit_bio``: ``bio_split_to_limits`` on the md queue (X, front REQ_NOMERGE, the remainder
  resubmitted), then ``bio->bi_opf &= ~REQ_NOMERGE`` when ``split_nomerge=cleared_by_md``, then
  the personality: raid5 ``chunk_aligned_read`` (split at the chunk with plain ``bio_split``,
  traced as X only by the 6.18 ``bio_submit_split_bioset``) + ``raid5_read_one_chunk`` (remap A
  to the member, ``submit_bio_noacct``); raid0 ``raid0_make_request`` / ``raid0_handle_discard``
  (``raid0_discard=per_member``); linear; a bcache-like driver that resubmits to its cache disk
  with op flags ``reset`` or ``preserve`` (seed 004).
* ``blk_mq_submit_bio``: split to limits, plug merge (``blk_attempt_plug_merge``), elevator
  merge, get a request (G), add it to the plug or issue it.

Raid5 writes follow md's stripe cache (drivers/md/raid5.c): ``raid5_make_request`` adds each
4 KiB row of the bio to its ``stripe_head`` (``add_stripe_bio``; a block is R5_OVERWRITE when
the row covers it whole); a stripe waits on the plug of the thread that took it first
(``release_stripe_plug``, STRIPE_ON_UNPLUG_LIST: ``R5Stripe.owner``) until that thread's
``raid5_unplug`` releases it, and raid5d handles a released row no earlier than the trace
shows it handling the row (:mod:`workers.model.raid5d_runs`: ``Engine._raid5d_due``, under
raid5d's plug for the traced session, ``Engine._raid5d_plug``). ``handle_stripe_dirtying``:
a full-stripe write reads nothing, else read-modify-write (read the blocks being written and
the parity) when it needs fewer reads than reconstruct-write (read the data blocks not
overwritten), ties going to reconstruct-write (``rmw_level`` PARITY_ENABLE_RMW). When the
reads are back, ``ops_run_io`` writes every written block and the parity, one 4 KiB bio per
member block (A then Q on the member), which the member's plug and elevator merge.
``ops_run_io`` walks the members from the last to the first (``for (i = disks; i--; )``), so
each stripe's reads and writes enter raid5d's plug in descending member order. A stripe_head
keeps its pages after its I/O: the stripe cache (:class:`R5Cache`, ``stripe_cache_size`` rows,
LRU per hash list) remembers which member blocks are up to date, and a later write or degraded
read of the same row reads only what is not (``handle_stripe_dirtying`` counts only blocks
that are not ``R5_UPTODATE``; ``fetch_block`` skips them). Full-stripe writes of consecutive
rows in one chunk form a batch (``stripe_add_to_batch_list``, ``stripe_can_batch``:
``is_full_stripe_write``) that ``ops_run_io`` writes member by member: a member's blocks of
the batch merge into one request, which ``blk_add_rq_to_plug`` sends out when the next
member's first request joins raid5d's plug (BLK_PLUG_FLUSH_SIZE), so batching changes the I/O
(``Engine._batch_writes``). A block the trace's handling of a row did
not hold waits for the row's next handling (``Engine._defer_late_blocks``), and a write to a
row still reading for an earlier write joins that stripe (``Engine.r5_reading``); when the
reads are back ``handle_stripe_dirtying`` chooses again with every block then present and may
read more before the one write (``Engine._reads_back``).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.errors import ModelConfigError
from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_SPLIT,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_NONE,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
)
from workers.model.elevator import DeadlineQueue, NoneQueue, make_queue
from workers.model.limits import QueueLimits
from workers.model.plug import (
    F_IDLE,
    F_NOMERGE,
    F_SYNC,
    MERGE_FRONT,
    Bio,
    FlushGroup,
    MdPiece,
    Plug,
    Request,
)
from workers.model.policy import Policy
from workers.model.split import (
    OP_DISCARD,
    OP_READ,
    OP_SECURE_ERASE,
    OP_WRITE,
    OP_WRITE_ZEROES,
    front_len,
    is_discard_op,
    segment_unit,
)
from workers.model.stack import (
    RAID456,
    Node,
    Stack,
    all_limits,
    linear_map,
    loop_map,
    raid0_map,
    raid5_map,
    raid6_map,
    raid10_copies,
    raid10_geometry,
    raid10_stride,
)


class LoopCmd(MdPiece):
    """A loop request whose file I/O is in flight (``struct loop_cmd``): completes the request
    when its last bio to the disk below ends. ``converts``: the unwritten file ranges a write
    fills (converted to written when it completes)."""

    __slots__ = ("rq", "converts", "pending")

    def __init__(self, rq: Request) -> None:
        super().__init__(rq.dev, rq.sector, rq.nr, rq.rwbs, None, rq.pid)
        self.rq = rq
        self.converts: list[tuple[int, int]] = []
        self.pending: list[Bio] = []


class WrittenRanges:
    """File ranges (sectors) a replayed direct write has converted from unwritten to written.

    A direct write into an unwritten extent converts it when the write completes
    (``iomap_dio_complete`` -> ext4's ``ext4_dio_write_end_io`` ->
    ``ext4_convert_unwritten_extents``, splitting the extent): a later read of that range
    maps to a written extent and reads the disk. Kept sorted and merged.
    """

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, n: int) -> None:
        end = start + n
        i = bisect.bisect_left(self.ends, start)  # first range ending at or after start
        j = bisect.bisect_right(self.starts, end)  # ranges from i to j touch [start, end)
        if i < j:
            start = min(start, self.starts[i])
            end = max(end, self.ends[j - 1])
        self.starts[i:j] = [start]
        self.ends[i:j] = [end]

    def split(self, start: int, n: int) -> list[tuple[int, int, bool]]:
        """``[start, start + n)`` as ``(start, n, written)`` pieces."""
        out: list[tuple[int, int, bool]] = []
        end = start + n
        i = bisect.bisect_right(self.ends, start)
        pos = start
        while pos < end:
            if i < len(self.starts) and self.starts[i] <= pos:
                stop = min(end, self.ends[i])
                out.append((pos, stop - pos, True))
                i += 1
            else:
                stop = min(end, self.starts[i]) if i < len(self.starts) else end
                out.append((pos, stop - pos, False))
            pos = stop
        return out


#: Host time charged per traced step inside one submission (keeps events ordered in time).
STEP_NS = 200

EV_COMPLETE = 0
EV_UNIT = 1
#: raid5d wakes for rows the trace shows it handling then (``Engine.raid5_unplug(None)``)
EV_RAID5D = 3
#: raid5d's plug session ends (``blk_finish_plug``): ``Engine.end_raid5d_session``
EV_RAID5D_END = 4
#: one queue's batch of a plug flush handed over when the trace shows it (its U):
#: ``Engine.hand_batch`` (see ``Engine.traced_batch_time``)
EV_QUEUE_BATCH = 6


#: Stacked kinds whose empty flush goes to every member (md_flush_request; dm's
#: __send_empty_flush for the dm targets modelled as these kinds).
#: raid1's BARRIER_UNIT_SECTOR_SIZE (drivers/md/raid1.h: 1 << BARRIER_UNIT_SECTOR_BITS, 17)
RAID1_BARRIER_UNIT = 1 << 17
RAID_FLUSH_KINDS = frozenset({"raid0", "raid1", "raid10", "raid4", "raid5", "raid6", "linear"})

def flush_sequence(rwbs: int, write_cache: bool, fua: bool) -> tuple[bool, int, bool]:
    """``blk_flush_policy`` for a request with data: (pre-flush, data rwbs, post-flush).

    A write-back cache turns REQ_PREFLUSH into a flush request issued before the data and, on
    a queue without FUA, REQ_FUA into a flush after it (``blk_insert_flush``); a write-through
    cache drops both flags. The data request itself loses REQ_PREFLUSH, and REQ_FUA unless the
    queue supports it.
    """
    data = rwbs & ~RWBS_FLUSH
    if not write_cache:
        return False, data & ~RWBS_FUA, False
    pre = bool(rwbs & RWBS_FLUSH)
    post = bool(rwbs & RWBS_FUA) and not fua
    return pre, data if fua else data & ~RWBS_FUA, post


def write_back(limits: Mapping[str, Any]) -> bool:
    """The queue has a volatile write cache (``write_cache`` "write back", the default)."""
    v = limits.get("write_cache")
    return "through" not in str(v if v is not None else "write back").lower()


def supports_fua(limits: Mapping[str, Any]) -> bool:
    """The queue's ``fua`` attribute (REQ_FUA passes to the device)."""
    return str(limits.get("fua", "0")).strip() == "1"


#: STRIPE_SECTORS: one stripe_head covers 4 KiB of every member.
STRIPE_SECTORS = 8

#: NR_STRIPE_HASH_LOCKS (drivers/md/raid5.h): the stripe cache is split into 8 lists.
NR_STRIPE_HASH_LOCKS = 8

#: DM_CRYPT_DEFAULT_MAX_READ_SIZE = DM_CRYPT_DEFAULT_MAX_WRITE_SIZE (drivers/md/dm-crypt.c,
#: v6.11): the largest request dm-crypt encrypts or decrypts as one, in bytes.
DM_CRYPT_DEFAULT_MAX_IO = 131072
#: BIO_MAX_VECS pages of PAGE_SIZE: the most a dm-crypt write buffer held before v6.11.
BIO_MAX_VECS = 256
PAGE_SIZE = 4096


class R5Cache:
    """The stripe cache of one raid4/5/6 array: which member blocks of a row are up to date.

    ``grow_stripes`` makes ``stripe_cache_size`` stripe_heads and deals them round robin over
    NR_STRIPE_HASH_LOCKS lists (``grow_one_stripe``: ``hash_lock_index = max_nr_stripes %
    NR_STRIPE_HASH_LOCKS``); a row's list is ``stripe_hash_locks_hash`` = (sector >> 3) & 7.
    ``raid5_get_active_stripe`` first looks the row up in the hash (``__find_stripe``: an
    inactive stripe_head keeps its pages and their ``R5_UPTODATE`` bits), else takes the
    least recently released stripe_head of that list (``get_free_stripe`` takes the head of
    ``inactive_list[hash]``, ``release_inactive_stripe_list`` appends at the tail), which
    forgets what it held (``init_stripe``). Free stripe_heads are used before any is evicted.
    """

    __slots__ = ("cap", "inactive", "active", "live", "held", "rows")

    def __init__(self, size: int) -> None:
        n = NR_STRIPE_HASH_LOCKS
        self.cap = [size // n + (1 if h < size % n else 0) for h in range(n)]
        self.inactive: list[OrderedDict[int, frozenset[int]]] = [OrderedDict() for _ in range(n)]
        self.active = [0] * n
        #: rows with a stripe_head active now (handed out by get, not yet put back), and the
        #: pages of a row put back while another stripe_head of it is still active (the
        #: kernel's one stripe_head of the row: active, so on no inactive list to be evicted)
        self.live: dict[int, int] = {}
        self.held: dict[int, frozenset[int]] = {}
        #: stripe_heads active per hash list, one per row (the kernel's ``active_stripes``
        #: by hash: a row the model gives a second stripe while its I/O is in flight is
        #: one stripe_head there)
        self.rows = [0] * n

    def holds(self, msec: int) -> bool:
        """The row's stripe_head is in the cache (find_get_stripe finds it: no init_stripe)."""
        return msec in self.inactive[self.hash_of(msec)]

    def peek(self, msec: int) -> frozenset[int]:
        """The row's up-to-date blocks as the cache holds them now (nothing activated)."""
        up = self.held.get(msec)
        return up if up is not None else self.inactive[self.hash_of(msec)].get(msec, frozenset())

    def would_wait(self, msec: int) -> bool:
        """``raid5_get_active_stripe`` would sleep for the row: it has no stripe_head, active
        or inactive in the hash (``find_get_stripe``), and its hash list has no free one
        (``get_free_stripe`` finds ``inactive_list[hash]`` empty: every stripe_head of the
        list is active), so the writer sets R5_INACTIVE_BLOCKED and sleeps on
        ``conf->wait_for_stripe``."""
        h = self.hash_of(msec)
        if msec in self.live or msec in self.inactive[h]:
            return False
        return not self.inactive[h] and self.rows[h] >= self.cap[h]

    @staticmethod
    def hash_of(msec: int) -> int:
        return (msec >> 3) & (NR_STRIPE_HASH_LOCKS - 1)

    def get(self, msec: int) -> frozenset[int]:
        """Activate the row's stripe_head: the member blocks it still holds up to date."""
        h = self.hash_of(msec)
        lst = self.inactive[h]
        up = lst.pop(msec, None)
        if up is None:
            up = frozenset()
            if lst and len(lst) + self.active[h] >= self.cap[h]:
                lst.popitem(last=False)
        self.active[h] += 1
        if msec not in self.live:
            self.rows[h] += 1
        self.live[msec] = self.live.get(msec, 0) + 1
        return up

    def join(self, msec: int) -> None:
        """Another model stripe of a row whose stripe_head is active: the kernel's one
        stripe_head, which keeps the row's pages (no ``init_stripe``, nothing evicted). Its
        :meth:`put` is counted like any other; until the last one, the pages are held
        (:meth:`peek`), on no inactive list."""
        h = self.hash_of(msec)
        self.active[h] += 1
        if msec not in self.live:
            self.rows[h] += 1
        self.live[msec] = self.live.get(msec, 0) + 1

    def put(self, msec: int, up: frozenset[int]) -> None:
        """Release the row's stripe_head (its I/O done) to the tail of its inactive list."""
        h = self.hash_of(msec)
        self.active[h] = max(self.active[h] - 1, 0)
        left = self.live.get(msec, 0) - 1
        if left > 0:
            self.live[msec] = left
            self.held[msec] = up
            return
        if self.live.pop(msec, None) is not None:
            self.rows[h] -= 1
        self.held.pop(msec, None)
        lst = self.inactive[h]
        lst.pop(msec, None)
        lst[msec] = up


class R5Stripe:
    """A raid5 ``stripe_head``: one 4 KiB row of every member, and who waits for it."""

    __slots__ = ("node", "msec", "pd", "qd", "written", "wanted", "pieces", "units",
                 "remaining", "phase", "pid", "array_sector", "up", "uptodate", "preread",
                 "full", "owner", "due", "opf", "due_mask", "block_pieces", "reload",
                 "after", "batch_ready", "born", "filled", "late", "walk", "delay_traced",
                 "held_to")

    def __init__(self, node: Node, msec: int, pd: int, pid: int, qd: int = -1) -> None:
        self.node = node
        self.msec = msec
        self.pd = pd
        #: raid6's Q disk (-1 for raid5)
        self.qd = qd
        self.written: dict[int, int] = {}  # member index -> bitmask of the 8 sectors
        #: reads of a degraded array (no chunk_aligned_read): member index -> wanted
        self.wanted: set[int] = set()
        self.array_sector: dict[int, int] = {}  # member index -> array sector of the row
        self.pieces: list[MdPiece] = []
        self.units: list[Unit] = []
        self.remaining = 0
        self.phase = 0  # 0 pending, 1 reading, 2 writing
        self.pid = pid
        self.up: MdPiece | None = None
        #: member blocks whose page is up to date (from the stripe cache, read, or written)
        self.uptodate: set[int] = set()
        #: STRIPE_PREREAD_ACTIVE: may read for a partial write now (a REQ_SYNC write, or
        #: activated from the delayed list)
        self.preread = False
        #: raid5d's handling at ``due`` is one the trace shows delaying the row
        self.delay_traced = False
        #: a row the trace shows delayed: when the trace's next handling reads it (then
        #: activated, ``Engine._hold_delayed``); -1 none (the preread count decides)
        self.held_to = -1
        #: counted in pending_full_writes (written with no reads)
        self.full = False
        #: the thread whose plug holds the stripe (STRIPE_ON_UNPLUG_LIST on its
        #: ``raid5_plug_cb`` list), or None once released to raid5d (see ``raid5_unplug``)
        self.owner: int | None = None
        #: when raid5d gets to the row (see ``Engine._raid5d_due``); -1 not yet asked
        self.due = -1
        #: member index -> RWBS bits of the write bio that fills its block (``towrite``)
        self.opf: dict[int, int] = {}
        #: the members raid5d's handling at ``due`` wrote, as the trace shows (0: unknown)
        self.due_mask = 0
        #: member index -> the pieces (and their units) waiting on that block
        self.block_pieces: dict[int, list[tuple[MdPiece, Unit | None]]] = {}
        #: take the stripe cache's up-to-date blocks again when handled (a row's later
        #: writes, split off while raid5d handled the earlier ones)
        self.reload = False
        #: created while another stripe_head of the row had its I/O in flight: the kernel's
        #: one stripe_head of the row, whose pages keep R5_UPTODATE after that I/O
        self.after = False
        #: STRIPE_BATCH_READY: set by init_stripe alone (a stripe_head found in the cache
        #: has not got it), cleared when raid5d first handles the stripe (clear_batch_ready)
        self.batch_ready = True
        #: when the stripe was made (the model's clock)
        self.born = 0
        #: the order in which it became a full-stripe write (``stripe_can_batch`` first
        #: true as ``add_stripe_bio`` added its last block); -1 not (yet) full
        self.filled = -1
        #: data blocks (member indexes) whose ``towrite`` came after the handling at hand
        #: began (``Engine._defer_late_blocks``): left out of its rmw/rcw choice
        self.late: list[int] = []
        #: the trace's ``ops_run_io`` walk that wrote this handling of the row, where the
        #: replay runs on its own clock (``Engine.r5_write_walk``): (its rank among raid5d's
        #: write walks, whether it wrote the next row too); None: not known
        self.walk: tuple[int, bool] | None = None


class MirrorRead(MdPiece):
    """A raid1/raid10 read clone's piece: when it ends, ``update_head_pos`` moves the chosen
    member's head and its ``nr_pending`` drops (read_balance reads both)."""

    __slots__ = ("member", "end")

    def __init__(self, dev: int, sector: int, nr: int, rwbs: int, up: MdPiece | None,
                 pid: int, member: int, end: int) -> None:
        super().__init__(dev, sector, nr, rwbs, up, pid)
        self.member = member
        #: where the member's head is when the read is done (``update_head_pos``: the
        #: r1_bio's sector + sectors, raid10's copy address + sectors)
        self.end = end


#: a raid1 member head "somewhere else" at the trace's start (Engine.seed_read_balance): no
#: read starts there and every read is nearer to a known head
_HEAD_ELSEWHERE = 1 << 62



class MirrorState:
    """Per-member read_balance state of one raid1/raid10 array (``struct raid1_info``)."""

    __slots__ = ("head", "next_seq", "pending")

    def __init__(self, n: int) -> None:
        self.head = [0] * n  # head_position: member sector after the last completed read
        self.next_seq = [0] * n  # next_seq_sect: where a sequential read would continue
        self.pending = [0] * n  # nr_pending: read clones in flight


class Unit:
    """One plug's worth of bios of one thread (an application I/O or a trace plug group)."""

    __slots__ = ("thread", "outstanding", "submitted", "index")

    def __init__(self, thread: Any, index: int) -> None:
        self.thread = thread
        self.outstanding = 0
        self.submitted = False
        self.index = index


def _server_for(node: Node, lim: QueueLimits) -> Any:
    """A device server from the timing engineer's model, or a simple fallback."""
    try:
        from workers.model.device import device_from_spec
        from workers.model.server import DeviceServer
    except ImportError:  # pragma: no cover - the timing module is part of the package
        return _FallbackServer()
    spec = node.device
    if spec is None:
        spec = "hdd" if lim.rotational else "nvme"
    return DeviceServer(device_from_spec(spec))


class _FallbackServer:
    """Fallback service: 100 us per request plus 500 MB/s transfer, one at a time."""

    def __init__(self) -> None:
        self.free = 0

    def submit(self, t: int, sector: int, nr_sectors: int, is_write: bool,
               is_discard: bool = False) -> int:
        start = max(t, self.free)
        self.free = start + 100_000 + (nr_sectors * 512 * 2)
        return self.free


def discard_member_range(disk: int, chunk: int, first: int, last: int, start_disk: int,
                         start_off: int, end_disk: int, end_off: int) -> tuple[int, int]:
    """One member's part ``[start, end)`` (member sectors) of a discard over whole stripes.

    ``raid0_handle_discard`` and ``raid10_handle_discard`` (which copies it) compute it alike:
    members before the start disk begin at the next stripe, the start disk at the start's
    offset, the others at the first stripe; the end mirrors that. ``first`` / ``last`` are the
    stripes of the start and end, ``start_off`` / ``end_off`` their offsets on their disks.
    """
    return (_discard_edge(disk, chunk, first, start_disk, start_off),
            _discard_edge(disk, chunk, last, end_disk, end_off))


def _discard_edge(disk: int, chunk: int, stripe: int, edge_disk: int, edge_off: int) -> int:
    """Where one edge (start or end) of a discard falls on ``disk``: the next stripe on a
    member before the edge's disk, the edge's offset on that disk, the stripe after it."""
    if disk < edge_disk:
        return (stripe + 1) * chunk
    if disk > edge_disk:
        return stripe * chunk
    return edge_off


class Engine:
    """The replay state machine (see the module docstring)."""

    def __init__(self, stack: Stack, policy: Policy, *, record: bool = True,
                 servers: dict[int, Any] | None = None) -> None:
        self.stack = stack
        self.policy = policy
        self.nodes = stack.by_dev()
        self.limits: dict[int, QueueLimits] = all_limits(stack, policy)
        self.queues: dict[int, NoneQueue | DeadlineQueue] = {}
        self.servers: dict[int, Any] = {}
        self.inflight: dict[int, int] = {}
        #: requests allocated (G) and not yet freed, per disk, and the tag count they draw on
        self.alloc: dict[int, int] = {}
        self.tag_limit: dict[int, int] = {}
        #: how many times a request had to wait for a tag (both engines model the wait)
        self.tag_waits = 0
        #: raid5 stripe_heads waiting for the submitter's unplug, and stripes whose reads
        #: completed (their writes are issued at the next safe point, from raid5d)
        self.r5_pending: dict[tuple[int, int], R5Stripe] = {}
        self.r5_ready: list[R5Stripe] = []
        #: STRIPE_DELAYED stripe_heads (conf->delayed_list), and the counts that hold them
        #: back: preread_active_stripes and pending_full_writes (see _activate_delayed)
        self.r5_delayed: dict[tuple[int, int], R5Stripe] = {}
        self.r5_preread_active = 0
        self.r5_full_writes = 0
        #: start times of raid5d's runs per stripe row, from the trace
        #: (:func:`workers.model.raid5d_runs.raid5d_runs`), and the wake-ups already queued
        self.r5_runs: dict[int, list[int]] = {}
        #: for each of those runs, the members it wrote and read (bits)
        self.r5_writes: dict[int, list[int]] = {}
        self.r5_reads: dict[int, list[int]] = {}
        #: when raid5d's handle_stripe_dirtying traced a message for a row (raid5d_runs)
        self.r5_dirtied: dict[int, list[int]] = {}
        #: when raid5d put a row on the delayed list, as its "raid5 rcw S N Q 1" says
        self.r5_delay_msgs: dict[int, list[int]] = {}
        #: whether each of those runs wrote the next row in the same ops_run_io walk
        self.r5_linked: dict[int, list[bool]] = {}
        #: stripe row -> every member the trace shows raid5d reading for the row (bits), or
        #: None without such a trace; clock-free, so kept at any depth (see
        #: ``Engine._cached_before_trace``), and the rows the replay has handled since
        self.r5_read_any: dict[int, int] | None = None
        self.r5_seen: set[int] = set()
        #: stripe row -> raid5d's plug sessions that read it in the trace, one per handling
        #: (:func:`workers.model.raid5d_reads.read_plug_sessions`), used where raid5d's
        #: traced times are not (a synchronous reader on the model's own clock), and how
        #: many of the row's degraded reads the replay has handled
        self.r5_read_session: dict[int, list[int]] = {}
        self.r5_read_count: dict[int, int] = {}
        #: the same for the rows raid5d wrote as full-stripe writes (write_plug_sessions)
        self.r5_write_session: dict[int, list[int]] = {}
        self.r5_write_count: dict[int, int] = {}
        #: and for the reads a write's handling starts (rmw/rcw, dirtying_read_plug_sessions),
        #: numbered as r5_write_session's, and how many of a row's the replay has started
        self.r5_dirtying_session: dict[int, list[int]] = {}
        self.r5_dirtying_count: dict[int, int] = {}
        #: stripe row -> raid5d's write walks of the row in the trace, one per handling that
        #: wrote it: (rank of the walk among all of raid5d's write walks, whether it wrote
        #: the next row in the same walk), used where raid5d's traced times are not
        #: (:func:`workers.model.raid5d_runs.write_walks`), and how many the replay has taken
        self.r5_write_walk: dict[int, list[tuple[int, bool]]] = {}
        self.r5_walk_count: dict[int, int] = {}
        #: stripe row -> the ranks (among all of raid5d's handlings of written rows) of the
        #: trace's handlings of the row that read or wrote, in time order, where the replay
        #: runs on its own clock (:func:`workers.model.raid5d_runs.handling_ranks`), and how
        #: many of them the replay has taken (a read phase or a write of the row)
        self.r5_handling_rank: dict[int, list[int]] = {}
        self.r5_handling_count: dict[int, int] = {}
        #: stripes reading for a write (phase 1): later writes to the row join them
        self.r5_reading: dict[tuple[int, int], R5Stripe] = {}
        self.r5_wakes: set[int] = set()
        #: raid5d's plug kept open while reads it issued are in flight, where the trace wrote
        #: those rows in the plug session it last wrote in (:meth:`_hold_raid5d_plug`): the
        #: plug and that traced session; ``r5_plug_session`` is the traced session of the
        #: last write raid5d's current plug took
        self.r5_held: tuple[int, Plug] | None = None
        self.r5_plug_session = -1
        #: raid5d's plug sessions from the trace (start, end times) and the open one's plug
        self.r5_session_start: list[int] = []
        self.r5_session_end: list[int] = []
        self.r5_session: tuple[int, Plug] | None = None
        #: raid5d asleep inside a member bio (``Raid5dRuns.sleeps``): (member dev, sector,
        #: write) -> (start of the session it was queued in, when raid5d is back), the bios
        #: raid5d submits until then (stripe, member, op, rwbs) and when that is
        self.r5_sleeps: dict[tuple[int, int, bool], list[tuple[int, int]]] = {}
        #: the same by order alone, where the replay runs on its own clock
        #: (:func:`workers.model.raid5d_reads.write_plug_sleeps`): (member dev, sector) ->
        #: {occurrence of raid5d's write there: the traced plug session after the sleep},
        #: and how many writes raid5d has submitted to each such sector
        self.r5_write_sleeps: dict[tuple[int, int], dict[int, int]] = {}
        self.r5_write_bios: dict[tuple[int, int], int] = {}
        self.r5_asleep_until = -1
        self.r5_asleep: list[tuple[R5Stripe, int, int, int]] = []
        #: counts the stripes that became full-stripe writes (``R5Stripe.filled``)
        self.r5_fill_seq = 0
        self.r5_cache: dict[int, R5Cache] = {
            dev: R5Cache(node.stripe_cache) for dev, node in self.nodes.items()
            if node.kind in RAID456}
        #: array sector -> member dev of each raid10 read the input trace shows remapped
        #: (A): the copy read_balance chose there (see ``_read_balance``)
        self.mirror_hint: dict[int, int] = {}
        #: disks whose service model nobody named (``_server_for`` guessed it)
        self.guessed_device: set[int] = set()
        self.mirrors: dict[int, MirrorState] = {
            dev: MirrorState(len(node.members)) for dev, node in self.nodes.items()
            if node.kind in ("raid1", "raid10")}
        for dev, node in self.nodes.items():
            if node.kind in ("disk", "loop"):
                lim = self.limits[dev]
                self.queues[dev] = make_queue(lim)
                if node.kind == "disk":  # a loop device's "service" is its member's I/O
                    given = (servers or {}).get(dev)
                    self.servers[dev] = given or _server_for(node, lim)
                    if given is None and node.device is None:
                        # the disk model is a guess from the rotational flag: the trace's
                        # own service times are better evidence (untraced_completion)
                        self.guessed_device.add(dev)
                self.inflight[dev] = 0
                self.alloc[dev] = 0
                self.tag_limit[dev] = max(lim.nr_requests if lim.has_elevator
                                          else lim.queue_depth, 1)
        self.bio_list: list[deque[Bio]] | None = None
        self.plug: Plug | None = None
        #: plugs of threads between two of their bios (set by the replay driver)
        self.open_plugs: list[Plug] = []
        #: member bios a thread slept in before its request (rq_qos_throttle; from a trace:
        #: trace_plugs.member_request_sleeps), pid -> {(dev, sector, n-th Q there)}, and how
        #: many bios each thread has submitted to each (dev, sector)
        self.member_sleeps: dict[int, set[tuple[int, int, int]]] = {}
        self.member_q_count: dict[tuple[int, int, int], int] = {}
        #: completions (``kick``) and unit starts (the replay driver) in two heaps ordered by
        #: (time, hseq); the driver takes the smaller head, a thread sleeping for a tag only
        #: the completions
        self.heap: list[tuple[int, int, int, Any]] = []
        self.uheap: list[tuple[int, int, int, Any]] = []
        self.hseq = 0
        self.now = 0
        self.rid = 0
        self.record = record
        self.ev_rows: list[tuple[int, int, int, int, int, int, int, int, int]] = []
        self.on_unit_done: Callable[[Unit, int], None] | None = None
        self.n_requests = 0
        #: loop device -> file ranges its replayed direct writes converted to written
        self.loop_written: dict[int, WrittenRanges] = {}
        #: loop requests dispatched (``loop_queue_rq`` -> ``loop_queue_work``) that loop's
        #: worker has not handled yet, in dispatch order: (loop node, request, D time)
        self.loop_work: list[tuple[Node, Request, int]] = []
        #: the running unit has no plug at all, not even __submit_bio's (see insert_async)
        self.no_plug = False
        #: devices whose hardware queue run was left to kblockd, in run order
        self.deferred_runs: list[int] = []
        #: flush requests kblockd's worker dispatches (md_flush=inline: md_flush_request's
        #: member flushes, queued by blk_kick_flush while the submitter maps the data on)
        self.deferred_flushes: list[int] | None = None
        self.kblockd_flushes: list[int] = []
        #: the running no-plug unit's requests placed so far (G or merge, any blk-mq device)
        #: and the positions at which the trace shows kblockd's worker running a queue in
        #: between, (position, dev) ascending (:func:`workers.model.trace_plugs.kblockd_runs`:
        #: 2k before the k-th G/M, 2k + 1 between its G and its I)
        self.placed = 0
        self.kblockd_at: list[tuple[int, int]] = []
        #: requests the trace shows served, (dev, sector, nr, kind) -> [[D, C], ...], for a
        #: replay on the trace's clock (see ``traced_completion``); None: the device model
        self.served: dict[tuple[int, int, int, int], list[list[int]]] | None = None
        self.traced_latency: dict[tuple[int, int], list[tuple[int, int]]] = {}
        #: per (thread, queue) the trace's explicit U of each plug flush's batch for that
        #: queue, ascending, and per thread its Q times on the top device (see
        #: ``traced_batch_time``); empty: every batch goes out with the flush
        self.batch_unplugs: dict[tuple[int, int], list[int]] = {}
        self.q_times: dict[int, list[int]] = {}
        #: per thread, when the trace shows it handing over the last batch of its latest flush
        self.batch_until: dict[int, int] = {}
        #: dm-crypt's write thread (:meth:`crypt_queue`): per member device, the trace's plug
        #: sessions still to come (:func:`workers.model.crypt_write.crypt_write_sessions`),
        #: and the encrypted pieces waiting in ``cc->write_tree``, (sector, nr) -> clones
        self.crypt_sessions: dict[int, deque[tuple[int, list[tuple[int, int]]]]] = {}
        self.crypt_tree: dict[int, dict[tuple[int, int], deque[tuple[Bio, int, int]]]] = {}
        self.crypt_expected: dict[int, Counter[tuple[int, int]]] = {}

    def set_crypt_sessions(self, sessions: dict[int, list[tuple[int, list[tuple[int, int]]]]]
                           ) -> None:
        """dm-crypt's write thread sessions as the trace shows them (per member device: the
        pid and the pieces of each, in order; :func:`workers.model.crypt_write.
        crypt_write_sessions`)."""
        self.crypt_sessions = {dev: deque((pid, list(keys)) for pid, keys in ss)
                               for dev, ss in sessions.items()}
        self.crypt_expected = {dev: Counter(k for _, keys in ss for k in keys)
                               for dev, ss in sessions.items()}

    def set_traced_service(self, served: npt.NDArray[np.int64]) -> None:
        """Take the trace's served requests (:func:`workers.model.replay.traced_service`)."""
        self.served = {}
        lat: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for dev, sec, nr, kind, d, c in served.T.tolist():
            self.served.setdefault((dev, sec, nr, kind), []).append([d, c])
            lat.setdefault((dev, kind), []).append((nr, c - d))
        # per (device, kind): the trace's median D->C by request size, sizes ascending
        self.traced_latency = {}
        for key, pairs in lat.items():
            by: dict[int, list[int]] = {}
            for nr, dc in pairs:
                by.setdefault(nr, []).append(dc)
            self.traced_latency[key] = sorted(
                (nr, int(np.median(v))) for nr, v in by.items())

    def untraced_completion(self, dev: int, rq: Request, t: int) -> int | None:
        """When a request the trace does not have completes, on the trace's clock: after the
        D->C time the trace shows the device take for requests of its kind and the nearest
        size (the median over them). Under emulation the "disk" is the host's I/O thread,
        serving requests side by side in about the same time whatever their order; a
        disk model (an HDD for a virtio disk that says it is rotational) would queue them
        one behind another, and a replay that merged one request otherwise than the kernel
        then drifts further from the trace with every request (6.17.13
        r5_d6_c64_fio4M_qd4: 2.5 ms per 64 KiB read in the trace, hundreds of ms
        in the HDD model's backlog). None where the trace shows the device serve nothing of
        that kind. Used only for a disk whose service model was guessed (none named in the
        manifest or by the caller): a named device model serves what the trace lacks."""
        kind = 2 if is_discard_op(rq.op) else int(rq.op != OP_READ)
        table = self.traced_latency.get((dev, kind))
        if not table:
            return None
        sizes = [nr for nr, _ in table]
        k = bisect.bisect_left(sizes, rq.nr)
        cands = [j for j in (k - 1, k) if 0 <= j < len(table)]
        j = min(cands, key=lambda j: abs(table[j][0] - rq.nr))
        return t + table[j][1]

    def set_batch_unplugs(self, unplugs: Mapping[int, Mapping[int, npt.ArrayLike]],
                          q_times: Mapping[int, list[int]]) -> None:
        """Take the trace's per-queue U of each thread's plug flushes
        (:func:`workers.model.trace_plugs.queue_batch_unplugs`) and the threads' Q times."""
        self.batch_unplugs = {(int(p), int(d)): sorted(np.asarray(ts, np.int64).tolist())
                              for p, per in unplugs.items() for d, ts in per.items()}
        self.q_times = {int(p): sorted(ts) for p, ts in q_times.items()}

    def traced_batch_time(self, pid: int, dev: int) -> int | None:
        """When the trace shows thread ``pid``'s plug flush hand queue ``dev`` its batch.

        ``blk_mq_flush_plug_list`` hands a plug that holds several queues' requests over one
        queue at a time (``blk_mq_dispatch_plug_list``: the requests of the first request's
        hctx, ``trace_block_unplug`` with their count, ``blk_mq_insert_requests`` or
        ``blk_mq_try_issue_list_directly``; then the next queue's). The thread does that in
        its own context, and the trace's U of each batch says when it got to that queue:
        under emulation not at once (6.1.0-57 p_r0_d3_c64_writeback_16M: sync's flush-on-add
        at 17.8 ms gave 254,32 its request at 17.8 ms, 254,16 at 19.2 ms and 254,0 at
        22.3 ms, each once the previous batch's request had completed and its bios had
        ended on that CPU; meanwhile the flusher's requests reached 254,0 first). The batch's
        U is the first not yet used U of ``pid`` on ``dev`` from the thread's latest Q (the
        bio inside whose submission the flush runs, or the last one of a finished plug) up
        to its next one; None where the trace has none there (the direct path of one queue
        traces no U before 6.12)."""
        us = self.batch_unplugs.get((pid, dev))
        if not us:
            return None
        qt = self.q_times.get(pid, [])
        k = bisect.bisect_right(qt, self.now) - 1
        lo = qt[k] if k >= 0 else 0
        hi = qt[k + 1] if k + 1 < len(qt) else None
        j = bisect.bisect_left(us, lo)
        if j >= len(us) or (hi is not None and us[j] >= hi):
            return None
        return us.pop(j)

    def traced_completion(self, dev: int, rq: Request, t: int) -> int | None:
        """When a request the replay issues at ``t`` completes, where the trace shows the same
        request (device, sector, size, direction) served: the trace's C of the occurrence
        whose D is nearest ``t`` (each used once); None for a request the trace does not
        have (a patched policy's, or one the replay merged otherwise), which the device
        model serves.

        Under emulation the device's service is the host's I/O thread, which no model of a
        disk predicts: a member read that the model completes later than the trace moves the
        write phase of its stripe out of the traced raid5d session that wrote it (the row
        is then written whole with later blocks instead of once for the early one)."""
        assert self.served is not None
        kind = 2 if is_discard_op(rq.op) else int(rq.op != OP_READ)  # as traced_service's
        occ = self.served.get((dev, rq.sector, rq.nr, kind))
        if not occ:
            return None
        k = min(range(len(occ)), key=lambda j: abs(occ[j][0] - t))
        return occ.pop(k)[1]

    # --- recording ---------------------------------------------------------------------------
    def ev(self, dev: int, pid: int, act: int, rwbs: int, sector: int, nr: int, aux: int = 0,
           aux2: int = 0, t: int | None = None) -> None:
        if self.record:
            self.ev_rows.append((self.now if t is None else t, dev, pid, act, rwbs, sector, nr,
                                 aux, aux2))

    def tick(self) -> None:
        self.now += STEP_NS

    # --- accounting --------------------------------------------------------------------------
    @staticmethod
    def _count(bio: Bio) -> None:
        unit = bio.unit
        if isinstance(unit, Unit):
            unit.outstanding += 1
        if bio.up is not None:
            bio.up.remaining += 1

    def _release(self, bio: Bio, t: int) -> None:
        """A bio is finished (completed, or consumed into member bios)."""
        unit = bio.unit
        up: Any = bio.up
        if isinstance(up, R5Stripe):
            up.remaining -= 1
            if up.remaining == 0:
                self._stripe_io_done(up, t)
            up = None
        self._put_piece(up, t)
        if isinstance(unit, Unit):
            unit.outstanding -= 1
            if unit.outstanding == 0 and unit.submitted and self.on_unit_done is not None:
                self.on_unit_done(unit, t)

    def _put_piece(self, up: MdPiece | None, t: int) -> None:
        """One member bio of ``up`` ended: C on the stacked device when it was the last."""
        while up is not None:
            up.remaining -= 1
            if up.remaining > 0:
                break
            if isinstance(up, LoopCmd):  # the file I/O of a loop request is done
                for start, n in up.converts:
                    self.loop_written.setdefault(up.dev, WrittenRanges()).add(start, n)
                self.complete(up.rq, t)
                break
            if isinstance(up, MirrorRead):
                # raid1_end_read_request / raid10_end_read_request: update_head_pos, and
                # rdev_dec_pending
                st = self.mirrors[up.dev]
                st.pending[up.member] -= 1
                st.head[up.member] = up.end
            self.ev(up.dev, up.pid, ACT_COMPLETE, up.rwbs, up.sector, up.nr, t=t)
            up = up.up

    # --- submission ----------------------------------------------------------------------------
    def submit_bio(self, bio: Bio) -> None:
        """``submit_bio`` from a thread (the top of the stack)."""
        self._count(bio)
        self.submit_noacct(bio, split=False)
        if self.crypt_tree:
            self.crypt_flush_rest()

    def submit_flush(self, pid: int, rwbs: int, unit: Any = None) -> None:
        """An empty REQ_PREFLUSH bio (``blkdev_issue_flush``: fsync, sync, umount, mkfs)
        queued on the top device, down to every disk below it.

        ``md_flush_request`` sends an empty flush to every member in ``rdev_for_each``
        order: ``bind_rdev_to_array`` adds each rdev at the list head (``list_add_rcu``), so
        the last member bound comes first; device-mapper (``__send_empty_flush``) clones one
        per target device in table order. A disk with a volatile write cache gets the flush
        request of ``blk_insert_flush`` (REQ_FSEQ_PREFLUSH alone: no data), which
        ``blk_kick_flush`` dispatches ahead of queued requests (D of 0 sectors, ``FN``);
        without one, ``submit_bio_noacct`` ends the bio before it is queued (no Q).
        """
        self._flush_to(self.stack.top, pid, rwbs, top=True)

    def _flush_to(self, node: Node, pid: int, rwbs: int, *, top: bool = False) -> None:
        if node.kind == "disk":
            if not write_back(node.limits):
                return
            self.ev(node.dev, pid, ACT_QUEUE, rwbs, 0, 0)
            self.tick()
            self.ev(node.dev, pid, ACT_GETRQ, rwbs, 0, 0)
            self.tick()
            self._flush_request(node.dev, pid)
            return
        if top:
            self.ev(node.dev, pid, ACT_QUEUE, rwbs, 0, 0)
            self.tick()
        self._flush_members(node, pid, rwbs)

    def _flush_members(self, node: Node, pid: int, rwbs: int) -> None:
        """The empty flush bios a stacked device sends to its members for a REQ_PREFLUSH bio:
        ``md_flush_request`` (``rdev_for_each``: newest bound first), dm's
        ``__send_empty_flush`` (table order)."""
        if node.kind not in RAID_FLUSH_KINDS:
            return  # a loop device's flush is its file system's fsync (traced on the disk)
        members = list(enumerate(node.members))
        if not node.approximates:
            members.reverse()  # md: rdev_for_each, newest bound first
        for i, member in members:
            if i in node.failed:
                continue
            self._flush_to(member, pid, (rwbs | RWBS_WRITE | RWBS_FLUSH) & ~RWBS_SYNC, top=True)

    def _flush_request(self, dev: int, pid: int, t: int | None = None) -> None:
        """The flush request of ``blk_insert_flush`` / ``blk_kick_flush`` (0 sectors, FN),
        dispatched ahead of the queue (by kblockd's worker, :meth:`run_deferred`, while
        ``deferred_flushes`` collects them)."""
        if self.deferred_flushes is not None and t is None:
            self.deferred_flushes.append(dev)
            return
        self.ev(dev, pid, ACT_ISSUE, RWBS_FLUSH | RWBS_NONE, 0, 0, t=t)
        self.ev(dev, 0, ACT_COMPLETE, RWBS_FLUSH | RWBS_NONE, 0, 0, t=t)
        if t is None:
            self.tick()

    def submit_noacct(self, bio: Bio, split: bool) -> None:
        """``submit_bio_noacct_nocheck``."""
        if bio.fresh:
            self.ev(bio.dev, bio.pid, ACT_QUEUE, bio.rwbs, bio.sector, bio.nr)
            self.tick()
            bio.fresh = False
        bl = self.bio_list
        if bl is not None:
            if split and self.policy.split_remainder == "head":
                bl[0].appendleft(bio)
            else:
                bl[0].append(bio)
            return
        if self.nodes[bio.dev].bio_based:
            self._noacct(bio)
        else:
            self._noacct_mq(bio)

    def _noacct_mq(self, bio: Bio) -> None:
        """``__submit_bio_noacct_mq``: one list, FIFO."""
        bl: list[deque[Bio]] = [deque(), deque()]
        self.bio_list = bl
        cur: Bio | None = bio
        while cur is not None:
            self._submit(cur)
            cur = bl[0].popleft() if bl[0] else None
        self.bio_list = None

    def _noacct(self, bio: Bio) -> None:
        """``__submit_bio_noacct``: lower level first, then same level, then pending."""
        bl: list[deque[Bio]] = [deque(), deque()]
        self.bio_list = bl
        cur: Bio | None = bio
        while cur is not None:
            q = cur.dev
            bl[1] = bl[0]
            bl[0] = deque()
            self._submit(cur)
            new = bl[0]
            if new:
                lower = [b for b in new if b.dev != q]
                same = [b for b in new if b.dev == q]
                merged: deque[Bio] = deque(lower)
                merged.extend(same)
                merged.extend(bl[1])
                bl[0] = merged
            else:
                bl[0] = bl[1]
            bl[1] = deque()
            cur = bl[0].popleft() if bl[0] else None
        self.bio_list = None

    def _submit(self, bio: Bio) -> None:
        """``__submit_bio``: the driver's ->submit_bio or blk_mq_submit_bio."""
        node = self.nodes.get(bio.dev)
        if node is None:
            raise KeyError(f"bio for unknown device {bio.dev}")
        if node.kind in ("disk", "loop"):
            self.mq_submit(node, bio)
        elif node.kind == "cache":
            self.cache_submit(node, bio)
        else:
            self.md_submit(node, bio)

    # --- splitting -------------------------------------------------------------------------------
    def _split_to_limits(self, bio: Bio, lim: QueueLimits) -> Bio:
        """``bio_split_to_limits`` + ``bio_submit_split``: returns the front to go on with.

        A write-zeroes bio is cut at max_write_zeroes_sectors, and at the queue's
        chunk_sectors boundaries only under ``write_zeroes_chunk=on`` (60dc5ea6bcfd, v6.13:
        ``bio_split_write_zeroes`` through ``get_max_io_size``; before, a plain ``bio_split``
        at the limit).
        """
        if bio.op == OP_WRITE_ZEROES and lim.chunk_sectors and \
                self.policy.write_zeroes_chunk == "off":
            lim = dataclasses.replace(lim, chunk_sectors=0)
        f = front_len(bio.sector, bio.nr, lim, bio.op, bio.off, bio.seg, bio.layout)
        if f >= bio.nr:
            return bio
        # blk_add_trace_split records the split (front) bio: its sector and size, and where
        # the remainder starts
        self.ev(bio.dev, bio.pid, ACT_SPLIT, bio.rwbs, bio.sector, f, aux=bio.sector + f)
        self.tick()
        front = bio.piece(f)
        front.flags |= F_NOMERGE
        self._count(front)
        bio.advance(f)
        self.submit_noacct(bio, split=True)
        return front

    def _personality_split(self, bio: Bio, nr: int) -> Bio:
        """Plain ``bio_split`` + chain + resubmit (md personalities; X only from 6.18's
        ``bio_submit_split_bioset``, which comes with ``split_remainder=head``)."""
        if self.policy.split_remainder == "head":
            self.ev(bio.dev, bio.pid, ACT_SPLIT, bio.rwbs, bio.sector, nr, aux=bio.sector + nr)
            self.tick()
        front = bio.piece(nr)
        self._count(front)
        bio.advance(nr)
        self.submit_noacct(bio, split=True)
        return front

    # --- stacked drivers ---------------------------------------------------------------------------
    def _remap(self, node: Node, bio: Bio, member: Node, msec: int, nr: int, piece: MdPiece,
               *, rwbs: int | None = None, flags: int | None = None, off: int = 0) -> None:
        """Clone ``bio``'s range to a member (A event) and submit it (Q)."""
        child = Bio(member.dev, msec, nr, bio.op, bio.rwbs if rwbs is None else rwbs,
                    bio.flags if flags is None else flags, bio.unit, piece, bio.off + off,
                    bio.seg, bio.pid, fresh=True, layout=bio.layout)
        self._count(child)
        self.ev(member.dev, bio.pid, ACT_REMAP, child.rwbs, msec, nr,
                aux=bio.sector + (off >> 9), aux2=node.dev)
        self.tick()
        self.submit_noacct(child, split=False)

    def _piece(self, node: Node, bio: Bio) -> MdPiece:
        p = MdPiece(node.dev, bio.sector, bio.nr, bio.rwbs, bio.up, bio.pid)
        if bio.up is not None:
            bio.up.remaining += 1
        return p

    def md_submit(self, node: Node, bio: Bio) -> None:
        """``md_submit_bio`` then the personality.

        A dm target modelled as an md personality (``node.approximates`` ``dm-*``) goes through
        ``dm_split_and_process_bio`` instead, which calls ``bio_split_to_limits`` for abnormal
        I/O only (``is_abnormal_io``: discard, secure erase, write zeroes): reads and writes are
        cut at target boundaries (``max_io_len``, ``dm_accept_partial_bio``; the personality
        below) and then by the member's own ``blk_mq_submit_bio``, never by dm's stacked
        limits (6.1's dm-crypt advertises max_segment_size = PAGE_SIZE, so 254 segments hold
        1016 KiB, yet a 1 MiB read of a contiguous buffer reaches the member whole).
        """
        lim = self.limits[node.dev]
        if bio.rwbs & RWBS_FLUSH and bio.nr > 0 and node.kind in RAID_FLUSH_KINDS:
            # md_flush_request: an empty REQ_PREFLUSH bio to every member first, then the bio
            # without REQ_PREFLUSH (REQ_FUA stays: the member's flush machinery,
            # :meth:`mq_submit`). md_flush=work (<= 6.11): from md's flush work, the data
            # after they complete (md_submit_flush_data); inline (6.12+): chained to the bio
            # and submitted at once, their flush requests left to kblockd (run_deferred)
            if self.policy.md_flush == "inline" and not node.approximates:
                self.deferred_flushes = self.kblockd_flushes
            self._flush_members(node, bio.pid, bio.rwbs)
            self.deferred_flushes = None
            bio.rwbs &= ~RWBS_FLUSH
        if not node.approximates.startswith("dm-") or \
                bio.op in (OP_DISCARD, OP_SECURE_ERASE, OP_WRITE_ZEROES):
            bio = self._split_to_limits(bio, lim)
        if self.policy.split_nomerge == "cleared_by_md":
            bio.flags &= ~F_NOMERGE
        if node.kind in RAID456:
            self.raid5_request(node, bio)
        elif node.kind == "raid0":
            self.raid0_request(node, bio)
        elif node.kind == "raid1":
            self.raid1_request(node, bio)
        elif node.kind == "raid10":
            self.raid10_request(node, bio)
        else:
            self.linear_request(node, bio)

    def raid5_request(self, node: Node, bio: Bio) -> None:
        """``raid5_make_request`` (raid4/5/6): aligned reads per chunk (``chunk_aligned_read``,
        only while the array is not degraded); writes, and reads of a degraded array, per chunk
        through the stripe cache."""
        c = node.chunk_sectors
        left = c - bio.sector % c
        if left < bio.nr:
            bio = self._personality_split(bio, left)
        n = len(node.members)
        if node.kind == "raid6":
            disk, msec, pd, qd = raid6_map(bio.sector, c, n, node.layout)
        else:
            (disk, msec, pd), qd = raid5_map(bio.sector, c, n, node.layout), -1
        piece = self._piece(node, bio)
        if bio.op == OP_WRITE:
            self._raid5_add_write(node, bio, disk, msec, pd, piece, qd)
        elif node.failed:
            self._raid5_add_read(node, bio, disk, msec, pd, piece, qd)
        else:
            self._remap(node, bio, node.members[disk], msec + node.data_offset, bio.nr, piece)
        self._release(bio, self.now)

    # --- raid1 / raid10 ---------------------------------------------------------------------------
    def _read_balance(self, node: Node, copies: list[tuple[int, int]], nr: int,
                      sector: int = -1) -> int:
        """Which copy a read goes to (an index into ``copies`` = (member, member sector)).

        raid1 (``read_balance``, from 6.9 ``choose_best_rdev``): a member whose
        ``next_seq_sect`` or head is the read's start keeps a sequential stream, found anywhere
        in the scan (``md_read_balance=scan``, every kernel); else the least busy
        (non-rotational members, or an idle one), else the nearest head. ``first_idle`` (a
        what-if, no kernel's rule) stops the scan at the first idle member. Its state at the
        trace's start comes from the trace (:meth:`seed_read_balance`). raid10 (``read_balance``): near copies on an idle member count as distance
        0, far layouts always take the lowest address, otherwise the nearest head; an all
        non-rotational array takes the least busy copy. Failed members are skipped.

        A raid10 read whose copy the input trace shows (its A event, ``mirror_hint``) goes
        there: raid10's choice hangs on ``nr_pending`` and ``head_position``, which change when
        earlier reads complete, a race the model's clock does not reproduce. raid1 keeps its
        rules always, so that a what-if of ``md_read_balance`` still changes the choice.
        """
        st = self.mirrors[node.dev]
        nonrot = all(not self.limits[m.dev].rotational for m in node.members)
        live = [(k, m, a) for k, (m, a) in enumerate(copies) if m not in node.failed]
        if not live:
            raise ModelConfigError(f"{node.name}: every copy of the read is on a failed member")
        want = self.mirror_hint.get(sector) if node.kind == "raid10" else None
        if want is not None:
            # the trace's A event shows the copy the kernel chose: its choice hung on
            # completion times (nr_pending, head_position) the model cannot reproduce
            for k, m, _a in live:
                if node.members[m].dev == want:
                    return k
        if node.kind == "raid10":
            near, far, _o = raid10_geometry(node.layout)
            best, best_dist, pend, min_pend = live[0][0], None, live[0][0], None
            for k, m, a in live:
                p = st.pending[m]
                if min_pend is None or p < min_pend:
                    min_pend, pend = p, k
                if near > 1 and p == 0:
                    dist = 0
                elif far > 1:
                    dist = a
                else:
                    dist = abs(a - st.head[m])
                if best_dist is None or dist < best_dist:
                    best_dist, best = dist, k
            return pend if nonrot else best
        first_idle = self.policy.md_read_balance == "first_idle"
        best_pend, min_pend, best_dist_k, best_dist = -1, None, live[0][0], None
        for k, m, a in live:
            if st.next_seq[m] == a or st.head[m] == a:
                return k
            p = st.pending[m]
            if first_idle and p == 0:
                return k
            if min_pend is None or p < min_pend:
                min_pend, best_pend = p, k
            dist = abs(a - st.head[m])
            if best_dist is None or dist < best_dist:
                best_dist, best_dist_k = dist, k
        if best_pend >= 0 and (nonrot or min_pend == 0):
            return best_pend
        return best_dist_k

    def seed_read_balance(self, node: Node, sector: int, member_dev: int) -> None:
        """raid1's ``read_balance`` state at the trace's start, from the trace's first read.

        ``head_position`` and ``next_seq_sect`` (``struct raid1_info``) carry what happened
        before the trace: udev's blkid probe of a new array reads its start and its end through
        md (``update_head_pos`` / ``update_read_sectors``), mdadm and earlier workloads read
        too. None of it is in the trace, so an array taken as fresh (every head at 0) sends the
        first read to the first member, where the kernel's probe had moved that member's head
        away and ``is_sequential`` (``head_position == r1_bio->sector``) kept the idle second
        member (7.2 r1_d2_dd1M: every read on vdb). The member the trace's first read went to
        (its A event) has its head there; the others keep ``setup_conf``'s head_position 0
        (nothing says a read reached them: blkdiscard's own blkid probe of a new raid1 reads
        the array's start from the second member, 6.18.15 p2_r1_d2_blkdiscard), except a
        member the scan would have stopped at before the chosen one (a first read of sector
        0), taken to be elsewhere (no position any read starts at, and far from all). Only
        the start is seeded: every later choice follows the rules, so a what-if of
        ``md_read_balance`` still changes it.
        """
        st = self.mirrors.get(node.dev)
        if st is None:
            return
        chosen = [i for i, m in enumerate(node.members)
                  if m.dev == member_dev and i not in node.failed]
        if not chosen:
            return
        c = chosen[0]
        for i in range(len(node.members)):
            if i == c:
                pos = sector
            elif sector == 0 and i < c:
                # head 0 here would have made this member sequential for a read at 0,
                # and the scan would have stopped at it before reaching the chosen one
                pos = _HEAD_ELSEWHERE
            else:
                # raid1's setup_conf: head_position 0 (next_seq_sect 0 from kzalloc) until a
                # read completes on the member; nothing in the trace says it moved
                pos = 0
            st.head[i] = pos
            st.next_seq[i] = pos

    def _mirror_read(self, node: Node, bio: Bio, copies: list[tuple[int, int]]) -> None:
        k = self._read_balance(node, copies, bio.nr, bio.sector)
        member, msec = copies[k]
        st = self.mirrors[node.dev]
        st.pending[member] += 1
        # update_read_sectors: next_seq_sect at submission; the head moves when the read is
        # done (update_head_pos, at the MirrorRead's completion)
        st.next_seq[member] = msec + bio.nr
        piece = MirrorRead(node.dev, bio.sector, bio.nr, bio.rwbs, bio.up, bio.pid, member,
                           msec + bio.nr)
        if bio.up is not None:
            bio.up.remaining += 1
        self._remap(node, bio, node.members[member], msec + node.data_offset, bio.nr, piece)
        self._release(bio, self.now)

    def _mirror_write(self, node: Node, bio: Bio, copies: list[tuple[int, int]]) -> None:
        """A write (or discard) goes to every working copy, in md's slot order."""
        piece = self._piece(node, bio)
        for member, msec in copies:
            if member in node.failed:
                continue
            self._remap(node, bio, node.members[member], msec + node.data_offset, bio.nr, piece)
        self._release(bio, self.now)

    def raid1_request(self, node: Node, bio: Bio) -> None:
        """``raid1_make_request``: a read goes to one member chosen by ``read_balance``, a write
        to every member (each clone A then Q on its member).

        With ``raid1_barrier=units`` (v4.11+) a bio is first cut at the end of its barrier
        unit (``align_to_barrier_unit_end``, BARRIER_UNIT_SECTOR_SIZE = 1 << 17 sectors,
        64 MiB of the array): raid1's I/O barrier (``wait_barrier`` / ``wait_read_barrier``)
        counts pending I/O per unit, so ``raid1_read_request`` / ``raid1_write_request``
        ``bio_split`` the rest off and resubmit it. A discard too: mkfs's BLKDISCARD of a
        whole 2 x 1 GiB raid1 reaches each member as 64 MiB discards (6.12.117
        p_r1_d2_fstrim: md0 X at 131072, 262144, ...).
        """
        if self.policy.raid1_barrier == "units":
            left = RAID1_BARRIER_UNIT - bio.sector % RAID1_BARRIER_UNIT
            if left < bio.nr:
                bio = self._personality_split(bio, left)
        copies = [(i, bio.sector) for i in range(len(node.members))]
        if bio.op == OP_READ:
            self._mirror_read(node, bio, copies)
        else:
            self._mirror_write(node, bio, copies)

    def raid10_request(self, node: Node, bio: Bio) -> None:
        """``raid10_make_request``: split at the chunk boundary (the remainder resubmitted), then
        a read to one copy (``read_balance``) or a write to every copy (``raid10_find_phys``)."""
        c = node.chunk_sectors
        n = len(node.members)
        near, _far, _o = raid10_geometry(node.layout)
        if is_discard_op(bio.op) and self.policy.raid10_discard == "per_member" and \
                self.raid10_discard(node, bio):
            return
        left = c - bio.sector % c
        if left < bio.nr and near < n:  # near copies on every disk: no chunk to cross
            bio = self._personality_split(bio, left)
        dev_sectors = min(node.member_size(i) for i in range(n))
        copies = raid10_copies(bio.sector, c, n, node.layout, dev_sectors)
        if bio.op == OP_READ:
            self._mirror_read(node, bio, copies)
        else:
            self._mirror_write(node, bio, copies)

    def raid10_discard(self, node: Node, bio: Bio) -> bool:
        """``raid10_handle_discard`` (drivers/md/raid10.c, 5.13+): one discard per member.

        A discard of fewer than two stripes (``stripe_size``: ``raid_disks / near_copies +
        raid_disks % near_copies`` chunks) is not handled here (False: ``-EAGAIN``, the
        chunk-by-chunk path of a write). Otherwise the part before the first stripe boundary
        is split off and resubmitted (``bio_split`` + ``submit_bio_noacct(split)``), then the
        part after the last one (``submit_bio_noacct(bio)``); for the stripes between, every
        member in slot order (``for (disk = 0; disk < geo->raid_disks; disk++)``) gets one
        discard of its range, ``md_submit_discard_bio`` (A, then ``submit_bio_noacct``: Q),
        once per far copy (``geo->stride`` further, a new r10_bio each). The members' requests
        then leave the submitter's plug one by one: each new one makes ``blk_add_rq_to_plug``
        flush the previous (BLK_PLUG_FLUSH_SIZE), so the members are issued 0, 1, 2, ...
        """
        c = node.chunk_sectors
        n = len(node.members)
        near, far, offset = raid10_geometry(node.layout)
        stripe = (n // near + n % near) * c
        if bio.nr < 2 * stripe:
            return False
        head = bio.sector % stripe
        if head:
            front = bio.piece(stripe - head)
            self._count(front)
            bio.advance(stripe - head)
            self.submit_noacct(front, split=False)
        tail = (bio.sector + bio.nr) % stripe
        if tail:
            mid = bio.piece(bio.nr - tail)
            self._count(mid)
            bio.advance(bio.nr - tail)
            self.submit_noacct(bio, split=False)
            bio = mid
        start, end = bio.sector, bio.sector + bio.nr
        first, sdi = divmod(start // c * near, n)
        last, edi = divmod(end // c * near, n)
        if offset:
            first, last = first * far, last * far
        sdo, edo = start % c + first * c, end % c + last * c
        dev_sectors = min(node.member_size(i) for i in range(n))
        stride = raid10_stride(node.layout, c, n, dev_sectors)
        piece = self._piece(node, bio)
        for copy in range(1 if offset else far):
            step = copy * stride
            for disk in range(n):
                ds, de = discard_member_range(disk, c, first, last, sdi, sdo, edi, edo)
                if de <= ds or disk in node.failed:
                    continue
                self._remap(node, bio, node.members[disk], ds + step + node.data_offset,
                            de - ds, piece)
        self._release(bio, self.now)
        return True

    # --- raid5 stripe cache (writes) -------------------------------------------------------------
    def raid5_would_wait(self, dev: int, sector: int, nr: int, op: int) -> bool:
        """Whether a write of ``nr`` sectors at ``sector`` to array ``dev`` would sleep in
        ``raid5_get_active_stripe`` now, for lack of a free stripe_head (see
        :meth:`R5Cache.would_wait`): ``make_stripe_request`` asks for each 4 KiB row's
        stripe_head in turn; a row with a stripe_head on the model's lists (on a plug,
        reading, delayed) or in the cache never waits. False for anything but a write to a
        raid4/5/6 array."""
        node = self.nodes.get(dev)
        if node is None or node.kind not in RAID456 or op != OP_WRITE:
            return False
        cache = self.r5_cache[dev]
        c = node.chunk_sectors or STRIPE_SECTORS
        n = len(node.members)
        s, end = sector, sector + nr
        while s < end:
            if node.kind == "raid6":
                msec = raid6_map(s, c, n, node.layout)[1]
            else:
                msec = raid5_map(s, c, n, node.layout)[1]
            row = msec - msec % STRIPE_SECTORS
            key = (dev, row)
            if key not in self.r5_pending and key not in self.r5_reading and \
                    key not in self.r5_delayed and cache.would_wait(row):
                return True
            s = s - s % STRIPE_SECTORS + STRIPE_SECTORS
        return False

    def _raid5_add_write(self, node: Node, bio: Bio, disk: int, msec: int, pd: int,
                         piece: MdPiece, qd: int = -1) -> None:
        """``add_stripe_bio`` for every 4 KiB row of a write piece inside one chunk."""
        self._raid5_add_bio(node, bio, disk, msec, pd, piece, qd, write=True)

    def _raid5_add_read(self, node: Node, bio: Bio, disk: int, msec: int, pd: int,
                        piece: MdPiece, qd: int) -> None:
        """A read of a degraded array: ``add_stripe_bio`` per 4 KiB row; ``fetch_block`` then
        reads the wanted block where its disk works, and every other working block of the row
        where it does not (to compute it from the rest and the parity)."""
        self._raid5_add_bio(node, bio, disk, msec, pd, piece, qd, write=False)

    def _raid5_add_bio(self, node: Node, bio: Bio, disk: int, msec: int, pd: int,
                       piece: MdPiece, qd: int, *, write: bool) -> None:
        """``add_stripe_bio`` per 4 KiB row of a piece inside one chunk: the rows' stripe_heads
        learn which blocks are written (a bitmask per member) or wanted, and who waits."""
        unit = bio.unit if isinstance(bio.unit, Unit) else None
        end = msec + bio.nr
        s = msec - msec % STRIPE_SECTORS
        while s < end:
            key = (node.dev, s)
            lo, hi = max(s, msec), min(s + STRIPE_SECTORS, end)
            mask = ((1 << (hi - lo)) - 1) << (lo - s)
            if write:
                self._refuse_overlap(key, disk, mask)
            sh = self.r5_pending.get(key)
            if sh is None and write:
                # add_stripe_bio on a stripe_head still reading for an earlier write: the
                # new block waits in towrite, and the write phase after the reads
                # (handle_stripe again) carries it too
                sh = self.r5_reading.get(key)
            if sh is None:
                sh = self.r5_delayed.pop(key, None)
                if sh is not None:  # more writes for a delayed row: looked at again
                    self.r5_pending[key] = sh
            if sh is None:
                sh = self.r5_pending[key] = R5Stripe(node, s, pd, bio.pid, qd)
                sh.born = self.now
                cache = self.r5_cache[node.dev]
                sh.after = bool(cache.live.get(s))
                # init_stripe sets STRIPE_BATCH_READY; a stripe_head found in the cache
                # (find_get_stripe), or one with I/O in flight, has not got it
                sh.batch_ready = not (sh.after or cache.holds(s))
                sh.uptodate = set(cache.get(s))
            if sh.owner is None and self.plug is not None:
                # release_stripe_plug: the first thread whose plug takes the stripe keeps it
                # (test_and_set_bit(STRIPE_ON_UNPLUG_LIST)); a later writer only drops its
                # reference, so the row waits for the first one's raid5_unplug
                sh.owner = bio.pid
            if write and bio.rwbs & RWBS_SYNC:
                sh.preread = True  # make_stripe_request: REQ_SYNC sets STRIPE_PREREAD_ACTIVE
            if write:
                sh.written[disk] = sh.written.get(disk, 0) | mask
                sh.array_sector[disk] = bio.sector + (s - msec)
                sh.opf.setdefault(disk, bio.rwbs)
                if sh.filled < 0 and self._full_stripe_write(sh):
                    self.r5_fill_seq += 1
                    sh.filled = self.r5_fill_seq
            else:
                if disk in node.failed:
                    sh.wanted.update(i for i in range(len(node.members))
                                     if i not in node.failed)
                else:
                    sh.wanted.add(disk)
                sh.array_sector.setdefault(disk, bio.sector + (s - msec))
            if not sh.pieces or sh.pieces[-1] is not piece:
                sh.pieces.append(piece)
                piece.remaining += 1
                if unit is not None:
                    sh.units.append(unit)
                    unit.outstanding += 1
                if write:
                    sh.block_pieces.setdefault(disk, []).append((piece, unit))
            s += STRIPE_SECTORS

    def _refuse_overlap(self, key: tuple[int, int], disk: int, mask: int) -> None:
        """``add_stripe_bio`` refuses a write that overlaps a block the row's stripe_head
        still has to write (``R5_Overlap``): the writer wakes raid5d and sleeps until the row
        is handled, then tries again. A row waiting to be handled (on a plug, released or
        delayed) is handled now; a row reading for an earlier write is not joined (the new
        write gets the row's next stripe_head). Two writes of the same sectors are never
        folded into one."""
        reading = self.r5_reading.get(key)
        if reading is not None and reading.written.get(disk, 0) & mask:
            del self.r5_reading[key]  # left to finish; later writes start a new stripe
        sh = self.r5_pending.get(key)
        waiting = self.r5_pending
        if sh is None:
            sh = self.r5_delayed.get(key)
            waiting = self.r5_delayed
        if sh is None or not sh.written.get(disk, 0) & mask:
            return
        del waiting[key]
        sh.owner = None
        sh.due = -1
        sh.due_mask = 0
        saved, self.plug = self.plug, self._raid5d_plug()
        sh.preread = True
        self._handle_stripe(sh)
        if self.r5_session is None or self.r5_session[1] is not self.plug:
            self.plug.flush(False)
        self.plug = saved

    def raid5_unplug(self, pid: int | None = None) -> None:
        """``raid5_unplug`` of thread ``pid``'s plug, then raid5d: handle the stripes that
        plug held and those released without one, and issue the writes of stripes whose
        reads are back (``pid`` None: raid5d alone, woken by a completion).

        Each thread's ``raid5_plug_cb`` lists only the stripe_heads it took first
        (``release_stripe_plug``): another thread's unplug, or raid5d woken by a member's
        completion, leaves them on that list, where later writes may still fill the row.
        Two writers of one page cache (the flusher and ``sync``) thus hand md rows that the
        other one completes before either plug lets them go.
        """
        self._raid5d_wakes()
        if not self.r5_pending and not self.r5_ready and not self.r5_delayed:
            return
        saved, self.plug = self.plug, self._raid5d_plug()  # raid5d's own plug
        if self.r5_held is not None:
            # raid5d's session went on while its reads were in flight (_hold_raid5d_plug)
            self.r5_plug_session, held = self.r5_held
            self.r5_held = None
            self.plug.flush(False)
            self.plug = held
        pending = []
        for sh in self.r5_pending.values():
            if sh.owner == pid:
                sh.owner = None  # released: on the handle list from now on
            if sh.owner is None and self._raid5d_due(sh) <= self.now:
                pending.append(sh)
        for sh in pending:
            del self.r5_pending[(sh.node.dev, sh.msec)]
            sh.due = -1
            if sh.due_mask:
                self._defer_late_blocks(sh, sh.due_mask)
                sh.due_mask = 0
        pending = self._with_batch_rows(pending)
        for sh in pending:
            key = (sh.node.dev, sh.msec)
            if self.r5_pending.get(key) is sh:  # a batch's row taken with its head
                del self.r5_pending[key]
                sh.due = -1
                sh.due_mask = 0
        full: list[R5Stripe] = []
        session = -1
        for sh in pending:
            if full and not self._full_stripe_write(sh):
                self._write_batches(full)
                full = []
            session = self._traced_read_plug(sh, session)
            self._handle_stripe(sh, full)
        self._write_batches(full)
        self._activate_delayed()
        while self.r5_ready:
            ready, self.r5_ready = self.r5_ready, []
            ready.sort(key=lambda sh: (self._raid5d_due(sh), self._traced_rank(sh),
                                       sh.node.dev, sh.msec))
            waiting = 0
            for sh in ready:
                if self._raid5d_due(sh) > self.now:
                    self.r5_ready.append(sh)  # raid5d writes it in a later run
                    continue
                if self._behind_traced_reads(sh):
                    sh.due = -1  # asked again when raid5d looks next
                    self.r5_ready.append(sh)  # rows raid5d took first are still reading
                    waiting += 1
                    continue
                sh.due = -1
                self._reads_back(sh)
            if waiting == len(ready) or all(sh.due > self.now for sh in self.r5_ready):
                break
        if self.r5_session is None or self.r5_session[1] is not self.plug:
            if not self._hold_raid5d_plug():
                self.plug.flush(False)
        self.r5_plug_session = -1
        self.plug = saved

    def _write_batches(self, full: list[R5Stripe]) -> None:
        """Write raid5d's full-stripe writes ``full`` (row order) as stripe batches
        (:meth:`_stripe_batches`); where the trace says in which of raid5d's plug sessions it
        wrote each row (``r5_write_session``: a synchronous writer on the model's own
        clock), a batch never spans two traced sessions and raid5d's plug is finished
        between them, and before the first where raid5d holds a plug of an earlier session
        (kept past its run, :meth:`_hold_raid5d_plug`): ``blk_finish_plug`` at the end of
        ``raid5d`` came in between.

        The writer (a direct-I/O ``dd``, no plug md holds) adds a bio's rows one by one
        (``raid5_make_request`` -> ``make_stripe_request``, ``stripe_add_to_batch_list`` as
        each row fills up) while raid5d may already hold the CPU: raid5d takes the rows
        filled so far as one batch (``handle_active_stripes``), finds the list empty and
        finishes its plug (``blk_finish_plug`` at the end of ``raid5d``); the chunk's next
        rows never join that batch (it is being handled: ``stripe_can_batch`` wants
        STRIPE_BATCH_READY). The replay's n-th handling of a row takes the trace's n-th
        session (:mod:`workers.model.raid5d_reads`).

        Inside a session, where the trace says which rows each of raid5d's ``ops_run_io``
        walks wrote (``r5_write_walk``: a synchronous writer, by order alone), a batch ends
        where the trace's walk did (:meth:`_traced_apart`) and the batches go out in the
        order of the trace's walks (:meth:`_in_traced_order`)."""
        if self.r5_handling_rank:
            # taken in the trace's order (_traced_rank); batches are made in row order
            full = sorted(full, key=lambda sh: (sh.node.dev, sh.msec))
        for sh in full:
            sh.walk = None
            if self.r5_write_walk and sh.node is self.stack.top:
                n = self.r5_walk_count.get(sh.msec, 0)
                self.r5_walk_count[sh.msec] = n + 1
                walks = self.r5_write_walk.get(sh.msec)
                if walks is not None and n < len(walks):
                    sh.walk = walks[n]
        if not self.r5_write_session:
            for batch in self._in_traced_order(self._stripe_batches(full)):
                self._batch_writes(batch)
            return
        groups: list[tuple[int, list[R5Stripe]]] = []
        for sh in full:
            k = -1
            if sh.node is self.stack.top:
                k = self._nth_traced_session(self.r5_write_session, self.r5_write_count, sh.msec)
            if groups and (k < 0 or groups[-1][0] < 0 or k == groups[-1][0]):
                groups[-1][1].append(sh)
                if k >= 0:
                    groups[-1] = (k, groups[-1][1])
            else:
                groups.append((k, [sh]))
        for i, (k, group) in enumerate(groups):
            held = self.r5_plug_session  # the session of the plug raid5d holds, or -1
            if i or (held >= 0 and k >= 0 and k != held):
                # also the first group where raid5d's plug is a session's kept open past
                # its run (_hold_raid5d_plug) and the trace wrote the rows in a later one
                self._finish_raid5d_plug()
            self.r5_plug_session = k
            for batch in self._in_traced_order(self._stripe_batches(group)):
                self._batch_writes(batch)

    @staticmethod
    def _in_traced_order(batches: list[list[R5Stripe]]) -> list[list[R5Stripe]]:
        """Stripe batches in the order raid5d wrote them in the trace (its walks' ranks),
        where the trace has a walk for every batch's head; else as given (row order).

        The writer with no plug md holds (a direct-I/O ``dd``) releases each row as it adds
        it (``make_stripe_request`` -> ``release_stripe_plug`` -> ``raid5_release_stripe``);
        raid5d, racing it on another CPU, takes whatever reached its lists since it last
        looked (``release_stripe_list``, then ``__get_priority_stripe`` from the handle
        list), so a row added later may be handled first (7.3: rows 4120 before 4112 of the
        first write, each alone, their blocks merging on the members as they came). Which
        came first is the trace's; the replay's clock does not race raid5d."""
        if len(batches) < 2 or any(b[0].walk is None for b in batches):
            return batches
        return sorted(batches, key=lambda b: b[0].walk[0] if b[0].walk is not None else 0)

    def _traced_read_plug(self, sh: R5Stripe, session: int) -> int:
        """raid5d's plug ends between two rows of a degraded read that the trace shows it
        reading in different plug sessions (``session``: the last row's, -1 none yet).

        With no plug of the reader's (``release_stripe_plug`` -> ``raid5_release_stripe``),
        raid5d wakes as the first rows are released; when it gets the CPU before the reader
        has added the rest, it handles those rows, finds the handle list empty and finishes
        its plug (``blk_finish_plug`` at the end of ``raid5d``), so their member requests go
        out before the next rows' (:mod:`workers.model.raid5d_reads`). A race for the CPU:
        the trace's rows say where, its clock is not needed. The replay's n-th handling of a
        row takes the session of the trace's n-th. Returns the row's session."""
        if not self.r5_read_session or sh.written or sh.node is not self.stack.top:
            return session
        k = self._nth_traced_session(self.r5_read_session, self.r5_read_count, sh.msec)
        if k < 0:
            return session
        if session >= 0 and k != session:
            self._finish_raid5d_plug()
        return k

    @staticmethod
    def _nth_traced_session(sessions: dict[int, list[int]], counts: dict[int, int],
                            msec: int) -> int:
        """The trace's raid5d plug session of the replay's next handling of row ``msec``
        (its n-th takes the trace's n-th; ``counts`` keeps n), or -1 past what the trace
        shows."""
        n = counts.get(msec, 0)
        counts[msec] = n + 1
        traced = sessions.get(msec)
        return traced[n] if traced is not None and n < len(traced) else -1

    def _behind_traced_reads(self, sh: R5Stripe) -> bool:
        """Whether the row ``sh``, its reads back, waits for rows the trace shows raid5d
        writing before it whose reads are still out (a synchronous writer on the model's own
        clock: ``r5_handling_rank``, by order alone).

        ``raid5_end_read_request`` releases a row when its last read completes
        (``raid5_release_stripe`` -> ``conf->released_stripes``); raid5d, still at work on
        other rows (a flush of its plug, the next rows' reads), takes what came back meanwhile
        only when it looks again (``release_stripe_list``, then ``handle_active_stripes``
        from the head of the handle list, at most MAX_STRIPE_BATCH a call, each row's
        ``handle_stripe`` computing the parity and putting it back at the list's tail for
        ``ops_run_io``): the rows back by then are written in the handle list's order, not
        as each read completed (7.2, dd 768k to a degraded 5 x 128k raid5: rows 4504..4552,
        by the trace in raid5d's batch of 8 when their reads came back, were written before
        rows 4352..4496). The replay's device model serves the reads one by one, and raid5d,
        idle on the model's clock, would write each row as it comes back; the trace says
        the order. A row whose read waits in a plug is not waited for (it comes back only
        after that plug's flush)."""
        rank = self._traced_rank(sh)
        if not self.r5_handling_rank or sh.node is not self.stack.top or rank >= 1 << 40:
            return False
        held = self._plugged_reads()
        for other in self.r5_reading.values():
            if other is sh or other.node is not sh.node or other.phase != 1 or \
                    other.remaining <= 0 or self._traced_rank(other) >= rank:
                continue
            if not self._read_in(other, held):  # else its read waits in raid5d's plug
                return True
        return False

    def _plugged_reads(self) -> list[Request]:
        """The read requests in the current plug (raid5d's, where this is asked)."""
        plug = self.plug
        return [rq for rq in plug.rqs if rq.op == OP_READ] if plug is not None else []

    @staticmethod
    def _read_in(sh: R5Stripe, reads: list[Request]) -> bool:
        """Whether one of ``reads`` (requests still in a plug) holds the row ``sh``'s read
        on one of its members: that row cannot come back before the plug's flush."""
        at = sh.msec + sh.node.data_offset
        devs = {m.dev for m in sh.node.members}
        return any(rq.dev in devs and rq.sector <= at < rq.end for rq in reads)

    def _hold_raid5d_plug(self) -> bool:
        """Keep raid5d's plug open past this run (True) where the trace shows raid5d still in
        the plug session it last wrote in when a row it is reading for comes back.

        raid5d's reads for a reconstruct-write go out as soon as the next request joins its
        plug (``blk_add_rq_to_plug``: the read holds BLK_PLUG_FLUSH_SIZE), and raid5d goes
        on writing the rows it has (``handle_active_stripes``); where they come back before
        its handle list is empty, ``raid5_end_read_request`` -> ``raid5_release_stripe``
        puts the rows back on that list and the same loop of ``raid5d`` writes them, into
        the plug still holding the earlier writes (``blk_finish_plug`` only at the end of
        ``raid5d``). There the rows' member writes find another member's request at the
        plug's tail and the oldest request of their own queue first
        (``blk_attempt_plug_merge``), and do not merge with each other (7.2: 4568+8, 4576+8,
        ... each alone behind the stripe's 4096+24, 4120+8, 4128+224). When raid5d got there
        is the trace's clock; which session wrote the rows is by order
        (``r5_write_session``): the plug stays open while a row being read has its next
        traced write in the session of the plug's last write.

        Reads in the plug stay there with it (a request under BLK_PLUG_FLUSH_SIZE does not
        flush the plug when the next one joins, ``blk_add_rq_to_plug``; 7.3: the next rows'
        rmw reads, 7584+96 on three members, sat in raid5d's plug while the rows read before
        came back and were written); only the rows whose reads went out can bring raid5d
        back, so a row whose read is still in the plug does not hold it."""
        k = self.r5_plug_session
        plug = self.plug
        if k < 0 or not self.r5_write_session or plug is None or not plug.rqs:
            return False
        held_reads = self._plugged_reads()
        for (_dev, msec), sh in self.r5_reading.items():
            if sh.node is not self.stack.top or self._read_in(sh, held_reads):
                continue  # (its read waits in this plug: it cannot come back before the flush)
            n = self.r5_write_count.get(msec, 0)
            traced = self.r5_write_session.get(msec)
            if traced is not None and n < len(traced) and traced[n] == k:
                self.r5_held = (k, plug)
                return True
        return False

    def release_held_plug(self) -> bool:
        """Flush raid5d's plug held past its run (:meth:`_hold_raid5d_plug`) when nothing is
        left to happen (the replay's event heap is empty): ``blk_finish_plug`` at the end of
        ``raid5d``. A held plug is normally taken up by raid5d's next run, which a completion
        of the rows' reads brings; if those never complete (a read waiting for a tag the
        plug's own requests hold), the plug must still go out, not be lost. True when there
        was one."""
        if self.r5_held is None:
            return False
        _, plug = self.r5_held
        self.r5_held = None
        saved, self.plug = self.plug, plug
        plug.flush(False)
        self.plug = saved
        return True

    def _finish_raid5d_plug(self) -> None:
        """raid5d's ``blk_finish_plug`` between two traced sessions: what its plug holds goes
        out, and the next rows start a plug of their own."""
        if self.plug is not None:
            self.plug.flush(False)
            self.plug = self.make_plug()

    def _raid5d_plug(self) -> Plug:
        """raid5d's plug now: the open session's when the trace shows raid5d inside a plug
        session at this time (its bios of separate handlings merge there until the session's
        ``blk_finish_plug``), else a plug of this call alone."""
        k = bisect.bisect_right(self.r5_session_start, self.now) - 1
        if k >= 0 and self.now <= self.r5_session_end[k]:
            if self.r5_session is not None and self.r5_session[0] == k:
                return self.r5_session[1]
            self.end_raid5d_session(-1)
            plug = self.make_plug()
            self.r5_session = (k, plug)
            self.hseq += 1
            heapq.heappush(self.heap, (self.r5_session_end[k], self.hseq, EV_RAID5D_END, k))
            return plug
        self.end_raid5d_session(-1)
        return self.make_plug()

    def end_raid5d_session(self, k: int) -> None:
        """``blk_finish_plug`` of raid5d's session ``k`` (-1: whichever is open)."""
        if self.r5_session is not None and (k < 0 or self.r5_session[0] == k):
            plug = self.r5_session[1]
            self.r5_session = None
            saved, self.plug = self.plug, plug
            plug.flush(False)
            self.plug = saved

    def _raid5d_due(self, sh: R5Stripe) -> int:
        """When raid5d handles ``sh`` next: the start of the trace's first raid5d run of the
        row at or after the model's clock (then a wake-up is queued), or now where the trace
        shows none. Asked once per handling step (reset when the stripe is handled).

        A row the trace shows raid5d delaying with no I/O ("raid5 rcw S N Q 1",
        ``r5_delay_msgs``) before its next run is due then; where the model's clock is past
        that handling when the row is released (a plug held it longer in the model), it is
        asked again: the row's next traced handling decides."""
        if sh.due >= 0 and sh.delay_traced and sh.due < self.now:
            sh.due = -1
            sh.delay_traced = False
        if sh.due < 0:
            runs = self.r5_runs.get(sh.msec) if sh.node is self.stack.top else None
            due = self.now
            if runs:
                k = bisect.bisect_left(runs, self.now)
                if k < len(runs):
                    due = runs[k]
                    sh.due_mask = self._present_then(sh, self.r5_writes[sh.msec][k],
                                                     self.r5_reads[sh.msec][k])
            held = self.r5_delay_msgs.get(sh.msec) if sh.node is self.stack.top else None
            if held:
                j = bisect.bisect_left(held, self.now)
                if j < len(held) and held[j] < due and not sh.preread:
                    # raid5d handled the row first with no I/O and put it on the delayed
                    # list (handle_stripe_dirtying: a row that is not STRIPE_PREREAD_ACTIVE;
                    # one the model has PREREAD_ACTIVE keeps the run's time)
                    due = held[j]
                    sh.due_mask = 0
                    sh.delay_traced = True
            sh.due = due
            if due > self.now and due not in self.r5_wakes:
                self.r5_wakes.add(due)
                self.hseq += 1
                heapq.heappush(self.heap, (due, self.hseq, EV_RAID5D, None))
        return sh.due

    @staticmethod
    def _present_then(sh: R5Stripe, wrote: int, read: int) -> int:
        """The data blocks a traced handling had writes for (bits): those it wrote; for a
        handling that read first, the blocks a read-modify-write read besides the parity, or
        the data blocks a reconstruct-write did not read (``handle_stripe_dirtying``)."""
        parity = (1 << sh.pd) | ((1 << sh.qd) if sh.qd >= 0 else 0)
        if wrote:
            return wrote & ~parity
        if not read:
            return 0
        if read & parity:
            return read & ~parity
        data = ((1 << len(sh.node.members)) - 1) & ~parity
        return data & ~read

    def _defer_late_blocks(self, sh: R5Stripe, wrote: int) -> None:
        """Leave out of raid5d's handling of the row now the data blocks it did not write, as
        the trace shows it (``wrote``, a bit per member): they came while ``handle_stripe``
        was already at work on the row (``analyse_stripe`` sees the ``towrite`` bios present
        then; a bio added later waits in ``towrite`` for the next handling). Where the model's
        clock put them before the handling, the trace's handling decides. Nothing is left
        out when the handling would be left with no data block. What becomes of the late
        blocks depends on the handling (:meth:`_split_late`, :meth:`_handle_stripe`)."""
        parity = {sh.pd, sh.qd}
        failed = set(sh.node.failed)  # a failed member's block is never written: not late
        late = [i for i in sh.written
                if i not in parity and i not in failed and not (wrote >> i) & 1]
        if not late or len(late) == len([i for i in sh.written if i not in parity]):
            return
        if (sh.node.dev, sh.msec) in self.r5_pending:
            return
        sh.late = late

    def _split_late(self, sh: R5Stripe) -> None:
        """The late blocks of a handling that writes now (or delays the row) wait for the
        row's next handling, the writer's plug holding the stripe again: a stripe_head of
        their own in the model (the kernel's same stripe_head after this I/O)."""
        late, sh.late = sh.late, []
        key = (sh.node.dev, sh.msec)
        if not late or key in self.r5_pending:
            return
        nxt = R5Stripe(sh.node, sh.msec, sh.pd, sh.pid, sh.qd)
        # the same stripe_head in the kernel: it stays active with the late blocks' towrite
        # bios on it (a plug holds it, ``release_stripe_plug``; ``do_release_stripe`` puts
        # a stripe_head on an inactive list only once nothing refers to it and it needs no
        # handling), so the pages this handling leaves up to date are never evicted; the
        # model's second stripe of the row keeps the row live (``R5Cache.join``) and takes
        # them when handled (``after``: ``R5Cache.peek``)
        self.r5_cache[sh.node.dev].join(sh.msec)
        nxt.after = True
        nxt.batch_ready = False  # handled already: clear_batch_ready
        for i in late:
            nxt.written[i] = sh.written.pop(i)
            if i in sh.array_sector:
                nxt.array_sector[i] = sh.array_sector.pop(i)
            if i in sh.opf:
                nxt.opf[i] = sh.opf.pop(i)
                if nxt.opf[i] & RWBS_SYNC:
                    nxt.preread = True
            for piece, unit in sh.block_pieces.pop(i, []):
                sh.pieces.remove(piece)
                nxt.pieces.append(piece)
                if unit is not None:
                    sh.units.remove(unit)
                    nxt.units.append(unit)
                nxt.block_pieces.setdefault(i, []).append((piece, unit))
        self.r5_pending[key] = nxt

    def _with_batch_rows(self, due: list[R5Stripe]) -> list[R5Stripe]:
        """The rows raid5d handles now, in its order: those due, by when the trace shows
        raid5d getting to them (the handle list's order, ``__get_priority_stripe``; row order
        where the trace says nothing), each full-stripe write followed by the full-stripe
        writes of the rows after it in its chunk, due or not, released or not:
        ``stripe_add_to_batch_list`` joined them to its batch when they filled up, and
        ``handle_stripe`` of the batch head does the whole batch (``ops_run_io`` walks
        ``batch_list``, not a plug's list: a row another thread's plug still holds, which
        its ``raid5_unplug`` would release later, is written with its batch)."""
        out: list[R5Stripe] = []
        taken: set[int] = set()
        if self.r5_dirtied:
            for sh in list(due) + list(self.r5_pending.values()):
                self._handled_meanwhile(sh)
        for sh in sorted(due, key=lambda sh: (sh.due, self._traced_rank(sh), sh.node.dev,
                                              sh.msec)):
            if id(sh) in taken:
                continue
            taken.add(id(sh))
            out.append(sh)
            if not self._full_stripe_write(sh):
                continue
            last = sh
            nxt = self.r5_pending.get((sh.node.dev, sh.msec + STRIPE_SECTORS))
            while nxt is not None and id(nxt) not in taken and \
                    self._joins_batch(last, nxt):
                taken.add(id(nxt))
                out.append(nxt)
                last = nxt
                nxt = self.r5_pending.get((nxt.node.dev, nxt.msec + STRIPE_SECTORS))
        return out

    def _traced_rank(self, sh: R5Stripe) -> int:
        """Where the replay runs on its own clock: the rank of the trace's next handling of
        a written row (``r5_handling_rank``), the order raid5d took the rows in; 0 where the
        trace says nothing (then row order decides).

        The writer (a direct-I/O ``dd``, no plug md holds) releases each row as it adds it,
        while raid5d, on another CPU, takes what is on its lists: which row it got to first
        is a race (7.2, a stripe and a half per write to a degraded 5 x 128k raid5: raid5d
        read for the second stripe's half-written rows, a reconstruct-write, before it wrote
        the first stripe's full rows), and its reads merge in raid5d's plug only when they
        go out together. The trace says the order; the replay's clock does not race."""
        if not self.r5_handling_rank or not sh.written or sh.node is not self.stack.top:
            return 0
        ranks = self.r5_handling_rank.get(sh.msec)
        n = self.r5_handling_count.get(sh.msec, 0)
        return ranks[n] if ranks is not None and n < len(ranks) else 1 << 40

    def _took_handling(self, sh: R5Stripe) -> None:
        """The replay did one of the row's traced handlings (a read phase, or a write)."""
        if self.r5_handling_rank and sh.node is self.stack.top:
            self.r5_handling_count[sh.msec] = self.r5_handling_count.get(sh.msec, 0) + 1

    def _handled_meanwhile(self, sh: R5Stripe) -> None:
        """raid5d handled the row since the stripe was made where the trace shows a
        ``handle_stripe_dirtying`` message for it (a delayed row: no I/O): its
        STRIPE_BATCH_READY is cleared (``clear_batch_ready``)."""
        if not sh.batch_ready or sh.node is not self.stack.top:
            return
        times = self.r5_dirtied.get(sh.msec)
        if times:
            k = bisect.bisect_left(times, sh.born)
            if k < len(times) and times[k] <= self.now:
                sh.batch_ready = False

    def _joins_batch(self, last: R5Stripe, sh: R5Stripe) -> bool:
        """``stripe_add_to_batch_list``: ``sh`` joins the batch whose last row is ``last``:
        the next row of the same array inside the same chunk ("Don't cross chunks, so stripe
        pd_idx/qd_idx is the same"), both full-stripe writes with STRIPE_BATCH_READY
        (``stripe_can_batch``: a stripe_head ``init_stripe`` made and raid5d has not handled
        yet), the first data block written with the same flags (``bi_opf``), and ``last``
        a full-stripe write already when ``sh`` became one (the join is made then, by
        ``make_stripe_request``, looking back only), and not written apart in the trace
        (:meth:`_traced_apart`)."""
        node = sh.node
        chunk = node.chunk_sectors or STRIPE_SECTORS
        if last.node is not node or last.msec + STRIPE_SECTORS != sh.msec or \
                not sh.msec % chunk:
            return False
        if not (self._full_stripe_write(last) and self._full_stripe_write(sh)):
            return False
        if not (last.batch_ready and sh.batch_ready):
            return False
        if last.filled > sh.filled >= 0:
            # "we only do back search": a row joins when it fills up (make_stripe_request
            # -> stripe_add_to_batch_list with the row before it as head, which must be
            # stripe_can_batch then); a row that filled before the row before it did heads
            # its own batch, and that row, filling later, looks back only
            return False
        first = min(i for i in range(len(node.members)) if i != sh.pd and i != sh.qd)
        return last.opf.get(first) == sh.opf.get(first) and not self._traced_apart(last)

    def _traced_apart(self, last: R5Stripe) -> bool:
        """The trace's ``ops_run_io`` walk that wrote row ``last`` (its first handling at or
        after now) did not write the next row with it (``Raid5dRuns.linked``): the batch
        ended there. raid5d's ``handle_stripe`` of a batch head clears STRIPE_BATCH_READY on
        the whole batch (``clear_batch_ready``), and a row that fills up after that joins
        no batch of it (``stripe_add_to_batch_list``: ``stripe_can_batch(head)``), however
        long the parity and the other handlings keep raid5d from the batch's member bios:
        the trace shows which rows each walk took, not when handle_stripe began."""
        if last.node is not self.stack.top:
            return False
        if not self.r5_runs and last.walk is not None:
            # on the model's own clock: the trace's walk of this handling, by order
            return not last.walk[1]
        linked = self.r5_linked.get(last.msec)
        if not linked:
            return False
        k = bisect.bisect_left(self.r5_runs[last.msec], self.now)
        return k < len(linked) and not linked[k]

    @staticmethod
    def _full_stripe_write(sh: R5Stripe) -> bool:
        """``is_full_stripe_write``: every data block of the row is overwritten whole."""
        whole = (1 << STRIPE_SECTORS) - 1
        return all(sh.written.get(i, 0) == whole for i in range(len(sh.node.members))
                   if i != sh.pd and i != sh.qd)

    def _stripe_batches(self, full: list[R5Stripe]) -> list[list[R5Stripe]]:
        """``stripe_add_to_batch_list``: full-stripe writes of consecutive rows inside one
        chunk ("Don't cross chunks, so stripe pd_idx/qd_idx is the same") whose first data
        block was written with the same flags (``bi_opf``) go as one batch.

        ``stripe_can_batch`` asks ``is_full_stripe_write`` (every data block R5_OVERWRITE);
        the batch is handled through its head, and ``ops_run_io`` walks the members of the
        whole batch at once (see :meth:`Engine._batch_writes`). ``full`` is in row order.
        """
        batches: list[list[R5Stripe]] = []
        for sh in full:
            if batches and self._joins_batch(batches[-1][-1], sh):
                batches[-1].append(sh)
            else:
                batches.append([sh])
        return batches

    def _batch_writes(self, batch: list[R5Stripe]) -> None:
        """``ops_run_io`` of a stripe batch: for each member from the last to the first, the
        block of every stripe of the batch (head first, then ``batch_list`` in row order), so
        a member's bios of the batch follow each other and merge into one request, which
        ``blk_add_rq_to_plug`` sends out (BLK_PLUG_FLUSH_SIZE) when the next member's first
        request joins raid5d's plug."""
        if len(batch) == 1:
            self._stripe_writes(batch[0], counted=True)
            return
        rwbs = RWBS_WRITE | RWBS_SYNC
        for sh in batch:
            sh.phase = 2
            self._took_handling(sh)
        head = batch[0]
        parity = [head.pd] + ([head.qd] if head.qd >= 0 else [])
        for i in sorted(set(head.written) | set(parity), reverse=True):
            if i in head.node.failed:
                continue
            for sh in batch:
                self._stripe_bio(sh, i, OP_WRITE, rwbs)
        for sh in batch:
            if sh.remaining == 0:
                self._stripe_io_done(sh, self.now)

    def _handle_stripe(self, sh: R5Stripe, batchable: list[R5Stripe] | None = None) -> None:
        """``handle_stripe_dirtying``: full stripe, read-modify-write or reconstruct-write
        (raid6: P and Q are both parity); reads of a degraded array (``fetch_block``).

        Only blocks that are not up to date count (``uptodate_for_rmw`` / ``R5_UPTODATE``):
        rmw reads the written blocks and the parity, rcw the data blocks not wholly
        overwritten; rmw when it reads fewer, ties to rcw (``rmw_level`` PARITY_ENABLE_RMW).
        Failed members are neither read nor written; a degraded row reconstructs where rmw
        would need the missing block (:meth:`_dirtying_reads`).
        The reads go out in ``ops_run_io``'s descending member order.
        """
        if sh.reload:
            sh.uptodate = set(self.r5_cache[sh.node.dev].get(sh.msec))
            sh.reload = False
        if sh.after:
            sh.uptodate |= self.r5_cache[sh.node.dev].peek(sh.msec)
        failed = set(sh.node.failed)
        up = sh.uptodate
        first = self._first_handling(sh)
        if not sh.written:  # a degraded read
            fetch = sorted(sh.wanted - failed - up, reverse=True)
            if first:
                fetch = self._cached_before_trace(sh, fetch)
            sh.phase = 3
            for i in fetch:
                self._stripe_bio(sh, i, OP_READ, RWBS_READ)
            if not fetch:
                self._stripe_io_done(sh, self.now)
            return
        reads = self._dirtying_reads(sh)
        traced_delay = sh.delay_traced
        sh.delay_traced = False
        sh.held_to = -1
        if not reads or not sh.preread:
            self._split_late(sh)
        if not reads:
            sh.full = True
            self.r5_full_writes += 1
            if batchable is not None:
                batchable.append(sh)  # written by the caller, batched (_stripe_batches)
            else:
                self._stripe_writes(sh)
            return
        sh.batch_ready = False  # clear_batch_ready: handled, and not a full-stripe write
        if not sh.preread:
            # handle_stripe_dirtying: a write that must read first and is not
            # STRIPE_PREREAD_ACTIVE waits (STRIPE_DELAYED) for more writes to its row
            self.r5_delayed[(sh.node.dev, sh.msec)] = sh
            if traced_delay:
                self._hold_delayed(sh)
            return
        self._start_reads(sh, reads)

    def _start_reads(self, sh: R5Stripe, reads: list[int]) -> None:
        """A write's read phase (phase 1, STRIPE_PREREAD_ACTIVE): the member blocks
        ``handle_stripe_dirtying`` chose, read before the row is written; later writes to the
        row join it (``r5_reading``)."""
        self.r5_preread_active += 1
        sh.phase = 1
        self._took_handling(sh)
        self._traced_dirtying_plug(sh)
        self.r5_reading[(sh.node.dev, sh.msec)] = sh
        for i in reads:
            self._stripe_bio(sh, i, OP_READ, RWBS_READ)

    def _traced_dirtying_plug(self, sh: R5Stripe) -> None:
        """raid5d's plug is finished before a write's reads (``handle_stripe_dirtying`` ->
        ``ops_run_io``) that the trace shows raid5d submitting in a later plug session than
        the one its plug holds (``r5_dirtying_session``, numbered as ``r5_write_session``:
        a synchronous writer on the model's own clock, by order alone), as
        :meth:`_stripe_writes` does for a write.

        The writer (a direct-I/O ``dd``, no plug md holds) adds a bio's rows one by one while
        raid5d may already hold the CPU: raid5d writes the full rows it finds, finds its
        lists empty and finishes its plug (``blk_finish_plug`` at the end of ``raid5d``);
        the rows the bio leaves half written come after, and their reads go out in its next
        session, ahead of the rows written there. Left in the first session's plug, such a
        read meets that session's write on its member first (``blk_attempt_plug_merge``
        tries the plug's newest request, then the oldest of its own queue) and the row's
        reads do not merge with each other (7.3, ``dd bs=256k`` to a 4 x 64k raid5 of 4 KiB
        blocks: 8320+128 read as sixteen 4 KiB requests behind 8192+16)."""
        if not self.r5_dirtying_session or sh.node is not self.stack.top:
            return
        k = self._nth_traced_session(self.r5_dirtying_session, self.r5_dirtying_count,
                                     sh.msec)
        if self.r5_plug_session >= 0 and k >= 0 and k != self.r5_plug_session:
            self._finish_raid5d_plug()
        if k >= 0:
            self.r5_plug_session = k

    @staticmethod
    def _dirtying_reads(sh: R5Stripe) -> list[int]:
        """``handle_stripe_dirtying``'s reads, in ``ops_run_io``'s descending member order:
        rmw reads the written blocks and the parity, rcw the data blocks not wholly
        overwritten, only those not ``R5_UPTODATE``; rmw when it reads fewer, ties to rcw.
        Blocks in ``sh.late`` are not there yet (their ``towrite`` came after
        ``analyse_stripe``). A block on a missing member counts 2 * disks on the side that
        would read it ("cannot read it" in ``handle_stripe_dirtying``, v6.1 .. 7.x): a
        degraded row reconstructs only where rmw would need the missing block (it is
        written or the parity); where the missing block is a data block left alone, rmw
        (the trace's "raid5 rmw <sector> 3": 5 x 128k missing member 4, half a row written
        on members 1 and 2, parity on member 0), also where the missing block is the only
        one the write leaves alone. The missing block itself is never read."""
        n = len(sh.node.members)
        failed = set(sh.node.failed)
        up = sh.uptodate
        late = set(sh.late)
        full = (1 << STRIPE_SECTORS) - 1
        parity = [sh.pd] + ([sh.qd] if sh.qd >= 0 else [])
        data = [i for i in range(n) if i not in parity]
        rcw = [i for i in data if (sh.written.get(i, 0) != full or i in late)
               and i not in failed and i not in up]
        rmw = [i for i in sorted((set(sh.written) - late) | set(parity)) if i not in up]
        # a data block on a missing member that the write does not wholly overwrite
        lost_rcw = [i for i in data if i in failed and i not in up
                    and (sh.written.get(i, 0) != full or i in late)]
        if not rcw and not lost_rcw:
            return []  # every data block overwritten or at hand: a full-stripe write
        # a block on a missing member "cannot read it": it costs 2 * disks on the side that
        # needs it (handle_stripe_dirtying), so a degraded row whose missing block is
        # neither written nor parity takes the read-modify-write like a healthy one, also
        # when that missing block is the only one the write leaves alone (rcw would read
        # nothing it can: without the reads the parity could not be brought up to date)
        lost = 2 * n
        cost_rmw = sum(lost if i in failed else 1 for i in rmw)
        cost_rcw = len(rcw) + lost * len(lost_rcw)
        reads = rmw if cost_rmw < cost_rcw else rcw
        return sorted((i for i in reads if i not in failed), reverse=True)

    def _reads_back(self, sh: R5Stripe) -> None:
        """``handle_stripe`` once a write's reads are back: ``handle_stripe_dirtying`` chooses
        again with every ``towrite`` block now on the stripe_head (those added while the
        reads were in flight: ``add_stripe_bio`` joins them, no ``R5_Overlap``), and reads
        what the new choice still lacks (a second read phase, e.g. a reconstruct-write's
        read after a read-modify-write's) before one write of all the blocks
        (``schedule_reconstruction`` -> ``ops_run_io``). Blocks added after this handling's
        ``analyse_stripe`` (the trace's handling did not write them: ``_defer_late_blocks``)
        wait for the next handling when this one writes, and are chosen for again when it
        reads."""
        sh.late = []
        if sh.due_mask:
            self._defer_late_blocks(sh, sh.due_mask)
            sh.due_mask = 0
        reads = self._dirtying_reads(sh)
        if not reads:
            self._split_late(sh)
            self._stripe_writes(sh)
            return
        self._start_reads(sh, reads)

    def _first_handling(self, sh: R5Stripe) -> bool:
        """Whether this is the replay's first ``handle_stripe`` of the top array's row (asked
        only where the trace says what raid5d read, ``r5_read_any``)."""
        if self.r5_read_any is None or sh.node is not self.stack.top or sh.msec in self.r5_seen:
            return False
        self.r5_seen.add(sh.msec)
        return True

    def _cached_before_trace(self, sh: R5Stripe, fetch: list[int]) -> list[int]:
        """The blocks of a degraded read's first handling that the stripe cache did not
        already hold when the trace began.

        A stripe_head outlives its I/O (``release_inactive_stripe_list`` keeps it on the
        inactive list with its pages and their ``R5_UPTODATE`` bits), and a degraded array
        sends *every* read through the stripe cache (``raid5_make_request`` calls
        ``chunk_aligned_read`` only when ``mddev->degraded == 0``). So whatever read the array
        before the trace, udev's blkid probe of a new array above all (``udev_wait`` after
        ``mdadm --create``: a few pages at its start), left those rows' blocks up to date, and
        ``handle_stripe_fill`` -> ``fetch_block`` / ``need_this_block`` skips an
        ``R5_UPTODATE`` block: the first reads of those rows fetch only what the probe did not
        (or, where the probe reconstructed a missing block, nothing of it again). The trace
        says which: a block that raid5d never reads for the row in the whole trace was up to
        date before it (a row read whole is not read again). The evidence is per row, not
        per time, so it holds when a synchronous reader replays on the model's own clock.
        """
        read_any = self.r5_read_any
        if read_any is None or not fetch:
            return fetch
        read = read_any.get(sh.msec, 0)
        sh.uptodate.update(i for i in fetch if not (read >> i) & 1)
        return [i for i in fetch if (read >> i) & 1]

    def _activate_delayed(self) -> None:
        """``raid5_activate_delayed`` + ``__get_priority_stripe``'s hold list: delayed rows
        are handled (with their reads) once no stripe is reading for a write
        (``preread_active_stripes`` < IO_THRESHOLD = 1) and no full-stripe write is in flight
        (``pending_full_writes`` == 0), lowest row first. Until then more writes may fill a
        row, which is then written with no reads (a flusher's rows at the end of its plug,
        filled by its next one). A row the trace shows delayed waits for the trace's next
        handling of it instead, and is activated then whatever the counts
        (:meth:`_hold_delayed`)."""
        if not self.r5_delayed:
            return
        # rows the trace shows delayed: activated at the trace's next read of the row
        traced = [sh for sh in self.r5_delayed.values() if 0 <= sh.held_to <= self.now]
        if self.r5_preread_active or self.r5_full_writes:
            delayed = traced
        else:
            delayed = [sh for sh in self.r5_delayed.values()
                       if sh.held_to < 0 or sh.held_to <= self.now]
        delayed.sort(key=lambda sh: (sh.node.dev, sh.msec))
        for sh in delayed:
            del self.r5_delayed[(sh.node.dev, sh.msec)]
            sh.held_to = -1
        for sh in delayed:
            sh.preread = True
            self._handle_stripe(sh)

    def _hold_delayed(self, sh: R5Stripe) -> None:
        """A row the trace shows raid5d delaying ("raid5 rcw S N Q 1") waits on the delayed
        list for the trace's next handling of it: where that one reads, the row was
        activated then (``raid5_activate_delayed`` moves the whole delayed list to the hold
        list once ``preread_active_stripes`` is below IO_THRESHOLD, and raid5d's next pass
        reads every row of it, so rows delayed in one pass read together); where it writes
        with no reads, more writes filled the row first (``add_stripe_bio`` takes it off the
        delayed list) and it was not activated before (``__get_priority_stripe`` leaves the
        hold list alone while ``pending_full_writes`` is not 0). A row with no later traced
        handling keeps the count rule (:meth:`_activate_delayed`)."""
        runs = self.r5_runs.get(sh.msec)
        if not runs:
            return
        k = bisect.bisect_left(runs, self.now)
        if k >= len(runs):
            return
        sh.held_to = runs[k]  # a write with no reads: still delayed then, read then
        if sh.held_to > self.now and sh.held_to not in self.r5_wakes:
            self.r5_wakes.add(sh.held_to)
            self.hseq += 1
            heapq.heappush(self.heap, (sh.held_to, self.hseq, EV_RAID5D, None))

    def _stripe_writes(self, sh: R5Stripe, *, counted: bool = False) -> None:
        """``ops_run_io`` after the parity is computed: the written blocks and the parity,
        from the last member to the first (``for (i = disks; i--; )``).

        A write that did not go through :meth:`_write_batches` (``counted``: it took the
        row's traced session and walk there), such as a reconstruct-write's once its reads
        are back, is one of the row's traced writing handlings too: it takes the next of
        them, so the row's next full-stripe write takes the one after (7.2: the second
        write's half of a row the first write had read for took that first write's session,
        and raid5d's plug was finished between it and the full rows written with it)."""
        if self.r5_reading.get((sh.node.dev, sh.msec)) is sh:
            del self.r5_reading[(sh.node.dev, sh.msec)]
        if not counted and sh.node is self.stack.top:
            if self.r5_write_session:
                k = self._nth_traced_session(self.r5_write_session, self.r5_write_count,
                                             sh.msec)
                if self.r5_plug_session >= 0 and k >= 0 and k != self.r5_plug_session:
                    self._finish_raid5d_plug()  # the trace wrote it in a later session
                if k >= 0:
                    self.r5_plug_session = k
            if self.r5_write_walk:
                self.r5_walk_count[sh.msec] = self.r5_walk_count.get(sh.msec, 0) + 1
        sh.phase = 2
        self._took_handling(sh)
        rwbs = RWBS_WRITE | RWBS_SYNC
        parity = [sh.pd] + ([sh.qd] if sh.qd >= 0 else [])
        for i in sorted(set(sh.written) | set(parity), reverse=True):
            if i not in sh.node.failed:
                self._stripe_bio(sh, i, OP_WRITE, rwbs)
        if sh.remaining == 0:
            self._stripe_io_done(sh, self.now)

    def _stripe_bio(self, sh: R5Stripe, i: int, op: int, rwbs: int) -> None:
        node = sh.node
        member = node.members[i]
        if self.r5_write_sleeps and op == OP_WRITE and node is self.stack.top:
            self._sleep_by_order(member.dev, sh.msec + node.data_offset)
        if self._raid5d_sleeps(member.dev, sh.msec + node.data_offset, op == OP_WRITE):
            # raid5d sleeps inside this bio (or already does): it and the bios after it are
            # submitted when raid5d is back (:meth:`_raid5d_wakes`)
            sh.remaining += 1
            sh.uptodate.add(i)
            self.r5_asleep.append((sh, i, op, rwbs))
            return
        self._submit_stripe_bio(sh, i, op, rwbs)

    def _raid5d_sleeps(self, dev: int, sector: int, write: bool) -> bool:
        """Whether raid5d's member bio to ``dev`` at ``sector`` (a write or a read: raid5d's
        rmw read of a block and its write of it may come in one session; wbt throttles the
        write), submitted now, waits for
        raid5d to wake: it is asleep already, or the trace shows it going to sleep inside
        this bio (``Raid5dRuns.sleeps``: a member that has its limit of buffered writes in
        flight throttles the bio in ``rq_qos_throttle`` before it gets a request, wbt's
        ``rq_qos_wait``; ``sched_submit_work`` flushes raid5d's plug, a UT, which the
        session's end replays). The bios ``ops_run_io`` submits after it, and anything else
        raid5d would do, come after the wake, into its next plug session."""
        if self.now < self.r5_asleep_until:
            return True
        traced = self.r5_sleeps.get((dev, sector, write))
        if not traced:
            return False
        for k, (start, wake) in enumerate(traced):
            if start <= self.now < wake:
                del traced[k]
                self.r5_asleep_until = wake
                self.hseq += 1
                heapq.heappush(self.heap, (wake, self.hseq, EV_RAID5D, None))
                return True
        return False

    def _sleep_by_order(self, dev: int, sector: int) -> None:
        """raid5d goes to sleep inside its write to ``dev`` at ``sector`` where the trace
        shows it sleeping in that occurrence of the write (``r5_write_sleeps``; a synchronous
        writer on the model's own clock, by order alone).

        wbt's ``rq_qos_wait`` (``blk_mq_submit_bio`` -> ``rq_qos_throttle``: the member has
        its limit of writes in flight, those still in raid5d's plug included) puts raid5d to
        sleep before the bio gets a request; ``sched_submit_work`` flushes raid5d's plug
        (``blk_flush_plug(plug, true)``: UT), so what the plug holds goes out, and the bio
        and the rest of the handling go into the plug after the wake (7.2, dd 768k to a
        degraded 5 x 128k raid5: member 3's 4472 after 16 requests of raid5d's on the
        member, 4504+56 and 4352+8 .. 4464+8; rows 4472..4496 then merged as 4472+32 in the
        new plug). How long raid5d sleeps (until the member's throttled writes complete,
        ``wbt_rqw_done``) is the model's clock; only where the plug is cut is taken here."""
        key = (dev, sector)
        traced = self.r5_write_sleeps.get(key)
        if traced is None:
            return
        n = self.r5_write_bios.get(key, 0)
        self.r5_write_bios[key] = n + 1
        after = traced.get(n)
        if after is None or self.plug is None:
            return
        self.plug.flush(True)
        self.plug = self.make_plug()
        self.r5_plug_session = after

    def _raid5d_wakes(self) -> None:
        """raid5d is back from a sleep inside a member bio: the bios it had still to submit
        go out in order, into its plug session of now (flushed at that session's end)."""
        if not self.r5_asleep or self.now < self.r5_asleep_until:
            return
        asleep, self.r5_asleep = self.r5_asleep, []
        self.r5_asleep_until = -1
        saved, self.plug = self.plug, self._raid5d_plug()
        for sh, i, op, rwbs in asleep:
            sh.remaining -= 1
            self._submit_stripe_bio(sh, i, op, rwbs)
        if self.r5_session is None or self.r5_session[1] is not self.plug:
            self.plug.flush(False)
        self.plug = saved

    def _submit_stripe_bio(self, sh: R5Stripe, i: int, op: int, rwbs: int) -> None:
        node = sh.node
        member = node.members[i]
        child = Bio(member.dev, sh.msec + node.data_offset, STRIPE_SECTORS, op, rwbs,
                    F_SYNC if op == OP_WRITE else 0, None, None, 0, 0, sh.pid, fresh=True)
        child.up = sh  # type: ignore[assignment]
        sh.remaining += 1
        sh.uptodate.add(i)  # read into, or written from, the stripe_head's page
        self.ev(member.dev, sh.pid, ACT_REMAP, rwbs, child.sector, STRIPE_SECTORS,
                aux=sh.array_sector.get(i, 0), aux2=node.dev)
        self.tick()
        self.submit_noacct(child, split=False)

    def _stripe_io_done(self, sh: R5Stripe, t: int) -> None:
        """All member I/O of a stripe phase completed (phase 3: a degraded read's blocks)."""
        if sh.phase == 1:
            self.r5_ready.append(sh)
            self.r5_preread_active -= 1
            return
        if sh.full:
            sh.full = False
            self.r5_full_writes -= 1
        failed = sh.node.failed
        if sh.phase == 3 and failed and \
                all(i in sh.uptodate for i in range(len(sh.node.members)) if i not in failed):
            # a degraded row read whole: the failed member's block is computed from the rest
            # (``ops_run_compute5``) and stays in the page too
            sh.uptodate.update(failed)
        self.r5_cache[sh.node.dev].put(sh.msec, frozenset(sh.uptodate))
        for piece in sh.pieces:
            self._put_piece(piece, t)
        for unit in sh.units:
            unit.outstanding -= 1
            if unit.outstanding == 0 and unit.submitted and self.on_unit_done is not None:
                self.on_unit_done(unit, t)

    def raid0_request(self, node: Node, bio: Bio) -> None:
        """``raid0_make_request`` / ``raid0_handle_discard``."""
        c = node.chunk_sectors
        n = len(node.members)
        sizes = [node.member_size(i) for i in range(n)]
        if is_discard_op(bio.op) and self.policy.raid0_discard == "per_member" and \
                len(set(sizes)) == 1:
            self.raid0_discard(node, bio)
            return
        if bio.op == OP_WRITE_ZEROES and node.approximates == "dm-stripe" and \
                len(set(sizes)) == 1:
            # is_abnormal_io: ti->num_write_zeroes_bios (= stripes) clones of the whole
            # range (__send_changing_extent_only, later __send_abnormal_io, whose
            # __max_io_len stops only at the target's end for write zeroes), each cut by
            # stripe_map_range to its stripe's part: what raid0_handle_discard computes
            self.raid0_discard(node, bio)
            return
        left = c - bio.sector % c
        if left < bio.nr:
            if self.policy.raid0_split == "map_both" and bio.nr - left <= c and \
                    not node.approximates:
                # 319ff40a5427: bio_split + bio_chain, then raid0_map_submit_bio(mddev, bio)
                # maps the remainder (at most one chunk: md's limits cap bios at a chunk)
                # straight to its member, and only then the front (md raid0 only: dm-stripe,
                # modelled as raid0, resubmits the rest from __split_and_process_bio)
                front = bio.piece(left)
                self._count(front)
                bio.advance(left)
                self._raid0_map_submit(node, bio, sizes)
                bio = front
            else:
                bio = self._personality_split(bio, left)
        self._raid0_map_submit(node, bio, sizes)

    def _raid0_map_submit(self, node: Node, bio: Bio, sizes: list[int]) -> None:
        """``raid0_map_submit_bio``: ``map_sector`` to a member, A, ``submit_bio_noacct``."""
        idx, msec = raid0_map(bio.sector, node.chunk_sectors, sizes, node.layout or "orig")
        piece = self._piece(node, bio)
        self._remap(node, bio, node.members[idx], msec + node.data_offset, bio.nr, piece)
        self._release(bio, self.now)

    def raid0_discard(self, node: Node, bio: Bio) -> None:
        """``raid0_handle_discard``: one discard per member covering its part of the range."""
        c = node.chunk_sectors
        nb = len(node.members)
        start, end = bio.sector, bio.sector + bio.nr
        stripe = c * nb
        first, last = start // stripe, end // stripe
        sdi, sdo = (start % stripe) // c, start % c + first * c
        edi, edo = (end % stripe) // c, end % c + last * c
        piece = self._piece(node, bio)
        for disk in range(nb):
            ds, de = discard_member_range(disk, c, first, last, sdi, sdo, edi, edo)
            if de <= ds:
                continue
            self._remap(node, bio, node.members[disk], ds + node.data_offset, de - ds, piece)
        self._release(bio, self.now)

    def linear_request(self, node: Node, bio: Bio) -> None:
        """md-linear: ``which_dev``; a bio crossing a member end is split there.

        dm-crypt (modelled as linear over its one device) first cuts the bio at its request
        size limit (:meth:`_dm_crypt_max_sectors`): ``crypt_map`` -> ``dm_accept_partial_bio``,
        and ``dm_split_and_process_bio`` resubmits the rest (``submit_bio_noacct``), which is
        mapped after the front's clone went to the device.
        """
        if node.approximates == "dm-crypt":
            cap = self._dm_crypt_max_sectors(bio)
            if 0 < cap < bio.nr:
                bio = self._personality_split(bio, cap)
        sizes = [node.member_size(i) for i in range(len(node.members))]
        idx, msec, left = linear_map(bio.sector, sizes)
        if left < bio.nr:
            bio = self._personality_split(bio, left)
        piece = self._piece(node, bio)
        if node.approximates == "dm-crypt" and bio.op == OP_WRITE:
            self.crypt_queue(node, bio, node.members[idx], msec + node.data_offset, piece)
        else:
            self._remap(node, bio, node.members[idx], msec + node.data_offset, bio.nr, piece)
        self._release(bio, self.now)

    def crypt_queue(self, node: Node, bio: Bio, member: Node, msec: int,
                    piece: MdPiece) -> None:
        """An encrypted dm-crypt write waits for its write thread in ``cc->write_tree``.

        ``kcryptd_crypt_write_io_submit`` (drivers/md/dm-crypt.c) inserts the finished clone
        into the rbtree sorted by sector and wakes ``dmcrypt_write``, which submits what the
        tree holds (:meth:`crypt_release`). The trace's sessions of that thread
        (``crypt_sessions``) say which pieces it found together and in which order: a
        session goes out once all its pieces are in the tree; without them, what the tree
        holds when the submitter is done goes out together (:meth:`crypt_flush_rest`).
        """
        child = Bio(member.dev, msec, bio.nr, bio.op, bio.rwbs, bio.flags, bio.unit, piece,
                    bio.off, bio.seg, bio.pid, fresh=True, layout=bio.layout)
        self._count(child)
        tree = self.crypt_tree.setdefault(member.dev, {})
        tree.setdefault((msec, bio.nr), deque()).append((child, node.dev, bio.sector))
        sessions = self.crypt_sessions.get(member.dev)
        while sessions and tree and all(k in tree for k in sessions[0][1]):
            pid, keys = sessions.popleft()
            self.crypt_expected[member.dev].subtract(keys)
            self.crypt_release(member.dev, keys, pid)

    def crypt_release(self, dev: int, keys: list[tuple[int, int]], pid: int | None) -> None:
        """``dmcrypt_write``: the pieces ``keys`` leave the write tree in that order under
        one ``blk_start_plug`` / ``blk_finish_plug`` of the write thread (``pid``; None: the
        submitter's), each remapped (A) and submitted with ``submit_bio_noacct``; the plug
        merges them as ``blk_attempt_plug_merge`` does."""
        tree = self.crypt_tree[dev]
        saved = (self.plug, self.bio_list, self.no_plug)
        self.plug, self.bio_list, self.no_plug = self.make_plug(), None, False
        for key in keys:
            waiting = tree[key]
            child, top, sector = waiting.popleft()
            if not waiting:
                del tree[key]
            if pid is not None:
                child.pid = pid
            self.ev(dev, child.pid, ACT_REMAP, child.rwbs, child.sector, child.nr, aux=sector,
                    aux2=top)
            self.tick()
            self.submit_noacct(child, split=False)
        plug = self.plug
        plug.flush(False)
        self.plug, self.bio_list, self.no_plug = saved
        if not tree:
            del self.crypt_tree[dev]

    def crypt_flush_rest(self) -> None:
        """The submitter of a write is done: ``dmcrypt_write`` takes what the tree still
        holds, in sector order (the rbtree's), together: pieces with no traced session, or
        whose traced session is not complete (another kernel's split, or a trace the replay
        left). Those pieces leave their traced sessions, so the tree is empty afterwards and
        no piece waits for one that never comes."""
        for dev in list(self.crypt_tree):
            tree = self.crypt_tree[dev]
            keys = sorted(k for k in tree for _ in range(len(tree[k])))
            sessions = self.crypt_sessions.get(dev)
            expected = self.crypt_expected.get(dev)
            if sessions and expected is not None and any(expected[k] > 0 for k in keys):
                gone = Counter({k: min(c, expected[k]) for k, c in Counter(keys).items()
                                if expected[k] > 0})
                expected.subtract(gone)
                for _, skeys in sessions:
                    for k in [k for k in skeys if gone[k] > 0]:
                        skeys.remove(k)
                        gone[k] -= 1
                    if not any(gone.values()):
                        break
                self.crypt_sessions[dev] = deque(ss for ss in sessions if ss[1])
            self.crypt_release(dev, keys, None)

    def _dm_crypt_max_sectors(self, bio: Bio) -> int:
        """dm-crypt's largest request (sectors; 0: no limit), ``get_max_request_sectors``.

        ``dm_crypt_split=128k`` (0d815e3400e6 "dm-crypt: limit the size of encryption
        requests", v6.11): reads and writes of at most DM_CRYPT_DEFAULT_MAX_READ_SIZE /
        DM_CRYPT_DEFAULT_MAX_WRITE_SIZE (128 KiB, the ``max_read_size`` / ``max_write_size``
        module parameters at 0). ``writes_1m`` (before it): only a write above BIO_MAX_VECS
        pages (1 MiB) is cut, since ``crypt_alloc_buffer`` allocates at most that many pages.
        """
        if self.policy.dm_crypt_split == "128k":
            return DM_CRYPT_DEFAULT_MAX_IO >> 9
        return (BIO_MAX_VECS * PAGE_SIZE) >> 9 if bio.op == OP_WRITE else 0

    def cache_submit(self, node: Node, bio: Bio) -> None:
        """A bcache-like driver: every bio is resubmitted to the cache disk (member 0).

        Writes go through ``bch_data_insert_start``: with ``flags_on_resubmit=reset`` the clone
        gets plain ``REQ_OP_WRITE`` (``bio_set_op_attrs(n, REQ_OP_WRITE, 0)``: REQ_SYNC and
        REQ_IDLE dropped, so wbt throttles it); with ``preserve`` it keeps them.
        """
        lim = self.limits[node.dev]
        bio = self._split_to_limits(bio, lim)
        rwbs, flags = bio.rwbs, bio.flags
        if bio.op == OP_WRITE and self.policy.flags_on_resubmit == "reset":
            rwbs &= ~RWBS_SYNC
            flags &= ~(F_SYNC | F_IDLE)
        piece = self._piece(node, bio)
        self._remap(node, bio, node.members[0], bio.sector, bio.nr, piece, rwbs=rwbs,
                    flags=flags)
        self._release(bio, self.now)

    # --- blk-mq disk ---------------------------------------------------------------------------
    def nsegs(self, bio: Bio, lim: QueueLimits) -> int:
        if is_discard_op(bio.op):
            return 1
        if bio.layout is not None:
            return bio.layout.nsegs(bio.off, bio.nr << 9, lim.max_segment_size)
        u = segment_unit(lim, bio.seg)
        return max(-(-(bio.off + (bio.nr << 9)) // u) - bio.off // u, 1)

    def mq_submit(self, node: Node, bio: Bio) -> None:
        """``blk_mq_submit_bio``."""
        slept = False
        if self.member_sleeps:
            qkey = (bio.pid, node.dev, bio.sector)
            nth = self.member_q_count.get(qkey, 0)
            self.member_q_count[qkey] = nth + 1
            mine = self.member_sleeps.get(bio.pid)
            slept = mine is not None and (node.dev, bio.sector, nth) in mine
        lim = self.limits[node.dev]
        bio = self._split_to_limits(bio, lim)
        post = False
        if bio.rwbs & (RWBS_FLUSH | RWBS_FUA) and bio.nr > 0 and node.kind == "disk":
            # blk_insert_flush: the pre-flush before the data (REQ_FSEQ_PREFLUSH), the data
            # request without REQ_PREFLUSH (and REQ_FUA on a queue without FUA), a post-flush
            # once it completes (REQ_FSEQ_POSTFLUSH); REQ_NOMERGE_FLAGS: it never merges
            wc = write_back(node.limits)
            pre, bio.rwbs, post = flush_sequence(bio.rwbs, wc, supports_fua(node.limits))
            if wc:  # without a write cache submit_bio_noacct cleared both flags: it may merge
                bio.flags |= F_NOMERGE
            if pre:
                self._flush_request(node.dev, bio.pid)
        if self.no_plug:
            self.preempted_by_kblockd()
        nsegs = self.nsegs(bio, lim)
        queue = self.queues[node.dev]
        if not bio.flags & F_NOMERGE and lim.nomerges < 2:
            hit = self.plug.try_merge(bio, nsegs) if self.plug is not None else None
            if hit is None and queue.has_elevator:
                hit = queue.try_bio_merge(bio, nsegs)
            if hit is not None:
                act = ACT_FRONTMERGE if hit[1] == MERGE_FRONT else ACT_BACKMERGE
                self.ev(bio.dev, bio.pid, act, bio.rwbs, bio.sector, bio.nr)
                self.tick()
                return
        if slept and self.plug is not None:
            # blk_mq_get_new_requests -> rq_qos_throttle: the trace shows the thread asleep
            # here (wbt's rq_qos_wait) before this bio's request: io_schedule ->
            # sched_submit_work flushes its plug (UT), and the request goes into it afresh
            self.plug.flush(True)
        if self.alloc[node.dev] >= self.tag_limit[node.dev]:
            self.wait_for_tag(node.dev)
        self.alloc[node.dev] += 1
        self.rid += 1
        rq = Request(bio, nsegs, self.rid)
        rq.post_flush = post
        self.n_requests += 1
        self.ev(bio.dev, bio.pid, ACT_GETRQ, bio.rwbs, bio.sector, bio.nr)
        self.tick()
        if self.plug is not None:
            self.plug.add(rq)
        elif self.no_plug and queue.has_elevator:
            self.insert_async(rq)
        else:
            self.flush_groups([FlushGroup(rq.dev, [rq], True)], False, plugged=False)

    def insert_async(self, rq: Request) -> None:
        """``blk_mq_submit_bio`` with no plug at all for a request bound for an I/O
        scheduler (RQF_USE_SCHED): ``blk_mq_insert_request`` (I) and
        ``blk_mq_run_hw_queue(hctx, true)``, i.e. the dispatch is left to kblockd (6.1's
        ``blk_mq_sched_insert_request(rq, false, true, true)`` is the same).
        ``blk_mq_delay_run_hw_queue`` -> ``kblockd_mod_delayed_work_on`` re-queues the
        hctx's ``run_work`` at the tail each time, so the queues run in the order of their
        last insertion. kblockd's worker runs when the submitting thread stops
        (:meth:`run_deferred`): a single hardware queue queues the work WORK_CPU_UNBOUND,
        i.e. on the submitter's CPU, and when the worker gets it is the CPU scheduler's
        call (``sched_wakeup``): CFS (``check_preempt_wakeup``, <= 6.5) preempts the
        submitter for the woken nice -20 worker at once, so every request is dispatched
        before the next is made (6.1.0-57 q1_r5_d4_c64_dd1M: I by dd, D by kworker/0:1H on
        the same CPU before dd's next A); under EEVDF (6.6+, RUN_TO_PARITY) the submitter
        runs on and the member pieces of a read merge in the scheduler first (7.3.4, where
        no per-bio plug hides this: D by kworker/1:1H after dd's last piece), except where
        the worker gets the CPU at a scheduler tick within the read, which the trace shows
        (:meth:`preempted_by_kblockd`).
        """
        # the worker can get the CPU between the G and the I too (kblockd_runs): it runs
        # the queues without this request
        self._kblockd_due(2 * self.placed - 1)
        self.ev(rq.dev, rq.pid, ACT_INSERT, rq.rwbs, rq.sector, rq.nr)
        if not self.queues[rq.dev].insert(rq, self.now):
            self.alloc[rq.dev] -= 1  # merged into a queued request and freed
        if self.policy.sched_wakeup == "cfs":
            self.tick()
            self.kick(rq.dev, self.now)
            return
        if rq.dev in self.deferred_runs:
            self.deferred_runs.remove(rq.dev)
        self.deferred_runs.append(rq.dev)
        self.tick()

    def preempted_by_kblockd(self) -> None:
        """Before a no-plug unit's next request is placed: where the trace shows kblockd's
        worker dispatching in the middle of the submission (it got the submitter's CPU at a
        scheduler tick, ``sched_tick`` promoting the lazy resched its wakeup left, or it ran
        on the CPU the submitter had left; :func:`workers.model.trace_plugs.kblockd_runs`),
        it runs the queues whose D the trace shows by now, and what the thread inserts after
        that no longer merges with what went out. Each hctx's ``run_work`` is its own work
        item (``blk_mq_run_work_fn``), run one after another by the worker
        (``process_scheduled_works``): a queue it has not got to yet still takes the thread's
        merges (``dd_bio_merge``), so only the queues the trace shows dispatched go out here.
        Queues the trace names that this replay does not have (another stack) run all that
        was left to kblockd, as one worker pass."""
        self._kblockd_due(2 * self.placed)
        self.placed += 1

    def _kblockd_due(self, pos: int) -> None:
        """Run the queues :attr:`kblockd_at` has the worker running by position ``pos``
        (2k before the unit's k-th G/M, 2k + 1 between the k-th's G and its I)."""
        at = self.kblockd_at
        if at and at[0][0] <= pos:
            due: list[int] = []
            while at and at[0][0] <= pos:
                due.append(at.pop(0)[1])
            self.run_deferred(None if any(d not in self.queues for d in due) else due)

    def run_deferred(self, devs: list[int] | None = None) -> None:
        """kblockd runs the flush requests queued to it, then the hardware queues
        :meth:`insert_async` left to it, in queue order (``devs``: only those queues, in
        that order, the order the trace shows the worker running them; the others stay left
        to it)."""
        flushes, self.kblockd_flushes = self.kblockd_flushes, []
        for dev in flushes:
            self._flush_request(dev, 0)
        if devs is None:
            runs, self.deferred_runs = self.deferred_runs, []
        else:
            runs = [d for d in dict.fromkeys(devs) if d in self.deferred_runs]
            self.deferred_runs = [d for d in self.deferred_runs if d not in devs]
        for dev in runs:
            self.kick(dev, self.now)
            self.tick()
        self.run_loop_work()

    def wait_for_tag(self, dev: int) -> None:
        """``blk_mq_get_tag`` finds no free tag: the thread sleeps until one is freed.

        Every request holds a tag from G until it completes: a scheduler tag (``nr_requests``)
        under an elevator, else a driver tag (``queue_depth``). ``io_schedule`` flushes the
        sleeping thread's plug first (``sched_submit_work`` -> ``blk_flush_plug(plug, true)``:
        UT events, the requests go to the queue and are dispatched). Completions are then
        processed in time order until this device has a free tag; other threads' units that
        fall due meanwhile wait until this submission is done (one submitting CPU).
        """
        self.tag_waits += 1
        if self.plug is not None:
            self.plug.flush(True)
        self.run_deferred()  # the thread sleeps: kblockd's worker gets the CPU
        while self.alloc[dev] >= self.tag_limit[dev]:
            if self.heap:
                t, _, _, rq = heapq.heappop(self.heap)
                self.now = max(self.now, t)
                self.complete(rq, t)
                self.run_loop_work()  # a loop request the completion dispatched
                continue
            # every tag is held by requests in other threads' open plugs (threads submitting
            # bio by bio, see workers.model.replay._units_interleave): those threads run on
            # and their plugs reach the queue (they finish them, or sleep); the waiter gets
            # a tag once one of those requests completes
            others = [p for p in self.open_plugs if p is not self.plug and p.rqs]
            if not others:
                break
            for p in others:
                p.flush(True)

    def make_plug(self) -> Plug:
        plug = Plug(self.policy, self.limits.__getitem__,
                    lambda dev: self.queues[dev].has_elevator, self.flush_groups)
        plug.on_plug = self._plug_event
        return plug

    def _plug_event(self, rq: Request) -> None:
        """P (``trace_block_plug``) on the queue of the request entering the plug."""
        self.ev(rq.dev, rq.pid, ACT_PLUG, RWBS_NONE, 0, 0)

    def flush_groups(self, groups: list[FlushGroup], from_schedule: bool, *,
                     plugged: bool = True) -> None:
        """Hand flushed requests to their queues (I with an elevator) and dispatch.

        A plug flush first records ``trace_block_unplug`` (U, or UT from schedule) with the
        depth: per queue batch in ``blk_mq_dispatch_plug_list`` (the group's request count),
        and on the single-queue direct path of ``blk_mq_flush_plug_list`` (``plug->rq_count``)
        only under ``unplug_trace=always``.
        """
        trace_direct = self.policy.unplug_trace == "always"
        act = ACT_UNPLUG_TIMER if from_schedule else ACT_UNPLUG_IO
        before = dict(self.batch_until)
        for g in groups:
            traced = plugged and g.requests and (trace_direct or not g.direct)
            if plugged and g.requests and self.batch_unplugs:
                pid = g.requests[0].pid
                # at the trace's U of this queue's batch (the trace's order of the queues
                # where the replay's plug order differs), and not before the thread's
                # previous flush is done (it hands the batches over in its own context)
                at = self.traced_batch_time(pid, g.dev) \
                    if traced and not from_schedule else None
                later = max(self.now, at if at is not None else self.now,
                            before.get(pid, self.now))
                if later > self.now:
                    self.batch_until[pid] = max(later, self.batch_until.get(pid, later))
                    # the thread gets to this queue later (traced_batch_time)
                    self.hseq += 1
                    heapq.heappush(self.uheap, (later, self.hseq, EV_QUEUE_BATCH, (g, act)))
                    continue
            self.hand_batch(g, act if traced else None)

    def hand_batch(self, g: FlushGroup, act: int | None) -> None:
        """One queue's batch of a plug flush: U (``act``, None for an untraced flush) with the
        count, I with an elevator, then dispatch."""
        queue = self.queues[g.dev]
        if act is not None:
            self.ev(g.dev, g.requests[0].pid, act, RWBS_NONE, 0, 0, aux=len(g.requests))
        for rq in g.requests:
            if queue.has_elevator:
                self.ev(rq.dev, rq.pid, ACT_INSERT, rq.rwbs, rq.sector, rq.nr)
            if not queue.insert(rq, self.now):
                self.alloc[g.dev] -= 1  # merged into a queued request and freed
        self.kick(g.dev, self.now)
        self.tick()

    def kick(self, dev: int, t: int) -> None:
        """Dispatch while driver tags are free (D), scheduling completions (a loop device's
        requests go on to its member, :meth:`loop_rw`)."""
        queue = self.queues[dev]
        depth = max(self.limits[dev].queue_depth, 1)
        loop = self.nodes[dev] if self.nodes[dev].kind == "loop" else None
        server = self.servers.get(dev)
        exclusive = bool(getattr(server, "_exclusive", False))
        while self.inflight[dev] < depth and len(queue):
            if exclusive and self.inflight[dev] > 0:
                # a non-queued discard (SATA TRIM) waits for an idle device and keeps
                # everything behind it queued (and mergeable) meanwhile
                nxt = queue.peek(t)
                if nxt is not None and is_discard_op(nxt.op):
                    break
            rq = queue.pop(t)
            if rq is None:
                break
            self.ev(dev, rq.pid, ACT_ISSUE, rq.rwbs, rq.sector, rq.nr, t=t)
            if loop is not None:
                self.inflight[dev] += 1
                self.loop_work.append((loop, rq, t))  # to loop's worker (run_loop_work)
                continue
            assert server is not None
            traced = None
            if self.served is not None:
                traced = self.traced_completion(dev, rq, t)
                if traced is None and dev in self.guessed_device:
                    traced = self.untraced_completion(dev, rq, t)
            if traced is not None:
                c = traced
            else:
                c = server.submit(t, rq.sector, rq.nr,
                                  rq.op != OP_READ and not is_discard_op(rq.op),
                                  is_discard_op(rq.op))
            c = max(int(c), t + 1)
            self.inflight[dev] += 1
            self.hseq += 1
            heapq.heappush(self.heap, (c, self.hseq, EV_COMPLETE, rq))

    def run_loop_work(self) -> None:
        """loop's worker handles the requests queued to it, in order.

        ``loop_queue_rq`` does no I/O: ``loop_queue_work`` adds the command to the worker's
        ``cmd_list`` and queues it (``queue_work``) on ``lo->workqueue`` (an unbound workqueue,
        ``alloc_workqueue("loop%d", WQ_UNBOUND | WQ_FREEZABLE, ...)``), and the dispatching
        thread goes on. The kworker gets a CPU once that thread is done submitting
        (the replay driver calls this between submissions, and :meth:`run_deferred` when the
        thread stops or sleeps); ``loop_process_work`` then takes every command on the list,
        oldest first, each through :meth:`loop_rw`. So the requests one submission put on
        the loop device (a bio split at the loop queue's limits: ``X``, then ``D`` of each
        piece from the submitter's ``__submit_bio`` plug) are all dispatched before the
        first of their bios reaches the disk below (6.12.117 p_loop_dio_ddw1M: ``D 0+1048``,
        ``D 1048+1000`` by dd, then the kworker's ``Q 278528+1048``, ``Q 279576+1000``).
        """
        while self.loop_work:
            work, self.loop_work = self.loop_work, []
            for node, rq, t in work:
                self.loop_rw(node, rq, t)

    def loop_rw(self, node: Node, rq: Request, t: int) -> None:
        """A loop request with direct I/O, from loop's worker: ``loop_handle_cmd`` ->
        ``lo_rw_aio`` -> the file's ``iomap_dio_rw`` (``__iomap_dio_rw`` holds a plug around
        its ``iomap_iter`` loop), one bio per mapping of the range (:func:`loop_map`) to the disk
        under the file system. A read of an unwritten extent or a hole does no I/O (zeroes,
        ``iomap_dio_hole_iter``); a direct write goes to the extent's blocks (REQ_SYNC |
        REQ_IDLE, ``iomap_dio_bio_opflags``) and converts what was unwritten when it completes
        (:class:`WrittenRanges`: a later read of it reads the disk, one bio per written and
        unwritten part, as ext4's split extents map). The loop request completes when its
        bios have (``lo_rw_aio_complete``); with none, at once.
        """
        member = node.members[0]
        write = rq.op == OP_WRITE
        cmd = LoopCmd(rq)
        first = rq.bios[0]
        saved_plug, saved_list = self.plug, self.bio_list
        self.bio_list = None  # loop's worker is another task: no current->bio_list
        self.now = max(self.now, t)
        children: list[Bio] = cmd.pending
        if not node.loop_dio:
            self._loop_buffered(node, rq, cmd)
        written = self.loop_written.get(node.dev)
        if rq.op in (OP_READ, OP_WRITE) and node.loop_dio:
            for fsec, dsec, n, unwritten in loop_map(node.file_extents, rq.sector, rq.nr):
                if dsec < 0:
                    continue
                if write and unwritten:
                    cmd.converts.append((fsec, n))
                parts = [(fsec, n, not unwritten)] if write or not unwritten or written is None \
                    else written.split(fsec, n)
                for psec, pn, has_data in parts:
                    if not has_data and not write:
                        continue  # zero-filled
                    b = Bio(member.dev, dsec + psec - fsec, pn, rq.op,
                            RWBS_WRITE | RWBS_SYNC if write else RWBS_READ,
                            F_SYNC | F_IDLE if write else 0, None, cmd,
                            first.off + ((psec - rq.sector) << 9), first.seg, rq.pid)
                    self._count(b)
                    children.append(b)
        if not children:
            for start, n in cmd.converts:  # (a page-cache write: cached at once)
                self.loop_written.setdefault(node.dev, WrittenRanges()).add(start, n)
            self.hseq += 1
            heapq.heappush(self.heap, (t + STEP_NS, self.hseq, EV_COMPLETE, rq))
            self.plug, self.bio_list = saved_plug, saved_list
            return
        cmd.remaining += 1  # held until every bio is submitted
        plug = self.make_plug()
        self.plug = plug
        for b in children:
            self.submit_noacct(b, split=False)
        plug.flush(False)
        self.plug, self.bio_list = saved_plug, saved_list
        self._put_piece(cmd, self.now)

    def _loop_buffered(self, node: Node, rq: Request, cmd: LoopCmd) -> None:
        """A loop request through the page cache (``lo_read_simple`` / ``lo_write_simple``:
        ``vfs_iter_read`` / ``vfs_iter_write`` of the backing file): a write only copies into
        the page cache (writeback sends it later, and the trace shows that as the disk's own
        writes); a read does I/O only where the page cache holds nothing (what this replay
        read or wrote before) and the file has data (not unwritten, not a hole), approximated
        as direct reads (filemap_read's readahead is not modelled). What a read or write
        touched is then cached (``cmd.converts``, recorded at completion)."""
        cached = self.loop_written.get(node.dev)
        cmd.converts.append((rq.sector, rq.nr))
        if rq.op != OP_READ:
            return
        member = node.members[0]
        first = rq.bios[0]
        for fsec, dsec, n, unwritten in loop_map(node.file_extents, rq.sector, rq.nr):
            if dsec < 0 or unwritten:
                continue
            parts = [(fsec, n, False)] if cached is None else cached.split(fsec, n)
            for psec, pn, in_cache in parts:
                if in_cache:
                    continue
                b = Bio(member.dev, dsec + psec - fsec, pn, OP_READ, RWBS_READ, 0, None, cmd,
                        first.off + ((psec - rq.sector) << 9), first.seg, rq.pid)
                self._count(b)
                cmd.pending.append(b)

    def complete(self, rq: Request, t: int) -> None:
        """A request completed: C on the disk, bios end (C on md pieces), tags freed."""
        self.inflight[rq.dev] -= 1
        self.alloc[rq.dev] -= 1
        self.ev(rq.dev, 0, ACT_COMPLETE, rq.rwbs, rq.sector, rq.nr, t=t)
        if rq.post_flush:
            self._flush_request(rq.dev, 0, t)  # blk_flush_complete_seq: REQ_FSEQ_POSTFLUSH
        for b in rq.bios:
            self._release(b, t)
        # The freed tag is used at the model clock: host steps of submissions processed
        # before this completion may have moved ``now`` past ``t``, and a D at ``t`` would
        # then precede the G of the request it issues.
        self.kick(rq.dev, max(t, self.now))
