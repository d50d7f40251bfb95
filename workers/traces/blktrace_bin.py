"""Binary blktrace (relay output, ``DEV.blktrace.N``, ``blkparse -d`` dumps) -> EventTable.

Record layout: ``struct blk_io_trace`` (include/uapi/linux/blktrace_api.h), 48 bytes followed by
``pdu_len`` payload bytes, written in the tracing host's byte order (v1, magic version 0x07);
the late-2025 ``struct blk_io_trace2`` (version 0x08) is 64 bytes with a 64-bit action
(trace-formats.md 1.1-1.4).

Speed: record boundaries chain through ``pdu_len``, so the walk is inherently sequential. It
runs in numba (two passes over a read-only memory map: count and validate, then decode straight
into preallocated numpy columns), so no per-record Python object is ever created. Notify
records are few (one PROCESS note per task and CPU, a TIMESTAMP, driver messages); their
offsets are collected and decoded in Python.

Semantics follow blkparse 1.2.0 (blkparse.c / blkparse_fmt.c), checked field by field by the
equivalence tests:

* RWBS from the category bits as ``fill_rwbs`` does (``R`` only when ``bytes != 0``).
* Split (X) and unplug (U/UT) payloads are a big-endian u64 (``cpu_to_be64`` in
  kernel/trace/blktrace.c ``blk_add_trace_split`` / ``blk_add_trace_unplug``); remap (A) is
  ``struct blk_io_trace_remap`` (be32 from, be32 to, be64 sector_from) and the event's device
  becomes ``device_to``.
* With ``__BLK_TA_CGROUP`` (1 << 8) set, the first 8 payload bytes are the cgroup id.
* comm: the pid -> comm map of BLK_TN_PROCESS notes from *all* files; the first note *read*
  for a pid wins (``add_ppm_hash``), files in cpu order, so a note in ``.blktrace.0`` beats an
  earlier-timed one in ``.blktrace.1``; pids without a note print ``(null)``.
* genesis: the earliest record that is not a PROCESS/TIMESTAMP note (messages count).
* Sequence gaps per (device, cpu) are reported as warnings with the byte offset: blkparse
  does not report them, but they mean the relay buffer dropped events.
* Damaged bytes are not a relay drop. A record whose ``pdu_len`` is larger than any payload the
  kernel writes (:data:`MAX_PDU`), or whose length does not lead to the next record header, is
  corruption: by default the reader resynchronises on the next record that chains to another
  one (or to the end of the file) and reports where and how many bytes it skipped; in strict
  mode (``strict = true`` in ``blkreview.toml``, or the upload's strict field) the file fails
  with that offset instead. Sequence numbers are not compared across a skipped region (a gap
  there is the corruption's, already reported). :func:`walk_records_py` is the readable Python
  twin of the compiled first pass; tests check one against the other.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numba
import numpy as np
import numpy.typing as npt

from workers.errors import ParseError
from workers.events import (
    ACT_MESSAGE,
    ACT_REMAP,
    COLUMNS,
    NULL_COMM,
    RWBS_AHEAD,
    RWBS_DISCARD,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_META,
    RWBS_NONE,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    RWBS_WRITE_ZEROES,
    RWBS_ZONE,
    DeviceInfo,
    EventTable,
)

MAGIC = 0x65617400
VERSION_V1 = 0x07
VERSION_V2 = 0x08
HDR_V1 = 48
HDR_V2 = 64

# category bits (BLK_TC_*), already shifted left by 16 as stored in ``action``
TC_READ = 1 << 16
TC_WRITE = 1 << 17
TC_FLUSH = 1 << 18
TC_SYNC = 1 << 19
TC_QUEUE = 1 << 20
TC_REQUEUE = 1 << 21
TC_ISSUE = 1 << 22
TC_COMPLETE = 1 << 23
TC_PC = 1 << 25
TC_NOTIFY = 1 << 26
TC_AHEAD = 1 << 27
TC_META = 1 << 28
TC_DISCARD = 1 << 29
TC_FUA = 1 << 31
# v2 only (64-bit action): BLK_TC_ZONE_APPEND 1<<16 .. ZONE_CLOSE 1<<21, WRITE_ZEROES 1<<22
TC2_ZONE_MASK = 0x3F << 32
TC2_WRITE_ZEROES = 1 << 38

TA_CGROUP = 1 << 8
TN_PROCESS = 0
TN_TIMESTAMP = 1
TN_MESSAGE = 2
MAX_ACTION = 19  # __BLK_TA_ZONE_UNPLUG (v2)

# status codes of the numba walk
_OK = 0
_BAD_MAGIC = 1
_BAD_VERSION = 2
_TRUNC_HEADER = 3
_PDU_PAST_END = 4
_VERSION_CHANGE = 5
_BAD_PDU = 6
_TOO_CORRUPT = 7

#: Largest payload a kernel writes after a record header: 8 bytes of cgroup id plus a message
#: note (BLK_TN_MAX_MSG 128), a task comm, a remap (16) or a SCSI command (at most 260 bytes);
#: a larger ``pdu_len`` is a damaged header, not a record.
MAX_PDU = 1024
#: Corrupt regions skipped in one file before the file is refused as a whole.
MAX_REGIONS = 64
# what a skipped region was (column 2 of the regions array)
REGION_BAD_LENGTH = 1  # a record whose pdu_len is impossible or leads nowhere: dropped
REGION_GARBAGE = 2  # bytes after a good record where no record header starts


@numba.njit(cache=True, inline="always")
def _rd16(b: Any, o: int, be: bool) -> Any:
    if be:
        return (np.uint32(b[o]) << 8) | np.uint32(b[o + 1])
    return np.uint32(b[o]) | (np.uint32(b[o + 1]) << 8)


@numba.njit(cache=True, inline="always")
def _rd32(b: Any, o: int, be: bool) -> Any:
    if be:
        return ((np.uint32(b[o]) << 24) | (np.uint32(b[o + 1]) << 16)
                | (np.uint32(b[o + 2]) << 8) | np.uint32(b[o + 3]))
    return (np.uint32(b[o]) | (np.uint32(b[o + 1]) << 8) | (np.uint32(b[o + 2]) << 16)
            | (np.uint32(b[o + 3]) << 24))


@numba.njit(cache=True, inline="always")
def _rd64(b: Any, o: int, be: bool) -> Any:
    if be:
        return (np.uint64(_rd32(b, o, True)) << 32) | np.uint64(_rd32(b, o + 4, True))
    return np.uint64(_rd32(b, o, False)) | (np.uint64(_rd32(b, o + 4, False)) << 32)


@numba.njit(cache=True, inline="always")
def _record_ok(b: Any, q: int, be: bool, version: int) -> bool:
    """A record header at ``q`` whose length leads to another header (or the file's end)."""
    n = b.shape[0]
    hdr = 48 if version == 7 else 64
    pdu_off = 46 if version == 7 else 50
    if q + hdr > n:
        return False
    magic = _rd32(b, q, be)
    if (magic & 0xFFFFFF00) != MAGIC or (magic & 0xFF) != version:
        return False
    pdu = _rd16(b, q + pdu_off, be)
    if pdu > MAX_PDU:
        return False
    end = q + hdr + pdu
    if end > n:
        return False
    if end + 4 > n:
        return True  # the end, or a cut header the walk reports as truncation
    nxt = _rd32(b, end, be)
    ok: bool = (nxt & 0xFFFFFF00) == MAGIC and (nxt & 0xFF) == version
    return ok


@numba.njit(cache=True)
def _resync(b: Any, start: int, be: bool, version: int) -> int:
    """Offset of the first confirmed record header at or after ``start`` (else the end)."""
    n = b.shape[0]
    for q in range(start, n):
        if _record_ok(b, q, be, version):
            return q
    return int(n)


@numba.njit(inline="always")
def _walk_body(b: Any, be: bool, version: int, strict: bool,
               regions: Any, start: int, stop: int) -> tuple[int, int, int, int, int, int]:
    """Pass 1: validate the record chain; count events and notes; find corrupt regions.

    Without ``strict``, a damaged region is skipped and recorded in ``regions`` as a row
    (offset, bytes skipped, REGION_* kind, pdu_len or the bad magic); with ``strict`` it is an
    error. Returns (status, n_events, n_notes, error_offset, error_value, regions used); on
    success error_offset is where the walk stopped: the first record start at or after
    ``stop`` (the buffer's end for a whole file; a byte range's next boundary, see
    :mod:`workers.traces.byterange`, which walks the records starting in [start, stop)).
    """
    n = b.shape[0]
    hdr = 48 if version == 7 else 64
    pdu_off = 46 if version == 7 else 50
    # the action's low 32 bits (the category and code bits): v2's action is 64 bits, whose
    # low half a big-endian host writes second
    act_off = 28 if version == 7 else (36 if be else 32)
    pos = start
    n_events = 0
    n_notes = 0
    nreg = 0
    while pos < stop:
        if pos + hdr > n:
            return _TRUNC_HEADER, n_events, n_notes, pos, n - pos, nreg
        magic = _rd32(b, pos, be)
        if (magic & 0xFFFFFF00) != MAGIC:
            if strict or pos == 0:
                return _BAD_MAGIC, n_events, n_notes, pos, magic, nreg
            if nreg == regions.shape[0]:
                return _TOO_CORRUPT, n_events, n_notes, pos, nreg, nreg
            q = _resync(b, pos + 1, be, version)
            regions[nreg, 0] = pos
            regions[nreg, 1] = q - pos
            regions[nreg, 2] = REGION_GARBAGE
            regions[nreg, 3] = magic
            nreg += 1
            pos = q
            continue
        if (magic & 0xFF) != version:
            return _VERSION_CHANGE, n_events, n_notes, pos, magic & 0xFF, nreg
        pdu = _rd16(b, pos + pdu_off, be)
        end = pos + hdr + pdu
        if end > n:
            return _PDU_PAST_END, n_events, n_notes, pos, pdu, nreg
        nxt = np.uint32(0)
        broken = False
        if pdu <= MAX_PDU and end + 4 <= n:
            nxt = _rd32(b, end, be)
            broken = (nxt & 0xFFFFFF00) != MAGIC
        if pdu > MAX_PDU or (broken and not strict):
            if pdu > MAX_PDU and strict:
                return _BAD_PDU, n_events, n_notes, pos, pdu, nreg
            if nreg == regions.shape[0]:
                return _TOO_CORRUPT, n_events, n_notes, pos, nreg, nreg
            q = _resync(b, pos + hdr, be, version)
            if pdu > MAX_PDU or q < end:
                # the length is wrong: a real header starts inside the claimed payload (or
                # the length is impossible); the record is dropped
                regions[nreg, 0] = pos
                regions[nreg, 1] = q - pos
                regions[nreg, 2] = REGION_BAD_LENGTH
                regions[nreg, 3] = pdu
                nreg += 1
                pos = q
                continue
            # the record is whole; the bytes after it are not a record
            regions[nreg, 0] = end
            regions[nreg, 1] = q - end
            regions[nreg, 2] = REGION_GARBAGE
            regions[nreg, 3] = nxt
            nreg += 1
            end = q
        action = _rd32(b, pos + act_off, be)
        if action & TC_NOTIFY:
            n_notes += 1
            if (action & 0xFEFF) == TN_MESSAGE:
                n_events += 1
        else:
            n_events += 1
        pos = end
    return _OK, n_events, n_notes, pos, 0, nreg


@numba.njit(inline="always")
def _decode_body(b: Any, be: bool, version: int,
                 time_ns: Any, seq: Any, dev: Any, cpu: Any, pid: Any, action: Any, rwbs: Any,
                 sector: Any, nr_sectors: Any, aux: Any, aux2: Any, error: Any,
                 note_off: Any, note_kind: Any, note_row: Any, info: Any, regions: Any,
                 nreg: int, start: int, stop: int) -> tuple[int, int]:
    """Pass 2: fill the columns. Returns (events written, unknown actions dropped).

    Decodes the records starting in [start, stop) (the whole buffer, or a byte range whose
    chain pass 1 followed).

    The first ``nreg`` rows of ``regions`` (pass 1's corrupt regions, in file order) are
    jumped over; sequence tracking starts afresh after each.

    Also checks, per (device, cpu) relay stream, that the sequence grows by one (a small
    open-addressing table; wrap at 2**32 is fine). ``info`` receives [gap count, offset of
    the first record after a gap, its device, cpu, sequence before, sequence after, offset of
    the first record with cpu > 65535 or -1].
    """
    v2 = version == 8
    hdr = 64 if v2 else 48
    k = 0
    kn = 0
    dropped = 0
    pos = 0
    slots = 4096
    keys = np.full(slots, np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    last = np.zeros(slots, dtype=np.uint32)
    used = 0
    empty_key = np.uint64(0xFFFFFFFFFFFFFFFF)
    prev_key = empty_key
    prev_h: Any = 0
    info[0] = 0
    info[6] = -1
    r = 0
    pos = start
    while pos < stop:
        if r < nreg and pos == regions[r, 0]:
            pos += regions[r, 1]
            r += 1
            keys[:] = empty_key
            used = 0
            prev_key = empty_key
            continue
        t = _rd64(b, pos + 8, be)
        sq = _rd32(b, pos + 4, be)
        sec = _rd64(b, pos + 16, be)
        nbytes = _rd32(b, pos + 24, be)
        act: Any
        d: Any
        if v2:
            p = _rd32(b, pos + 28, be)
            act = _rd64(b, pos + 32, be)
            d = _rd32(b, pos + 40, be)
            c = _rd32(b, pos + 44, be)
            err = _rd16(b, pos + 48, be)
            pdu = _rd16(b, pos + 50, be)
        else:
            act = np.uint64(_rd32(b, pos + 28, be))
            p = _rd32(b, pos + 32, be)
            d = _rd32(b, pos + 36, be)
            c = _rd32(b, pos + 40, be)
            err = _rd16(b, pos + 44, be)
            pdu = _rd16(b, pos + 46, be)
        code = act & 0xFEFF
        pdu_start = pos + hdr
        if act & TC_CGROUP_SKIP_MASK:
            pdu_start += 8
            pdu_avail = pdu - 8
        else:
            pdu_avail = pdu
        if act & TC_NOTIFY:
            note_off[kn] = pos
            note_kind[kn] = code
            note_row[kn] = -1
            if code == TN_MESSAGE:
                note_row[kn] = k
                time_ns[k] = t
                seq[k] = 0
                dev[k] = d
                cpu[k] = c
                pid[k] = p
                action[k] = ACT_MESSAGE
                rwbs[k] = RWBS_NONE
                sector[k] = 0
                nr_sectors[k] = 0
                aux[k] = 0
                aux2[k] = 0
                error[k] = 0
                k += 1
            kn += 1
            pos += hdr + pdu
            continue
        if code == 0 or code > MAX_ACTION:
            dropped += 1
            # keep the row count of pass 1: write a placeholder the caller drops
            action[k] = 0
            time_ns[k] = t
            k += 1
            pos += hdr + pdu
            continue
        bits = 0
        if act & TC_FLUSH:
            bits |= RWBS_FLUSH
        if act & TC_DISCARD:
            bits |= RWBS_DISCARD
        elif act & TC_WRITE:
            bits |= RWBS_WRITE
        elif v2 and (act & TC2_WRITE_ZEROES):
            pass
        elif nbytes != 0:
            bits |= RWBS_READ
        else:
            bits |= RWBS_NONE
        if act & TC_FUA:
            bits |= RWBS_FUA
        if act & TC_AHEAD:
            bits |= RWBS_AHEAD
        if act & TC_SYNC:
            bits |= RWBS_SYNC
        if act & TC_META:
            bits |= RWBS_META
        if v2:
            if act & TC2_WRITE_ZEROES:
                bits |= RWBS_WRITE_ZEROES
            if act & TC2_ZONE_MASK:
                bits |= RWBS_ZONE
        a: Any = np.uint64(0)
        a2: Any = np.uint32(0)
        if code == 13:  # SPLIT: be64 new sector
            if pdu_avail >= 8:
                a = _rd64(b, pdu_start, True)
        elif code == 10 or code == 11:  # UNPLUG_IO/TIMER: be64 depth, printed as %u
            if pdu_avail >= 8:
                a = _rd64(b, pdu_start, True) & np.uint64(0xFFFFFFFF)
        elif code == 15:  # REMAP
            if pdu_avail >= 16:
                a2 = _rd32(b, pdu_start, True)
                d = _rd32(b, pdu_start + 4, True)
                a = _rd64(b, pdu_start + 8, True)
        # sequence gaps per relay stream: key on the logging device and cpu
        hd = _rd32(b, pos + (40 if v2 else 36), be)
        key = (np.uint64(hd) << np.uint64(20)) | np.uint64(c)
        if key != prev_key:  # consecutive records are mostly from the same stream
            h = np.int64((key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(52))
            while True:
                kk = keys[h]
                if kk == key:
                    break
                if kk == empty_key:
                    if used < slots - 1:
                        keys[h] = key
                        last[h] = np.uint32(sq) - np.uint32(1)
                        used += 1
                    break
                h = (h + 1) & (slots - 1)
            prev_key = key
            prev_h = h
        if keys[prev_h] == key:
            if np.uint32(np.uint32(sq) - last[prev_h]) != np.uint32(1):
                if info[0] == 0:
                    info[1] = pos
                    info[2] = hd
                    info[3] = c
                    info[4] = last[prev_h]
                    info[5] = sq
                info[0] += 1
            last[prev_h] = sq
        if c > 0xFFFF and info[6] < 0:
            info[6] = pos
        time_ns[k] = t
        seq[k] = sq
        dev[k] = d
        cpu[k] = c
        pid[k] = p
        action[k] = code
        rwbs[k] = bits
        sector[k] = sec
        nr_sectors[k] = nbytes >> 9
        aux[k] = a
        aux2[k] = a2
        error[k] = err
        k += 1
        pos += hdr + pdu
    return k, dropped


TC_CGROUP_SKIP_MASK = TA_CGROUP


@numba.njit(cache=True)
def _is_sorted(t: Any) -> bool:
    for i in range(1, t.shape[0]):
        if t[i] < t[i - 1]:
            return False
    return True


@numba.njit(cache=True)
def _gather_comm(pid: Any, lut: Any, out: Any) -> None:
    top = lut.shape[0]
    for i in range(pid.shape[0]):
        p = pid[i]
        out[i] = lut[p] if p < top else 0


# Specialised entry points: with the byte order and version constant after inlining, LLVM
# folds the branches and merges the byte loads into single (byte-swapped) loads, ~8x faster
# than one function taking them as runtime arguments.
@numba.njit(cache=True)
def _walk_le7(b: Any, strict: bool, regions: Any, start: int,
              stop: int) -> tuple[int, int, int, int, int, int]:
    return _walk_body(b, False, 7, strict, regions, start, stop)


@numba.njit(cache=True)
def _walk_be7(b: Any, strict: bool, regions: Any, start: int,
              stop: int) -> tuple[int, int, int, int, int, int]:
    return _walk_body(b, True, 7, strict, regions, start, stop)


@numba.njit(cache=True)
def _walk_le8(b: Any, strict: bool, regions: Any, start: int,
              stop: int) -> tuple[int, int, int, int, int, int]:
    return _walk_body(b, False, 8, strict, regions, start, stop)


@numba.njit(cache=True)
def _walk_be8(b: Any, strict: bool, regions: Any, start: int,
              stop: int) -> tuple[int, int, int, int, int, int]:
    return _walk_body(b, True, 8, strict, regions, start, stop)


@numba.njit(cache=True)
def _decode_le7(b: Any, time_ns: Any, seq: Any, dev: Any, cpu: Any, pid: Any, action: Any,
                rwbs: Any, sector: Any, nr_sectors: Any, aux: Any, aux2: Any, error: Any,
                note_off: Any, note_kind: Any, note_row: Any, info: Any, regions: Any,
                nreg: int, start: int, stop: int) -> tuple[int, int]:
    return _decode_body(b, False, 7, time_ns, seq, dev, cpu, pid, action, rwbs, sector,
                        nr_sectors, aux, aux2, error, note_off, note_kind, note_row, info,
                        regions, nreg, start, stop)


@numba.njit(cache=True)
def _decode_be7(b: Any, time_ns: Any, seq: Any, dev: Any, cpu: Any, pid: Any, action: Any,
                rwbs: Any, sector: Any, nr_sectors: Any, aux: Any, aux2: Any, error: Any,
                note_off: Any, note_kind: Any, note_row: Any, info: Any, regions: Any,
                nreg: int, start: int, stop: int) -> tuple[int, int]:
    return _decode_body(b, True, 7, time_ns, seq, dev, cpu, pid, action, rwbs, sector,
                        nr_sectors, aux, aux2, error, note_off, note_kind, note_row, info,
                        regions, nreg, start, stop)


@numba.njit(cache=True)
def _decode_le8(b: Any, time_ns: Any, seq: Any, dev: Any, cpu: Any, pid: Any, action: Any,
                rwbs: Any, sector: Any, nr_sectors: Any, aux: Any, aux2: Any, error: Any,
                note_off: Any, note_kind: Any, note_row: Any, info: Any, regions: Any,
                nreg: int, start: int, stop: int) -> tuple[int, int]:
    return _decode_body(b, False, 8, time_ns, seq, dev, cpu, pid, action, rwbs, sector,
                        nr_sectors, aux, aux2, error, note_off, note_kind, note_row, info,
                        regions, nreg, start, stop)


@numba.njit(cache=True)
def _decode_be8(b: Any, time_ns: Any, seq: Any, dev: Any, cpu: Any, pid: Any, action: Any,
                rwbs: Any, sector: Any, nr_sectors: Any, aux: Any, aux2: Any, error: Any,
                note_off: Any, note_kind: Any, note_row: Any, info: Any, regions: Any,
                nreg: int, start: int, stop: int) -> tuple[int, int]:
    return _decode_body(b, True, 8, time_ns, seq, dev, cpu, pid, action, rwbs, sector,
                        nr_sectors, aux, aux2, error, note_off, note_kind, note_row, info,
                        regions, nreg, start, stop)


_WALK = {(False, 7): _walk_le7, (True, 7): _walk_be7, (False, 8): _walk_le8,
         (True, 8): _walk_be8}
_DECODE = {(False, 7): _decode_le7, (True, 7): _decode_be7, (False, 8): _decode_le8,
           (True, 8): _decode_be8}


def _walk(b: Any, be: bool, version: int, strict: bool = False,
          regions: Any = None, start: int = 0,
          stop: int | None = None) -> tuple[int, int, int, int, int, int]:
    """Pass 1 (see :func:`_walk_body`) for one byte order and version."""
    if regions is None:
        regions = np.zeros((MAX_REGIONS, 4), np.int64)
    end = len(b) if stop is None else int(stop)
    return _WALK[(bool(be), int(version))](  # type: ignore[no-any-return]
        b, bool(strict), regions, int(start), end)


def walk_records_py(data: bytes, big: bool, version: int, strict: bool = False, *,
                    start: int = 0, stop: int | None = None
                    ) -> tuple[int, int, int, int, int, list[tuple[int, int, int, int]]]:
    """Readable Python twin of the compiled first pass (:func:`_walk_body`).

    Follows the record chain through ``data`` the same way and returns the same
    ``(status, n_events, n_notes, error_offset, error_value, regions)``, ``regions`` as a list
    of (offset, bytes skipped, REGION_* kind, pdu_len or bad magic). Tests run both on mutated
    streams and require equal answers, so the compiled code stays what this says.
    """
    order: Literal["big", "little"] = "big" if big else "little"
    n = len(data)
    hdr = HDR_V1 if version == VERSION_V1 else HDR_V2
    pdu_off = 46 if version == VERSION_V1 else 50
    act_off = 28 if version == VERSION_V1 else (36 if big else 32)

    def u32(o: int) -> int:
        return int.from_bytes(data[o:o + 4], order)

    def u16(o: int) -> int:
        return int.from_bytes(data[o:o + 2], order)

    def is_magic(value: int) -> bool:
        return (value & 0xFFFFFF00) == MAGIC

    def record_ok(q: int) -> bool:
        # a header with this file's magic and version whose length leads to another header
        if q + hdr > n or not is_magic(u32(q)) or (u32(q) & 0xFF) != version:
            return False
        length = u16(q + pdu_off)
        end = q + hdr + length
        if length > MAX_PDU or end > n:
            return False
        if end + 4 > n:
            return True
        return is_magic(u32(end)) and (u32(end) & 0xFF) == version

    def resync(start: int) -> int:
        return next((q for q in range(start, n) if record_ok(q)), n)

    regions: list[tuple[int, int, int, int]] = []
    events = notes = 0
    pos = start
    while pos < (n if stop is None else stop):
        if pos + hdr > n:
            return _TRUNC_HEADER, events, notes, pos, n - pos, regions
        magic = u32(pos)
        if not is_magic(magic):
            if strict or pos == 0:
                return _BAD_MAGIC, events, notes, pos, magic, regions
            if len(regions) == MAX_REGIONS:
                return _TOO_CORRUPT, events, notes, pos, len(regions), regions
            q = resync(pos + 1)
            regions.append((pos, q - pos, REGION_GARBAGE, magic))
            pos = q
            continue
        if magic & 0xFF != version:
            return _VERSION_CHANGE, events, notes, pos, magic & 0xFF, regions
        length = u16(pos + pdu_off)
        end = pos + hdr + length
        if end > n:
            return _PDU_PAST_END, events, notes, pos, length, regions
        after = u32(end) if length <= MAX_PDU and end + 4 <= n else 0
        broken = length <= MAX_PDU and end + 4 <= n and not is_magic(after)
        if length > MAX_PDU and strict:
            return _BAD_PDU, events, notes, pos, length, regions
        if length > MAX_PDU or (broken and not strict):
            if len(regions) == MAX_REGIONS:
                return _TOO_CORRUPT, events, notes, pos, len(regions), regions
            q = resync(pos + hdr)
            if length > MAX_PDU or q < end:
                regions.append((pos, q - pos, REGION_BAD_LENGTH, length))
                pos = q
                continue
            regions.append((end, q - end, REGION_GARBAGE, after))
            end = q
        action = u32(pos + act_off)
        if action & TC_NOTIFY:
            notes += 1
            events += (action & 0xFEFF) == TN_MESSAGE
        else:
            events += 1
        pos = end
    return _OK, events, notes, pos, 0, regions


@numba.njit(cache=True)
def _event_offset(b: Any, be: bool, version: int, row: int) -> int:
    """Byte offset of the ``row``-th event (non-note record or message) of a file."""
    n = b.shape[0]
    hdr = 48 if version == 7 else 64
    pdu_off = 46 if version == 7 else 50
    act_off = 28 if version == 7 else (36 if be else 32)
    pos = 0
    k = 0
    while pos + hdr <= n:
        action = _rd32(b, pos + act_off, be)
        is_event = (action & TC_NOTIFY) == 0 or (action & 0xFEFF) == TN_MESSAGE
        if is_event:
            if k == row:
                return pos
            k += 1
        pos += hdr + _rd16(b, pos + pdu_off, be)
    return -1


@dataclass
class RawBlktrace:
    """One binary file decoded, before merging: absolute times, comms not yet assigned."""

    name: str
    table: EventTable
    #: (time_ns, pid, comm) of BLK_TN_PROCESS notes in file order
    processes: list[tuple[int, int, str]] = field(default_factory=list)
    #: (time_ns, wall seconds, wall nanoseconds) of BLK_TN_TIMESTAMP notes
    timestamps: list[tuple[int, int, int]] = field(default_factory=list)
    #: message rows (table row -> text)
    messages: dict[int, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: machine-readable problems that are not fatal: {"file", "offset", "reason", "kind"}
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    version: int = VERSION_V1
    big_endian: bool = False
    #: earliest time of a record that counts for genesis (events and messages), or None
    genesis: int | None = None


def _map(path: Path) -> tuple[npt.NDArray[np.uint8], Any]:
    size = path.stat().st_size
    if size == 0:
        return np.zeros(0, dtype=np.uint8), None
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mm, dtype=np.uint8), mm


def _byte_order(buf: npt.NDArray[np.uint8], name: str) -> tuple[bool, int]:
    if len(buf) < 4:
        raise ParseError(name, f"truncated header: file has {len(buf)} bytes, a record needs 48",
                         offset=0)
    le = int.from_bytes(bytes(buf[:4]), "little")
    be = int.from_bytes(bytes(buf[:4]), "big")
    if (le & 0xFFFFFF00) == MAGIC:
        magic, big = le, False
    elif (be & 0xFFFFFF00) == MAGIC:
        magic, big = be, True
    else:
        raise ParseError(name, f"bad magic 0x{le:08x} (not a blktrace file)", offset=0)
    version = magic & 0xFF
    if version not in (VERSION_V1, VERSION_V2):
        raise ParseError(name, f"unsupported trace version 0x{version:02x} "
                               "(blkparse reads 0x07; 0x08 is blktrace v2)", offset=0)
    return big, version


def _walk_error(name: str, status: int, offset: int, value: int, version: int,
                size: int) -> ParseError:
    hdr = HDR_V1 if version == VERSION_V1 else HDR_V2
    if status == _BAD_MAGIC:
        return ParseError(name, f"bad magic 0x{value:08x} in record header (corrupt data or "
                                "wrong record length before it)", offset=offset)
    if status == _VERSION_CHANGE:
        return ParseError(name, f"record version changes from 0x{version:02x} to 0x{value:02x}",
                          offset=offset)
    if status == _TRUNC_HEADER:
        return ParseError(name, f"truncated header: {value} bytes left, a record needs {hdr} "
                                "(capture cut short?)", offset=offset)
    if status == _PDU_PAST_END:
        return ParseError(name, f"payload length {value} runs past the end of the file "
                                f"({size} bytes)", offset=offset)
    if status == _BAD_PDU:
        return ParseError(name, f"corrupt record: payload length {value} is larger than any "
                                f"blktrace payload (at most {MAX_PDU} bytes); strict mode "
                                "refuses damaged files", offset=offset)
    if status == _TOO_CORRUPT:
        return ParseError(name, f"more than {value} corrupt regions (the file is damaged "
                                "throughout, not a usable blktrace)", offset=offset)
    return ParseError(name, f"corrupt record (status {status})", offset=offset)


def parse_blktrace_raw(path: str | Path, *, name: str | None = None,
                       strict: bool = False) -> RawBlktrace:
    """Decode one binary blktrace file (any CPU, any number of devices).

    Args:
        strict: fail on a damaged record instead of skipping it with a warning.

    Raises:
        ParseError: bad magic, unsupported version, truncated header, payload past the end
            (with the record's byte offset); in strict mode any corrupt record; otherwise
            more than MAX_REGIONS corrupt regions or more corrupt bytes than good ones.
    """
    label = name or str(path)
    p = Path(path)
    buf, mm = _map(p)
    try:
        return _parse_buffer(buf, label, p.name, strict)
    finally:
        del buf
        if mm is not None:
            try:
                mm.close()
            except BufferError:  # a view still exists (only in error paths); GC closes it
                pass


def parse_blktrace_bytes(data: bytes, *, name: str = "<bytes>",
                         strict: bool = False) -> RawBlktrace:
    """Same as :func:`parse_blktrace_raw` for an in-memory buffer (tests, fuzzing)."""
    return _parse_buffer(np.frombuffer(data, dtype=np.uint8), name, name, strict)


def _region_report(label: str, row: tuple[int, int, int, int], size: int
                   ) -> tuple[str, dict[str, Any]]:
    """Warning text and diagnostic of one skipped corrupt region."""
    off, skipped, kind, value = row
    to = (f"the next valid record at byte {off + skipped}" if off + skipped < size
          else "the end of the file")
    if kind == REGION_BAD_LENGTH:
        why = (f"payload length {value} is larger than any blktrace payload (at most "
               f"{MAX_PDU} bytes)" if value > MAX_PDU else
               f"payload length {value} does not lead to the next record header")
        reason = (f"corrupt record ({why}): the record is dropped and {skipped} bytes are "
                  f"skipped to {to}; the file is damaged (not a relay buffer drop)")
    else:
        reason = (f"corrupt data (bad magic 0x{value:08x} where a record should start): "
                  f"{skipped} bytes skipped to {to}; the file is damaged (not a relay buffer "
                  "drop)")
    return (f"{label}, byte {off}: {reason}",
            {"file": label, "offset": off, "reason": reason, "kind": "corrupt_record",
             "skipped_bytes": skipped})


@dataclass
class FileFacts:
    """What a file's warnings and diagnostics are made of, gathered over the whole file.

    The whole-file parse fills it from its two passes; a file parsed as byte ranges
    (:mod:`workers.traces.byterange`) adds up the ranges' facts, and both then call
    :func:`file_notes`, so the texts are the same by construction.
    """

    size: int
    rows: int
    #: corrupt regions in file order: (offset, bytes skipped, REGION_* kind, value)
    regions: list[tuple[int, int, int, int]]
    #: records with unknown action codes dropped
    dropped: int
    #: cpus of the non-message rows (only needed for a per-CPU file name)
    cpus: list[int]
    #: sequence gaps: (count, offset, header device, cpu, sequence before, after) of the first
    gaps: tuple[int, int, int, int, int, int]


def file_notes(label: str, basename: str, facts: FileFacts
               ) -> tuple[list[str], list[dict[str, Any]]]:
    """The warnings and diagnostics of one binary file, in the parser's order: unknown
    actions, corrupt regions, records of other cpus in a per-CPU file, sequence gaps."""
    warnings: list[str] = []
    diagnostics: list[dict[str, Any]] = []
    if facts.dropped:
        warnings.append(f"{label}: {facts.dropped} records with unknown action codes skipped "
                        "(blkparse prints 'Bad fs action')")
    for region in facts.regions:
        text, diag = _region_report(label, region, facts.size)
        warnings.append(text)
        diagnostics.append(diag)
    mo = re.search(r"\.blktrace\.(\d+)$", basename)
    if mo and facts.rows:
        want = int(mo.group(1))
        other = [c for c in facts.cpus if c != want]
        if other:
            warnings.append(
                f"{label}: records of cpu {', '.join(str(int(c)) for c in other[:4])} in the "
                f"file for cpu {want} (a merged stream under a per-CPU name; blkparse -i NAME "
                f"prints 'cpu {want} trace info has error'); read as a merged stream")
    if facts.gaps[0]:
        n_gaps, off, dev_v, cpu_v, prev_seq, next_seq = facts.gaps
        reason = (f"sequence gap on {dev_v >> 20},{dev_v & 0xFFFFF} cpu {cpu_v} "
                  f"({prev_seq} -> {next_seq}); {n_gaps} gap(s) in this file: the relay "
                  "buffer dropped events (blkparse does not report this)")
        warnings.append(f"{label}, byte {off}: {reason}")
        diagnostics.append({"file": label, "offset": off, "reason": reason,
                            "kind": "sequence_gap", "gaps": n_gaps})
    return warnings, diagnostics


@dataclass
class Decoded:
    """The records starting in [start, stop) of a buffer, decoded (offsets are the file's)."""

    raw: RawBlktrace
    #: where pass 1 stopped: the first record start at or after ``stop``
    end: int
    regions: list[tuple[int, int, int, int]]
    dropped: int
    #: pass 2's sequence check: gap count, offset of the first gap, header device, cpu,
    #: sequence before, after (from an empty table at ``start``)
    gaps: tuple[int, int, int, int, int, int]


def decode_records(buf: npt.NDArray[np.uint8], label: str, big: bool, version: int, *,
                   strict: bool = False, start: int = 0, stop: int | None = None,
                   base: int = 0, size: int | None = None) -> Decoded:
    """Both passes over the records starting in [start, stop) of ``buf``, which holds the
    file's bytes from offset ``base`` (offsets in the result and in errors are the file's;
    ``start``/``stop`` are the buffer's). No warnings yet: :func:`file_notes` makes them.

    Raises:
        ParseError: as :func:`parse_blktrace_raw` (walk errors, too much damage, a cpu number
            above 65535).
    """
    regions = np.zeros((MAX_REGIONS, 4), np.int64)
    end_at = len(buf) if stop is None else int(stop)
    total = len(buf) + base if size is None else size
    status, n_events, n_notes, err_off, err_val, nreg = _walk(buf, big, version, strict,
                                                              regions, start, end_at)
    if status != _OK:
        raise _walk_error(label, int(status), int(err_off) + base, int(err_val), version,
                          total)
    nreg = int(nreg)
    region_rows = [(int(regions[i, 0]) + base, int(regions[i, 1]), int(regions[i, 2]),
                    int(regions[i, 3])) for i in range(nreg)]
    skipped_total = sum(r[1] for r in region_rows)
    if skipped_total * 2 > total:
        raise ParseError(label, f"{skipped_total} of {total} bytes are corrupt (first "
                                f"damage at byte {region_rows[0][0]}): not a usable blktrace",
                         offset=region_rows[0][0])
    cols: dict[str, npt.NDArray[Any]] = {
        "time_ns": np.empty(n_events, np.int64),
        "seq": np.empty(n_events, np.uint32),
        "dev": np.empty(n_events, np.uint32),
        "cpu": np.empty(n_events, np.uint16),
        "pid": np.empty(n_events, np.uint32),
        "action": np.empty(n_events, np.uint8),
        "rwbs": np.empty(n_events, np.uint16),
        "sector": np.empty(n_events, np.uint64),
        "nr_sectors": np.empty(n_events, np.uint32),
        "aux": np.empty(n_events, np.uint64),
        "aux2": np.empty(n_events, np.uint32),
        "error": np.empty(n_events, np.int16),
    }
    note_off = np.empty(n_notes, np.int64)
    note_kind = np.empty(n_notes, np.int64)
    note_row = np.empty(n_notes, np.int64)
    info = np.zeros(7, np.int64)
    k, dropped = _DECODE[(big, version)](
        buf, cols["time_ns"], cols["seq"], cols["dev"], cols["cpu"], cols["pid"],
        cols["action"], cols["rwbs"], cols["sector"], cols["nr_sectors"], cols["aux"],
        cols["aux2"], cols["error"], note_off, note_kind, note_row, info, regions, nreg,
        int(start), end_at)
    if info[6] >= 0:
        raise ParseError(label, "cpu number above 65535 in a record (corrupt data)",
                         offset=int(info[6]) + base)
    hdr = HDR_V1 if version == VERSION_V1 else HDR_V2
    processes: list[tuple[int, int, str]] = []
    timestamps: list[tuple[int, int, int]] = []
    messages: dict[int, str] = {}
    order = ">" if big else "<"
    for off, kind, row in zip(note_off.tolist(), note_kind.tolist(), note_row.tolist(),
                              strict=True):
        head = bytes(buf[off:off + hdr])
        t = int.from_bytes(head[8:16], "big" if big else "little")
        pid_off = 28 if version == VERSION_V2 else 32
        pdu_off = 50 if version == VERSION_V2 else 46
        pidv = int.from_bytes(head[pid_off:pid_off + 4], "big" if big else "little")
        pdu_len = int.from_bytes(head[pdu_off:pdu_off + 2], "big" if big else "little")
        act_off = (36 if big else 32) if version == VERSION_V2 else 28  # the low 32 bits
        act = int.from_bytes(head[act_off:act_off + 4], "big" if big else "little")
        start_pdu = off + hdr + (8 if act & TA_CGROUP else 0)
        payload = bytes(buf[start_pdu:off + hdr + pdu_len])
        if kind == TN_PROCESS:
            comm = payload.split(b"\x00", 1)[0].decode("utf-8", errors="replace")
            processes.append((t, pidv, comm))
        elif kind == TN_TIMESTAMP:
            if len(payload) >= 8:
                sec = int(np.frombuffer(payload[:4], dtype=order + "u4")[0])
                nsec = int(np.frombuffer(payload[4:8], dtype=order + "u4")[0])
                timestamps.append((t, sec, nsec))
        elif kind == TN_MESSAGE:
            messages[int(row)] = payload.decode("utf-8", errors="replace")
    keep: npt.NDArray[np.bool_] | None = None
    if dropped:
        keep = cols["action"] != 0
    # genesis candidates: events and messages (PROCESS/TIMESTAMP notes are excluded)
    times = cols["time_ns"]
    if keep is not None:
        genesis = int(times[keep].min()) if keep.any() else None
    else:
        genesis = int(times.min()) if n_events else None
    table = EventTable(
        {
            "time_ns": times,
            "seq": cols["seq"],
            "dev": cols["dev"],
            "cpu": cols["cpu"],
            "pid": cols["pid"],
            "action": cols["action"],
            "rwbs": cols["rwbs"],
            "sector": cols["sector"],
            "nr_sectors": cols["nr_sectors"],
            "aux": cols["aux"],
            "aux2": cols["aux2"],
            "error": cols["error"],
        },
        meta={"format": "blktrace", "version": version,
              "byte_order": "big" if big else "little"},
    )
    if keep is not None:
        table = table.take(np.flatnonzero(keep))
        remap_rows = np.cumsum(keep) - 1
        messages = {int(remap_rows[r]): txt for r, txt in messages.items()}
    gaps = (int(info[0]), int(info[1]) + (base if info[0] else 0), int(info[2]), int(info[3]),
            int(info[4]), int(info[5]))
    raw = RawBlktrace(name=label, table=table, processes=processes, timestamps=timestamps,
                      messages=messages, version=version, big_endian=big, genesis=genesis)
    return Decoded(raw=raw, end=int(err_off) + base, regions=region_rows,
                   dropped=int(dropped), gaps=gaps)


def row_cpus(table: EventTable) -> list[int]:
    """The cpus of a table's non-message rows, sorted (:attr:`FileFacts.cpus`)."""
    return [int(c) for c in np.unique(table.cpu[table.action != ACT_MESSAGE])]


def _parse_buffer(buf: npt.NDArray[np.uint8], label: str, basename: str,
                  strict: bool = False) -> RawBlktrace:
    big, version = _byte_order(buf, label)
    dec = decode_records(buf, label, big, version, strict=strict)
    raw = dec.raw
    per_cpu = re.search(r"\.blktrace\.(\d+)$", basename) is not None
    facts = FileFacts(size=len(buf), rows=len(raw.table), regions=dec.regions,
                      dropped=dec.dropped,
                      cpus=row_cpus(raw.table) if per_cpu and len(raw.table) else [],
                      gaps=dec.gaps)
    raw.warnings, raw.diagnostics = file_notes(label, basename, facts)
    return raw


def comm_map(processes: Iterable[Iterable[tuple[Any, int, str]]]
             ) -> tuple[dict[int, str], list[str], dict[str, int]]:
    """One comm map for every file of a bundle: ``(comm_of_pid, comms, comm_index)``.

    ``processes`` holds each file's PROCESS notes ``(time, pid, comm)`` in file order. The
    first note read for a pid wins (add_ppm_hash in blkparse.c keeps an existing entry), in
    file order, not time order; ``comms`` starts with ``NULL_COMM`` (index 0) and lists every
    other name once, in the order first seen. Shared by the in-memory merge
    (:func:`merge_raw`) and the chunked one (``workers.traces.streammerge``), which must give
    the same table.
    """
    comm_of_pid: dict[int, str] = {}
    for notes in processes:
        for _t, pid, comm in notes:
            comm_of_pid.setdefault(int(pid), str(comm))
    comms = [NULL_COMM]
    comm_index = {NULL_COMM: 0}
    for comm in comm_of_pid.values():
        if comm not in comm_index:
            comm_index[comm] = len(comms)
            comms.append(comm)
    return comm_of_pid, comms, comm_index


def merge_raw(raws: list[RawBlktrace]) -> EventTable:
    """Merge decoded files the way blkparse does and make times relative to genesis.

    Rows are ordered by time; ties keep input order (files sorted by name, so device then cpu,
    then the per-cpu sequence), which a stable sort on time gives in O(n log k) for k
    already-sorted per-cpu runs.
    """
    if not raws:
        return EventTable.empty()
    warnings: list[str] = []
    # blkparse reads NAME.blktrace.0, .1, ... one file after the other
    raws = sorted(raws, key=lambda r: _natural_key(r.name))
    for r in raws:
        warnings.extend(r.warnings)
    comm_of_pid, comms, comm_index = comm_map(r.processes for r in raws)
    parts = []
    for r in raws:
        t = r.table
        comm_col = np.zeros(len(t), dtype=np.uint32)
        if comm_of_pid and len(t):
            noted = np.fromiter(comm_of_pid, dtype=np.int64, count=len(comm_of_pid))
            idx = np.array([comm_index[c] for c in comm_of_pid.values()], dtype=np.uint32)
            top = int(noted.max())
            if top < (1 << 24):
                # pids are small (pid_max <= 4M): a direct lookup table, one gather
                lut = np.zeros(top + 1, dtype=np.uint32)
                lut[noted] = idx
                _gather_comm(t.pid, lut, comm_col)
            else:
                order = np.argsort(noted)
                pos = np.searchsorted(noted[order], t.pid)
                pos = np.minimum(pos, len(noted) - 1)
                hit = noted[order][pos] == t.pid
                comm_col = np.where(hit, idx[order][pos], np.uint32(0)).astype(np.uint32)
        for row, text in r.messages.items():
            if text not in comm_index:
                comm_index[text] = len(comms)
                comms.append(text)
            comm_col[row] = comm_index[text]
        t.comm = comm_col
        parts.append(t)
    # device names from per-device file names ("vda.blktrace.0"), before the merge below
    # consumes the parts' columns
    names: dict[int, set[str]] = {}
    for r in raws:
        base = Path(r.name.rsplit(":", 1)[-1]).name
        if ".blktrace." in base and len(r.table):
            devs = np.unique(r.table.dev[r.table.action != ACT_REMAP])
            if len(devs) == 1:
                names.setdefault(int(devs[0]), set()).add(base.split(".blktrace.")[0])
    if len(parts) == 1:
        merged = parts[0]
        if len(merged) and not _is_sorted(merged.time_ns):
            merged = merged.take(np.argsort(merged.time_ns, kind="stable"))
    else:
        merged = EventTable(_merge_columns(parts), comms=comms)
    merged.comms = comms
    geneses = [r.genesis for r in raws if r.genesis is not None]
    genesis = min(geneses) if geneses else 0
    if genesis:
        merged.time_ns -= np.int64(genesis)
    merged.devices = {d: DeviceInfo(dev=d, name=sorted(n)[0]) for d, n in names.items()
                      if len(n) == 1}
    ts = sorted(ts for r in raws for ts in r.timestamps)
    merged.meta = {
        "format": "blktrace",
        "genesis_ns": genesis,
        "versions": sorted({r.version for r in raws}),
        "byte_orders": sorted({"big" if r.big_endian else "little" for r in raws}),
        "warnings": warnings,
        "diagnostics": [d for r in raws for d in r.diagnostics],
    }
    if ts:
        t0, sec, nsec = ts[0]
        # wall clock of genesis = wall clock of the note - (note time - genesis)
        wall = sec * 1_000_000_000 + nsec - (t0 - genesis)
        merged.meta["wallclock_genesis_ns"] = wall
    return merged


def _merge_columns(parts: list[EventTable]) -> dict[str, npt.NDArray[Any]]:
    """The parts' columns stacked in order and put in time order (stable: ties keep part
    order, then row order), one column at a time; each part column is released (replaced by
    an empty one) as soon as it is stacked.

    The same rows in the same order as ``EventTable.concat(parts).take(argsort(time,
    stable))``, the readable twin (tests/engine/traces/test_merge_memory.py), but holding the
    bundle about 1.5 times instead of 3 times: stacked columns, the parts' columns and the
    gathered copy never all exist at once. The parts are consumed: their tables are empty
    afterwards.
    """
    times = np.concatenate([t.time_ns for t in parts])
    order = None if _is_sorted(times) else np.argsort(times, kind="stable")
    out: dict[str, npt.NDArray[Any]] = {}
    for name, dtype in COLUMNS:
        col = times if name == "time_ns" else np.concatenate([getattr(t, name) for t in parts])
        if name == "time_ns":
            del times
        for t in parts:
            setattr(t, name, np.zeros(0, dtype=dtype))
        out[name] = col if order is None else col[order]
        del col
    return out


def _natural_key(name: str) -> tuple[str, int, str]:
    """``vda.blktrace.10`` sorts after ``vda.blktrace.9``."""
    base, dot, suffix = name.rpartition(".")
    if dot and suffix.isdigit():
        return (base, int(suffix), name)
    return (name, -1, name)

