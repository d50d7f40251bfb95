"""kblockd's worker running in the middle of a no-plug submission (7.3, one hardware queue).

Without any plug ``blk_mq_submit_bio`` inserts each member piece of an md read into
mq-deadline and leaves the dispatch to kblockd (``blk_mq_run_hw_queue(hctx, true)``); with a
single hardware queue the work is queued on the submitter's own CPU (``blk_mq_hctx_next_cpu``:
WORK_CPU_UNBOUND). The woken worker does not preempt dd at once (lazy/EEVDF wakeup), so the
pieces of a read merge, except where a scheduler tick inside the submission gives the worker
the CPU: it dispatches what was inserted by then (D by kworker/1:1H between dd's Q and G), and
the pieces inserted after it go out alone. The trace shows where
(:func:`workers.model.trace_plugs.kblockd_runs`); 7.3.4 q1_r5_d3_c128_dd512k 98.9% -> 100%,
q1_r5_d4_c64_dd1M 87.4% -> 99.9%.

Each queue goes out at its own D, in the order of the D's (7.3.4 p2_q1_r10n2_d4_c64_dd1M,
96.0% -> 100%): the worker runs one hctx's ``run_work`` after another, and where dd ran on
meanwhile on another CPU its pieces still merged into the queues the worker had not got to
yet; a run between a request's G and its I goes without that request.
"""

from __future__ import annotations

import numpy as np
from model_helpers import d_stream

from workers.events import (
    ACT_BACKMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_QUEUE,
    RWBS_READ,
    EventTable,
    dev_str,
)
from workers.model import preset_for_kernel, replay
from workers.model.replay import bios_from_table
from workers.model.stack import stack_from_spec
from workers.model.trace_plugs import kblockd_runs

STACK = stack_from_spec("raid5:disks=3,chunk=128k,scheduler=mq-deadline")
TOP = STACK.top.dev
VDA, VDB, VDC = (m.dev for m in STACK.top.members)
DD, KWORKER = 7, 99



def _table(rows: list[tuple[int, int, int, int, int, int]]) -> EventTable:
    """rows: (time in us, dev, action, sector, nr, pid), all reads."""
    t, dev, act, sec, nr, pid = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    table = EventTable.from_columns(time_ns=t * 1000, dev=dev, action=act, sector=sec,
                                    nr_sectors=nr, pid=pid,
                                    rwbs=np.full(len(t), RWBS_READ))
    table.meta["format"] = "blktrace"
    return table

def _piece(t: int, dev: int, sector: int) -> list[tuple[int, int, int, int, int, int]]:
    """dd queues a 128 KiB member piece, gets a request for it and inserts it (no P)."""
    return [(t, dev, ACT_QUEUE, sector, 256, DD), (t + 1, dev, ACT_GETRQ, sector, 256, DD),
            (t + 2, dev, ACT_INSERT, sector, 256, DD)]


def _trace(tick_after_first_piece: bool) -> EventTable:
    """One 512 KiB read of raid5 3 x 128k: chunks 0 (vda), 1 (vdb), 2 (vdc), 3 (vda, right
    after chunk 0 there). kblockd dispatches after dd's last piece, or also once after the
    first piece (``tick_after_first_piece``), as 7.3.4 q1_r5_d3_c128_dd512k's read at 16384."""
    rows = [(0, TOP, ACT_QUEUE, 0, 1024, DD)]
    rows += _piece(10, VDA, 0)
    if tick_after_first_piece:
        rows += [(15, VDA, ACT_ISSUE, 0, 256, KWORKER)]
    rows += _piece(20, VDB, 0) + _piece(30, VDC, 256)
    if tick_after_first_piece:
        rows += _piece(40, VDA, 256)
        rows += [(50, VDB, ACT_ISSUE, 0, 256, KWORKER), (51, VDC, ACT_ISSUE, 256, 256, KWORKER),
                 (52, VDA, ACT_ISSUE, 256, 256, KWORKER)]
    else:
        rows += [(40, VDA, ACT_QUEUE, 256, 256, DD), (41, VDA, ACT_BACKMERGE, 256, 256, DD)]
        rows += [(50, VDA, ACT_ISSUE, 0, 512, KWORKER), (51, VDB, ACT_ISSUE, 0, 256, KWORKER),
                 (52, VDC, ACT_ISSUE, 256, 256, KWORKER)]
    return _table(rows)


def _replayed_vda(table: EventTable) -> list[tuple[str, int, int]]:
    bios = bios_from_table(table, TOP)
    out = replay(bios, STACK, preset_for_kernel("7.3.4"), engine="python")
    return [(s, n) for _, s, n in d_stream(out, VDA)]


def test_without_a_tick_inside_the_read_its_pieces_merge():
    assert _replayed_vda(_trace(False)) == [(0, 512)]


def test_kblockd_run_read_from_a_d_by_another_task_inside_the_unit():
    table = _trace(True)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == TOP))
    no_plug = np.ones(len(q), dtype=np.bool_)
    runs = kblockd_runs(table, q, np.full(len(q), -1, dtype=np.int64), no_plug)
    # vda's queue before dd's second request (G/M counted from 0, position 2k): after vda's
    # first piece
    assert runs.tolist() == [[0, 2, VDA]]
    # no D by another task before dd's last placement: nothing read
    table = _trace(False)
    assert kblockd_runs(table, q, np.full(len(q), -1, dtype=np.int64), no_plug).shape == (0, 3)


def test_a_tick_inside_the_read_dispatches_the_first_piece_alone():
    # the worker ran after vda's first piece: it went out alone, and chunk 3 (vda 256) found
    # nothing to merge with
    assert _replayed_vda(_trace(True)) == [(0, 256), (256, 256)]


