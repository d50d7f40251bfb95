"""The replay driver: a bio stream, a stack and a policy in, a predicted EventTable out.

Input is a :class:`BioStream`: either bios as a trace queued them on the top device
(:func:`bios_from_table`) or application I/Os synthesized from a workload description
(:func:`bios_from_workload`), which :func:`replay` turns into bios with the direct-I/O build
model (:mod:`workers.model.build`) under the policy's ``bio_build``. Bios are grouped into
*units*: the bios one thread submits under one plug (kernel-model.md section 7, "Plug
boundaries").

The simulation is discrete-event: units start at their time (trace mode) or when the thread's
previous unit completed (synchronous workloads such as dd); each unit runs the submission path
of :class:`workers.model.submit.Engine` to completion under one plug, then finishes the plug
(where units of different threads overlap in time, bio by bio at the trace's times, each
thread keeping its own plug: :func:`_units_interleave`);
devices dispatch while driver tags are free and complete requests at the times the device
service model gives (``workers.model.timing.DeviceServer`` over
``workers.model.device.DeviceModel``; a simple fallback if that is missing).

The output has the shape the parsers produce: Q, X, A, G, M/F, I, D, C events per device, with
``DeviceInfo`` (name and the effective limits in sysfs spelling) for every device of the stack
and ``meta["model"]`` naming the policy, stack and seed. Deterministic for a given input and seed.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from workers.errors import ModelConfigError
from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    COLUMN_DTYPES,
    RWBS_DISCARD,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_META,
    RWBS_NONE,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    DeviceInfo,
    EventTable,
)
from workers.model.build import build_bios, natural_bio_pages
from workers.model.crypt_write import crypt_write_sessions
from workers.model.evbuf import (
    EV_ACT,
    EV_AUX,
    EV_AUX2,
    EV_DEV,
    EV_NR,
    EV_PID,
    EV_RWBS,
    EV_SEC,
    EV_TIME,
    EVENT_FIELDS,
    EventChunk,
    one_chunk,
    rows_to_chunk,
)
from workers.model.layout import layouts_from_evidence, split_evidence
from workers.model.own_requests import (
    dispatch_time_of,
    flush_kick_times,
    fold_merged,
    fs_own_rows,
    merged_rows,
    metadata_write_rows,
    split_as_traced,
    untraced_fua_writes,
    with_untraced_writes,
)
from workers.model.plug import F_IDLE, F_SYNC, F_UNMERGEABLE, Bio
from workers.model.policy import Policy, parse_size
from workers.model.raid5d_reads import (
    dirtying_read_plug_sessions,
    read_plug_sessions,
    write_plug_sessions,
    write_plug_sleeps,
)
from workers.model.raid5d_runs import (
    ROW_SECTORS,
    Raid5dRuns,
    handling_ranks,
    raid5d_runs,
    write_walks,
)
from workers.model.split import OP_READ, OP_WRITE, OP_WRITE_ZEROES, MemoryLayout, op_from_rwbs
from workers.model.stack import RAID456, Stack, all_limits, raid5_map, raid6_map
from workers.model.submit import (
    EV_COMPLETE,
    EV_QUEUE_BATCH,
    EV_RAID5D,
    EV_RAID5D_END,
    EV_UNIT,
    Engine,
    Unit,
    flush_sequence,
    supports_fua,
    write_back,
)
from workers.model.trace_plugs import (
    kblockd_runs,
    mark_unplugged,
    member_request_sleeps,
    plugs_from_issue_state,
    plugs_from_md_unplugs,
    plugs_from_workload,
    queue_batch_unplugs,
    stripe_range_writes,
    unmergeable_writes,
)

#: Heap event: the next bio of a unit interleaved with other threads' bios (see
#: :func:`_units_interleave`).
EV_BIO = 2
#: a thread's plug whose flush the trace shows later than its last bio (it slept: UT)
EV_PLUG_SLEEP = 5

#: Bytes of a page: the run of memory one bvec holds when no two pages of a buffer are adjacent.
PAGE_BYTES = 4096

#: ``engine="auto"`` uses the compiled engine from this many bios on (below it the Python
#: engine is faster than loading, or on a cold cache compiling, the numba functions).
FAST_MIN_BIOS = 5000

#: Time a synchronous thread needs between one I/O's completion and the next submission.
THINK_NS = 2_000

#: Plug ids below ``-_NO_PLUG`` (in the replay driver) mark units submitted with no plug at
#: all (``meta["no_plug"]`` of a trace's bio stream; see :func:`mark_unplugged`).
_NO_PLUG = 1 << 40


@dataclass(frozen=True)
class BioStream:
    """Submitted bios (or application I/Os) as aligned numpy arrays.

    Attributes:
        time_ns: submission time of each row.
        sector / nr_sectors: the range on the top device.
        rwbs: RWBS_* bits (R, W, D, S ...).
        pid: submitting thread.
        plug: plug-boundary id: consecutive rows of one pid with the same id share a plug;
            a negative id: the rows were submitted without a task plug.
        seg_bytes: contiguous-run length of the bio's memory (0 = contiguous), for the split
            code's max_segments model.
        bio_pages: for application I/Os (``app_io``): pages one full bio holds
            (:func:`workers.model.build.natural_bio_pages`; 0 = buffer contiguous).
        app_io: rows are application I/Os still to be built into bios under the policy.
        depth: I/Os (units) a thread may have in flight; 1 = synchronous (dd, psync; a
            trace whose single thread always waited for its previous I/O, see
            ``_waits_for_completion``); 0 = unbounded (trace replay at the recorded times).
        comm: command name for the events.
        top_dev: the device the stream was queued on (informational).
    """

    time_ns: npt.NDArray[np.int64]
    sector: npt.NDArray[np.int64]
    nr_sectors: npt.NDArray[np.int64]
    rwbs: npt.NDArray[np.int64]
    pid: npt.NDArray[np.int64]
    plug: npt.NDArray[np.int64]
    seg_bytes: npt.NDArray[np.int64]
    bio_pages: npt.NDArray[np.int64]
    app_io: bool = False
    depth: int = 0
    comm: str = "dd"
    top_dev: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return len(self.sector)

    @classmethod
    def from_arrays(cls, sector: npt.ArrayLike, nr_sectors: npt.ArrayLike, *,
                    rwbs: npt.ArrayLike | int = RWBS_READ, time_ns: npt.ArrayLike | None = None,
                    pid: npt.ArrayLike | int = 1, plug: npt.ArrayLike | None = None,
                    seg_bytes: npt.ArrayLike | int = 0, bio_pages: npt.ArrayLike | int = 0,
                    app_io: bool = False, depth: int = 0, comm: str = "dd",
                    top_dev: int | None = None) -> BioStream:
        """Build a stream; ``plug=None`` gives every row its own plug."""
        s = np.asarray(sector, dtype=np.int64).ravel()
        n = len(s)

        def col(v: Any, default: Any = 0) -> npt.NDArray[np.int64]:
            if v is None:
                v = default
            return np.ascontiguousarray(np.broadcast_to(np.asarray(v, dtype=np.int64), (n,)))

        nr = col(nr_sectors)
        if np.any(nr <= 0):
            raise ModelConfigError("every bio needs a positive length")
        if np.any(s < 0):
            raise ModelConfigError("negative sector")
        return cls(time_ns=col(time_ns, 0), sector=s, nr_sectors=nr, rwbs=col(rwbs),
                   pid=col(pid), plug=col(plug, np.arange(n)), seg_bytes=col(seg_bytes),
                   bio_pages=col(bio_pages), app_io=app_io, depth=depth, comm=comm,
                   top_dev=top_dev)


# --- bios from a trace ---------------------------------------------------------------------------
def bios_from_table(table: EventTable, top_dev: int, *, workload: str | None = None,
                    stack: Stack | None = None) -> BioStream:
    """The Q events of ``top_dev`` as a bio stream, with plug boundaries.

    Plug boundaries (kernel-model.md section 7), in order of preference:

    1. From the trace's issue state: a Q of thread *p* starts a new plug when every request
       *p* got (G) before it has left the plug (dispatched D or inserted I), i.e. the previous
       plug was finished; otherwise it shares the plug of *p*'s previous bio.
    2. With no G/D events: the workload (``dd ... bs=N``: the bios of one read share a plug).
    3. Otherwise one plug per bio.

    Q events of 0 sectors with REQ_PREFLUSH (``blkdev_issue_flush``) are kept as rows of 0
    sectors: the replay sends an empty flush down to every disk
    (:meth:`workers.model.submit.Engine.submit_flush`). Other empty Q events are left out.

    The writes the trace shows on lower devices that the top device did not cause are kept
    in ``meta["md_meta"]`` (``[time, dev, sector, nr, rwbs]``) and replayed as the trace shows
    them (:func:`md_metadata_rows`): REQ_META writes (md's superblock, a file system's journal)
    and, given a ``stack`` whose top is a loop device with its file's extent map, every request
    and bare flush on the disk below that does not touch the file's blocks (the file system's
    own I/O: ext4lazyinit zeroing inode tables, jbd2, ``sync``, metadata reads; without
    direct I/O also the writes to the file's blocks, writeback's).

    Raises:
        ModelConfigError: the table has no Q events on ``top_dev``.
    """
    if stack is not None and stack.top.dev == top_dev:
        # REQ_FUA writes a v1 trace of 6.19+ has no bio event for (their requests' D only)
        table = with_untraced_writes(table, top_dev, untraced_fua_writes(table, stack))
    is_q = (table.action == ACT_QUEUE) & (table.dev == top_dev)
    # bare flushes (0 sectors, REQ_PREFLUSH) go down as empty flushes; a write's own data
    # comes first for the checks below
    flush = is_q & (table.nr_sectors == 0) & ((table.rwbs & RWBS_FLUSH) != 0)
    if not bool(np.any(is_q & (table.nr_sectors > 0))):
        raise ModelConfigError(f"no Q events on the top device {top_dev >> 20},"
                               f"{top_dev & 0xFFFFF} to replay")
    rows = np.flatnonzero((is_q & (table.nr_sectors > 0)) | flush)
    has_gd = bool(np.any(table.action == ACT_GETRQ)) and bool(np.any(table.action == ACT_ISSUE))
    n = len(rows)
    plug = np.arange(n, dtype=np.int64)
    no_plug = np.zeros(n, dtype=np.bool_)
    md_plugs = plugs_from_md_unplugs(table, rows, top_dev)
    if md_plugs is not None:
        plug = md_plugs
    elif has_gd:
        plug = plugs_from_issue_state(table, rows)
        plug = mark_unplugged(table, rows, plug, no_plug)
    elif workload:
        plug = plugs_from_workload(workload, table.nr_sectors[rows].astype(np.int64),
                                    table.pid[rows].astype(np.int64))
    t = table.time_ns[rows].astype(np.int64)
    if not table.time_known:
        t = np.arange(n, dtype=np.int64) * 1000
    comm = table.comms[int(table.comm[rows[0]])] if len(table.comms) > 1 else "dd"
    depth = 1 if _waits_for_completion(table, rows, plug, top_dev) else 0
    if depth == 0 and table.time_known and stack is not None and stack.top.kind in RAID456:
        t = _after_md_write_start(table, rows, t, top_dev, stack)
    evidence = split_evidence(table, rows, top_dev)
    meta: dict[str, Any] = {}
    if evidence is not None and len(evidence):
        meta["split_evidence"] = evidence
    if bool(np.any(no_plug)):
        meta["no_plug"] = no_plug
        kblockd = kblockd_runs(table, rows, plug, no_plug)
        if len(kblockd):
            meta["kblockd_runs"] = kblockd
    if table.time_known and n:
        # on raid4/5/6 the replay asks the stripe cache whether a sleep was inside the bio
        inside_at: dict[int, dict[int, int]] | None = \
            {} if stack is not None and stack.top.kind in RAID456 else None
        bio_of: dict[tuple[int, int], tuple[int, int]] = {}
        # a sleep inside a member bio's submission, before its request (rq_qos_throttle):
        # the replay flushes the plug there (Engine.mq_submit), not between top bios
        member_sleeps, member_uts = member_request_sleeps(table, rows, top_dev, stack)
        if member_sleeps:
            meta["member_sleeps"] = member_sleeps
        sleeps = _schedule_flushes(table, rows, int(table.time_ns[rows].min()), inside_at,
                                   bio_of, member_uts)
        if sleeps:
            meta["sleeps"] = sleeps
        batches = queue_batch_unplugs(table, rows, top_dev, int(table.time_ns[rows].min()))
        if batches:
            meta["batch_unplugs"] = batches
    mirror = _mirror_read_choices(table, top_dev)
    if len(mirror[0]):
        meta["mirror_reads"] = mirror
    if table.time_known and n:
        runs = raid5d_runs(table, rows, stack, int(table.time_ns[rows].min()))
        if runs is not None:
            meta["raid5d_runs"] = runs
            assert stack is not None
            inside_at = _unhandled_before_sleep(inside_at, bio_of, runs, stack)
            if inside_at:
                meta["sleeps_inside"] = inside_at
        # every stack: a member request the replay issues as the trace shows it completes at
        # the trace's C, and one the trace does not have after the D->C time the trace shows
        # for its device, kind and size (Engine.traced_completion / untraced_completion).
        # Under emulation the "disk" is the host's I/O thread, which no disk model predicts:
        # raid5d's handlings and raid1's read_balance (choose_best_rdev: nr_pending) hang on
        # when members finished, and on any stack the requests that can still merge in a
        # queue depend on what the device has finished (a replay on a disk model's clock
        # drifts: 6.17.13 r5_d6_c64_fio4M_qd4, 89.3% on an HDD model's backlog)
        # (a Python pass over the trace's D and C events: kept to what the Python engine
        # replays, FAST_MIN_BIOS bios, and to raid5d and raid1 on the trace's clock, which
        # need it at any size; the compiled engine has no use for it)
        if n < FAST_MIN_BIOS or runs is not None or (
                depth == 0 and stack is not None and stack.top.kind == "raid1"):
            served = traced_service(table, int(table.time_ns[rows].min()))
            if served.shape[1]:
                meta["traced_service"] = served
        read_sessions = read_plug_sessions(table, rows, stack)
        if read_sessions is not None:
            meta["raid5d_read_sessions"] = read_sessions
        write_sessions = write_plug_sessions(table, rows, stack)
        if write_sessions is not None:
            meta["raid5d_write_sessions"] = write_sessions
        dirtying_sessions = dirtying_read_plug_sessions(table, rows, stack)
        if dirtying_sessions is not None:
            meta["raid5d_dirtying_read_sessions"] = dirtying_sessions
        write_sleeps = write_plug_sleeps(table, rows, stack)
        if write_sleeps is not None:
            meta["raid5d_write_sleeps"] = write_sleeps
    crypt = crypt_write_sessions(table, stack)
    if crypt is not None:
        meta["crypt_write_sessions"] = crypt
    unmergeable = unmergeable_writes(table, rows, top_dev, stack)
    zeroes = stripe_range_writes(table, rows, top_dev, stack)
    if bool(np.any(zeroes)):
        # REQ_OP_WRITE_ZEROES, traced as W: its op, and rq_mergeable refuses it
        meta["write_zeroes"] = zeroes
        unmergeable = unmergeable | zeroes
    if bool(np.any(unmergeable)):
        meta["unmergeable"] = unmergeable
    loop = stack is not None and stack.top.kind == "loop" and bool(stack.top.file_extents)
    mrows = metadata_write_rows(table, top_dev, per_request=loop)
    if loop:
        assert stack is not None
        # through the page cache no write on the disk is a loop request's own: all are the
        # file system's or writeback's
        mrows = np.union1d(mrows, fs_own_rows(table, stack.top.members[0].dev,
                                               stack.top.file_extents,
                                               writes_in_file=not stack.top.loop_dio))
    if len(mrows) and n:
        t0 = int(table.time_ns[rows].min()) if table.time_known else 0
        rw = table.rwbs[mrows].astype(np.int64)
        # an I (no Q traced) shows the request after the flush machinery stripped its flags;
        # md_super_write always asks for REQ_PREFLUSH | REQ_FUA
        rw = np.where((table.action[mrows] == ACT_INSERT) & ((rw & RWBS_WRITE) != 0),
                      rw | RWBS_FLUSH | RWBS_FUA, rw)
        dt = dispatch_time_of(table, mrows)
        mm = np.stack([dt - t0, table.dev[mrows].astype(np.int64),
                       table.sector[mrows].astype(np.int64),
                       table.nr_sectors[mrows].astype(np.int64), rw])
        if loop:
            assert stack is not None
            # where each stands in the trace's dispatch stream of the loop device and of the
            # loop's own requests on the disk below (D events, the file system's left out)
            own = np.zeros(len(table), dtype=bool)
            own[mrows] = True
            key = (table.dev.astype(np.int64) << 40) + table.sector.astype(np.int64)
            own_d = (table.action == ACT_ISSUE) & np.isin(key, key[mrows])
            own_d |= (table.action == ACT_ISSUE) & (table.nr_sectors == 0)  # flushes
            d = np.flatnonzero((table.action == ACT_ISSUE) & ~own_d & np.isin(
                table.dev, [stack.top.dev, stack.top.members[0].dev]))
            before = np.searchsorted(np.sort(table.time_ns[d].astype(np.int64)), dt,
                                     side="left")
            mm = fold_merged(np.vstack([mm, before, mrows]), merged_rows(table, mrows))
            mm = split_as_traced(table, mm)
            meta["fs_before"] = mm[5]
            meta["fs_first"] = mm[7]
            mm = mm[:5]
        meta["md_meta"] = mm
        if not loop and table.time_known:
            # when kblockd was asked for each step of each write's flush sequence
            # (md_metadata_rows)
            kicks = flush_kick_times(table, mrows)
            meta["md_kicks"] = np.where(kicks >= 0, kicks - t0, -1)
        if stack is not None and stack.top.kind != "loop":
            # when the members got the top device's own writes (A from the top): a write
            # that went on before a superblock update was not waiting for it
            # (md_metadata_rows)
            ra = (table.action == ACT_REMAP) & (table.aux2.astype(np.int64) == top_dev) \
                & ((table.rwbs & RWBS_WRITE) != 0)
            meta["top_remaps"] = np.sort(table.time_ns[ra].astype(np.int64)) - t0
    return BioStream(time_ns=t - (t.min() if n else 0), sector=table.sector[rows].astype(np.int64),
                     nr_sectors=table.nr_sectors[rows].astype(np.int64),
                     rwbs=table.rwbs[rows].astype(np.int64), pid=table.pid[rows].astype(np.int64),
                     plug=plug, seg_bytes=np.zeros(n, np.int64), bio_pages=np.zeros(n, np.int64),
                     app_io=False, depth=depth, comm=comm, top_dev=top_dev,
                     meta=meta)


def _after_md_write_start(table: EventTable, rows: npt.NDArray[np.intp],
                          t: npt.NDArray[np.int64], top_dev: int, stack: Stack
                          ) -> npt.NDArray[np.int64]:
    """When the writes that came while md marked the array dirty reached raid5.

    ``md_write_start`` of the first write to a clean array sets MD_SB_CHANGE_PENDING and
    wakes md's thread for ``md_update_sb``; every write that calls it while the bit is set
    sleeps (``wait_event(mddev->sb_wait, !test_bit(MD_SB_CHANGE_PENDING, ...))``) until the
    superblock writes completed, and only then goes on into ``raid5_make_request`` (its Q was
    traced before, in ``submit_bio_noacct``). When the woken writer ran is not traced; that
    it had not before its next bio on the array is (its next Q or UT there), and the trace's
    ``raid5 rcw`` messages agree (7.2 r5_d6_c64: ``sync``'s block of row 0, queued at 1.4 ms
    while the update ran to 6.1 ms, was not on the row when raid5d handled it at 8.7 ms;
    6.1: the flusher's block of row 0, queued at 19.5 ms, took the row onto the flusher's
    plug before ``sync``'s, queued at 0.6 ms, did). Such a write (not the first, whose time
    places the update: ``md_metadata_rows``) is added just before its thread's next event on
    the array, and no earlier than the update's end (its last REQ_META completion on the
    members). Returns the bios' times (``t``, trace ns)."""
    act = table.action
    members = np.array([m.dev for m in stack.top.members], dtype=np.int64)
    dev = table.dev.astype(np.int64)
    tm = table.time_ns.astype(np.int64)
    on_member = np.isin(dev, members)
    # md_super_write's writes: Q, or I where 7.x traces no Q
    meta_q = on_member & ((act == ACT_QUEUE) | (act == ACT_INSERT)) & \
        ((table.rwbs & RWBS_META) != 0) & ((table.rwbs & RWBS_WRITE) != 0)
    write = ((table.rwbs[rows] & RWBS_WRITE) != 0) & (table.nr_sectors[rows] > 0)
    if not bool(np.any(meta_q)) or not bool(np.any(write)):
        return t
    first_w = int(np.flatnonzero(write)[0])
    t_first = int(t[first_w])
    t_meta = int(tm[meta_q].min())
    if t_meta < t_first:
        return t  # an update before any write: not the one a write waits for
    # the array's bios remapped onto the members (A from the array)
    from_top = on_member & (act == ACT_REMAP) & (table.aux2.astype(np.int64) == top_dev)
    if bool(np.any(from_top & (tm > t_first) & (tm < t_meta))):
        # the array's writes reached the members before the update began: md_write_start
        # let them through (the array was dirty already, mddev->in_sync == 0), so this
        # update is a later one (the clean-marking update once writes went idle,
        # md_check_recovery after safemode_delay), which no write waits for
        return t
    # the update's end: its last REQ_META completion before the array's first bio reached
    # the members (an A from the array: raid5d handles rows only once writes were added)
    remap = from_top & (tm > t_meta)
    limit = int(tm[remap].min()) if bool(np.any(remap)) else int(tm.max()) + 1
    done = on_member & (act == ACT_COMPLETE) & ((table.rwbs & RWBS_META) != 0) & \
        (tm >= t_meta) & (tm < limit)
    if not bool(np.any(done)):
        return t
    t_end = int(tm[done].max())
    out = t.copy()
    pid = table.pid[rows].astype(np.int64)
    mine_top = (dev == top_dev) & ((act == ACT_QUEUE) | (act == ACT_UNPLUG_TIMER)
                                   | (act == ACT_UNPLUG_IO))
    waiting = np.flatnonzero(write & (t > t_first) & (t < t_end))
    if not len(waiting):
        return out
    # each thread's next event on the array after a waiting write: the events sorted by
    # (pid, time) once, each write's found by binary search (not a scan of the table per
    # write)
    ev = np.flatnonzero(mine_top)
    ev_pid = table.pid[ev].astype(np.int64)
    ev_t = tm[ev]
    order = np.lexsort((ev_t, ev_pid))
    ev_pid, ev_t = ev_pid[order], ev_t[order]
    for i in waiting.tolist():
        lo = int(np.searchsorted(ev_pid, pid[i], side="left"))
        hi = int(np.searchsorted(ev_pid, pid[i], side="right"))
        k = lo + int(np.searchsorted(ev_t[lo:hi], t[i], side="right"))
        at = int(ev_t[k]) - 1 if k < hi else t_end
        out[i] = max(at, t_end)
    return out



