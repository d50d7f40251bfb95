"""raid5 writes replayed with raid5d's work read from the trace (workers/model/raid5d_runs.py).

md raid5 writes reach the members from raid5d, not from the writer: ``release_stripe_plug``
keeps a stripe_head on the plug of the thread that took it first (STRIPE_ON_UNPLUG_LIST),
``raid5_unplug`` releases that thread's stripes to the handle list, and raid5d handles them
(``handle_active_stripes``) under its own plug when it gets the CPU. The trace shows when
that was (raid5d's member bios: an A from the array and a Q with raid5d's pid), which rows
each handling touched and where raid5d's plug sessions ended (its U / UT on the members).
Full-stripe writes of consecutive rows in a chunk go as one batch
(``stripe_add_to_batch_list``), written member by member (``ops_run_io``).

The tables here are synthetic: md0 (9,0) on raid5 4 x chunk (``stack_from_spec``: members
sda..sdd, 8,0 8,16 8,32 8,48), left-symmetric, so stripe 0 has data on members 0, 1, 2
and the parity on member 3; raid5d is pid 50.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_MESSAGE,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_META,
    RWBS_NONE,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
    make_dev,
)
from workers.model import BioStream, preset_for_kernel, replay
from workers.model.raid5d_reads import read_plug_sessions, write_plug_sessions, write_plug_sleeps
from workers.model.raid5d_runs import handling_ranks, raid5d_runs, write_walks
from workers.model.replay import bios_from_table, md_metadata_rows
from workers.model.stack import stack_from_spec

MD = make_dev(9, 0)
MEMBERS = [make_dev(8, 16 * i) for i in range(5)]
RAID5D = 50

Event = tuple[int, int, int, int, int, int, int, int]


def _table(events: list[Event]) -> EventTable:
    """events: (time, pid, dev, action, sector, nr_sectors, rwbs, aux2), any order."""
    events = sorted(events, key=lambda e: e[0])
    t, pid, dev, act, sec, nr, rw, aux2 = (np.array(c, dtype=np.int64)
                                          for c in zip(*events, strict=True))
    table = EventTable.from_columns(time_ns=t, dev=dev, action=act, sector=sec, nr_sectors=nr,
                                    pid=pid, rwbs=rw, aux2=aux2)
    table.meta["format"] = "blktrace"
    return table


def _q(t: int, pid: int, sector: int, nr: int = 8, rwbs: int = RWBS_WRITE) -> list[Event]:
    """A writer's bio on md0."""
    return [(t, pid, MD, ACT_QUEUE, sector, nr, rwbs, 0)]


def _u(t: int, pid: int, dev: int = MD, act: int = ACT_UNPLUG_IO) -> list[Event]:
    return [(t, pid, dev, act, 0, 0, RWBS_NONE, 0)]


def _r5d(t: int, member: int, msec: int, *, read: bool = False, getrq: bool = True,
         pid: int = RAID5D) -> list[Event]:
    """A 4 KiB member bio of raid5d (or of ``pid``): A from md0, Q, and G when it got a new
    request (none: it merged in the plug)."""
    rw = RWBS_READ if read else RWBS_WRITE | RWBS_SYNC
    dev = MEMBERS[member]
    ev = [(t, pid, dev, ACT_REMAP, msec, 8, rw, MD), (t + 1, pid, dev, ACT_QUEUE, msec, 8, rw, 0)]
    if getrq:
        ev.append((t + 2, pid, dev, ACT_GETRQ, msec, 8, rw, 0))
    return ev


def _replay(events: list[Event], spec: str = "raid5:disks=4,chunk=64k") -> EventTable:
    stack = stack_from_spec(spec)
    bios = bios_from_table(_table(events), MD, stack=stack)
    return replay(bios, stack, preset_for_kernel("6.1"), engine="python")


def _member(out: EventTable, action: int) -> list[tuple[int, int, int, int, int]]:
    """(time, member index, sector, nr_sectors, rwbs) of one action on the members."""
    idx = np.flatnonzero((out.action == action) & (out.dev != MD))
    return [(int(out.time_ns[i]), MEMBERS.index(int(out.dev[i])), int(out.sector[i]),
             int(out.nr_sectors[i]), int(out.rwbs[i])) for i in idx]


def _reads(out: EventTable) -> list[tuple[int, int, int, int, int]]:
    return [d for d in _member(out, ACT_ISSUE) if d[4] & RWBS_READ and not d[4] & RWBS_WRITE]


# --- raid5d_runs: handlings, masks, plug sessions -------------------------------------------------
def _merged(t: int, member: int, msec: int, nr: int, rwbs: int = RWBS_READ) -> list[Event]:
    """raid5d's bios merged into its request on ``member`` (the M; their A and Q left out)."""
    return [(t, RAID5D, MEMBERS[member], ACT_BACKMERGE, msec, nr, rwbs, 0)]


def _raid5d_trace() -> list[Event]:
    """A writer (pid 1) at t=50 and raid5d's work on rows 0, 8, 16 and 24 in four plug
    sessions. Each handling's bios go from the last member to the first (ops_run_io)."""
    ev = _q(50, 1, 0) + _u(55, 1)
    # the writer's own chunk-aligned read: remapped by its submitter, not raid5d's
    ev += _q(60, 1, 128, rwbs=RWBS_READ) + _r5d(61, 1, 0, read=True, pid=1)
    # session 1: row 0 reconstruct-write (reads of members 2 and 1, then writes of the parity
    # and members 1 and 0: writes after reads are a new handling, ops_run_io once they are
    # back). Member 2's request has grown to 128 KiB (BLK_PLUG_FLUSH_SIZE) when member 1's
    # joins: blk_add_rq_to_plug flushes the plug, a U after that G: no session end
    ev += _r5d(100, 2, 0, read=True) + _merged(105, 2, 8, 248)
    ev += _r5d(108, 1, 0, read=True) + _u(120, RAID5D, MEMBERS[2])
    ev += _r5d(200, 3, 0) + _r5d(205, 1, 0) + _r5d(210, 0, 0)
    ev += _r5d(220, 0, 8, getrq=False)  # row 8: merged into member 0's request
    # blk_finish_plug: U after a Q ends the session (a second U is the same flush)
    ev += _u(230, RAID5D, MEMBERS[3]) + _u(231, RAID5D, MEMBERS[0])
    # session 2: row 0 again (member 1 after member 0: a new handling); a flush for a new
    # request (member 1's has grown to 128 KiB), then a UT (raid5d slept with its plug):
    # that ends the session
    ev += _r5d(300, 1, 0) + _merged(305, 1, 8, 248, RWBS_WRITE | RWBS_SYNC) + _r5d(310, 0, 0)
    ev += _u(315, RAID5D, MEMBERS[0]) + _u(320, RAID5D, MEMBERS[1], ACT_UNPLUG_TIMER)
    # session 3: row 16 on member 2, merged (no G), then blk_finish_plug
    ev += _r5d(400, 2, 16, getrq=False) + _u(410, RAID5D, MEMBERS[2])
    # session 4: row 24 on members 3 and 2, two 4 KiB requests: the U right after the second
    # G cannot be blk_add_rq_to_plug's flush (no request of 128 KiB, 2 of 32): it is
    # blk_finish_plug, the session ends there
    ev += _r5d(500, 3, 24) + _r5d(505, 2, 24) + _u(600, RAID5D, MEMBERS[3])
    ev += _u(601, RAID5D, MEMBERS[2])
    return ev


def test_raid5d_runs_reads_handlings_and_their_members():
    table = _table(_raid5d_trace())
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 50)
    assert runs is not None
    # a handling starts at its first Q (t + 1 in _r5d; times since t0 = 50). Row 0: the reads
    # (100), the writes after them (200), member 1 after member 0 (300); rows 8, 16 and 24
    # alone; the writer's own remapped read (61) is not raid5d's
    assert runs.rows == {0: [51, 151, 251], 8: [171], 16: [351], 24: [451]}
    assert runs.writes == {0: [0, 0b1011, 0b0011], 8: [0b0001], 16: [0b0100], 24: [0b1100]}
    assert runs.reads == {0: [0b0110, 0, 0], 8: [0], 16: [0], 24: [0]}


def test_a_member_above_the_previous_one_starts_a_new_handling():
    """ops_run_io submits a handling's bios from the last member to the first
    (``for (i = disks; i--; )``): a row's bio on a member above the previous one is raid5d's
    next handling of the row, even where that member did not come before (7.3's sync
    handled a row's block 3 with the parity, 28 ms later the row's blocks 0, 1 and 4: the
    first handling had been read as members {2, 3, 4} and the second as {0, 1, 2})."""
    ev = _q(0, 1, 0) + _u(5, 1)
    ev += _r5d(100, 2, 0) + _r5d(110, 1, 0) + _u(120, RAID5D, MEMBERS[1])
    ev += _r5d(1_000, 3, 0) + _r5d(1_010, 0, 0) + _u(1_020, RAID5D, MEMBERS[3])
    table = _table(ev)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 0)
    assert runs is not None
    assert runs.rows == {0: [101, 1_001]}
    assert runs.writes == {0: [0b0110, 0b1001]}


def test_reads_after_writes_of_a_row_are_a_later_handling():
    """A handling reads or writes, never both: ``handle_stripe_dirtying`` schedules the
    writes (``schedule_reconstruction``) only with nothing locked (``s->locked == 0``), and
    starts no read then. A row's reads on lower members after raid5d wrote it are the next
    write's read phase, not the rest of that walk (6.12, dd bs=200k to 6 x 128k raid5: one
    write's read-modify-write of a row wrote members 5 and 4, the next write's
    reconstruct-write read members 3 and 2 of it 1.1 ms later; read as one handling, the
    rows' handling ranks were off by one and the replay wrote the chunk's last rows
    before its first, its 8-sector blocks no longer merging)."""
    ev = _q(0, 1, 0) + _u(5, 1)
    ev += _r5d(100, 3, 0) + _r5d(110, 2, 0) + _u(120, RAID5D, MEMBERS[2])
    ev += _q(900, 1, 16) + _u(905, 1)
    ev += _r5d(1_000, 1, 0, read=True) + _r5d(1_010, 0, 0, read=True)
    ev += _u(1_020, RAID5D, MEMBERS[1])
    table = _table(ev)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 0)
    assert runs is not None
    assert runs.rows == {0: [101, 1_001]}
    assert runs.writes == {0: [0b1100, 0]}
    assert runs.reads == {0: [0, 0b0011]}
    assert handling_ranks(runs) == {0: [0, 1]}


def test_raid5d_sessions_end_at_its_finish_plug_not_at_a_flush_of_a_new_request():
    """A U right after raid5d's own G is ``blk_add_rq_to_plug`` flushing the plug for the new
    request, inside the session, when the plug held a request of BLK_PLUG_FLUSH_SIZE (or the
    request count limit); a U after a Q, or after a G no flush-on-add could come from, is
    ``blk_finish_plug``; a UT (from schedule) always ends the session."""
    table = _table(_raid5d_trace())
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 50)
    assert runs is not None
    assert runs.session_start == [51, 251, 351, 451]
    assert runs.session_end == [180, 270, 360, 550]


