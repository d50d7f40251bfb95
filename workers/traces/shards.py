"""Parsing a bundle's files in separate processes (or hosts), then merging them exactly.

The expensive part of :func:`workers.traces.ingest` is parsing each file; the merge (one comm
map and one genesis across per-CPU blktrace files, time order, manifest) is cheap and must see
every file. So a huge bundle can be parsed as shards: :func:`bundle_manifest` reads the manifest
files (each shard needs it: bpftrace names, strictness), :func:`parse_shard` parses one file
anywhere, :func:`write_part` / :func:`read_part` carry the parsed part through storage as a local
file without loss, and ``ingest(paths, names=..., parsed={label: part})`` merges them exactly as
if it had parsed them itself (tests/engine/traces/test_shards.py checks the EventTable and the
analyzers' results are identical); :class:`PartFile` reads a part file's columns in chunks for
the merge in bounded memory (:mod:`workers.traces.streammerge`).
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from workers.events import EventTable
from workers.traces._registry import ParsedPart, parse_part
from workers.traces.detect import detect_format
from workers.traces.manifest import Manifest, build_manifest

MANIFEST_FORMATS = ("manifest", "sysfs-queue", "mdstat")
_MAGIC = b"BLKSHRD1"
#: bytes read from the head of a binary trace to find its first event (a few thousand records)
PEEK_BYTES = 256 * 1024


def first_event_time(head: bytes, *, name: str = "<head>") -> int | None:
    """The genesis candidate of the first records of a binary blktrace file (absolute ns).

    ``head`` is the start of the file (:data:`PEEK_BYTES` are plenty); it is cut at the last
    whole record and decoded as the parser does, so notes and unknown actions are skipped the
    same way. The kernel stamps a record after reserving its slot in the CPU's relay buffer
    with interrupts off (``__blk_add_trace``: ``relay_reserve`` then ``ktime_get``), so a
    per-CPU file runs in time order and its first event is its earliest; the minimum over the
    bundle's files is then the genesis ``merge_raw`` will use. That is an expectation, not a
    guarantee (a merged stream under a per-CPU name need not be sorted): the shards bin their
    throughput from this anchor and the merge checks it against the true genesis, falling back
    to the table when it differs. None when the head holds no event or is not a blktrace.
    """
    from workers.traces.blktrace_bin import HDR_V1, HDR_V2, MAGIC, VERSION_V1, parse_blktrace_bytes

    if len(head) < 4:
        return None
    for order in ("little", "big"):
        magic = int.from_bytes(head[:4], order)  # type: ignore[arg-type]
        if (magic & 0xFFFFFF00) == MAGIC:
            break
    else:
        return None
    version = magic & 0xFF
    hdr, pdu_off = (HDR_V1, 46) if version == VERSION_V1 else (HDR_V2, 50)
    pos = 0
    while pos + hdr <= len(head):
        end = pos + hdr + int.from_bytes(head[pos + pdu_off:pos + pdu_off + 2],
                                         order)  # type: ignore[arg-type]
        if end > len(head):
            break
        pos = end
    if pos == 0:
        return None
    try:
        return parse_blktrace_bytes(bytes(head[:pos]), name=name).genesis
    except Exception:  # damaged head: no anchor, the throughput is binned from the table
        return None


def bundle_manifest(paths: Sequence[str | os.PathLike[str]], names: Sequence[str], *,
                    strict: bool = False) -> tuple[Manifest | None, bool, list[int]]:
    """``(manifest, strict, shardable)``: the bundle's manifest as ingest builds it, the
    effective strictness, and the indexes of the files a shard may parse (top-level trace
    files; archives, empty files and manifest files stay with the merge)."""
    manifest_files: list[tuple[Path, str, str]] = []
    shardable: list[int] = []
    for i, (p, label) in enumerate(zip(paths, names, strict=True)):
        path = Path(p)
        if path.stat().st_size == 0:
            continue
        fmt = detect_format(path, name=label)
        if fmt in MANIFEST_FORMATS:
            manifest_files.append((path, label, fmt))
        elif fmt not in ("tar", "zip"):
            shardable.append(i)
    manifest = build_manifest(manifest_files) if manifest_files else None
    return manifest, strict or bool(manifest is not None and manifest.strict), shardable


def parse_shard(path: str | os.PathLike[str], name: str, *, manifest: Manifest | None,
                strict: bool = False) -> ParsedPart:
    """Parse one top-level file as ingest would (same detection, same parser)."""
    p = Path(path)
    return parse_part(p, name, detect_format(p, name=name), manifest, strict=strict)


def _raw_to_json(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    return {"name": raw.name, "processes": [list(x) for x in raw.processes],
            "timestamps": [list(x) for x in raw.timestamps],
            "messages": [[int(k), v] for k, v in raw.messages.items()],
            "warnings": list(raw.warnings), "diagnostics": list(raw.diagnostics),
            "version": raw.version, "big_endian": raw.big_endian, "genesis": raw.genesis}


def _part_header_json(part: ParsedPart) -> dict[str, Any]:
    return {"name": part.name, "fmt": part.fmt, "binary": part.binary,
            "summary_kind": part.summary_kind, "rows": part.rows,
            "warnings": list(part.warnings), "raw": _raw_to_json(part.raw),
            "table": part.table is not None, "range": part.byte_range}


def _part_header(part: ParsedPart) -> bytes:
    head = json.dumps(_part_header_json(part)).encode()
    return _MAGIC + struct.pack("<Q", len(head)) + head


def write_part(part: ParsedPart, fh: IO[bytes]) -> None:
    """A parsed part into an open binary file: a JSON header, then its EventTable as .npz
    (:meth:`EventTable.save`, written column by column in chunks: no bytes copy of the whole
    part). The shard task writes it to a local file and streams that to storage."""
    fh.write(_part_header(part))
    if part.table is not None:
        part.table.save(fh)


def part_to_bytes(part: ParsedPart) -> bytes:
    """A parsed part as bytes (:func:`write_part` into memory; small parts and tests)."""
    buf = io.BytesIO()
    write_part(part, buf)
    return buf.getvalue()


def _part_from_header(header: dict[str, Any], table: EventTable | None) -> ParsedPart:
    raw = None
    if header["raw"] is not None:
        from workers.traces.blktrace_bin import RawBlktrace

        r = header["raw"]
        assert table is not None
        raw = RawBlktrace(name=r["name"], table=table,
                          processes=[(int(a), int(b), str(c)) for a, b, c in r["processes"]],
                          timestamps=[(int(a), int(b), int(c)) for a, b, c in r["timestamps"]],
                          messages={int(k): v for k, v in r["messages"]},
                          warnings=list(r["warnings"]), diagnostics=list(r["diagnostics"]),
                          version=r["version"], big_endian=r["big_endian"], genesis=r["genesis"])
    return ParsedPart(header["name"], header["fmt"], table=table, binary=header["binary"],
                      raw=raw, summary_kind=header["summary_kind"], rows=header["rows"],
                      warnings=list(header["warnings"]), byte_range=header.get("range"))


def _read_header(fh: IO[bytes]) -> dict[str, Any]:
    if fh.read(8) != _MAGIC:
        raise ValueError("not a parsed shard")
    (n,) = struct.unpack("<Q", fh.read(8))
    header: dict[str, Any] = json.loads(fh.read(n).decode())
    return header


def part_from_bytes(data: bytes) -> ParsedPart:
    """The inverse of :func:`part_to_bytes`."""
    return read_part(io.BytesIO(data))


def read_part(source: str | os.PathLike[str] | IO[bytes]) -> ParsedPart:
    """A whole part from a file written by :func:`write_part` (or an open binary file)."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            return read_part(fh)
    header = _read_header(source)
    table = EventTable.load(source) if header["table"] else None
    return _part_from_header(header, table)


