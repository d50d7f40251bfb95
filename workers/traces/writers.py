"""EventTable -> blkparse default text and -> binary blktrace v1.

Used by the blkparse equivalence tests (generate a binary, let Debian's ``blkparse`` print it,
compare with our parse) and by the replay model's ``--emit blkparse|blktrace`` so btt,
iowatcher and seekwatcher can read predicted streams.

Text layout: ``process_default`` in blkparse_fmt.c, header
``"%3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s "`` and the per-action tails listed in
:mod:`workers.traces.blkparse_text`. The end-of-run summary blocks are not written (they are
blkparse's own statistics, ``-q`` omits them too).

Binary layout: ``struct blk_io_trace`` v1 (48 bytes + payload) in the chosen byte order; the
category bits are rebuilt from the RWBS bits plus each action's own category (``BLK_TA_*`` full
values in include/uapi/linux/blktrace_api.h); split/unplug/remap payloads are big-endian as the
kernel writes them; one BLK_TN_PROCESS note is written before a pid's first event on each cpu
(``trace_note_tsk``), and message rows become BLK_TN_MESSAGE notes.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO, TextIO

import numba
import numpy as np
import numpy.typing as npt

from workers.events import (
    ACT_ABORT,
    ACT_BACKMERGE,
    ACT_BOUNCE,
    ACT_COMPLETE,
    ACT_DRV_DATA,
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
    ACTION_LETTERS,
    RWBS_AHEAD,
    RWBS_DISCARD,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_META,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
    rwbs_to_text,
)
from workers.traces.blktrace_bin import (
    MAGIC,
    TC_AHEAD,
    TC_COMPLETE,
    TC_DISCARD,
    TC_FLUSH,
    TC_FUA,
    TC_ISSUE,
    TC_META,
    TC_NOTIFY,
    TC_QUEUE,
    TC_READ,
    TC_REQUEUE,
    TC_SYNC,
    TC_WRITE,
    VERSION_V1,
)

#: Actions blkparse prints (others, e.g. ABORT and DRV_DATA, are not part of its text).
_PRINTED = frozenset({ACT_QUEUE, ACT_BACKMERGE, ACT_FRONTMERGE, ACT_GETRQ, ACT_SLEEPRQ,
                      ACT_REQUEUE, ACT_ISSUE, ACT_COMPLETE, ACT_PLUG, ACT_UNPLUG_IO,
                      ACT_UNPLUG_TIMER, ACT_INSERT, ACT_SPLIT, ACT_BOUNCE, ACT_REMAP,
                      ACT_MESSAGE})


def format_header(dev: int, cpu: int, seq: int, time_ns: int, pid: int, act: str,
                  rwbs: str) -> str:
    """blkparse's fixed header for one event (``process_default``)."""
    t = max(int(time_ns), 0)
    return (f"{dev >> 20:3d},{dev & 0xFFFFF:<3d} {cpu:2d} {seq:8d} "
            f"{t // 1_000_000_000:5d}.{t % 1_000_000_000:09d} {pid:5d} {act:>2s} {rwbs:>3s} ")


def write_blkparse(table: EventTable, out: TextIO) -> int:
    """Write every printable event in blkparse's default layout; returns lines written."""
    n = 0
    rwbs_text: dict[int, str] = {}
    cols = {name: col.tolist() for name, col in table.columns().items()}
    comms = table.comms
    for i in range(len(table)):
        code = cols["action"][i]
        if code not in _PRINTED:
            continue
        bits = cols["rwbs"][i]
        rw = rwbs_text.get(bits)
        if rw is None:
            rw = rwbs_text[bits] = rwbs_to_text(bits)
        head = format_header(cols["dev"][i], cols["cpu"][i], cols["seq"][i], cols["time_ns"][i],
                             cols["pid"][i], ACTION_LETTERS[code], rw)
        sector = cols["sector"][i]
        nr = cols["nr_sectors"][i]
        comm = comms[cols["comm"][i]]
        if code in (ACT_QUEUE, ACT_INSERT, ACT_ISSUE, ACT_BOUNCE, ACT_GETRQ, ACT_SLEEPRQ,
                    ACT_BACKMERGE, ACT_FRONTMERGE):
            tail = f"{sector} + {nr} [{comm}]" if nr else f"[{comm}]"
        elif code in (ACT_COMPLETE, ACT_REQUEUE):
            # blkparse: "sector + n [error]", or "sector [error]" for zero-length requests
            err = cols["error"][i] & 0xFFFF
            tail = f"{sector} + {nr} [{err}]" if nr else f"{sector} [{err}]"
        elif code == ACT_PLUG:
            tail = f"[{comm}]"
        elif code in (ACT_UNPLUG_IO, ACT_UNPLUG_TIMER):
            # get_pdu_int() is printed with %u: the depth's low 32 bits
            tail = f"[{comm}] {cols['aux'][i] & 0xFFFFFFFF}"
        elif code == ACT_SPLIT:
            tail = f"{sector} / {cols['aux'][i]} [{comm}]"
        elif code == ACT_REMAP:
            frm = cols["aux2"][i]
            tail = f"{sector} + {nr} <- ({frm >> 20},{frm & 0xFFFFF}) {cols['aux'][i]}"
        else:  # message
            tail = comm
        out.write(head + tail + "\n")
        n += 1
    return n


