"""Dispatch from a detected format to its parser, and the binary merge step.

Kept apart from ``__init__`` so parsers can be imported lazily (numba compiles on first use,
and a maintainer inspecting an iostat file should not pay for it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workers.errors import UnknownFormatError
from workers.events import EventTable

if TYPE_CHECKING:
    from workers.traces.manifest import Manifest

#: Formats that produce events.
EVENT_FORMATS = frozenset({"blktrace", "blkparse", "ftrace", "bpftrace", "biosnoop"})
#: Formats that produce summary rows, with the ``summaries`` key they fill.
SUMMARY_FORMATS = {"iostat": "iostat", "iostat-json": "iostat", "fio-json": "fio"}


@dataclass
class ParsedPart:
    """One parsed file before merging.

    For binary blktrace, ``table`` holds absolute (monotonic) times and no comms yet; ``raw``
    carries what :func:`merge_binary_parts` needs (PROCESS notes, genesis candidates).
    """

    name: str
    fmt: str
    table: EventTable | None = None
    binary: bool = False
    raw: Any = None
    summary_kind: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: a byte range of a binary file (:mod:`workers.traces.byterange`): where it starts and
    #: stops and what its ranges add up to the whole file's warnings with; None for a file
    byte_range: dict[str, Any] | None = None

    @property
    def events(self) -> int:
        return len(self.table) if self.table is not None else 0


def parse_part(path: Path, name: str, fmt: str, manifest: Manifest | None, *,
               strict: bool = False) -> ParsedPart:
    """Parse one file of a known format (``strict``: damaged binary records fail it)."""
    if fmt == "blkparse":
        from workers.traces.blkparse_text import parse_blkparse_text

        table = parse_blkparse_text(path, name=name)
        part = ParsedPart(name, fmt, table=table)
        skipped = int(table.meta.get("skipped_lines", 0))
        if skipped and len(table) == 0:
            part.warnings.append(f"{name}: no blkparse events found ({skipped} other lines)")
        return part
    if fmt == "blktrace":
        from workers.traces.blktrace_bin import parse_blktrace_raw

        raw = parse_blktrace_raw(path, name=name, strict=strict)
        # the file's warnings reach Ingest.warnings through merge_binary_parts
        return ParsedPart(name, fmt, table=raw.table, binary=True, raw=raw)
    if fmt == "ftrace":
        from workers.traces.ftrace import parse_ftrace

        table = parse_ftrace(path, name=name)
        return ParsedPart(name, fmt, table=table, warnings=list(table.meta.pop("warnings", [])))
    if fmt in ("bpftrace", "biosnoop"):
        from workers.traces.bpf import parse_biosnoop, parse_bpftrace

        fn = parse_bpftrace if fmt == "bpftrace" else parse_biosnoop
        table = fn(path, name=name, manifest=manifest)
        return ParsedPart(name, fmt, table=table, warnings=list(table.meta.pop("warnings", [])))
    if fmt in ("iostat", "iostat-json"):
        from workers.traces.iostat import parse_iostat_json, parse_iostat_text

        rows = (parse_iostat_text if fmt == "iostat" else parse_iostat_json)(path, name=name)
        return ParsedPart(name, fmt, summary_kind="iostat", rows=rows)
    if fmt == "fio-json":
        from workers.traces.fio import parse_fio_json

        return ParsedPart(name, fmt, summary_kind="fio", rows=parse_fio_json(path, name=name))
    raise UnknownFormatError(name, f"no parser for format {fmt!r}")


def merge_binary_parts(parts: list[ParsedPart], *,
                       warnings: list[str] | None = None) -> EventTable:
    """Merge binary blktrace files like blkparse: one comm map, one genesis, time order."""
    from workers.traces.blktrace_bin import merge_raw

    merged: EventTable = merge_raw([p.raw for p in parts])
    if warnings is not None:
        warnings.extend(merged.meta.pop("warnings", []))
    return merged
