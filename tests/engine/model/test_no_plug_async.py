"""A submission with no plug at all onto an I/O scheduler: inserted, dispatched by kblockd.

``blk_mq_submit_bio`` without a plug inserts a request bound for a scheduler and runs the
hardware queue asynchronously (``blk_mq_insert_request`` + ``blk_mq_run_hw_queue(hctx, true)``);
kblockd's worker runs when the submitting thread stops, so the member pieces of one md read
merge in mq-deadline first. 6.12-6.18 wrap each bio of the bio list in ``__submit_bio``'s own
plug (P, G, U, I, D by the submitter: no merging); 7.3.4 shows no P at all (G, I by dd, D by
kworker/1:1H, merged: q1_r5_d4_c64_dd1M 18.6% -> 93.8%). The trace tells the two apart.
"""

from __future__ import annotations

import numpy as np
from model_helpers import thread_table

from workers.events import (
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_UNPLUG_IO,
    make_dev,
)
from workers.model import preset_for_kernel, replay
from workers.model.replay import BioStream
from workers.model.stack import stack_from_spec
from workers.model.trace_plugs import mark_unplugged

TOP, DISK = make_dev(9, 0), make_dev(254, 0)



def _marks(rows: list[tuple[int, int, int, int, int]]) -> tuple[list[int], list[bool]]:
    table = thread_table(rows)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == TOP))
    no_plug = np.zeros(len(q), dtype=np.bool_)
    ids = mark_unplugged(table, q, np.zeros(len(q), dtype=np.int64), no_plug)
    return ids.tolist(), no_plug.tolist()


def test_no_plug_event_at_all_is_told_from_a_plug_per_bio():
    no_p = [(0, TOP, ACT_QUEUE, 0, 512),
            (1, DISK, ACT_QUEUE, 0, 128), (2, DISK, ACT_GETRQ, 0, 128),
            (3, DISK, ACT_INSERT, 0, 128),
            (4, DISK, ACT_QUEUE, 128, 128), (5, DISK, ACT_GETRQ, 128, 128),
            (6, DISK, ACT_INSERT, 128, 128), (9, DISK, ACT_ISSUE, 0, 256)]
    assert _marks(no_p) == ([-1], [True])
    per_bio = [(0, TOP, ACT_QUEUE, 0, 512),
               (1, DISK, ACT_QUEUE, 0, 128), (2, DISK, ACT_GETRQ, 0, 128),
               (3, DISK, ACT_PLUG, 0, 0), (4, DISK, ACT_UNPLUG_IO, 0, 0),
               (5, DISK, ACT_INSERT, 0, 128), (6, DISK, ACT_ISSUE, 0, 128),
               (7, DISK, ACT_QUEUE, 128, 128), (8, DISK, ACT_GETRQ, 128, 128),
               (9, DISK, ACT_PLUG, 0, 0), (10, DISK, ACT_UNPLUG_IO, 0, 0),
               (11, DISK, ACT_INSERT, 128, 128), (12, DISK, ACT_ISSUE, 128, 128)]
    assert _marks(per_bio) == ([-1], [False])


def test_no_p_at_all_with_pieces_of_plug_flush_size():
    """7.3.4 q1_r5_d3_c128_dd512k: 128 KiB member pieces (BLK_PLUG_FLUSH_SIZE), G and I by
    dd, no P: still no plug at all. Discounting a P per G for such requests is about
    ``blk_add_rq_to_plug``'s flush of a plug, and there is none (was replayed as direct issue
    by dd, nothing merged: 50.8% -> 98.9%)."""
    rows = [(0, TOP, ACT_QUEUE, 0, 1024),
            (1, DISK, ACT_QUEUE, 0, 256), (2, DISK, ACT_GETRQ, 0, 256),
            (3, DISK, ACT_INSERT, 0, 256),
            (4, DISK, ACT_QUEUE, 512, 256), (5, DISK, ACT_GETRQ, 512, 256),
            (6, DISK, ACT_INSERT, 512, 256), (9, DISK, ACT_ISSUE, 0, 256)]
    assert _marks(rows) == ([-1], [True])


def _member_requests(no_plug: bool, scheduler: str, kernel: str = "7.3.4"
                     ) -> dict[int, list[tuple[int, int]]]:
    """Two 1 MiB reads of raid5 4 x 64k, each submitted without a task plug."""
    stack = stack_from_spec(f"raid5:disks=4,chunk=64k,scheduler={scheduler}")
    bios = BioStream.from_arrays([0, 2048], 2048, plug=[-1, -2], time_ns=[0, 10**9],
                                 comm="dd")
    if no_plug:
        bios = BioStream(**{**bios.__dict__, "meta": {"no_plug": np.array([True, True])}})
    out = replay(bios, stack, preset_for_kernel(kernel), engine="python")
    d = out.action == ACT_ISSUE
    reqs: dict[int, list[tuple[int, int]]] = {}
    for dev, sec, nr in zip(out.dev[d].tolist(), out.sector[d].tolist(),
                            out.nr_sectors[d].tolist(), strict=True):
        reqs.setdefault(dev, []).append((sec, nr))
    return reqs


def test_without_any_plug_the_scheduler_merges_the_pieces_of_a_read():
    merged = _member_requests(True, "mq-deadline")
    alone = _member_requests(False, "mq-deadline")
    # each member holds 4 or 5 chunks of a 1 MiB read, 3 of them adjacent (one stripe row
    # each, the parity chunk skipped): inserted before kblockd dispatches, they merge
    assert sum(len(v) for v in alone.values()) == 32
    assert sum(len(v) for v in merged.values()) < 20
    assert max(nr for v in merged.values() for _, nr in v) == 384
    # the same sectors are read either way
    cover = {dev: sorted(sec + i for sec, nr in v for i in range(nr))
             for dev, v in merged.items()}
    assert cover == {dev: sorted(sec + i for sec, nr in v for i in range(nr))
                     for dev, v in alone.items()}


def test_without_a_scheduler_the_request_is_issued_directly():
    # blk_mq_try_issue_directly: no insert, no kblockd, nothing to merge with
    assert sum(len(v) for v in _member_requests(True, "none").values()) == 32


def test_under_cfs_kblockd_preempts_the_submitter_at_once():
    """6.1 (CFS): the woken kblockd worker dispatches each inserted request before the
    submitter makes the next (6.1.0-57 q1_r5_d4_c64_dd1M), so nothing merges."""
    assert sum(len(v) for v in _member_requests(True, "mq-deadline", "6.1").values()) == 32
