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
)
from workers.model import preset_for_kernel, replay
from workers.model.replay import bios_from_table
from workers.model.stack import stack_from_spec
from workers.model.trace_plugs import kblockd_runs

STACK = stack_from_spec("raid5:disks=3,chunk=128k,scheduler=mq-deadline")
TOP = STACK.top.dev
VDA, VDB, VDC = (m.dev for m in STACK.top.members)
DD, KWORKER = 7, 99


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
    t, dev, act, sec, nr, pid = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    table = EventTable.from_columns(time_ns=t * 1000, dev=dev, action=act, sector=sec,
                                    nr_sectors=nr, pid=pid,
                                    rwbs=np.full(len(t), RWBS_READ))
    table.meta["format"] = "blktrace"
    return table


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
    # before dd's second request (G/M counted from 0): after vda's first piece
    assert runs.tolist() == [[0, 1]]
    # no D by another task before dd's last placement: nothing read
    table = _trace(False)
    assert kblockd_runs(table, q, np.full(len(q), -1, dtype=np.int64), no_plug).shape == (0, 2)


def test_a_tick_inside_the_read_dispatches_the_first_piece_alone():
    # the worker ran after vda's first piece: it went out alone, and chunk 3 (vda 256) found
    # nothing to merge with
    assert _replayed_vda(_trace(True)) == [(0, 256), (256, 256)]