def test_a_write_merged_up_to_a_read_request_s_start_is_not_that_read_s_front_merge():
    """raid5d's plug holds a read of member 1 at 256 (an earlier handling's) when its write
    request on member 1 grows from 0 by back merges to 256 sectors: the last M (248+8) ends
    where the read starts, but a write never merges into a read (``blk_rq_merge_ok``), so
    the write request is 128 KiB when member 0's request joins the plug, and the U after
    that G is ``blk_add_rq_to_plug``'s flush, not ``blk_finish_plug``: one session, ended by
    the U after the last Q. Read as the read's front merge, the write stayed at 248 sectors
    and the session was cut at the flush (6.1: an rmw read of row 14336 sat in raid5d's plug
    while the chunk before it was written, and the rows after the flush went out on their
    own instead of merging into the next batch's requests)."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0) + _u(5, 1)
    ev += _r5d(100, 1, 256, read=True)
    ev += _r5d(110, 1, 0) + _merged(120, 1, 8, 240, w) + _merged(130, 1, 248, 8, w)
    ev += _r5d(140, 0, 0) + _u(150, RAID5D, MEMBERS[1])
    ev += _r5d(160, 0, 8, getrq=False) + _u(170, RAID5D, MEMBERS[0])
    table = _table(ev)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 0)
    assert runs is not None
    assert runs.session_start == [101]
    assert runs.session_end == [170]


def test_a_flush_that_sends_the_new_request_out_is_not_its_flush_on_add():
    """``blk_add_rq_to_plug`` flushes the plug *before* it adds the new request (the
    request of the G stays in the plug for the next flush). raid5d's write request on
    member 1 is 128 KiB when its read of member 0 gets a request (G), and a U follows; but
    that flush dispatches the read (D of member 0 at 512 after the U): it is not the read's
    flush-on-add but ``blk_finish_plug``, and the session ends there (6.17: an rmw read G'd
    at 297.3 ms, the U 13.6 ms later sending it out; read as a flush inside the session,
    the replay held the chunk batch before it in raid5d's plug until 383 ms). Without the
    read's D the same U is the flush-on-add, and the session goes on."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0) + _u(5, 1)
    ev += _r5d(100, 1, 0) + _merged(110, 1, 8, 248, w)
    ev += _r5d(120, 0, 512, read=True) + _u(13_000, RAID5D, MEMBERS[1])
    ev += [(13_010, RAID5D, MEMBERS[1], ACT_ISSUE, 0, 256, w, 0)]
    rest = _r5d(20_000, 1, 256) + _u(20_100, RAID5D, MEMBERS[1])
    sent = ev + [(13_020, RAID5D, MEMBERS[0], ACT_ISSUE, 512, 8, RWBS_READ, 0)] + rest
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    for events, ends in ((sent, [13_000, 20_100]), (ev + rest, [20_100])):
        table = _table(events)
        q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
        runs = raid5d_runs(table, q, stack, 0)
        assert runs is not None
        assert runs.session_end == ends


def test_raid5d_runs_need_a_raid456_top_and_raid5d_s_bios():
    table = _table(_raid5d_trace())
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    assert raid5d_runs(table, q, stack_from_spec("raid0:disks=4,chunk=64k"), 50) is None
    assert raid5d_runs(table, q, None, 50) is None
    writer_only = _table(_q(50, 1, 128, rwbs=RWBS_READ) + _r5d(61, 1, 0, read=True, pid=1))
    q = np.flatnonzero((writer_only.action == ACT_QUEUE) & (writer_only.dev == MD))
    assert raid5d_runs(writer_only, q, stack_from_spec("raid5:disks=4,chunk=64k"), 50) is None


# --- the replay -----------------------------------------------------------------------------------
def test_a_stripe_waits_for_the_plug_of_the_thread_that_took_it():
    """release_stripe_plug: thread 1 takes row 0 (member 0's block) and keeps its plug until
    it has written the row's other blocks, a millisecond later. Thread 2 writes row 64 whole
    and unplugs meanwhile; raid5d handles row 64 then (the trace shows it). Thread 2's
    raid5_unplug releases only its own stripe: row 0 waits for thread 1's unplug and is
    written whole, with no reads."""
    ev = _q(0, 1, 0) + _q(1_000_000, 1, 128) + _q(1_000_001, 1, 256) + _u(1_000_010, 1)
    ev += _q(10, 2, 64) + _q(11, 2, 192) + _q(12, 2, 320) + _u(20, 2)
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(30 + 10 * k, m, 64)
    ev += _u(80, RAID5D, MEMBERS[0])
    out = _replay(ev)
    q = _member(out, ACT_QUEUE)
    row64 = [t for t, _m, s, _n, _r in q if s == 64]
    row0 = [t for t, _m, s, _n, _r in q if s == 0]
    # thread 2's row goes while thread 1 still holds its plug (threads replayed bio by bio)
    assert len(row64) == 4 and max(row64) < 1_000_000
    # thread 1's row: one full-stripe write after its last bio
    assert not _reads(out)
    assert len(row0) == 4 and min(row0) > 1_000_000


def test_a_released_row_takes_later_writes_until_raid5d_gets_to_it():
    """The writer unplugs after member 0's block of row 0 (raid5_unplug releases it), then
    writes the row's other blocks a millisecond later; the trace shows raid5d handling the
    row only after that, writing every member. The row is written whole when raid5d gets
    to it (EV_RAID5D at the trace's time), not read-modify-written at the first unplug."""
    ev = _q(0, 1, 0) + _u(10, 1) + _q(1_000_000, 1, 128) + _q(1_000_001, 1, 256)
    ev += _u(1_000_010, 1)
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(2_000_000 + 10 * k, m, 0)
    ev += _u(2_000_100, RAID5D, MEMBERS[0])
    out = _replay(ev)
    assert not _reads(out)
    q = _member(out, ACT_QUEUE)
    assert sorted(m for _t, m, _s, _n, _r in q) == [0, 1, 2, 3]
    assert min(t for t, *_ in q) >= 2_000_000


def _full_rows(chunks: int, chunk_sectors: int) -> list[Event]:
    """Whole chunks written in chunk order by one thread in one plug."""
    ev: list[Event] = []
    for d in range(chunks):
        ev += _q(d, 1, chunk_sectors * d, nr=chunk_sectors)
    return ev + _u(10, 1)


def test_a_chunk_of_full_stripe_writes_goes_as_a_batch_member_by_member():
    """stripe_add_to_batch_list: the full-stripe writes of a chunk's rows form one batch, and
    ops_run_io writes it member by member (last member first), so each member's blocks of the
    batch merge into one request. blk_add_rq_to_plug sends that request out when the next
    member's first request joins raid5d's plug (G) once it holds BLK_PLUG_FLUSH_SIZE
    (128 KiB): with 128 KiB chunks every member gets one request per batch, dispatched before
    the next member's second bio is queued."""
    out = _replay(_full_rows(6, 256), "raid5:disks=4,chunk=128k")  # two stripes, two batches
    assert not _reads(out)
    d = _member(out, ACT_ISSUE)
    assert [(m, s, n) for _t, m, s, n, _r in d] == [
        (3, 0, 256), (2, 0, 256), (1, 0, 256), (0, 0, 256),
        (3, 256, 256), (2, 256, 256), (1, 256, 256), (0, 256, 256)]
    q = _member(out, ACT_QUEUE)
    for (t, m, s, _n, _r), nxt in zip(d, d[1:]):
        later = sorted(tq for tq, mq, sq, _nq, _rq in q
                       if (mq, sq // 256) == (nxt[1], nxt[2] // 256))
        assert later[0] < t < later[1], f"member {m} at {s}: not cut by the next member's G"


def test_a_batch_under_the_plug_flush_size_is_not_cut():
    """64 KiB chunks: no member's request of a batch reaches BLK_PLUG_FLUSH_SIZE, the plug
    holds both batches and merges each member's blocks of both into one request."""
    out = _replay(_full_rows(6, 128), "raid5:disks=4,chunk=64k")
    d = _member(out, ACT_ISSUE)
    assert sorted((m, s, n) for _t, m, s, n, _r in d) == [(m, 0, 256) for m in range(4)]
    q = _member(out, ACT_QUEUE)
    assert max(t for t, *_ in q) <= min(t for t, *_ in d)


# --- md's superblock update after writes ----------------------------------------------------------
SB = RWBS_WRITE | RWBS_SYNC | RWBS_META | RWBS_FLUSH | RWBS_FUA


def test_a_superblock_update_after_a_write_reached_the_members_follows_that_write():
    """md_write_start marks a clean array dirty before the write goes on; an update after the
    write's member I/O (A from md0 before it) is the array marked clean after safe_mode_delay,
    so it goes after the predicted events of the bios before it, not before the write."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    members = [m.dev for m in stack.top.members]
    meta = np.array([[1000] * 4, members, [8] * 4, [1] * 4, [SB] * 4], dtype=np.int64)
    bios = BioStream.from_arrays([0, 2048], [8, 8], rwbs=RWBS_WRITE, time_ns=[100, 5000])
    cols = np.zeros((9, 3), np.int64)
    cols[0] = [100, 300, 400]  # the predicted events of the first write

    def first_at(remaps: list[int] | None) -> int:
        b = bios if remaps is None else dataclasses.replace(
            bios, meta={"top_remaps": np.array(remaps, np.int64)})
        return int(md_metadata_rows(meta, b, stack, cols)[0].min())

    # the write reached the members at 200: after its predicted events, and not before the
    # update's own traced time (safe_mode_delay after the last write ended)
    assert first_at([200]) == 1000
    cols[0] = [100, 300, 1400]  # a prediction slower than the trace: after its last event
    assert first_at([200]) == 1401
    cols[0] = [100, 300, 400]
    assert first_at([1200]) == 100  # its I/O only after the update: md_write_start waited
    assert first_at(None) == 100


def test_only_the_top_device_s_writes_reaching_the_members_count_for_the_superblock_rule():
    """A read's remap (chunk_aligned_read) says nothing about md_write_start: the times kept
    are those of the writes' member I/O."""
    ev = _q(100, 1, 0) + _q(150, 1, 128, rwbs=RWBS_READ) + _r5d(200, 1, 0, read=True, pid=1)
    ev += [(1000, 60, MEMBERS[0], ACT_QUEUE, 8, 1, SB, 0)]  # md's superblock write
    ev += _r5d(1200, 0, 0)
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    bios = bios_from_table(_table(ev), MD, stack=stack)
    assert bios.meta["top_remaps"].tolist() == [1200 - 100]


# --- raid5d's plug sessions, late blocks, a write joining a reading stripe ------------------------
def test_raid5d_s_plug_holds_a_traced_session_s_handlings_together():
    """raid5d's plug (blk_start_plug .. blk_finish_plug around its loop) stays open for the
    session the trace shows: rows 0 and 8, written whole a millisecond apart and handled
    inside one session, reach each member as one request when the session ends."""
    ev = _q(0, 1, 0) + _q(1, 1, 128) + _q(2, 1, 256) + _u(10, 1)
    ev += _q(1_000_000, 1, 8) + _q(1_000_001, 1, 136) + _q(1_000_002, 1, 264)
    ev += _u(1_000_010, 1)
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(20 + 10 * k, m, 0)
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(1_000_020 + 10 * k, m, 8, getrq=False)
    for k in range(4):
        ev += _u(1_100_000 + k, RAID5D, MEMBERS[3 - k])
    out = _replay(ev)
    d = _member(out, ACT_ISSUE)
    assert sorted((m, s, n) for _t, m, s, n, _r in d) == [(m, 0, 16) for m in range(4)]
    assert min(t for t, *_ in d) >= 1_100_000


def test_a_block_the_traced_handling_did_not_hold_waits_for_the_next():
    """Members 0 and 1 of row 0 are written in one plug, but raid5d's first handling of the
    row read only member 0 and the parity (a read-modify-write of member 0's block) and wrote
    those two; member 1 was written with the parity in a later handling: its block came while
    handle_stripe was at work. The replay splits it off to that handling: the parity is
    written twice, member 1 after member 0."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0, rwbs=w) + _q(5, 1, 128, rwbs=w) + _u(10, 1)
    ev += _r5d(100_000, 3, 0, read=True) + _r5d(100_010, 0, 0, read=True)
    ev += _r5d(200_000, 3, 0) + _r5d(200_010, 0, 0)
    ev += _r5d(300_000, 3, 0) + _r5d(300_010, 1, 0)
    out = _replay(ev)
    writes = [(t, m) for t, m, _s, _n, r in _member(out, ACT_QUEUE) if r & RWBS_WRITE]
    assert sorted(m for _t, m in writes) == [0, 1, 3, 3]
    t_of = {m: t for t, m in writes}
    assert t_of[1] > t_of[0]
    assert t_of[1] >= 300_000


def test_a_write_to_a_row_still_reading_joins_its_write_phase():
    """add_stripe_bio on a stripe_head reading for an earlier write: member 1's block, written
    while row 0 reads for member 0's block, is written with it after the reads, the parity
    once; it does not get a stripe of its own (reads and a parity write again)."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0, rwbs=w) + _u(10, 1) + _q(20_000, 1, 128, rwbs=w) + _u(20_010, 1)
    out = _replay(ev)
    q = _member(out, ACT_QUEUE)
    writes = sorted(m for _t, m, _s, _n, r in q if r & RWBS_WRITE)
    reads = [t for t, _m, _s, _n, r in q if not r & RWBS_WRITE]
    assert writes == [0, 1, 3]
    assert len(reads) == 2 and max(reads) < 20_000


def test_blocks_added_while_a_row_reads_are_chosen_for_again_when_the_reads_are_back():
    """handle_stripe -> handle_stripe_dirtying once a write's reads are back: member 1's block
    came after the first handling's analyse_stripe (the trace's first handling read member
    0 and the parity: a read-modify-write of member 0's half-written block alone), so it
    waits in the same stripe_head's towrite (add_stripe_bio: no R5_Overlap for another
    block); when the reads are back the choice is made again with both blocks, and a
    reconstruct-write reads member 2 (a second read phase of the one stripe_head), then
    one write of members 0, 1 and the parity. Not a stripe_head of its own for member 1
    (reads of members 0 and 2 again and a second parity write)."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0, 4, rwbs=w) + _q(5, 1, 128, rwbs=w) + _u(10, 1)
    ev += _r5d(100_000, 3, 0, read=True) + _r5d(100_010, 0, 0, read=True)
    ev += _r5d(1_000_000, 2, 0, read=True)
    ev += _r5d(2_000_000, 3, 0) + _r5d(2_000_010, 1, 0) + _r5d(2_000_020, 0, 0)
    q = _member(_replay(ev), ACT_QUEUE)
    writes = sorted(m for _t, m, _s, _n, r in q if r & RWBS_WRITE)
    reads = [(t, m) for t, m, _s, _n, r in q if not r & RWBS_WRITE]
    assert writes == [0, 1, 3]
    assert sorted(m for _t, m in reads) == [0, 2, 3]
    assert dict((m, t) for t, m in reads)[2] >= 1_000_000


def test_a_writer_s_stripes_go_to_raid5d_when_its_plug_is_flushed_at_its_sleep():
    """raid5_unplug is a callback of the writer's plug: where the trace shows the writer
    keeping its plug until it sleeps (UT at 1 ms), its rows are released then, not at its
    last bio; a second writer fills the row meanwhile, so it is written whole, no reads."""
    ev = _q(0, 1, 0) + [(10, 1, MEMBERS[1], ACT_GETRQ, 4096, 8, RWBS_READ, 0)]
    ev += _u(1_000_000, 1, act=ACT_UNPLUG_TIMER)
    ev += _q(500_000, 2, 128) + _q(500_001, 2, 256) + _u(500_010, 2)
    out = _replay(ev)
    assert _reads(out) == []
    writes = _member(out, ACT_ISSUE)
    assert sorted((m, s, n) for _, m, s, n, _ in writes) == \
        [(0, 0, 8), (1, 0, 8), (2, 0, 8), (3, 0, 8)]
    assert min(t for t, *_ in writes) >= 1_000_000


def test_without_raid5d_unplug_events_no_plug_session_is_invented():
    """A trace that records no U/UT (ftrace without block_unplug) says nothing of raid5d's
    plug sessions: none is assumed (not one from its first bio to its last)."""
    ev = [e for e in _raid5d_trace() if e[3] not in (ACT_UNPLUG_IO, ACT_UNPLUG_TIMER)]
    table = _table(ev)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 0)
    assert runs is not None and runs.rows
    assert runs.session_start == [] and runs.session_end == []


def test_raid5d_s_traced_times_are_not_used_for_a_thread_that_waits_for_its_io():
    """A synchronous submitter (dd: depth 1) runs on the model's own clock, where the trace's
    raid5d times mean nothing (a degraded array's reads were cut at traced session ends the
    model's dd did not keep): its replay is the one without raid5d's runs."""
    ev = _q(0, 1, 0) + _u(10, 1) + _q(1_000_000, 1, 128) + _q(1_000_001, 1, 256)
    ev += _u(1_000_010, 1)
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(2_000_000 + 10 * k, m, 0)
    ev += _u(2_000_100, RAID5D, MEMBERS[0])
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    bios = dataclasses.replace(bios_from_table(_table(ev), MD, stack=stack), depth=1)
    assert "raid5d_runs" in bios.meta
    bare = dataclasses.replace(bios, meta={k: v for k, v in bios.meta.items()
                                           if k != "raid5d_runs"})
    pol = preset_for_kernel("6.1")

    def issued(b: BioStream) -> list[tuple[int, int, int, int, int]]:
        return _member(replay(b, stack, pol, engine="python"), ACT_ISSUE)

    assert issued(bios) == issued(bare)


def test_a_degraded_read_skips_the_blocks_the_stripe_cache_held_before_the_trace():
    """A degraded array reads through the stripe cache (no ``chunk_aligned_read``), and a
    stripe_head keeps its up-to-date pages after its I/O: rows that udev's blkid probe read
    before the trace began are not read again (``fetch_block`` skips ``R5_UPTODATE``). The
    trace shows it: raid5d never reads those blocks. Here member 3 is missing; the reader
    (pid 1, a synchronous dd: depth 1, the model's own clock) reads chunk 0's rows 0..16 on
    member 0 (raid5d reads rows 8 and 16 only: row 0 was cached) and row 128 of chunk 3,
    which is on the missing member (reconstructed from members 0, 1 and 2: raid5d reads
    members 0 and 2 only: member 1's block was cached)."""
    ev = _q(0, 1, 0, 24, rwbs=RWBS_READ) + _u(5, 1)
    ev += _r5d(100, 0, 8, read=True) + _r5d(110, 0, 16, read=True, getrq=False)
    ev += _u(120, RAID5D, MEMBERS[0])
    ev += _q(1_000, 1, 384, 8, rwbs=RWBS_READ) + _u(1_005, 1)
    ev += _r5d(1_100, 2, 128, read=True) + _r5d(1_110, 0, 128, read=True)
    ev += _u(1_120, RAID5D, MEMBERS[2]) + _u(1_121, RAID5D, MEMBERS[0])
    stack = stack_from_spec("raid5:disks=4,chunk=64k,failed=3")
    bios = dataclasses.replace(bios_from_table(_table(ev), MD, stack=stack), depth=1)
    assert "raid5d_runs" in bios.meta
    out = replay(bios, stack, preset_for_kernel("6.1"), engine="python")
    got = sorted((m, s, n) for _, m, s, n, _ in _reads(out))
    assert got == [(0, 8, 16), (0, 128, 8), (2, 128, 8)]
    # without the trace's evidence (a workload) every wanted block is read
    bare = dataclasses.replace(bios, meta={k: v for k, v in bios.meta.items()
                                           if k != "raid5d_runs"})
    out = replay(bare, stack, preset_for_kernel("6.1"), engine="python")
    got = sorted((m, s, n) for _, m, s, n, _ in _reads(out))
    assert got == [(0, 0, 24), (0, 128, 8), (1, 128, 8), (2, 128, 8)]


def _d(t: int, member: int, msec: int, nr: int, pid: int = RAID5D) -> list[Event]:
    return [(t, pid, MEMBERS[member], ACT_ISSUE, msec, nr, RWBS_READ, 0)]


def _lone_first_row_trace() -> list[Event]:
    """A degraded read (member 3 missing) of chunk 0's rows 0, 8 and 16 (all on member 0) by a
    reader with no plug: raid5d got the CPU after the first row was released, read it and
    finished its plug (U, then the D of the request it got last), then read rows 8 and 16."""
    ev = _q(0, 1, 0, 24, rwbs=RWBS_READ)
    ev += _r5d(100, 0, 0, read=True) + _u(110, RAID5D, MEMBERS[0]) + _d(111, 0, 0, 8)
    ev += _r5d(200, 0, 8, read=True) + _r5d(210, 0, 16, read=True, getrq=False)
    ev += _u(220, RAID5D, MEMBERS[0]) + _d(221, 0, 8, 16)
    return ev


def test_read_plug_sessions_cut_where_raid5d_emptied_its_plug():
    """A U after which the request raid5d got last went out is the end of its plug
    (blk_finish_plug); a U whose last request stays for later is blk_add_rq_to_plug's flush
    as that request joined the plug, and cuts nothing."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k,failed=3")
    table = _table(_lone_first_row_trace())
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    assert read_plug_sessions(table, q, stack) == {0: [0], 8: [1], 16: [1]}
    # the same U, but the request got last (row 0's) is dispatched only with row 8's
    ev = [e for e in _lone_first_row_trace() if not (e[3] == ACT_ISSUE and e[4] == 0)]
    ev += _d(221, 0, 0, 8)
    table = _table(ev)
    assert read_plug_sessions(table, q, stack) == {0: [0], 8: [0], 16: [0]}
    # not degraded: reads go by chunk_aligned_read, no sessions are read
    assert read_plug_sessions(table, q, stack_from_spec("raid5:disks=4,chunk=64k")) is None


def test_a_degraded_read_is_cut_where_the_trace_shows_raid5d_finishing_its_plug():
    """The reader (a synchronous dd: depth 1, the model's own clock) has no plug, so raid5d
    races it; the trace shows raid5d taking the first row alone and finishing its plug. The
    replay cuts raid5d's plug between the rows the trace read in different sessions: member
    0 gets 0+8 and 8+16 (one request 0+24 without the trace's sessions)."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k,failed=3")
    bios = dataclasses.replace(bios_from_table(_table(_lone_first_row_trace()), MD,
                                               stack=stack), depth=1)
    assert "raid5d_read_sessions" in bios.meta
    pol = preset_for_kernel("6.1")
    got = [(m, s, n) for _, m, s, n, _ in _reads(replay(bios, stack, pol, engine="python"))]
    assert got == [(0, 0, 8), (0, 8, 16)]
    bare = dataclasses.replace(bios, meta={k: v for k, v in bios.meta.items()
                                           if k != "raid5d_read_sessions"})
    got = [(m, s, n) for _, m, s, n, _ in _reads(replay(bare, stack, pol, engine="python"))]
    assert got == [(0, 0, 24)]


# --- the trace's device service, a row's pages after its write -----------------------------------
def _served(t_d: int, t_c: int, member: int, msec: int, *, read: bool) -> list[Event]:
    """The member's D (raid5d's) and C of one 4 KiB request, as the trace shows them."""
    rw = RWBS_READ if read else RWBS_WRITE | RWBS_SYNC
    dev = MEMBERS[member]
    return [(t_d, RAID5D, dev, ACT_ISSUE, msec, 8, rw, 0),
            (t_c, 0, dev, ACT_COMPLETE, msec, 8, rw, 0)]


def _rmw_then_rest(write_c: int) -> list[Event]:
    """Row 0: the writer's block on member 0 (t=0), reconstruct-written by raid5d (reads of
    members 2 and 1 at 100 us, served in 50 us; the writes of the parity and member 0 at
    300 us, completing at ``write_c``); the row's other blocks (members 1 and 2) written at
    500 us, and raid5d handling the row again at 2 ms, writing the parity, members 2 and 1."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0, rwbs=w) + _u(10, 1)
    ev += _r5d(100_000, 2, 0, read=True) + _r5d(100_010, 1, 0, read=True)
    ev += _u(100_100, RAID5D, MEMBERS[2])
    ev += _served(100_110, 150_000, 2, 0, read=True) + _served(100_120, 150_010, 1, 0, read=True)
    ev += _r5d(300_000, 3, 0) + _r5d(300_010, 0, 0) + _u(300_100, RAID5D, MEMBERS[3])
    ev += _served(300_110, write_c, 3, 0, read=False)
    ev += _served(300_120, write_c + 10, 0, 0, read=False)
    ev += _q(500_000, 1, 128, rwbs=w) + _q(500_001, 1, 256, rwbs=w) + _u(500_010, 1)
    for k, m in enumerate([3, 2, 1]):
        ev += _r5d(2_000_000 + 10 * k, m, 0)
    ev += _u(2_000_100, RAID5D, MEMBERS[1])
    return ev


def test_a_member_request_the_trace_shows_completes_when_it_did_there():
    """On the trace's clock a member request that is the one the trace shows (device, sector,
    size, direction) completes at the trace's C: the reconstruct-write's reads are back at
    150 us, so its writes go at raid5d's traced handling (300 us), member 0 and the parity.
    With the disk model's service (an HDD's milliseconds) the reads came back after the
    row's other blocks arrived, and the row was written whole at 2 ms instead."""
    out = _replay(_rmw_then_rest(400_000), "raid5:disks=4,chunk=64k,device=hdd")
    reads = [d for d in _member(out, ACT_COMPLETE) if d[4] & RWBS_READ]
    assert sorted(t for t, *_ in reads) == [150_000, 150_010]
    early = sorted(m for t, m, _s, _n, r in _member(out, ACT_QUEUE)
                   if r & RWBS_WRITE and t < 500_000)
    assert early == [0, 3]


def test_a_row_written_again_finds_the_blocks_its_last_write_left_up_to_date():
    """The row's stripe_head keeps R5_UPTODATE on its pages after a write: blocks 1 and 2,
    added while the write of block 0 and the parity is still in flight (it completes at
    1 ms), are handled at 2 ms with every block up to date (read or written at the first
    handling): no reads, the parity and members 2 and 1 written (as the trace shows); not a
    read of block 0 for a reconstruct-write, as a stripe that forgot them would do."""
    out = _replay(_rmw_then_rest(1_000_000), "raid5:disks=4,chunk=64k,device=hdd")
    late_reads = [d for d in _reads(out) if d[0] > 500_000]
    assert late_reads == []
    late = sorted(m for t, m, _s, _n, r in _member(out, ACT_QUEUE)
                  if r & RWBS_WRITE and t >= 2_000_000)
    assert late == [1, 2, 3]


# --- md's second sleep ----------------------------------------------------------------------------
def test_md_s_second_sleep_with_no_bio_since_keeps_that_bio_s_stripe_on_the_plug():
    """The flusher (pid 1) queues row 0's block 0 and its md UT follows at once: it slept
    inside that bio (raid5_get_active_stripe), its plug flushed before the bio's stripe was
    on it. Its next md UT, 3 ms later with no bio queued since, is a second sleep after it
    finished that bio: the stripe waits on its plug until then (raid5_unplug from
    schedule). Read as a second sleep inside the same bio, the stripe went to raid5d at
    once and was handled, with the second writer's blocks, at raid5d's traced handling at
    1 ms, before the flusher let it go."""
    ev = _q(100, 1, 0) + _u(120, 1, act=ACT_UNPLUG_TIMER)
    ev += _u(3_000_000, 1, act=ACT_UNPLUG_TIMER) + _q(3_500_000, 1, 1024) + _u(3_500_010, 1)
    ev += _q(500_000, 2, 128) + _q(500_001, 2, 256) + _u(500_010, 2)
    for t0 in (1_000_000, 3_100_000):
        for k, m in enumerate([3, 2, 1, 0]):
            ev += _r5d(t0 + 10 * k, m, 0)
        ev += _u(t0 + 100, RAID5D, MEMBERS[0])
    out = _replay(ev)
    row0 = [t for t, _m, s, _n, r in _member(out, ACT_QUEUE) if s == 0 and r & RWBS_WRITE]
    assert len(row0) == 4 and min(row0) >= 3_000_000


def test_a_row_whose_stripe_head_was_in_the_cache_joins_no_batch():
    """STRIPE_BATCH_READY is set by ``init_stripe`` alone and cleared by the first
    ``handle_stripe`` (``clear_batch_ready``): row 8, written and handled before, is found
    in the stripe cache (``find_get_stripe``) when the chunk's rows 0..24 are written whole,
    so ``stripe_can_batch`` fails for it: rows 0 and 8 are written stripe by stripe and only
    rows 16 and 24 go as a batch (member by member). Batched whole, the bios went member by
    member for all four rows."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 8, rwbs=w) + _u(10, 1)
    ev += _q(20_000_000, 1, 0, 32, rwbs=w) + _q(20_000_001, 1, 128, 32, rwbs=w)
    ev += _q(20_000_002, 1, 256, 32, rwbs=w) + _u(20_000_010, 1)
    out = _replay(ev)
    q = [(m, s) for t, m, s, _n, r in _member(out, ACT_QUEUE)
         if t >= 20_000_000 and r & RWBS_WRITE]
    assert q == [(3, 0), (2, 0), (1, 0), (0, 0), (3, 8), (2, 8), (1, 8), (0, 8),
                 (3, 16), (3, 24), (2, 16), (2, 24), (1, 16), (1, 24), (0, 16), (0, 24)]


def test_a_row_raid5d_handled_without_io_joins_no_batch():
    """raid5d handles a plain write's partial row (row 8's block on member 1) and delays it
    (not STRIPE_PREREAD_ACTIVE: no reads, no I/O at all); ``handle_stripe_dirtying``'s trace
    message ("raid5 rcw 8 1 0 1") is the only sign of it, and that handling cleared the
    row's STRIPE_BATCH_READY. When the chunk's rows 0..24 are full and raid5d writes them,
    row 8 goes stripe by stripe and the batch is rows 16 and 24 (``raid5d_runs`` reads the
    messages into ``dirtied``); without the message the four rows went as one batch."""
    ev = _q(0, 1, 136) + _u(10, 1)  # row 8's block on member 1
    ev += _q(1_000_000, 1, 0, 32) + _q(1_000_001, 1, 128, 8) + _q(1_000_002, 1, 144, 16)
    ev += _q(1_000_003, 1, 256, 32) + _u(1_000_010, 1)
    for t0, row in ((2_000_000, 0), (2_000_100, 8)):
        for k, m in enumerate([3, 2, 1, 0]):
            ev += _r5d(t0 + 10 * k, m, row)
    for k, m in enumerate([3, 2, 1, 0]):  # the batch of rows 16 and 24, member by member
        ev += _r5d(2_000_200 + 20 * k, m, 16) + _r5d(2_000_205 + 20 * k, m, 24)
    ev += _u(2_000_500, RAID5D, MEMBERS[0])
    table = _table(ev)
    msg = EventTable.from_columns(time_ns=[500_000], dev=[MD], action=[ACT_MESSAGE],
                                  pid=[RAID5D], comm=[1])
    msg.comms = [msg.comms[0], "raid5 rcw 8 1 0 1"]
    table = EventTable.concat([table, msg])
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack, int(table.time_ns[q].min()))
    assert runs is not None and runs.dirtied == {8: [500_000]}
    out = replay(bios_from_table(table, MD, stack=stack), stack, preset_for_kernel("6.1"),
                 engine="python")
    got = [(m, s) for t, m, s, _n, r in _member(out, ACT_QUEUE)
           if t >= 2_000_000 and r & RWBS_WRITE]
    assert got[:8] == [(3, 0), (2, 0), (1, 0), (0, 0), (3, 8), (2, 8), (1, 8), (0, 8)]
    assert got[8:] == [(3, 16), (3, 24), (2, 16), (2, 24), (1, 16), (1, 24), (0, 16), (0, 24)]


def test_a_row_that_filled_before_the_row_before_it_heads_its_own_batch():
    """``stripe_add_to_batch_list`` runs when a row becomes a full-stripe write
    (``make_stripe_request``: ``stripe_can_batch``) and only looks back: the row joins the
    batch of the row before it if that one is a full-stripe write by then. Rows 16 and 24
    fill up (member 2's blocks) before row 8 does: row 16 cannot join row 8 and heads a
    batch of its own (row 24 joins it); row 8, filling last, joins row 0. Two batches,
    {0, 8} and {16, 24}, each written member by member; batched by rows alone (all four
    full when raid5d handles them) the bios went member by member for all four rows."""
    ev = _q(0, 1, 0, 32) + _q(1, 1, 128, 32)  # members 0 and 1: rows 0..24
    ev += _q(2, 1, 256, 8)  # member 2, row 0: row 0 full
    ev += _q(3, 1, 272, 16)  # member 2, rows 16 and 24: full before row 8
    ev += _q(4, 1, 264, 8) + _u(10, 1)  # member 2, row 8: full last
    out = _replay(ev)
    got = [(m, s) for _t, m, s, _n, r in _member(out, ACT_QUEUE) if r & RWBS_WRITE]
    assert got == [(3, 0), (3, 8), (2, 0), (2, 8), (1, 0), (1, 8), (0, 0), (0, 8),
                   (3, 16), (3, 24), (2, 16), (2, 24), (1, 16), (1, 24), (0, 16), (0, 24)]


def _split_chunk_write_trace() -> list[Event]:
    """A direct-I/O writer with no plug md holds (pid 1) writes chunk 0's rows 0..120 whole
    (one bio, md0 0+384); raid5d got the CPU after rows 0 and 8 had filled up, wrote them
    (their batch, member by member) and finished its plug (U, then the D of the request it
    got last), then wrote rows 16..120 as a batch of their own in its next session."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0, 384, rwbs=w)
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(100 + 10 * k, m, 0) + _r5d(105 + 10 * k, m, 8, getrq=False)
    ev += _u(200, RAID5D, MEMBERS[0])
    ev += [(201 + m, RAID5D, MEMBERS[m], ACT_ISSUE, 0, 16, w, 0) for m in range(4)]
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(300 + 100 * k, m, 16)
        ev += sum((_r5d(300 + 100 * k + 5 * r, m, 8 * r, getrq=False) for r in range(3, 16)),
                  [])
    ev += _u(800, RAID5D, MEMBERS[0])
    ev += [(801 + m, RAID5D, MEMBERS[m], ACT_ISSUE, 16, 112, w, 0) for m in range(4)]
    return ev


def test_write_plug_sessions_give_each_row_the_session_raid5d_wrote_it_in():
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    table = _table(_split_chunk_write_trace())
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    got = write_plug_sessions(table, q, stack)
    assert got == {8 * r: [0 if r < 2 else 1] for r in range(16)}
    assert read_plug_sessions(table, q, stack) is None  # not degraded


def test_a_synchronous_write_is_cut_where_the_trace_shows_raid5d_finishing_its_plug():
    """The writer (a synchronous dd: depth 1, the model's own clock) races raid5d; the trace
    shows raid5d writing rows 0 and 8 in one plug session and rows 16..120 in the next. The
    replay makes them two stripe batches (a batch never spans two traced sessions) and
    finishes raid5d's plug between them: each member gets 0+16, then 16+112 (one batch and
    one request 0+128 per member without the trace's sessions)."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    bios = dataclasses.replace(bios_from_table(_table(_split_chunk_write_trace()), MD,
                                               stack=stack), depth=1)
    assert "raid5d_write_sessions" in bios.meta
    pol = preset_for_kernel("6.1")

    def writes(b: BioStream) -> list[tuple[int, int, int]]:
        out = replay(b, stack, pol, engine="python")
        return sorted((m, s, n) for _, m, s, n, r in _member(out, ACT_ISSUE) if r & RWBS_WRITE)

    assert writes(bios) == [(m, s, n) for m in range(4) for s, n in ((0, 16), (16, 112))]
    bare = dataclasses.replace(bios, meta={k: v for k, v in bios.meta.items()
                                           if k != "raid5d_write_sessions"})
    assert writes(bare) == [(m, 0, 128) for m in range(4)]


def _rows_one_by_one_trace() -> list[Event]:
    """A direct-I/O writer with no plug md holds (pid 1) writes chunk 0's rows 0..120 whole
    (one bio, md0 0+384). raid5d, racing it, wrote rows 0, 8, 24 and 16 each in a walk of
    its own, 24 before 16, then rows 32..120 as one batch (member by member), all in one plug
    session (one U at the end): 7.3's first write to a degraded array."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0, 384, rwbs=w)
    t = 100
    for row in (0, 8, 24, 16):
        for m in (3, 2, 1, 0):
            ev += _r5d(t, m, row)
            t += 10
    for m in (3, 2, 1, 0):
        for r in range(4, 16):
            ev += _r5d(t, m, 8 * r, getrq=r == 4)
            t += 10
    ev += _u(t + 100, RAID5D, MEMBERS[0])
    return ev


def _runs_4x64k(events: list[Event]):
    """raid5d's traced runs of a 4 x 64k raid5 trace (its writers' Q on md0 at depth 0)."""
    table = _table(events)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 0)
    assert runs is not None
    return runs


def test_write_walks_give_each_row_its_walk_s_rank_and_whether_it_took_the_next_row():
    got = write_walks(_runs_4x64k(_rows_one_by_one_trace()))
    assert got[0] == [(0, False)] and got[8] == [(1, False)]
    assert got[24] == [(2, False)] and got[16] == [(3, False)]
    assert [got[8 * r] for r in range(4, 16)] == [[(4 + k, k < 11)] for k in range(12)]


def test_a_synchronous_write_goes_in_the_trace_s_walks_in_their_order():
    """The writer (depth 1, the model's own clock) adds the whole chunk before the replay's
    raid5d looks: every row is a full-stripe write, STRIPE_BATCH_READY, so the chunk would go
    as one batch, member by member. The trace's raid5d took rows 0, 8, 24 and 16 each alone
    (it had handled each before the next filled up: no batch) and in that order, then the
    batch of rows 32..120: the replay's raid5d submits its member bios so."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    bios = dataclasses.replace(bios_from_table(_table(_rows_one_by_one_trace()), MD,
                                               stack=stack), depth=1)
    pol = preset_for_kernel("7.3")

    def queued(b: BioStream) -> list[tuple[int, int]]:
        out = replay(b, stack, pol, engine="python")
        return [(m, s) for _, m, s, _n, r in _member(out, ACT_QUEUE) if r & RWBS_WRITE]

    alone = [(m, row) for row in (0, 8, 24, 16) for m in (3, 2, 1, 0)]
    batch = [(m, 8 * r) for m in (3, 2, 1, 0) for r in range(4, 16)]
    assert queued(bios) == alone + batch
    bare = dataclasses.replace(bios, meta={k: v for k, v in bios.meta.items()
                                           if k != "raid5d_runs"})
    assert queued(bare) == [(m, 8 * r) for m in (3, 2, 1, 0) for r in range(16)]


def _partial_row_first_trace() -> list[Event]:
    """A direct-I/O writer (pid 1) writes stripe 0's rows 0..120 whole and row 128's first
    data block (stripe 1: data on members 3, 0, 1, parity on 2), one bio md0 0+392. raid5d
    took row 128 first: its reconstruct-write's reads (members 1 and 0), then stripe 0's rows
    as one batch, then row 128's write (member 3 and the parity), all in one session."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0, 392, rwbs=w)
    ev += _r5d(100, 1, 128, read=True) + _r5d(110, 0, 128, read=True)
    t = 200
    for m in (3, 2, 1, 0):
        for r in range(16):
            ev += _r5d(t, m, 8 * r, getrq=r == 0)
            t += 10
    ev += _r5d(t + 100, 3, 128) + _r5d(t + 110, 2, 128)
    ev += _u(t + 1000, RAID5D, MEMBERS[0])
    return ev


def test_handling_ranks_give_the_order_raid5d_took_the_written_rows_in():
    got = handling_ranks(_runs_4x64k(_partial_row_first_trace()))
    assert got[128] == [0, 17]  # its read first, its write last
    assert [got[8 * r] for r in range(16)] == [[1 + r] for r in range(16)]


def test_a_synchronous_write_s_rows_are_taken_in_the_trace_s_order():
    """The writer (depth 1, the model's own clock) adds the whole bio before the replay's
    raid5d looks; in row order raid5d would write stripe 0's batch and then read for row
    128. The trace's raid5d read for row 128 first: the replay's raid5d takes the rows in
    the trace's order."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    bios = dataclasses.replace(bios_from_table(_table(_partial_row_first_trace()), MD,
                                               stack=stack), depth=1)
    pol = preset_for_kernel("7.2")

    def queued(b: BioStream) -> list[tuple[int, int, bool]]:
        out = replay(b, stack, pol, engine="python")
        return [(m, s, bool(r & RWBS_READ)) for _, m, s, _n, r in _member(out, ACT_QUEUE)]

    batch = [(m, 8 * r, False) for m in (3, 2, 1, 0) for r in range(16)]
    assert queued(bios)[:2 + len(batch)] == [(1, 128, True), (0, 128, True)] + batch
    bare = dataclasses.replace(bios, meta={k: v for k, v in bios.meta.items()
                                           if k != "raid5d_runs"})
    assert queued(bare)[:len(batch) + 2] == batch + [(1, 128, True), (0, 128, True)]


# --- raid5d asleep inside a member bio (wbt's rq_qos_wait) ----------------------------------------
def _sleep_inside_trace() -> list[Event]:
    """Rows 0 (W) and 8 (WS: its first data block's flags differ, no batch) written whole,
    released at 10 ns. raid5d writes row 0's parity (member 3) and member 2, queues member 1's
    bio and sleeps inside it (no G: the bio is throttled before it gets a request; UT: its
    plug flushed from schedule). Back at 1 ms, member 1's bio gets its request, then member
    0's; row 8 follows in the same plug session, ended by blk_finish_plug at 2 ms."""
    ws = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0) + _q(1, 1, 128) + _q(2, 1, 256)
    ev += _q(3, 1, 8, rwbs=ws) + _q(4, 1, 136, rwbs=ws) + _q(5, 1, 264, rwbs=ws) + _u(10, 1)
    ev += _r5d(100_000, 3, 0) + _r5d(110_000, 2, 0) + _r5d(120_000, 1, 0, getrq=False)
    ev += _u(130_000, RAID5D, MEMBERS[3], ACT_UNPLUG_TIMER)
    ev += _u(131_000, RAID5D, MEMBERS[2], ACT_UNPLUG_TIMER)
    ev += [(1_000_000, RAID5D, MEMBERS[1], ACT_GETRQ, 0, 8, ws, 0)]
    ev += _r5d(1_010_000, 0, 0)
    ev += _r5d(1_020_000, 3, 8) + _r5d(1_030_000, 2, 8)
    ev += _r5d(1_040_000, 1, 8, getrq=False) + _r5d(1_050_000, 0, 8, getrq=False)
    for k in range(4):
        ev += _u(2_000_000 + k, RAID5D, MEMBERS[3 - k])
    return ev


def test_raid5d_runs_find_raid5d_asleep_inside_a_member_bio():
    """The Q of member 1's bio has no G or merge before raid5d's UT: raid5d slept inside it
    (the Q is traced before ``rq_qos_throttle``); raid5d is back when the bio gets its
    request (G), which starts its next session."""
    table = _table(_sleep_inside_trace())
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 0)
    assert runs is not None
    assert runs.session_start == [100_001, 1_000_000]  # back at the bio's G
    assert runs.sleeps == [(100_001, MEMBERS[1], 0, True, 1_000_000)]
    # a UT after a bio that got its request is a sleep between bios: nothing is held back
    assert raid5d_runs(_table(_raid5d_trace()), np.flatnonzero(
        (_table(_raid5d_trace()).action == ACT_QUEUE) & (_table(_raid5d_trace()).dev == MD)),
        stack_from_spec("raid5:disks=4,chunk=64k"), 50).sleeps == []


def test_raid5d_asleep_inside_a_member_bio_submits_the_rest_of_the_handling_after_it():
    """The sleep's UT flushes only the parity's and member 2's requests of row 0; member 1's
    bio and member 0's wait for raid5d to wake and join its next plug session, where row 8's
    blocks of members 1 and 0 merge with them (0+16). Handled at once, row 0's four blocks
    all went out at the UT."""
    out = _replay(_sleep_inside_trace())
    d = sorted((t, m, s, n) for t, m, s, n, r in _member(out, ACT_ISSUE) if r & RWBS_WRITE)
    assert sorted((m, s, n) for t, m, s, n in d if t < 1_000_000) == [(2, 0, 8), (3, 0, 8)]
    assert sorted((m, s, n) for t, m, s, n in d if t >= 1_000_000) == [
        (0, 0, 16), (1, 0, 16), (2, 8, 8), (3, 8, 8)]


def _sleep_in_last_write_trace() -> list[Event]:
    """raid5 5 x 64k, row 0's member 0 block alone (read-modify-write): raid5d reads member
    0 and the parity (member 4) and, in the same plug session, writes them; it sleeps inside
    member 0's write, the last bio of the handling (UT at 0.32 ms), which gets its request
    at 1 ms; ``blk_finish_plug`` at 1.1 ms. raid5d's next work comes at 5 ms."""
    ws = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0) + _u(10, 1)
    ev += _r5d(100_000, 4, 0, read=True) + _r5d(101_000, 0, 0, read=True)
    ev += _r5d(300_000, 4, 0) + _r5d(310_000, 0, 0, getrq=False)
    ev += _u(320_000, RAID5D, MEMBERS[4], ACT_UNPLUG_TIMER)
    ev += [(1_000_000, RAID5D, MEMBERS[0], ACT_GETRQ, 0, 8, ws, 0)]
    ev += _u(1_100_000, RAID5D, MEMBERS[0])
    ev += _q(5_000_000, 1, 2048) + _u(5_000_010, 1)
    return ev


def test_raid5d_runs_take_raid5d_back_at_the_g_of_the_bio_it_slept_in():
    """No bio of raid5d follows the sleep until other work at 5 ms: raid5d was back at the
    slept bio's G (1 ms), and the session after the sleep is that bio's (1 .. 1.1 ms). The
    sleep is in member 0's write, not its read of the same sector."""
    table = _table(_sleep_in_last_write_trace())
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=5,chunk=64k"), 0)
    assert runs is not None
    assert runs.sleeps == [(100_001, MEMBERS[0], 0, True, 1_000_000)]
    assert list(zip(runs.session_start, runs.session_end)) == [
        (100_001, 320_000), (1_000_000, 1_100_000)]


def test_raid5d_asleep_in_its_last_write_is_back_at_the_bio_s_g_and_reads_do_not_sleep():
    """Member 0's write goes out with the plug of raid5d's session after the wake (1.1 ms),
    not at raid5d's next work (the trace's next raid5d bio); member 0's read, the same
    device and sector earlier in the session, went out with the UT: raid5d did not sleep in
    it (6.16, writeback to a 6 x 64k raid5: the rows of 15 chunk-stripes waited 34 ms for a
    sleep matched to the read)."""
    out = _replay(_sleep_in_last_write_trace(), "raid5:disks=5,chunk=64k")
    d = sorted((t, m, s, bool(r & RWBS_WRITE)) for t, m, s, n, r in _member(out, ACT_ISSUE)
               if s == 0)
    assert (1_100_000, 0, 0, True) in d
    assert [t for t, m, s, w in d if m == 0 and not w] == [320_000]


# --- a batch ends where the trace's ops_run_io walk ended -----------------------------------------
def _two_walks_trace() -> list[Event]:
    """Rows 0..24 of chunk 0 written whole by one thread (32 KiB per chunk: rows 0, 8, 16, 24
    on members 0, 1, 2), released at 10 ns. raid5d writes rows 0 and 8 in one ops_run_io
    walk (member 3: rows 0, 8; member 2: rows 0, 8; ...) and ends its plug; rows 16 and 24
    go in a second walk and session 1 ms later (raid5d had begun the first batch before rows
    16 and 24 were full: clear_batch_ready closed it)."""
    ev = _q(0, 1, 0, nr=32) + _q(1, 1, 128, nr=32) + _q(2, 1, 256, nr=32) + _u(10, 1)
    for base, first in ((0, 100_000), (16, 1_100_000)):
        t = first
        for m in (3, 2, 1, 0):
            ev += _r5d(t, m, base) + _r5d(t + 5_000, m, base + 8, getrq=False)
            t += 10_000
        for k in range(4):
            ev += _u(t + 50_000 + k, RAID5D, MEMBERS[3 - k])
    return ev


def test_raid5d_runs_link_the_rows_one_walk_wrote():
    table = _table(_two_walks_trace())
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 0)
    assert runs is not None
    assert runs.linked == {0: [True], 8: [False], 16: [True], 24: [False]}


def test_a_batch_ends_where_the_trace_s_walk_ended():
    """The four full-stripe rows of the chunk, all released together, would be one batch
    (each member 0+32 when the first session ends); the trace wrote rows 0 and 8 in one walk
    and rows 16 and 24 in another: two batches, 0+16 per member, then 16+16 in the next
    session."""
    out = _replay(_two_walks_trace())
    d = sorted((t, m, s, n) for t, m, s, n, r in _member(out, ACT_ISSUE) if r & RWBS_WRITE)
    assert sorted((m, s, n) for t, m, s, n in d if t < 1_000_000) == [(m, 0, 16) for m in range(4)]
    assert sorted((m, s, n) for t, m, s, n in d if t >= 1_000_000) == [
        (m, 16, 16) for m in range(4)]


def _batch_across_plugs_trace() -> list[Event]:
    """Row 0 written whole by pid 1; row 8's first block by pid 2 (its plug takes the
    stripe: STRIPE_ON_UNPLUG_LIST), the rest by pid 1, which fills it after row 0. pid 1
    unplugs at 0.1 ms, pid 2 only at 2 ms; raid5d writes rows 0 and 8 in one walk at 1 ms."""
    ev = _q(0, 1, 0) + _q(10_000, 1, 128) + _q(20_000, 1, 256)
    ev += _q(30_000, 2, 8) + _q(40_000, 1, 136) + _q(50_000, 1, 264) + _u(100_000, 1)
    ev += _q(1_900_000, 2, 1_024) + _u(2_000_000, 2)  # pid 2 keeps its plug until then
    t = 1_000_000
    for m in (3, 2, 1, 0):
        ev += _r5d(t, m, 0) + _r5d(t + 5_000, m, 8, getrq=False)
        t += 10_000
    for k in range(4):
        ev += _u(1_100_000 + k, RAID5D, MEMBERS[3 - k])
    return ev


def test_a_batch_takes_a_row_another_thread_s_plug_still_holds():
    """Row 8 joined row 0's batch when it filled up (``stripe_add_to_batch_list``: the batch
    list is not the plug's list), so raid5d's handling of the batch head writes it too,
    though pid 2's plug still holds its stripe_head (``raid5_unplug`` would only release it
    later): each member gets 0+16 at 1.1 ms, not 0+8 then 8+8 when pid 2's plug goes."""
    out = _replay(_batch_across_plugs_trace())
    d = sorted((t, m, s, n) for t, m, s, n, r in _member(out, ACT_ISSUE)
               if r & RWBS_WRITE and s < 128)
    assert sorted((m, s, n) for t, m, s, n in d) == [(m, 0, 16) for m in range(4)]
    assert max(t for t, *_ in d) < 1_900_000


def test_raid5d_s_plug_issued_directly_ends_its_session_with_no_unplug_traced():
    """6.1: raid5d's plug holding requests of one queue goes out by
    ``blk_mq_plug_issue_direct`` at ``blk_finish_plug``, which traces no U (the unplug event
    is traced for every flush from 6.12, "blk-mq: add missing unplug trace event"): raid5d's
    D right after its own Q or G is that flush and ends the session (no U at all: none was
    read, and raid5d's rows merged across the whole trace)."""
    ev = _q(0, 1, 0) + _q(1, 1, 8) + _u(10, 1)
    ev += _r5d(100_000, 2, 0) + [(110_000, RAID5D, MEMBERS[2], ACT_ISSUE, 0, 8, RWBS_WRITE, 0)]
    ev += _r5d(1_000_000, 2, 8)
    ev += [(1_010_000, RAID5D, MEMBERS[2], ACT_ISSUE, 8, 8, RWBS_WRITE, 0)]
    # a D of raid5d's after its U is that flush's dispatch, not a second end
    ev += _r5d(2_000_000, 2, 16) + _u(2_005_000, RAID5D, MEMBERS[2])
    ev += [(2_010_000, RAID5D, MEMBERS[2], ACT_ISSUE, 16, 8, RWBS_WRITE, 0)]
    table = _table(ev)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack_from_spec("raid5:disks=4,chunk=64k"), 0)
    assert runs is not None
    assert runs.session_start == [100_001, 1_000_001, 2_000_001]
    assert runs.session_end == [110_000, 1_010_000, 2_005_000]


# --- a sleep inside a bio only when the stripe cache has no stripe_head for it --------------------
def _sleep_after_a_bio_trace() -> list[Event]:
    """The flusher (pid 1) queues rows 64 and 128 and then row 0's block 0 (all on hash list
    0), and its md UT follows 1.9 ms later, nothing placed for the bio (md has no request of
    its own); ``sync`` (pid 2) queues row 0's blocks 1 and 2 at 1 ms and keeps its plug until
    6 ms; raid5d writes row 0 whole at 3 ms."""
    ev = _q(50, 1, 64) + _q(60, 1, 384) + _q(100, 1, 0)
    ev += _u(2_000_000, 1, act=ACT_UNPLUG_TIMER) + _q(5_000_000, 1, 1024) + _u(5_000_010, 1)
    ev += _q(1_000_000, 2, 128) + _q(1_000_001, 2, 256)
    ev += _q(6_000_000, 2, 2048) + _u(6_000_010, 2)
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(3_000_000 + 10 * k, m, 0)
    ev += _u(3_000_100, RAID5D, MEMBERS[0])
    return ev


def _row_writes(out: EventTable, msec: int) -> list[int]:
    return [t for t, _m, s, _n, r in _member(out, ACT_QUEUE) if s == msec and r & RWBS_WRITE]


def test_a_sleep_after_a_bio_that_got_its_stripe_head_keeps_it_on_the_plug_until_then():
    """A writer's md UT after its bio, with nothing placed for it, was read as a sleep inside
    the bio (its plug flushed before it, the bio's row released with the unit's end). But
    ``raid5_get_active_stripe`` sleeps only when the row has no stripe_head and its hash list
    none free (``conf->wait_for_stripe``): with md's 256 stripe_heads the bio got one, its
    stripe went onto the flusher's plug, and the UT's ``raid5_unplug`` released it at 2 ms.
    Released at once, ``sync``'s blocks took it onto sync's plug (``release_stripe_plug``)
    until 6 ms, past raid5d's handling of the row at 3 ms."""
    row = _row_writes(_replay(_sleep_after_a_bio_trace()), 0)
    assert len(row) == 4 and 3_000_000 <= min(row) and max(row) < 5_000_000


def test_a_sleep_for_a_free_stripe_head_is_inside_the_bio():
    """With ``stripe_cache_size`` 16 (2 stripe_heads per hash list) rows 64 and 128 hold hash
    list 0: row 0's bio waits for a stripe_head (R5_INACTIVE_BLOCKED, ``wait_for_stripe``),
    the sleep is inside it and the plug went out before it; ``sync``'s blocks then hold the
    row on sync's plug (6 ms)."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    small = dataclasses.replace(stack, top=dataclasses.replace(stack.top, stripe_cache=16))
    bios = bios_from_table(_table(_sleep_after_a_bio_trace()), MD, stack=small)
    row = _row_writes(replay(bios, small, preset_for_kernel("6.1"), engine="python"), 0)
    assert len(row) == 4 and min(row) >= 6_000_000


def test_a_row_raid5d_handled_before_the_writer_s_sleep_was_not_on_its_plug():
    """Where raid5d handled the bio's row between the bio and the writer's UT, the row was
    not on the writer's plug until that UT: the sleep keeps its reading as inside the bio."""
    ev = _sleep_after_a_bio_trace()
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(1_500_000 + 10 * k, m, 0)
    ev += _u(1_500_100, RAID5D, MEMBERS[0])
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    bios = bios_from_table(_table(ev), MD, stack=stack)
    assert not bios.meta.get("sleeps_inside")


# --- a row's pages while its late blocks wait ------------------------------------------------------
def _late_blocks_then_eviction_trace() -> list[Event]:
    """raid5 5 x 64k, row 0 (parity on member 4). The writer's block of member 0 (t=0) is
    read-modify-written: raid5d reads members 4 and 0 at 100 us (back at 150 us) and writes
    them at 300 us (done at 400 us). Blocks 1, 2 and 3 come at 200 us, after the reads but
    before that handling's ``analyse_stripe`` as the trace shows it (it wrote members 4 and
    0 only): they wait in the row's ``towrite`` for raid5d's handling at 2 ms. Meanwhile
    another writer fills row 64 (the same hash list) at 500 us."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 0, rwbs=w) + _u(10, 1)
    ev += _r5d(100_000, 4, 0, read=True) + _r5d(100_010, 0, 0, read=True)
    ev += _u(100_100, RAID5D, MEMBERS[4])
    ev += _served(100_110, 150_000, 4, 0, read=True) + _served(100_120, 150_010, 0, 0, read=True)
    ev += _q(200_000, 1, 128, rwbs=w) + _q(200_001, 1, 256, rwbs=w) + _q(200_002, 1, 384, rwbs=w)
    ev += _u(200_010, 1)
    ev += _r5d(300_000, 4, 0) + _r5d(300_010, 0, 0) + _u(300_100, RAID5D, MEMBERS[4])
    ev += _served(300_110, 400_000, 4, 0, read=False)
    ev += _served(300_120, 400_010, 0, 0, read=False)
    ev += _q(500_000, 2, 64) + _q(500_001, 2, 192) + _q(500_002, 2, 320) + _q(500_003, 2, 448)
    ev += _u(500_010, 2)
    for k, m in enumerate([4, 3, 2, 1, 0]):
        ev += _r5d(600_000 + 10 * k, m, 64)
    ev += _u(600_100, RAID5D, MEMBERS[0])
    for k, m in enumerate([4, 3, 2, 1]):
        ev += _r5d(2_000_000 + 10 * k, m, 0)
    ev += _u(2_000_100, RAID5D, MEMBERS[1])
    return ev


def test_a_row_whose_late_blocks_wait_keeps_its_pages_in_the_stripe_cache():
    """The late blocks stay on the row's one stripe_head (the kernel's: active while a plug
    or a list holds it, ``do_release_stripe`` puts it on no inactive list), so the pages of
    members 4 and 0 that the first handling left up to date are still there at 2 ms: the
    blocks 1, 2, 3 are written with the parity, no reads. With ``stripe_cache_size`` 8 (one
    stripe_head per hash list) row 64 evicted row 0 from hash list 0 when the model put the
    row back at 400 us as if nothing held it, and row 0 then read member 0 again
    (a reconstruct-write)."""
    stack = stack_from_spec("raid5:disks=5,chunk=64k,device=hdd")
    small = dataclasses.replace(stack, top=dataclasses.replace(stack.top, stripe_cache=8))
    bios = bios_from_table(_table(_late_blocks_then_eviction_trace()), MD, stack=small)
    out = replay(bios, small, preset_for_kernel("6.1"), engine="python")
    assert [d for d in _reads(out) if d[0] > 500_000] == []
    late = sorted(m for t, m, s, _n, r in _member(out, ACT_QUEUE)
                  if r & RWBS_WRITE and s == 0 and t >= 2_000_000)
    assert late == [1, 2, 3, 4]


# --- md_write_start: writes that came while the array was marked dirty ---------------------------
def _dirty_marking_trace() -> list[Event]:
    """The flusher (pid 1) writes row 8 at t=0 to a clean array: md marks it dirty, its
    superblock writes (REQ_META, no remap from md0) run from 1 to 17 ms. ``sync`` (pid 2)
    queues row 0's block 0 at 0.6 ms, during the update; the flusher queues row 0's blocks
    1 and 2 at 19.5 ms, ``sync`` its next bio at 28 ms."""
    meta = RWBS_WRITE | RWBS_SYNC | RWBS_META
    ev = _q(0, 1, 8) + _q(600_000, 2, 0, rwbs=RWBS_WRITE | RWBS_SYNC)
    for k, dev in enumerate(MEMBERS[:4]):
        ev += [(1_000_000 + 10_000 * k, 30, dev, ACT_QUEUE, 8, 1, meta, 0),
               (2_000_000 + 10_000 * k, 30, dev, ACT_ISSUE, 8, 1, meta, 0),
               (17_000_000 + 10_000 * k, 0, dev, ACT_COMPLETE, 8, 1, meta, 0)]
    ev += _q(19_500_000, 1, 128) + _q(19_500_100, 1, 256) + _u(27_000_000, 1)
    ev += _q(28_000_000, 2, 384, rwbs=RWBS_WRITE | RWBS_SYNC) + _u(28_000_100, 2)
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(30_000_000 + 10 * k, m, 0)
    ev += _u(30_000_100, RAID5D, MEMBERS[0])
    return ev


def test_a_write_that_came_during_the_dirty_marking_update_reaches_raid5_after_it():
    """``md_write_start`` sleeps on ``sb_wait`` while MD_SB_CHANGE_PENDING is set: ``sync``'s
    bio, queued at 0.6 ms while the update ran to 17 ms, reaches ``raid5_make_request`` when
    ``sync`` runs again, just before its next bio (28 ms), after the flusher's blocks of the
    row (19.5 ms), whose plug then holds the row (``release_stripe_plug``). The first write,
    whose time places the update (``md_metadata_rows``), keeps its own."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    bios = bios_from_table(_table(_dirty_marking_trace()), MD, stack=stack)
    got = dict(zip(bios.sector.tolist(), bios.time_ns.tolist(), strict=True))
    assert got[8] == 0
    assert got[0] == 28_000_000 - 1
    assert got[128] == 19_500_000