# --- binary -------------------------------------------------------------------------------
#: each action's own category (the ``BLK_TA_*`` full constants)
_ACTION_TC = {ACT_QUEUE: TC_QUEUE, ACT_BACKMERGE: TC_QUEUE, ACT_FRONTMERGE: TC_QUEUE,
              ACT_GETRQ: TC_QUEUE, ACT_SLEEPRQ: TC_QUEUE, ACT_REQUEUE: TC_REQUEUE,
              ACT_ISSUE: TC_ISSUE, ACT_COMPLETE: TC_COMPLETE, ACT_PLUG: TC_QUEUE,
              ACT_UNPLUG_IO: TC_QUEUE, ACT_UNPLUG_TIMER: TC_QUEUE, ACT_INSERT: TC_QUEUE,
              ACT_REMAP: TC_QUEUE, ACT_ABORT: TC_QUEUE, ACT_DRV_DATA: 1 << 30}


def category_bits(action: npt.NDArray[np.uint8], rwbs: npt.NDArray[np.uint16],
                  ) -> npt.NDArray[np.uint32]:
    """The ``action`` word of v1 records: code | BLKTC_* bits (vectorized)."""
    r = rwbs.astype(np.uint32)
    a = action.astype(np.uint32)
    lut = np.zeros(256, dtype=np.uint32)
    for code, tc in _ACTION_TC.items():
        lut[code] = tc
    word = a | lut[a]
    for bit, tc in ((RWBS_READ, TC_READ), (RWBS_WRITE, TC_WRITE), (RWBS_FLUSH, TC_FLUSH),
                    (RWBS_SYNC, TC_SYNC), (RWBS_AHEAD, TC_AHEAD), (RWBS_META, TC_META),
                    (RWBS_DISCARD, TC_DISCARD), (RWBS_FUA, TC_FUA)):
        word |= np.where((r & bit) != 0, np.uint32(tc), np.uint32(0))
    return word


@numba.njit(cache=True, inline="always")
def _w32(b: Any, o: int, v: Any, be: bool) -> None:
    if be:
        b[o] = (v >> 24) & 0xFF
        b[o + 1] = (v >> 16) & 0xFF
        b[o + 2] = (v >> 8) & 0xFF
        b[o + 3] = v & 0xFF
    else:
        b[o] = v & 0xFF
        b[o + 1] = (v >> 8) & 0xFF
        b[o + 2] = (v >> 16) & 0xFF
        b[o + 3] = (v >> 24) & 0xFF


@numba.njit(cache=True, inline="always")
def _w64(b: Any, o: int, v: Any, be: bool) -> None:
    hi = np.uint64(v) >> np.uint64(32)
    lo = np.uint64(v) & np.uint64(0xFFFFFFFF)
    if be:
        _w32(b, o, hi, True)
        _w32(b, o + 4, lo, True)
    else:
        _w32(b, o, lo, False)
        _w32(b, o + 4, hi, False)


@numba.njit(cache=True)
def _encode(b: Any, offsets: Any, lengths: Any, be: bool, seq: Any, time_ns: Any,
            sector: Any, nbytes: Any, word: Any, pid: Any, dev: Any, cpu: Any, error: Any,
            aux: Any, aux2: Any, code: Any) -> None:
    for i in range(offsets.shape[0]):
        ln = lengths[i]
        if ln == 0:
            continue
        o = offsets[i]
        _w32(b, o, MAGIC | VERSION_V1, be)
        _w32(b, o + 4, seq[i], be)
        _w64(b, o + 8, time_ns[i], be)
        _w64(b, o + 16, sector[i], be)
        _w32(b, o + 24, nbytes[i], be)
        _w32(b, o + 28, word[i], be)
        _w32(b, o + 32, pid[i], be)
        c = code[i]
        d = dev[i]
        if c == 15:  # remap: the header names the queue that logged it (device_to)
            _w32(b, o + 48, aux2[i], True)
            _w32(b, o + 52, d, True)
            _w64(b, o + 56, aux[i], True)
        elif c == 13 or c == 10 or c == 11:
            _w64(b, o + 48, aux[i], True)
        _w32(b, o + 36, d, be)
        _w32(b, o + 40, cpu[i], be)
        e = error[i]
        if be:
            b[o + 44] = (e >> 8) & 0xFF
            b[o + 45] = e & 0xFF
            b[o + 46] = ((ln - 48) >> 8) & 0xFF
            b[o + 47] = (ln - 48) & 0xFF
        else:
            b[o + 44] = e & 0xFF
            b[o + 45] = (e >> 8) & 0xFF
            b[o + 46] = (ln - 48) & 0xFF
            b[o + 47] = ((ln - 48) >> 8) & 0xFF


