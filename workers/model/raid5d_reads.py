"""Where raid5d's plug cut a degraded array's reads, row by row, read from a trace.

A degraded raid4/5/6 array sends every read through the stripe cache (``raid5_make_request``
calls ``chunk_aligned_read`` only when ``mddev->degraded == 0``): the reader adds each 4 KiB
row to its ``stripe_head`` (``make_stripe_request`` -> ``add_stripe_bio``) and releases it
(``release_stripe_plug``: with no plug, ``raid5_release_stripe`` puts it on the handle list
and wakes raid5d at once), and raid5d reads the member blocks (``handle_stripe`` ->
``handle_stripe_fill`` -> ``fetch_block``, ``ops_run_io``) under its own plug
(``blk_start_plug`` .. ``blk_finish_plug`` around its loop in ``raid5d``). When raid5d gets
the CPU while the reader is still adding rows (a direct-I/O ``dd`` has no plug of its own on
this path), it takes the rows released so far, finds the handle list empty, finishes its
plug (its member requests go out: U, then D) and sleeps until the next rows wake it: a
member's read of one chunk goes out as two requests, cut between two rows. That is a race for
the CPU, not a queue limit, and its clock is the trace's, not the model's (a synchronous
reader replays on the model's own clock, where raid5d's traced *times* mean nothing; see
``replay``). What the trace does say without its clock is *which rows* raid5d handled
under one plug: :func:`read_plug_sessions` numbers raid5d's plug sessions and gives each row
of a read the sessions that read it (one per handling), and the replay cuts raid5d's plug
between two rows it handles that the trace read in different sessions (:meth:`workers.model.submit.Engine.raid5_unplug`).

A session ends at raid5d's U (or UT) that emptied its plug: ``blk_finish_plug`` (or a sleep)
dispatches every request, the one raid5d got last (G) included, before raid5d queues its next
bio; a flush that ``blk_add_rq_to_plug`` makes as a new request joins the plug
(BLK_PLUG_FLUSH_SIZE, the request count) leaves that new request in the plug.
"""

from __future__ import annotations

import bisect

import numpy as np
import numpy.typing as npt

from workers.events import (
    ACT_BACKMERGE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_META,
    RWBS_READ,
    RWBS_WRITE,
    EventTable,
)
from workers.model.raid5d_runs import ROW_SECTORS, raid5d_member_events
from workers.model.stack import RAID456, Stack


def read_plug_sessions(table: EventTable, q_rows: npt.NDArray[np.intp], stack: Stack | None
                       ) -> dict[int, list[int]] | None:
    """Per stripe row (member sector - data_offset, a multiple of 8) of a degraded array's
    reads, the indices of raid5d's plug sessions that read it, in order: one per handling
    (a row two bios want blocks of, such as one a bio ends in, is read twice, by the first
    bio's handling and by the next's, in different sessions).

    raid5d's events are found by :func:`workers.model.raid5d_runs.raid5d_member_events`
    (member A events remapped from the array by pids that queue nothing on the array). None where the
    top is not a degraded raid4/5/6, times are unknown, or raid5d read nothing.
    """
    if stack is None or not stack.top.failed:
        return None
    got = _plug_sessions(table, q_rows, stack, write=False)
    return got[0] if got is not None else None


def write_plug_sessions(table: EventTable, q_rows: npt.NDArray[np.intp], stack: Stack | None
                        ) -> dict[int, list[int]] | None:
    """Per stripe row of an array's writes, the indices of raid5d's plug sessions that wrote
    it (one per handling), as :func:`read_plug_sessions` does for a degraded array's reads.

    A writer with no plug of its own that md holds (a direct-I/O ``dd``: ``raid5_make_request``
    -> ``make_stripe_request`` adds the bio's rows one by one, ``release_stripe_plug`` hands
    each to raid5d as it is added) races raid5d as a degraded reader does: raid5d that gets
    the CPU after a chunk's first rows filled up writes them (their stripe batch, joined by
    ``stripe_add_to_batch_list`` as each row filled) and finishes its plug
    (``blk_finish_plug`` at the end of ``raid5d``) before the chunk's next rows are added;
    those go as a batch of their own, in raid5d's next session. Parity writes count for
    their row. None where the top is not raid4/5/6, times are unknown, or raid5d wrote
    nothing.
    """
    got = _plug_sessions(table, q_rows, stack, write=True)
    return got[0] if got is not None else None