def test_an_update_after_the_array_s_writes_reached_the_members_holds_no_write_back():
    """The same trace, but raid5d wrote row 8 onto the members (A from md0) at 0.3 ms, before
    the superblock writes began: ``md_write_start`` had let writes through (the array was
    dirty already), so the update is a later one (the clean-marking update of
    ``md_check_recovery`` once writes went idle) and ``sync``'s bio keeps its own time
    (6.17 r5_d4_c128_writeback_24M: every write had been moved behind the update at 596 ms)."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    ev = _dirty_marking_trace()
    for k, m in enumerate([3, 2, 1, 0]):
        ev += _r5d(300_000 + 10 * k, m, 8)
    bios = bios_from_table(_table(sorted(ev)), MD, stack=stack)
    got = dict(zip(bios.sector.tolist(), bios.time_ns.tolist(), strict=True))
    assert got[0] == 600_000
    assert got[8] == 0


# --- raid5d's plug held while a reconstruct-write's reads are in flight -----------------------
def _rcw_in_one_session_trace(cut: bool) -> list[Event]:
    """A direct-I/O writer writes a 4 x 128k raid5 from md0 sector 8 to the end of member 3's
    chunk of stripe 1, one bio md0 8+1016: stripe 0's rows 8..248 whole (member requests of
    248 sectors, under BLK_PLUG_FLUSH_SIZE), its row 0 and stripe 1's rows 256..504 (data
    on member 3, parity on member 2) in part. raid5d reads for them (row 0's member 0 block;
    rows 256.. of members 0 and 1, 256 sectors each, sent out by the next request's
    BLK_PLUG_FLUSH_SIZE flush), writes rows 8..248 as one batch, and once the reads are back
    writes row 0 and then rows 256..504 (member 3, parity) in the same plug session, or,
    ``cut``, each in a later session (a U before each)."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 8, 1016, rwbs=w)
    ev += _r5d(50, 0, 0, read=True)
    t = 100
    for m in (1, 0):
        for r in range(32):
            ev += _r5d(t, m, 256 + 8 * r, read=True, getrq=r == 0)
            t += 10
    for m in (3, 2, 1, 0):
        for r in range(1, 32):
            ev += _r5d(t, m, 8 * r, getrq=r == 1)
            t += 10
    if cut:  # the session ends: U, then the D of the request raid5d got last
        ev += _u(t, RAID5D, MEMBERS[0]) + [(t + 1, RAID5D, MEMBERS[0], ACT_ISSUE, 8, 248, w, 0)]
    t += 1000
    ev += _r5d(t, 3, 0) + _r5d(t + 2, 2, 0) + _r5d(t + 4, 1, 0)
    t += 100
    if cut:
        ev += _u(t, RAID5D, MEMBERS[1]) + [(t + 1, RAID5D, MEMBERS[1], ACT_ISSUE, 0, 8, w, 0)]
    t += 1000
    for r in range(32):
        ev += _r5d(t, 3, 256 + 8 * r, getrq=not cut or r == 0)
        ev += _r5d(t + 5, 2, 256 + 8 * r, getrq=not cut or r == 0)
        t += 10
    ev += _u(t + 1000, RAID5D, MEMBERS[0])
    return ev