def _merge(t: int, dev: int, sector: int) -> list[tuple[int, int, int, int, int, int]]:
    """dd queues a 128 KiB member piece that back-merges into a queued request."""
    return [(t, dev, ACT_QUEUE, sector, 256, DD), (t + 1, dev, ACT_BACKMERGE, sector, 256, DD)]


def _worker_on_another_cpu() -> EventTable:
    """One 1 MiB read of raid5 3 x 128k: chunks 0-7 go to vda 0, vdb 0, vdc 256, vda 256,
    vdb 512, vdc 512, vda 768, vdb 768. dd moved to another CPU after chunk 5, and the worker
    it woke on its old CPU runs the queues in the order of their last insertion (vda, vdc,
    vdb) while dd goes on: vda's D before chunk 6, vdc's before chunk 7, vdb's after dd's last
    piece, which still merged into vdb's request (as 7.3.4 p2_q1_r10n2_d4_c64_dd1M's read at
    45056: kworker/0:0H's D on vda, vdc, vdb, vdd while dd on CPU 1 merged into vdb's and
    vdd's requests)."""
    rows = [(0, TOP, ACT_QUEUE, 0, 2048, DD)]
    rows += _piece(10, VDA, 0) + _piece(20, VDB, 0) + _piece(30, VDC, 256)
    rows += _merge(40, VDA, 256) + _piece(50, VDB, 512) + _merge(60, VDC, 512)
    rows += [(65, VDA, ACT_ISSUE, 0, 512, KWORKER)]
    rows += _piece(70, VDA, 768)
    rows += [(75, VDC, ACT_ISSUE, 256, 512, KWORKER)]
    rows += _merge(80, VDB, 768)
    rows += [(90, VDB, ACT_ISSUE, 0, 256, KWORKER), (91, VDB, ACT_ISSUE, 512, 512, KWORKER),
             (95, VDA, ACT_ISSUE, 768, 256, KWORKER)]
    return _table(rows)


def test_each_queue_is_read_at_its_own_d():
    table = _worker_on_another_cpu()
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == TOP))
    runs = kblockd_runs(table, q, np.full(len(q), -1, dtype=np.int64),
                        np.ones(len(q), dtype=np.bool_))
    # vda's run before dd's 7th outcome (chunk 6, position 2 * 6), vdc's before the 8th; vdb's
    # D came after dd's last piece: not inside the read
    assert runs.tolist() == [[0, 12, VDA], [0, 14, VDC]]


def test_a_queue_the_worker_has_not_got_to_keeps_taking_merges():
    bios = bios_from_table(_worker_on_another_cpu(), TOP)
    out = replay(bios, STACK, preset_for_kernel("7.3.4"), engine="python")
    # vda went out at its D (chunk 6 alone after it), vdc at its own with chunk 5 merged;
    # vdb was still queued when chunk 7 came and took it (running every queue at vda's D
    # sent vdb 512 out alone and left 768 on its own)
    assert [(s, n) for _, s, n in d_stream(out, VDA)] == [(0, 512), (768, 256)]
    assert [(s, n) for _, s, n in d_stream(out, VDC)] == [(256, 512)]
    assert [(s, n) for _, s, n in d_stream(out, VDB)] == [(0, 256), (512, 512)]


def _tick_between_g_and_i() -> EventTable:
    """A 768 KiB read of raid5 3 x 128k (chunks 0-5: vda 0, vdb 0, vdc 256, vda 256, vdb 512,
    vdc 512): the worker gets dd's CPU after the G of chunk 4 (vdb 512) and before its I, and
    runs vda's, vdb's and vdc's queues without that request (as 7.3.4
    p2_q1_r10n2_d4_c64_dd1M's read at 75776: G of vdd's 42880, D on vdd, vdb, vdc, vda by
    kworker/0:0H, then dd's I)."""
    rows = [(0, TOP, ACT_QUEUE, 0, 1536, DD)]
    rows += _piece(10, VDA, 0) + _piece(20, VDB, 0) + _piece(30, VDC, 256)
    rows += _merge(40, VDA, 256)
    rows += [(50, VDB, ACT_QUEUE, 512, 256, DD), (51, VDB, ACT_GETRQ, 512, 256, DD),
             (53, VDA, ACT_ISSUE, 0, 512, KWORKER), (54, VDB, ACT_ISSUE, 0, 256, KWORKER),
             (55, VDC, ACT_ISSUE, 256, 256, KWORKER), (60, VDB, ACT_INSERT, 512, 256, DD)]
    rows += _piece(70, VDC, 512)
    rows += [(80, VDB, ACT_ISSUE, 512, 256, KWORKER), (81, VDC, ACT_ISSUE, 512, 256, KWORKER)]
    return _table(rows)


def test_a_tick_between_a_requests_g_and_its_i_runs_the_queues_without_it():
    table = _tick_between_g_and_i()
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == TOP))
    runs = kblockd_runs(table, q, np.full(len(q), -1, dtype=np.int64),
                        np.ones(len(q), dtype=np.bool_))
    # after the G of dd's 5th outcome (k = 4): position 2 * 4 + 1, in the D's order
    assert runs.tolist() == [[0, 9, VDA], [0, 9, VDB], [0, 9, VDC]]
    out = replay(bios_from_table(table, TOP), STACK, preset_for_kernel("7.3.4"), engine="python")
    # vdb 512 is inserted after the worker's run: it goes out with vdc 512 once dd is done
    # (read before the next G instead, the run took it with vdb 0)
    assert [(d, s, n) for d, s, n in d_stream(out)] == [
        (dev_str(VDA), 0, 512), (dev_str(VDB), 0, 256), (dev_str(VDC), 256, 256),
        (dev_str(VDB), 512, 256), (dev_str(VDC), 512, 256)]
