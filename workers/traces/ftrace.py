"""ftrace block tracepoints (``/sys/kernel/tracing/trace``, trace-cmd report, perf script,
lines quoted in mails) -> EventTable.

Event bodies follow the ``TP_printk`` formats of include/trace/events/block.h across versions
(trace-formats.md section 3):

* bio class (``block_bio_queue``, ``block_getrq``, ``block_sleeprq``, ``block_bio_backmerge``,
  ``block_bio_frontmerge``, ``block_bio_bounce``): ``dev rwbs sector + n [comm]``;
  ``block_bio_complete``: ``dev rwbs sector + n [error]``.
* rq class (``block_rq_insert``, ``block_rq_issue``, ``block_rq_merge``): ``dev rwbs bytes
  (cmd) sector + n [ioprio] [comm]``; the ioprio field ``be,0,4`` exists since ~6.10 and
  ``bytes`` was 0 for fs requests before ~5.0; ``block_rq_complete``, ``block_rq_requeue``,
  ``block_rq_error``: ``dev rwbs (cmd) sector + n [ioprio] [error]``.
* ``block_split``: ``dev rwbs sector / new_sector [comm]``; ``block_bio_remap``: ``dev rwbs
  sector + n <- (maj,min) from``; ``block_rq_remap`` adds nr_bios; ``block_plug``: ``[comm]``;
  ``block_unplug``: ``[comm] depth``.

Mapping to blktrace actions mirrors the kernel's own blktrace probes (kernel/trace/blktrace.c
registers ``blk_add_trace_bio_queue`` on block_bio_queue, ``blk_add_trace_rq_issue`` on
block_rq_issue, and so on). ``block_io_start``/``block_io_done`` (I/O accounting) and other
subsystems' events are skipped and counted.

The line prefix ``TASK-PID [CPU] flags TIMESTAMP:`` gives pid, cpu and time (seconds); the task
may contain spaces and dashes, so the pid is the last ``-digits`` before ``[``. Bare lines
(quoted in mails) have no prefix: their order is kept and the table is marked
``time_known=False`` with the row index as time.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from workers.errors import ParseError
from workers.events import (
    ACT_BACKMERGE,
    ACT_BOUNCE,
    ACT_COMPLETE,
    ACT_FRONTMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_REQUEUE,
    ACT_SLEEPRQ,
    ACT_SPLIT,
    ACT_UNPLUG_IO,
    RWBS_DISCARD,
    RWBS_FLAG_LETTERS,
    RWBS_FLUSH,
    RWBS_NONE,
    RWBS_READ,
    RWBS_SECURE,
    RWBS_WRITE,
    RWBS_WRITE_ZEROES,
    RWBS_ZONE,
    EventTable,
    checked_dev,
)
from workers.traces._textio import open_lines
from workers.traces.blkparse_text import _Columns

_PREFIX_RE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:(?P<flags>\S{4,5})\s+)?(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s*(?P<body>.*)$")
_PERF_RE = re.compile(
    r"^\s*(?P<task>.+?)\s+(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<ts>\d+\.\d+):\s+"
    r"(?:block:)?(?P<event>block_\w+):\s*(?P<body>.*)$")
_BARE_RE = re.compile(r"^\s*(?:block:)?(?P<event>block_\w+):\s*(?P<body>.*)$")

_DEVRW = r"^(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>[A-Z]*)\s+"
_BIO_RE = re.compile(_DEVRW + r"(?P<sector>\d+)\s+\+\s+(?P<nr>\d+)\s*\[(?P<last>.*)\]$")
_RQ_RE = re.compile(
    _DEVRW + r"(?:(?P<bytes>\d+)\s+)?\((?P<cmd>[^)]*)\)\s+(?P<sector>\d+)\s+\+\s+(?P<nr>\d+)"
    r"(?:\s+(?P<prio>[a-z]+,\d+,\d+|[a-z]+,\d+))?\s*\[(?P<last>.*)\]$")
_SPLIT_RE = re.compile(_DEVRW + r"(?P<sector>\d+)\s+/\s+(?P<new>\d+)\s*\[(?P<last>.*)\]$")
_REMAP_RE = re.compile(
    _DEVRW + r"(?P<sector>\d+)\s+\+\s+(?P<nr>\d+)\s+<-\s+\((?P<fmaj>\d+),(?P<fmin>\d+)\)\s+"
    r"(?P<from>\d+)(?:\s+(?P<nr_bios>\d+))?$")
_PLUG_RE = re.compile(r"^\[(?P<last>.*)\]$")
_UNPLUG_RE = re.compile(r"^\[(?P<last>.*)\]\s+(?P<depth>\d+)$")

#: event name -> (action, body kind)
EVENTS: dict[str, tuple[int, str]] = {
    "block_bio_queue": (ACT_QUEUE, "bio"),
    "block_getrq": (ACT_GETRQ, "bio"),
    "block_sleeprq": (ACT_SLEEPRQ, "bio"),
    "block_bio_backmerge": (ACT_BACKMERGE, "bio"),
    "block_bio_frontmerge": (ACT_FRONTMERGE, "bio"),
    "block_bio_bounce": (ACT_BOUNCE, "bio"),
    "block_bio_complete": (ACT_COMPLETE, "bio_err"),
    "block_rq_insert": (ACT_INSERT, "rq"),
    "block_rq_issue": (ACT_ISSUE, "rq"),
    "block_rq_merge": (ACT_BACKMERGE, "rq"),
    "block_rq_complete": (ACT_COMPLETE, "rq_err"),
    "block_rq_error": (ACT_COMPLETE, "rq_err"),
    "block_rq_requeue": (ACT_REQUEUE, "rq_err"),
    "block_split": (ACT_SPLIT, "split"),
    "block_bio_remap": (ACT_REMAP, "remap"),
    "block_rq_remap": (ACT_REMAP, "remap"),
    "block_plug": (ACT_PLUG, "plug"),
    "block_unplug": (ACT_UNPLUG_IO, "unplug"),
}

#: flag letters: blkparse's set plus ``E`` (secure, as older kernels print it)
_FLAG_BITS = {**dict(RWBS_FLAG_LETTERS), "E": RWBS_SECURE}


def ftrace_rwbs(text: str) -> int:
    """RWBS bits from the kernel's ``blk_fill_rwbs`` spelling.

    Order: ``F`` (preflush), then the op (``W``, ``D``, ``DE`` secure erase, ``F`` flush op,
    ``R``, ``Z*`` zone ops, ``WZ`` write zeroes, ``N``), then flags ``F A S M U`` (older: ``E``,
    ``B``). Unlike blkparse, ftrace prints ``R`` for reads even when the size is 0.
    """
    bits = 0
    s = text
    if s.startswith("F") and len(s) > 1:
        bits |= RWBS_FLUSH
        s = s[1:]
    if not s:
        return bits | RWBS_NONE
    op = s[0]
    rest = s[1:]
    if op == "W":
        if rest.startswith("Z"):
            bits |= RWBS_WRITE_ZEROES
            rest = rest[1:]
        else:
            bits |= RWBS_WRITE
    elif op == "D":
        bits |= RWBS_DISCARD
        if rest.startswith("E"):
            bits |= RWBS_SECURE
            rest = rest[1:]
    elif op == "R":
        bits |= RWBS_READ
    elif op == "N":
        bits |= RWBS_NONE
    elif op == "F":
        bits |= RWBS_FLUSH | RWBS_NONE
    elif op == "Z":
        bits |= RWBS_ZONE
        if rest[:1] in ("A", "R", "F", "O", "C"):
            rest = rest[1:]
            if rest.startswith("A"):  # ZRA: reset all
                rest = rest[1:]
    else:
        raise ValueError(f"unknown RWBS op {op!r} in {text!r}")
    for ch in rest:
        bit = _FLAG_BITS.get(ch)
        if bit is None:
            if ch == "B":  # 2.6 barrier: no equivalent bit
                continue
            raise ValueError(f"unknown RWBS letter {ch!r} in {text!r}")
        bits |= bit
    return bits


def _time_ns(ts: str) -> int:
    sec, _, frac = ts.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def parse_ftrace(path: str | Path, *, name: str | None = None) -> EventTable:
    """Parse ftrace text with block events (prefixed, perf-script or bare lines).

    Raises:
        ParseError: a known block event whose body does not match any known layout.
    """
    label = name or str(path)
    c = _Columns()
    rwbs_cache: dict[str, int] = {}
    # plug/unplug rows of a task that has not named a device yet: they get its next device
    pending_plugs: dict[int, list[int]] = {}
    skipped_events: dict[str, int] = {}
    bare = 0
    prefixed = 0
    for lineno, line in open_lines(path, label):
        if not line or line.lstrip().startswith("#"):
            continue
        m = _PREFIX_RE.match(line) or _PERF_RE.match(line)
        if m:
            pid = int(m.group("pid"))
            cpu = int(m.group("cpu"))
            t = _time_ns(m.group("ts"))
            task = m.group("task").strip()
        else:
            m = _BARE_RE.match(line)
            if not m:
                continue  # prose, headers, other tools' output
            pid = cpu = 0
            t = -1
            task = ""
        event = m.group("event")
        spec = EVENTS.get(event)
        if spec is None:
            skipped_events[event] = skipped_events.get(event, 0) + 1
            continue
        if t < 0:
            bare += 1
        else:
            prefixed += 1
        try:
            _add(c, spec, m.group("body").strip(), pid, cpu, t, task, rwbs_cache,
                 pending_plugs)
        except ValueError as exc:
            raise ParseError(label, f"{event}: {exc}", line=lineno) from None
    for rows in pending_plugs.values():  # the task never named a device: the last one seen
        for r in rows:
            c.dev[r] = c.last_dev.get(-1, 0)
    n = len(c.action)
    time_known = bare == 0
    table = c.table(time_known=time_known)
    offset = 0
    if not time_known:
        table.time_ns = np.arange(n, dtype=np.int64)
    elif n:
        # relative to the first event, like blkparse's genesis; the offset stays in meta
        offset = int(table.time_ns.min())
        table.time_ns = table.time_ns - np.int64(offset)
    warnings = []
    if bare and prefixed:
        warnings.append(f"{label}: {bare} lines without the ftrace prefix: times unknown, "
                        "file order kept")
    if skipped_events:
        listed = ", ".join(f"{k} x{v}" for k, v in sorted(skipped_events.items()))
        warnings.append(f"{label}: skipped events {listed}")
    table.meta.update({"format": "ftrace", "warnings": warnings, "time_offset_ns": offset,
                       "skipped_events": skipped_events})
    return table


def _add(c: _Columns, spec: tuple[int, str], body: str, pid: int, cpu: int, t: int, task: str,
         rwbs_cache: dict[str, int], pending_plugs: dict[int, list[int]]) -> None:
    action, kind = spec
    sector = nr = aux = aux2 = error = 0
    dev = 0
    comm = task
    rwbs = RWBS_NONE
    if kind in ("plug", "unplug"):
        m = (_PLUG_RE if kind == "plug" else _UNPLUG_RE).match(body)
        if not m:
            raise ValueError(f"bad body {body!r}")
        comm = m.group("last")
        if kind == "unplug":
            aux = int(m.group("depth"))
        # plug/unplug name no device: use the task's last device (the plug it flushes); a
        # task's first plug (blk_start_plug before its first submit_bio) waits for the
        # device of the task's next event, rather than inventing a device 0,0
        dev = c.last_dev.get(pid, -1)
        if dev < 0:
            pending_plugs.setdefault(pid, []).append(len(c.action))
            dev = 0
    else:
        regex = {"bio": _BIO_RE, "bio_err": _BIO_RE, "rq": _RQ_RE, "rq_err": _RQ_RE,
                 "split": _SPLIT_RE, "remap": _REMAP_RE}[kind]
        m = regex.match(body)
        if not m and kind in ("bio", "bio_err"):
            m = _RQ_RE.match(body)
        if not m:
            raise ValueError(f"body {body!r} matches no known layout")
        dev = checked_dev(int(m.group("maj")), int(m.group("min")))
        text = m.group("rwbs")
        bits = rwbs_cache.get(text)
        if bits is None:
            bits = rwbs_cache[text] = ftrace_rwbs(text)
        rwbs = bits
        sector = int(m.group("sector"))
        if kind == "split":
            aux = int(m.group("new"))
            comm = m.group("last")
        elif kind == "remap":
            nr = int(m.group("nr"))
            aux = int(m.group("from"))
            aux2 = checked_dev(int(m.group("fmaj")), int(m.group("fmin")))
        else:
            nr = int(m.group("nr"))
            last = m.group("last")
            if kind.endswith("_err"):
                error = int(last)
                if not -32768 <= error <= 65535:
                    raise ValueError(f"error value {error} out of range")
                if error > 32767:
                    error -= 65536
            else:
                comm = last
    if (sector >= 1 << 64 or aux >= 1 << 64 or nr >= 1 << 32 or cpu > 0xFFFF or pid >= 1 << 32
            or t >= 1 << 63):
        raise ValueError("number out of range")
    if kind not in ("plug", "unplug"):
        c.last_dev[pid] = c.last_dev[-1] = dev
        for r in pending_plugs.pop(pid, ()):
            c.dev[r] = dev
    c.add(max(t, 0), 0, dev, cpu, pid, action, rwbs, sector, nr, aux, aux2, error,
          c.intern(comm) if comm else 0)