def dirtying_read_plug_sessions(table: EventTable, q_rows: npt.NDArray[np.intp],
                                stack: Stack | None) -> dict[int, list[int]] | None:
    """Per stripe row raid5d wrote, the plug sessions (numbered as
    :func:`write_plug_sessions` numbers them) of raid5d's reads of that row: the reads a
    write's handling starts before it can write (``handle_stripe_dirtying``: a
    read-modify-write's old data and parity, a reconstruct-write's data blocks the write
    leaves alone, submitted by ``ops_run_io`` under raid5d's plug), one per handling.

    The writer races raid5d as for :func:`write_plug_sessions`: raid5d that gets the CPU
    after the first rows of a write filled up writes them and finishes its plug
    (``blk_finish_plug`` at the end of ``raid5d``) before it gets to the rows the write
    leaves half written, whose reads then go out in raid5d's next session, with the rows it
    writes there (7.3, ``dd bs=256k`` to a 4 x 64k raid5: rows 4096/4104 written alone,
    the reconstruct-write reads of rows 4224..4344 on members 1 and 0 in the next session
    with rows 4112..4216). Which session read the row is the trace's; its clock is not
    needed. None where the top is not raid4/5/6, times are unknown, or raid5d read nothing
    for a row it wrote.
    """
    reads = _plug_sessions(table, q_rows, stack, write=False)
    writes = _plug_sessions(table, q_rows, stack, write=True)
    if reads is None or writes is None:
        return None
    out = {row: s for row, s in reads[0].items() if row in writes[0]}
    return out or None


def write_plug_sleeps(table: EventTable, q_rows: npt.NDArray[np.intp], stack: Stack | None
                      ) -> dict[tuple[int, int], dict[int, int]] | None:
    """Where raid5d went to sleep inside one of its member writes, by order alone: per
    (member device, member sector), the occurrence (0-based, among raid5d's writes to that
    sector) of each write it slept in, with the index of the plug session (as
    :func:`write_plug_sessions` numbers them) that the write and the rest of its handling
    went into.

    A member write that does not merge into raid5d's plug is throttled before it gets a
    request (``blk_mq_submit_bio`` -> ``rq_qos_throttle`` -> wbt's ``rq_qos_wait``: the
    member has its limit of writes in flight, the requests still in raid5d's plug counted
    since each passed the throttle), and raid5d sleeps there inside ``ops_run_io``:
    ``sched_submit_work`` flushes its plug (``blk_flush_plug(plug, true)``, a UT per
    queue), so the requests queued before the sleep go out, and the bio gets its request
    (G) after the wake, in the plug the rest of the handling joins. The trace shows it as a
    raid5d write Q with no G or merge before raid5d's UT. None where raid5d never slept so.
    """
    got = _plug_sessions(table, q_rows, stack, write=True, sleeps=True)
    return got[1] if got is not None and got[1] else None


