"""eBPF tool output -> EventTable: the bpftrace kprobe printf of seed 001 and bcc biosnoop.

bpftrace (seed 001, Ming Lei's script on ``kprobe:blk_mq_start_request``)::

    printf("%lu %16s %d %d: %s %s bio %lx-%lu\\n", nsecs / 1000, comm, pid, cpu,
           ksym(reg("ip")), $rq->q->disk->disk_name, $rq->__sector, $rq->__data_len);
    117828811               dd 1475 0: blk_mq_start_request ublkb0 bio 0-524288

Time is in microseconds, the sector is hexadecimal, the size in bytes. ``blk_mq_start_request``
is where a request is handed to the driver, i.e. blktrace's D (issue) stage. The device is named
by its disk name; the manifest maps it to ``major,minor`` (``[devices] ublkb0 = "259,0"`` or
sysfs ``dev`` files). Without a mapping a placeholder number ``0,N`` is used and the name is
kept in the device info (nothing invented beyond a label). The direction is not printed, so
RWBS is ``N``.

bcc ``biosnoop`` (tools/biosnoop.py; libbpf-tools has the same columns)::

    TIME(s)     COMM           PID    DISK    T SECTOR     BYTES   [P ] [QUE(ms)] LAT(ms)

One line per completed I/O: TIME is the completion time, LAT the issue -> completion latency,
so each line gives a D at ``TIME - LAT`` and a C at ``TIME``. COMM may contain spaces, so
columns are taken from the right.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workers.errors import ParseError
from workers.events import (
    ACT_COMPLETE,
    ACT_ISSUE,
    ACT_QUEUE,
    RWBS_NONE,
    DeviceInfo,
    EventTable,
    make_dev,
)
from workers.traces._textio import open_lines
from workers.traces.blkparse_text import _Columns
from workers.traces.ftrace import ftrace_rwbs

if TYPE_CHECKING:
    from workers.traces.manifest import Manifest

_BPFTRACE_RE = re.compile(
    r"^\s*(?P<us>\d+)\s+(?P<comm>.*?)\s+(?P<pid>\d+)\s+(?P<cpu>\d+):\s+(?P<func>\S+)\s+"
    r"(?P<disk>\S+)\s+bio\s+(?P<sector>[0-9a-fA-F]+)-(?P<bytes>\d+)\s*$")

#: kernel function -> stage
_FUNC_ACTION = {
    "blk_mq_start_request": ACT_ISSUE,
    "blk_account_io_start": ACT_ISSUE,
    "blk_mq_complete_request": ACT_COMPLETE,
    "blk_account_io_done": ACT_COMPLETE,
    "blk_mq_end_request": ACT_COMPLETE,
    "submit_bio": ACT_QUEUE,
    "submit_bio_noacct": ACT_QUEUE,
}


class _DiskMap:
    """Disk name -> dev_t through the manifest, else placeholders ``0,1``, ``0,2``..."""

    def __init__(self, manifest: Manifest | None, label: str) -> None:
        self.manifest = manifest
        self.label = label
        self.devs: dict[str, int] = {}
        self.placeholders: list[str] = []

    def dev(self, disk: str) -> int:
        d = self.devs.get(disk)
        if d is None:
            d = self.manifest.dev_for_name(disk) if self.manifest else None
            if d is None:
                self.placeholders.append(disk)
                d = make_dev(0, len(self.placeholders))
            self.devs[disk] = d
        return d

    def infos(self) -> dict[int, DeviceInfo]:
        return {d: DeviceInfo(dev=d, name=name) for name, d in self.devs.items()}

    def warnings(self) -> list[str]:
        if not self.placeholders:
            return []
        return [f"{self.label}: disk(s) {', '.join(self.placeholders)} not mapped to "
                "major,minor by a manifest; using placeholder numbers 0,N"]


def _append(c: _Columns, *, t: int, dev: int, cpu: int, pid: int, action: int, rwbs: int,
            sector: int, nr: int, comm: str) -> None:
    c.add(t, 0, dev, cpu, pid, action, rwbs, sector, nr, 0, 0, 0, c.intern(comm) if comm else 0)


def _finish(c: _Columns, disks: _DiskMap, fmt: str, extra: list[str]) -> EventTable:
    table = c.table()
    if len(table):
        order = np.argsort(table.time_ns, kind="stable")
        table = table.take(order)
        offset = int(table.time_ns[0])
        table.time_ns = table.time_ns - np.int64(offset)
    else:
        offset = 0
    table.devices = disks.infos()
    table.meta.update({"format": fmt, "time_offset_ns": offset,
                       "warnings": disks.warnings() + extra})
    return table


def parse_bpftrace(path: str | Path, *, name: str | None = None,
                   manifest: Manifest | None = None) -> EventTable:
    """Parse the seed-001 style bpftrace printf lines (other lines are skipped).

    Raises:
        ParseError: a number out of range on a matching line.
    """
    label = name or str(path)
    c = _Columns()
    disks = _DiskMap(manifest, label)
    unknown_funcs: set[str] = set()
    for lineno, line in open_lines(path, label):
        m = _BPFTRACE_RE.match(line)
        if not m:
            continue
        func = m.group("func").split("+", 1)[0]
        action = _FUNC_ACTION.get(func)
        if action is None:
            unknown_funcs.add(func)
            action = ACT_ISSUE
        sector = int(m.group("sector"), 16)
        nbytes = int(m.group("bytes"))
        cpu = int(m.group("cpu"))
        pid = int(m.group("pid"))
        t_ns = int(m.group("us")) * 1000
        if (sector >= 1 << 64 or nbytes >> 9 >= 1 << 32 or cpu > 0xFFFF or pid >= 1 << 32
                or t_ns >= 1 << 63):
            raise ParseError(label, "number out of range", line=lineno)
        _append(c, t=t_ns, dev=disks.dev(m.group("disk")), cpu=cpu,
                pid=pid, action=action, rwbs=RWBS_NONE, sector=sector, nr=nbytes >> 9,
                comm=m.group("comm").strip())
    extra = []
    if unknown_funcs:
        extra.append(f"{label}: functions {', '.join(sorted(unknown_funcs))} treated as issue "
                     "(D)")
    return _finish(c, disks, "bpftrace", extra)


_BIOSNOOP_HDR = re.compile(r"^\s*TIME(?:\((?P<unit>s|ms)\))?\s+COMM\s+PID\s+DISK\s+T\s+SECTOR\s+"
                           r"BYTES(?P<rest>.*)$")
_NUM = re.compile(r"^-?\d+(?:\.\d+)?$")
#: times and latencies beyond ~146 years do not fit int64 nanoseconds (and NaN fails every
#: comparison, so the range checks below also refuse it)
_MAX_SECONDS = 2.0 ** 62 / 1e9


def parse_biosnoop(path: str | Path, *, name: str | None = None,
                   manifest: Manifest | None = None) -> EventTable:
    """Parse bcc / libbpf-tools biosnoop output (D and C per line; prose skipped).

    Raises:
        ParseError: a data line under the header with the wrong number of columns.
    """
    label = name or str(path)
    c = _Columns()
    disks = _DiskMap(manifest, label)
    header: list[str] | None = None
    unit = 1.0
    for lineno, line in open_lines(path, label):
        h = _BIOSNOOP_HDR.match(line)
        if h:
            header = h.group("rest").split()
            unit = 1e-3 if h.group("unit") == "ms" else 1.0
            continue
        if header is None or not line.strip():
            if header is not None and not line.strip():
                header = None  # a blank line ends the table (example files go on with prose)
            continue
        parts = line.split()
        n_tail = 5 + len(header)  # PID DISK T SECTOR BYTES + extra columns
        if len(parts) < n_tail + 1 or not _NUM.match(parts[0]):
            header = None
            continue
        tail = parts[-n_tail:]
        comm = " ".join(parts[1:-n_tail])
        extra = dict(zip(header, tail[5:], strict=True))
        try:
            t_s = float(parts[0]) * unit
            pid = int(tail[0])
            disk = tail[1]
            rw = tail[2]
            sector = int(tail[3])
            nbytes = int(tail[4])
            lat_ms = float(extra.get("LAT(ms)", "0"))
            rwbs = ftrace_rwbs(rw)
        except ValueError as exc:
            raise ParseError(label, f"bad biosnoop line: {exc}", line=lineno) from None
        if not (0 <= sector < 1 << 64 and 0 <= nbytes and nbytes >> 9 < 1 << 32
                and 0 <= pid < 1 << 32 and 0 <= lat_ms < _MAX_SECONDS * 1e3
                and abs(t_s) < _MAX_SECONDS):
            raise ParseError(label, "number out of range", line=lineno)
        t_done = int(round(t_s * 1e9))
        t_issue = t_done - int(round(lat_ms * 1e6))
        dev = disks.dev(disk)
        _append(c, t=t_issue, dev=dev, cpu=0, pid=pid, action=ACT_ISSUE, rwbs=rwbs,
                sector=sector, nr=nbytes >> 9, comm=comm)
        _append(c, t=t_done, dev=dev, cpu=0, pid=0, action=ACT_COMPLETE, rwbs=rwbs,
                sector=sector, nr=nbytes >> 9, comm="")
    return _finish(c, disks, "biosnoop", [])