def traced_service(table: EventTable, t0: int) -> npt.NDArray[np.int64]:
    """Every request the trace shows a device serve: columns ``[dev, sector, nr, kind, D, C]``
    (kind: 0 read, 1 write, 2 discard; times in ns since ``t0``), each D paired with the first
    C of the same request (device, sector, size, kind) after it. A discard (RWBS ``D``, no
    ``W``) is its own kind: neither a read nor a write of the same range.

    Under emulation a request's service is the host's I/O thread, which no device model
    predicts from sector and size; where the replay issues the request the trace shows, the
    trace's C is the evidence of when the device finished it (see
    :meth:`workers.model.submit.Engine.traced_completion`).
    """
    act = table.action
    tm = table.time_ns.astype(np.int64).tolist()
    dev = table.dev.astype(np.int64).tolist()
    sec = table.sector.astype(np.int64).tolist()
    nr = table.nr_sectors.astype(np.int64).tolist()
    rwbs = table.rwbs.astype(np.int64)
    wr = np.where((rwbs & RWBS_DISCARD) != 0, 2,
                  ((rwbs & RWBS_WRITE) != 0).astype(np.int64)).tolist()
    order = np.argsort(table.time_ns, kind="stable")
    done: dict[tuple[int, int, int, int], list[int]] = {}
    for i in order[(act[order] == ACT_COMPLETE) & (table.nr_sectors[order] > 0)].tolist():
        done.setdefault((dev[i], sec[i], nr[i], wr[i]), []).append(tm[i])
    out = []
    for i in order[(act[order] == ACT_ISSUE) & (table.nr_sectors[order] > 0)].tolist():
        ends = done.get((dev[i], sec[i], nr[i], wr[i]))
        if not ends:
            continue
        k = bisect.bisect_left(ends, tm[i])
        if k < len(ends):
            out.append((dev[i], sec[i], nr[i], wr[i], tm[i] - t0, ends.pop(k) - t0))
    return np.array(out, dtype=np.int64).reshape(-1, 6).T


