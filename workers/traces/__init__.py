"""Trace ingestion: every format maintainers upload -> one EventTable plus summary tables.

Public entry points (the contract the web pipeline and the CLI build on):

* :func:`ingest` reads a set of uploaded files (archives are unpacked safely), detects each
  file's format from its content, parses it and merges all event files into one time-sorted
  :class:`~workers.events.EventTable`; summary formats (iostat, fio) go to ``summaries``; a
  ``blkreview.toml`` manifest or raw ``/sys/block/*/queue/*`` values and ``/proc/mdstat`` go to
  ``manifest``.
* :func:`detect_format` and :func:`parse_file` work on one file.

Binary blktrace files are merged the way blkparse merges them: PROCESS notes from every file
feed one pid -> comm map, and times are made relative to the earliest non-notify event of all
binary files together ("genesis"). Text formats keep the times they print.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.errors import UnknownFormatError
from workers.events import EventTable
from workers.traces._registry import (
    EVENT_FORMATS,
    SUMMARY_FORMATS,
    ParsedPart,
    merge_binary_parts,
    parse_part,
)
from workers.traces.detect import detect_format
from workers.traces.manifest import Manifest, build_manifest

__all__ = [
    "FileReport",
    "Ingest",
    "Manifest",
    "Summary",
    "detect_format",
    "ingest",
    "parse_file",
]


@dataclass(frozen=True)
class FileReport:
    """What happened to one input file (or archive member)."""

    name: str
    format: str
    size: int
    events: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "format": self.format, "size": self.size,
                "events": self.events, "error": self.error}


@dataclass(frozen=True)
class Summary:
    """Rows of a summary format (``kind`` is ``"iostat"`` or ``"fio"``)."""

    kind: str
    rows: list[dict[str, Any]]


@dataclass
class Ingest:
    """Everything read from one bundle."""

    table: EventTable
    summaries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    manifest: Manifest | None = None
    files: list[FileReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def parse_file(path: str | Path, *, name: str | None = None, fmt: str | None = None,
               manifest: Manifest | None = None, strict: bool = False) -> EventTable | Summary:
    """Parse one (non-archive) file.

    Returns an :class:`EventTable` for trace formats (times relative to the file's own genesis
    for binary blktrace) and a :class:`Summary` for iostat/fio.

    Raises:
        ParseError: bad content (with the user-facing ``name``, line/offset and reason).
        UnknownFormatError: the content matches no supported format.
    """
    label = name or str(path)
    fmt = fmt or detect_format(path, name=label)
    part = parse_part(Path(path), label, fmt, manifest, strict=strict)
    if fmt in SUMMARY_FORMATS:
        return Summary(kind=part.summary_kind or fmt, rows=part.rows)
    if fmt not in EVENT_FORMATS:
        raise UnknownFormatError(label, f"{fmt} is not a trace format")
    if part.binary:
        return merge_binary_parts([part])
    assert part.table is not None
    return part.table


def ingest(paths: Sequence[str | os.PathLike[str]], *,
           names: Sequence[str] | None = None, strict: bool = False,
           parsed: Mapping[str, ParsedPart] | None = None,
           progress: Callable[[int, int], None] | None = None) -> Ingest:
    """Read a bundle: detect, unpack, parse and merge.

    Args:
        paths: storage paths of the uploaded files.
        names: user-facing names, one per path, used in every error message.
        strict: a damaged binary record fails the bundle (ParseError with its offset) instead
            of being skipped with a warning; ``strict = true`` in the manifest does the same.
        parsed: files already parsed elsewhere, by label (the parallel path: each shard ran
            :func:`workers.traces.shards.parse_shard` on some of the files); the merge is the
            same as for files parsed here, so the result is identical.
        progress: called with ``(bytes parsed, bytes to parse)`` before the first file and
            after each one (archives count their members' sizes), for a caller's progress bar.

    Raises:
        ParseError: a file is corrupt (first error wins; it carries the user-facing name).
        UnpackError: an archive is unsafe or over a limit.
        UnknownFormatError: a top-level file is not a supported format, or the bundle holds
            neither events nor summaries.
    """
    from workers.traces.unpack import compression_label, unpack_archive

    if names is not None and len(names) != len(paths):
        raise ValueError("names must have one entry per path")
    labels = list(names) if names is not None else [str(p) for p in paths]
    warnings: list[str] = []
    reports: list[FileReport] = []
    with tempfile.TemporaryDirectory(prefix="blkreview-ingest-") as tmp:
        # 1. expand archives into (path, label, format) entries
        entries: list[tuple[Path, str, str]] = []
        for i, (p, label) in enumerate(zip(paths, labels, strict=True)):
            path = Path(p)
            if path.stat().st_size == 0:
                # blktrace leaves empty per-CPU files for idle CPUs
                warnings.append(f"{label}: empty file skipped")
                reports.append(FileReport(label, "empty", 0))
                continue
            fmt = detect_format(path, name=label)
            if fmt in ("tar", "zip"):
                dest = Path(tmp) / f"a{i}"
                members = unpack_archive(path, dest, name=label, kind=fmt)
                # "xz" for a single compressed file, "tar.xz" for a compressed tar
                shown = fmt if fmt == "zip" else compression_label(path)
                reports.append(FileReport(label, shown, path.stat().st_size))
                for member_path, member_name in members:
                    mlabel = f"{label}:{member_name}"
                    if member_path.stat().st_size == 0:
                        warnings.append(f"{mlabel}: empty file skipped")
                        reports.append(FileReport(mlabel, "empty", 0))
                        continue
                    try:
                        mfmt = _member_format(member_path, mlabel)
                    except UnknownFormatError as exc:
                        warnings.append(f"{mlabel}: skipped ({exc.reason})")
                        reports.append(FileReport(mlabel, "unknown", member_path.stat().st_size,
                                                  error=exc.reason))
                        continue
                    if mfmt in ("tar", "zip"):
                        warnings.append(f"{mlabel}: nested archive skipped")
                        reports.append(FileReport(mlabel, mfmt, member_path.stat().st_size,
                                                  error="nested archive"))
                        continue
                    entries.append((member_path, mlabel, mfmt))
            else:
                entries.append((path, label, fmt))
        # 2. manifest-like files first: bpftrace/biosnoop need disk names -> dev
        manifest_files = [(p, lb, f) for p, lb, f in entries
                          if f in ("manifest", "sysfs-queue", "mdstat")]
        manifest = build_manifest(manifest_files) if manifest_files else None
        strict = strict or bool(manifest is not None and manifest.strict)
        for p, lb, f in manifest_files:
            reports.append(FileReport(lb, f, p.stat().st_size))
        # 3. traces and summaries
        binary_parts: list[ParsedPart] = []
        text_parts: list[tuple[str, str, int, EventTable]] = []
        summaries: dict[str, list[dict[str, Any]]] = {}
        to_parse = [(p, lb, f) for p, lb, f in entries
                    if f not in ("manifest", "sysfs-queue", "mdstat")]
        total = sum(p.stat().st_size for p, _, _ in to_parse)
        done = 0
        if progress is not None:
            progress(0, total)
        for p, lb, f in to_parse:
            pre = parsed.get(lb) if parsed is not None else None
            part = pre if pre is not None else parse_part(p, lb, f, manifest, strict=strict)
            done += p.stat().st_size
            if progress is not None:
                progress(done, total)
            warnings.extend(part.warnings)
            if part.summary_kind is not None:
                summaries.setdefault(part.summary_kind, []).extend(part.rows)
                reports.append(FileReport(lb, f, p.stat().st_size, events=len(part.rows)))
                continue
            if part.binary:
                binary_parts.append(part)
                reports.append(FileReport(lb, f, p.stat().st_size, events=part.events))
            else:
                assert part.table is not None
                text_parts.append((lb, f, p.stat().st_size, part.table))
        text_tables = _drop_text_copies(text_parts, binary_parts, reports, warnings)
    tables: list[EventTable] = []
    if binary_parts:
        tables.append(merge_binary_parts(binary_parts, warnings=warnings))
    tables.extend(text_tables)
    if not tables and not summaries:
        raise UnknownFormatError(", ".join(labels) or "(no files)",
                                 "the bundle holds no trace events and no summaries")
    table = EventTable.concat(tables) if len(tables) != 1 else tables[0]
    if table.time_known and len(tables) > 1:
        table = table.sorted_by_time()
    if manifest is not None:
        import numpy as np

        traced = [int(d) for d in np.unique(table.dev)]
        table.devices.update(manifest.device_infos(traced, table.devices))
        table.meta["manifest"] = manifest.to_json()
    table.meta["files"] = [r.to_json() for r in reports]
    return Ingest(table=table, summaries=summaries, manifest=manifest, files=reports,
                  warnings=warnings)


def _drop_text_copies(text_parts: list[tuple[str, str, int, EventTable]],
                      binary_parts: list[ParsedPart], reports: list[FileReport],
                      warnings: list[str]) -> list[EventTable]:
    """blkparse text of devices whose binary trace is in the same bundle is a copy.

    Capture folders often hold both (``vda.blktrace.*`` and ``vda.blkparse.txt``, plus an
    ``all.blkparse.txt``); counting both would double every event, so the binary wins.
    """
    import numpy as np

    traced: set[int] = set()
    for bp in binary_parts:
        if bp.table is not None and len(bp.table):
            traced.update(int(d) for d in np.unique(bp.table.dev))
    kept: list[EventTable] = []
    for label, fmt, size, table in text_parts:
        devs = {int(d) for d in np.unique(table.dev)}
        if fmt == "blkparse" and traced and devs and devs <= traced:
            warnings.append(f"{label}: blkparse text of devices whose binary trace is in the "
                            "bundle; skipped (the binary is used)")
            reports.append(FileReport(label, fmt, size, events=0,
                                      error="skipped: a text copy of the binary trace in this "
                                            "bundle (the binary is read)"))
            continue
        reports.append(FileReport(label, fmt, size, events=len(table)))
        kept.append(table)
    return kept


def _member_format(path: Path, label: str) -> str:
    if path.name == "blkreview.toml":
        return "manifest"
    if path.name == "mdstat":
        return "mdstat"
    parts = path.parts
    if len(parts) >= 3 and parts[-2] == "queue" and "block" in parts:
        return "sysfs-queue"
    if len(parts) >= 3 and parts[-1] == "dev" and parts[-3] == "block":
        return "sysfs-queue"  # /sys/block/<name>/dev: "major:minor"
    return detect_format(path, name=label)

