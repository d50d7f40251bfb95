"""A thread keeps its plug after its last bio until it sleeps (UT), as the trace shows.

Buffered writeback by two tasks at once (the flusher and ``sync``): ``sync`` builds a request
in its plug, then waits on a page the flusher has under writeback; its plug goes to the queue
only when it sleeps (``sched_submit_work`` -> ``blk_flush_plug(plug, true)``: UT, the request
inserted and run by kblockd), after the flusher's next requests went out. Replaying the plug's
flush right after the last bio put that request before them (7.3.4 disk_writeback_64M 94.3%:
three such tails of ``sync``'s runs; 100% with the flush at the UT).
"""

from __future__ import annotations

import numpy as np
from model_helpers import d_stream

from workers.events import (
    ACT_BACKMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
)
from workers.model import preset_for_kernel, replay
from workers.model.replay import bios_from_table
from workers.model.stack import stack_from_spec

STACK = stack_from_spec("disk")
DISK = STACK.top.dev
SYNC, FLUSHER, KBLOCKD = 264, 12, 131


def _trace() -> EventTable:
    """``sync`` queues 64 KiB (request 1000+128 in its plug) and sleeps 40 ms later; meanwhile
    the flusher writes two 1 MiB requests elsewhere, each flushed by the next (U)."""
    # P is traced when the first request enters the plug (blk_add_rq_to_plug)
    rows = [(1, SYNC, ACT_QUEUE, 1000, 8), (2, SYNC, ACT_GETRQ, 1000, 8),
            (3, SYNC, ACT_PLUG, 0, 0)]
    for k in range(1, 16):
        rows += [(3 + k, SYNC, ACT_QUEUE, 1000 + 8 * k, 8),
                 (3 + k, SYNC, ACT_BACKMERGE, 1000 + 8 * k, 8)]
    t = 100
    for r in range(2):  # the flusher: 2048 sectors a request
        base = 100_000 + 2048 * r
        rows += [(t + 1, FLUSHER, ACT_QUEUE, base, 8), (t + 2, FLUSHER, ACT_GETRQ, base, 8),
                 (t + 3, FLUSHER, ACT_PLUG, 0, 0)]
        for k in range(1, 256):
            rows += [(t + 3 + k, FLUSHER, ACT_QUEUE, base + 8 * k, 8),
                     (t + 3 + k, FLUSHER, ACT_BACKMERGE, base + 8 * k, 8)]
        rows += [(t + 300, FLUSHER, ACT_UNPLUG_IO, 0, 0),
                 (t + 301, FLUSHER, ACT_ISSUE, base, 2048)]
        t += 1000
    rows += [(40_000, SYNC, ACT_UNPLUG_TIMER, 0, 0), (40_001, SYNC, ACT_INSERT, 1000, 128),
             (40_010, KBLOCKD, ACT_ISSUE, 1000, 128)]
    rows.sort(key=lambda r: r[0])
    t_, pid, act, sec, nr = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    rwbs = np.where(pid == SYNC, RWBS_WRITE | RWBS_SYNC, RWBS_WRITE)
    table = EventTable.from_columns(time_ns=t_ * 1000, dev=np.full(len(t_), DISK), action=act,
                                    sector=sec, nr_sectors=nr, pid=pid, rwbs=rwbs)
    table.meta["format"] = "blktrace"
    return table


def test_the_plug_of_a_thread_that_slept_later_goes_out_at_its_ut():
    table = _trace()
    out = replay(bios_from_table(table, DISK), STACK, preset_for_kernel("7.3.4"),
                 engine="python")
    stream = [(s, n) for _, s, n in d_stream(out, DISK)]
    assert stream[-1] == (1000, 128)
    assert sum(n for s, n in stream[:-1] if s >= 100_000) == 2 * 2048


def test_without_the_ut_the_plug_goes_out_after_the_last_bio():
    table = _trace()
    keep = table.action != ACT_UNPLUG_TIMER
    cols = {c: getattr(table, c)[keep] for c in ("time_ns", "dev", "action", "sector",
                                                 "nr_sectors", "pid", "rwbs")}
    bare = EventTable.from_columns(**cols)
    bare.meta["format"] = "blktrace"
    out = replay(bios_from_table(bare, DISK), STACK, preset_for_kernel("7.3.4"),
                 engine="python")
    assert [(s, n) for _, s, n in d_stream(out, DISK)][0] == (1000, 128)
