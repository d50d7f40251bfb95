"""A compiled (numba) replay engine for the common case, event for event equal to ``submit.Engine``.

Why: the replay is a sequential state machine (``current->bio_list`` recursion, the plug, device
tags), so it cannot be vectorized; the Python engine costs about 80 us per member request,
several times what ``blkparse`` needs to read the result back (issue 4's speed target). This
module runs the same algorithm over preallocated int64 arrays inside one ``@njit`` loop.

Scope (``eligible``): a plain disk, or one md raid0 / raid5 level over plain disks (not a dm
target modelled as one: dm does not split reads and writes to its limits); READ/WRITE
bios (no discards); scheduler ``none`` or the mq-deadline-like elevator; single-zone raid0. Anything else goes to the
Python engine. ``tests/engine/model/test_fast.py`` checks both engines produce identical tables
on random inputs, stacks and policies.

Layout: bios, md pieces and requests live in pools (2-D int64 arrays with free lists); a
``bio_list`` is a head/tail pair linked through each bio's ``next`` field, as in the kernel; the
event heap is an array binary heap ordered by (time, seq) like ``heapq`` on tuples; the
elevator's merge lookups are array hash maps. The loop returns to Python between units when a
pool, a table or the event buffer runs low; Python grows the arrays and resumes (all state is in
the arrays). Nothing compiled here allocates, so it runs without numba's reference counting
(:func:`_jit`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
from numba import njit

from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
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
    RWBS_NONE,
    RWBS_SYNC,
    RWBS_WRITE,
)
from workers.model.device import _service_parts
from workers.model.elevator import FIFO_BATCH, READ_EXPIRE_NS, WRITE_EXPIRE_NS, WRITES_STARVED
from workers.model.evbuf import (
    EV_ACT,
    EV_AUX,
    EV_AUX2,
    EV_DEV,
    EV_NR,
    EV_PID,
    EV_RWBS,
    EV_SEC,
    EV_TIME,
    EventChunk,
    head,
    new_events,
)
from workers.model.limits import QueueLimits
from workers.model.policy import Policy
from workers.model.split import OP_READ, OP_WRITE
from workers.model.stack import Stack

_F = TypeVar("_F", bound=Callable[..., Any])


def _jit(fn: _F) -> _F:
    """How every function of the engine is compiled: cached on disk (a process loads it
    instead of compiling it), and without numba's reference counting (NRT, ``_nrt=False``).

    With NRT each call of a helper increments and decrements the count of every array it is
    passed, with atomic instructions: that was a third of the engine's time (perf). The
    price: no function here may allocate (no np.zeros, lists or typed dicts; numba refuses to
    compile them without NRT), so scratch space is passed in preallocated.
    """
    return cast(_F, njit(fn, cache=True, _nrt=False))  # type: ignore[call-overload]


def _jit_inline(fn: _F) -> _F:
    """:func:`_jit`, inlined into every caller (numba IR inlining, ``inline="always"``): for
    the helpers run once per request or completion, whose calls cost more than their work. A
    call passes every array argument as ~9 scalars on the stack, and these take 11-21 arrays:
    a quarter of the engine's samples were those pushes (perf, 1M-bio raid5 benchmark)."""
    return cast(_F, njit(fn, cache=True, _nrt=False, inline="always"))  # type: ignore[call-overload]


#: What a merge attempt did (``bio_attempt_back_merge`` / ``bio_attempt_front_merge``).
MERGE_NONE, MERGE_BACK, MERGE_FRONT = 0, 1, 2

# bio fields
B_NODE, B_SEC, B_NR, B_OP, B_RWBS, B_FLAGS, B_UNIT, B_UP, B_OFF, B_SEG, B_PID, B_FRESH, \
    B_NEXT = range(13)
NBF = 13
# md piece fields
P_NODE, P_SEC, P_NR, P_RWBS, P_REM, P_UP, P_PID = range(7)
NPF = 7
# request fields
(R_NODE, R_SEC, R_NR, R_OP, R_RWBS, R_NOMERGE, R_NSEGS, R_PID, R_BHEAD, R_BTAIL, R_NEXT, R_RID,
 R_TINS, R_FPREV, R_FNEXT) = range(15)
NRF = 15
# scalar state
(S_NOW, S_HSEQ, S_RID, S_EVN, S_BL0H, S_BL0T, S_BL1H, S_BL1T, S_PLN, S_MULTI, S_BFREE, S_PFREE,
 S_RFREE, S_HN, S_NREQ, S_ERR, S_HASELV, S_TAGWAIT, S_HNU) = range(19)
NS = 19
# policy codes
(POL_HEAD, POL_CLEARED, POL_ORDER, POL_CAND, POL_CHECK, POL_MAXCNT, POL_STEP, POL_THINK,
 POL_UNPLUG, POL_R0MAP) = range(10)
ORDER_FIFO_SORTED, ORDER_LIFO, ORDER_FIFO = 0, 1, 2
CAND_SCAN, CAND_NEWEST, CAND_OLDEST = 0, 1, 2
# node codes
KIND_DISK, KIND_RAID0, KIND_RAID5 = 0, 1, 2
(L_MAXSEC, L_CHUNKSEC, L_PBS, L_LBS, L_MAXSEGS, L_SEGSIZE, L_NOMERGES, L_QD, L_KIND, L_DEV,
 L_CHUNK, L_DOFF, L_LAYOUT, L_NMEM, L_ELV, L_TAGLIM, L_ALLOC) = range(17)
NLF = 17
F_NOMERGE = 1
EV_COMPLETE = 0
EV_UNIT = 1
#: Initial pool rows and event-buffer bounds (tests shrink them to exercise the resume path).
#: The event buffer is sized from the input (up to MAX_EVENTS_BUFFER rows, 51 bytes each: 1.7
#: GB of address space) so that one chunk holds a run of millions of bios: np.empty leaves the
#: rows never written without memory behind them, and the table's columns are that chunk's
#: arrays (sorted and numbered in place, :func:`workers.model.replay.event_columns`).
MIN_POOL = 1 << 16
MIN_EVENTS = 1 << 16
MAX_EVENTS_BUFFER = 1 << 25
#: Requests one plug list may hold (``max_plug_count`` x 4 at most; ``blk_add_rq_to_plug``).
PLUG_SCRATCH = 4096
#: Rows of ``_flush``'s scratch array: the plug list in pop order, a done flag per entry, and
#: the requests of the group being dispatched.
TMP_ORDER, TMP_DONE, TMP_GROUP = range(3)
TMP_ROWS = 3
_LAYOUTS = {"left-symmetric": 0, "left_symmetric": 0, "": 0, "2": 0, "left-asymmetric": 1,
            "left_asymmetric": 1, "0": 1, "right-asymmetric": 2, "right_asymmetric": 2, "1": 2,
            "right-symmetric": 3, "right_symmetric": 3, "3": 3}


def eligible(bios_rwbs: npt.NDArray[np.int64], stack: Stack, limits: dict[int, QueueLimits]
             ) -> bool:
    """True when :func:`run_fast` models this replay exactly (see the module docstring)."""
    from workers.events import RWBS_DISCARD, RWBS_SECURE, RWBS_WRITE, RWBS_WRITE_ZEROES

    top = stack.top
    if top.approximates.startswith("dm-"):
        return False  # dm_split_and_process_bio does not split normal I/O to limits: Python only
    if top.kind == "disk":
        pass
    elif top.kind in ("raid0", "raid5"):
        if any(m.kind != "disk" for m in top.members):
            return False
        if top.failed:
            return False  # a degraded array reads through the stripe cache: Python only
        if top.kind == "raid0" and len({top.member_size(i) for i in range(len(top.members))}) > 1:
            return False
        if top.kind == "raid5" and top.layout not in _LAYOUTS:
            return False
        if top.kind == "raid5" and len(bios_rwbs) and np.any(bios_rwbs & RWBS_WRITE):
            return False  # the stripe cache (read-modify-write ...) is Python only
    else:
        return False
    if len(bios_rwbs) and np.any(bios_rwbs & (RWBS_DISCARD | RWBS_SECURE | RWBS_WRITE_ZEROES)):
        return False
    return True


# --- small helpers ---------------------------------------------------------------------------------
@_jit
def _ev(EV: Any, S: Any, t: int, dev: int, pid: int, act: int, rwbs: int, sec: int, nr: int,
        aux: int, aux2: int) -> None:
    # EV holds one array per field in the EventTable's own dtypes (evbuf.new_events): the table
    # takes them as its columns, so no event is copied or converted after the run (each
    # value is cast as numpy's astype casts it)
    i = S[S_EVN]
    EV[EV_TIME][i] = t
    EV[EV_DEV][i] = dev
    EV[EV_PID][i] = pid
    EV[EV_ACT][i] = act
    EV[EV_RWBS][i] = rwbs
    EV[EV_SEC][i] = sec
    EV[EV_NR][i] = nr
    EV[EV_AUX][i] = aux
    EV[EV_AUX2][i] = aux2
    S[S_EVN] = i + 1


