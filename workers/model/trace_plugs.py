"""Plug boundaries read from a trace: which queued bios one thread submitted under one plug.

A unit of the replay (:mod:`workers.model.replay`) is the bios one thread submits under one
plug (kernel-model.md section 7, "Plug boundaries"). The trace says where the kernel's plugs
began and ended: P/U events (``trace_block_plug`` / ``trace_block_unplug`` from
``blk_add_rq_to_plug`` and ``blk_mq_flush_plug_list``), md's own U/UT (``raid5_unplug``), the
issue state of the requests (a plug per bio from ``__submit_bio``), no P at all (no plug:
``blk_mq_submit_bio`` inserts and leaves dispatch to kblockd), and writes that refused every
merge a plug would try (REQ_OP_WRITE_ZEROES traced as W). Without such events the workload's
own batching (``plugs_from_workload``) is the evidence.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit, types
from numba.typed import Dict

from workers.errors import ModelConfigError
from workers.events import (
    ACT_BACKMERGE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_SPLIT,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_WRITE,
    EventTable,
)
from workers.model.policy import parse_size
from workers.model.stack import Stack

#: BLK_PLUG_FLUSH_SIZE (128 KiB) in sectors: blk_add_rq_to_plug flushes a plug whose last
#: request is at least this big.
_PLUG_FLUSH_SECTORS = 256

#: Trace formats that record every ``trace_block_plug`` (P): where they show none for a unit of
#: bios, the kernel submitted them without a plug.
_PLUG_RECORDING_FORMATS = frozenset({"blktrace", "blkparse"})


def queue_batch_unplugs(table: EventTable, q_rows: npt.NDArray[np.intp], top_dev: int,
                        t0: int) -> dict[int, dict[int, npt.NDArray[np.int64]]]:
    """Per thread that queues bios on ``top_dev``, and per queue below it: the times (ns since
    ``t0``) of its explicit U events there, ascending.

    ``blk_mq_flush_plug_list`` hands a plug holding several queues' requests over queue by
    queue (``blk_mq_dispatch_plug_list``), tracing ``trace_block_unplug(q, depth,
    !from_schedule)`` for each batch: an explicit U (not UT) on a member is when the flushing
    thread got to that member (:meth:`workers.model.submit.Engine.traced_batch_time`). A
    member's U from another task (raid5d's, kblockd's) is not the submitting thread's and is
    left out, as are U on the top device (md's own ``raid5_unplug``).
    """
    out: dict[int, dict[int, npt.NDArray[np.int64]]] = {}
    if not len(q_rows):
        return out
    u = (table.action == ACT_UNPLUG_IO) & (table.dev != top_dev)
    if not bool(np.any(u)):
        return out
    tm = table.time_ns.astype(np.int64)
    for p in np.unique(table.pid[q_rows]).tolist():
        mine = u & (table.pid == p)
        for d in np.unique(table.dev[mine]).tolist():
            out.setdefault(int(p), {})[int(d)] = np.sort(tm[mine & (table.dev == d)]) - t0
    return out


def mark_unplugged(table: EventTable, q_rows: npt.NDArray[np.intp],
                    plug: npt.NDArray[np.int64],
                    no_plug: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.int64]:
    """Give the units submitted without a plug negative plug ids.

    A task plug records P (``trace_block_plug``, from ``blk_add_rq_to_plug`` when the first
    request enters it). Synchronous direct I/O of at most ``BIO_MAX_VECS`` pages
    (``__blkdev_direct_IO_simple``: dd bs<=1M, fio psync) and async direct I/O outside
    ``io_submit``'s plug submit with none, so their requests are issued one by one and never
    merge in a plug. A unit (one thread's bios under one plug id) with G events but no P of its
    thread before the thread's next unit was such a submission. So was a unit with a P for
    every G (more than one): ``__submit_bio`` wraps each bio it takes from the bio list in a
    plug of its own when the task holds none, finished before the next bio, so no two requests
    share it (6.18's dd through md raid0: P, G, U 1, D per chunk piece); counted on the
    requests of the devices below a stacked top only (a disk's own writeback shows a P per
    request for other reasons). Applied only where
    the trace records P at all (blktrace, blkparse, or any P present).

    ``no_plug`` (optional, one flag per Q row) is set for the rows of units with requests (G)
    and no P at all: no plug of any kind, not even ``__submit_bio``'s (which 6.12-6.18 show
    around each bio and 7.3 does not), so ``blk_mq_submit_bio`` inserts a request bound for an
    I/O scheduler and leaves the dispatch to kblockd
    (:meth:`workers.model.submit.Engine.insert_async`).
    """
    act = table.action
    is_p = act == ACT_PLUG
    if not (bool(np.any(is_p)) or table.meta.get("format") in _PLUG_RECORDING_FORMATS):
        return plug
    n = len(q_rows)
    if n == 0:
        return plug
    pid_q = table.pid[q_rows].astype(np.int64)
    t_q = table.time_ns[q_rows].astype(np.int64)
    t_p = table.time_ns[is_p].astype(np.int64)
    pid_p = table.pid[is_p].astype(np.int64)
    # only requests below a stacked top device: the bios md/dm put on the bio list
    is_g = (act == ACT_GETRQ) & (table.dev != table.dev[q_rows[0]]) if len(q_rows) else \
        np.zeros(len(act), dtype=np.bool_)
    is_u = ((act == ACT_UNPLUG_IO) | (act == ACT_UNPLUG_TIMER)) & \
        (table.dev != table.dev[q_rows[0]])
    t_u = table.time_ns[is_u].astype(np.int64)
    pid_u = table.pid[is_u].astype(np.int64)
    t_g = table.time_ns[is_g].astype(np.int64)
    pid_g = table.pid[is_g].astype(np.int64)
    nr_g = table.nr_sectors[is_g].astype(np.int64)
    out = plug.copy()
    for p in np.unique(pid_q):
        mine = np.flatnonzero(pid_q == p)
        ids = plug[mine]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], len(mine)]
        pt = np.sort(t_p[pid_p == p])
        t0 = t_q[mine[starts]]
        t1 = np.r_[t_q[mine[starts[1:]]], np.iinfo(np.int64).max]
        n_p = np.searchsorted(pt, t1, side="left") - np.searchsorted(pt, t0, side="left")
        mine_g = pid_g == p
        go = np.argsort(t_g[mine_g], kind="stable")
        gt = t_g[mine_g][go]
        big = np.r_[0, np.cumsum(nr_g[mine_g][go] >= _PLUG_FLUSH_SECTORS)]
        g0 = np.searchsorted(gt, t0, side="left")
        g1 = np.searchsorted(gt, t1, side="left")
        n_g = g1 - g0
        # requests of any size: with no P at all there is no plug, and the discount below
        # (a big request's flush-on-add) does not apply to "no plug" (7.3.4's 128 KiB pieces)
        any_g = n_g > 0
        # a P per G also follows from blk_add_rq_to_plug's flush after a request of
        # BLK_PLUG_FLUSH_SIZE or more: units with such requests say "a plug per bio" only
        # when every request's plug was finished (U) before the next request was allocated
        # (G): blk_add_rq_to_plug flushes the big one only when the next is added, after its
        # G, and the next bio could have merged into it meanwhile
        ut = np.sort(t_u[pid_u == p])
        between = np.r_[np.searchsorted(ut, gt[1:], side="left")
                        > np.searchsorted(ut, gt[:-1], side="right"), False] \
            if len(gt) else np.zeros(0, dtype=np.bool_)
        nb = np.r_[0, np.cumsum(~between)]  # G not followed by a U before the next G
        unplugged_each = (nb[np.maximum(g1 - 1, g0)] - nb[g0]) == 0
        n_g = np.where((big[g1] - big[g0] > 0) & ~unplugged_each, 0, n_g)
        # a plug per request (one P for every G): __submit_bio's own plug around each bio
        # (or split piece) it takes from the bio list, finished before the next one, when the
        # task holds none; each request leaves alone, as without a plug
        alone = (n_p == 0) | ((n_g > 1) & (n_p >= n_g))
        for k in np.flatnonzero(alone):
            out[mine[starts[k]:ends[k]]] = -1 - int(ids[starts[k]])
            if no_plug is not None and n_p[k] == 0 and any_g[k]:
                no_plug[mine[starts[k]:ends[k]]] = True
    return out


def kblockd_runs(table: EventTable, q_rows: npt.NDArray[np.intp], plug: npt.NDArray[np.int64],
                 no_plug: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Where kblockd's worker ran a queue while a thread was still submitting without a plug.

    With no plug at all ``blk_mq_submit_bio`` inserts each request and queues the hardware
    queue's run on kblockd (``blk_mq_run_hw_queue(hctx, true)``; a single hardware queue queues
    it WORK_CPU_UNBOUND, on the submitter's own CPU: ``blk_mq_hctx_next_cpu``). The woken
    worker is a fair task and does not preempt the submitter at the wakeup (EEVDF's
    RUN_TO_PARITY / ``protect_slice``; **inferred** for 7.3: the lazy preemption model, whose
    ``resched_curr_lazy`` only becomes a real resched in ``sched_tick``), but a scheduler tick
    inside the submission can give it the CPU (HZ=250: every 4 ms; one read's pieces take
    ~0.7 ms); it dispatches what was inserted by then, and the pieces inserted after it no
    longer merge with those. When the tick falls is not modelled; the trace shows where it
    fell: a D by another task (kworker/1:1H on dd's CPU) on a device the unit's thread put
    requests on (G) or merged into (M), after the unit's first Q and before the thread's last
    G/M of the unit (7.3.4 q1_r5_d3_c128_dd512k: between dd's Q and G of a member piece).

    Each queue is read at its own D. The worker runs one work item at a time: every hctx has
    its own ``run_work`` (``blk_mq_run_work_fn``), and ``process_scheduled_works`` takes them
    off the pool's worklist one after another, each dispatching its queue
    (``blk_mq_run_hw_queue`` -> ``blk_mq_sched_dispatch_requests`` -> ``dd_dispatch_request``,
    which takes the request out of mq-deadline's sort tree and merge hash). Where the worker
    preempted the submitter on its CPU, all its D's fall between the same two G/M of the
    thread; where the submitter ran on meanwhile on another CPU (the scheduler moved dd off
    the CPU whose worker it woke: 7.3.4 p2_q1_r10n2_d4_c64_dd1M, dd on CPU 1 from 27264 on,
    kworker/0:0H running vda's, vdc's, vdb's and vdd's works on CPU 0), the thread's pieces
    still merge (``dd_bio_merge``) into a queue's request until that queue's own work has
    dispatched it, so a queue whose D comes after the thread's last G/M was not run inside
    the unit at all.

    The tick can also fall inside ``blk_mq_submit_bio`` between the request's allocation (G)
    and its insertion (I, ``blk_mq_insert_request``): the worker then runs the queues without
    that request, which the thread inserts after it (7.3.4 p2_q1_r10n2_d4_c64_dd1M's read at
    75776: G of vdd's 42880, kworker/0:0H's D on vdd, vdb, vdc and vda, then dd's I of it).

    Returns rows ``[i, pos, dev]``: at position ``pos`` of the unit whose first bio is ``i``
    (an index into ``q_rows``) kblockd runs ``dev``'s queue if it was left to it: ``pos`` =
    2k before the ``k``-th request-level outcome (G or M, counted from 0, on any blk-mq
    device; :meth:`workers.model.submit.Engine.preempted_by_kblockd`), 2k + 1 between the
    ``k``-th outcome's G and its I (:meth:`workers.model.submit.Engine.insert_async`); the
    queues of one position in the order of their first D there. That is the order the worker ran them, which the
    order of their works on the worklist (the last insertion's, ``mod_delayed_work_on``
    re-queueing a pending work at the tail) does not always give: a work the worker had
    already taken off the list when the thread inserted again is queued anew, but the run
    under way dispatches the new request too (7.3.4 p2_q1_r10n2_d4_c64_dd1M's first read:
    dd inserted vda, vdc, vdb, vdd, vda again, and kworker/1:1H dispatched vda's two
    requests first). Only for units flagged in ``no_plug``; empty without timestamps.
    """
    out: list[tuple[int, int, int]] = []
    n = len(q_rows)
    if n == 0 or not table.time_known or not bool(np.any(no_plug)):
        return np.zeros((0, 3), dtype=np.int64)
    act = table.action
    tm = table.time_ns.astype(np.int64)
    mq_devs = np.unique(table.dev[act == ACT_GETRQ])
    on_mq = np.isin(table.dev, mq_devs)
    placed = on_mq & ((act == ACT_GETRQ) | (act == ACT_BACKMERGE) | (act == ACT_FRONTMERGE))
    issued = on_mq & (act == ACT_ISSUE)
    inserted = on_mq & (act == ACT_INSERT)
    pid_q = table.pid[q_rows].astype(np.int64)
    t_q = tm[q_rows]
    for p in np.unique(pid_q[no_plug]).tolist():
        mine = np.flatnonzero(pid_q == p)
        ids = plug[mine]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], len(mine)]
        prow = np.flatnonzero(placed & (table.pid == p))
        prow = prow[np.argsort(tm[prow], kind="stable")]
        pt = tm[prow]
        # each G's window until its request's I (blk_mq_insert_request): the thread's next I
        # of that device and sector; a merge (or a G with no I) has none
        ins: dict[tuple[int, int], list[int]] = {}
        for r in np.flatnonzero(inserted & (table.pid == p)).tolist():
            ins.setdefault((int(table.dev[r]), int(table.sector[r])), []).append(int(tm[r]))
        p_end = pt.copy()
        for j, r in enumerate(prow.tolist()):
            if act[r] == ACT_GETRQ:
                later = [x for x in ins.get((int(table.dev[r]), int(table.sector[r])), ())
                         if x >= pt[j]]
                if later:
                    p_end[j] = min(later)
        others = issued & (table.pid != p)
        dt = tm[others]
        ddev = table.dev[others]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            i = int(mine[a])
            if not no_plug[i]:
                continue
            t0 = int(t_q[i])
            t1 = int(t_q[mine[b]]) if b < len(mine) else np.iinfo(np.int64).max
            lo, hi = np.searchsorted(pt, [t0, t1], side="left")
            if hi <= lo:
                continue
            last = int(p_end[hi - 1])
            sel = (dt > t0) & (dt < last)
            if not bool(np.any(sel)):
                continue
            # only queues this thread's unit put requests on
            devs = np.unique(table.dev[prow[lo:hi]])
            sel &= np.isin(ddev, devs)
            # each queue at its own D: the number k of the thread's G/M before it (position
            # 2k), or 2k - 1 where it fell between the (k-1)-th G and that request's I; at one
            # position in the order of their first D there (the order the worker ran them)
            ks = np.searchsorted(pt, dt[sel], side="left") - lo
            first: dict[tuple[int, int], int] = {}
            for k, d, td in zip(ks.tolist(), ddev[sel].tolist(), dt[sel].tolist(), strict=True):
                pos = 2 * k - 1 if k > 0 and td < p_end[lo + k - 1] else 2 * k
                first.setdefault((pos, int(d)), int(td))
            runs = sorted(first, key=lambda kd: (kd[0], first[kd]))
            out.extend((i, k, d) for k, d in runs)
    return np.array(out, dtype=np.int64).reshape(-1, 3)