def _schedule_flushes(table: EventTable, q_rows: npt.NDArray[np.intp], t0: int,
                      inside_at: dict[int, dict[int, int]] | None = None,
                      bio_of: dict[tuple[int, int], tuple[int, int]] | None = None,
                      skip: dict[int, list[int]] | None = None
                      ) -> dict[int, npt.NDArray[np.int64]]:
    """Per submitting thread, when the trace shows it going to sleep with a plug: its UT
    events (``trace_block_unplug`` with ``explicit`` false: ``blk_mq_flush_plug_list`` called
    from ``sched_submit_work`` -> ``blk_flush_plug(plug, true)`` as the task schedules).

    What the task slept on (a folio lock another writeback thread holds, wbt's
    ``rq_qos_wait``, a tag) is not in the trace; that it slept then, and that its plug went to
    the queues at that moment, is. Times relative to ``t0`` (the stream's first Q); one time
    per flush (a flush traces a UT per queue it hands requests to). ``skip[pid]``: UT times
    read elsewhere (a sleep inside a member bio before its request,
    :func:`workers.model.trace_plugs.member_request_sleeps`).
    """
    act = table.action
    ut = act == ACT_UNPLUG_TIMER
    out: dict[int, npt.NDArray[np.int64]] = {}
    if not bool(np.any(ut)):
        return out
    tm = table.time_ns.astype(np.int64)
    placed = (act == ACT_GETRQ) | (act == ACT_BACKMERGE) | (act == ACT_FRONTMERGE)
    top = table.dev[q_rows[0]] if len(q_rows) else -1
    for p in np.unique(table.pid[q_rows]).tolist():
        mine = table.pid == p
        tt = np.unique(tm[ut & mine])
        if skip and skip.get(int(p)):
            tt = tt[~np.isin(tt, np.asarray(skip[int(p)], dtype=np.int64))]
        if not len(tt):
            continue
        top_ut = tm[ut & mine & (table.dev == top)]
        qt = tm[q_rows[table.pid[q_rows] == p]]
        pt = np.sort(tm[placed & mine])
        # the bio queued last before the sleep: when no request was allocated or merged for
        # it before the sleep, the task slept inside its submission (rq_qos_throttle, a tag
        # wait in blk_mq_get_new_requests), before its request joined the plug; the flush
        # then goes before that bio
        k = np.searchsorted(qt, tt, side="right") - 1
        has_q = k >= 0
        tq = np.where(has_q, qt[np.maximum(k, 0)], tt)
        done = np.searchsorted(pt, tt, side="right") - np.searchsorted(pt, tq, side="left")
        inside = has_q & (done == 0)
        # md's own UT (raid5_unplug, the plug callback a stripe_head put there) a second time
        # with no bio queued since the first: the callback had run at the first, so the
        # thread woke, finished that bio's submission (raid5_make_request went on once it had
        # its stripe_head: release_stripe_plug) and slept again with that stripe on its
        # plug, not inside the same bio twice (a blk-mq flush's UT per queue has requests
        # placed before it)
        again = np.zeros(len(k), dtype=bool)
        again[1:] = has_q[1:] & (k[1:] == k[:-1]) & np.isin(tt[1:], top_ut)
        inside &= ~again
        at = np.where(inside, tq - 1, tt)
        out[int(p)] = np.unique(at) - t0
        if inside_at is not None and bool(np.any(inside)):
            inside_at[int(p)] = {int(a) - t0: int(b) - t0
                                 for a, b in zip(at[inside].tolist(), tt[inside].tolist())}
            if bio_of is not None:
                qrow = q_rows[table.pid[q_rows] == p][np.maximum(k, 0)][inside]
                for a, r in zip(at[inside].tolist(), qrow.tolist()):
                    bio_of[(int(p), int(a) - t0)] = (int(table.sector[r]),
                                                     int(table.nr_sectors[r]))
    return out


def _unhandled_before_sleep(inside_at: dict[int, dict[int, int]] | None,
                           bio_of: dict[tuple[int, int], tuple[int, int]], runs: Raid5dRuns,
                           stack: Stack) -> dict[int, dict[int, int]]:
    """The sleeps of :func:`_schedule_flushes` taken to be inside a raid4/5/6 bio that the
    replay may still read as after it (``sleeps_inside``: moved time -> the trace's UT),
    less those whose bio's row raid5d handled between the bio and the UT: that row was not
    on the writer's plug until its flush then, so the trace does not say the bio went onto
    the plug before the sleep."""
    out: dict[int, dict[int, int]] = {}
    top = stack.top
    c = top.chunk_sectors or ROW_SECTORS
    n = len(top.members)
    for pid, moved in (inside_at or {}).items():
        for at, woke in moved.items():
            sector, nr = bio_of.get((pid, at), (-1, 0))
            handled = False
            s = sector
            while s >= 0 and s < sector + nr and not handled:
                msec = (raid6_map(s, c, n, top.layout)[1] if top.kind == "raid6"
                        else raid5_map(s, c, n, top.layout)[1])
                times = runs.rows.get(msec - msec % ROW_SECTORS, [])
                k = bisect.bisect_right(times, at + 1)
                handled = k < len(times) and times[k] < woke
                s = s - s % ROW_SECTORS + ROW_SECTORS
            if sector >= 0 and not handled:
                out.setdefault(pid, {})[at] = woke
    return out


def _mirror_read_choices(table: EventTable, top_dev: int) -> npt.NDArray[np.int64]:
    """(array sector, member dev) of every read the trace shows remapped (A) from the top.

    raid10 ``read_balance`` picks a copy by ``nr_pending`` and ``head_position``, both set
    when the member's earlier reads *complete* (``raid10_end_read_request`` ->
    ``update_head_pos``): under TCG a 64k read completes
    before or after the next chunk's choice by a race the model's clock cannot know. The
    trace's A event names the copy the kernel chose; the replay takes it
    (:meth:`workers.model.submit.Engine._read_balance`) and models the rest.
    """
    rows = np.flatnonzero((table.action == ACT_REMAP) & (table.aux2 == top_dev)
                          & ((table.rwbs & RWBS_WRITE) == 0) & (table.nr_sectors > 0))
    rows = rows[np.argsort(table.time_ns[rows], kind="stable")]  # the first read first
    return np.stack([table.aux[rows].astype(np.int64), table.dev[rows].astype(np.int64)])


