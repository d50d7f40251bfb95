"""md_update_sb's superblock writes: member after member (CFS) or side by side (EEVDF).

``md_update_sb`` loops over the members calling ``md_super_write`` (REQ_PREFLUSH | REQ_FUA |
REQ_META), then sleeps in ``md_super_wait``. On a write-back member without FUA each write is
a flush sequence (``blk_insert_flush``: pre-flush, data, post-flush) driven by kblockd's
high-priority worker (``blk_kick_flush`` -> ``blk_mq_kick_requeue_list``). Under CFS (<= 6.5)
``check_preempt_wakeup`` lets that nice -20 worker preempt md's thread as soon as it is woken,
so the first member's sequence runs before md submits the second member's write (6.1.192
r1_d2_ddw1M: vdb F W F, then vda F W F). Under EEVDF (v6.6, RUN_TO_PARITY) md's thread keeps
the CPU until it sleeps, so both writes are queued first and the sequences run stage by stage
(6.18.15 r1_d2_ddw1M: F vdb, F vda, W vdb, W vda, F vdb, F vda).
"""

from __future__ import annotations

import numpy as np

from workers.events import ACT_ISSUE, RWBS_FLUSH, RWBS_FUA, RWBS_META, RWBS_SYNC, RWBS_WRITE
from workers.model import BioStream, preset_for_kernel, stack_from_spec
from workers.model.replay import md_metadata_rows

SB = RWBS_WRITE | RWBS_SYNC | RWBS_META | RWBS_FLUSH | RWBS_FUA


def _dispatches(sched: str) -> list[tuple[int, int, int]]:
    stack = stack_from_spec("raid1:disks=2,write_cache=write back,fua=0")
    a, b = (m.dev for m in stack.top.members)
    # one update (both members' superblocks at sector 8), then the write it was waiting for
    meta = np.array([[10, 11], [b, a], [8, 8], [1, 1], [SB, SB]], dtype=np.int64)
    bios = BioStream.from_arrays([0], [2048], rwbs=RWBS_WRITE, time_ns=[20])
    rows = md_metadata_rows(meta, bios, stack, np.zeros((9, 0), np.int64), sched)
    d = rows[3] == ACT_ISSUE
    return list(zip(rows[1][d].tolist(), rows[5][d].tolist(), rows[6][d].tolist(), strict=True))


def test_cfs_runs_each_members_flush_sequence_before_the_next_member():
    stack = stack_from_spec("raid1:disks=2")
    a, b = (m.dev for m in stack.top.members)
    assert _dispatches("cfs") == [(b, 0, 0), (b, 8, 1), (b, 0, 0),
                                  (a, 0, 0), (a, 8, 1), (a, 0, 0)]


def test_eevdf_runs_the_members_sequences_side_by_side():
    stack = stack_from_spec("raid1:disks=2")
    a, b = (m.dev for m in stack.top.members)
    assert _dispatches("eevdf") == [(b, 0, 0), (a, 0, 0), (b, 8, 1), (a, 8, 1),
                                    (b, 0, 0), (a, 0, 0)]


def test_change_point_is_eevdf_in_6_6():
    assert preset_for_kernel("6.1.0-57-amd64").sched_wakeup == "cfs"
    assert preset_for_kernel("6.5.13").sched_wakeup == "cfs"
    assert preset_for_kernel("6.6.0").sched_wakeup == "eevdf"
    assert preset_for_kernel("7.3.4").sched_wakeup == "eevdf"


def _update_times(rwbs: int) -> list[tuple[int, int, int]]:
    """One top bio at 100 ns, then two updates the trace shows after it with no top bio between
    (the one that marks the array dirty, at 150 ns, and the one that marks it clean again
    after safe_mode_delay, at 9000 ns); the prediction's own rows end at 400 ns."""
    stack = stack_from_spec("raid10:disks=2,chunk=64k,layout=n2,write_cache=write back,fua=0")
    a, b = (m.dev for m in stack.top.members)
    meta = np.array([[150, 160, 9000, 9010], [b, a, b, a], [8, 8, 8, 8], [1, 1, 1, 1],
                     [SB, SB, SB, SB]], dtype=np.int64)
    bios = BioStream.from_arrays([0], [262144], rwbs=rwbs, time_ns=[100])
    cols = np.array([[100, 120, 400]], dtype=np.int64)
    rows = md_metadata_rows(meta, bios, stack, cols, "cfs")
    d = (rows[3] == ACT_ISSUE) & (rows[6] == 1)
    return list(zip(rows[0][d].tolist(), rows[1][d].tolist(), rows[5][d].tolist(), strict=True))