@_jit
def _alloc(free: Any, S: Any, which: int) -> int:
    n = S[which]
    if n == 0:
        S[S_ERR] = 1
        return 0
    S[which] = n - 1
    return int(free[n - 1])


@_jit
def _release_slot(free: Any, S: Any, which: int, idx: int) -> None:
    free[S[which]] = idx
    S[which] += 1


@_jit
def _heap_push(H: Any, S: Any, t: int, kind: int, payload: int, cnt: int) -> None:
    """Push on heap ``H`` whose size is ``S[cnt]`` (completions S_HN, unit starts S_HNU)."""
    S[S_HSEQ] += 1
    seq = S[S_HSEQ]
    i = S[cnt]
    S[cnt] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if H[parent, 0] < t or (H[parent, 0] == t and H[parent, 1] < seq):
            break
        H[i, 0] = H[parent, 0]
        H[i, 1] = H[parent, 1]
        H[i, 2] = H[parent, 2]
        H[i, 3] = H[parent, 3]
        i = parent
    H[i, 0] = t
    H[i, 1] = seq
    H[i, 2] = kind
    H[i, 3] = payload


@_jit
def _heap_pop(H: Any, S: Any, cnt: int) -> tuple[int, int, int]:
    t, kind, payload = H[0, 0], H[0, 2], H[0, 3]
    n = S[cnt] - 1
    S[cnt] = n
    if n > 0:
        lt, ls, lk, lp = H[n, 0], H[n, 1], H[n, 2], H[n, 3]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (H[c + 1, 0] < H[c, 0] or (H[c + 1, 0] == H[c, 0] and
                                                         H[c + 1, 1] < H[c, 1])):
                c += 1
            if H[c, 0] < lt or (H[c, 0] == lt and H[c, 1] < ls):
                H[i, 0] = H[c, 0]
                H[i, 1] = H[c, 1]
                H[i, 2] = H[c, 2]
                H[i, 3] = H[c, 3]
                i = c
            else:
                break
        H[i, 0] = lt
        H[i, 1] = ls
        H[i, 2] = lk
        H[i, 3] = lp
    return t, kind, payload


@_jit
def _count(B: Any, P: Any, U: Any, b: int) -> None:
    U[B[b, B_UNIT], 0] += 1
    up = B[b, B_UP]
    if up >= 0:
        P[up, P_REM] += 1


@_jit
def _new_bio(B: Any, FB: Any, S: Any, node: int, sec: int, nr: int, op: int, rwbs: int,
             flags: int, unit: int, up: int, off: int, seg: int, pid: int, fresh: int) -> int:
    b = _alloc(FB, S, S_BFREE)
    B[b, B_NODE] = node
    B[b, B_SEC] = sec
    B[b, B_NR] = nr
    B[b, B_OP] = op
    B[b, B_RWBS] = rwbs
    B[b, B_FLAGS] = flags
    B[b, B_UNIT] = unit
    B[b, B_UP] = up
    B[b, B_OFF] = off
    B[b, B_SEG] = seg
    B[b, B_PID] = pid
    B[b, B_FRESH] = fresh
    B[b, B_NEXT] = -1
    return b


@_jit
def _enqueue(B: Any, S: Any, L: Any, EV: Any, POL: Any, b: int, split: bool) -> None:
    """submit_bio_noacct_nocheck with current->bio_list active."""
    if B[b, B_FRESH]:
        _ev(EV, S, S[S_NOW], L[B[b, B_NODE], L_DEV], B[b, B_PID], ACT_QUEUE, B[b, B_RWBS], B[b, B_SEC],
            B[b, B_NR], 0, 0)
        S[S_NOW] += POL[POL_STEP]
        B[b, B_FRESH] = 0
    B[b, B_NEXT] = -1
    if split and POL[POL_HEAD]:
        B[b, B_NEXT] = S[S_BL0H]
        S[S_BL0H] = b
        if S[S_BL0T] < 0:
            S[S_BL0T] = b
    else:
        if S[S_BL0T] < 0:
            S[S_BL0H] = b
        else:
            B[S[S_BL0T], B_NEXT] = b
        S[S_BL0T] = b


@_jit
def _pop0(B: Any, S: Any) -> int:
    b = S[S_BL0H]
    if b >= 0:
        S[S_BL0H] = B[b, B_NEXT]
        if S[S_BL0H] < 0:
            S[S_BL0T] = -1
        B[b, B_NEXT] = -1
    return int(b)