def _waits_for_completion(table: EventTable, rows: npt.NDArray[np.intp],
                          plug: npt.NDArray[np.int64], top_dev: int) -> bool:
    """The trace shows one synchronous submitter: every plug unit after the first was queued
    only when everything queued before it had completed on the top device (C).

    dd with ``iflag/oflag=direct`` and fio's psync wait in ``blkdev_direct_IO`` /
    ``__blkdev_direct_IO_simple`` for each I/O before the next ``read``/``write`` is issued.
    The replay then starts a unit when the model's completion of the previous one says so
    (depth 1), not at the trace's timestamp: under TCG the guest's clock and the model's
    device clock disagree, and a unit started at the trace time could overlap the previous
    one in the model (raid5 read-modify-write stripes of two dd writes interleaving), which
    the trace proves never happened. Only a single submitting thread with a timed trace.
    """
    if not table.time_known or len(rows) < 2 or len(np.unique(table.pid[rows])) != 1:
        return False
    crow = np.flatnonzero((table.action == ACT_COMPLETE) & (table.dev == top_dev))
    if len(crow) == 0:
        return False
    ct = table.time_ns[crow].astype(np.int64)
    order = np.argsort(ct, kind="stable")
    ct = ct[order]
    done = np.cumsum(table.nr_sectors[crow].astype(np.int64)[order])
    qt = table.time_ns[rows].astype(np.int64)
    queued = np.cumsum(table.nr_sectors[rows].astype(np.int64))
    starts = np.flatnonzero(plug[1:] != plug[:-1]) + 1
    if len(starts) == 0:
        return False
    # sectors completed strictly before each unit's first Q
    k = np.searchsorted(ct, qt[starts], side="left")
    completed = np.where(k > 0, done[np.maximum(k - 1, 0)], 0)
    return bool(np.all(completed >= queued[starts - 1]))