def test_a_reconstruct_write_in_the_session_of_the_batch_finds_the_batch_in_raid5d_s_plug():
    """7.2's plug (FIFO list; ``blk_attempt_plug_merge`` tries the tail, then the oldest
    request of the bio's queue): where the trace wrote rows 256.. in the session of the
    batch, raid5d's plug still holds the batch's requests when the reads are back, and
    member 3's row writes (each behind the parity's, another queue) find member 3's batch
    request first and merge with nothing; where the trace cut the session, they merge."""
    stack = stack_from_spec("raid5:disks=4,chunk=128k")
    pol = preset_for_kernel("7.2")

    def issued(cut: bool) -> list[tuple[int, int]]:
        bios = dataclasses.replace(bios_from_table(_table(_rcw_in_one_session_trace(cut)), MD,
                                                   stack=stack), depth=1)
        out = replay(bios, stack, pol, engine="python")
        return [(s, n) for _, m, s, n, r in _member(out, ACT_ISSUE) if m == 3]

    assert issued(False) == [(8, 248), (0, 8)] + [(256 + 8 * r, 8) for r in range(32)]
    assert issued(True) == [(8, 248), (0, 8), (256, 256)]


def test_a_small_read_in_raid5d_s_plug_does_not_end_its_session_while_other_rows_are_read():
    """7.3 ``r5_d5_c128_degraded_ddw768k``: the next rows' rmw reads (7584+96 on three
    members, under BLK_PLUG_FLUSH_SIZE, so ``blk_add_rq_to_plug`` did not flush) sat in
    raid5d's plug while the rows read before came back and were written in the same session.
    The plug is held for a row whose read went out; a row whose read is still in the plug
    cannot come back before the flush and does not hold it."""
    from workers.model.plug import Bio, Request
    from workers.model.split import OP_READ, OP_WRITE
    from workers.model.submit import Engine, R5Stripe

    stack = stack_from_spec("raid5:disks=4,chunk=128k")
    eng = Engine(stack, preset_for_kernel("7.3"))
    top = stack.top
    m0 = top.members[0].dev

    def rq(sector: int, nr: int, op: int) -> Request:
        return Request(Bio(m0, sector, nr, op, RWBS_READ if op == OP_READ else RWBS_WRITE,
                           0, None, None, 0, 0, 50), 1, sector)

    eng.plug = eng.make_plug()
    eng.plug.rqs = [rq(8, 248, OP_WRITE), rq(512, 64, OP_READ)]
    eng.r5_plug_session = 3
    eng.r5_write_session = {256: [3], 512: [3]}
    eng.r5_reading = {(top.dev, 512): R5Stripe(top, 512, 1, 50)}
    assert not eng._hold_raid5d_plug()  # only a row whose read waits in this plug
    eng.r5_reading[(top.dev, 256)] = R5Stripe(top, 256, 2, 50)
    assert eng._hold_raid5d_plug()  # row 256's read is out: raid5d is back in this session
    assert eng.r5_held == (3, eng.plug)


