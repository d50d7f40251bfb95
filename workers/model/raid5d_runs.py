"""When md's raid5d handled each stripe row, read from a trace of the members.

A raid4/5/6 write does not reach the members from the writer: ``raid5_unplug`` (or a write
with no plug) releases its stripe_heads to ``conf->handle_list`` and wakes the array's thread,
``raid5d``, which takes them in runs (``handle_active_stripes``, at most
``MAX_STRIPE_BATCH`` per call, a stripe batch counting once) under its own plug
(``blk_start_plug`` .. ``blk_finish_plug`` around its loop). What a stripe_head does depends
on *when* raid5d gets to it: until ``handle_stripe`` -> ``handle_stripe_dirtying`` looks at it,
later writes still join the row (``add_stripe_bio``), and a row that filled up in the meantime
is written whole, with no reads. How far raid5d lags behind the writers is a matter of CPU
time (the parity is computed in ``ops_run_reconstruct5`` on the CPU that runs raid5d; under
emulation or a busy machine it lags by many milliseconds), not of any queue limit, so the
model does not invent it: the trace says it. Every member bio raid5d submits is a Q (after
an A from the array) with raid5d's pid, and raid5d's plug ends with a U (or UT when it
slept) on each member it handed requests to. A row's bios are cut into handlings (a new one
where the row changes, a member comes again, or the direction changes: a read handling for its
reads, a later one for its writes, and reads after writes are a later write's); the U events
cut raid5d's plug sessions.

:func:`raid5d_runs` returns, per stripe row of the top array (member sector
without ``data_offset``, a multiple of ``STRIPE_SECTORS``), the start times of the handlings
that touched it and the members each wrote and read, and raid5d's plug sessions. The replay
(:meth:`workers.model.submit.Engine.raid5_unplug`) handles a released row, and writes a row
whose reads are back, no earlier than raid5d's next handling of that row at or after the
model's clock, with the data blocks that handling held (a later block waits for the next);
rows without such evidence are handled at once, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from workers.events import (
    ACT_BACKMERGE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_MESSAGE,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_META,
    RWBS_READ,
    RWBS_WRITE,
    EventTable,
)
from workers.model.stack import RAID456, Stack

#: STRIPE_SECTORS (drivers/md/raid5.h with 4 KiB stripes): one stripe_head row.
ROW_SECTORS = 8
#: BLK_PLUG_FLUSH_SIZE (128 KiB) in sectors, and BLK_MAX_REQUEST_COUNT
#: (``blk_plug_max_rq_count``: twice that once the plug holds requests of several queues)
_PLUG_FLUSH_SECTORS = 256
_PLUG_MAX_RQ = 32


@dataclass(frozen=True)
class Raid5dRuns:
    """raid5d's work as a trace shows it (times in ns since the replay's first bio).

    Attributes:
        rows: stripe row (member sector - data_offset) -> sorted start times of the row's
            handlings (the first member bio of each).
        writes: stripe row -> for each of those handlings, the members it wrote (a bit per
            member index; 0 for a handling that only read).
        reads: the same for the members it read.
        session_start / session_end: raid5d's plug sessions, in time order: the first bio
            and the U that flushed the plug at ``blk_finish_plug``.
        dirtied: the rows raid5d's ``handle_stripe_dirtying`` traced a message for, when.
    """

    rows: dict[int, list[int]]
    writes: dict[int, list[int]]
    reads: dict[int, list[int]]
    session_start: list[int]
    session_end: list[int]
    #: stripe row -> sorted times of raid5d's ``handle_stripe_dirtying`` trace messages for
    #: it ("raid5 rmw S N", "raid5 rcw S N Q D"): handlings that chose to read first, the
    #: delayed ones (not STRIPE_PREREAD_ACTIVE) with no I/O to show them
    dirtied: dict[int, list[int]] = field(default_factory=dict)
    #: raid5d asleep inside one of its member bios: (start of the plug session the bio
    #: was queued in, its member device, its member sector, whether it writes, when raid5d
    #: is back: the bio's G, which starts its next session); see :func:`_inside_sleeps`
    sleeps: list[tuple[int, int, int, bool, int]] = field(default_factory=list)
    #: stripe row -> for each of its handlings, whether ``ops_run_io`` wrote the next row
    #: in the same walk (one stripe batch: the next row's bio on a member right after this
    #: row's, before the next member's); see :func:`raid5d_runs`
    linked: dict[int, list[bool]] = field(default_factory=dict)
    #: stripe row -> sorted times of the "raid5 rcw S N Q 1" messages: handlings that put the
    #: row on the delayed list (``handle_stripe_dirtying`` sets STRIPE_DELAYED, and traces
    #: it, only for a stripe that is not STRIPE_PREREAD_ACTIVE); see :func:`_delayed`
    delayed: dict[int, list[int]] = field(default_factory=dict)


def raid5d_member_events(table: EventTable, q_rows: npt.NDArray[np.intp], stack: Stack
                         ) -> npt.NDArray[np.bool_] | None:
    """The events of raid5d (the array's md thread) on the array's members, as a row mask.

    raid5d's pids are those of the member A events remapped from the array that no Q on the
    array itself carries (``q_rows``: a direct read's chunk-aligned bio is remapped by its
    submitter). None where the trace has no such A events or every remapping pid also
    queued on the array.
    """
    top = stack.top
    members = np.array([m.dev for m in top.members], dtype=np.int64)
    on_member = np.isin(table.dev.astype(np.int64), members)
    remap = on_member & (table.action == ACT_REMAP) & (table.aux2.astype(np.int64) == top.dev)
    if not bool(np.any(remap)):
        return None
    daemons = np.setdiff1d(np.unique(table.pid[remap]), np.unique(table.pid[q_rows]))
    if not len(daemons):
        return None
    mask: npt.NDArray[np.bool_] = np.isin(table.pid, daemons) & on_member
    return mask


def raid5d_runs(table: EventTable, q_rows: npt.NDArray[np.intp], stack: Stack | None,
                t0: int) -> Raid5dRuns | None:
    """Per stripe row of the top array (member sector - data_offset, rounded down to a row), the
    sorted start times (ns since ``t0``) of raid5d's runs that submitted a bio for it.

    raid5d's pids are those of the member A events remapped from the array that no Q on the
    array itself carries (a direct read's chunk-aligned bio is remapped by its submitter).
    None where the top is not raid4/5/6, times are unknown, or the trace has no such bios.
    """
    if stack is None or stack.top.kind not in RAID456 or not table.time_known:
        return None
    top = stack.top
    members = np.array([m.dev for m in top.members], dtype=np.int64)
    act = table.action
    dev = table.dev.astype(np.int64)
    mine = raid5d_member_events(table, q_rows, stack)
    if mine is None:
        return None
    q = np.flatnonzero(mine & (act == ACT_QUEUE) & (table.nr_sectors > 0)
                       & ((table.rwbs & RWBS_META) == 0))
    if not len(q):
        return None
    tm = table.time_ns.astype(np.int64)
    _, sessions = _sessions(table, mine, q)
    sleeps = [(s0 - t0, d, sec, w, wake - t0)
              for s0, d, sec, w, wake in _inside_sleeps(table, mine, sessions)]
    row = (table.sector[q].astype(np.int64) - top.data_offset) // ROW_SECTORS * ROW_SECTORS
    member = dev[q]
    read = (table.rwbs[q].astype(np.int64) & RWBS_READ) != 0
    order = np.lexsort((tm[q], row))
    row, member, read, tq = row[order], member[order], read[order], tm[q][order]
    # a handling of a row starts at its first bio; the next one where the row changes, the
    # direction changes, or a member does not come after the previous one in ops_run_io's
    # order. A handling reads or writes, never both: handle_stripe_dirtying schedules a
    # write (schedule_reconstruction) only with nothing locked (``s->locked == 0``: no read
    # in flight) and then starts no read, so writes after reads are ops_run_io once the
    # reads are back, and reads after writes are a later write's read phase (the next dd
    # write's reconstruct-write reading members 3, 2 of a row whose members 5, 4 the one
    # before had just written). ``for (i = disks; i--; )`` submits a handling's bios from
    # the last member to the first (a stripe batch too: member by member, each with the
    # blocks of every stripe of the batch), so a member index that does not go down (the
    # same member again, or one above) is a later handling of the row
    index = {int(d): i for i, d in enumerate(members.tolist())}
    new = np.zeros(len(row), dtype=bool)
    row_l, read_l = row.tolist(), read.tolist()
    idx_l = [index[int(m)] for m in member.tolist()]
    member_l = member.tolist()
    for i in range(len(row_l)):
        if i == 0 or row_l[i] != row_l[i - 1] or idx_l[i] >= idx_l[i - 1] or \
                read_l[i - 1] != read_l[i]:
            new[i] = True
    handling = np.cumsum(new) - 1
    wrote = np.zeros(int(new.sum()), dtype=np.int64)
    read_m = np.zeros(int(new.sum()), dtype=np.int64)
    for h, m, rd in zip(handling.tolist(), member_l, read_l):
        if rd:
            read_m[h] |= 1 << index[m]
        else:
            wrote[h] |= 1 << index[m]
    starts = (tq[new] - t0).tolist()
    # a stripe batch's rows go out in one ops_run_io walk, member by member, each member with
    # the blocks of every row of the batch in row order: a write of row r + 8 on a member
    # right after raid5d's write of row r on that member (same chunk) joins the two rows'
    # handlings in one batch; rows handled apart never are
    link = np.zeros(len(handling), dtype=bool)
    by_time = np.argsort(tq, kind="stable")
    chunk = top.chunk_sectors or ROW_SECTORS
    row_t, member_t, read_t = row[by_time], member[by_time], read[by_time]
    nxt = (row_t[1:] == row_t[:-1] + ROW_SECTORS) & (member_t[1:] == member_t[:-1]) & \
        ~read_t[1:] & ~read_t[:-1] & (row_t[1:] % chunk != 0)
    link[by_time[:-1][nxt]] = True
    linked_h = np.zeros(len(starts), dtype=bool)
    np.logical_or.at(linked_h, handling, link)
    out: dict[int, list[int]] = {}
    masks: dict[int, list[int]] = {}
    rmasks: dict[int, list[int]] = {}
    linked: dict[int, list[bool]] = {}
    for r, st, w, rm, lk in sorted(zip(row[new].tolist(), starts, wrote.tolist(),
                                       read_m.tolist(), linked_h.tolist())):
        out.setdefault(r, []).append(st)
        masks.setdefault(r, []).append(w)
        rmasks.setdefault(r, []).append(rm)
        linked.setdefault(r, []).append(lk)
    return Raid5dRuns(out, masks, rmasks, [a - t0 for a, _ in sessions],
                      [b - t0 for _, b in sessions], _dirtied(table, top.dev, t0), sleeps,
                      linked, _dirtied(table, top.dev, t0, delayed_only=True))


def write_walks(runs: Raid5dRuns) -> dict[int, list[tuple[int, bool]]]:
    """Per stripe row, raid5d's handlings that wrote it, in time order, each as (its rank
    among all of raid5d's writing handlings by start time, whether its ``ops_run_io`` walk
    wrote the next row too: one stripe batch, ``Raid5dRuns.linked``).

    Order alone, no clock: a synchronous writer replays on the model's own clock, where
    raid5d's traced times mean nothing, but the trace still says which rows each walk of
    raid5d's took together and which walk came first (:meth:`workers.model.submit.Engine.
    _write_batches`)."""
    starts = sorted(t for r, ts in runs.rows.items()
                    for t, w in zip(ts, runs.writes[r], strict=True) if w)
    rank = {t: k for k, t in enumerate(starts)}
    out: dict[int, list[tuple[int, bool]]] = {}
    for r, ts in runs.rows.items():
        walks = [(rank[t], lk) for t, w, lk in zip(ts, runs.writes[r], runs.linked[r],
                                                    strict=True) if w]
        if walks:
            out[r] = walks
    return out


def handling_ranks(runs: Raid5dRuns) -> dict[int, list[int]]:
    """Per stripe row, the ranks of raid5d's handlings of it that read or wrote (time order),
    among all such handlings of rows raid5d wrote: the order raid5d took the rows in, by
    order alone (:meth:`workers.model.submit.Engine._traced_rank`). Rows raid5d never wrote
    (a degraded read's) are left out."""
    written = {r for r, ws in runs.writes.items() if any(ws)}
    starts = sorted(t for r in written for t in runs.rows[r])
    rank = {t: k for k, t in enumerate(starts)}
    return {r: [rank[t] for t in runs.rows[r]] for r in written}


def _inside_sleeps(table: EventTable, mine: npt.NDArray[np.bool_],
                   sessions: list[tuple[int, int]]) -> list[tuple[int, int, int, bool, int]]:
    """Where raid5d went to sleep inside one of its member bios, holding its plug.

    The Q of a bio is traced before the bio gets a request (``submit_bio_noacct_nocheck``
    -> ``blk_mq_submit_bio``); a write that cannot merge into the plug is throttled first
    (``rq_qos_throttle`` -> wbt's ``rq_qos_wait``: the member already has its limit of
    buffered writes in flight) and the task sleeps there (``io_schedule``), so
    ``sched_submit_work`` flushes its plug (``blk_flush_plug(plug, true)``: a UT per queue)
    and the bio's G comes only when a completion lets it in. raid5d sleeps in
    ``ops_run_io`` with the rest of the handling (the next members of the row, or the
    batch's) still to submit: they follow the bio after the wake, into the same plug
    session. raid5d is back when the bio gets its request (its G, ``rq_qos_wait`` returning
    in ``blk_mq_submit_bio``), not at its next bio: where the handling had nothing after the
    bio, the next bio may come much later with other work (6.16, writeback to a 6 x 64k
    raid5: asleep in member 3's write of sector 8192 at 79.2 ms, its G at 82.3 ms, the
    next bio at 113.3 ms); without a G before the next bio, that bio is the wake. Returns
    (start of the session whose UT it is, member device, member sector, whether the bio
    writes, when raid5d is back) per sleep, in time order.
    """
    ev, a, t, dv, sec, nr = _plug_events(table, mine, (ACT_UNPLUG_TIMER,))
    wr = ((table.rwbs[ev].astype(np.int64) & RWBS_WRITE) != 0).tolist()
    starts = set(s0 for s0, _ in sessions)
    ends = {e: s0 for s0, e in sessions}
    out: list[tuple[int, int, int, bool, int]] = []
    pending = -1  # the last Q with no G or merge yet
    slept = -1  # that Q, once a UT came while it was pending
    ut = -1

    def back(at: int) -> None:
        # raid5d is back at ``at``, which starts its next session (:func:`_sessions`)
        s0 = ends.get(ut, -1)
        if s0 >= 0 and at in starts:
            out.append((s0, dv[slept], sec[slept], wr[slept], at))

    for k in range(len(a)):
        if a[k] == ACT_QUEUE and nr[k] > 0:
            if slept >= 0:
                back(t[k])  # no G seen for the bio: the next bio is the wake
                slept = -1
            pending = k
        elif a[k] == ACT_UNPLUG_TIMER:
            if pending >= 0 and slept < 0:
                slept, ut = pending, t[k]
        elif pending >= 0 and dv[k] == dv[pending]:
            pending = -1  # the bio got its request (G) or merged
            if slept >= 0 and a[k] == ACT_GETRQ:
                back(t[k])
            slept = -1
    return out


def _flush_sends(a: list[int], dv: list[int], sec: list[int], k: int, g: int) -> bool:
    """Whether the flush whose first U is event ``k`` dispatches the request of the G ``g``
    read just before it (a D of that device and sector among the flush's U/UT/D events).

    ``blk_add_rq_to_plug`` flushes the plug (``blk_mq_flush_plug_list``) *before* it adds
    the new request (``rq_list_add_tail`` after the flush): a flush-on-add leaves the request
    of that G in the plug, to go out with the next flush. A U whose flush sends it out is
    another flush, ``blk_finish_plug`` (6.17: raid5d's rmw read G'd at 297.3 ms, the U
    13.6 ms later, the read dispatched with it: the session ended there)."""
    if g < 0:
        return False
    for j in range(k, len(a)):
        if a[j] not in (ACT_UNPLUG_IO, ACT_UNPLUG_TIMER, ACT_ISSUE):
            return False
        if a[j] == ACT_ISSUE and dv[j] == dv[g] and sec[j] == sec[g]:
            return True
    return False


def _plug_events(table: EventTable, mine: npt.NDArray[np.bool_], more: tuple[int, ...]
                 ) -> tuple[npt.NDArray[np.intp], list[int], list[int], list[int], list[int],
                            list[int]]:
    """raid5d's events that show what its plug holds (its Q, G and merges, and ``more``:
    unplugs, dispatches) in time order: the rows and their action, time, device, sector and
    size as lists (the readers walk them one by one)."""
    act = table.action
    keep = (act == ACT_QUEUE) | (act == ACT_GETRQ) | (act == ACT_BACKMERGE) \
        | (act == ACT_FRONTMERGE) | np.isin(act, more)
    ev = np.flatnonzero(mine & keep)
    ev = ev[np.argsort(table.time_ns[ev], kind="stable")]
    return (ev, act[ev].tolist(), table.time_ns[ev].astype(np.int64).tolist(),
            table.dev[ev].astype(np.int64).tolist(), table.sector[ev].astype(np.int64).tolist(),
            table.nr_sectors[ev].astype(np.int64).tolist())


def _dirtied(table: EventTable, top_dev: int, t0: int, *, delayed_only: bool = False
             ) -> dict[int, list[int]]:
    """Per stripe row, when ``handle_stripe_dirtying`` traced "raid5 rmw <sector> <rmw>" or
    "raid5 rcw <sector> <rcw> <qread> <delayed>" (``mddev_add_trace_msg`` / the
    ``blk_add_trace_msg`` of older kernels) on the array: raid5d handled the row then, and
    chose to read first. A row that may not read yet (a plain write, not
    STRIPE_PREREAD_ACTIVE) goes to the delayed list with no I/O: the message is the only
    trace of that handling (which cleared its STRIPE_BATCH_READY).

    ``delayed_only``: only the rcw messages whose last field, ``test_bit(STRIPE_DELAYED)``,
    is 1 (the rmw message does not say)."""
    out: dict[int, list[int]] = {}
    msg = np.flatnonzero((table.action == ACT_MESSAGE) & (table.dev.astype(np.int64) == top_dev))
    for i in msg.tolist():
        text = table.comms[int(table.comm[i])].split()
        if len(text) >= 3 and text[0] == "raid5" and text[1] in ("rmw", "rcw") and \
                text[2].isdigit():
            if delayed_only and not (text[1] == "rcw" and len(text) >= 6 and text[5] == "1"):
                continue
            out.setdefault(int(text[2]), []).append(int(table.time_ns[i]) - t0)
    for v in out.values():
        v.sort()
    return out


def _sessions(table: EventTable, mine: npt.NDArray[np.bool_], q: npt.NDArray[np.intp]
              ) -> tuple[npt.NDArray[np.int64], list[tuple[int, int]]]:
    """raid5d's plug sessions: for each of its bios ``q`` the start of its session, and every
    session's (first bio, end) times.

    raid5d holds one plug across its loop (``blk_start_plug`` .. ``blk_finish_plug``); its
    U (or UT, when it slept) events end a session, except a U that its own next request
    caused: ``blk_add_rq_to_plug`` flushes the plug when a new request joins it and the
    request added last is BLK_PLUG_FLUSH_SIZE or more, or the plug holds
    ``blk_plug_max_rq_count`` requests, so that U follows the G of the new request (a U after
    such a U belongs to the same flush). A U after a G whose request could not have flushed
    the plug (a 4 KiB write joining a plug of one small request) is ``blk_finish_plug``: the
    session ends there, whatever came just before it.
    """
    ev, a, t, dv, sec, nr = _plug_events(table, mine,
                                         (ACT_UNPLUG_IO, ACT_UNPLUG_TIMER, ACT_ISSUE))
    wr = ((table.rwbs[ev].astype(np.int64) & RWBS_WRITE) != 0).tolist()
    # raid5d's plug as blk_add_rq_to_plug sees it when a request joins: its requests
    # ([dev, start, end], grown by the bios merged into them) on how many queues. The request
    # it compares with BLK_PLUG_FLUSH_SIZE is the list's head (the newest on a LIFO plug list,
    # the oldest on 6.13's FIFO one): any request of that size in the plug may have flushed it.
    # A bio merges into a request of its own direction (``blk_rq_merge_ok``: same req_op), at
    # its end (M, ``bio_attempt_back_merge``) or its start (F): a write's M that ends where a
    # read request of the same member starts is not that read's front merge
    rqs: list[list[int]] = []
    queues: set[int] = set()
    could_flush = False  # the request of the G just read could have flushed the plug
    start_of: dict[int, int] = {}
    sessions: list[tuple[int, int]] = []
    start = -1
    prev = -1
    ends = False  # the U being read ends the session
    last_g = -1  # the last G read
    for k, i in enumerate(ev.tolist()):
        ak = a[k]
        if ak == ACT_GETRQ:
            last_g = k
            if start < 0:
                # the G of a bio raid5d slept inside (its Q before the UT that ended the
                # session, :func:`_inside_sleeps`): back, it starts the next session
                start = t[k]
            could_flush = len(rqs) >= (2 * _PLUG_MAX_RQ if len(queues) > 1 else _PLUG_MAX_RQ) \
                or any(r[2] - r[1] >= _PLUG_FLUSH_SECTORS for r in rqs)
            rqs.append([dv[k], sec[k], sec[k] + nr[k], wr[k]])
            queues.add(dv[k])
        elif ak == ACT_BACKMERGE or ak == ACT_FRONTMERGE:
            for r in rqs:
                if r[0] != dv[k] or r[3] != wr[k]:
                    continue
                if ak == ACT_BACKMERGE and r[2] == sec[k]:
                    r[2] += nr[k]
                    break
                if ak == ACT_FRONTMERGE and r[1] == sec[k] + nr[k]:
                    r[1] = sec[k]
                    break
            continue
        if ak == ACT_ISSUE:
            if prev not in (ACT_QUEUE, ACT_GETRQ):
                continue  # dispatched after a U of raid5d's, or by another flush: no end
            # raid5d issued a request it had just queued with no U before it: its plug went
            # out by ``blk_mq_plug_issue_direct`` (one queue, no elevator), which traces no
            # unplug before 6.12 ("blk-mq: add missing unplug trace event"); read it as the
            # U that kernel did not trace
            ak = ACT_UNPLUG_IO
        if ak == ACT_UNPLUG_IO or ak == ACT_UNPLUG_TIMER:
            if prev == ACT_GETRQ and ak == ACT_UNPLUG_IO and could_flush and \
                    not _flush_sends(a, dv, sec, k, last_g):
                ends = False
                rqs = rqs[-1:]  # the new request, alone in the flushed plug
                queues = {rqs[0][0]}
            elif prev not in (ACT_UNPLUG_IO, ACT_UNPLUG_TIMER):
                ends = True
            if (ends or ak == ACT_UNPLUG_TIMER) and start >= 0:
                sessions.append((start, t[k]))
                start = -1
            if ends or ak == ACT_UNPLUG_TIMER:
                rqs, queues = [], set()
        elif ak == ACT_QUEUE:
            if start < 0:
                start = t[k]
            start_of[i] = start
        prev = ak
    if start >= 0 and sessions:
        sessions.append((start, t[-1]))
    # no U/UT of raid5d at all (a trace without unplug events): its plug sessions are unknown,
    # not one session from the first bio to the last
    return np.array([start_of[i] for i in q.tolist()], dtype=np.int64), sessions


__all__ = ["ROW_SECTORS", "Raid5dRuns", "raid5d_member_events", "handling_ranks", "raid5d_runs",
           "write_walks"]
