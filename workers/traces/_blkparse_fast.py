"""numba scanner for blkparse's default text: the fast path of :mod:`blkparse_text`.

blkparse prints ~0.6 M lines/s; a per-line Python regex parser reads ~0.1 M lines/s, so large
text traces are scanned here instead: one pass over the memory-mapped bytes, numbers parsed in
place, comm strings interned through a hash table (a 64-bit FNV-1a of the bytes between ``[``
and the last ``]``), so no per-line Python object exists.

The scanner handles the layouts blkparse prints by default (see ``blkparse_text``). Anything
else, a mail-quoted line, a passthrough ``(cdb)`` tail, ``-t`` elapsed fields, an event-shaped
line that does not parse, makes it give up (status != OK); the caller then runs the Python
parser over the whole file, which is exact and reports errors with their line numbers. So the
fast path never changes a result, it only makes the common case fast.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types
from numba.typed import Dict, List

from workers.events import (
    ACT_BACKMERGE,
    ACT_BOUNCE,
    ACT_COMPLETE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_MESSAGE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_REQUEUE,
    ACT_SLEEPRQ,
    ACT_SPLIT,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    RWBS_AHEAD,
    RWBS_DISCARD,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_META,
    RWBS_NONE,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
)

OK = 0
FALLBACK = 1

# action letters -> codes (module globals are compile-time constants to numba)
_A_Q, _A_M, _A_F, _A_G = ACT_QUEUE, ACT_BACKMERGE, ACT_FRONTMERGE, ACT_GETRQ
_A_S, _A_R, _A_D, _A_C = ACT_SLEEPRQ, ACT_REQUEUE, ACT_ISSUE, ACT_COMPLETE
_A_P, _A_U, _A_UT, _A_I = ACT_PLUG, ACT_UNPLUG_IO, ACT_UNPLUG_TIMER, ACT_INSERT
_A_X, _A_B, _A_A, _A_MSG = ACT_SPLIT, ACT_BOUNCE, ACT_REMAP, ACT_MESSAGE


@numba.njit(cache=True, inline="always")
def _is_digit(c: Any) -> Any:
    return 48 <= c <= 57


@numba.njit(cache=True, inline="always")
def _skip_spaces(b: Any, i: int, end: int) -> int:
    # CR too: ``str.split`` (the exact parser) treats a stray CR as whitespace, so a line
    # starting with one must not look like prose here
    while i < end and (b[i] == 32 or b[i] == 9 or b[i] == 13):
        i += 1
    return i


@numba.njit(cache=True)
def _plain(b: Any, s: int, e: int) -> bool:
    """Only printable ASCII, tabs and CR: then whitespace means the same to us and to
    Python's ``str.split`` (which also splits on \x1c-\x1f, NBSP, ...)."""
    for i in range(s, e):
        c = b[i]
        if (c < 32 and c != 9 and c != 13) or c > 126:
            return False
    return True


@numba.njit(cache=True, inline="always")
def _uint(b: Any, i: int, end: int) -> tuple[int, np.uint64, bool]:
    """(next index, value, ok) of an unsigned decimal of at most 19 digits."""
    v = np.uint64(0)
    start = i
    while i < end and _is_digit(b[i]):
        v = v * np.uint64(10) + np.uint64(b[i] - 48)
        i += 1
    n = i - start
    return i, v, 0 < n <= 19