def _plug_sessions(table: EventTable, q_rows: npt.NDArray[np.intp], stack: Stack | None,
                   *, write: bool, sleeps: bool = False
                   ) -> tuple[dict[int, list[int]], dict[tuple[int, int], dict[int, int]]] | None:
    """raid5d's plug sessions per stripe row, of its reads or (``write``) its writes, and
    (``sleeps``) the writes raid5d slept in (:func:`write_plug_sleeps`).

    A handling cut by a sleep inside one of its writes counts once, in the session of its
    first bio: the bios it submits after the wake are the same handling's."""
    if stack is None or stack.top.kind not in RAID456 or not table.time_known:
        return None
    top = stack.top
    members = np.array([m.dev for m in top.members], dtype=np.int64)
    act = table.action
    dev = table.dev.astype(np.int64)
    on_member = np.isin(dev, members)
    mine = raid5d_member_events(table, q_rows, stack)
    if mine is None:
        return None
    ev = np.flatnonzero(mine & ((act == ACT_QUEUE) | (act == ACT_GETRQ)
                                | (act == ACT_BACKMERGE) | (act == ACT_FRONTMERGE)
                                | (act == ACT_UNPLUG_IO) | (act == ACT_UNPLUG_TIMER)))
    ev = ev[np.argsort(table.time_ns[ev], kind="stable")]
    # dispatch times per (member, sector), whoever dispatched
    d = np.flatnonzero(on_member & (act == ACT_ISSUE))
    issued: dict[tuple[int, int], list[int]] = {}
    for k in d[np.argsort(table.time_ns[d], kind="stable")].tolist():
        issued.setdefault((int(dev[k]), int(table.sector[k])), []).append(
            int(table.time_ns[k]))
    tm = table.time_ns.astype(np.int64)
    q_times = [int(tm[k]) for k in ev.tolist() if act[k] == ACT_QUEUE]
    sessions: dict[int, list[int]] = {}
    slept: dict[tuple[int, int], dict[int, int]] = {}
    writes: dict[tuple[int, int], int] = {}  # raid5d's writes per (member, sector) so far
    session = 0
    cut = False
    last_g: tuple[int, int] | None = None
    # the last write Q with no G or merge on its member yet: (member, sector, occurrence, row)
    pending: tuple[int, int, int, int] | None = None
    asleep: tuple[int, int, int, int] | None = None  # the write raid5d slept in
    woke_row = -1  # the row whose handling raid5d went on with after a sleep
    for k in ev.tolist():
        a = int(act[k])
        t = int(tm[k])
        if a == ACT_GETRQ or a == ACT_BACKMERGE or a == ACT_FRONTMERGE:
            if a == ACT_GETRQ:
                last_g = (int(dev[k]), int(table.sector[k]))
            if pending is not None and pending[0] == int(dev[k]):
                pending = None
        elif a == ACT_UNPLUG_IO or a == ACT_UNPLUG_TIMER:
            if a == ACT_UNPLUG_TIMER and pending is not None and asleep is None:
                asleep = pending  # rq_qos_throttle's sleep flushed the plug (a UT)
            if last_g is not None and not cut:
                # the request got last went out before raid5d's next bio: the plug was
                # emptied (blk_finish_plug, or a sleep), not flushed for a new request
                j = bisect.bisect_right(q_times, t)
                nxt = q_times[j] if j < len(q_times) else None
                times = issued.get(last_g, [])
                i = bisect.bisect_left(times, t)
                cut = i < len(times) and (nxt is None or times[i] <= nxt)
        elif table.nr_sectors[k] > 0 and not table.rwbs[k] & RWBS_META:
            if cut:
                session += 1
                cut = False
            is_write = bool(table.rwbs[k] & RWBS_WRITE)
            row = (int(table.sector[k]) - top.data_offset) // ROW_SECTORS * ROW_SECTORS
            if asleep is not None:
                # raid5d is back: the bio it slept in and the rest of its handling go into
                # this session
                slept.setdefault(asleep[:2], {})[asleep[2]] = session
                woke_row = asleep[3]
                asleep = None
            pending = None
            if is_write:
                key = (int(dev[k]), int(table.sector[k]))
                n = writes.get(key, 0)
                writes[key] = n + 1
                pending = (key[0], key[1], n, row)
            if row != woke_row:
                woke_row = -1
            if is_write == write and (write or table.rwbs[k] & RWBS_READ) and \
                    not (write and row == woke_row):
                seen = sessions.setdefault(row, [])
                if not seen or seen[-1] != session:
                    seen.append(session)
    if not sessions:
        return None
    return sessions, (slept if sleeps else {})


__all__ = ["dirtying_read_plug_sessions", "read_plug_sessions", "write_plug_sessions",
           "write_plug_sleeps"]