def _note(kind: int, *, time_ns: int, pid: int, dev: int, cpu: int, payload: bytes,
          big_endian: bool) -> bytes:
    order = ">" if big_endian else "<"
    return struct.pack(order + "IIQQIIIIIHH", MAGIC | VERSION_V1, 0, time_ns, 0, 0, TC_NOTIFY | kind,
                       pid, dev, cpu, 0, len(payload)) + payload


def encode_blktrace(table: EventTable, *, big_endian: bool = False, time_base_ns: int = 0,
                    process_notes: bool = True) -> bytes:
    """The records of ``table`` (in table order) as one binary blktrace v1 stream.

    Sequence numbers of 0 on events (tables from text formats without them) are renumbered
    per (device, cpu) from 1, since blkparse and btt expect them to grow.
    """
    n = len(table)
    code = table.action.astype(np.int64)
    is_msg = code == ACT_MESSAGE
    payload = np.zeros(n, dtype=np.int64)
    payload[(code == ACT_SPLIT) | (code == ACT_UNPLUG_IO) | (code == ACT_UNPLUG_TIMER)] = 8
    payload[code == ACT_REMAP] = 16
    lengths = np.where(is_msg, 0, 48 + payload)
    seq = table.seq.astype(np.uint32)
    if n and np.all(seq[~is_msg] == 0):
        seq = _renumber(table, is_msg)
    # notes: PROCESS before a pid's first event on each cpu; messages at their row
    notes: list[tuple[int, bytes]] = []
    times = table.time_ns.astype(np.int64) + np.int64(time_base_ns)
    if process_notes and n:
        ev = np.flatnonzero(~is_msg & (table.comm != 0))
        if len(ev):
            key = (table.pid[ev].astype(np.uint64) << np.uint64(16)) | table.cpu[ev]
            _, first = np.unique(key, return_index=True)
            for row in sorted(int(ev[f]) for f in first):
                comm = table.comms[int(table.comm[row])].encode()[:15]
                notes.append((row, _note(0, time_ns=max(int(times[row]), 0),
                                         pid=int(table.pid[row]), dev=int(table.dev[row]),
                                         cpu=int(table.cpu[row]),
                                         payload=comm.ljust(16, b"\x00"),
                                         big_endian=big_endian)))
    for row in np.flatnonzero(is_msg).tolist():
        text = table.comms[int(table.comm[row])].encode()
        notes.append((row, _note(2, time_ns=max(int(times[row]), 0), pid=int(table.pid[row]),
                                 dev=int(table.dev[row]), cpu=int(table.cpu[row]),
                                 payload=text, big_endian=big_endian)))
    notes.sort(key=lambda x: x[0])
    offsets = np.zeros(n, dtype=np.int64)
    if n:
        offsets[1:] = np.cumsum(lengths)[:-1]
    buf = np.zeros(int(lengths.sum()), dtype=np.uint8)
    _encode(buf, offsets, lengths, big_endian, seq, times.view(np.uint64),
            table.sector, table.nr_sectors.astype(np.uint32) << np.uint32(9),
            category_bits(table.action, table.rwbs), table.pid, table.dev,
            table.cpu.astype(np.uint32), table.error.view(np.uint16).astype(np.uint32),
            table.aux, table.aux2, code)
    if not notes:
        return buf.tobytes()
    out = bytearray()
    start = 0
    for row, rec in notes:
        pos = int(offsets[row]) if row < n else len(buf)
        out += buf[start:pos].tobytes()
        out += rec
        start = pos
    out += buf[start:].tobytes()
    return bytes(out)


def _renumber(table: EventTable, is_msg: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint32]:
    key = (table.dev.astype(np.uint64) << np.uint64(16)) | table.cpu
    seq = np.zeros(len(table), dtype=np.uint32)
    order = np.lexsort((np.arange(len(table)), key))
    k = key[order]
    ev = ~is_msg[order]
    starts = np.r_[True, k[1:] != k[:-1]]
    grp = np.cumsum(starts) - 1
    counts = np.cumsum(ev)
    base = np.zeros(grp[-1] + 1, dtype=np.int64)
    first_idx = np.flatnonzero(starts)
    base[:] = counts[first_idx] - ev[first_idx]
    seq[order] = np.where(ev, counts - base[grp], 0).astype(np.uint32)
    return seq


def write_blktrace(table: EventTable, out: BinaryIO, *, big_endian: bool = False,
                   time_base_ns: int = 0) -> int:
    """Write ``table`` as one binary blktrace v1 stream; returns bytes written.

    The result reads with ``blkparse -i - < FILE`` and ``btt -i FILE``.
    """
    data = encode_blktrace(table, big_endian=big_endian, time_base_ns=time_base_ns)
    out.write(data)
    return len(data)
