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