def plugs_from_md_unplugs(table: EventTable, q_rows: npt.NDArray[np.intp], top_dev: int
                           ) -> npt.NDArray[np.int64] | None:
    """Plug ids of a bio-based top from its own U/UT events, or None where it has none.

    md raid4/5/6 holds the stripe_heads a thread's bios touched on that thread's plug
    (``release_stripe_plug`` -> ``blk_check_plugged(raid5_unplug, ...)``) and releases them
    when the plug is finished or the thread sleeps: ``raid5_unplug`` records
    ``trace_block_unplug(mddev->queue, cnt, !from_schedule)``, a U or UT on the md device
    itself. So on a top with no requests of its own (no G: md, dm), the bios a thread queued
    (Q) between two of its U/UT events there shared one plug: a buffered writer's flusher
    holds one across many pages (``wb_writeback`` -> ``blkdev_writepages``), and the rows its
    pages fill are handled together. The top's G/D-based issue state says nothing here (its
    requests are raid5d's, on the members).
    """
    act = table.action
    on_top = table.dev == top_dev
    if bool(np.any(on_top & (act == ACT_GETRQ))):
        return None
    is_u = on_top & ((act == ACT_UNPLUG_IO) | (act == ACT_UNPLUG_TIMER))
    if not bool(np.any(is_u)):
        return None
    n = len(q_rows)
    plug = np.zeros(n, dtype=np.int64)
    pid_q = table.pid[q_rows].astype(np.int64)
    u_rows = np.flatnonzero(is_u)
    pid_u = table.pid[u_rows].astype(np.int64)
    next_id = 0
    for p in np.unique(pid_q):
        mine = np.flatnonzero(pid_q == p)
        # rows are in time order: a Q's plug is the number of its thread's U/UT before it
        k = np.searchsorted(u_rows[pid_u == p], q_rows[mine], side="left")
        _, ids = np.unique(k, return_inverse=True)
        plug[mine] = next_id + ids
        next_id += int(ids.max()) + 1
    return plug