def test_a_held_raid5d_plug_goes_out_when_nothing_is_left_to_bring_raid5d_back():
    """``blk_finish_plug`` at the end of ``raid5d``: a plug held past raid5d's run for rows
    whose reads are out is taken up by its next run; when the replay has no event left (those
    reads never complete), the held plug is flushed, not lost."""
    from workers.model.plug import Bio, Request
    from workers.model.split import OP_WRITE
    from workers.model.submit import Engine

    stack = stack_from_spec("raid5:disks=4,chunk=128k")
    eng = Engine(stack, preset_for_kernel("7.3"))
    m0 = stack.top.members[0].dev
    plug = eng.make_plug()
    plug.rqs = [Request(Bio(m0, 8, 248, OP_WRITE, RWBS_WRITE, 0, None, None, 0, 0, 50), 1, 1)]
    eng.r5_held = (3, plug)
    assert eng.inflight[m0] == 0
    assert eng.release_held_plug()
    assert eng.r5_held is None and not plug.rqs
    assert eng.inflight[m0] == 1  # dispatched to the member
    assert not eng.release_held_plug()


def test_rows_written_in_a_later_session_than_the_held_plug_s_finish_it_first():
    """raid5d's plug kept open past its run for rows whose reads are out
    (``_hold_raid5d_plug``) is taken up by raid5d's next run; where the trace wrote the rows
    that run writes in a later plug session (``r5_write_session``, by order), raid5d had
    reached ``blk_finish_plug`` at the end of ``raid5d`` in between, so the held plug goes out
    before their writes and they start a plug of their own (7.3, dd bs=200k to 6 x 128k
    raid5: rows 6912..6960 written in one session, row 6968 in the next; the replay wrote
    6912+64 where the trace has 6912+56, 6968+8)."""
    from workers.model.plug import Bio, Request
    from workers.model.split import OP_WRITE
    from workers.model.submit import Engine, R5Stripe

    stack = stack_from_spec("raid5:disks=4,chunk=128k")
    eng = Engine(stack, preset_for_kernel("7.3"))
    top = stack.top
    m0 = top.members[0].dev
    held = eng.make_plug()
    held.rqs = [Request(Bio(m0, 8, 56, OP_WRITE, RWBS_WRITE, 0, None, None, 0, 0, 50), 1, 8)]
    eng.plug = held
    eng.r5_plug_session = 3  # raid5_unplug took up the plug held for session 3
    eng.r5_write_session = {64: [4]}
    written: list[list[int]] = []
    eng._batch_writes = lambda batch: written.append([sh.msec for sh in batch])  # type: ignore
    eng._write_batches([R5Stripe(top, 64, 3, 50)])
    assert written == [[64]]
    assert not held.rqs and eng.inflight[m0] == 1  # the held plug went out first
    assert eng.plug is not held and eng.r5_plug_session == 4
    # rows of the held plug's own session go on into it
    eng.r5_write_session[72] = [4]
    plug = eng.plug
    plug.rqs = [Request(Bio(m0, 64, 8, OP_WRITE, RWBS_WRITE, 0, None, None, 0, 0, 50), 1, 64)]
    eng._write_batches([R5Stripe(top, 72, 3, 50)])
    assert eng.plug is plug and len(plug.rqs) == 1


