"""The parallel ingest's merge in bounded memory: time-sorted part files -> a column store.

:func:`workers.traces.ingest` with ``parsed=`` parts merges them in memory: every part's
columns, then the stacked bundle and its time-ordered copy (``merge_raw``). At 100M events
that was 8.5 GB for the merging worker (docs/deploy.md, "Huge traces"). Here the same merge
reads each part file (:class:`workers.traces.shards.PartFile`) as streams of row chunks and
writes the merged table to a :class:`~workers.traces.columnstore.ColumnStore` a chunk at a
time, so the worker holds a few chunks per part, whatever the trace's size.

Exactly the single-task result. ``merge_raw`` (blktrace_bin.py) orders files by natural name,
builds one pid -> comm map from every file's PROCESS notes (first note wins, file order) and the
message texts after it, makes times relative to the earliest genesis candidate and sorts the
stacked rows stably on time: rows come in (time, file index, row in file) order. A per-CPU file
is in time order (the kernel stamps a record after reserving its relay slot,
``__blk_add_trace``), so that order is a k-way merge: every row earlier than the smallest
"last buffered time" of the files with rows still unread can be emitted, and a stable sort on
time of those rows (stacked in file order) gives them in the global order. A file found out of
time order stops the merge (:class:`NotMergeable`) and the caller merges in memory as before.

Only bundles of top-level files whose event files are all binary blktrace are merged here
(:func:`ingest_stored` returns None otherwise): text traces are sorted on (time, dev, cpu, seq)
after a concat with the binary table (``EventTable.sorted_by_time``) and archives are unpacked
by ``ingest`` itself; those go through ``ingest`` unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.events import ACT_REMAP, COLUMN_DTYPES, COLUMNS, DeviceInfo
from workers.traces.blktrace_bin import comm_map
from workers.traces.columnstore import CHUNK_ROWS, ColumnStore, ColumnStoreWriter
from workers.traces.shards import PartFile

#: Row chunks read ahead from all parts together (split evenly among them).
MERGE_ROWS = CHUNK_ROWS
_NAMES = [n for n, _ in COLUMNS]


class NotMergeable(Exception):
    """The parts cannot be merged in chunks (a file out of time order): merge in memory."""


@dataclass
class StoredIngest:
    """:class:`workers.traces.Ingest` with the table in a column store instead of memory."""

    store: ColumnStore
    summaries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    manifest: Any = None
    files: list[Any] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class _CommOf:
    """The comm column of one part's rows, chunk by chunk: the ``merge_raw`` lookup (pid ->
    first PROCESS note's comm) and the part's message rows."""

    def __init__(self, comm_of_pid: Mapping[int, str], comm_index: Mapping[str, int],
                 msg_rows: npt.NDArray[np.int64], msg_idx: npt.NDArray[np.uint32]) -> None:
        self.msg_rows, self.msg_idx = msg_rows, msg_idx
        self.lut: npt.NDArray[np.uint32] | None = None
        self.noted: npt.NDArray[np.int64] | None = None
        if comm_of_pid:
            noted = np.fromiter(comm_of_pid, dtype=np.int64, count=len(comm_of_pid))
            idx = np.array([comm_index[c] for c in comm_of_pid.values()], dtype=np.uint32)
            top = int(noted.max())
            if top < (1 << 24):
                self.lut = np.zeros(top + 1, dtype=np.uint32)
                self.lut[noted] = idx
            else:
                order = np.argsort(noted)
                self.noted, self.idx = noted[order], idx[order]

    def __call__(self, pid: npt.NDArray[np.uint32], start: int) -> npt.NDArray[np.uint32]:
        from workers.traces.blktrace_bin import _gather_comm

        out = np.zeros(len(pid), dtype=np.uint32)
        if len(pid) and self.lut is not None:
            _gather_comm(pid, self.lut, out)
        elif len(pid) and self.noted is not None:
            pos = np.minimum(np.searchsorted(self.noted, pid), len(self.noted) - 1)
            hit = self.noted[pos] == pid
            out = np.where(hit, self.idx[pos], np.uint32(0)).astype(np.uint32)
        lo, hi = np.searchsorted(self.msg_rows, [start, start + len(pid)])
        out[self.msg_rows[lo:hi] - start] = self.msg_idx[lo:hi]
        return out


class _Stream:
    """One part's rows: the unread rest in its file, a buffer of read rows not yet emitted."""

    def __init__(self, readers: Mapping[str, Any], rows: int, comm_of: _CommOf) -> None:
        self.readers, self.rows, self.comm_of = readers, rows, comm_of
        self.pos = 0
        self.buf: dict[str, npt.NDArray[Any]] = {n: np.zeros(0, COLUMN_DTYPES[n])
                                                 for n in _NAMES}
        self.last = np.iinfo(np.int64).min
        self.devs: set[int] = set()  # devices of its non-remap rows (merge_raw's file names)

    @property
    def more(self) -> bool:
        return self.pos < self.rows

    @property
    def buffered(self) -> int:
        return len(self.buf["time_ns"])

    def fill(self, n: int) -> None:
        n = min(n, self.rows - self.pos)
        if n <= 0:
            return
        new = {name: self.readers[name].read(n) for name in _NAMES if name != "comm"}
        t = new["time_ns"]
        if t[0] < self.last or (n > 1 and bool(np.any(t[1:] < t[:-1]))):
            raise NotMergeable("a part is not in time order")
        self.last = int(t[-1])
        new["comm"] = self.comm_of(new["pid"], self.pos)
        self.devs.update(np.unique(new["dev"][new["action"] != ACT_REMAP]).tolist())
        self.pos += n
        self.buf = ({k: np.concatenate([self.buf[k], v]) for k, v in new.items()}
                    if self.buffered else new)

    def take(self, k: int) -> dict[str, npt.NDArray[Any]]:
        out = {n: v[:k] for n, v in self.buf.items()}
        self.buf = {n: v[k:] for n, v in self.buf.items()}
        return out