def test_a_discard_waits_for_the_update_that_marks_the_array_dirty():
    # md_write_start runs for a discard too (op_is_write(REQ_OP_DISCARD)): the first update
    # goes before the discard's own rows (at its Q), the second after every predicted row
    # and not before its traced time (safe_mode_delay after the last write ended)
    from workers.events import RWBS_DISCARD
    stack = stack_from_spec("raid10:disks=2,chunk=64k,layout=n2")
    a, b = (m.dev for m in stack.top.members)
    assert _update_times(RWBS_DISCARD | RWBS_SYNC) == [(100, b, 8), (100, a, 8),
                                                       (9000, b, 8), (9000, a, 8)]
    # and a write the same way
    assert _update_times(RWBS_WRITE | RWBS_SYNC) == [(100, b, 8), (100, a, 8),
                                                     (9000, b, 8), (9000, a, 8)]


def test_updates_follow_the_predictions_clock():
    """A synchronous replay (depth 1) runs on the model's clock: when it runs behind the
    trace's (blkdiscard's libblkid probe reads, each served later than under the trace), the
    update that marks the array dirty still goes right before the discard it blocks
    (md_write_start inside that bio's submission), where the prediction queues it, not at the
    discard's traced Q among the predicted reads; the one that marks it clean again keeps its
    distance to the bios before it (safe_mode_delay) on that clock too."""
    from workers.events import RWBS_DISCARD, RWBS_READ
    stack = stack_from_spec("raid10:disks=2,chunk=64k,layout=n2,write_cache=write back,fua=0")
    a, b = (m.dev for m in stack.top.members)
    ms = 1_000_000
    # traced: a read at 10 ms, the discard at 50 ms, the updates at 50.1 and 600 ms
    meta = np.array([[50 * ms + 100, 50 * ms + 200, 600 * ms, 600 * ms + 100], [b, a, b, a],
                     [8, 8, 8, 8], [1, 1, 1, 1], [SB, SB, SB, SB]], dtype=np.int64)
    bios = BioStream.from_arrays([0, 0], [8, 262144], rwbs=[RWBS_READ, RWBS_DISCARD],
                                 time_ns=[10 * ms, 50 * ms])
    # predicted: the read queued at 60 ms and issued at 61 ms, the discard queued at 100 ms
    top_q = np.array([60 * ms, 100 * ms], dtype=np.int64)
    cols = np.array([[60 * ms, 61 * ms, 65 * ms, 100 * ms, 101 * ms, 130 * ms]], np.int64)
    rows = md_metadata_rows(meta, bios, stack, cols, "eevdf", top_q)
    d = (rows[3] == ACT_ISSUE) & (rows[6] == 1)
    assert sorted(set(rows[0][d].tolist())) == [100 * ms, 650 * ms]


# --- the order kblockd was asked for each step (blk_mq_kick_requeue_list) ------------------

US = 1000
#: 6.1 r10n2_d4_c64_blkdiscard's first update (the one that marks the array dirty before the
#: discard goes on), per member in md's order (rdev_for_each: vdd, vdc, vdb, vda): when the
#: write was inserted (its G), its pre-flush completed, its data completed (trace, us)
KICKS_61 = {"d": (187342, 187905, 188415), "c": (189589, 190800, 195348),
            "b": (194004, 194794, 195402), "a": (194206, 194897, 195422)}


