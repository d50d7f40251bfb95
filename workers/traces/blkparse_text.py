"""blkparse default text output -> EventTable.

The default line is printed by ``process_default`` in blkparse_fmt.c with the header
``"%3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s "`` (device, cpu, sequence, seconds.nanoseconds since
genesis, pid, action letters, RWBS) followed by an action-specific tail (trace-formats.md 2.1):

* ``Q I D B G S M F``: ``sector + nsec [comm]``; with ``nsec == 0`` only ``[comm]``; with ``-t``
  an ``(elapsed)`` field before the bracket.
* ``C R``: ``sector + nsec [error]``; with ``nsec == 0`` ``sector [error]``.
* ``P``: ``[comm]``; ``U UT``: ``[comm] depth``.
* ``X``: ``sector / new_sector [comm]`` (``blk_add_trace_split``).
* ``A``: ``sector + nsec <- (maj,min) from_sector`` (``blk_add_trace_bio_remap``); the header's
  device is already ``device_to``.
* ``m``: a BLK_TN_MESSAGE note; the rest of the line is the text. It is kept as an
  ``ACT_MESSAGE`` row whose ``comm`` index points at the message text.
* passthrough (``BLK_TC_PC``): ``bytes (cdb hex) [comm]`` and ``(cdb hex) [error]``.

Everything that is not an event line is skipped: the per-CPU and ``Total`` summary blocks, the
``Throughput``/``Events``/``Skips`` lines, ``Input file ... added`` and, for text pasted into a
mail, the surrounding prose. A line that *starts* like an event (``maj,min cpu seq ...``) but
does not parse is an error with its line number: silently dropping half an event would skew every
analyzer. Whitespace is matched leniently because mail clients collapse runs of spaces.

Times stay as blkparse printed them (already relative to its genesis).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from workers.errors import ParseError
from workers.events import (
    ACT_MESSAGE,
    ACT_REMAP,
    ACT_SPLIT,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    ACTION_CODES,
    NULL_COMM,
    EventTable,
    checked_dev,
    make_dev,
    rwbs_from_text,
)
from workers.traces._textio import open_lines

#: Quick test used by format detection and to tell event lines from prose/summaries.
EVENT_START_RE = re.compile(r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+[A-Za-z]{1,2}\s")
_LOOKS_LIKE_EVENT = re.compile(r"^\s*\d+,\d+\s+\d+\s+\d+\s")

_DEV_RE = re.compile(r"^(\d+),(\d+)$")
_TAIL_GENERIC = re.compile(r"^(?:(\d+)\s+(?:\+\s+(\d+)\s+)?)?(?:\(\s*\d+\)\s+)?\[(.*)\]$")
_TAIL_SPLIT = re.compile(r"^(\d+)\s+/\s+(\d+)\s+\[(.*)\]$")
_TAIL_REMAP = re.compile(r"^(\d+)\s+\+\s+(\d+)\s+<-\s+\((\d+),(\d+)\)\s+(\d+)$")
_TAIL_UNPLUG = re.compile(r"^\[(.*)\]\s+(\d+)$")
_TAIL_PC = re.compile(r"^(?:(\d+)\s+)?\((.*?)\)\s+\[(.*)\]$")

_ERROR_ACTIONS = frozenset({ACTION_CODES["C"], ACTION_CODES["R"]})
_U16 = 0xFFFF
_U32 = 0xFFFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF


class _Columns:
    """Growable typed columns (``array.array``: 8 bytes per int, no per-event objects)."""

    def __init__(self) -> None:
        self.time_ns = array("q")
        self.seq = array("Q")
        self.dev = array("Q")
        self.cpu = array("Q")
        self.pid = array("Q")
        self.action = array("B")
        self.rwbs = array("Q")
        self.sector = array("Q")
        self.nr_sectors = array("Q")
        self.aux = array("Q")
        self.aux2 = array("Q")
        self.error = array("q")
        self.comm = array("Q")
        self.comms: list[str] = [NULL_COMM]
        self.comm_index: dict[str, int] = {NULL_COMM: 0}
        #: last device per pid (-1: any pid), for formats whose plug lines name no device
        self.last_dev: dict[int, int] = {}

    def intern(self, text: str) -> int:
        idx = self.comm_index.get(text)
        if idx is None:
            idx = len(self.comms)
            self.comm_index[text] = idx
            self.comms.append(text)
        return idx

    def add(self, time_ns: int, seq: int, dev: int, cpu: int, pid: int, action: int, rwbs: int,
            sector: int, nr_sectors: int, aux: int, aux2: int, error: int, comm: int) -> None:
        """Append one event (every text parser's single place that writes a row)."""
        self.time_ns.append(time_ns)
        self.seq.append(seq)
        self.dev.append(dev)
        self.cpu.append(cpu)
        self.pid.append(pid)
        self.action.append(action)
        self.rwbs.append(rwbs)
        self.sector.append(sector)
        self.nr_sectors.append(nr_sectors)
        self.aux.append(aux)
        self.aux2.append(aux2)
        self.error.append(error)
        self.comm.append(comm)

    def table(self, *, time_known: bool = True, meta: dict[str, object] | None = None,
              ) -> EventTable:
        cols = {name: np.frombuffer(getattr(self, name), dtype=getattr(self, name).typecode)
                if len(getattr(self, name)) else np.zeros(0)
                for name in ("time_ns", "seq", "dev", "cpu", "pid", "action", "rwbs", "sector",
                             "nr_sectors", "aux", "aux2", "error", "comm")}
        return EventTable(cols, comms=self.comms, time_known=time_known, meta=meta)


def _parse_time(text: str) -> int:
    sec, _, frac = text.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


class _RwbsCache(dict[str, int]):
    def __missing__(self, key: str) -> int:
        value = rwbs_from_text(key)
        self[key] = value
        return value


def parse_lines(lines: Iterable[tuple[int, str]], name: str) -> EventTable:
    """Parse numbered text lines (see :func:`workers.traces._textio.iter_lines`).

    Raises:
        ParseError: an event-shaped line does not parse (line number and reason).
    """
    c = _Columns()
    rwbs_cache = _RwbsCache()
    skipped = 0
    for lineno, line in lines:
        parts = line.split(None, 7)
        if len(parts) < 7 or not _LOOKS_LIKE_EVENT.match(line):
            if line.strip():
                skipped += 1
            continue
        try:
            _parse_event(parts, c, rwbs_cache)
        except ParseError as exc:
            raise ParseError(name, exc.reason, line=lineno) from None
        except (ValueError, OverflowError) as exc:
            raise ParseError(name, f"malformed blkparse event line: {exc}", line=lineno) from None
    table = c.table(meta={"format": "blkparse", "skipped_lines": skipped})
    return table


def _fail(reason: str) -> ParseError:
    return ParseError("", reason)


def _parse_event(parts: list[str], c: _Columns, rwbs_cache: _RwbsCache) -> None:
    m = _DEV_RE.match(parts[0])
    if not m:
        raise _fail(f"bad device {parts[0]!r}")
    major, minor = int(m.group(1)), int(m.group(2))
    if major > 0xFFF or minor > 0xFFFFF:
        raise _fail(f"device {parts[0]} out of range")
    cpu = int(parts[1])
    seq = int(parts[2])
    time_text = parts[3]
    if "." not in time_text:
        raise _fail(f"bad time {time_text!r}")
    time_ns = _parse_time(time_text)
    pid = int(parts[4])
    letter = parts[5]
    code = ACTION_CODES.get(letter)
    if code is None:
        raise _fail(f"unknown action {letter!r}")
    if cpu > _U16 or seq > _U32 or pid > _U32 or time_ns > 2**63 - 1:
        raise _fail("field out of range")
    rwbs_text = parts[6]
    tail = parts[7].strip() if len(parts) > 7 else ""
    sector = nr = aux = aux2 = error = 0
    comm_idx = 0
    if code == ACT_MESSAGE:
        comm_idx = c.intern(tail)
    else:
        if code == ACT_SPLIT:
            t = _TAIL_SPLIT.match(tail)
            if not t:
                raise _fail(f"bad split tail {tail!r}")
            sector, aux = int(t.group(1)), int(t.group(2))
            comm_idx = c.intern(t.group(3))
        elif code == ACT_REMAP:
            t = _TAIL_REMAP.match(tail)
            if not t:
                raise _fail(f"bad remap tail {tail!r}")
            sector, nr = int(t.group(1)), int(t.group(2))
            try:
                aux2 = checked_dev(int(t.group(3)), int(t.group(4)))
            except ValueError as exc:
                raise _fail(str(exc)) from None
            aux = int(t.group(5))
        elif code in (ACT_UNPLUG_IO, ACT_UNPLUG_TIMER):
            t = _TAIL_UNPLUG.match(tail)
            if not t:
                raise _fail(f"bad unplug tail {tail!r}")
            comm_idx = c.intern(t.group(1))
            aux = int(t.group(2))
        else:
            t = _TAIL_GENERIC.match(tail)
            if t:
                if t.group(1) is not None:
                    sector = int(t.group(1))
                    nr = int(t.group(2)) if t.group(2) is not None else 0
                last = t.group(3)
            else:
                p = _TAIL_PC.match(tail)
                if not p:
                    raise _fail(f"bad {letter} tail {tail!r}")
                if p.group(1) is not None:
                    nr = int(p.group(1)) >> 9
                last = p.group(3)
            if code in _ERROR_ACTIONS:
                try:
                    error = int(last)
                except ValueError:
                    raise _fail(f"bad error value {last!r}") from None
                if not -32768 <= error <= 65535:
                    raise _fail(f"error value {error} out of range")
                if error > 32767:  # blkparse prints the u16 field; keep its int16 view
                    error -= 65536
            else:
                comm_idx = c.intern(last)
    if sector > _U64 or aux > _U64 or nr > _U32:
        raise _fail("sector or size out of range")
    try:
        rwbs = rwbs_cache[rwbs_text]
    except ValueError as exc:
        raise _fail(str(exc)) from None
    c.add(time_ns, seq, make_dev(major, minor), cpu, pid, code, rwbs, sector, nr, aux, aux2,
          error, comm_idx)


#: Files at least this large go through the numba scanner first.
FAST_PATH_MIN_BYTES = 256 * 1024


def parse_blkparse_text(path: str | Path, *, name: str | None = None) -> EventTable:
    """Parse a blkparse default-format text file.

    Large files are scanned by :mod:`workers.traces._blkparse_fast` over a memory map; if it
    meets anything unusual it defers to the exact line parser (:func:`parse_lines`), which
    streams the file and reports errors with line numbers.

    Args:
        path: file to read.
        name: the user-facing name for error messages (defaults to ``path``).
    """
    label = name or str(path)
    p = Path(path)
    if p.stat().st_size >= FAST_PATH_MIN_BYTES:
        table = _parse_fast(p)
        if table is not None:
            return table
    return parse_lines(open_lines(path, label), label)


def _parse_fast(path: Path) -> EventTable | None:
    import mmap

    from workers.traces import _blkparse_fast as fast
    from workers.traces._textio import MAX_LINE_BYTES

    if path.stat().st_size == 0:
        return None
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        buf = np.frombuffer(mm, dtype=np.uint8)
        step = 1 << 26  # count newlines in 64 MiB slices: no file-sized temporary
        n = 1 + sum(int(np.count_nonzero(buf[i:i + step] == 10))
                    for i in range(0, len(buf), step))
        cols = {name: np.empty(n, dtype=dt) for name, dt in (
            ("time_ns", np.int64), ("seq", np.uint32), ("dev", np.uint32), ("cpu", np.uint16),
            ("pid", np.uint32), ("action", np.uint8), ("rwbs", np.uint16),
            ("sector", np.uint64), ("nr_sectors", np.uint32), ("aux", np.uint64),
            ("aux2", np.uint32), ("error", np.int16), ("comm", np.uint32))}
        status, k, skipped, starts, ends = fast.scan(
            buf, MAX_LINE_BYTES, cols["time_ns"], cols["seq"], cols["dev"], cols["cpu"],
            cols["pid"], cols["action"], cols["rwbs"], cols["sector"], cols["nr_sectors"],
            cols["aux"], cols["aux2"], cols["error"], cols["comm"])
        if status != fast.OK:
            return None
        names = [bytes(buf[s:e]).decode("utf-8", errors="replace")
                 for s, e in zip(starts, ends, strict=True)]
        del buf
    finally:
        try:
            mm.close()
        except BufferError:  # pragma: no cover - a view is still referenced
            pass
    comms = [NULL_COMM]
    index = {NULL_COMM: 0}
    lut = np.zeros(len(names) + 1, dtype=np.uint32)
    for i, text in enumerate(names, start=1):
        if text not in index:
            index[text] = len(comms)
            comms.append(text)
        lut[i] = index[text]
    cols = {name: col[:k] for name, col in cols.items()}
    cols["comm"] = lut[cols["comm"]]
    return EventTable(cols, comms=comms, meta={"format": "blkparse", "skipped_lines": skipped})