@numba.njit(cache=True)
def scan(b: Any, max_line: int, time_ns: Any, seq: Any, dev: Any, cpu: Any, pid: Any,
         action: Any, rwbs: Any, sector: Any, nr: Any, aux: Any, aux2: Any, error: Any,
         comm: Any) -> tuple[int, int, int, Any, Any]:
    """Scan the buffer. Returns (status, events, skipped lines, comm starts, comm ends).

    ``comm`` receives an index into the returned span lists (+1; 0 is "(null)" when the text
    is exactly ``(null)``).
    """
    n = b.shape[0]
    ids = Dict.empty(key_type=types.uint64, value_type=types.int64)
    starts = List.empty_list(types.int64)
    ends = List.empty_list(types.int64)
    k = 0
    skipped = 0
    pos = 0
    last_hash = np.uint64(0)
    last_id = -1
    while pos < n:
        # line bounds
        end = pos
        while end < n and b[end] != 10:
            end += 1
        nxt = end + 1
        if end - pos > max_line:
            return FALLBACK, k, skipped, starts, ends
        e = end
        if e > pos and b[e - 1] == 13:
            e -= 1
        i = _skip_spaces(b, pos, e)
        if i < e and b[i] == 62:  # '>' mail quote: let the exact parser handle it
            return FALLBACK, k, skipped, starts, ends
        first = i
        # maj,min cpu seq -- decides whether the line is an event at all
        i, maj, ok = _uint(b, i, e)
        not_event = not ok or i >= e or b[i] != 44
        if not not_event:
            i, mnr, ok = _uint(b, i + 1, e)
            j = _skip_spaces(b, i, e)
            not_event = not ok or j == i
        if not not_event:
            i, c, ok1 = _uint(b, j, e)
            j = _skip_spaces(b, i, e)
            not_event = not ok1 or j == i
        if not not_event:
            i, sq, ok2 = _uint(b, j, e)
            j = _skip_spaces(b, i, e)
            not_event = not ok2 or j == i
        if not_event:
            if not _plain(b, pos, e) or (first < e and _is_digit(b[first])):
                # a line starting with a number is event-shaped to the exact parser (an
                # error with its line number there, e.g. a 24-digit device), never prose
                return FALLBACK, k, skipped, starts, ends
            if _skip_spaces(b, pos, e) < e:
                skipped += 1
            pos = nxt
            continue
        # from here on the line is event-shaped: any surprise -> exact parser
        i, sec, ok = _uint(b, j, e)
        if not ok or i >= e or b[i] != 46:
            return FALLBACK, k, skipped, starts, ends
        fstart = i + 1
        i, frac, ok = _uint(b, fstart, e)
        if not ok or i - fstart != 9:
            return FALLBACK, k, skipped, starts, ends
        j = _skip_spaces(b, i, e)
        if j == i:  # time and pid must be separated
            return FALLBACK, k, skipped, starts, ends
        i, p, ok = _uint(b, j, e)
        if not ok or j == i:
            return FALLBACK, k, skipped, starts, ends
        j = _skip_spaces(b, i, e)
        if j == i:  # "7G": pid glued to the action is not an event to the exact parser
            return FALLBACK, k, skipped, starts, ends
        # action letters
        a0 = b[j] if j < e else 0
        a1 = b[j + 1] if j + 1 < e else 32
        code = 0
        if a1 == 32 or a1 == 9:
            if a0 == 81:
                code = _A_Q
            elif a0 == 77:
                code = _A_M
            elif a0 == 70:
                code = _A_F
            elif a0 == 71:
                code = _A_G
            elif a0 == 83:
                code = _A_S
            elif a0 == 82:
                code = _A_R
            elif a0 == 68:
                code = _A_D
            elif a0 == 67:
                code = _A_C
            elif a0 == 80:
                code = _A_P
            elif a0 == 85:
                code = _A_U
            elif a0 == 73:
                code = _A_I
            elif a0 == 88:
                code = _A_X
            elif a0 == 66:
                code = _A_B
            elif a0 == 65:
                code = _A_A
            elif a0 == 109:
                code = _A_MSG
            j += 1
        elif a0 == 85 and a1 == 84:
            code = _A_UT
            j += 2
        if code == 0:
            return FALLBACK, k, skipped, starts, ends
        i = _skip_spaces(b, j, e)
        if i == j:
            return FALLBACK, k, skipped, starts, ends
        # RWBS (fill_rwbs order: [F] R|W|D|N [F][A][S][M])
        bits = 0
        r0 = i
        while i < e and b[i] != 32:
            i += 1
        r1 = i
        q = r0
        if r1 - r0 >= 2 and b[q] == 70 and (b[q + 1] == 87 or b[q + 1] == 82
                                             or b[q + 1] == 68 or b[q + 1] == 78):
            bits |= RWBS_FLUSH
            q += 1
        if q >= r1:
            return FALLBACK, k, skipped, starts, ends
        d0 = b[q]
        if d0 == 82:
            bits |= RWBS_READ
        elif d0 == 87:
            bits |= RWBS_WRITE
        elif d0 == 68:
            bits |= RWBS_DISCARD
        elif d0 == 78:
            bits |= RWBS_NONE
        else:
            return FALLBACK, k, skipped, starts, ends
        q += 1
        while q < r1:
            f = b[q]
            if f == 70:
                bits |= RWBS_FUA
            elif f == 65:
                bits |= RWBS_AHEAD
            elif f == 83:
                bits |= RWBS_SYNC
            elif f == 77:
                bits |= RWBS_META
            else:
                return FALLBACK, k, skipped, starts, ends
            q += 1
        t = _skip_spaces(b, i, e)
        s_ = np.uint64(0)
        nsec = np.uint64(0)
        ax = np.uint64(0)
        ax2 = np.uint64(0)
        err: Any = 0
        cs = -1
        ce = -1
        if code == _A_MSG:
            if not _plain(b, t, e):
                return FALLBACK, k, skipped, starts, ends
            cs = t
            ce = e
            while ce > cs and (b[ce - 1] == 32 or b[ce - 1] == 9 or b[ce - 1] == 13):
                ce -= 1
        elif code == _A_X:
            t, s_, ok = _uint(b, t, e)
            if not ok or t + 3 > e or b[t] != 32 or b[t + 1] != 47 or b[t + 2] != 32:
                return FALLBACK, k, skipped, starts, ends
            t, ax, ok = _uint(b, t + 3, e)
            if not ok or t + 2 > e or b[t] != 32 or b[t + 1] != 91 or b[e - 1] != 93:
                return FALLBACK, k, skipped, starts, ends
            cs = t + 2
            ce = e - 1
        elif code == _A_A:
            t, s_, ok = _uint(b, t, e)
            if not ok or t + 3 > e or b[t] != 32 or b[t + 1] != 43 or b[t + 2] != 32:
                return FALLBACK, k, skipped, starts, ends
            t, nsec, ok = _uint(b, t + 3, e)
            if (not ok or t + 6 > e or b[t] != 32 or b[t + 1] != 60 or b[t + 2] != 45
                    or b[t + 3] != 32 or b[t + 4] != 40):
                return FALLBACK, k, skipped, starts, ends
            t, fmaj, ok = _uint(b, t + 5, e)
            if not ok or t >= e or b[t] != 44:
                return FALLBACK, k, skipped, starts, ends
            t, fmin, ok = _uint(b, t + 1, e)
            if not ok or t + 2 > e or b[t] != 41 or b[t + 1] != 32:  # ") " then the sector
                return FALLBACK, k, skipped, starts, ends
            t, ax, ok = _uint(b, t + 2, e)
            if not ok or t != e or fmaj > 0xFFF or fmin > 0xFFFFF:
                return FALLBACK, k, skipped, starts, ends
            ax2 = (fmaj << np.uint64(20)) | fmin
        elif code == _A_U or code == _A_UT:
            if t >= e or b[t] != 91:
                return FALLBACK, k, skipped, starts, ends
            z = e - 1
            while z > t and b[z] != 32:
                z -= 1
            if z <= t or b[z - 1] != 93:
                return FALLBACK, k, skipped, starts, ends
            zz, ax, ok = _uint(b, z + 1, e)
            if not ok or zz != e or ax > 0xFFFFFFFF:
                return FALLBACK, k, skipped, starts, ends
            cs = t + 1
            ce = z - 1
        else:
            if t < e and _is_digit(b[t]):
                t, s_, ok = _uint(b, t, e)
                if not ok or t >= e or b[t] != 32:
                    return FALLBACK, k, skipped, starts, ends
                t += 1
                if t + 1 < e and b[t] == 43 and b[t + 1] == 32:
                    t, nsec, ok = _uint(b, t + 2, e)
                    if not ok or t >= e or b[t] != 32:
                        return FALLBACK, k, skipped, starts, ends
                    t += 1
            if t >= e or b[t] != 91 or b[e - 1] != 93:
                return FALLBACK, k, skipped, starts, ends
            if code == _A_C or code == _A_R:
                zz, ev, ok = _uint(b, t + 1, e - 1)
                if not ok or zz != e - 1 or ev > 65535:
                    return FALLBACK, k, skipped, starts, ends
                err = np.int64(ev)
            else:
                cs = t + 1
                ce = e - 1
        if (maj > 0xFFF or mnr > 0xFFFFF or c > 0xFFFF or sq > 0xFFFFFFFF or p > 0xFFFFFFFF
                or nsec > 0xFFFFFFFF or sec > np.uint64(9_000_000_000)):
            return FALLBACK, k, skipped, starts, ends
        cid = 0
        if cs >= 0:
            h = np.uint64(0xCBF29CE484222325)
            for z in range(cs, ce):
                h = (h ^ np.uint64(b[z])) * np.uint64(0x100000001B3)
            if h == last_hash and last_id >= 0:
                cid = last_id
            else:
                got = ids.get(h, -1)
                if got < 0:
                    got = len(starts) + 1
                    ids[h] = got
                    starts.append(cs)
                    ends.append(ce)
                cid = got
                last_hash = h
                last_id = got
        time_ns[k] = np.int64(sec) * 1_000_000_000 + np.int64(frac)
        seq[k] = sq
        dev[k] = (maj << np.uint64(20)) | mnr
        cpu[k] = c
        pid[k] = p
        action[k] = code
        rwbs[k] = bits
        sector[k] = s_
        nr[k] = nsec
        aux[k] = ax
        aux2[k] = ax2
        error[k] = err if err < 32768 else err - 65536
        comm[k] = cid
        k += 1
        pos = nxt
    return OK, k, skipped, starts, ends