def _natural_key(name: str) -> tuple[str, int, str]:
    from workers.traces.blktrace_bin import _natural_key as key

    return key(name)


@dataclass
class _Merged:
    writer: ColumnStoreWriter
    comms: list[str]
    devices: dict[int, DeviceInfo]
    meta: dict[str, Any]
    warnings: list[str]
    devs: list[int]


def _merge_binary(parts: Sequence[PartFile], out: Path, rows: int) -> _Merged:
    """``merge_binary_parts`` of the parts, written to a store under ``out`` (not closed)."""
    parts = sorted(parts, key=lambda p: _natural_key(p.raw["name"] if p.raw else p.name))
    raws = [p.raw or {} for p in parts]
    warnings = [str(w) for r in raws for w in r.get("warnings", [])]
    comm_of_pid, comms, comm_index = comm_map(r.get("processes", []) for r in raws)
    comm_fns = []
    for r in raws:
        msg_rows, msg_idx = [], []
        for row, text in r.get("messages", []):
            if text not in comm_index:
                comm_index[text] = len(comms)
                comms.append(text)
            msg_rows.append(int(row))
            msg_idx.append(comm_index[text])
        order = np.argsort(np.array(msg_rows, dtype=np.int64), kind="stable")
        comm_fns.append(_CommOf(comm_of_pid, comm_index,
                                np.array(msg_rows, dtype=np.int64)[order],
                                np.array(msg_idx, dtype=np.uint32)[order]))
    geneses = [int(r["genesis"]) for r in raws if r.get("genesis") is not None]
    genesis = min(geneses) if geneses else 0
    total = sum(p.events for p in parts)
    writer = ColumnStoreWriter(out, total)
    traced: set[int] = set()
    import contextlib

    try:
        with contextlib.ExitStack() as stack:
            streams = [_Stream(stack.enter_context(p.columns(_NAMES)) if p.events else {},
                               p.events, fn) for p, fn in zip(parts, comm_fns, strict=True)]
            per = max(1, rows // max(1, len(streams)))
            for s in streams:
                s.fill(per)
            while any(s.buffered for s in streams):
                pending = [s for s in streams if s.more]
                if pending:
                    cutoff = min(s.last for s in pending)
                    cuts = [int(np.searchsorted(s.buf["time_ns"], cutoff, side="left"))
                            for s in streams]
                else:
                    cuts = [s.buffered for s in streams]
                if not any(cuts):  # the earliest unread time is the buffers' only time: read on
                    for s in pending:
                        if s.last == cutoff:
                            s.fill(per)
                    continue
                taken = [s.take(c) for s, c in zip(streams, cuts, strict=True) if c]
                if len(taken) == 1:
                    chunk = taken[0]
                else:
                    chunk = {n: np.concatenate([t[n] for t in taken]) for n in _NAMES}
                    order = np.argsort(chunk["time_ns"], kind="stable")
                    chunk = {n: v[order] for n, v in chunk.items()}
                del taken
                if genesis:
                    chunk["time_ns"] = chunk["time_ns"] - np.int64(genesis)
                traced.update(np.unique(chunk["dev"]).tolist())
                writer.append(chunk)
                del chunk
                for s in streams:
                    if s.more and s.buffered < per // 2:
                        s.fill(per - s.buffered)
    except BaseException:
        writer.abort()
        raise
    names: dict[int, set[str]] = {}
    for p, s in zip(parts, streams, strict=True):
        base = Path((p.raw or {}).get("name", p.name).rsplit(":", 1)[-1]).name
        if ".blktrace." in base and p.events and len(s.devs) == 1:
            names.setdefault(next(iter(s.devs)), set()).add(base.split(".blktrace.")[0])
    devices = {d: DeviceInfo(dev=d, name=sorted(n)[0]) for d, n in names.items() if len(n) == 1}
    ts = sorted(tuple(int(x) for x in t) for r in raws for t in r.get("timestamps", []))
    meta: dict[str, Any] = {
        "format": "blktrace",
        "genesis_ns": genesis,
        "versions": sorted({r["version"] for r in raws}),
        "byte_orders": sorted({"big" if r["big_endian"] else "little" for r in raws}),
        "diagnostics": [d for r in raws for d in r.get("diagnostics", [])],
    }
    if ts:
        t0, sec, nsec = ts[0]
        meta["wallclock_genesis_ns"] = sec * 1_000_000_000 + nsec - (t0 - genesis)
    return _Merged(writer, comms, devices, meta, warnings, sorted(traced))


@dataclass(frozen=True)
class InputFile:
    """One file of the bundle as the chunked merge needs it: its name, size and format, and
    a local path only on demand (manifest files; a caller holding the traces in object storage
    need not download a trace whose part is already parsed)."""

    name: str
    size: int
    fmt: str
    local: Callable[[], Path]

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], name: str) -> InputFile:
        from workers.traces.detect import detect_format

        p = Path(path)
        size = p.stat().st_size
        return cls(name, size, detect_format(p, name=name) if size else "empty", lambda: p)


