"""Each task's own plug, and the sleeps the trace shows (UT), in a multi-thread replay.

Two tasks writing back one block device at once (the flusher's ``wb_writeback`` and
``sync``'s own writeback of the bdev inode) each hold a plug (``current->plug``) across many
bios, and each plug is flushed from schedule (UT) whenever its task sleeps: on a folio lock
the other task holds, or in ``rq_qos_throttle`` (wbt) before a request is allocated. The
disk sees their requests interleaved as the tasks ran, not one task's plug after the other's
(the 6.12.117 capture disk_writeback_64M scored 88% before, 100% after).
"""

from __future__ import annotations

import numpy as np

from workers.events import (
    ACT_BACKMERGE,
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_WRITE,
    EventTable,
    make_dev,
)
from workers.model import preset_for_kernel, replay
from workers.model.replay import BioStream, _schedule_flushes, _units_interleave
from workers.model.stack import stack_from_spec

MS = 1_000_000


def _stream(rows, sleeps=None):
    """rows: (time ms, pid, plug id, sector) of 8-sector writes, in time order (as a trace's
    Q events)."""
    t, pid, plug, sec = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    n = len(t)
    z = np.zeros(n, np.int64)
    meta = {} if sleeps is None else {"sleeps": {p: np.array(v, np.int64) * MS
                                                  for p, v in sleeps.items()}}
    return BioStream(time_ns=t * MS, sector=sec, nr_sectors=np.full(n, 8, np.int64),
                     rwbs=np.full(n, RWBS_WRITE, np.int64), pid=pid, plug=plug, seg_bytes=z,
                     bio_pages=z, depth=0, meta=meta)


#: task 1 writes 0..31 (one plug, merged into one request), then 1000 after task 2 ran;
#: task 2 writes 5000..5015 under its own plug between them
ROWS = [(0, 1, 0, 0), (10, 1, 0, 8), (20, 1, 0, 16), (30, 1, 0, 24),
        (40, 2, 1, 5000), (50, 2, 1, 5008), (60, 1, 0, 1000)]


def _issued(stream):
    stack = stack_from_spec("disk")
    out = replay(stream, stack, preset_for_kernel("6.12.117"), engine="python")
    d = (out.action == ACT_ISSUE) & (out.dev == stack.top.dev)
    rows = np.flatnonzero(d)
    rows = rows[np.argsort(out.time_ns[rows], kind="stable")]
    return [(int(out.sector[r]), int(out.nr_sectors[r])) for r in rows]


def test_units_of_two_threads_that_overlap_in_time_are_detected():
    s = _stream(ROWS)
    assert _units_interleave(s.pid, s.plug)
    # the same bios with task 2 after task 1's last bio: nothing interleaves
    later = sorted((r[0] + 100 if r[1] == 2 else r[0],) + r[1:] for r in ROWS)
    s2 = _stream(later)
    assert not _units_interleave(s2.pid, s2.plug)


def test_a_threads_plug_stays_open_while_another_thread_submits():
    """Task 1's plug holds its request until task 1 finishes it (after its bio at 60 ms):
    task 2's request, flushed at 50 ms, reaches the disk first."""
    assert _issued(_stream(ROWS)) == [(5000, 16), (0, 32), (1000, 8)]


def test_a_sleep_the_trace_shows_flushes_that_threads_plug_then():
    """A UT of task 1 at 35 ms: it slept with its plug holding 0..31, which went out then."""
    assert _issued(_stream(ROWS, sleeps={1: [35]})) == [(0, 32), (5000, 16), (1000, 8)]


def _table(rows):
    """rows: (time ms, action, sector) of pid 7 on one disk."""
    dev = make_dev(254, 0)
    t, act, sec = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    n = len(t)
    return EventTable.from_columns(time_ns=t * MS, dev=np.full(n, dev), action=act, sector=sec,
                                   nr_sectors=np.where(act == ACT_UNPLUG_TIMER, 0, 8),
                                   pid=np.full(n, 7), rwbs=np.full(n, RWBS_WRITE)), dev


def test_a_sleep_before_the_bios_request_exists_flushes_before_that_bio():
    """Q of 4995, UT, then its G: the task slept in rq_qos_throttle while allocating the
    request for 4995 (the plug's request was full), so 4995 starts the next plug batch; a UT
    after the bio's own merge (M) belongs after it."""
    table, dev = _table([(0, ACT_QUEUE, 0), (1, ACT_GETRQ, 0),
                         (2, ACT_QUEUE, 8), (3, ACT_UNPLUG_TIMER, 0), (4, ACT_GETRQ, 8),
                         (5, ACT_QUEUE, 16), (6, ACT_BACKMERGE, 16), (7, ACT_UNPLUG_TIMER, 0),
                         (8, ACT_QUEUE, 24), (9, ACT_GETRQ, 24)])
    q = np.flatnonzero(table.action == ACT_QUEUE)
    got = _schedule_flushes(table, q, 0)
    assert got[7].tolist() == [2 * MS - 1, 7 * MS]