# --- bios from a workload ------------------------------------------------------------------------
def _kv(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        if "=" not in part:
            raise ModelConfigError(f"workload item {part!r} is not key=value")
        k, _, v = part.partition("=")
        out[k.strip()] = v.strip()
    return out


def _contig(params: dict[str, str]) -> int:
    if "joins" in params:
        return natural_bio_pages(joins=_intp(params.pop("joins"), "joins"))
    if "run" in params:
        return natural_bio_pages(run_pages=_intp(params.pop("run"), "run"))
    c = params.pop("contig", "none").lower()
    if c in ("all", "yes", "contiguous"):
        return 0
    if c in ("none", "no", "fragmented"):
        return natural_bio_pages(joins=0)
    raise ModelConfigError(f"contig must be all or none, not {c!r}")


def _intp(text: str, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ModelConfigError(f"{what} must be a number, not {text!r}") from None
    if v < 0:
        raise ModelConfigError(f"{what} must not be negative")
    return v


_OPS = {"read": RWBS_READ, "write": RWBS_WRITE | RWBS_SYNC, "trim": RWBS_DISCARD,
        "discard": RWBS_DISCARD}


def bios_from_workload(spec: str, *, seed: int = 0) -> BioStream:
    """Application I/Os from a workload description.

    * ``dd:bs=4480k,count=100[,skip=0][,op=read|write][,contig=all|none|joins=J|run=R]``:
      one synchronous direct I/O of ``bs`` at a time (one plug each), as ``dd iflag=direct``.
    * ``fio:rw=read|write|randread|randwrite|trim,bs=1m,size=1g,numjobs=4,
      offset_increment=1g,iodepth=1,count=N``: ``numjobs`` threads (pids 1..N), each over its
      own range; random patterns use ``seed``; ``iodepth`` I/Os in flight per thread.

    Buffers default to fragmented pages (``contig=none``: 1 MiB bios); the 6.1 capture's dd
    buffer was contiguous (``contig=all``). Returns a stream with ``app_io=True``.

    Raises:
        ModelConfigError: unknown workload kind or key, bad number.
    """
    kind, _, rest = spec.strip().partition(":")
    kind = kind.strip().lower()
    params = _kv(rest)
    bio_pages = _contig(params)
    if kind == "dd":
        bs = parse_size(params.pop("bs", "512")) >> 9
        count = _intp(params.pop("count", "1"), "count")
        skip = _intp(params.pop("skip", "0"), "skip")
        op = params.pop("op", "read").lower()
        for k in ("iflag", "oflag", "if", "of"):
            params.pop(k, None)
        if params:
            raise ModelConfigError(f"unknown dd keys: {sorted(params)}")
        if op not in _OPS:
            raise ModelConfigError(f"dd op must be read, write or discard, not {op!r}")
        if bs <= 0 or count <= 0:
            raise ModelConfigError("dd needs bs > 0 and count > 0")
        sector = (np.arange(count, dtype=np.int64) + skip) * bs
        return BioStream.from_arrays(sector, bs, rwbs=_OPS[op], pid=1,
                                     plug=np.arange(count), seg_bytes=4096 if bio_pages else 0,
                                     bio_pages=bio_pages, app_io=True, depth=1, comm="dd")
    if kind == "fio":
        rw = params.pop("rw", "read").lower()
        bs = parse_size(params.pop("bs", "4k")) >> 9
        numjobs = _intp(params.pop("numjobs", "1"), "numjobs")
        size = parse_size(params.pop("size", "1g")) >> 9
        inc = parse_size(params.pop("offset_increment", "0")) >> 9
        iodepth = _intp(params.pop("iodepth", "1"), "iodepth")
        count = _intp(params.pop("count", "0"), "count") or max(size // max(bs, 1), 1)
        offset = parse_size(params.pop("offset", "0")) >> 9
        for k in ("ioengine", "direct", "name"):
            params.pop(k, None)
        if params:
            raise ModelConfigError(f"unknown fio keys: {sorted(params)}")
        base = rw.replace("rand", "")
        if base not in _OPS or bs <= 0 or numjobs <= 0 or iodepth <= 0:
            raise ModelConfigError(f"bad fio workload {spec!r}")
        rng = np.random.default_rng(seed)
        secs, pids = [], []
        for j in range(numjobs):
            start = offset + j * inc
            if rw.startswith("rand"):
                slots = max(size // bs, 1)
                off = rng.integers(0, slots, size=count) * bs
            else:
                off = (np.arange(count, dtype=np.int64) * bs) % max(size - size % bs, bs)
            secs.append(start + off)
            pids.append(np.full(count, j + 1))
        # interleave jobs round-robin so thread order does not bias the start
        sec = np.stack(secs, axis=1).ravel()
        pid = np.stack(pids, axis=1).ravel()
        return BioStream.from_arrays(sec, bs, rwbs=_OPS[base], pid=pid, plug=np.arange(len(sec)),
                                     seg_bytes=4096 if bio_pages else 0, bio_pages=bio_pages,
                                     app_io=True, depth=iodepth, comm="fio")
    raise ModelConfigError(f"unknown workload kind {kind!r} (dd, fio)")


# --- replay ----------------------------------------------------------------------------------------
class _Thread:
    __slots__ = ("pid", "units", "next", "inflight", "depth", "sync")

    def __init__(self, pid: int, depth: int) -> None:
        self.pid = pid
        self.units: list[tuple[int, list[int]]] = []  # (time, row indices)
        self.next = 0
        self.inflight = 0
        self.depth = depth
        self.sync = depth > 0


def _flags_of(rwbs: int) -> int:
    if rwbs & RWBS_SYNC:
        return F_SYNC | (F_IDLE if rwbs & RWBS_WRITE else 0)
    return 0


def replay(bios: BioStream, stack: Stack, policy: Policy, *, seed: int = 0,
           record: bool = True, engine: str = "auto",
           progress: Callable[[int, int], None] | None = None) -> EventTable:
    """Predict the events every device of ``stack`` sees for ``bios`` under ``policy``.

    Args:
        bios: trace bios (:func:`bios_from_table`) or application I/Os
            (:func:`bios_from_workload`, built here under ``policy.bio_build``).
        stack: the device tree.
        policy: kernel behaviour (a preset, possibly with overrides).
        seed: recorded in the output's meta; the replay itself has no randomness.
        record: False skips the event table (benchmarks of the state machine alone).
        engine: ``"python"`` (:class:`workers.model.submit.Engine`), ``"fast"`` (the compiled
            engine of :mod:`workers.model.fast`, same events; ModelConfigError when the case is
            outside its scope) or ``"auto"`` (fast when eligible and at least
            ``FAST_MIN_BIOS`` bios). Both model tag waits (every request holds a scheduler
            tag, ``nr_requests``, or without an elevator a driver tag, ``queue_depth``, from
            G to completion; :meth:`Engine.wait_for_tag`).
        progress: called with ``(bios submitted, bios)`` at the start, about every 1% of
            the bios on the Python engine, and at the end (the compiled engine runs in one
            call: start and end only), for a caller's progress bar.

    Returns:
        An EventTable sorted by time with per-device seq numbers.
    """
    eng = Engine(stack, policy, record=record)
    if not bios.app_io:
        eng.member_sleeps = dict(bios.meta.get("member_sleeps") or {})
    runs = bios.meta.get("raid5d_runs")
    if isinstance(runs, Raid5dRuns):
        # which blocks raid5d read per row says nothing of time: kept at any depth
        # (Engine._cached_before_trace)
        eng.r5_read_any = {row: functools.reduce(operator.or_, masks, 0)
                           for row, masks in runs.reads.items()}
    if bios.depth != 0:
        # raid5d's traced times are on the trace's clock: threads that wait for their I/O
        # (dd) run on the model's own clock, where those times mean nothing; which rows
        # raid5d read or wrote under one plug is still known (Engine.r5_read_session,
        # Engine.r5_write_session, Engine.r5_dirtying_session)
        runs = None
        read_sessions = bios.meta.get("raid5d_read_sessions")
        if isinstance(read_sessions, dict):
            eng.r5_read_session = read_sessions
        write_sessions = bios.meta.get("raid5d_write_sessions")
        if isinstance(write_sessions, dict):
            eng.r5_write_session = write_sessions
        dirtying_sessions = bios.meta.get("raid5d_dirtying_read_sessions")
        if isinstance(dirtying_sessions, dict):
            # and in which of them a write's handling read the row (Engine._start_reads)
            eng.r5_dirtying_session = dirtying_sessions
        write_sleeps = bios.meta.get("raid5d_write_sleeps")
        if isinstance(write_sleeps, dict):
            # where raid5d slept inside a member write (Engine._sleep_by_order)
            eng.r5_write_sleeps = {k: dict(v) for k, v in write_sleeps.items()}
        traced = bios.meta.get("raid5d_runs")
        if isinstance(traced, Raid5dRuns):
            # and which rows each of raid5d's write walks took, in which order (by order
            # alone: Engine._write_batches)
            eng.r5_write_walk = write_walks(traced)
            eng.r5_handling_rank = handling_ranks(traced)
    if isinstance(runs, Raid5dRuns):
        eng.r5_runs = dict(runs.rows)
        eng.r5_writes = dict(runs.writes)
        eng.r5_reads = dict(runs.reads)
        eng.r5_session_start = list(runs.session_start)
        eng.r5_session_end = list(runs.session_end)
        eng.r5_dirtied = dict(runs.dirtied)
        eng.r5_delay_msgs = dict(runs.delayed)
        eng.r5_linked = dict(runs.linked)
        for s0, sleep_dev, sleep_sector, sleep_write, wake in runs.sleeps:
            eng.r5_sleeps.setdefault((sleep_dev, sleep_sector, sleep_write), []).append(
                (s0, wake))
    crypt = bios.meta.get("crypt_write_sessions")
    if isinstance(crypt, dict):
        # dm-crypt's write thread: which pieces it submitted under one plug, in what order
        # (by order alone: Engine.crypt_queue)
        eng.set_crypt_sessions(crypt)
    served = bios.meta.get("traced_service")
    if served is not None and not bios.app_io:
        # on the trace's clock, a member request the trace shows completes when it did there
        # (raid5d's handlings, raid1's read_balance: see bios_from_table)
        eng.set_traced_service(np.asarray(served, np.int64))
    top = stack.top.dev
    layouts: dict[int, MemoryLayout] = {}
    hint = bios.meta.get("mirror_reads")
    if hint is not None and stack.top.kind == "raid10":
        eng.mirror_hint = {int(a): int(d) for a, d in zip(hint[0].tolist(), hint[1].tolist())}
    elif hint is not None and stack.top.kind == "raid1" and len(hint[0]):
        eng.seed_read_balance(stack.top, int(hint[0][0]), int(hint[1][0]))
    if bios.app_io:
        lim = eng.limits[top]
        built = build_bios(bios.sector, bios.nr_sectors, bios.bio_pages, policy,
                           max_sectors=lim.max_sectors, seg_bytes=bios.seg_bytes,
                           lbs=lim.logical_block_size)
        src = built.io
        sector, nr, seg = built.sector, built.nr_sectors, built.seg_bytes
        time_ns, rwbs, pid, plug = (bios.time_ns[src], bios.rwbs[src], bios.pid[src],
                                    bios.plug[src])
    else:
        sector, nr, seg = bios.sector, bios.nr_sectors, bios.seg_bytes
        time_ns, rwbs, pid, plug = bios.time_ns, bios.rwbs, bios.pid, bios.plug
        no_plug = bios.meta.get("no_plug")
        if no_plug is not None and len(no_plug) == len(plug):
            # units with no plug at all keep their own negative ids, below -_NO_PLUG
            plug = np.where(np.asarray(no_plug, np.bool_) & (plug < 0), plug - _NO_PLUG, plug)
        evidence = bios.meta.get("split_evidence")
        if evidence is not None and len(evidence):
            # the trace's top device is the stack's top even where their numbers differ (a
            # stack from a spec rather than the capture's manifest)
            lims = dict(eng.limits)
            if bios.top_dev is not None:
                lims[bios.top_dev] = eng.limits[top]
            layouts = layouts_from_evidence(np.asarray(evidence, np.int64), nr, lims)
            # equal runs are the seg_bytes model, which the compiled engine also runs
            run_of = {id(lay): lay.uniform() for lay in layouts.values()}
            uniform = {i: run_of[id(lay)] for i, lay in layouts.items()}
            if any(uniform.values()):
                seg = seg.copy()
                for i, run in uniform.items():
                    if run:
                        seg[i] = run
                        del layouts[i]
    if engine not in ("auto", "python", "fast"):
        raise ModelConfigError(f"engine must be auto, python or fast, not {engine!r}")
    # with raid5d's work in the trace, every thread keeps its plug bio by bio: the stripes it
    # holds (release_stripe_plug) wait for its unplug while raid5d handles the others'
    interleave = bio_by_bio(pid, plug, bios.depth, stack) or (
        bios.depth == 0 and isinstance(runs, Raid5dRuns))
    # empty flushes, and writes through the flush machinery (REQ_PREFLUSH / REQ_FUA with data)
    flushes = bool(np.any(nr == 0)) or \
        bool(np.any((np.asarray(rwbs) & (RWBS_FLUSH | RWBS_FUA)) != 0))
    unmerge = np.asarray(bios.meta.get("unmergeable", np.zeros(0, np.bool_)), dtype=np.bool_)
    if len(unmerge) != len(sector):
        unmerge = np.zeros(len(sector), dtype=np.bool_)
    unmerge_l = unmerge.tolist()
    sleeps: dict[int, npt.NDArray[np.int64]] = dict(bios.meta.get("sleeps") or {})
    # sleeps taken to be inside a bio of a raid4/5/6 array, moved before it: the trace's UT
    sleeps_inside: dict[int, dict[int, int]] = dict(bios.meta.get("sleeps_inside") or {})
    # where kblockd's worker ran in the middle of a no-plug unit (trace_plugs.kblockd_runs)
    # (each queue at its own D: [i, k, dev])
    kblockd_at: dict[int, list[tuple[int, int]]] = {}
    if not bios.app_io:
        for i, k, d in np.asarray(bios.meta.get("kblockd_runs", np.zeros((0, 3))),
                                  np.int64).reshape(-1, 3).tolist():
            kblockd_at.setdefault(i, []).append((k, d))
    paused: dict[Unit, tuple[int, list[tuple[int, int]]]] = {}
    if engine != "python":
        from workers.model import fast

        big = len(sector) >= FAST_MIN_BIOS or engine == "fast"
        # units without a task plug, bios with their own memory runs, threads whose plugs
        # interleave and empty flushes run on the Python engine only
        if big and not bool(np.any(plug < 0)) and not layouts and not interleave and \
                not flushes and not bool(np.any(unmerge)) and not eng.member_sleeps and \
                fast.eligible(np.asarray(rwbs, dtype=np.int64), stack, eng.limits):
            # both engines model tag waits (a thread sleeps, its plug is flushed from schedule)
            if progress is not None:
                progress(0, len(sector))
            out = _replay_fast(eng, bios, stack, policy, seed, record, sector, nr,
                               seg, rwbs, pid, time_ns, plug)
            if progress is not None:
                progress(len(sector), len(sector))
            return out
        if engine == "fast":
            raise ModelConfigError("this stack/workload is outside the compiled engine's scope")
    threads: dict[int, _Thread] = {}
    n = len(sector)
    pid_l = pid.tolist()
    plug_l = plug.tolist()
    time_l = time_ns.tolist()
    batches = bios.meta.get("batch_unplugs")
    if batches and interleave and not bios.app_io:
        # threads racing on the trace's clock: each queue's batch of a thread's plug flush
        # goes out when the trace shows that thread getting to it (Engine.traced_batch_time)
        q_times: dict[int, list[int]] = {}
        for p_, t_ in zip(pid_l, time_l):
            q_times.setdefault(p_, []).append(t_)
        eng.set_batch_unplugs(batches, q_times)
    last_key: dict[int, int] = {}
    for i in range(n):
        p = pid_l[i]
        th = threads.get(p)
        if th is None:
            th = threads[p] = _Thread(p, bios.depth)
        if last_key.get(p) != plug_l[i] or not th.units:
            th.units.append((time_l[i], [i]))
            last_key[p] = plug_l[i]
        else:
            th.units[-1][1].append(i)
    sector_l, nr_l, seg_l, rwbs_l = sector.tolist(), nr.tolist(), seg.tolist(), rwbs.tolist()
    ops = [op_from_rwbs(r) for r in rwbs_l] if n else []
    zeroes = np.asarray(bios.meta.get("write_zeroes", np.zeros(0, np.bool_)), dtype=np.bool_)
    if len(zeroes) == n:
        # writes the trace shows were REQ_OP_WRITE_ZEROES (stripe_range_writes)
        for i in np.flatnonzero(zeroes & ((np.asarray(rwbs, np.int64) & RWBS_WRITE) != 0)
                                ).tolist():
            ops[i] = OP_WRITE_ZEROES

    def schedule(th: _Thread, t: int) -> None:
        while th.next < len(th.units) and (not th.sync or th.inflight < th.depth):
            ut, _ = th.units[th.next]
            start = max(ut, t) if th.sync else ut
            eng.hseq += 1
            heapq.heappush(eng.uheap, (start, eng.hseq, EV_UNIT, (th, th.next)))
            th.next += 1
            th.inflight += 1

    def unit_done(unit: Unit, t: int) -> None:
        th = unit.thread
        assert isinstance(th, _Thread)
        th.inflight -= 1
        if th.sync:
            schedule(th, t + THINK_NS)

    eng.on_unit_done = unit_done
    for th in threads.values():
        schedule(th, 0)
    heap, uheap = eng.heap, eng.uheap
    submitted, report_at, step = 0, 0, max(1, n // 100)
    if progress is not None:
        progress(0, n)
    while heap or uheap or eng.loop_work or eng.release_held_plug():
        if eng.loop_work:
            # no thread is inside a submission: loop's worker runs (Engine.run_loop_work)
            eng.run_loop_work()
            continue
        # the earlier of the two heads, as one heap ordered by (time, hseq) would give
        if heap and (not uheap or heap[0][:2] < uheap[0][:2]):
            t, _, kind, payload = heapq.heappop(heap)
        else:
            t, _, kind, payload = heapq.heappop(uheap)
        if kind == EV_COMPLETE:
            eng.now = max(eng.now, t)
            eng.complete(payload, t)
            eng.raid5_unplug()
            continue
        if kind == EV_RAID5D:
            eng.now = max(eng.now, t)
            eng.r5_wakes.discard(t)
            eng.raid5_unplug()
            continue
        if kind == EV_PLUG_SLEEP:
            eng.now = max(eng.now, t)
            slept, sleeper = payload
            saved_plug, eng.plug = eng.plug, slept
            slept.flush(True)
            eng.plug = saved_plug
            eng.run_deferred()
            eng.raid5_unplug(sleeper)  # raid5_unplug(from_schedule): the plug's callback
            continue
        if kind == EV_RAID5D_END:
            eng.now = max(eng.now, t)
            eng.end_raid5d_session(payload)
            continue
        if kind == EV_QUEUE_BATCH:
            eng.now = max(eng.now, t)
            eng.hand_batch(*payload)  # a plug flush's later queue (Engine.traced_batch_time)
            continue
        if kind == EV_BIO:
            # the next bio of a unit whose thread other threads' bios interleave with
            unit, plug_obj, rows, k, naps, j = payload
            th = unit.thread
            ui = unit.index
            if plug_obj is not None:
                eng.open_plugs.remove(plug_obj)
        else:
            th, ui = payload
            unit = Unit(th, ui)
            # a negative plug id: submitted without a task plug (see mark_unplugged)
            plug_obj = eng.make_plug() if plug_l[th.units[ui][1][0]] >= 0 else None
            rows, k = th.units[ui][1], 0
            naps, j = _naps_within(sleeps.get(th.pid), time_l[rows[0]], time_l[rows[-1]]) \
                if interleave and plug_obj is not None else (_NO_NAPS, 0)
        eng.now = max(eng.now, t)
        eng.plug = plug_obj
        # below -_NO_PLUG: without __submit_bio's per-bio plug either (see mark_unplugged)
        eng.no_plug = plug_l[rows[0]] < -_NO_PLUG
        if eng.no_plug:
            eng.placed, eng.kblockd_at = paused.pop(unit) if unit in paused else \
                (0, list(kblockd_at.get(rows[0], ())))
        due = 0
        while k < len(rows):
            i = rows[k]
            if j < len(naps) and naps[j] <= time_l[i]:
                if naps[j] > eng.now:
                    due = naps[j]
                    break
                woke = sleeps_inside.get(th.pid, {}).get(naps[j])
                if woke is not None and woke > time_l[i] and \
                        not eng.raid5_would_wait(top, sector_l[i], nr_l[i], ops[i]):
                    # the bio gets every stripe_head it needs (raid5_get_active_stripe
                    # does not sleep): it goes onto the plug, and the thread slept after
                    # it, at the trace's UT, whose flush (raid5_unplug) releases its row
                    naps[j] = woke
                    continue
                # the trace shows the thread sleeping here: its plug goes out from schedule
                assert plug_obj is not None
                plug_obj.flush(True)
                eng.raid5_unplug(th.pid)  # raid5_unplug(from_schedule) is a plug callback
                j += 1
                continue
            if interleave and k and time_l[i] > eng.now:
                due = time_l[i]
                break
            eng.now = max(eng.now, time_l[i]) if not th.sync else eng.now
            if nr_l[i] == 0:
                eng.submit_flush(th.pid, rwbs_l[i])  # blkdev_issue_flush: no plug, no data
                k += 1
                continue
            flags = _flags_of(rwbs_l[i]) | (F_UNMERGEABLE if unmerge_l[i] else 0)
            b = Bio(top, sector_l[i], nr_l[i], ops[i], rwbs_l[i], flags, unit,
                    None, 0, seg_l[i], th.pid, layout=layouts.get(i))
            eng.submit_bio(b)
            k += 1
        if k < len(rows):
            # the thread keeps its plug (current->plug) until it submits its next bio;
            # meanwhile other threads submit and completions come in
            if eng.no_plug:
                paused[unit] = (eng.placed, eng.kblockd_at)
            eng.plug = None
            eng.no_plug = False
            if plug_obj is not None:
                eng.open_plugs.append(plug_obj)
            eng.hseq += 1
            heapq.heappush(uheap, (due, eng.hseq, EV_BIO, (unit, plug_obj, rows, k, naps, j)))
            continue
        unit.submitted = True
        if plug_obj is not None:
            nap = _sleep_after(sleeps.get(th.pid), time_l[rows[-1]],
                               th.units[ui + 1][0] if ui + 1 < len(th.units) else None)
            if j < len(naps) and (nap is None or naps[j] < nap):
                nap = naps[j]  # a sleep after the unit's last bio, moved there above
            if nap is not None and nap > eng.now and not th.sync:
                # the thread kept its plug until it slept (UT): blk_flush_plug from
                # sched_submit_work, the requests inserted and run by kblockd then
                eng.hseq += 1
                heapq.heappush(uheap, (nap, eng.hseq, EV_PLUG_SLEEP, (plug_obj, th.pid)))
            else:
                plug_obj.flush(False)
                nap = None
        eng.plug = None
        eng.no_plug = False
        # the thread is done submitting (it waits for its I/O, or its next unit is due
        # later): kblockd runs the hardware queues it was asked to (Engine.run_deferred)
        eng.run_deferred()
        if plug_obj is None or nap is None or nap <= eng.now or th.sync:
            eng.raid5_unplug(th.pid)  # else with the plug's flush at the sleep (its callback)
        if unit.outstanding == 0:
            unit_done(unit, eng.now)
        if progress is not None:
            submitted += len(th.units[ui][1])
            if submitted >= report_at:
                progress(submitted, n)
                report_at = submitted + step
    if progress is not None:
        progress(n, n)
    return _table(eng, stack, policy, bios, seed) if record else EventTable.empty()


_NO_NAPS: list[int] = []


def bio_by_bio(pid: npt.ArrayLike, plug: npt.ArrayLike, depth: int, stack: Stack) -> bool:
    """The replay submits bio by bio (each thread keeping its plug between its bios): threads
    replayed at the trace's times (depth 0) whose units overlap (:func:`_units_interleave`),
    except on raid4/5/6 stacks: the stripes a thread's bios touch wait on that thread's plug
    (``release_stripe_plug``), which the replay keeps per unit, not per bio. (:func:`replay`
    goes bio by bio on those too when the trace shows raid5d's work, ``meta["raid5d_runs"]``:
    each stripe then waits for the plug of the thread that took it, ``R5Stripe.owner``.)"""
    return depth == 0 and not any(nd.kind in RAID456 for nd in stack.nodes()) \
        and _units_interleave(pid, plug)


def _sleep_after(times: npt.NDArray[np.int64] | None, last: int, nxt: int | None
                 ) -> int | None:
    """The thread's first sleep (trace UT time) after its unit's last bio and before its next
    unit's first, if the trace shows one: the plug is flushed from schedule then."""
    if times is None or not len(times):
        return None
    a = int(np.searchsorted(times, last, side="left"))
    if a < len(times) and (nxt is None or int(times[a]) <= nxt):
        return int(times[a])
    return None


def _naps_within(times: npt.NDArray[np.int64] | None, first: int, last: int
                 ) -> tuple[list[int], int]:
    """The thread's sleeps (trace UT times) after its unit's first bio and before its last:
    the plug is flushed from schedule there (:func:`_schedule_flushes`)."""
    if times is None or not len(times):
        return _NO_NAPS, 0
    a = int(np.searchsorted(times, first, side="right"))
    b = int(np.searchsorted(times, last, side="left"))
    return (times[a:b].tolist(), 0) if b > a else (_NO_NAPS, 0)


def _units_interleave(pid: npt.ArrayLike, plug: npt.ArrayLike) -> bool:
    """Some thread's unit (one plug) spans another thread's bios in the trace.

    Each task has its own plug (``current->plug``, ``blk_start_plug``): two tasks writing back
    at once (the flusher's ``wb_writeback`` and ``sync``'s ``sync_inodes_sb``, each under a
    plug around its ``do_writepages``) add requests to their own plugs while the other runs on
    the other CPU, and each plug flushes when its newest request reaches
    BLK_PLUG_FLUSH_SIZE (``blk_add_rq_to_plug``), so their requests reach the disk interleaved
    as their bios were. The replay then submits such units bio by bio at the trace's times,
    keeping each thread's plug between its bios, instead of one unit at a time.
    """
    pid = np.asarray(pid, dtype=np.int64)
    plug = np.asarray(plug, dtype=np.int64)
    n = len(pid)
    if n < 2 or bool(np.all(pid == pid[0])):
        return False
    # units as the driver builds them: per thread (rows in trace order), a new unit where
    # the plug id changes
    order = np.lexsort((np.arange(n), pid))
    p, g = pid[order], plug[order]
    new = np.r_[True, (p[1:] != p[:-1]) | (g[1:] != g[:-1])]
    uid = np.cumsum(new) - 1
    first = np.full(int(uid[-1]) + 1, n, dtype=np.int64)
    last = np.full(int(uid[-1]) + 1, -1, dtype=np.int64)
    np.minimum.at(first, uid, order)
    np.maximum.at(last, uid, order)
    # a unit whose first and last rows enclose a row of another unit: rows of one thread's
    # units follow each other, so that row is another thread's
    s = np.argsort(first, kind="stable")
    reach = np.maximum.accumulate(last[s])
    return bool(np.any(first[s][1:] < reach[:-1]))


def _replay_fast(eng: Engine, bios: BioStream, stack: Stack, policy: Policy, seed: int,
                 record: bool, sector: npt.NDArray[np.int64], nr: npt.NDArray[np.int64],
                 seg: npt.NDArray[np.int64], rwbs: npt.NDArray[np.int64],
                 pid: npt.NDArray[np.int64], time_ns: npt.NDArray[np.int64],
                 plug: npt.NDArray[np.int64]) -> EventTable:
    """The same replay through :func:`workers.model.fast.run_fast`.

    Units are built with numpy exactly as the Python driver builds them: threads in order of
    first appearance, and within a thread a new unit whenever the plug id changes.
    """
    from workers.model import fast
    from workers.model.submit import STEP_NS

    n = len(sector)
    pid = np.asarray(pid, dtype=np.int64)
    plug = np.asarray(plug, dtype=np.int64)
    perm: npt.NDArray[np.int64] | None = None  # None: rows already in thread order
    if n and bool(np.all(pid == pid[0])):
        # one thread (a dd, one aio submitter): thread order is the row order
        r = np.zeros(n, dtype=np.int64)
        pl = plug
    elif n:
        _, first_idx, inv = np.unique(pid, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first_idx, kind="stable"), kind="stable")[inv]
        perm = np.lexsort((np.arange(n), rank))
        r = rank[perm]
        pl = plug[perm]
    if n:
        new_thread = np.ones(n, dtype=bool)
        new_thread[1:] = r[1:] != r[:-1]
        new_unit = new_thread.copy()
        new_unit[1:] |= pl[1:] != pl[:-1]
        ustart = np.flatnonzero(new_unit)
        uend = np.append(ustart[1:], n)
        uthread = r[ustart]
        tstart = np.flatnonzero(new_thread[ustart])
        tend = np.append(tstart[1:], len(ustart))
        units = np.stack([ustart, uend, uthread], axis=1)
        threads = np.stack([tstart, tend, np.full(len(tstart), bios.depth)], axis=1)
    else:
        units = np.zeros((0, 3), np.int64)
        threads = np.zeros((0, 3), np.int64)

    def in_order(a: npt.ArrayLike) -> npt.NDArray[np.int64]:
        a = np.asarray(a, dtype=np.int64)
        return np.ascontiguousarray(a if perm is None else a[perm])

    rw = in_order(rwbs)
    ops = np.where(rw & RWBS_WRITE, OP_WRITE, OP_READ).astype(np.int64)
    flags = np.where(rw & RWBS_SYNC, F_SYNC | np.where(rw & RWBS_WRITE, F_IDLE, 0), 0)
    rows_arr, nreq = fast.run_fast(stack, policy, eng.limits, eng.servers, in_order(sector),
                                   in_order(nr), ops, rw, flags.astype(np.int64), in_order(seg),
                                   in_order(pid), in_order(time_ns), units, threads, STEP_NS,
                                   THINK_NS)
    eng.n_requests = nreq
    if not record:
        return EventTable.empty()
    return _table(eng, stack, policy, bios, seed, rows_arr)


def md_metadata_rows(meta: npt.NDArray[np.int64], bios: BioStream, stack: Stack,
                     cols: npt.NDArray[np.int64], sched_wakeup: str = "cfs",
                     top_q: npt.NDArray[np.int64] | None = None,
                     kicks: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.int64]:
    """Predicted events of md's own superblock/bitmap writes the trace shows on the members
    (and of a file system's own writes under a loop device: see the end).

    ``md_write_start`` marks a clean array dirty before its first write goes on (``in_sync`` ->
    ``MD_SB_CHANGE_CLEAN``; the md thread runs ``md_update_sb``, which ``md_super_write``s the
    superblock with REQ_PREFLUSH|REQ_FUA|REQ_META to every member and the write waits for it);
    after ``safe_mode_delay`` without writes the array is marked clean again the same way. The
    trace shows these writes as Q events on the members with no remap from the top device.
    Replay: such writes in order, grouped between top bios; an update while the array is clean
    goes before the first top write submitted after the previous update (it blocks that write),
    any other after the predicted events of the bios submitted before it. Each becomes Q, then
    the requests of :func:`flush_sequence` for the member's ``write_cache`` / ``fua``.

    The flush machinery runs each member's sequence from kblockd's high-priority worker,
    woken while md's thread is still in ``md_update_sb``'s loop over the members
    (``rdev_for_each``, then ``md_super_wait``). Every step is a kick of the member queue's
    ``requeue_work``: ``blk_insert_flush`` queues the pre-flush when md's write is inserted
    (``blk_kick_flush`` -> ``blk_flush_queue_rq`` -> ``blk_mq_add_to_requeue_list`` ->
    ``blk_mq_kick_requeue_list``), ``flush_end_io`` the data when the pre-flush completes,
    ``mq_flush_data_end_io`` the post-flush when the data completes; the worker runs the
    kicked works in the order they were queued (``insert_work`` appends to the pool's
    worklist), each dispatching its queue's step (``blk_mq_requeue_work`` ->
    ``blk_mq_run_hw_queues``). With ``kicks`` (``flush_kick_times``: the trace's insertion
    of each write and completion of each step, the device's service as the trace shows it)
    an update's steps go in that order. When md's
    thread inserts each write is the scheduler's: ``sched_wakeup=cfs`` (up to 6.5): CFS's
    ``check_preempt_wakeup`` preempts md's thread for the nice -20 worker at each kick, and md's
    thread gets the CPU back once the worker is idle: at the trace's insertions. So on 6.1 a
    member's data and post-flush go before md writes the next member's superblock only when
    its flush completed first (r10n2_d4_c64_blkdiscard: the first update ran vdd's sequence
    whole, vdc's pre-flush and data, then vdb's and vda's side by side with vdc's post-flush;
    the second, after the discards, all four side by side). ``eevdf`` (6.6+, RUN_TO_PARITY in
    ``pick_eevdf``): md's thread keeps the CPU until ``md_super_wait`` sleeps, so every
    member's write is inserted before the worker runs a step (all pre-flushes first, the
    later steps as their completions come: the 6.18 / 7.x captures). Without ``kicks`` (a
    trace with no times): cfs runs each member's sequence whole before the next member's,
    eevdf stage by stage (all pre-flushes, the data writes, the post-flushes).

    Under a loop device the member is the disk a file system sits on, and the metadata writes
    there are the file system's own (ext4's jbd2 commit of, e.g., the backing file's atime or
    extent changes; ``sync`` writing the inode table back): no loop write waits for them as an
    md write waits in ``md_write_start``, so each group goes after the predicted events of the
    bios submitted before it, each write's sequence whole before the next (one submitter,
    jbd2 or the syncing task, waits for each in turn). "Before the next bio" is then read on
    the prediction's own clock when ``top_q`` (the predicted Q times of the top device, in
    order) is given: a synchronous replay (dd) runs on the model's clock, not the trace's.
    md's updates are placed on that clock too (one predicted Q per bio): the one that marks
    the array dirty at the predicted Q of the write it blocks, the one that marks it clean
    again no earlier than its traced time moved by as much as the prediction moved the bio
    before it.
    """
    members = {n.dev: n for n in stack.nodes() if n.dev != stack.top.dev}
    md = stack.top.kind != "loop"
    keep = np.isin(meta[1], list(members))
    meta = meta[:, keep]
    if kicks is not None and (not md or kicks.shape != (3, len(keep))):
        kicks = None
    if kicks is not None:
        kicks = kicks[:, keep]
    if not meta.shape[1]:
        return np.zeros((9, 0), np.int64)
    order = np.argsort(meta[0], kind="stable")
    meta = meta[:, order]
    if kicks is not None:
        kicks = kicks[:, order]
    bt = bios.time_ns
    remaps = bios.meta.get("top_remaps")
    # a discard is a write to md too (``op_is_write(REQ_OP_DISCARD)``: raid1/raid10/raid5's
    # make_request call ``md_write_start`` for it before ``raid10_handle_discard`` & co.)
    writes = np.flatnonzero(((bios.rwbs & (RWBS_WRITE | RWBS_DISCARD)) != 0)
                            & (bios.nr_sectors > 0))
    wt = bt[writes]
    # each top bio's Q on the prediction's own clock (one Q per bio, in order), else the
    # trace's: a synchronous replay (depth 1) runs on the model's clock, and an update goes
    # where the prediction puts the bios around it, not where the trace's clock did
    qt = bt if top_q is None or len(top_q) != len(bt) else np.asarray(top_q, np.int64)
    # groups: consecutive metadata writes with no top bio submitted between them, one
    # ``md_update_sb`` each: a member written again starts the next update (the update that
    # marks the array dirty and the one that marks it clean again after ``safe_mode_delay``
    # need no top bio between them when the last write came before both)
    nxt = np.searchsorted(bt, meta[0], side="right")
    cut = np.zeros(meta.shape[1], dtype=bool)
    cut[0] = True
    seen: set[int] = set()
    for j in range(meta.shape[1]):
        dev = int(meta[1, j])
        if j and (nxt[j] != nxt[j - 1] or (md and dev in seen)):
            cut[j] = True
            seen = set()
        seen.add(dev)
    starts = np.flatnonzero(cut)
    ends = np.r_[starts[1:], meta.shape[1]]
    ev_t = cols[0]
    out: list[tuple[int, ...]] = []
    clean = True
    prev_t = -1
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        tm = int(meta[0, a])
        k = int(np.searchsorted(wt, prev_t, side="right"))
        # md_write_start of that write waits for the update: a write whose I/O reached the
        # members before the update was not marking a clean array dirty (the array was
        # dirty already: the update marks it clean after safe_mode_delay)
        went_on = remaps is not None and k < len(wt) and bool(
            np.any((remaps > int(wt[k])) & (remaps < tm)))
        if md and clean and k < len(wt) and int(wt[k]) <= tm and not went_on:
            # inside that write's own submission (md_write_start in the personality's
            # make_request): where the prediction queues it
            at = int(qt[writes[k]])
            clean = False
        else:
            nb = int(nxt[a])
            limit = int(bt[nb]) if nb < len(bt) else None
            if not md and top_q is not None and limit is not None:
                limit = int(top_q[nb]) if nb < len(top_q) else None
            elif md and limit is not None:
                limit = int(qt[nb])
            before = ev_t if limit is None else ev_t[ev_t < limit]
            at = (int(before.max()) + 1) if len(before) else tm
            if md:
                # and not before its own time: the update that marks the array clean again
                # runs ``safe_mode_delay`` after the last write ended (``md_write_end`` ->
                # ``safe_mode_timer``), when the trace shows it, not as soon as the last
                # predicted request of the bios before it was queued; on the prediction's
                # clock, which runs as far behind the trace's as the bio before it did
                lag = int(qt[nb - 1]) - int(bt[nb - 1]) if nb > 0 else 0
                at = max(at, tm + lag)
            clean = True
        prev_t = tm
        stages: list[list[tuple[int, tuple[int, int, int, int]]]] = []
        kicked: list[tuple[int, int, int, list[tuple[int, tuple[int, int, int, int]]]]] \
            | None = [] if kicks is not None else None
        # md's thread under EEVDF keeps the CPU through md_update_sb's loop: every member's
        # write is inserted before kblockd's worker runs any step
        first_in = int(kicks[0, a:b].min()) if kicks is not None else 0
        for j in range(a, b):
            dev, sec, nr, rw = (int(x) for x in meta[1:, j])
            lim = members[dev].limits
            pre, data, post = flush_sequence(rw, write_back(lim), supports_fua(lim))
            flush = [(ACT_ISSUE, RWBS_FLUSH | RWBS_NONE, 0, 0),
                     (ACT_COMPLETE, RWBS_FLUSH | RWBS_NONE, 0, 0)]
            seq = [[(ACT_QUEUE, rw, sec, nr)]]
            # what asks kblockd for each step (a row of ``kicks``): the write's insertion (0),
            # the pre-flush's completion (1), the data's completion (2)
            when: list[int] = []
            if pre:
                seq.append(flush)
                when.append(0)
            if nr > 0:  # (a bare flush, blkdev_issue_flush, is its pre-flush alone)
                seq.append([(ACT_ISSUE, data, sec, nr), (ACT_COMPLETE, data, sec, nr)])
                when.append(1 if pre else 0)
            if post:
                seq.append(flush)
                when.append(2)
            if kicked is not None and kicks is not None:
                steps = [int(kicks[w, j]) for w in when]
                if not steps or min(steps) < 0 or steps != sorted(steps):
                    kicked = None
                else:
                    # the Q and the first step together: md's thread queues and inserts
                    seq = [seq[0] + seq[1]] + seq[2:]
                    eff = list(steps)
                    if sched_wakeup == "eevdf":
                        eff[0] = first_in
                    kicked += [(e, k, j, [(dev, ev) for ev in step_events])
                               for e, k, step_events in zip(eff, steps, seq, strict=True)]
            if sched_wakeup == "eevdf" and md:
                # stage k of every member before stage k + 1 of any
                for k, step_events in enumerate(seq):
                    while len(stages) <= k:
                        stages.append([])
                    stages[k] += [(dev, e) for e in step_events]
            else:
                stages.append([(dev, e) for step_events in seq for e in step_events])
        if kicked is not None:
            # kblockd's worker runs the queues' requeue_work in the order they were queued
            stages = [ev for *_, ev in sorted(kicked, key=lambda x: (x[0], x[1], x[2]))]
        for stage in stages:
            for dev, (act, r, s_, n_) in stage:
                out.append((at, dev, 0, act, r, s_, n_, 0, 0))
    return np.array(out, dtype=np.int64).T.reshape(9, -1)


def loop_fs_rows(meta: npt.NDArray[np.int64], before: npt.NDArray[np.int64], stack: Stack,
                 d_times: npt.NDArray[np.int64], first: npt.NDArray[np.int64] | None = None
                 ) -> npt.NDArray[np.int64]:
    """Predicted events of the file system's own requests on the disk under a loop device.

    Each goes where the trace dispatched it among the loop device's own dispatches (its D
    events on the loop device and its requests on the disk, ``before`` of them came first):
    after as many predicted dispatches (``d_times``, sorted), so a journal commit between
    two loop writes stays between them and an extent tree read the first loop read waited
    for comes before that read's I/O, whatever the two clocks say. Each request is its Q,
    then :func:`flush_sequence`'s flush / data / flush for the disk's ``write_cache`` and
    ``fua`` (a bare flush: its flush alone), whole before the next (one submitter waits for
    each: jbd2, the syncing task). ``first``: 0 for a piece of a bio the trace split (no Q of
    its own, :func:`split_as_traced`).
    """
    disk = stack.top.members[0]
    lim = disk.limits
    wc = write_back(lim)
    fua = supports_fua(lim)
    flush = [(ACT_ISSUE, RWBS_FLUSH | RWBS_NONE, 0, 0), (ACT_COMPLETE, RWBS_FLUSH | RWBS_NONE, 0, 0)]
    out: list[tuple[int, ...]] = []
    order = np.lexsort((np.arange(meta.shape[1]), meta[0], before))
    for j in order.tolist():
        b = int(before[j])
        if len(d_times) == 0:
            at = int(meta[0, j])
        elif b <= 0:
            at = int(d_times[0]) - 1
        else:
            at = int(d_times[min(b, len(d_times)) - 1]) + 1
        dev, sec, nr, rw = (int(x) for x in meta[1:, j])
        pre, data, post = flush_sequence(rw, wc, fua)
        seq = [(ACT_QUEUE, rw, sec, nr)] if first is None or first[j] else []
        if pre:
            seq += flush
        if nr > 0:
            seq += [(ACT_ISSUE, data, sec, nr), (ACT_COMPLETE, data, sec, nr)]
        if post:
            seq += flush
        out += [(at, dev, 0, act, r, s_, n_, 0, 0) for act, r, s_, n_ in seq]
    return np.array(out, dtype=np.int64).T.reshape(9, -1)


def _table(eng: Engine, stack: Stack, policy: Policy, bios: BioStream, seed: int,
           chunks: list[EventChunk] | None = None) -> EventTable:
    """The recorded events as an EventTable: ``chunks`` are the compiled engine's (whose
    arrays become the table's columns); None: the Python engine's rows."""
    if chunks is None:
        rows = eng.ev_rows
        chunks = [rows_to_chunk(np.array(rows, dtype=np.int64).T if rows
                                else np.zeros((9, 0), dtype=np.int64))]
    extra = bios.meta.get("md_meta")
    if extra is not None and len(bios) and not bios.app_io:
        one = one_chunk(chunks)
        top_q = np.sort(one[EV_TIME][(one[EV_ACT] == ACT_QUEUE)
                                     & (one[EV_DEV] == stack.top.dev)])
        fs_before = bios.meta.get("fs_before")
        if stack.top.kind == "loop" and fs_before is not None and stack.top.members:
            loop_devs = [stack.top.dev, stack.top.members[0].dev]
            fs_first = bios.meta.get("fs_first")
            add = loop_fs_rows(np.asarray(extra, np.int64), np.asarray(fs_before, np.int64),
                               stack, np.sort(one[EV_TIME][(one[EV_ACT] == ACT_ISSUE)
                                                           & np.isin(one[EV_DEV], loop_devs)]),
                               None if fs_first is None else np.asarray(fs_first, np.int64))
        else:
            kicks = bios.meta.get("md_kicks")
            add = md_metadata_rows(np.asarray(extra, np.int64), bios, stack,
                                   one[EV_TIME][np.newaxis, :], policy.sched_wakeup, top_q,
                                   None if kicks is None else np.asarray(kicks, np.int64))
        if add.shape[1]:
            # the metadata rows go before the engine's rows of the same time
            t = np.concatenate([add[EV_TIME], one[EV_TIME]])
            first = np.r_[np.zeros(add.shape[1], np.int64), np.ones(len(one[EV_TIME]), np.int64)]
            order = np.lexsort((first, t))
            extra_rows = rows_to_chunk(add)
            one = tuple(np.concatenate([extra_rows[k], one[k]])[order]  # type: ignore[assignment]
                        for k in range(len(EVENT_FIELDS)))
        chunks = [one]
    columns = event_columns(chunks, list(stack.by_dev()))
    limits = all_limits(stack, policy)
    devices = {node.dev: DeviceInfo(dev=node.dev, name=node.name,
                                    limits=limits[node.dev].to_sysfs())
               for node in stack.nodes()}
    return EventTable(columns, comms=["(null)", bios.comm], devices=devices, time_known=True,
                      meta={"model": {"predicted": True, "policy": policy.to_dict(),
                                      "stack": stack.describe(), "seed": seed,
                                      "requests": eng.n_requests}})


#: Devices :func:`_number_events` can tell apart (the stack's and any other seen): beyond, the
#: numpy twin numbers them.
MAX_SEQ_DEVICES = 1024


def event_columns_numpy(chunks: list[EventChunk], stack_devs: list[int]
                        ) -> dict[str, npt.NDArray[Any]]:
    """The EventTable columns of the engines' events: sorted by time (stable: events are
    recorded in time order almost always, not quite where a completion falls between two
    submission steps), times from the first event, per-device sequence numbers from 1
    (blktrace numbers each device's events), comm 1 (the stream's) except for pid 0
    (completions). The readable twin of :func:`event_columns`; the chunks are left as they
    are."""
    c = one_chunk(chunks)
    cols = dict(zip(EVENT_FIELDS, c, strict=True))
    t = cols["time_ns"]
    if len(t) > 1 and bool(np.any(t[1:] < t[:-1])):
        order = np.argsort(t, kind="stable")
        cols = {k: v[order] for k, v in cols.items()}
        t = cols["time_ns"]
    if len(t):
        cols["time_ns"] = t - t[0]
    dev = cols["dev"]
    seq = np.zeros(len(t), dtype=np.int64)
    for d in stack_devs:
        idx = np.flatnonzero(dev == d)
        seq[idx] = np.arange(1, len(idx) + 1)
    for d in np.unique(dev[seq == 0]):  # a device outside the stack (none expected)
        idx = np.flatnonzero(dev == d)
        seq[idx] = np.arange(1, len(idx) + 1)
    cols["seq"] = seq
    cols["comm"] = np.where(cols["pid"] == 0, 0, 1)
    return {k: np.ascontiguousarray(v, dtype=COLUMN_DTYPES[k]) for k, v in cols.items()}


def event_columns(chunks: list[EventChunk], stack_devs: list[int]
                  ) -> dict[str, npt.NDArray[Any]]:
    """:func:`event_columns_numpy` for millions of events, without copying them: the chunk's
    arrays (already in the table's dtypes) become the columns. When the times are out of
    order, a stable argsort of the time column gives the order and :func:`_permute_rows`
    moves every field's rows into it in place; one compiled pass then numbers each device's
    events and sets comm, and the times are made relative in place. Several chunks (a run
    longer than the engine's buffer) are concatenated first.

    The chunks are consumed: their arrays are reordered in place and returned as columns.
    Memory touched beyond the events themselves: the order (8 bytes per event, only when out
    of order), seq and comm (4 + 4)."""
    c = one_chunk(chunks)
    if len(stack_devs) >= MAX_SEQ_DEVICES:
        return event_columns_numpy([c], stack_devs)
    t = c[EV_TIME]
    n = len(t)
    if n > 1 and not _is_sorted(t):
        _permute_rows(np.argsort(t, kind="stable"), c)
    devs = np.zeros(MAX_SEQ_DEVICES, dtype=np.int64)
    devs[:len(stack_devs)] = stack_devs
    seq = np.empty(n, dtype=COLUMN_DTYPES["seq"])
    comm = np.empty(n, dtype=COLUMN_DTYPES["comm"])
    if _number_events(c, devs, len(stack_devs), seq, comm) < 0:
        return event_columns_numpy([c], stack_devs)  # rows already sorted: the twin keeps them
    if n:
        t -= t[0]
    out = dict(zip(EVENT_FIELDS, c, strict=True))
    out["seq"] = seq
    out["comm"] = comm
    return out


@njit(cache=True)
def _is_sorted(t: Any) -> bool:  # pragma: no cover - compiled
    for i in range(1, len(t)):
        if t[i] < t[i - 1]:
            return False
    return True


@njit(cache=True)
def _permute_rows(order: Any, c: Any) -> None:  # pragma: no cover - compiled
    """Row k of every field of chunk ``c`` becomes the row that was at ``order[k]``, in place
    (``c[f][:] = c[f][order]`` for each field without a second copy of the events). Each cycle
    of the permutation is walked once: its first row's values are held while the others shift
    along it. ``order`` is used up: ``order[k] = k`` marks row k final."""
    for i in range(len(order)):
        if order[i] == i:
            continue
        t, d, p, a = c[EV_TIME][i], c[EV_DEV][i], c[EV_PID][i], c[EV_ACT][i]
        r, s, m, x, y = c[EV_RWBS][i], c[EV_SEC][i], c[EV_NR][i], c[EV_AUX][i], c[EV_AUX2][i]
        k = i
        while True:
            src = order[k]
            order[k] = k
            if src == i:
                break
            c[EV_TIME][k] = c[EV_TIME][src]
            c[EV_DEV][k] = c[EV_DEV][src]
            c[EV_PID][k] = c[EV_PID][src]
            c[EV_ACT][k] = c[EV_ACT][src]
            c[EV_RWBS][k] = c[EV_RWBS][src]
            c[EV_SEC][k] = c[EV_SEC][src]
            c[EV_NR][k] = c[EV_NR][src]
            c[EV_AUX][k] = c[EV_AUX][src]
            c[EV_AUX2][k] = c[EV_AUX2][src]
            k = src
        c[EV_TIME][k] = t
        c[EV_DEV][k] = d
        c[EV_PID][k] = p
        c[EV_ACT][k] = a
        c[EV_RWBS][k] = r
        c[EV_SEC][k] = s
        c[EV_NR][k] = m
        c[EV_AUX][k] = x
        c[EV_AUX2][k] = y


@njit(cache=True)
def _number_events(c: Any, devs: Any, ndev: int, seq: Any, comm: Any
                   ) -> int:  # pragma: no cover - compiled
    """seq counts each device's rows of chunk ``c`` from 1, ``devs[:ndev]`` being the known
    devices and others added as met; comm is 0 for pid 0, else 1. Returns the number of
    devices, -1 when ``devs`` is full (seq is then incomplete)."""
    dev = c[EV_DEV]
    pid = c[EV_PID]
    count = np.zeros(len(devs), dtype=np.int64)
    last = 0
    for k in range(len(dev)):
        d = dev[k]
        if last >= ndev or devs[last] != d:
            last = -1
            for j in range(ndev):
                if devs[j] == d:
                    last = j
                    break
            if last < 0:
                if ndev >= len(devs):
                    return -1
                devs[ndev] = d
                last = ndev
                ndev += 1
        count[last] += 1
        seq[k] = count[last]
        comm[k] = 0 if pid[k] == 0 else 1
    return ndev


def completed_all(table: EventTable) -> bool:
    """Every D has its C (a sanity check used by tests)."""
    d = int(np.sum(table.action == ACT_ISSUE))
    c = int(np.sum((table.action == ACT_COMPLETE) & np.isin(table.dev, list(table.devices))))
    return c >= d