# --- rows back from their reads, taken in the trace's order; raid5d asleep in a write, by order ---
def _rows_back_out_of_order_trace(sleep: bool) -> list[Event]:
    """A direct-I/O writer writes a 4 x 128k raid5 from md0 sector 8 to sector 896, one bio:
    stripe 0's rows 8..248 whole, its row 0 without member 0's block, and the first 16 rows
    of stripe 1 on member 3 (256..376; members 0 and 1 left alone, parity on member 2).
    raid5d writes rows 8..248 as one batch (248-sector requests, under BLK_PLUG_FLUSH_SIZE:
    they stay in its plug), reads for row 0 and rows 256..376 (a reconstruct-write: members
    1 and 0, each read a request of its own behind the batch's), and once the reads are back
    writes row 0, then rows 320..376, then rows 256..312 (member 3, the parity on member 2),
    all in one plug session: the rows' reads came back while raid5d was at work, and it took
    them from its handle list in that order. ``sleep``: raid5d sleeps inside row 288's write
    of member 3 (a Q with no G before its UT: wbt's ``rq_qos_wait``); the bio gets its
    request after the wake, and rows 296..312 merge with it in the new plug."""
    w = RWBS_WRITE | RWBS_SYNC
    ev = _q(0, 1, 8, 888, rwbs=w)
    t = 100
    for m in (3, 2, 1, 0):
        for r in range(1, 32):
            ev += _r5d(t, m, 8 * r, getrq=r == 1)
            t += 10
    ev += _r5d(t, 0, 0, read=True)
    t += 10
    for r in range(16):
        ev += _r5d(t, 1, 256 + 8 * r, read=True) + _r5d(t + 5, 0, 256 + 8 * r, read=True)
        t += 10
    t += 1000
    ev += _r5d(t, 3, 0) + _r5d(t + 3, 2, 0) + _r5d(t + 6, 1, 0)
    t += 10
    for r in list(range(8, 16)) + list(range(8)):
        row = 256 + 8 * r
        if sleep and row == 288:
            ev += [(t, RAID5D, MEMBERS[3], ACT_REMAP, row, 8, w, MD),
                   (t + 1, RAID5D, MEMBERS[3], ACT_QUEUE, row, 8, w, 0)]
            for k, m in enumerate((3, 2, 1, 0)):
                ev += _u(t + 10 + k, RAID5D, MEMBERS[m], ACT_UNPLUG_TIMER)
            ev += [(t + 20, RAID5D, MEMBERS[2], ACT_ISSUE, 280, 8, w, 0)]
            t += 100_000
            ev += [(t, RAID5D, MEMBERS[3], ACT_GETRQ, row, 8, w, 0)]
            ev += _r5d(t + 5, 2, row)
        else:
            after = sleep and row > 288
            ev += _r5d(t, 3, row, getrq=not after) + _r5d(t + 5, 2, row, getrq=not after)
        t += 10
    ev += _u(t + 1000, RAID5D, MEMBERS[3])
    return ev


