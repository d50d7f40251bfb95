"""One large binary blktrace file parsed as byte ranges, merged into exactly the whole file.

A bundle's shards were one per file, so a single huge file (one 100M-event ``blkparse -d``
dump, or a bundle with one busy CPU) was parsed by one task holding every column of it. Here
such a file is cut into ``count`` byte ranges of about the same size, each parsed on its own
(:func:`parse_range`, :func:`parse_range_fetched`), and the ranges' parts are put back
together (:func:`combine_parts` in memory, :class:`RangedPartFile` for the chunked merge of
:mod:`workers.traces.streammerge`) into what :func:`~workers.traces.blktrace_bin.parse_blktrace_raw`
gives for the whole file: the same rows, PROCESS notes, messages, genesis, warnings and
diagnostics.

Boundaries. Records chain through ``pdu_len`` from the file's start, so a range cannot know
where its first record starts without reading the file before it. Every range's nominal start
is ``size * i // count``; its boundary is the first offset at or after that where
:data:`CHAIN` consecutive records look like records (this file's magic and version, a payload
no longer than :data:`~workers.traces.blktrace_bin.MAX_PDU`, a cpu below 65536) and chain into
each other, or into the file's end (:func:`find_boundary`). Every range computes its own and
its successor's boundary from the same bytes with the same function, so all agree, and range
``i`` takes the records that START in ``[boundary_i, boundary_i+1)``: it walks the chain from
its boundary (pass 1 of the parser, corrupt regions and all) and reports where the walk
stopped. Bytes inside a payload that look like a header (a message note quoting the magic)
rarely chain several times; when they do, the walk of the range before does not stop exactly
on that boundary, and :func:`combine_headers` refuses the ranges (:class:`NotCombinable`): the
caller then parses the file whole. It also refuses what only the whole file can judge: more
than ``MAX_REGIONS`` corrupt regions, more corrupt bytes than good ones, more than 4095
relay streams between two corrupt regions. A range that does not parse (a truncated end, a
version change, strict mode on a damaged record) raises its error; the caller parses the file
whole, which raises the whole file's first error.

Sequence numbers. ``_decode_body`` checks that each (device, cpu) relay stream's sequence grows
by one, from an empty table at the range's start; a range also reports each stream's first
sequence (before its first corrupt region) and last (after its last one), so
:func:`combine_headers` finds the gaps across boundaries and the file's first gap as the
whole-file pass would (:func:`_seq_edges`).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numba
import numpy as np
import numpy.typing as npt

from workers.events import COLUMNS, EventTable
from workers.traces._registry import ParsedPart
from workers.traces.blktrace_bin import (
    HDR_V2,
    MAGIC,
    MAX_ACTION,
    MAX_PDU,
    MAX_REGIONS,
    TC_NOTIFY,
    FileFacts,
    _byte_order,
    _rd16,
    _rd32,
    _rd64,
    decode_records,
    file_notes,
    row_cpus,
)

#: Consecutive chained records that make a boundary.
CHAIN = 8
#: Bytes past the next boundary a range's walk may read (a last record's payload and the next
#: header's magic, or a resynchronisation's look-ahead).
TAIL = HDR_V2 + MAX_PDU + 64
#: Bytes fetched past a range's nominal end at first (doubled while a boundary needs more).
SLACK = 64 * 1024
#: Relay streams the parser's sequence table holds (``_decode_body``: 4096 slots, one empty).
SEQ_STREAMS = 4095


class NeedMoreBytes(Exception):
    """The window ends before a boundary (or the walk's look-ahead) is decided."""


class NotCombinable(Exception):
    """The ranges of a file do not add up to the whole-file parse: parse it whole."""


def range_count(size: int, budget: int) -> int:
    """How many byte ranges a file of ``size`` bytes is cut into for a per-shard ``budget``
    (1: parsed whole; ``budget`` <= 0 means no ranges)."""
    if budget <= 0 or size <= budget:
        return 1
    return -(-int(size) // int(budget))


def nominal(size: int, index: int, count: int) -> int:
    """The nominal start of range ``index`` of ``count`` (its boundary is at or after it)."""
    return (int(size) * int(index)) // int(count)


@numba.njit(cache=True)
def _verify(b: Any, q: int, be: bool, version: int, at_eof: bool, chain: int) -> int:
    """1 when ``chain`` plausible records chain from ``q`` (or the chain reaches the file's
    end), 0 when not, -1 when the buffer ends first and is not the file's end."""
    n = b.shape[0]
    hdr = 48 if version == 7 else 64
    pdu_off = 46 if version == 7 else 50
    cpu_off = 40 if version == 7 else 44
    p = q
    for k in range(chain):
        if k > 0 and p + 4 > n:
            if not at_eof:
                return -1
            return 1  # the chain reached the end (or a few stray bytes the walk reports)
        if p + hdr > n:
            if not at_eof:
                return -1
            if k == 0 or p + 4 > n:
                return 1 if k > 0 else 0
            magic = _rd32(b, p, be)
            ok = (magic & 0xFFFFFF00) == MAGIC and (magic & 0xFF) == version
            return 1 if ok else 0
        magic = _rd32(b, p, be)
        if (magic & 0xFFFFFF00) != MAGIC or (magic & 0xFF) != version:
            return 0
        pdu = _rd16(b, p + pdu_off, be)
        if pdu > MAX_PDU or _rd32(b, p + cpu_off, be) > 0xFFFF:
            return 0
        end = p + hdr + pdu
        if end > n:
            return -1 if not at_eof else 0
        if end == n and at_eof:
            return 1
        p = end
    return 1


@numba.njit(cache=True)
def _find(b: Any, start: int, be: bool, version: int, at_eof: bool, chain: int) -> int:
    n = b.shape[0]
    for q in range(start, n):
        r = _verify(b, q, be, version, at_eof, chain)
        if r == 1:
            return q
        if r < 0:
            return -1
    return n if at_eof else -1


def find_boundary(buf: npt.NDArray[np.uint8], offset: int, *, base: int, size: int,
                  big: bool, version: int, chain: int = CHAIN) -> int:
    """The first record boundary at or after file offset ``offset`` (``size`` when none):
    the first offset where ``chain`` records chain (see the module's docstring). ``buf`` holds
    the file's bytes from ``base``; raises :class:`NeedMoreBytes` when it ends too early."""
    if offset >= size:
        return size
    at_eof = base + len(buf) >= size
    q = int(_find(buf, offset - base, big, version, at_eof, chain))
    if q < 0:
        raise NeedMoreBytes(offset)
    return q + base


@numba.njit(cache=True)
def _seq_edges(b: Any, be: bool, version: int, start: int, stop: int, regions: Any,
               nreg: int, first: Any, last: Any) -> tuple[int, int, int, int]:
    """The relay streams of the records starting in [start, stop): ``first`` gets (key,
    sequence, offset) of each stream's first record before the first corrupt region, ``last``
    (key, sequence) of each stream's last record after the last one; keys as
    ``_decode_body``'s ((header device << 20) | cpu), over the records it checks (events with a
    known action). Returns (rows of first, rows of last, corrupt regions crossed, 1 when a
    stretch between regions has more streams than the parser's table holds)."""
    v2 = version == 8
    hdr = 64 if v2 else 48
    pdu_off = 50 if v2 else 46
    slots = 8192
    empty = np.uint64(0xFFFFFFFFFFFFFFFF)
    keys = np.full(slots, empty, dtype=np.uint64)
    seqs = np.zeros(slots, dtype=np.uint32)
    used = 0
    nfirst = 0
    resets = 0
    overflow = 0
    r = 0
    pos = start
    while pos < stop:
        if r < nreg and pos == regions[r, 0]:
            pos += regions[r, 1]
            r += 1
            keys[:] = empty
            used = 0
            resets += 1
            continue
        act: Any
        if v2:
            act = _rd64(b, pos + 32, be)
        else:
            act = np.uint64(_rd32(b, pos + 28, be))
        pdu = _rd16(b, pos + pdu_off, be)
        code = act & 0xFEFF
        if (act & TC_NOTIFY) or code == 0 or code > MAX_ACTION:
            pos += hdr + pdu
            continue
        hd = _rd32(b, pos + (40 if v2 else 36), be)
        c = _rd32(b, pos + (44 if v2 else 40), be)
        sq = _rd32(b, pos + 4, be)
        key = (np.uint64(hd) << np.uint64(20)) | np.uint64(c)
        h = np.int64((key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(51))
        while keys[h] != key and keys[h] != empty:
            h = (h + 1) & (slots - 1)
        if keys[h] == empty:
            if used >= SEQ_STREAMS:
                overflow = 1
            else:
                keys[h] = key
                used += 1
                if resets == 0:
                    first[nfirst, 0] = np.int64(key)
                    first[nfirst, 1] = np.int64(sq)
                    first[nfirst, 2] = pos
                    nfirst += 1
        if keys[h] == key:
            seqs[h] = sq
        pos += hdr + pdu
    nlast = 0
    for s in range(slots):
        if keys[s] != empty:
            last[nlast, 0] = np.int64(keys[s])
            last[nlast, 1] = np.int64(seqs[s])
            nlast += 1
    return nfirst, nlast, resets, overflow


def parse_window(buf: npt.NDArray[np.uint8], *, base: int, size: int, index: int,
                 count: int, name: str, basename: str, big: bool, version: int,
                 strict: bool = False) -> ParsedPart:
    """Range ``index`` of ``count`` of a file of ``size`` bytes whose bytes from ``base`` are
    in ``buf``: a binary :class:`ParsedPart` whose ``byte_range`` says what
    :func:`combine_headers` needs. Raises :class:`NeedMoreBytes` when ``buf`` ends before the
    next boundary plus :data:`TAIL` (and is not the file's end), ParseError as the parser."""
    lo = 0 if index == 0 else find_boundary(buf, nominal(size, index, count), base=base,
                                            size=size, big=big, version=version)
    hi = size if index == count - 1 else find_boundary(
        buf, nominal(size, index + 1, count), base=base, size=size, big=big, version=version)
    if base + len(buf) < size and base + len(buf) < hi + TAIL:
        raise NeedMoreBytes(hi + TAIL)
    if lo < base:
        raise ValueError(f"the window at {base} starts after the range's boundary {lo}")
    dec = decode_records(buf, name, big, version, strict=strict, start=lo - base,
                         stop=hi - base, base=base, size=size)
    raw = dec.raw
    regions = np.array([[r[0] - base, r[1], r[2], r[3]] for r in dec.regions] or
                       np.zeros((0, 4)), dtype=np.int64).reshape(-1, 4)
    first = np.zeros((SEQ_STREAMS + 1, 3), np.int64)
    last = np.zeros((8192, 2), np.int64)
    nfirst, nlast, resets, overflow = _seq_edges(buf, big, version, lo - base, hi - base,
                                                 regions, len(regions), first, last)
    per_cpu = ".blktrace." in basename
    info = {
        "index": int(index), "count": int(count), "size": int(size), "start": int(lo),
        "stop": int(hi), "end": int(dec.end), "rows": len(raw.table), "basename": basename,
        "regions": [list(r) for r in dec.regions], "dropped": dec.dropped,
        "gaps": list(dec.gaps),
        "cpus": row_cpus(raw.table) if per_cpu and len(raw.table) else [],
        "seq_first": [[int(first[i, 0]), int(first[i, 1]), int(first[i, 2]) + base]
                      for i in range(int(nfirst))],
        "seq_last": [[int(last[i, 0]), int(last[i, 1])] for i in range(int(nlast))],
        "resets": int(resets), "overflow": bool(overflow),
    }
    return ParsedPart(name, "blktrace", table=raw.table, binary=True, raw=raw,
                      byte_range=info)


def _mapped(path: Path) -> tuple[npt.NDArray[np.uint8], Any]:
    if path.stat().st_size == 0:
        return np.zeros(0, np.uint8), None
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mm, dtype=np.uint8), mm


def parse_range(path: str | os.PathLike[str], name: str, index: int, count: int, *,
                strict: bool = False) -> ParsedPart:
    """Range ``index`` of ``count`` of a local binary blktrace file (memory-mapped: only the
    range's pages are read)."""
    p = Path(path)
    buf, mm = _mapped(p)
    try:
        big, version = _byte_order(buf, name)
        return parse_window(buf, base=0, size=len(buf), index=index, count=count, name=name,
                            basename=p.name, big=big, version=version, strict=strict)
    finally:
        del buf
        if mm is not None:
            with contextlib.suppress(BufferError):
                mm.close()


def parse_range_fetched(fetch: Callable[[int, int, IO[bytes]], None], *, size: int,
                        head: bytes, index: int, count: int, name: str, basename: str,
                        strict: bool = False, tmpdir: str | None = None,
                        slack: int = SLACK) -> ParsedPart:
    """Range ``index`` of ``count`` of a file that is not on this host: ``fetch(offset,
    length, fh)`` writes those bytes of it into ``fh`` (a ranged GET), ``head`` is its first
    bytes (byte order and version). Only the range and :data:`SLACK` after it are fetched
    (``slack``; four times more each time a boundary lies further), written to a temporary file and memory-mapped."""
    big, version = _byte_order(np.frombuffer(head[:4], np.uint8), name)
    lo = nominal(size, index, count)
    while True:
        hi = size if index == count - 1 else min(size, nominal(size, index + 1, count) + slack)
        with tempfile.NamedTemporaryFile(prefix="blkreview-range-", dir=tmpdir) as fh:
            fetch(lo, hi - lo, fh)
            fh.flush()
            buf, mm = _mapped(Path(fh.name))
            try:
                return parse_window(buf, base=lo, size=size, index=index, count=count,
                                    name=name, basename=basename, big=big, version=version,
                                    strict=strict)
            except NeedMoreBytes:
                if hi >= size:
                    raise
                slack *= 4
            finally:
                del buf
                if mm is not None:
                    with contextlib.suppress(BufferError):
                        mm.close()


def _gaps(ranges: Sequence[dict[str, Any]]) -> tuple[int, int, int, int, int, int]:
    """The whole file's sequence check from the ranges' (see :func:`_seq_edges`)."""
    state: dict[int, int] = {}
    stretch: set[int] = set()
    count = 0
    candidates: list[tuple[int, int, int, int, int]] = []
    for r in ranges:
        if r["overflow"]:
            raise NotCombinable("more relay streams than the sequence table holds")
        for key, sq, off in r["seq_first"]:
            if key in state and ((sq - state[key]) & 0xFFFFFFFF) != 1:
                count += 1
                candidates.append((off, key >> 20, key & 0xFFFFF, state[key], sq))
            stretch.add(key)
        if len(stretch) > SEQ_STREAMS:
            raise NotCombinable("more relay streams than the sequence table holds")
        g = r["gaps"]
        if g[0]:
            count += int(g[0])
            candidates.append((int(g[1]), int(g[2]), int(g[3]), int(g[4]), int(g[5])))
        last = {int(k): int(s) for k, s in r["seq_last"]}
        if r["resets"]:
            state, stretch = last, set(last)
        else:
            state.update(last)
    if not count:
        return (0, 0, 0, 0, 0, 0)
    off, dev, cpu, prev, nxt = min(candidates)
    return (count, off, dev, cpu, prev, nxt)


def combine_headers(headers: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The part header (see :mod:`workers.traces.shards`) of the whole file from the headers
    of its ranges, in order; raises :class:`NotCombinable` when they are not the whole file."""
    if not headers:
        raise NotCombinable("no ranges")
    ranges = [h.get("range") for h in headers]
    if any(r is None for r in ranges):
        raise NotCombinable("a part is not a byte range")
    rs: list[dict[str, Any]] = [r for r in ranges if r is not None]
    count, size = rs[0]["count"], rs[0]["size"]
    if [r["index"] for r in rs] != list(range(count)) or any(
            r["count"] != count or r["size"] != size for r in rs):
        raise NotCombinable("the ranges are not one file's, in order")
    if rs[0]["start"] != 0 or rs[-1]["stop"] != size:
        raise NotCombinable("the ranges do not cover the file")
    for a, b in zip(rs, rs[1:], strict=False):
        if a["stop"] != b["start"]:
            raise NotCombinable(f"ranges {a['index']} and {b['index']} disagree on their "
                                "boundary")
    for r in rs:
        if r["end"] != r["stop"]:
            raise NotCombinable(f"the record chain of range {r['index']} crosses its end "
                                f"boundary {r['stop']} (at {r['end']})")
    regions = [tuple(int(x) for x in row) for r in rs for row in r["regions"]]
    if len(regions) > MAX_REGIONS or sum(row[1] for row in regions) * 2 > size:
        raise NotCombinable("too much damage: the whole file decides")
    raws = [h["raw"] for h in headers]
    if len({(r["version"], r["big_endian"]) for r in raws}) != 1:
        raise NotCombinable("the ranges disagree on the byte order or version")
    label = raws[0]["name"]
    rows = sum(int(r["rows"]) for r in rs)
    facts = FileFacts(size=size, rows=rows, regions=regions,  # type: ignore[arg-type]
                      dropped=sum(int(r["dropped"]) for r in rs),
                      cpus=sorted({int(c) for r in rs for c in r["cpus"]}), gaps=_gaps(rs))
    warnings, diagnostics = file_notes(label, rs[0]["basename"], facts)
    messages: list[list[Any]] = []
    offset = 0
    for h, r in zip(headers, rs, strict=True):
        messages.extend([int(k) + offset, v] for k, v in h["raw"]["messages"])
        offset += int(r["rows"])
    geneses = [int(r["genesis"]) for r in raws if r["genesis"] is not None]
    raw = {"name": label, "processes": [p for r in raws for p in r["processes"]],
           "timestamps": [t for r in raws for t in r["timestamps"]], "messages": messages,
           "warnings": warnings, "diagnostics": diagnostics, "version": raws[0]["version"],
           "big_endian": raws[0]["big_endian"], "genesis": min(geneses) if geneses else None}
    first = headers[0]
    return {"name": first["name"], "fmt": first["fmt"], "binary": True, "summary_kind": None,
            "rows": [], "warnings": [], "raw": raw, "table": True, "range": None,
            "ranges": count}


def combine_parts(parts: Sequence[ParsedPart]) -> ParsedPart:
    """The whole file's :class:`ParsedPart` from its ranges' (in memory; see
    :class:`RangedPartFile` for the merge in chunks)."""
    from workers.traces.shards import _part_from_header, _part_header_json

    header = combine_headers([_part_header_json(p) for p in parts])
    tables = [p.table for p in parts if p.table is not None]
    cols = {n: np.concatenate([getattr(t, n) for t in tables]) if tables
            else np.zeros(0, dt) for n, dt in COLUMNS if n != "comm"}
    table = EventTable(cols, meta=dict(tables[0].meta) if tables else {})
    return _part_from_header(header, table)


class _Chained:
    """One column read across the ranges' part files in order."""

    def __init__(self, readers: Sequence[Any]) -> None:
        self.readers = list(readers)
        self.rows = sum(r.rows for r in self.readers)
        self.dtype = self.readers[0].dtype if self.readers else np.dtype(np.int64)
        self.i = 0

    def read(self, n: int) -> Any:
        out = []
        left = int(n)
        while left > 0 and self.i < len(self.readers):
            r = self.readers[self.i]
            got = r.read(left)
            if len(got):
                out.append(got)
                left -= len(got)
            if r.pos >= r.rows:
                self.i += 1
        if not out:
            return np.zeros(0, self.dtype)
        return out[0] if len(out) == 1 else np.concatenate(out)


class RangedPartFile:
    """The part files of a file's byte ranges read as the one part file of the whole file
    (what :class:`workers.traces.shards.PartFile` offers the chunked merge): the combined
    header at once (:func:`combine_headers`, which may raise :class:`NotCombinable`), the
    columns chained range after range."""

    def __init__(self, ranges: Sequence[Any]) -> None:
        self.ranges = list(ranges)
        self.header = combine_headers([r.header for r in self.ranges])
        self.name: str = self.header["name"]
        self.fmt: str = self.header["fmt"]
        self.binary = True
        self.summary_kind: str | None = None
        self.warnings: list[str] = []
        self.raw: dict[str, Any] | None = self.header["raw"]
        self.events = sum(r.events for r in self.ranges)

    def load(self) -> ParsedPart:
        return combine_parts([r.load() for r in self.ranges])

    @contextlib.contextmanager
    def columns(self, names: Sequence[str]) -> Any:
        with contextlib.ExitStack() as stack:
            opened = [stack.enter_context(r.columns(names)) for r in self.ranges if r.events]
            yield {n: _Chained([o[n] for o in opened]) for n in names}


def parse_in_ranges(path: str | os.PathLike[str], name: str, count: int, *,
                    strict: bool = False) -> ParsedPart:
    """A local binary file parsed as ``count`` ranges one after the other and combined, or
    parsed whole when they do not combine or one of them does not parse (then the whole
    file's own error is raised): the readable form of what the parallel ingest does, for the
    tests and the CLI's benchmarks."""
    from workers.errors import ParseError
    from workers.traces._registry import parse_part

    try:
        return combine_parts([parse_range(path, name, i, count, strict=strict)
                              for i in range(count)])
    except (NotCombinable, ParseError):
        return parse_part(Path(path), name, "blktrace", None, strict=strict)
