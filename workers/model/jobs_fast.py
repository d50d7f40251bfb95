"""The compiled (numba) engine of :func:`workers.model.jobs.simulate_jobs`.

The same simulation as ``_simulate_python``, event for event, over arrays; tests compare the two
column by column. See :mod:`workers.model.timing` for the whole picture.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from workers.errors import ModelConfigError
from workers.events import (
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_SLEEPRQ,
    ACT_SPLIT,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
)
from workers.model.device import (
    DeviceModel,
    _service_parts,
)
from workers.model.jobs import (
    DD_FIFO_BATCH,
    DD_READ_EXPIRE_NS,
    DD_WRITE_EXPIRE_NS,
    FioJobs,
    HostCosts,
    JobsResult,
    _Events,
    _rand_block,
    _setup,
    _write_cache_args,
)
from workers.model.limits import QueueLimits
from workers.model.policy import Policy
from workers.model.sbitmap import RFC_REWAKE_LIMIT
from workers.model.server import _kernel_args
from workers.model.split import OP_READ, OP_WRITE, split_bio

#: Integers inside compiled kernels (numpy scalars from arrays, or Python ints).
_I = int | np.integer[Any]



# ============================================================================================
# simulate_jobs, compiled: the same simulation as _simulate_python, event for event
# ============================================================================================
@njit(cache=True, error_model="numpy")
def _ev_put(ev: npt.NDArray[np.int64], n: _I, t: _I, pid: _I, act: _I, s: _I, nr: _I,
            aux: _I) -> npt.NDArray[np.int64]:
    if n >= ev.shape[0]:
        bigger = np.empty((ev.shape[0] * 2, 6), np.int64)
        bigger[:n] = ev[:n]
        ev = bigger
    ev[n, 0] = t
    ev[n, 1] = pid
    ev[n, 2] = act
    ev[n, 3] = s
    ev[n, 4] = nr
    ev[n, 5] = aux
    return ev


@njit(cache=True, error_model="numpy")
def _hpush(h: npt.NDArray[np.int64], n: _I, t: _I, seq: _I, kind: _I,
           arg: _I) -> npt.NDArray[np.int64]:
    """Push onto a binary min-heap of rows (time, seq, kind, arg) ordered by (time, seq)."""
    if n >= h.shape[0]:
        bigger = np.empty((h.shape[0] * 2, 4), np.int64)
        bigger[:n] = h[:n]
        h = bigger
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if h[parent, 0] < t or (h[parent, 0] == t and h[parent, 1] < seq):
            break
        h[i] = h[parent]
        i = parent
    h[i, 0] = t
    h[i, 1] = seq
    h[i, 2] = kind
    h[i, 3] = arg
    return h


@njit(cache=True, error_model="numpy")
def _hpop(h: npt.NDArray[np.int64], n: _I) -> tuple[_I, _I, _I, _I]:
    """Pop the smallest row of a heap of ``n`` rows (the caller decrements n)."""
    t, seq, kind, arg = h[0, 0], h[0, 1], h[0, 2], h[0, 3]
    n -= 1
    lt, ls = h[n, 0], h[n, 1]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (h[c + 1, 0] < h[c, 0] or (h[c + 1, 0] == h[c, 0]
                                                   and h[c + 1, 1] < h[c, 1])):
            c += 1
        if lt < h[c, 0] or (lt == h[c, 0] and ls < h[c, 1]):
            break
        h[i] = h[c]
        i = c
    if n > 0:
        h[i, 0] = lt
        h[i, 1] = ls
        h[i, 2] = h[n, 2]
        h[i, 3] = h[n, 3]
    return t, seq, kind, arg


@njit(cache=True, error_model="numpy")
def _wq_pop(wq: npt.NDArray[np.int64], wh: npt.NDArray[np.int64], wn: npt.NDArray[np.int64],
            queued: npt.NDArray[np.bool_], w: _I, cap: _I, limit: _I, by_need: bool,
            nrt: npt.NDArray[np.int64], wk: npt.NDArray[np.int64], nw: _I) -> tuple[int, int]:
    """wake_up_nr on wait queue ``w``: pop waiters in order until ``limit`` is covered.

    Each thread covers 1 (``wake_up_nr``) or, with ``by_need``, the tags it still needs
    (``waiters_first``: seed 003's ``get_wake_nr``). Returns (new woken count, covered).
    """
    covered = 0
    while covered < limit and wn[w] > 0:
        th = wq[w, wh[w]]
        wh[w] = (wh[w] + 1) % cap
        wn[w] -= 1
        queued[th] = False
        wk[nw] = th
        nw += 1
        covered += nrt[th] if by_need else 1
    return int(nw), int(covered)


@njit(cache=True, error_model="numpy")
def _key_less(s1: _I, r1: _I, s2: _I, r2: _I) -> bool:
    return bool(s1 < s2 or (s1 == s2 and r1 < r2))


@njit(cache=True, error_model="numpy")
def _jobs_kernel(cfg: npt.NDArray[np.int64], region_start: npt.NDArray[np.int64],
                 region_sectors: npt.NDArray[np.int64], slot_of_mod: npt.NDArray[np.int64],
                 p_off: npt.NDArray[np.int64], p_len: npt.NDArray[np.int64],
                 p_need: npt.NDArray[np.int64], p_n: npt.NDArray[np.int64],
                 dev_kind: int, dev_p: npt.NDArray[np.float64], dev_par: int,
                 dev_excl: bool, wc_f: npt.NDArray[np.float64]
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The event loop of :func:`simulate_jobs` over arrays (see ``_simulate_python``).

    Tags index the in-flight request records; ``rid`` (a running count) only breaks ties in
    the elevator's sector order exactly as the Python engine's request ids do.
    """
    numjobs, seed, is_random, is_write, bs_sectors, count = cfg[0], cfg[1], cfg[2], cfg[3], \
        cfg[4], cfg[5]
    end_ns, ramp, submit_ns, wakeup_ns, think_ns = cfg[6], cfg[7], cfg[8], cfg[9], cfg[10]
    elevator, queue_depth, depth, wb, wake_mode, pre = cfg[11], cfg[12], cfg[13], cfg[14], \
        cfg[15], cfg[16]
    expire_ns, fifo_batch, emit, mod_l, iodepth = cfg[17], cfg[18], cfg[19], cfg[20], cfg[21]
    wcache = cfg[22]
    rewake_limit = cfg[23]  # sbitmap.RFC_REWAKE_LIMIT, passed so numba's cache never freezes it
    w_iface, w_oh = wc_f[0], wc_f[1]
    # --- write-back cache (see _simulate_python's admit)
    adm = np.zeros(queue_depth + 1, np.int64)
    admh = 0
    admn = 0
    dcap = (wcache // 512 + queue_depth + 2) if wcache > 0 else 1
    d_sec = np.zeros(dcap, np.int64)
    d_rid = np.zeros(dcap, np.int64)
    d_nr = np.zeros(dcap, np.int64)
    dn = 0
    wc_used = 0
    wc_busy = False
    wc_head = np.int64(0)
    wc_seq = 0
    wc_n = 0
    link_free = 0.0
    nq = 8
    # int64 (not literal) constants: one compiled variant of each helper instead of eight
    z64 = np.int64(0)
    k_run = np.int64(0)
    k_done = np.int64(1)
    a_q = np.int64(ACT_QUEUE)
    a_x = np.int64(ACT_SPLIT)
    a_s = np.int64(ACT_SLEEPRQ)
    a_g = np.int64(ACT_GETRQ)
    a_i = np.int64(ACT_INSERT)
    a_d = np.int64(ACT_ISSUE)
    a_c = np.int64(ACT_COMPLETE)
    no_discard = cfg[0] < 0
    # --- jobs
    j_k = np.zeros(numjobs, np.int64)
    j_np = np.zeros(numjobs, np.int64)
    j_slot = np.zeros(numjobs, np.int64)
    j_base = np.zeros(numjobs, np.int64)
    j_infl = np.zeros(numjobs, np.int64)  # I/Os in flight
    j_idle = np.zeros(numjobs, np.bool_)
    j_io = np.zeros(numjobs, np.int64)  # slot of the I/O being submitted
    io_left = np.zeros((numjobs, iodepth), np.int64)
    io_full = np.zeros((numjobs, iodepth), np.bool_)
    io_busy = np.zeros((numjobs, iodepth), np.bool_)
    j_wait = np.zeros(numjobs, np.bool_)
    j_slept = np.zeros(numjobs, np.bool_)
    j_pas = np.zeros(numjobs, np.bool_)
    j_ios = np.zeros(numjobs, np.int64)
    j_stop = np.zeros(numjobs, np.bool_)
    j_next = region_start.copy()
    # --- tags (TagQueue)
    free = np.empty(depth, np.int64)
    for i in range(depth):
        free[i] = depth - 1 - i
    nfree = depth
    cap = numjobs + 1
    wq = np.empty((nq, cap), np.int64)
    wh = np.zeros(nq, np.int64)
    wn = np.zeros(nq, np.int64)
    queued = np.zeros(numjobs, np.bool_)
    where = np.full(numjobs, -1, np.int64)
    nrt = np.ones(numjobs, np.int64)
    waiters_cnt = np.zeros(nq, np.int64)
    wait_cnt = np.full(nq, wb, np.int64)
    wake_index = 0
    hctx = 0
    ws_active = 0
    completion_cnt = 0
    wakeup_cnt = 0
    force = True
    st_gets = 0
    st_sleeps = 0
    st_wakeups = 0
    st_pre = 0
    st_ref = 0
    st_maxws = 0
    wk = np.empty(numjobs + 1, np.int64)
    # --- requests by tag
    r_sec = np.zeros(depth, np.int64)
    r_nr = np.zeros(depth, np.int64)
    r_job = np.zeros(depth, np.int64)
    r_rid = np.full(depth, -1, np.int64)
    r_io = np.zeros(depth, np.int64)
    pend = np.zeros(depth, np.bool_)
    rid_next = 0
    # --- elevator
    ksec = np.zeros(depth, np.int64)
    krid = np.zeros(depth, np.int64)
    ktag = np.zeros(depth, np.int64)
    kn = 0
    fcap = 4 * depth + 16
    f_t = np.zeros(fcap, np.int64)
    f_rid = np.zeros(fcap, np.int64)
    f_sec = np.zeros(fcap, np.int64)
    f_tag = np.zeros(fcap, np.int64)
    fh = 0
    fe = 0
    batching = 0
    last_sec = -1
    last_rid = -1
    dq = np.zeros(depth, np.int64)  # scheduler none: FIFO ring of tags
    dqh = 0
    dqn = 0
    # --- device
    units = np.zeros(max(dev_par, 1), np.float64)
    bus_free = 0.0
    dev_last_c = 0.0
    head = np.int64(-1)
    # --- results
    ev = np.empty((1024, 6), np.int64)
    nev = np.int64(0)
    inflight = np.int64(0)
    bytes_window = 0
    ios_done = 0
    requests_done = 0
    seq_hits = 0
    dispatched = 0
    last_end = np.int64(-1)
    rescues = 0
    last_c = np.int64(0)
    max_ws = np.zeros(nq, np.int64)
    # --- event heap: (time, seq, kind, arg); kind 0 = run job, 1 = complete tag
    heap = np.empty((numjobs + 2 * depth + 16, 4), np.int64)
    hn = np.int64(0)
    seqc = np.int64(0)
    for j in range(numjobs):
        heap = _hpush(heap, hn, j * 1000, seqc, k_run, j)
        hn += 1
        seqc += 1

    while hn > 0:
        t, _, kind, arg = _hpop(heap, hn)
        hn -= 1
        if t > end_ns:
            break
        do_dispatch = False
        run_next = False
        j = -1
        if kind == 0:
            j = arg  # type: ignore[assignment]
            if j_wait[j]:
                # finish_wait
                idx = where[j]
                if idx >= 0:
                    where[j] = -1
                    waiters_cnt[idx] -= 1
                    ws_active -= 1
                    if queued[j]:
                        queued[j] = False
                        m = wn[idx]
                        pos = -1
                        for q in range(m):
                            if wq[idx, (wh[idx] + q) % cap] == j:
                                pos = q
                                break
                        if pos >= 0:
                            for q in range(pos, m - 1):
                                wq[idx, (wh[idx] + q) % cap] = wq[idx, (wh[idx] + q + 1) % cap]
                            wn[idx] -= 1
                j_wait[j] = False
                if pre == 1:
                    j_pas[j] = True
            if j_k[j] >= j_np[j]:
                if j_infl[j] >= iodepth or j_stop[j]:
                    j_idle[j] = True
                    continue
                if t >= end_ns or (count > 0 and j_ios[j] >= count):
                    j_stop[j] = True
                    j_idle[j] = True
                    continue
                if is_random:
                    blocks = region_sectors[j] // bs_sectors
                    s0 = region_start[j] + _rand_block(seed, j, j_ios[j], blocks) * bs_sectors
                else:
                    s0 = j_next[j]
                    nxt = s0 + bs_sectors
                    if nxt + bs_sectors <= region_start[j] + region_sectors[j]:
                        j_next[j] = nxt
                    else:
                        j_next[j] = region_start[j]
                slot = slot_of_mod[s0 % mod_l]
                j_base[j] = s0
                j_slot[j] = slot
                j_np[j] = p_n[slot]
                j_k[j] = 0
                j_ios[j] += 1
                io = 0
                while io_busy[j, io]:
                    io += 1
                j_io[j] = io
                io_busy[j, io] = True
                io_left[j, io] = 0
                io_full[j, io] = False
                j_infl[j] += 1
                if emit:
                    ev = _ev_put(ev, nev, t, 1000 + j, a_q, s0, bs_sectors, z64)
                    nev += 1
            k = j_k[j]
            slot = j_slot[j]
            s = j_base[j] + p_off[slot, k]
            n = p_len[slot, k]
            last = k == j_np[j] - 1
            preemption = j_pas[j] or (pre == 1 and k > 0)
            # TagQueue.get
            tag = -1
            if pre == 1 and not (preemption or ws_active <= nq or force):
                if nfree > 0:
                    st_ref += 1
            elif nfree > 0:
                st_gets += 1
                if ws_active > 0:
                    st_pre += 1
                nfree -= 1
                tag = free[nfree]
            if tag < 0:
                if not j_slept[j]:
                    if emit:
                        if not last:
                            ev = _ev_put(ev, nev, t, 1000 + j, a_x, s, n, s + n)
                            nev += 1
                        ev = _ev_put(ev, nev, t, 1000 + j, a_s, s, n, z64)
                        nev += 1
                    j_slept[j] = True
                # prepare_to_wait
                idx = hctx
                hctx = (idx + 1) % nq
                wq[idx, (wh[idx] + wn[idx]) % cap] = j
                wn[idx] += 1
                queued[j] = True
                waiters_cnt[idx] += 1
                ws_active += 1
                where[j] = idx
                nrt[j] = max(1, p_need[slot, k])
                st_sleeps += 1
                if ws_active > st_maxws:
                    st_maxws = ws_active
                j_wait[j] = True
                if waiters_cnt[idx] > max_ws[idx]:
                    max_ws[idx] = waiters_cnt[idx]
                if nfree == depth:
                    rescues += 1
                    nw = 0
                    for w in range(nq):
                        nw, _c = _wq_pop(wq, wh, wn, queued, w, cap, cap, False, nrt, wk, nw)
                    st_wakeups += nw
                    for q in range(nw):
                        heap = _hpush(heap, hn, t + wakeup_ns, seqc, k_run, wk[q])
                        hn += 1
                        seqc += 1
                continue
            if emit and not j_slept[j] and not last:
                ev = _ev_put(ev, nev, t, 1000 + j, a_x, s, n, s + n)
                nev += 1
            j_slept[j] = False
            j_pas[j] = False
            rid = rid_next
            rid_next += 1
            r_sec[tag] = s
            r_nr[tag] = n
            r_job[tag] = j
            r_rid[tag] = rid
            if emit:
                ev = _ev_put(ev, nev, t, 1000 + j, a_g, s, n, z64)
                nev += 1
                ev = _ev_put(ev, nev, t, 1000 + j, a_i, s, n, z64)
                nev += 1
            if elevator:
                # insort (s, rid)
                pos = kn
                while pos > 0 and _key_less(s, rid, ksec[pos - 1], krid[pos - 1]):
                    ksec[pos] = ksec[pos - 1]
                    krid[pos] = krid[pos - 1]
                    ktag[pos] = ktag[pos - 1]
                    pos -= 1
                ksec[pos] = s
                krid[pos] = rid
                ktag[pos] = tag
                kn += 1
                if fe >= fcap:
                    live = fe - fh
                    if fh > 0:
                        f_t[:live] = f_t[fh:fe].copy()
                        f_rid[:live] = f_rid[fh:fe].copy()
                        f_sec[:live] = f_sec[fh:fe].copy()
                        f_tag[:live] = f_tag[fh:fe].copy()
                    if live >= fcap // 2:
                        fcap *= 2
                        nt = np.zeros(fcap, np.int64)
                        nt[:live] = f_t[:live]
                        f_t = nt
                        nr_ = np.zeros(fcap, np.int64)
                        nr_[:live] = f_rid[:live]
                        f_rid = nr_
                        ns_ = np.zeros(fcap, np.int64)
                        ns_[:live] = f_sec[:live]
                        f_sec = ns_
                        ng = np.zeros(fcap, np.int64)
                        ng[:live] = f_tag[:live]
                        f_tag = ng
                    fh = 0
                    fe = live
                f_t[fe] = t
                f_rid[fe] = rid
                f_sec[fe] = s
                f_tag[fe] = tag
                fe += 1
                pend[tag] = True
            else:
                dq[(dqh + dqn) % depth] = tag
                dqn += 1
            r_io[tag] = j_io[j]
            io_left[j, j_io[j]] += 1
            j_k[j] = k + 1
            if j_k[j] >= j_np[j]:
                io_full[j, j_io[j]] = True
            do_dispatch = True
            run_next = j_k[j] < j_np[j] or (j_infl[j] < iodepth and not j_stop[j])
            if not run_next:
                j_idle[j] = True
        elif kind == 2:
            wc_busy = False
            wc_used -= arg << 9
            do_dispatch = True
        else:
            tag = arg  # type: ignore[assignment]
            inflight -= 1
            requests_done += 1
            last_c = t  # type: ignore[assignment]
            if ramp <= t and t <= end_ns:
                bytes_window += r_nr[tag] << 9
            j = r_job[tag]
            # TagQueue.put -> wake_up(1)
            free[nfree] = tag
            nfree += 1
            nw = 0
            if ws_active > 0:
                if wake_mode == 1:
                    completion_cnt += 1
                    while completion_cnt - wakeup_cnt >= wb:
                        wakeup_cnt += wb
                        if pre == 1:
                            force = nfree >= 2 * wb
                        left = wb
                        idx = wake_index
                        for _q in range(nq):
                            w = idx
                            idx = (idx + 1) % nq
                            if wn[w] == 0:
                                continue
                            nw, got = _wq_pop(wq, wh, wn, queued, w, cap, left, pre == 1, nrt,
                                              wk, nw)
                            left -= got
                            if left <= 0:
                                break
                        wake_index = idx
                elif pre == 1:
                    # The RFC's __sbq_wake_up returns true after a wake-up and
                    # sbitmap_queue_wake_up loops on it: the same completion also counts on
                    # the next queue (TagQueue._wake_per_queue; at most RFC_REWAKE_LIMIT calls).
                    for _call in range(rewake_limit):
                        idx = wake_index
                        wait_cnt[idx] -= 1
                        if wait_cnt[idx] > 0:
                            break
                        best = -1
                        best_n = 0
                        for i in range(nq):
                            if i != idx and waiters_cnt[i] > best_n:
                                best = i
                                best_n = waiters_cnt[i]
                        if best_n > 0:
                            wake_index = best
                        wait_cnt[idx] = wb
                        force = nfree >= 2 * wb
                        if wn[idx] > 0:
                            # get_wake_nr
                            cnt = 1
                            left = wb
                            for q in range(wn[idx]):
                                need = nrt[wq[idx, (wh[idx] + q) % cap]]
                                if left <= need:
                                    break
                                cnt += 1
                                left -= need
                            nw, _c = _wq_pop(wq, wh, wn, queued, idx, cap, cnt, False, nrt,
                                             wk, nw)
                else:
                    idx = wake_index
                    found = False
                    for _q in range(nq):
                        if wn[idx] > 0:
                            found = True
                            break
                        idx = (idx + 1) % nq
                    if found:
                        wake_index = idx
                        wait_cnt[idx] -= 1
                        if wait_cnt[idx] <= 0:
                            wait_cnt[idx] = wb
                            wake_index = (idx + 1) % nq
                            nw, _c = _wq_pop(wq, wh, wn, queued, idx, cap, wb, False, nrt,
                                             wk, nw)
                st_wakeups += nw
            for q in range(nw):
                heap = _hpush(heap, hn, t + wakeup_ns, seqc, k_run, wk[q])
                hn += 1
                seqc += 1
            io = r_io[tag]
            io_left[j, io] -= 1
            if io_left[j, io] == 0 and io_full[j, io]:
                ios_done += 1
                io_busy[j, io] = False
                j_infl[j] -= 1
                if j_idle[j]:
                    j_idle[j] = False
                    heap = _hpush(heap, hn, t + wakeup_ns + think_ns, seqc, k_run, j)
                    hn += 1
                    seqc += 1
            do_dispatch = True
        if not do_dispatch:
            continue
        # dispatch(t)
        while inflight < queue_depth:
            if elevator:
                if kn == 0:
                    break
                # first key > (last_sec, last_rid)
                lo = 0
                hi = kn
                while lo < hi:
                    mid = (lo + hi) // 2
                    if _key_less(last_sec, last_rid, ksec[mid], krid[mid]):
                        hi = mid
                    else:
                        lo = mid + 1
                pos = lo
                has_nxt = pos < kn
                if not (has_nxt and batching < fifo_batch):
                    while not (pend[f_tag[fh]] and r_rid[f_tag[fh]] == f_rid[fh]):
                        fh += 1
                    if not has_nxt or t - f_t[fh] >= expire_ns:
                        s0 = f_sec[fh]
                        r0 = f_rid[fh]
                        lo = 0
                        hi = kn
                        while lo < hi:
                            mid = (lo + hi) // 2
                            if _key_less(ksec[mid], krid[mid], s0, r0):
                                lo = mid + 1
                            else:
                                hi = mid
                        pos = lo
                    batching = 0
                batching += 1
                tag = ktag[pos]
                last_sec = ksec[pos]
                last_rid = krid[pos]
                for q in range(pos, kn - 1):
                    ksec[q] = ksec[q + 1]
                    krid[q] = krid[q + 1]
                    ktag[q] = ktag[q + 1]
                kn -= 1
                pend[tag] = False
            else:
                if dqn == 0:
                    break
                tag = dq[dqh]
                dqh = (dqh + 1) % depth
                dqn -= 1
            s = r_sec[tag]
            n = r_nr[tag]
            if s == last_end:
                seq_hits += 1
            dispatched += 1
            last_end = s + n
            if wcache > 0:
                if emit:
                    ev = _ev_put(ev, nev, t, 1000 + r_job[tag], a_d, s, n, z64)
                    nev += 1
                inflight += 1
                adm[(admh + admn) % (queue_depth + 1)] = tag
                admn += 1
                continue
            # DeviceServer.submit
            u = 0
            for q in range(1, len(units)):
                if units[q] < units[u]:
                    u = q
            start = max(float(t), units[u])
            setup, xfer = _service_parts(dev_kind, dev_p, s, n, is_write == 1, no_discard,
                                         int(head))
            c = max(start + setup, bus_free) + xfer
            units[u] = c
            bus_free = c
            if c > dev_last_c:
                dev_last_c = c
            head = s + n
            ci = int(math.ceil(c))
            if emit:
                ev = _ev_put(ev, nev, t, 1000 + r_job[tag], a_d, s, n, z64)
                nev += 1
                ev = _ev_put(ev, nev, ci, z64, a_c, s, n, z64)
                nev += 1
            inflight += 1
            heap = _hpush(heap, hn, ci, seqc, k_done, tag)
            hn += 1
            seqc += 1
        if wcache > 0:
            # admit: FIFO, whole commands, the link serialises the transfers
            while admn > 0:
                tag = adm[admh]
                nbytes = r_nr[tag] << 9
                if wc_used > 0 and wc_used + nbytes > wcache:
                    break
                admh = (admh + 1) % (queue_depth + 1)
                admn -= 1
                wc_used += nbytes
                s = r_sec[tag]
                n = r_nr[tag]
                rid = r_rid[tag]
                pos = dn  # insort by (sector, rid)
                while pos > 0 and _key_less(s, rid, d_sec[pos - 1], d_rid[pos - 1]):
                    d_sec[pos] = d_sec[pos - 1]
                    d_rid[pos] = d_rid[pos - 1]
                    d_nr[pos] = d_nr[pos - 1]
                    pos -= 1
                d_sec[pos] = s
                d_rid[pos] = rid
                d_nr[pos] = n
                dn += 1
                ack = max(float(t), link_free) + w_oh + nbytes / w_iface * 1e9
                link_free = ack
                ci = int(math.ceil(ack))
                if emit:
                    ev = _ev_put(ev, nev, ci, z64, a_c, s, n, z64)
                    nev += 1
                heap = _hpush(heap, hn, ci, seqc, k_done, tag)
                hn += 1
                seqc += 1
            if not wc_busy and dn > 0:
                # destage: C-LOOK, the first dirty extent at or after the head, else the lowest
                lo = 0
                hi = dn
                while lo < hi:
                    mid = (lo + hi) // 2
                    if d_sec[mid] < wc_head:
                        lo = mid + 1
                    else:
                        hi = mid
                pos = lo if lo < dn else 0
                s = d_sec[pos]
                n = d_nr[pos]
                for q in range(pos, dn - 1):
                    d_sec[q] = d_sec[q + 1]
                    d_rid[q] = d_rid[q + 1]
                    d_nr[q] = d_nr[q + 1]
                dn -= 1
                if s == wc_head:
                    wc_seq += 1
                wc_n += 1
                setup, xfer = _service_parts(dev_kind, dev_p, s, n, True, False, int(wc_head))
                wc_head = s + n
                wc_busy = True
                heap = _hpush(heap, hn, int(math.ceil(t + setup + xfer)), seqc, np.int64(2), n)
                hn += 1
                seqc += 1
        if run_next:
            heap = _hpush(heap, hn, t + submit_ns, seqc, k_run, j)
            hn += 1
            seqc += 1

    out = np.array([bytes_window, ios_done, requests_done, seq_hits, dispatched, rescues,
                    last_c, st_gets, st_sleeps, st_wakeups, st_pre, st_ref, st_maxws, wc_seq,
                    wc_n],
                   dtype=np.int64)
    return ev[:nev], out, max_ws


def _job_regions(jobs: FioJobs, capacity: int) -> tuple[npt.NDArray[np.int64],
                                                        npt.NDArray[np.int64]]:
    bs_sectors = jobs.bs >> 9
    inc = jobs.offset_increment >> 9
    starts = np.empty(jobs.numjobs, np.int64)
    spans = np.empty(jobs.numjobs, np.int64)
    for j in range(jobs.numjobs):
        start = (j * inc) % capacity
        span = (jobs.size >> 9) if jobs.size else capacity - start
        span = min(span, capacity - start)
        span -= span % bs_sectors
        if span < bs_sectors:
            raise ModelConfigError(f"job {j} has no room for one {jobs.bs}-byte I/O "
                                   f"(offset {start} of {capacity} sectors)")
        starts[j] = start
        spans[j] = span
    return starts, spans


def _split_table(jobs: FioJobs, limits: QueueLimits, starts: npt.NDArray[np.int64]
                 ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64],
                            npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Relative splits of a ``bs`` bio for every start residue the jobs can produce.

    ``bio_split_to_limits`` sees the start only through ``start % chunk_sectors`` and
    ``start % physical block``; both are functions of ``start % L`` with L their lcm.
    """
    bs_sectors = jobs.bs >> 9
    mod_l = math.lcm(max(limits.chunk_sectors, 1), limits.pbs_sectors)
    residues: set[int] = set()
    step = bs_sectors % mod_l
    period = mod_l // math.gcd(step, mod_l) if step else 1
    for r0 in {int(s) % mod_l for s in starts}:
        for m in range(period):
            residues.add((r0 + m * step) % mod_l)
    op = OP_WRITE if jobs.is_write else OP_READ
    max_sectors = max(limits.max_sectors, 1)
    rows: list[tuple[list[int], list[int], list[int]]] = []
    slot_of_mod = np.zeros(mod_l, np.int64)
    for r in sorted(residues):
        res = split_bio(r, bs_sectors, limits, op=op)
        offs = [ps - r for ps, _ in res.pieces]
        lens = [pn for _, pn in res.pieces]
        need = [1 + (sum(lens[k:]) - 1) // max_sectors for k in range(len(lens))]
        slot_of_mod[r] = len(rows)
        rows.append((offs, lens, need))
    width = max(len(r[0]) for r in rows)
    p_off = np.zeros((len(rows), width), np.int64)
    p_len = np.zeros((len(rows), width), np.int64)
    p_need = np.zeros((len(rows), width), np.int64)
    p_n = np.zeros(len(rows), np.int64)
    for i, (offs, lens, need) in enumerate(rows):
        p_off[i, :len(offs)] = offs
        p_len[i, :len(lens)] = lens
        p_need[i, :len(need)] = need
        p_n[i] = len(offs)
    return mod_l, slot_of_mod, p_off, p_len, p_need, p_n


def _simulate_numba(jobs: FioJobs, *, limits: QueueLimits,
                    device: DeviceModel | str | Mapping[str, Any] | None, policy: Policy | None,
                    wakeup: str | None, preempt: str | None, costs: HostCosts | None, dev: int,
                    name: str, comm: str, emit_events: bool) -> JobsResult:
    wake, pre, hc, model, elevator, depth, tags = _setup(
        limits=limits, device=device, policy=policy, wakeup=wakeup, preempt=preempt, costs=costs)
    wcache, w_iface, w_oh = _write_cache_args(model, jobs.is_write)
    capacity = int(getattr(model, "capacity_sectors", 1 << 40))
    starts, spans = _job_regions(jobs, capacity)
    mod_l, slot_of_mod, p_off, p_len, p_need, p_n = _split_table(jobs, limits, starts)
    end_ns = jobs.runtime_ns if jobs.runtime_ns > 0 else 1 << 62
    cfg = np.array([
        jobs.numjobs, jobs.seed, int(jobs.is_random), int(jobs.is_write), jobs.bs >> 9,
        jobs.count, end_ns, jobs.ramp_ns, hc.submit_ns, hc.wakeup_ns, hc.think_ns,
        int(elevator), limits.queue_depth, depth, tags.wake_batch,
        1 if wake == "global" else 0, 1 if pre == "waiters_first" else 0,
        DD_WRITE_EXPIRE_NS if jobs.is_write else DD_READ_EXPIRE_NS, DD_FIFO_BATCH,
        int(emit_events), mod_l, jobs.iodepth, wcache, RFC_REWAKE_LIMIT,
    ], dtype=np.int64)
    kind, p, par, excl = _kernel_args(model)
    ev, out, max_ws = _jobs_kernel(cfg, starts, spans, slot_of_mod, p_off, p_len, p_need, p_n,
                                   kind, p, par, excl, np.array([w_iface, w_oh], np.float64))
    rwbs = (RWBS_WRITE | RWBS_SYNC) if jobs.is_write else RWBS_READ
    events = _Events(emit_events)
    meta = {
        "model": "simulate_jobs",
        "workload": {"rw": jobs.rw, "bs": jobs.bs, "numjobs": jobs.numjobs,
                     "offset_increment": jobs.offset_increment, "iodepth": jobs.iodepth},
        "policy": {"sbitmap_wakeup": wake, "tag_preempt": pre},
        "device": model.to_json(),
    }
    table = events.table(dev, rwbs, comm, meta, limits, name, end_ns, arr=ev)
    (bytes_window, ios_done, requests_done, seq_hits, dispatched, rescues, last_c, gets, sleeps,
     wakeups, preempted, refused, max_ws_active, wc_seq, wc_n) = (int(x) for x in out)
    seq = seq_hits / dispatched if dispatched else 0.0
    window_end = end_ns if jobs.runtime_ns > 0 else last_c
    return JobsResult(
        table=table,
        bytes_in_window=bytes_window,
        window_ns=max(window_end - jobs.ramp_ns, 0),
        ios_done=ios_done,
        requests_done=requests_done,
        sequential_fraction=seq_hits / dispatched if dispatched else 0.0,
        tag_stats={"gets": gets, "sleeps": sleeps, "wakeups": wakeups, "preempted": preempted,
                   "refused_preempt": refused, "max_ws_active": max_ws_active},
        max_waiters_per_queue=[int(x) for x in max_ws],
        rescues=rescues,
        media_sequential_fraction=(wc_seq / wc_n if wc_n else 0.0) if wcache else seq,
    )