def plugs_from_issue_state(table: EventTable, q_rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """Plug ids from G/I/D bookkeeping (see :func:`bios_from_table`).

    A request leaves its thread's plug when it is dispatched (D) or inserted (I); G puts it in.
    U events are not used: 7.2 traces the flush-on-add of ``blk_add_rq_to_plug`` as U too, after
    the G of the request that stays plugged. A D or I that starts at no outstanding G's sector
    (a front merge, ``bio_attempt_front_merge``) releases every request of that device it covers.
    Compiled with numba: one pass over the table.
    """
    act = table.action
    interesting = np.flatnonzero((act == ACT_GETRQ) | (act == ACT_ISSUE) | (act == ACT_QUEUE) |
                                 (act == ACT_INSERT))
    is_top_q = np.zeros(len(table), dtype=np.bool_)
    is_top_q[q_rows] = True
    plug: npt.NDArray[np.int64] = _issue_state_kernel(
        interesting.astype(np.int64), act.astype(np.int64),
        table.dev.astype(np.int64), table.sector.astype(np.int64),
        table.nr_sectors.astype(np.int64), table.pid.astype(np.int64), is_top_q, len(q_rows))
    return plug


_KEY2 = types.UniTuple(types.int64, 2)
_KEY3 = types.UniTuple(types.int64, 3)
_I64 = types.int64

#: max_sectors when the manifest gives none (BLK_DEF_MAX_SECTORS_CAP, 1280 KiB).
_DEFAULT_MAX_SECTORS = 2560
#: max_segments when the manifest gives none (BLK_MAX_SEGMENTS).
_DEFAULT_MAX_SEGMENTS = 128


def unmergeable_writes(table: EventTable, q_rows: npt.NDArray[np.intp], top_dev: int,
                        stack: Stack | None) -> npt.NDArray[np.bool_]:
    """Per top Q: a write whose op the trace shows never merges (REQ_OP_WRITE_ZEROES).

    ``rq_mergeable`` refuses REQ_OP_WRITE_ZEROES (and flush, zone append) outright, but a
    blktrace of a v1 kernel writes a write-zeroes bio as a plain W (``__blk_add_trace`` maps
    every op that writes to BLK_TC_WRITE). The trace still shows it: a piece that gets a
    request of its own (G) while its thread's plug holds exactly one request of that device,
    ending where the piece starts, neither a split front (REQ_NOMERGE) nor a preflush or FUA
    write (REQ_NOMERGE_FLAGS), and with room under ``max_sectors`` and for as many pages as
    ``max_segments`` (a segment holds a page at least), on a queue that allows merges, was
    refused a merge that every ``blk_attempt_plug_merge`` variant tries
    (the tail request, or with several queues the first of this queue: with one request of
    the queue in the plug, it is that one). ext4's lazy inode-table init
    (``ext4_init_inode_table`` -> ``sb_issue_zeroout`` -> ``__blkdev_issue_write_zeroes``)
    shows it on every member of an md array. Such a top bio, every piece of it, and the rest
    of its thread's contiguous run of bios of the same flags (one zeroout call's chain) are
    replayed as unmergeable.
    """
    n = len(q_rows)
    out = np.zeros(n, dtype=np.bool_)
    act = table.action
    rel = np.flatnonzero((act == ACT_GETRQ) | (act == ACT_BACKMERGE) | (act == ACT_FRONTMERGE)
                         | (act == ACT_INSERT) | (act == ACT_ISSUE) | (act == ACT_SPLIT))
    if n == 0 or not bool(np.any(act[rel] == ACT_GETRQ)):
        return out
    devs = np.unique(table.dev[rel])
    # what a merge may reach for sure: max_sectors, and max_segments pages (a segment holds
    # at least a page, so no more pages than segments can overflow them); nomerges: none
    cap = np.full(len(devs), min(_DEFAULT_MAX_SECTORS, _DEFAULT_MAX_SEGMENTS * 8),
                  dtype=np.int64)
    if stack is not None:
        nodes = stack.by_dev()
        for k, d in enumerate(devs.tolist()):
            node = nodes.get(int(d))
            lim = node.limits if node is not None else {}
            try:
                sectors = int(lim.get("max_sectors_kb", _DEFAULT_MAX_SECTORS // 2)) * 2
                pages = int(lim.get("max_segments", _DEFAULT_MAX_SEGMENTS)) * 8
                cap[k] = 0 if int(lim.get("nomerges", 0) or 0) else min(sectors, pages)
            except (TypeError, ValueError):
                pass
    dev_cap = cap[np.searchsorted(devs, table.dev[rel])]
    # REQ_NOMERGE_FLAGS: a preflush or FUA request never merges, whatever its op
    write = ((table.rwbs[rel] & RWBS_WRITE) != 0) & \
        ((table.rwbs[rel] & (RWBS_FLUSH | RWBS_FUA)) == 0)
    refused = _refused_merges(act[rel].astype(np.int64), table.dev[rel].astype(np.int64),
                              table.sector[rel].astype(np.int64),
                              table.nr_sectors[rel].astype(np.int64),
                              table.pid[rel].astype(np.int64), write, dev_cap)
    if not bool(np.any(refused)):
        return out
    # each refused piece back to its top bio: its own sector on the top device, else the
    # array sector its remap (A) came from
    g = rel[refused]
    src = table.sector[g].astype(np.int64)
    below = table.dev[g] != top_dev
    if bool(np.any(below)):
        a = np.flatnonzero((act == ACT_REMAP) & (table.aux2 == top_dev))
        akey = table.dev[a].astype(np.int64) * (1 << 44) + table.sector[a].astype(np.int64)
        order = np.argsort(akey, kind="stable")
        akey = akey[order]
        gkey = table.dev[g].astype(np.int64) * (1 << 44) + src
        k = np.searchsorted(akey, gkey, side="right") - 1
        hit = (k >= 0) & (akey[np.maximum(k, 0)] == gkey)
        src = np.where(below & hit, table.aux[a[order][np.maximum(k, 0)]].astype(np.int64),
                       np.where(below, -1, src))
    qs = table.sector[q_rows].astype(np.int64)
    qe = qs + table.nr_sectors[q_rows].astype(np.int64)
    # the piece's bio: its thread's top bio queued last before the G that covers it (a thread
    # submits its bios one after the other; the previous one too, for a remainder resubmitted
    # behind the next bio's front); rows are in time order
    qpid = table.pid[q_rows].astype(np.int64)
    order = np.lexsort((np.arange(n), qpid))
    gpid = table.pid[g].astype(np.int64)
    key_q = qpid[order]
    pos = np.searchsorted(key_q, gpid, side="left")
    end = np.searchsorted(key_q, gpid, side="right")
    gidx = np.searchsorted(q_rows, g, side="right") - 1  # last top Q row before the G
    for i in range(len(g)):
        s_ = int(src[i])
        if s_ < 0 or pos[i] >= end[i]:
            continue
        mine = order[pos[i]:end[i]]  # this thread's top Q indices, in time order
        j = int(np.searchsorted(mine, gidx[i], side="right")) - 1
        for jj in (j, j - 1):
            if jj >= 0 and qs[mine[jj]] <= s_ < qe[mine[jj]]:
                out[mine[jj]] = True
                break
    # one zeroout call (the __blkdev_issue_write_zeroes loop) submits a chain of contiguous
    # bios of one op: the rest of the run shares the op the evidence showed for one of them
    # (the refusal shows only while the plug holds one request of the device)
    pid = table.pid[q_rows].astype(np.int64)
    rw = table.rwbs[q_rows].astype(np.int64)
    for p in np.unique(pid[out]).tolist():
        mine = np.flatnonzero(pid == p)
        cont = np.r_[False, (qs[mine][1:] == qe[mine][:-1]) & (rw[mine][1:] == rw[mine][:-1])]
        run = np.cumsum(~cont)
        hit = np.unique(run[out[mine]])
        out[mine[np.isin(run, hit)]] = True
    return out


def stripe_range_writes(table: EventTable, q_rows: npt.NDArray[np.intp], top_dev: int,
                        stack: Stack | None) -> npt.NDArray[np.bool_]:
    """Per top Q: a write a dm-stripe top mapped as one range per stripe (REQ_OP_WRITE_ZEROES).

    ``is_abnormal_io`` sends a write-zeroes bio (like a discard) through
    ``__send_changing_extent_only`` / ``__send_abnormal_io``: ``ti->num_write_zeroes_bios``
    (= stripes) clones of the whole range, each of which ``stripe_map`` hands to
    ``stripe_map_range`` for its own stripe. ``__map_bio`` traces every clone's remap (A) from
    the bio's start sector (``tio->old_sector``), and a clone ends where its stripe's part of
    the range ends. A read or write clone never crosses a chunk: ``max_io_len`` ends it at the
    chunk boundary (``dm_set_target_max_io_len`` with the chunk), and it starts at its own
    sector. So a W remap whose source sector plus length reaches past the chunk holding that
    sector was range-mapped: its bio was a write-zeroes, which a blktrace of a v1 kernel writes
    as a plain W (``__blk_add_trace`` maps every op that writes to BLK_TC_WRITE). 6.1's
    mkfs.ext4 zeroes its journal so (BLKZEROOUT: one 64 MiB bio, one write per member). Where
    the top's queue limits cut the bio at every chunk first (``bio_split_to_limits``:
    policies ``write_zeroes_chunk`` and ``dm_stripe_chunk_limit``), no clone crosses a chunk
    and the trace shows nothing (nor does the replay need it: each piece maps as a write
    would).
    """
    n = len(q_rows)
    out = np.zeros(n, dtype=np.bool_)
    if n == 0 or stack is None or stack.top.dev != top_dev or \
            stack.top.approximates != "dm-stripe" or stack.top.chunk_sectors <= 0:
        return out
    c = int(stack.top.chunk_sectors)
    a = np.flatnonzero((table.action == ACT_REMAP) & (table.aux2.astype(np.int64) == top_dev)
                       & ((table.rwbs & RWBS_WRITE) != 0))
    if len(a) == 0:
        return out
    src = table.aux[a].astype(np.int64)
    crossing = src % c + table.nr_sectors[a].astype(np.int64) > c
    a, src = a[crossing], src[crossing]
    if len(a) == 0:
        return out
    qs = table.sector[q_rows].astype(np.int64)
    qw = (table.rwbs[q_rows] & RWBS_WRITE) != 0
    qpid = table.pid[q_rows].astype(np.int64)
    qt = table.time_ns[q_rows].astype(np.int64)
    for r, s_ in zip(a.tolist(), src.tolist()):
        # the bio the clone came from: the same thread's write queued at that sector, the
        # nearest in time (a sector may be written again later)
        cand = np.flatnonzero(qw & (qs == s_) & (qpid == int(table.pid[r])))
        if len(cand):
            out[cand[np.argmin(np.abs(qt[cand] - int(table.time_ns[r])))]] = True
    return out


@njit(cache=True)
def _refused_merges(act: Any, dev: Any, sec: Any, nr: Any, pid: Any, write: Any,
                    cap: Any) -> Any:  # pragma: no cover - compiled
    """The G rows of :func:`unmergeable_writes` (rows in time order)."""
    m = len(act)
    out = np.zeros(m, dtype=np.bool_)
    # requests in a plug: (dev, start) -> row of their G; their end and owner
    at_start = Dict.empty(key_type=_KEY2, value_type=_I64)
    by_end = Dict.empty(key_type=_KEY3, value_type=_I64)
    count = Dict.empty(key_type=_KEY2, value_type=_I64)
    start = np.zeros(m, dtype=np.int64)
    end = np.zeros(m, dtype=np.int64)
    front = np.zeros(m, dtype=np.bool_)
    fronts = Dict.empty(key_type=_KEY2, value_type=_I64)
    for r in range(m):
        a = act[r]
        d = dev[r]
        s = sec[r]
        p = pid[r]
        if a == 13:  # X: the front piece carries REQ_NOMERGE
            fronts[(d, s)] = r
        elif a == 4:  # G
            c = count.get((d, p), 0)
            front[r] = (d, s) in fronts  # a split front carries REQ_NOMERGE itself
            if c == 1 and write[r] and not front[r] and (d, p, s) in by_end:
                o = by_end[(d, p, s)]
                if write[o] and not front[o] and end[o] - start[o] + nr[r] <= cap[r]:
                    out[r] = True
            start[r] = s
            end[r] = s + nr[r]
            if (d, s) in fronts:
                del fronts[(d, s)]
            at_start[(d, s)] = r
            by_end[(d, p, s + nr[r])] = r
            count[(d, p)] = c + 1
        elif a == 2:  # back merge into the request ending here
            if (d, p, s) in by_end:
                o = by_end[(d, p, s)]
                del by_end[(d, p, s)]
                end[o] = s + nr[r]
                by_end[(d, p, end[o])] = o
        elif a == 3:  # front merge into the request starting after the bio
            if (d, s + nr[r]) in at_start:
                o = at_start[(d, s + nr[r])]
                del at_start[(d, s + nr[r])]
                start[o] = s
                at_start[(d, s)] = o
        else:  # I or D: the request left the plug
            if (d, s) in at_start:
                o = at_start[(d, s)]
                del at_start[(d, s)]
                q = pid[o]
                if (d, q, end[o]) in by_end and by_end[(d, q, end[o])] == o:
                    del by_end[(d, q, end[o])]
                count[(d, q)] = count.get((d, q), 1) - 1
    return out


@njit(cache=True)
def _issue_state_kernel(rows: Any, act: Any, dev: Any, sec: Any, nr: Any, pid: Any,
                        is_top_q: Any, nq: int) -> Any:  # pragma: no cover - compiled
    outstanding = Dict.empty(key_type=_KEY2, value_type=_I64)
    count = Dict.empty(key_type=_I64, value_type=_I64)
    last_plug = Dict.empty(key_type=_I64, value_type=_I64)
    plug = np.zeros(nq, dtype=np.int64)
    qi = 0
    next_id = 0
    for r in rows:
        a = act[r]
        if a == 1:  # Q
            if not is_top_q[r]:
                continue
            p = pid[r]
            if count.get(p, 0) == 0 or p not in last_plug:
                last_plug[p] = next_id
                next_id += 1
            plug[qi] = last_plug[p]
            qi += 1
        elif a == 4:  # G
            key = (dev[r], sec[r])
            p = pid[r]
            if key in outstanding:
                old = outstanding[key]
                count[old] = count.get(old, 1) - 1
            outstanding[key] = p
            count[p] = count.get(p, 0) + 1
        else:  # D or I
            key = (dev[r], sec[r])
            if key in outstanding:
                p = outstanding.pop(key)
                count[p] = count.get(p, 1) - 1
            else:
                # a front-merged request starts at no G's sector: release every outstanding
                # request it covers (O(outstanding), only for such dispatches; there was a
                # silent cap of 256 outstanding requests here, which kept a busy trace's
                # threads in one plug forever)
                lo = sec[r]
                hi = lo + nr[r]
                gone2 = []
                for k2 in outstanding.keys():
                    if k2[0] == dev[r] and lo <= k2[1] < hi:
                        gone2.append(k2)
                for k2 in gone2:
                    p = outstanding.pop(k2)
                    count[p] = count.get(p, 1) - 1
    return plug


def plugs_from_workload(workload: str, nr: npt.NDArray[np.int64], pid: npt.NDArray[np.int64]
                         ) -> npt.NDArray[np.int64]:
    m = re.search(r"\bbs=(\S+)", workload)
    n = len(nr)
    if not m:
        return np.arange(n, dtype=np.int64)
    try:
        bs = parse_size(m.group(1).rstrip(",")) >> 9
    except ModelConfigError:
        return np.arange(n, dtype=np.int64)
    plug = np.zeros(n, dtype=np.int64)
    acc: dict[int, int] = {}
    ids: dict[int, int] = {}
    next_id = 0
    for i in range(n):
        p = int(pid[i])
        if p not in ids or acc.get(p, 0) >= bs:
            ids[p] = next_id
            next_id += 1
            acc[p] = 0
        plug[i] = ids[p]
        acc[p] += int(nr[i])
    return plug


def member_request_sleeps(table: EventTable, q_rows: npt.NDArray[np.intp], top_dev: int,
                          stack: Stack | None
                          ) -> tuple[dict[int, set[tuple[int, int, int]]], dict[int, list[int]]]:
    """Per submitting thread: the member bios (clones of a top bio on a stacked device) it
    slept in before it got their request, and the UT times of that sleep.

    ``blk_mq_submit_bio`` -> ``blk_mq_get_new_requests`` calls ``rq_qos_throttle`` (wbt's
    ``wbt_wait`` -> ``rq_qos_wait``) before it allocates the request (G), after the plug and
    scheduler merges failed. ``rq_qos_wait`` sleeps while the member has its limit of
    throttled writes in flight, and queues behind any sleeper already there
    (``wq_has_sleeper``; the flusher's background writes wait under ``wb_background``, and a
    REQ_SYNC write of ``sync`` that would fit under ``max_depth`` still sleeps behind it);
    ``io_schedule`` -> ``sched_submit_work`` flushes the plug (UT per queue). md's clones of
    one top bio are on ``current->bio_list`` (their Q is traced when raid1/raid10 submit
    them, ``submit_bio_noacct_nocheck``) and get their requests one after another in
    ``__submit_bio_noacct``: the clones before the sleeping one are in the flushed plug, the
    one that slept and those after it get their requests after the wake, in a fresh plug,
    where they are what the thread's next bios try to merge with. The trace shows such a
    sleep as the thread's UT whose next G/M is a G of a member bio it queued (Q) before the
    UT. The replay (``Engine.mq_submit``) flushes the thread's plug from schedule before that
    bio's request, by order: the ``n``-th Q of that thread at that member and sector.

    Returns ``(sleeps, uts)``: ``sleeps[pid]`` holds ``(dev, sector, n)``; ``uts[pid]`` the
    trace times (ns) of the UT events of those sleeps (read here, not as a sleep between top
    bios). Not on raid4/5/6, whose member writes raid5d issues (its own rules), nor on a
    plain disk (the top bio itself: ``_schedule_flushes``'s sleep inside a bio).
    """
    sleeps: dict[int, set[tuple[int, int, int]]] = {}
    uts: dict[int, list[int]] = {}
    if stack is None or not stack.top.members or \
            any(nd.kind in ("raid4", "raid5", "raid6") for nd in stack.nodes()):
        return sleeps, uts
    act = table.action
    ut = act == ACT_UNPLUG_TIMER
    if not bool(np.any(ut)) or not len(q_rows):
        return sleeps, uts
    tm = table.time_ns.astype(np.int64)
    order = np.argsort(tm, kind="stable")
    below = table.dev != top_dev
    placed = (act == ACT_GETRQ) | (act == ACT_BACKMERGE) | (act == ACT_FRONTMERGE)
    for p in np.unique(table.pid[q_rows]).tolist():
        mine = order[(table.pid[order] == p) & below[order]]
        a = act[mine]
        qn: dict[tuple[int, int], int] = {}
        q_at: dict[tuple[int, int], tuple[int, int]] = {}  # (dev, sector) -> (time, n)
        pending: list[int] = []  # UT times since the thread's last G/M
        for r, ac in zip(mine.tolist(), a.tolist()):
            if ac == ACT_QUEUE:
                key = (int(table.dev[r]), int(table.sector[r]))
                q_at[key] = (int(tm[r]), qn.get(key, 0))
                qn[key] = qn.get(key, 0) + 1
            elif ac == ACT_UNPLUG_TIMER:
                pending.append(int(tm[r]))
            elif placed[r]:
                if pending and ac == ACT_GETRQ:
                    key = (int(table.dev[r]), int(table.sector[r]))
                    tq, n = q_at.get(key, (-1, -1))
                    if 0 <= tq < pending[0]:
                        sleeps.setdefault(int(p), set()).add((key[0], key[1], n))
                        uts.setdefault(int(p), []).extend(pending)
                pending = []
    return sleeps, uts