@_jit
def _front_len(sec: int, nr: int, off: int, seg: int, L: Any, node: int) -> int:
    max_sectors = L[node, L_MAXSEC]
    cs = L[node, L_CHUNKSEC]
    if cs:
        left = cs - sec % cs
        if left < max_sectors:
            max_sectors = left
    pbs = L[node, L_PBS]
    start = sec % pbs
    end = (start + max_sectors) - (start + max_sectors) % pbs
    lbs = L[node, L_LBS]
    if end > start:
        by_size = end - start
    else:
        by_size = max_sectors - max_sectors % lbs
    # split.segment_reach (bvec_split_segs): segments restart at each run and at the remainder
    m = L[node, L_SEGSIZE]
    segs = L[node, L_MAXSEGS]
    if seg > 0:
        first = seg - off % seg
        c0 = -(-first // m)
        if segs <= c0:
            reach = segs * m if segs * m < first else first
        else:
            c = -(-seg // m)
            reach = first + ((segs - c0) // c) * seg + ((segs - c0) % c) * m
    else:
        reach = segs * m
    by_segs = reach >> 9
    by_segs -= by_segs % lbs
    n = by_size if by_size < by_segs else by_segs
    if n <= 0:
        n = by_size if by_size > lbs else lbs
    if n > nr:
        n = nr
    return int(n)


@_jit
def _split_to_limits(B: Any, FB: Any, P: Any, U: Any, S: Any, L: Any, EV: Any, POL: Any,
                     b: int) -> int:
    node = B[b, B_NODE]
    nr = B[b, B_NR]
    f = _front_len(B[b, B_SEC], nr, B[b, B_OFF], B[b, B_SEG], L, node)
    if f >= nr:
        return b
    sec = B[b, B_SEC]
    # X carries the front piece's size, as blk_add_trace_split records the split bio
    _ev(EV, S, S[S_NOW], L[node, L_DEV], B[b, B_PID], ACT_SPLIT, B[b, B_RWBS], sec, f, sec + f, 0)
    S[S_NOW] += POL[POL_STEP]
    front = _new_bio(B, FB, S, node, sec, f, B[b, B_OP], B[b, B_RWBS], B[b, B_FLAGS] | F_NOMERGE,
                     B[b, B_UNIT], B[b, B_UP], B[b, B_OFF], B[b, B_SEG], B[b, B_PID], 0)
    _count(B, P, U, front)
    B[b, B_SEC] = sec + f
    B[b, B_NR] = nr - f
    B[b, B_OFF] += f << 9
    B[b, B_FRESH] = 0
    _enqueue(B, S, L, EV, POL, b, True)
    return front


@_jit
def _personality_split(B: Any, FB: Any, P: Any, U: Any, S: Any, L: Any, EV: Any, POL: Any,
                       b: int, nr: int) -> int:
    node = B[b, B_NODE]
    sec = B[b, B_SEC]
    if POL[POL_HEAD]:
        _ev(EV, S, S[S_NOW], L[node, L_DEV], B[b, B_PID], ACT_SPLIT, B[b, B_RWBS], sec, nr, sec + nr,
            0)
        S[S_NOW] += POL[POL_STEP]
    front = _new_bio(B, FB, S, node, sec, nr, B[b, B_OP], B[b, B_RWBS], B[b, B_FLAGS],
                     B[b, B_UNIT], B[b, B_UP], B[b, B_OFF], B[b, B_SEG], B[b, B_PID], 0)
    _count(B, P, U, front)
    B[b, B_SEC] = sec + nr
    B[b, B_NR] -= nr
    B[b, B_OFF] += nr << 9
    B[b, B_FRESH] = 0
    _enqueue(B, S, L, EV, POL, b, True)
    return front


@_jit
def _remap(B: Any, FB: Any, P: Any, U: Any, S: Any, L: Any, EV: Any, POL: Any, b: int,
           member: int, msec: int, nr: int, piece: int) -> None:
    child = _new_bio(B, FB, S, member, msec, nr, B[b, B_OP], B[b, B_RWBS], B[b, B_FLAGS],
                     B[b, B_UNIT], piece, B[b, B_OFF], B[b, B_SEG], B[b, B_PID], 1)
    _count(B, P, U, child)
    _ev(EV, S, S[S_NOW], L[member, L_DEV], B[b, B_PID], ACT_REMAP, B[b, B_RWBS], msec, nr, B[b, B_SEC],
        L[B[b, B_NODE], L_DEV])
    S[S_NOW] += POL[POL_STEP]
    _enqueue(B, S, L, EV, POL, child, False)


@_jit
def _new_piece(B: Any, P: Any, FP: Any, S: Any, b: int) -> int:
    p = _alloc(FP, S, S_PFREE)
    P[p, P_NODE] = B[b, B_NODE]
    P[p, P_SEC] = B[b, B_SEC]
    P[p, P_NR] = B[b, B_NR]
    P[p, P_RWBS] = B[b, B_RWBS]
    P[p, P_REM] = 0
    P[p, P_UP] = B[b, B_UP]
    P[p, P_PID] = B[b, B_PID]
    if B[b, B_UP] >= 0:
        P[B[b, B_UP], P_REM] += 1
    return p


@_jit
def _schedule(T: Any, UT: Any, H: Any, S: Any, th: int, t: int) -> None:
    # T: [next, end, inflight, depth]
    while T[th, 0] < T[th, 1] and (T[th, 3] == 0 or T[th, 2] < T[th, 3]):
        u = T[th, 0]
        ut = UT[u]
        start = (ut if ut > t else t) if T[th, 3] > 0 else ut
        _heap_push(H, S, start, 1, u, S_HNU)
        T[th, 0] += 1
        T[th, 2] += 1


@_jit
def _release(B: Any, P: Any, FP: Any, U: Any, T: Any, UT: Any, H: Any, S: Any, L: Any, EV: Any,
             POL: Any, b: int, t: int) -> None:
    up = B[b, B_UP]
    while up >= 0:
        P[up, P_REM] -= 1
        if P[up, P_REM] > 0:
            break
        _ev(EV, S, t, L[P[up, P_NODE], L_DEV], P[up, P_PID], ACT_COMPLETE, P[up, P_RWBS], P[up, P_SEC],
            P[up, P_NR], 0, 0)
        nxt = P[up, P_UP]
        _release_slot(FP, S, S_PFREE, up)
        up = nxt
    unit = B[b, B_UNIT]
    U[unit, 0] -= 1
    if U[unit, 0] == 0 and U[unit, 1]:
        th = U[unit, 2]
        T[th, 2] -= 1
        if T[th, 3] > 0:
            _schedule(T, UT, H, S, th, t + POL[POL_THINK])


@_jit
def _server_submit(SV: Any, SVU: Any, SVP: Any, node: int, t: int, sec: int, nr: int,
                   is_write: bool) -> int:
    """workers.model.timing.DeviceServer.submit for non-discards (same float arithmetic)."""
    # SV: [kind, par, bus_free, last_c, head, busy]
    par = int(SV[node, 1])
    u = 0
    if par > 1:
        best = SVU[node, 0]
        for k in range(1, par):
            if SVU[node, k] < best:
                best = SVU[node, k]
                u = k
    start = float(t)
    if SVU[node, u] > start:
        start = SVU[node, u]
    setup, xfer = _service_parts(int(SV[node, 0]), SVP[node], sec, nr, is_write, False,
                                 int(SV[node, 4]))
    c = start + setup
    if SV[node, 2] > c:
        c = SV[node, 2]
    c = c + xfer
    SVU[node, u] = c
    SV[node, 5] += setup + xfer
    SV[node, 2] = c
    if c > SV[node, 3]:
        SV[node, 3] = c
    SV[node, 4] = sec + nr
    return int(math.ceil(c))


# --- the mq-deadline-like elevator (workers.model.elevator.DeadlineQueue) ------------------------
# mq-deadline's defaults come from workers.model.elevator (numba reads them as constants)

# DS per node: next_pos read, next_pos write, batching, last_dir, starved, n, n_read, n_write
DS_NP0, DS_NP1, DS_BATCH, DS_LAST, DS_STARVED, DS_N, DS_NR0, DS_NR1 = range(8)


# --- the elevator's merge lookups: an array hash map with dict semantics ------------------------
# DeadlineQueue.by_end / by_start are dicts (op, sector) -> request. Here each is a table keyed
# (node, op, sector) in plain arrays: open addressing, linear probing, backward-shift deletion
# (no tombstones). A numba typed Dict would need numba's reference counting, which this module
# leaves off (see _jit). Each queued request holds at most one entry per map, and run_fast keeps
# a table at most half full (``_run`` returns to Python to grow it, like the pools).
# Python twin: the dicts of DeadlineQueue; tests/engine/model/test_fast.py drives both with
# the same random operations.

#: The two maps: by end sector (back merges, insert merges) and by start sector (front merges).
MAP_BYEND, MAP_BYSTART = 0, 1
NMAPS = 2
#: Key columns of a slot (HK[map, slot, column]); HV[map, slot] is the request + 1 (0: empty).
HK_NODE, HK_OP, HK_SEC = 0, 1, 2
NHK = 3
#: HC: live entries per map, then log2 of the slots per map.
HC_BITS = NMAPS
#: 2**64 / golden ratio (Fibonacci hashing: sectors a chunk apart still spread over the table).
_FIB = np.uint64(11400714819323198485)
#: Initial slots per map: a power of two at least this many, and at least
#: HASH_SLOTS_PER_MARGIN x the pool margin (one unit's worth of requests), so that a run
#: rarely returns to grow them (tests lower both to exercise the growth).
MIN_HASH_SLOTS = 1 << 10
HASH_SLOTS_PER_MARGIN = 4


@_jit
def _hash_home(HC: Any, node: int, op: int, sec: int) -> int:
    """The slot a key hashes to: the top HC_BITS bits of key x golden ratio."""
    x = (np.uint64(sec) << np.uint64(12)) ^ np.uint64(node * 2 + op)
    return int(np.int64((x * _FIB) >> np.uint64(64 - HC[HC_BITS])))


@_jit
def _hash_find(HK: Any, HV: Any, HC: Any, m: int, node: int, op: int, sec: int) -> int:
    """The slot holding the key, or -1 - (the empty slot where it would go)."""
    mask = HV.shape[1] - 1
    i = _hash_home(HC, node, op, sec)
    while HV[m, i] != 0:
        if HK[m, i, HK_SEC] == sec and HK[m, i, HK_NODE] == node and HK[m, i, HK_OP] == op:
            return i
        i = (i + 1) & mask
    return -1 - i


@_jit
def _hash_get(HK: Any, HV: Any, HC: Any, m: int, node: int, op: int, sec: int) -> int:
    """``d.get(key, -1)``."""
    i = _hash_find(HK, HV, HC, m, node, op, sec)
    return int(HV[m, i] - 1) if i >= 0 else -1


@_jit
def _hash_set(HK: Any, HV: Any, HC: Any, m: int, node: int, op: int, sec: int, rq: int) -> None:
    """``d[key] = rq``."""
    i = _hash_find(HK, HV, HC, m, node, op, sec)
    if i < 0:
        i = -1 - i
        HK[m, i, HK_NODE] = node
        HK[m, i, HK_OP] = op
        HK[m, i, HK_SEC] = sec
        HC[m] += 1
    HV[m, i] = rq + 1


@_jit
def _hash_del_if(HK: Any, HV: Any, HC: Any, m: int, node: int, op: int, sec: int,
                 rq: int) -> None:
    """``if d.get(key) == rq: del d[key]``; later entries of the probe run shift back into the
    hole unless their home slot lies cyclically in (hole, their slot]."""
    i = _hash_find(HK, HV, HC, m, node, op, sec)
    if i < 0 or HV[m, i] != rq + 1:
        return
    mask = HV.shape[1] - 1
    j = i
    while True:
        j = (j + 1) & mask
        if HV[m, j] == 0:
            break
        k = _hash_home(HC, HK[m, j, HK_NODE], HK[m, j, HK_OP], HK[m, j, HK_SEC])
        stays = (i < k <= j) if i <= j else (k > i or k <= j)
        if stays:
            continue
        HK[m, i, HK_NODE] = HK[m, j, HK_NODE]
        HK[m, i, HK_OP] = HK[m, j, HK_OP]
        HK[m, i, HK_SEC] = HK[m, j, HK_SEC]
        HV[m, i] = HV[m, j]
        i = j
    HV[m, i] = 0
    HC[m] -= 1


@_jit
def _hash_rehash(HK: Any, HV: Any, HC: Any, NK: Any, NV: Any, NC: Any) -> None:
    """Insert every entry of the old tables into the (empty, larger) new ones."""
    for m in range(HV.shape[0]):
        for i in range(HV.shape[1]):
            if HV[m, i] != 0:
                _hash_set(NK, NV, NC, m, HK[m, i, HK_NODE], HK[m, i, HK_OP], HK[m, i, HK_SEC],
                          HV[m, i] - 1)


def new_hash(slots: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                  npt.NDArray[np.int64]]:
    """Empty tables (HK, HV, HC) of ``slots`` (a power of two) slots per map."""
    hc = np.zeros(NMAPS + 1, np.int64)
    hc[HC_BITS] = slots.bit_length() - 1
    return (np.zeros((NMAPS, slots, NHK), np.int64), np.zeros((NMAPS, slots), np.int64), hc)


def grow_hash(HK: npt.NDArray[np.int64], HV: npt.NDArray[np.int64], HC: npt.NDArray[np.int64]
              ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Tables of twice the slots holding the same entries."""
    NK, NV, NC = new_hash(2 * HV.shape[1])
    _hash_rehash(HK, HV, HC, NK, NV, NC)
    return NK, NV, NC


@_jit
def _dd_bisect(KS: Any, KR: Any, KN: Any, row: int, sector: int, rid: int) -> int:
    lo = 0
    hi = KN[row]
    while lo < hi:
        mid = (lo + hi) >> 1
        if KS[row, mid] < sector or (KS[row, mid] == sector and KR[row, mid] < rid):
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def _dd_add(R: Any, E: Any, node: int, rq: int, keep_fifo: bool) -> None:
    KS, KR, KSL, KN, FH, FT, DS, HK, HV, HC = E
    d = 0 if R[rq, R_OP] == 0 else 1
    row = node * 2 + d
    i = _dd_bisect(KS, KR, KN, row, R[rq, R_SEC], R[rq, R_RID])
    n = KN[row]
    for j in range(n, i, -1):
        KS[row, j] = KS[row, j - 1]
        KR[row, j] = KR[row, j - 1]
        KSL[row, j] = KSL[row, j - 1]
    KS[row, i] = R[rq, R_SEC]
    KR[row, i] = R[rq, R_RID]
    KSL[row, i] = rq
    KN[row] = n + 1
    if not keep_fifo:
        R[rq, R_FNEXT] = -1
        R[rq, R_FPREV] = FT[row]
        if FT[row] >= 0:
            R[FT[row], R_FNEXT] = rq
        else:
            FH[row] = rq
        FT[row] = rq
    _hash_set(HK, HV, HC, MAP_BYEND, node, R[rq, R_OP], R[rq, R_SEC] + R[rq, R_NR], rq)
    _hash_set(HK, HV, HC, MAP_BYSTART, node, R[rq, R_OP], R[rq, R_SEC], rq)
    DS[node, DS_N] += 1
    DS[node, DS_NR0 + d] += 1


@_jit
def _dd_remove(R: Any, E: Any, node: int, rq: int, old_sec: int, old_end: int,
               drop_fifo: bool) -> None:
    KS, KR, KSL, KN, FH, FT, DS, HK, HV, HC = E
    d = 0 if R[rq, R_OP] == 0 else 1
    row = node * 2 + d
    i = _dd_bisect(KS, KR, KN, row, old_sec, R[rq, R_RID])
    n = KN[row]
    if i < n and KS[row, i] == old_sec and KR[row, i] == R[rq, R_RID]:
        for j in range(i, n - 1):
            KS[row, j] = KS[row, j + 1]
            KR[row, j] = KR[row, j + 1]
            KSL[row, j] = KSL[row, j + 1]
        KN[row] = n - 1
    op = R[rq, R_OP]
    _hash_del_if(HK, HV, HC, MAP_BYEND, node, op, old_end, rq)
    _hash_del_if(HK, HV, HC, MAP_BYSTART, node, op, old_sec, rq)
    DS[node, DS_N] -= 1
    DS[node, DS_NR0 + d] -= 1
    if drop_fifo:
        pv = R[rq, R_FPREV]
        nx = R[rq, R_FNEXT]
        if pv >= 0:
            R[pv, R_FNEXT] = nx
        else:
            FH[row] = nx
        if nx >= 0:
            R[nx, R_FPREV] = pv
        else:
            FT[row] = pv


@_jit
def _rq_merge(R: Any, B: Any, L: Any, front: int, back: int) -> bool:
    """attempt_rq_merge: ``back`` continues ``front``."""
    if R[front, R_NOMERGE] or R[back, R_NOMERGE] or R[front, R_OP] != R[back, R_OP] or \
            R[front, R_SEC] + R[front, R_NR] != R[back, R_SEC]:
        return False
    node = R[front, R_NODE]
    if R[front, R_NR] + R[back, R_NR] > _rq_max(L, node, R[front, R_SEC]):
        return False
    if R[front, R_NSEGS] + R[back, R_NSEGS] > L[node, L_MAXSEGS]:
        return False
    R[front, R_NR] += R[back, R_NR]
    R[front, R_NSEGS] += R[back, R_NSEGS]
    B[R[front, R_BTAIL], B_NEXT] = R[back, R_BHEAD]
    R[front, R_BTAIL] = R[back, R_BTAIL]
    return True


@_jit
def _dd_insert(R: Any, B: Any, FR: Any, S: Any, L: Any, E: Any, node: int, rq: int,
               t: int) -> None:
    prev = _hash_get(E[7], E[8], E[9], MAP_BYEND, node, R[rq, R_OP], R[rq, R_SEC])
    if prev >= 0:
        if not R[prev, R_NOMERGE]:
            old_s = R[prev, R_SEC]
            old_e = old_s + R[prev, R_NR]
            if _rq_merge(R, B, L, prev, rq):
                _dd_remove(R, E, node, prev, old_s, old_e, False)
                _dd_add(R, E, node, prev, True)
                _release_slot(FR, S, S_RFREE, rq)
                L[node, L_ALLOC] -= 1
                return
    R[rq, R_TINS] = t
    _dd_add(R, E, node, rq, False)


@_jit
def _dd_bio_merge(R: Any, B: Any, L: Any, E: Any, node: int, b: int, nsegs: int) -> int:
    HK, HV, HC = E[7], E[8], E[9]
    op = B[b, B_OP]
    rq = _hash_get(HK, HV, HC, MAP_BYEND, node, op, B[b, B_SEC])
    if rq >= 0:
        old_s = R[rq, R_SEC]
        old_e = old_s + R[rq, R_NR]
        kind = _merge(R, B, L, rq, b, nsegs)
        if kind:
            _dd_remove(R, E, node, rq, old_s, old_e, False)
            _dd_add(R, E, node, rq, True)
            return kind
    rq = _hash_get(HK, HV, HC, MAP_BYSTART, node, op, B[b, B_SEC] + B[b, B_NR])
    if rq >= 0:
        old_s = R[rq, R_SEC]
        old_e = old_s + R[rq, R_NR]
        kind = _merge(R, B, L, rq, b, nsegs)
        if kind:
            _dd_remove(R, E, node, rq, old_s, old_e, False)
            _dd_add(R, E, node, rq, True)
            return kind
    return 0


@_jit
def _dd_next_in_sweep(E: Any, node: int, d: int) -> int:
    KS, KR, KSL, KN, FH, FT, DS, HK, HV, HC = E
    pos = DS[node, DS_NP0 + d]
    if pos < 0:
        return -1
    row = node * 2 + d
    i = _dd_bisect(KS, KR, KN, row, pos, -1)
    if i >= KN[row]:
        return -1
    return int(KSL[row, i])


@_jit
def _dd_pop(R: Any, E: Any, node: int, t: int) -> int:
    KS, KR, KSL, KN, FH, FT, DS, HK, HV, HC = E
    if DS[node, DS_N] == 0:
        return -1
    d = DS[node, DS_LAST]
    rq = _dd_next_in_sweep(E, node, d) if DS[node, DS_NR0 + d] > 0 else -1
    new_batch = True
    if rq >= 0 and DS[node, DS_BATCH] < FIFO_BATCH:
        new_batch = False
    else:
        reads = DS[node, DS_NR0] > 0
        writes = DS[node, DS_NR1] > 0
        d = 0 if reads and (not writes or DS[node, DS_STARVED] < WRITES_STARVED) else 1
        rq = _dd_next_in_sweep(E, node, d)
        head = FH[node * 2 + d]
        expired = head >= 0 and t - R[head, R_TINS] >= (READ_EXPIRE_NS if d == 0
                                                         else WRITE_EXPIRE_NS)
        if expired or rq < 0:
            rq = head
    if new_batch:
        if d == 0:
            if DS[node, DS_NR1] > 0:
                DS[node, DS_STARVED] += 1
        else:
            DS[node, DS_STARVED] = 0
        DS[node, DS_BATCH] = 0
        DS[node, DS_LAST] = d
    _dd_remove(R, E, node, rq, R[rq, R_SEC], R[rq, R_SEC] + R[rq, R_NR], True)
    DS[node, DS_BATCH] += 1
    DS[node, DS_NP0 + d] = R[rq, R_SEC] + R[rq, R_NR]
    return int(rq)


@_jit_inline
def _kick(R: Any, Q: Any, INF: Any, H: Any, S: Any, L: Any, EV: Any, SV: Any, SVU: Any,
          SVP: Any, E: Any, node: int, t: int) -> None:
    qd = L[node, L_QD]
    if qd < 1:
        qd = 1
    elv = L[node, L_ELV]
    DS = E[6]
    while INF[node] < qd and ((elv and DS[node, DS_N] > 0) or (not elv and Q[node, 0] >= 0)):
        if elv:
            rq = _dd_pop(R, E, node, t)
        else:
            rq = Q[node, 0]
            Q[node, 0] = R[rq, R_NEXT]
            if Q[node, 0] < 0:
                Q[node, 1] = -1
        _ev(EV, S, t, L[node, L_DEV], R[rq, R_PID], ACT_ISSUE, R[rq, R_RWBS], R[rq, R_SEC], R[rq, R_NR],
            0, 0)
        c = _server_submit(SV, SVU, SVP, node, t, R[rq, R_SEC], R[rq, R_NR],
                           R[rq, R_OP] != 0)
        if c < t + 1:
            c = t + 1
        INF[node] += 1
        _heap_push(H, S, c, 0, rq, S_HN)


@_jit
def _rq_max(L: Any, node: int, offset: int) -> int:
    cs = L[node, L_CHUNKSEC]
    ms = L[node, L_MAXSEC]
    if not cs:
        return int(ms)
    left = cs - offset % cs
    return int(left if left < ms else ms)


@_jit
def _merge(R: Any, B: Any, L: Any, rq: int, b: int, nsegs: int) -> int:
    """attempt_bio_merge for READ/WRITE: 0 none, 1 back, 2 front."""
    if R[rq, R_NOMERGE] or B[b, B_FLAGS] & F_NOMERGE or R[rq, R_OP] != B[b, B_OP] or \
            R[rq, R_NODE] != B[b, B_NODE]:
        return 0
    node = R[rq, R_NODE]
    if R[rq, R_SEC] + R[rq, R_NR] == B[b, B_SEC]:
        if R[rq, R_NR] + B[b, B_NR] > _rq_max(L, node, R[rq, R_SEC]) or \
                R[rq, R_NSEGS] + nsegs > L[node, L_MAXSEGS]:
            R[rq, R_NOMERGE] = 1
            return 0
        R[rq, R_NR] += B[b, B_NR]
        R[rq, R_NSEGS] += nsegs
        B[b, B_NEXT] = -1
        B[R[rq, R_BTAIL], B_NEXT] = b
        R[rq, R_BTAIL] = b
        return MERGE_BACK
    if R[rq, R_SEC] - B[b, B_NR] == B[b, B_SEC]:
        if R[rq, R_NR] + B[b, B_NR] > _rq_max(L, node, B[b, B_SEC]) or \
                R[rq, R_NSEGS] + nsegs > L[node, L_MAXSEGS]:
            R[rq, R_NOMERGE] = 1
            return 0
        R[rq, R_SEC] = B[b, B_SEC]
        R[rq, R_NR] += B[b, B_NR]
        R[rq, R_NSEGS] += nsegs
        B[b, B_NEXT] = R[rq, R_BHEAD]
        R[rq, R_BHEAD] = b
        return MERGE_FRONT
    return MERGE_NONE


@_jit
def _plug_merge(R: Any, B: Any, L: Any, PL: Any, S: Any, POL: Any, b: int, nsegs: int) -> int:
    n = S[S_PLN]
    if n == 0:
        return 0
    node = B[b, B_NODE]
    cand = POL[POL_CAND]
    if cand == CAND_SCAN:
        for k in range(n - 1, -1, -1):
            rq = PL[k]
            if R[rq, R_NODE] != node:
                continue
            kind = _merge(R, B, L, rq, b, nsegs)
            if kind:
                return kind
        return 0
    lifo = POL[POL_ORDER] == ORDER_LIFO
    if cand == CAND_NEWEST and not lifo:
        tail = PL[n - 1]
        if R[tail, R_NODE] == node:
            return _merge(R, B, L, tail, b, nsegs)
        if not S[S_MULTI]:
            return 0
    for j in range(n):
        rq = PL[n - 1 - j] if lifo else PL[j]
        if R[rq, R_NODE] == node:
            return _merge(R, B, L, rq, b, nsegs)
        if not S[S_MULTI]:
            return 0
    return 0


@_jit
def _flush(R: Any, B: Any, FR: Any, Q: Any, INF: Any, H: Any, S: Any, L: Any, EV: Any, SV: Any,
           SVU: Any, SVP: Any, E: Any, PL: Any, POL: Any, TMP: Any, sched: int) -> None:
    n = S[S_PLN]
    if n == 0:
        return
    S[S_PLN] = 0
    order = POL[POL_ORDER]
    for k in range(n):
        TMP[TMP_ORDER, k] = PL[n - 1 - k] if order == ORDER_LIFO else PL[k]
    multi = S[S_MULTI]
    if order == ORDER_FIFO_SORTED and multi and n > 1:
        # stable insertion sort by (node, sector)
        for i in range(1, n):
            x = TMP[TMP_ORDER, i]
            j = i - 1
            dj = L[R[TMP[TMP_ORDER, j], R_NODE], L_DEV] if j >= 0 else 0
            dx = L[R[x, R_NODE], L_DEV]
            while j >= 0 and (dj > dx or (dj == dx and R[TMP[TMP_ORDER, j], R_SEC] > R[x, R_SEC])):
                TMP[TMP_ORDER, j + 1] = TMP[TMP_ORDER, j]
                j -= 1
                if j >= 0:
                    dj = L[R[TMP[TMP_ORDER, j], R_NODE], L_DEV]
            TMP[TMP_ORDER, j + 1] = x
    S[S_MULTI] = 0
    has_elv = S[S_HASELV]
    S[S_HASELV] = 0
    if not multi and not has_elv and not sched:
        node = R[TMP[TMP_ORDER, 0], R_NODE]
        if POL[POL_UNPLUG]:
            # trace_block_unplug(q, plug->rq_count, true) of the direct path (6.12+)
            _ev(EV, S, S[S_NOW], L[node, L_DEV], R[TMP[TMP_ORDER, 0], R_PID], ACT_UNPLUG_IO, RWBS_NONE, 0, 0, n, 0)
        for k in range(n):
            _qappend(R, Q, node, TMP[TMP_ORDER, k])
        _kick(R, Q, INF, H, S, L, EV, SV, SVU, SVP, E, node, S[S_NOW])
        S[S_NOW] += POL[POL_STEP]
        return
    # group by node in pop order, in the scratch rows (no allocation inside the loop)
    done = TMP[TMP_DONE]
    grp = TMP[TMP_GROUP]
    for k in range(n):
        done[k] = 0
    for k in range(n):
        if done[k]:
            continue
        node = R[TMP[TMP_ORDER, k], R_NODE]
        g = 0
        for j in range(k, n):
            if not done[j] and R[TMP[TMP_ORDER, j], R_NODE] == node:
                done[j] = 1
                grp[g] = TMP[TMP_ORDER, j]
                g += 1
        if order == ORDER_LIFO:
            # LIFO re-reverses the group to FIFO
            for j in range(g // 2):
                x = grp[j]
                grp[j] = grp[g - 1 - j]
                grp[g - 1 - j] = x
        # blk_mq_dispatch_plug_list: trace_block_unplug(q, depth, !from_sched)
        _ev(EV, S, S[S_NOW], L[node, L_DEV], R[grp[0], R_PID],
            ACT_UNPLUG_TIMER if sched else ACT_UNPLUG_IO, RWBS_NONE, 0, 0, g, 0)
        for j in range(g):
            rq = grp[j]
            if L[node, L_ELV]:
                _ev(EV, S, S[S_NOW], L[node, L_DEV], R[rq, R_PID], ACT_INSERT, R[rq, R_RWBS],
                    R[rq, R_SEC], R[rq, R_NR], 0, 0)
                _dd_insert(R, B, FR, S, L, E, node, rq, S[S_NOW])
            else:
                _qappend(R, Q, node, rq)
        _kick(R, Q, INF, H, S, L, EV, SV, SVU, SVP, E, node, S[S_NOW])
        S[S_NOW] += POL[POL_STEP]


@_jit
def _qappend(R: Any, Q: Any, node: int, rq: int) -> None:
    R[rq, R_NEXT] = -1
    if Q[node, 1] < 0:
        Q[node, 0] = rq
    else:
        R[Q[node, 1], R_NEXT] = rq
    Q[node, 1] = rq


@_jit
def _mq_submit(B: Any, FB: Any, P: Any, FP: Any, U: Any, T: Any, UT: Any, HU: Any, R: Any,
               FR: Any, Q: Any, INF: Any, H: Any,
               S: Any, L: Any, EV: Any, POL: Any, SV: Any, SVU: Any, SVP: Any, E: Any, PL: Any,
               TMP: Any, b: int) -> None:
    b = _split_to_limits(B, FB, P, U, S, L, EV, POL, b)
    node = B[b, B_NODE]
    u = L[node, L_SEGSIZE]
    seg = B[b, B_SEG]
    if seg > 0 and seg < u:
        u = seg
    off = B[b, B_OFF]
    nsegs = -(-(off + (B[b, B_NR] << 9)) // u) - off // u
    if nsegs < 1:
        nsegs = 1
    if not B[b, B_FLAGS] & F_NOMERGE and L[node, L_NOMERGES] < 2:
        kind = _plug_merge(R, B, L, PL, S, POL, b, nsegs)
        if not kind and L[node, L_ELV]:
            kind = _dd_bio_merge(R, B, L, E, node, b, nsegs)
        if kind:
            _ev(EV, S, S[S_NOW], L[node, L_DEV], B[b, B_PID],
                ACT_FRONTMERGE if kind == MERGE_FRONT else ACT_BACKMERGE,
                B[b, B_RWBS], B[b, B_SEC], B[b, B_NR], 0, 0)
            S[S_NOW] += POL[POL_STEP]
            return
    if L[node, L_ALLOC] >= L[node, L_TAGLIM]:
        # blk_mq_get_tag sleeps (Engine.wait_for_tag): io_schedule flushes the plug from
        # schedule, then completions are processed until this device has a free tag
        _flush(R, B, FR, Q, INF, H, S, L, EV, SV, SVU, SVP, E, PL, POL, TMP, 1)
        while L[node, L_ALLOC] >= L[node, L_TAGLIM] and S[S_HN] > 0:
            t, _, rqc = _heap_pop(H, S, S_HN)
            _complete(B, FB, P, FP, U, T, UT, HU, R, FR, Q, INF, H, S, L, EV, POL, SV, SVU,
                      SVP, E, rqc, t)
    L[node, L_ALLOC] += 1
    rq = _alloc(FR, S, S_RFREE)
    S[S_RID] += 1
    S[S_NREQ] += 1
    R[rq, R_NODE] = node
    R[rq, R_SEC] = B[b, B_SEC]
    R[rq, R_NR] = B[b, B_NR]
    R[rq, R_OP] = B[b, B_OP]
    R[rq, R_RWBS] = B[b, B_RWBS]
    R[rq, R_NOMERGE] = 1 if B[b, B_FLAGS] & F_NOMERGE else 0
    R[rq, R_NSEGS] = nsegs
    R[rq, R_PID] = B[b, B_PID]
    R[rq, R_BHEAD] = b
    R[rq, R_BTAIL] = b
    R[rq, R_NEXT] = -1
    R[rq, R_RID] = S[S_RID]
    R[rq, R_FPREV] = -1
    R[rq, R_FNEXT] = -1
    B[b, B_NEXT] = -1
    _ev(EV, S, S[S_NOW], L[node, L_DEV], B[b, B_PID], ACT_GETRQ, B[b, B_RWBS], B[b, B_SEC], B[b, B_NR],
        0, 0)
    S[S_NOW] += POL[POL_STEP]
    # blk_add_rq_to_plug
    n = S[S_PLN]
    last = -1
    if n > 0:
        last = PL[n - 1] if POL[POL_CHECK] == 0 else PL[0]
        mc = POL[POL_MAXCNT]
        if S[S_MULTI]:
            mc *= 4 if POL[POL_MAXCNT] <= 16 else 2
        if n >= mc or (L[node, L_NOMERGES] == 0 and R[last, R_NR] >= 256):
            _flush(R, B, FR, Q, INF, H, S, L, EV, SV, SVU, SVP, E, PL, POL, TMP, 0)
            _ev(EV, S, S[S_NOW], L[node, L_DEV], R[rq, R_PID], ACT_PLUG, RWBS_NONE, 0, 0, 0, 0)
            last = -1  # the flushed list is empty: rq alone is not "multiple queues"
    else:
        _ev(EV, S, S[S_NOW], L[node, L_DEV], R[rq, R_PID], ACT_PLUG, RWBS_NONE, 0, 0, 0, 0)
    if last >= 0 and R[last, R_NODE] != node:
        S[S_MULTI] = 1
    if L[node, L_ELV]:
        S[S_HASELV] = 1
    PL[S[S_PLN]] = rq
    S[S_PLN] += 1


@_jit
def _raid0_map_submit(B: Any, FB: Any, P: Any, FP: Any, U: Any, T: Any, UT: Any, H: Any, S: Any,
                      L: Any, MEM: Any, EV: Any, POL: Any, b: int) -> None:
    """``raid0_map_submit_bio`` (single zone): map_sector, A, submit to the member; the md bio
    is then consumed (Python twin: Engine._raid0_map_submit)."""
    node = B[b, B_NODE]
    c = L[node, L_CHUNK]
    n = L[node, L_NMEM]
    sec = B[b, B_SEC]
    piece = _new_piece(B, P, FP, S, b)
    idx = (sec // c) % n
    msec = (sec // (c * n)) * c + sec % c + L[node, L_DOFF]
    _remap(B, FB, P, U, S, L, EV, POL, b, MEM[node, idx], msec, B[b, B_NR], piece)
    _release(B, P, FP, U, T, UT, H, S, L, EV, POL, b, S[S_NOW])
    _release_slot(FB, S, S_BFREE, b)


@_jit
def _md_submit(B: Any, FB: Any, P: Any, FP: Any, U: Any, T: Any, UT: Any, H: Any, S: Any,
               L: Any, MEM: Any, EV: Any, POL: Any, b: int) -> None:
    b = _split_to_limits(B, FB, P, U, S, L, EV, POL, b)
    if POL[POL_CLEARED]:
        B[b, B_FLAGS] &= ~F_NOMERGE
    node = B[b, B_NODE]
    c = L[node, L_CHUNK]
    n = L[node, L_NMEM]
    left = c - B[b, B_SEC] % c
    if left < B[b, B_NR]:
        if L[node, L_KIND] == KIND_RAID0 and POL[POL_R0MAP] and B[b, B_NR] - left <= c:
            # raid0_make_request since 319ff40a5427 (Python twin: Engine.raid0_request): the
            # remainder is mapped and submitted to its member first, then the front
            sec = B[b, B_SEC]
            front = _new_bio(B, FB, S, node, sec, left, B[b, B_OP], B[b, B_RWBS],
                             B[b, B_FLAGS], B[b, B_UNIT], B[b, B_UP], B[b, B_OFF], B[b, B_SEG],
                             B[b, B_PID], 0)
            _count(B, P, U, front)
            B[b, B_SEC] = sec + left
            B[b, B_NR] -= left
            B[b, B_OFF] += left << 9
            B[b, B_FRESH] = 0
            _raid0_map_submit(B, FB, P, FP, U, T, UT, H, S, L, MEM, EV, POL, b)
            b = front
        else:
            b = _personality_split(B, FB, P, U, S, L, EV, POL, b, left)
    if L[node, L_KIND] != KIND_RAID5:
        _raid0_map_submit(B, FB, P, FP, U, T, UT, H, S, L, MEM, EV, POL, b)
        return
    sec = B[b, B_SEC]
    piece = _new_piece(B, P, FP, S, b)
    doff = L[node, L_DOFF]
    # raid5 reads (writes go through the Python engine's stripe cache)
    data = n - 1
    chunk_number = sec // c
    off = sec % c
    stripe = chunk_number // data
    dd = chunk_number % data
    lay = L[node, L_LAYOUT]
    if lay == 0 or lay == 1:
        pd = data - stripe % n
    else:
        pd = stripe % n
    if lay == 0 or lay == 3:
        disk = (pd + 1 + dd) % n
    else:
        disk = dd + 1 if dd >= pd else dd
    msec = stripe * c + off + doff
    _remap(B, FB, P, U, S, L, EV, POL, b, MEM[node, disk], msec, B[b, B_NR], piece)
    if B[b, B_OP] == 1:
        _remap(B, FB, P, U, S, L, EV, POL, b, MEM[node, pd], msec, B[b, B_NR], piece)
    _release(B, P, FP, U, T, UT, H, S, L, EV, POL, b, S[S_NOW])
    _release_slot(FB, S, S_BFREE, b)


@_jit_inline
def _complete(B: Any, FB: Any, P: Any, FP: Any, U: Any, T: Any, UT: Any, HU: Any, R: Any,
              FR: Any, Q: Any, INF: Any, H: Any, S: Any, L: Any, EV: Any, POL: Any, SV: Any,
              SVU: Any, SVP: Any, E: Any, rq: int, t: int) -> None:
    """A request completed (Engine.complete): C, bios end, tags freed, dispatch."""
    if t > S[S_NOW]:
        S[S_NOW] = t
    node = R[rq, R_NODE]
    INF[node] -= 1
    L[node, L_ALLOC] -= 1
    _ev(EV, S, t, L[node, L_DEV], 0, ACT_COMPLETE, R[rq, R_RWBS], R[rq, R_SEC], R[rq, R_NR], 0, 0)
    b = R[rq, R_BHEAD]
    while b >= 0:
        nb = B[b, B_NEXT]
        _release(B, P, FP, U, T, UT, HU, S, L, EV, POL, b, t)
        _release_slot(FB, S, S_BFREE, b)
        b = nb
    _release_slot(FR, S, S_RFREE, rq)
    # dispatch at the model clock, which submissions may have moved past t
    _kick(R, Q, INF, H, S, L, EV, SV, SVU, SVP, E, node, S[S_NOW])


@_jit
def _max_of(a: Any) -> int:
    """``a.max()`` (numpy's needs numba's reference counting)."""
    m = a[0]
    for i in range(1, len(a)):
        if a[i] > m:
            m = a[i]
    return int(m)


@_jit
def _run(B: Any, FB: Any, P: Any, FP: Any, U: Any, T: Any, UT: Any, UB: Any, R: Any, FR: Any,
         Q: Any, INF: Any, H: Any, HU: Any, S: Any, L: Any, MEM: Any, EV: Any, POL: Any, SV: Any,
         SVU: Any, SVP: Any, E: Any, PL: Any, TMP: Any, top: int, bsec: Any, bnr: Any, bop: Any,
         brwbs: Any, bflags: Any, bseg: Any, bpid: Any, btime: Any, margin_ev: int,
         margin_pool: int) -> int:
    """Run until the heap is empty (returns 0) or a buffer is low (returns 1: grow, call again)."""
    bio_based = L[top, L_KIND] != KIND_DISK
    while S[S_HN] > 0 or S[S_HNU] > 0:
        if len(EV[EV_TIME]) - S[S_EVN] < margin_ev or S[S_BFREE] < margin_pool or \
                S[S_PFREE] < margin_pool or S[S_RFREE] < margin_pool or \
                H.shape[0] - S[S_HN] < margin_pool or HU.shape[0] - S[S_HNU] < margin_pool or \
                E[0].shape[1] - _max_of(E[3]) < margin_pool or \
                2 * (_max_of(E[9][:NMAPS]) + margin_pool) > E[8].shape[1]:
            return 1
        # the earlier head of the two heaps (one heap ordered by (time, hseq) would give it)
        if S[S_HN] > 0 and (S[S_HNU] == 0 or H[0, 0] < HU[0, 0] or
                            (H[0, 0] == HU[0, 0] and H[0, 1] < HU[0, 1])):
            t, kind, payload = _heap_pop(H, S, S_HN)
        else:
            t, kind, payload = _heap_pop(HU, S, S_HNU)
        if kind == EV_COMPLETE:
            _complete(B, FB, P, FP, U, T, UT, HU, R, FR, Q, INF, H, S, L, EV, POL, SV, SVU, SVP,
                      E, payload, t)
            continue
        u = payload
        th = U[u, 2]
        if t > S[S_NOW]:
            S[S_NOW] = t
        S[S_PLN] = 0
        S[S_MULTI] = 0
        S[S_HASELV] = 0
        sync = T[th, 3] > 0
        for i in range(UB[u, 0], UB[u, 1]):
            if not sync and btime[i] > S[S_NOW]:
                S[S_NOW] = btime[i]
            b = _new_bio(B, FB, S, top, bsec[i], bnr[i], bop[i], brwbs[i], bflags[i], u, -1, 0,
                         bseg[i], bpid[i], 1)
            _count(B, P, U, b)
            # submit_bio_noacct_nocheck without an active bio_list
            _ev(EV, S, S[S_NOW], L[top, L_DEV], bpid[i], ACT_QUEUE, brwbs[i], bsec[i], bnr[i], 0, 0)
            S[S_NOW] += POL[POL_STEP]
            B[b, B_FRESH] = 0
            S[S_BL0H] = -1
            S[S_BL0T] = -1
            cur = b
            while cur >= 0:
                q = B[cur, B_NODE]
                if bio_based:
                    S[S_BL1H] = S[S_BL0H]
                    S[S_BL1T] = S[S_BL0T]
                    S[S_BL0H] = -1
                    S[S_BL0T] = -1
                k = L[q, L_KIND]
                if k == KIND_DISK:
                    _mq_submit(B, FB, P, FP, U, T, UT, HU, R, FR, Q, INF, H, S, L, EV, POL, SV,
                               SVU, SVP, E,
                               PL, TMP, cur)
                else:
                    _md_submit(B, FB, P, FP, U, T, UT, HU, S, L, MEM, EV, POL, cur)
                if bio_based:
                    # lower, then same, then the older pending list
                    lh = -1
                    lt = -1
                    sh = -1
                    st = -1
                    x = S[S_BL0H]
                    while x >= 0:
                        nx = B[x, B_NEXT]
                        B[x, B_NEXT] = -1
                        if B[x, B_NODE] != q:
                            if lt < 0:
                                lh = x
                            else:
                                B[lt, B_NEXT] = x
                            lt = x
                        else:
                            if st < 0:
                                sh = x
                            else:
                                B[st, B_NEXT] = x
                            st = x
                        x = nx
                    hh = -1
                    tt = -1
                    for (ah, at) in ((lh, lt), (sh, st), (S[S_BL1H], S[S_BL1T])):
                        if ah < 0:
                            continue
                        if tt < 0:
                            hh = ah
                        else:
                            B[tt, B_NEXT] = ah
                        tt = at
                    S[S_BL0H] = hh
                    S[S_BL0T] = tt
                    S[S_BL1H] = -1
                    S[S_BL1T] = -1
                cur = _pop0(B, S)
        U[u, 1] = 1
        _flush(R, B, FR, Q, INF, H, S, L, EV, SV, SVU, SVP, E, PL, POL, TMP, 0)
        if U[u, 0] == 0:
            T[th, 2] -= 1
            if T[th, 3] > 0:
                _schedule(T, UT, HU, S, th, S[S_NOW] + POL[POL_THINK])
    return 0


def _grow(a: npt.NDArray[np.int64], rows: int) -> npt.NDArray[np.int64]:
    extra = np.zeros((rows,) + a.shape[1:], dtype=a.dtype)
    return np.concatenate([a, extra])


def run_fast(stack: Stack, policy: Policy, limits: dict[int, QueueLimits], servers: dict[int, Any],
             sector: npt.NDArray[np.int64], nr: npt.NDArray[np.int64],
             ops: npt.NDArray[np.int64], rwbs: npt.NDArray[np.int64],
             flags: npt.NDArray[np.int64], seg: npt.NDArray[np.int64],
             pid: npt.NDArray[np.int64], time_ns: npt.NDArray[np.int64],
             units: npt.NDArray[np.int64], threads: npt.NDArray[np.int64],
             step_ns: int, think_ns: int) -> tuple[list[EventChunk], int]:
    """Run the compiled engine; returns (the events as chunks in recording order, each a tuple
    of ``EVENT_FIELDS`` columns in the EventTable's dtypes; number of requests).

    ``units``: int64 [n, 3] (first bio, end bio, thread) per unit, bios of a unit contiguous
    and units of a thread contiguous; ``threads``: int64 [m, 3] (first unit, end unit, depth).
    """
    nodes = stack.nodes()
    index = {n.dev: i for i, n in enumerate(nodes)}
    nn = len(nodes)
    maxm = max([len(n.members) for n in nodes] + [1])
    L = np.zeros((nn, NLF), dtype=np.int64)
    MEM = np.full((nn, maxm), -1, dtype=np.int64)
    SV = np.zeros((nn, 6), dtype=np.float64)
    maxpar = 1
    params = {}
    for i, n in enumerate(nodes):
        lim = limits[n.dev]
        L[i] = [lim.max_sectors, lim.chunk_sectors, lim.pbs_sectors, lim.lbs_sectors,
                lim.max_segments, lim.max_segment_size, lim.nomerges, lim.queue_depth,
                {"disk": KIND_DISK, "raid0": KIND_RAID0, "raid5": KIND_RAID5}[n.kind], n.dev,
                n.chunk_sectors, n.data_offset, _LAYOUTS.get(n.layout, 0), len(n.members),
                1 if lim.has_elevator else 0,
                max(lim.nr_requests if lim.has_elevator else lim.queue_depth, 1), 0]
        for j, m in enumerate(n.members):
            MEM[i, j] = index[m.dev]
        if n.kind == "disk":
            srv = servers[n.dev]
            SV[i] = [srv._kind, len(srv._units), srv._bus_free, srv._last_c, srv.head, 0.0]
            params[i] = srv._p
            maxpar = max(maxpar, len(srv._units))
    np_ = max(len(p) for p in params.values()) if params else 1
    SVP = np.zeros((nn, np_), dtype=np.float64)
    for i, p in params.items():
        SVP[i, :len(p)] = p
    SVU = np.zeros((nn, maxpar), dtype=np.float64)
    POL = np.array([policy.split_remainder == "head", policy.split_nomerge == "cleared_by_md",
                    {"fifo_sorted": 0, "lifo": 1, "fifo": 2}[policy.plug_order],
                    {"scan": 0, "newest": 1, "oldest": 2}[policy.plug_merge_candidate],
                    0 if policy.plug_flush_check == "newest" else 1, policy.max_plug_count,
                    step_ns, think_ns, policy.unplug_trace == "always",
                    policy.raid0_split == "map_both" and not stack.top.approximates],
                   dtype=np.int64)
    nb = len(sector)
    units = np.asarray(units, dtype=np.int64).reshape(-1, 3)
    threads = np.asarray(threads, dtype=np.int64).reshape(-1, 3)
    nu = len(units)
    U = np.zeros((nu, 3), dtype=np.int64)
    U[:, 2] = units[:, 2]
    UB = np.ascontiguousarray(units[:, :2])
    if nb:
        UT = np.ascontiguousarray(time_ns[np.minimum(units[:, 0], nb - 1)], dtype=np.int64)
    else:
        UT = np.zeros(nu, dtype=np.int64)
    T = np.zeros((len(threads), 4), dtype=np.int64)
    T[:, 0] = threads[:, 0]
    T[:, 1] = threads[:, 1]
    T[:, 3] = threads[:, 2]
    csum = np.concatenate([[0], np.cumsum(nr)])
    max_unit_sectors = int((csum[units[:, 1]] - csum[units[:, 0]]).max()) if nu else 1
    max_unit_bios = int((units[:, 1] - units[:, 0]).max()) if nu else 1
    min_piece = max(min([int(L[i, L_MAXSEC]) for i in range(nn)] +
                        [int(L[i, L_CHUNK]) for i in range(nn) if L[i, L_CHUNK]]) // 8, 1)
    margin_pool = 4 * (max_unit_sectors // min_piece + 2 * max_unit_bios) + 1024
    margin_ev = 16 * margin_pool  # tag waits process completions inside a submission
    cap = max(4 * margin_pool, MIN_POOL)
    B = np.zeros((cap, NBF), dtype=np.int64)
    FB = np.arange(cap - 1, -1, -1, dtype=np.int64)
    P = np.zeros((cap, NPF), dtype=np.int64)
    FP = np.arange(cap - 1, -1, -1, dtype=np.int64)
    R = np.zeros((cap, NRF), dtype=np.int64)
    FR = np.arange(cap - 1, -1, -1, dtype=np.int64)
    H = np.zeros((cap, 4), dtype=np.int64)  # completions
    HU = np.zeros((nu + 1, 4), dtype=np.int64)  # unit starts: every unit may be scheduled up front
    pieces = int(np.sum(nr // max(min_piece * 8, 1))) + 2 * nb
    ev_rows = min(max(nb + 8 * pieces, MIN_EVENTS), MAX_EVENTS_BUFFER) + 2 * margin_ev
    EV = new_events(ev_rows)
    chunks: list[EventChunk] = []
    PL = np.zeros(PLUG_SCRATCH, dtype=np.int64)
    TMP = np.zeros((TMP_ROWS, PLUG_SCRATCH), dtype=np.int64)
    Q = np.full((nn, 2), -1, dtype=np.int64)
    INF = np.zeros(nn, dtype=np.int64)
    S = np.zeros(NS, dtype=np.int64)
    S[[S_BL0H, S_BL0T, S_BL1H, S_BL1T]] = -1
    S[S_BFREE] = S[S_PFREE] = S[S_RFREE] = cap
    E = _new_elevator(nn, cap, margin_pool)
    # initial schedule (as replay(): every thread from time 0)
    for th in range(len(T)):
        _schedule(T, UT, HU, S, th, 0)
    top = index[stack.top.dev]
    while True:
        status = _run(B, FB, P, FP, U, T, UT, UB, R, FR, Q, INF, H, HU, S, L, MEM, EV, POL, SV, SVU,
                      SVP, E, PL, TMP, top, sector, nr, ops, rwbs, flags, seg, pid, time_ns,
                      margin_ev, margin_pool)
        if S[S_ERR]:
            raise RuntimeError("fast replay ran out of pool space")
        if status == 0:
            break
        if len(EV[EV_TIME]) - S[S_EVN] < margin_ev:
            # hand the filled buffer over as a chunk and go on in a new one (no copies)
            chunks.append(head(EV, int(S[S_EVN])))
            EV = new_events(ev_rows)
            S[S_EVN] = 0
        if S[S_BFREE] < margin_pool:
            B, FB, S[S_BFREE] = _grow_pool(B, FB, int(S[S_BFREE]))
        if S[S_PFREE] < margin_pool:
            P, FP, S[S_PFREE] = _grow_pool(P, FP, int(S[S_PFREE]))
        if S[S_RFREE] < margin_pool:
            R, FR, S[S_RFREE] = _grow_pool(R, FR, int(S[S_RFREE]))
        if E[0].shape[1] - int(np.max(E[3])) < margin_pool:
            E = _grow_elevator(E)
        while 2 * (int(np.max(E[9][:NMAPS])) + margin_pool) > E[8].shape[1]:
            E = E[:7] + grow_hash(*E[7:])
        if H.shape[0] - S[S_HN] < margin_pool:
            H = _grow(H, H.shape[0])
        if HU.shape[0] - S[S_HNU] < margin_pool:
            HU = _grow(HU, max(HU.shape[0], margin_pool))
    # write the server state back (the Python servers stay consistent for callers)
    for i, n in enumerate(nodes):
        if n.kind == "disk":
            srv = servers[n.dev]
            srv._units = [float(x) for x in SVU[i, :len(srv._units)]]
            srv._bus_free, srv._last_c, srv.head = float(SV[i, 2]), float(SV[i, 3]), int(SV[i, 4])
            srv.busy_ns += float(SV[i, 5])
    chunks.append(head(EV, int(S[S_EVN])))
    return chunks, int(S[S_NREQ])



def _new_elevator(nn: int, cap: int, margin_pool: int) -> tuple[Any, ...]:
    slots = MIN_HASH_SLOTS
    while slots < HASH_SLOTS_PER_MARGIN * margin_pool:
        slots *= 2
    return (np.zeros((2 * nn, cap), np.int64), np.zeros((2 * nn, cap), np.int64),
            np.zeros((2 * nn, cap), np.int64), np.zeros(2 * nn, np.int64),
            np.full(2 * nn, -1, np.int64), np.full(2 * nn, -1, np.int64),
            np.tile(np.array([-1, -1, 0, 0, 0, 0, 0, 0], np.int64), (nn, 1)),
            *new_hash(slots))


def _grow_elevator(E: tuple[Any, ...]) -> tuple[Any, ...]:
    KS, KR, KSL = E[:3]
    w = KS.shape[1]
    grow = [np.concatenate([a, np.zeros_like(a)], axis=1) for a in (KS, KR, KSL)]
    return (grow[0], grow[1], grow[2]) + E[3:] if w else E


def _grow_pool(pool: npt.NDArray[np.int64], free: npt.NDArray[np.int64], nfree: int
               ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Double a pool; the new rows go on the free stack (which must hold every row)."""
    old = pool.shape[0]
    new_free = np.zeros(2 * old, dtype=np.int64)
    new_free[:nfree] = free[:nfree]
    new_free[nfree:nfree + old] = np.arange(2 * old - 1, old - 1, -1)
    return _grow(pool, old), new_free, nfree + old


__all__ = ["eligible", "run_fast", "ACT_QUEUE", "ACT_SPLIT", "ACT_REMAP", "ACT_GETRQ",
           "ACT_ISSUE", "ACT_COMPLETE", "ACT_BACKMERGE", "ACT_FRONTMERGE", "OP_READ", "OP_WRITE",
           "RWBS_SYNC", "RWBS_WRITE"]