class PartFile:
    """A part file on local disk read without loading its table: the header (PROCESS notes,
    messages, genesis: small) at once, the columns as streams of row chunks decompressed from
    the .npz members (:meth:`columns`). What the chunked merge
    (:mod:`workers.traces.streammerge`) reads; :meth:`load` is the whole :class:`ParsedPart`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            self.header = _read_header(fh)
            self.offset = fh.tell()
        self.name: str = self.header["name"]
        self.fmt: str = self.header["fmt"]
        self.binary: bool = bool(self.header["binary"])
        self.summary_kind: str | None = self.header["summary_kind"]
        self.warnings: list[str] = list(self.header["warnings"])
        self.raw: dict[str, Any] | None = self.header["raw"]
        self.events = 0
        if self.header["table"]:
            with self.columns(["time_ns"]) as cols:
                self.events = cols["time_ns"].rows

    def load(self) -> ParsedPart:
        return read_part(self.path)

    def columns(self, names: Sequence[str]) -> _ColumnStreams:
        """A context manager: ``{name: reader}``, each reader's ``read(n)`` the next ``n``
        rows of that column (fewer at its end)."""
        return _ColumnStreams(self.path, self.offset, names)


class _ColumnReader:
    def __init__(self, fp: IO[bytes]) -> None:
        from workers.traces.columnstore import read_npy_header

        self.fp = fp
        shape, self.dtype = read_npy_header(fp)
        self.rows = int(shape[0]) if shape else 1
        self.pos = 0

    def read(self, n: int) -> Any:
        from workers.traces.columnstore import read_rows

        n = max(0, min(int(n), self.rows - self.pos))
        out = read_rows(self.fp, self.dtype, n, what="part column")
        self.pos += n
        return out


class _ColumnStreams:
    def __init__(self, path: Path, offset: int, names: Sequence[str]) -> None:
        self.path, self.offset, self.names = path, offset, list(names)

    def __enter__(self) -> dict[str, _ColumnReader]:
        import zipfile

        self._fh = open(self.path, "rb")  # noqa: SIM115 (closed in __exit__)
        self._zf = zipfile.ZipFile(self._fh)
        self._members = [self._zf.open(n + ".npy") for n in self.names]
        return {n: _ColumnReader(m) for n, m in zip(self.names, self._members, strict=True)}

    def __exit__(self, *exc: object) -> None:
        for m in self._members:
            m.close()
        self._zf.close()
        self._fh.close()