def test_file_system_metadata_written_through_md_is_not_an_md_superblock_write():
    """jbd2's REQ_META writes reach the members as remapped clones (A then Q) of md0 bios:
    the replay sends those down itself. Only a member META write with no remap (md's own
    ``md_super_write``) is replayed as md metadata; before, ext4's journal writes through
    raid0 were predicted twice (the 7.3.4 capture r0_d3_c128_fs_ddw512k: 98.1% -> 98.7%)."""
    from workers.events import ACT_REMAP, RWBS_META, RWBS_SYNC
    from workers.model.own_requests import metadata_write_rows

    md, vda = make_dev(9, 0), make_dev(254, 0)
    w = RWBS_WRITE | RWBS_SYNC | RWBS_META
    rows = [(0, md, ACT_QUEUE, 1000), (1, vda, ACT_REMAP, 500), (2, vda, ACT_QUEUE, 500),
            (3, vda, ACT_GETRQ, 500), (4, vda, ACT_QUEUE, 8), (5, vda, ACT_GETRQ, 8)]
    t, dev, act, sec = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    aux = np.where(act == ACT_REMAP, 1000, 0)
    aux2 = np.where(act == ACT_REMAP, md, 0)
    table = EventTable.from_columns(time_ns=t, dev=dev, action=act, sector=sec,
                                    nr_sectors=np.full(6, 8), pid=np.full(6, 7),
                                    rwbs=np.full(6, w), aux=aux, aux2=aux2)
    assert metadata_write_rows(table, md).tolist() == [4]
    # a clone of a top bio the trace shows no Q for (7.x and some of jbd2's
    # REQ_PREFLUSH|REQ_FUA writes) stays: the replay has no input to send it down from
    no_top_q = EventTable.from_columns(time_ns=t[1:], dev=dev[1:], action=act[1:],
                                       sector=sec[1:], nr_sectors=np.full(5, 8),
                                       pid=np.full(5, 7), rwbs=np.full(5, w), aux=aux[1:],
                                       aux2=aux2[1:])
    assert metadata_write_rows(no_top_q, md).tolist() == [1, 3]


def test_an_empty_flush_reaches_every_member_with_a_write_cache():
    """An empty REQ_PREFLUSH bio on md0 (sync, umount, jbd2's blkdev_issue_flush):
    md_flush_request sends one to every member, last bound first (rdev_for_each over the
    list bind_rdev_to_array adds to at its head), and each disk with a volatile write cache
    dispatches a flush request of 0 sectors (blk_insert_flush); a write-through disk drops
    the flush before it is queued. Before, bare flushes were left out of the replay (the
    7.3.4 twin r0_d2_c256_fstrim: 94.8% -> 97.4%, its members see 16-24 flushes)."""
    from workers.events import RWBS_FLUSH, RWBS_NONE, RWBS_SYNC
    from workers.model import stack_from_manifest

    flush = RWBS_FLUSH | RWBS_WRITE | RWBS_SYNC
    stream = BioStream(time_ns=np.array([0, MS]), sector=np.array([0, 0]),
                       nr_sectors=np.array([8, 0]), rwbs=np.array([RWBS_WRITE | RWBS_SYNC, flush]),
                       pid=np.array([1, 1]), plug=np.array([0, 1]), seg_bytes=np.zeros(2, np.int64),
                       bio_pages=np.zeros(2, np.int64), depth=0)

    def flushes(limits):
        stack = stack_from_manifest({"stack": {"top": "9,0", "kind": "raid0", "chunk_kb": 64,
                                               "members": ["254,0", "254,16", "254,32"]},
                                     "limits": limits})
        out = replay(stream, stack, preset_for_kernel("7.3.4"), engine="python")
        d = np.flatnonzero((out.action == ACT_ISSUE) & (out.rwbs == RWBS_FLUSH | RWBS_NONE))
        return [int(out.dev[r]) & 0xFF for r in d], int(np.sum((out.action == ACT_ISSUE)
                                                              & (out.nr_sectors > 0)))

    assert flushes({}) == ([32, 16, 0], 1)
    through = {d: {"write_cache": "write through"} for d in ("254,0", "254,16", "254,32")}
    assert flushes(through) == ([], 1)


def test_writes_the_trace_shows_refusing_a_merge_do_not_merge_in_the_replay():
    """ext4's lazy inode-table init zeroes with REQ_OP_WRITE_ZEROES, which rq_mergeable
    refuses, but a v1 blktrace writes it as W: the trace shows each contiguous piece getting
    its own request (G) while its thread's plug holds one request of that disk ending where
    it starts. That bio and the rest of its contiguous run replay unmergeable (the 6.1.0-57
    twin r0_d3_c128_fs_ddw512k: 90.7% -> 98.5%); plain writes with an M keep merging."""
    from workers.model.replay import bios_from_table
    from workers.model.stack import stack_from_spec

    def table(merged):
        dev = make_dev(254, 0)
        rows = [(0, ACT_QUEUE, 0), (1, ACT_GETRQ, 0), (1, ACT_PLUG, 0),
                (2, ACT_QUEUE, 8), (3, ACT_BACKMERGE if merged else ACT_GETRQ, 8),
                (4, ACT_QUEUE, 16), (5, ACT_BACKMERGE if merged else ACT_GETRQ, 16),
                (6, ACT_UNPLUG_IO, 0)]
        rows += [(7, ACT_ISSUE, 0)] if merged else [(7, ACT_ISSUE, s) for s in (0, 8, 16)]
        t, act, sec = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
        n = len(t)
        size = np.where(act >= ACT_PLUG, 0, 8)
        size[act == ACT_ISSUE] = 24 if merged else 8
        return EventTable.from_columns(time_ns=t * MS, dev=np.full(n, dev), action=act,
                                       sector=sec, nr_sectors=size,
                                       pid=np.full(n, 7), rwbs=np.full(n, RWBS_WRITE)), dev

    stack = stack_from_spec("disk")
    for merged, want in ((False, [(0, 8), (8, 8), (16, 8)]), (True, [(0, 24)])):
        t, dev = table(merged)
        bios = bios_from_table(t, dev, stack=stack)
        assert bool(np.any(bios.meta.get("unmergeable", [False]))) is not merged
        out = replay(bios, stack, preset_for_kernel("6.12.117"), engine="python")
        d = np.flatnonzero(out.action == ACT_ISSUE)
        assert [(int(out.sector[r]), int(out.nr_sectors[r])) for r in d] == want