def _rows_back_replay(sleep: bool, drop: tuple[str, ...] = ()) -> EventTable:
    stack = stack_from_spec("raid5:disks=4,chunk=128k")
    bios = bios_from_table(_table(_rows_back_out_of_order_trace(sleep)), MD, stack=stack)
    bios = dataclasses.replace(bios, depth=1,
                               meta={k: v for k, v in bios.meta.items() if k not in drop})
    return replay(bios, stack, preset_for_kernel("7.2"), engine="python")


def test_rows_whose_reads_are_back_are_written_in_the_trace_s_order():
    """7.2 ``r5_d5_c128_degraded_ddw768k``: ``raid5_end_read_request`` releases each row as
    its last read completes (``raid5_release_stripe`` -> ``conf->released_stripes``), and
    raid5d, still at work, takes what came back only when it looks again
    (``release_stripe_list``, ``handle_active_stripes`` from the handle list's head): the
    trace wrote rows 320..376 before rows 256..312. The replay's device model serves the
    reads one by one, and its raid5d wrote each row as it came back, in row order; a row
    now waits for the rows the trace wrote before it whose reads are still out."""
    def member3(out: EventTable) -> list[int]:
        return [s for _, m, s, _n, r in _member(out, ACT_QUEUE)
                if m == 3 and r & RWBS_WRITE and s >= 256]

    assert member3(_rows_back_replay(False)) == [256 + 8 * r for r in list(range(8, 16))
                                                 + list(range(8))]