def _kicked(sched: str) -> tuple[list[tuple[str, int]], list[int]]:
    stack = stack_from_spec("raid10:disks=4,chunk=64k,layout=n2,write_cache=write back,fua=0")
    name = {m.dev: n for m, n in zip(stack.top.members, "abcd", strict=True)}
    dev = {n: d for d, n in name.items()}
    order = "dcba"
    # md_meta's time is each write's data dispatch (dispatch_time_of)
    data_d = {"d": 188211, "c": 193811, "b": 195029, "a": 195065}
    meta = np.array([[data_d[n] * US for n in order], [dev[n] for n in order],
                     [8] * 4, [1] * 4, [SB] * 4], dtype=np.int64)
    kicks = np.array([[KICKS_61[n][k] * US for n in order] for k in range(3)], np.int64)
    from workers.events import RWBS_DISCARD
    bios = BioStream.from_arrays([0], [262144], rwbs=RWBS_DISCARD | RWBS_SYNC,
                                 time_ns=[184856 * US])
    rows = md_metadata_rows(meta, bios, stack, np.zeros((9, 0), np.int64), sched,
                            kicks=kicks)
    d = rows[3] == ACT_ISSUE
    return ([(name[int(v)], int(s)) for v, s in zip(rows[1][d], rows[6][d], strict=True)],
            sorted(set(rows[0].tolist())))


def test_cfs_steps_go_in_the_order_kblockd_was_kicked():
    """6.1 (CFS): md's thread gets the CPU back only once kblockd's worker is idle, at the
    trace's insertions; each member's next step goes when its last one completed
    (flush_end_io / mq_flush_data_end_io kick the queue's requeue_work), and the worker runs
    the kicked works in order. vdd's flush and data completed before md inserted vdc's
    write, vdc's pre-flush before vdb's: the trace's dispatch order, which neither 'member
    after member' nor 'stage by stage' gives."""
    got, times = _kicked("cfs")
    assert got == [("d", 0), ("d", 1), ("d", 0), ("c", 0), ("c", 1), ("b", 0), ("a", 0),
                   ("b", 1), ("a", 1), ("c", 0), ("b", 0), ("a", 0)]
    assert times == [184856 * US]  # where the update goes is unchanged: the discard's Q


def test_eevdf_inserts_every_members_write_before_kblockd_runs():
    """EEVDF: md's thread keeps the CPU until md_super_wait, so every pre-flush is queued
    before the worker runs; the later steps still go as their completions came."""
    got, _ = _kicked("eevdf")
    assert got == [("d", 0), ("c", 0), ("b", 0), ("a", 0), ("d", 1), ("d", 0), ("c", 1),
                   ("b", 1), ("a", 1), ("c", 0), ("b", 0), ("a", 0)]


def test_flush_kick_times_reads_insertion_and_completions():
    """The insertion is the write's G (blk_insert_flush runs on the request), the pre-flush's
    completion the last flush C on the member before the data's D, the data's its C."""
    from workers.events import ACT_COMPLETE, ACT_GETRQ, ACT_QUEUE, RWBS_NONE, EventTable
    from workers.model.own_requests import flush_kick_times
    vdd, vdc = 254 << 20 | 48, 254 << 20 | 32
    fn = RWBS_FLUSH | RWBS_NONE
    wsm = RWBS_WRITE | RWBS_SYNC | RWBS_META
    ev = [  # time, dev, action, rwbs, sector, nr
        (100, vdd, ACT_QUEUE, SB, 8, 1), (110, vdd, ACT_GETRQ, SB, 8, 1),
        (120, vdd, ACT_ISSUE, fn, 0, 0),
        (130, vdc, ACT_COMPLETE, fn, 0, 0),  # another member's flush
        (150, vdd, ACT_COMPLETE, fn, 0, 0),
        (160, vdd, ACT_ISSUE, wsm, 8, 1), (170, vdd, ACT_COMPLETE, wsm, 8, 1),
        (180, vdd, ACT_ISSUE, fn, 0, 0), (200, vdd, ACT_COMPLETE, fn, 0, 0),
        (201, vdd, ACT_COMPLETE, wsm, 8, 0),  # the request's own end, no data
    ]
    t, dev, act, rw, sec, nr = (list(c) for c in zip(*ev, strict=True))
    table = EventTable.from_columns(time_ns=t, dev=dev, action=act, rwbs=rw, sector=sec,
                                    nr_sectors=nr)
    assert flush_kick_times(table, np.array([0])).tolist() == [[110], [150], [170]]