def ingest_stored(paths: Sequence[str | os.PathLike[str]], *, names: Sequence[str],
                  strict: bool, parts: Mapping[str, PartFile], out: str | os.PathLike[str],
                  rows: int = MERGE_ROWS) -> StoredIngest | None:
    """``ingest(paths, names=names, strict=strict, parsed=parts)`` with the table written to a
    column store at ``out``; None when the bundle is not one this path merges (an archive, a
    text trace, a trace file without a part, no binary trace): the caller runs ``ingest``.

    Follows ``ingest`` step by step for top-level files (reports and warnings in its order);
    tests/engine/traces/test_streammerge.py compares the two on the same bundles.
    """
    inputs = [InputFile.from_path(p, n) for p, n in zip(paths, names, strict=True)]
    return ingest_stored_inputs(inputs, strict=strict, parts=parts, out=out, rows=rows)


def ingest_stored_inputs(inputs: Sequence[InputFile], *, strict: bool,
                         parts: Mapping[str, PartFile], out: str | os.PathLike[str],
                         rows: int = MERGE_ROWS) -> StoredIngest | None:
    """:func:`ingest_stored` on files described by :class:`InputFile` (size and format known,
    e.g. from the upload's records and the head of the stored file: ``detect_format`` reads
    only the first ``SNIFF_BYTES``); only manifest files are asked for a local path."""
    from workers.traces import FileReport
    from workers.traces.manifest import build_manifest

    del strict  # parsing happened in the shards; strictness only matters there
    warnings: list[str] = []
    reports: list[FileReport] = []
    entries: list[tuple[InputFile, str, str]] = []
    for inp in inputs:
        label = inp.name
        if inp.size == 0:
            warnings.append(f"{label}: empty file skipped")
            reports.append(FileReport(label, "empty", 0))
            continue
        if inp.fmt in ("tar", "zip"):
            return None
        entries.append((inp, label, inp.fmt))
    manifest_files = [(inp.local(), lb, f) for inp, lb, f in entries
                      if f in ("manifest", "sysfs-queue", "mdstat")]
    manifest = build_manifest(manifest_files) if manifest_files else None
    for p, lb, f in manifest_files:
        reports.append(FileReport(lb, f, p.stat().st_size))
    binary: list[PartFile] = []
    summaries: dict[str, list[dict[str, Any]]] = {}
    for inp, lb, f in entries:
        if f in ("manifest", "sysfs-queue", "mdstat"):
            continue
        part = parts.get(lb)
        if part is None or (part.summary_kind is None and not part.binary):
            return None
        warnings.extend(part.warnings)
        if part.summary_kind is not None:
            rows_ = list(part.header["rows"])
            summaries.setdefault(part.summary_kind, []).extend(rows_)
            reports.append(FileReport(lb, f, inp.size, events=len(rows_)))
        else:
            binary.append(part)
            reports.append(FileReport(lb, f, inp.size, events=part.events))
    if not binary:
        return None
    merged = _merge_binary(binary, Path(out), rows)
    warnings.extend(merged.warnings)
    meta = merged.meta
    devices = merged.devices
    if manifest is not None:
        devices.update(manifest.device_infos(merged.devs, devices))
        meta["manifest"] = manifest.to_json()
    meta["files"] = [r.to_json() for r in reports]
    store = merged.writer.close(comms=merged.comms, devices=devices, time_known=True,
                                meta=meta)
    return StoredIngest(store=store, summaries=summaries, manifest=manifest, files=reports,
                        warnings=warnings)