def test_write_plug_sleeps_find_the_write_raid5d_slept_in_by_order():
    """Member 3's first write of row 288 has no G before raid5d's UT: raid5d slept inside it
    (``rq_qos_throttle``), and it went into the session after the sleep. The row's handling,
    cut by the sleep, counts once, in the session of its first bio; rows 296..312 are
    written in the next."""
    stack = stack_from_spec("raid5:disks=4,chunk=128k")
    table = _table(_rows_back_out_of_order_trace(True))
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    assert write_plug_sleeps(table, q, stack) == {(MEMBERS[3], 288): {0: 1}}
    sessions = write_plug_sessions(table, q, stack)
    assert sessions is not None
    assert sessions[288] == [0] and sessions[296] == [1] and sessions[280] == [0]
    plain = _table(_rows_back_out_of_order_trace(False))
    assert write_plug_sleeps(plain, q, stack) is None


def test_raid5d_asleep_in_a_write_by_order_cuts_its_plug_inside_the_row():
    """The sleep flushes raid5d's plug (``sched_submit_work``: UT), so rows 320..376 and
    256..280 go out each alone (7.x's FIFO plug: member 3's oldest request is row 0's
    parity), and row 288's member 3 bio gets its request in the plug after the wake, where
    rows 296..312 merge with it: 288+32. Without the sleep the plug went on to the session's
    end and row 288 was written alone."""
    def member3(out: EventTable) -> list[tuple[int, int]]:
        return [(s, n) for _, m, s, n, r in _member(out, ACT_ISSUE)
                if m == 3 and r & RWBS_WRITE and s >= 256]

    alone = [(256 + 8 * r, 8) for r in list(range(8, 16)) + list(range(4))]
    assert member3(_rows_back_replay(True)) == alone + [(288, 32)]
    assert member3(_rows_back_replay(True, ("raid5d_write_sleeps",)))[:len(alone) + 1] == \
        alone + [(288, 8)]


def test_rows_raid5d_delayed_in_one_pass_read_together():
    """A plain write (not REQ_SYNC) of member 1's blocks of rows 0 and 8: each row must read
    first (reconstruct-write: members 0 and 2) and is not STRIPE_PREREAD_ACTIVE, so raid5d's
    ``handle_stripe_dirtying`` delays both, with no I/O; its messages ("raid5 rcw S 2 0 1",
    the last field STRIPE_DELAYED) say so. ``raid5_activate_delayed`` then moves the whole
    delayed list to the hold list and raid5d reads both rows in one pass, as the trace
    shows (600 us). Handled each at its read's time, row 0 was activated alone and row 8
    waited behind ``preread_active_stripes`` until row 0's reads were back (``Raid5dRuns.
    delayed``, ``Engine._hold_delayed``)."""
    ev = _q(0, 1, 128, 16) + _u(10, 1)
    for k, (m, row) in enumerate([(2, 0), (0, 0), (2, 8), (0, 8)]):
        ev += _r5d(600_000 + 10 * k, m, row, read=True, getrq=row == 0)
    ev += _u(600_100, RAID5D, MEMBERS[0])
    for k, (m, row) in enumerate([(3, 0), (1, 0), (3, 8), (1, 8)]):
        ev += _r5d(5_000_000 + 10 * k, m, row, getrq=row == 0)
    ev += _u(5_000_100, RAID5D, MEMBERS[0])
    table = _table(ev)
    msg = EventTable.from_columns(time_ns=[500_000, 500_005], dev=[MD, MD],
                                  action=[ACT_MESSAGE, ACT_MESSAGE], pid=[RAID5D, RAID5D],
                                  comm=[1, 2])
    msg.comms = [msg.comms[0], "raid5 rcw 0 2 0 1", "raid5 rcw 8 2 0 1"]
    table = EventTable.concat([table, msg])
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    runs = raid5d_runs(table, q, stack, int(table.time_ns[q].min()))
    assert runs is not None and runs.delayed == {0: [500_000], 8: [500_005]}
    out = replay(bios_from_table(table, MD, stack=stack), stack, preset_for_kernel("6.1"),
                 engine="python")
    reads = [(t, m, s) for t, m, s, _n, r in _member(out, ACT_QUEUE) if not r & RWBS_WRITE]
    assert sorted((m, s) for _t, m, s in reads) == [(0, 0), (0, 8), (2, 0), (2, 8)]
    # row 8 with row 0, not once row 0's reads are back (672.9 us without the messages)
    assert all(t < 620_000 for t, _m, _s in reads), reads
