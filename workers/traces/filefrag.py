"""A file's extent map: ``filefrag -v`` output (the FIEMAP ioctl) -> extents in 512-byte sectors.

A loop device over a file (drivers/block/loop.c) sends its I/O to the file system, which sends
it to the disk below at the file's *physical* blocks: where each logical block of the file
sits is the file system's extent map, which FIEMAP reports (``ioctl_fiemap`` ->
``ext4_fiemap`` / ``iomap_fiemap``) and e2fsprogs' ``filefrag -v`` prints::

    Filesystem type is: ef53
    File size of /mnt/lower/loop.img is 536870912 (131072 blocks of 4096 bytes)
     ext:     logical_offset:        physical_offset: length:   expected: flags:
       0:        0..   30719:      34816..     65535:  30720:             unwritten
       1:    30720..   63487:      67584..    100351:  32768:      65536: unwritten
    /mnt/lower/loop.img: 2 extents found

Columns are in units of the block size of the ``File size`` line (the file system's block
size, or filefrag's ``-b`` value); physical blocks count from the start of the device the
file system is on. ``unwritten`` marks an extent that fallocate reserved and nothing wrote
yet (FIEMAP_EXTENT_UNWRITTEN): a direct read of it is zero-filled without I/O
(``iomap_dio_iter``: IOMAP_UNWRITTEN on a read -> ``iomap_dio_hole_iter``), a direct write goes
to its blocks and converts it on completion. Parsed here, in the traces package, so that the
lab's bundle writer and the ingester read the same text the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workers.errors import ParseError

_SIZE_RE = re.compile(
    r"^File size of (?P<path>.*) is (?P<bytes>\d+) \((?P<blocks>\d+) blocks? of "
    r"(?P<bsize>\d+) bytes\)")
_EXT_RE = re.compile(
    r"^\s*(?P<i>\d+):\s*(?P<l0>\d+)\.\.\s*(?P<l1>\d+):\s*(?P<p0>\d+)\.\.\s*(?P<p1>\d+):"
    r"\s*(?P<len>\d+):(?:\s*(?P<exp>\d+):)?\s*(?P<flags>\S*)\s*$")
#: the first line filefrag prints for a file (``Filesystem type is: ef53``)
HEADER_RE = re.compile(r"^Filesystem type is: [0-9a-fA-F]+\s*$")
#: FIEMAP flags of an extent whose blocks are not where it says (yet): nothing to map to
_NO_LOCATION = ("unknown_loc", "delalloc", "encoded", "data_inline", "inline")


@dataclass(frozen=True)
class FileExtent:
    """One extent of a file, in 512-byte sectors.

    Attributes:
        logical: first sector of the extent in the file.
        physical: first sector on the device the file system sits on.
        sectors: length.
        unwritten: reserved (fallocate) but never written: reads of it do no I/O.
    """

    logical: int
    physical: int
    sectors: int
    unwritten: bool = False

    def to_row(self) -> list[int]:
        """``[logical, physical, sectors, unwritten]`` (the manifest's ``file_extents`` row)."""
        return [self.logical, self.physical, self.sectors, int(self.unwritten)]


@dataclass(frozen=True)
class FileMap:
    """A file's extent map: what ``filefrag -v`` says, in sectors."""

    extents: tuple[FileExtent, ...]
    block_bytes: int = 4096
    file_bytes: int = 0

    def manifest_fields(self) -> dict[str, Any]:
        """The ``[stack]`` fields a bundle manifest states the map with."""
        return {"file_block_bytes": self.block_bytes, "file_size_bytes": self.file_bytes,
                "file_extents": [e.to_row() for e in self.extents]}


def parse_filefrag(text: str, name: str = "filefrag") -> FileMap:
    """``filefrag -v`` output of one file -> its :class:`FileMap` (extents sorted by offset).

    Extents without a location (delayed allocation, inline data) are left out: no sector of
    the disk holds them yet.

    Raises:
        ParseError: no ``File size of ... (N blocks of B bytes)`` line (the unit of every
            column), a block size that is not a multiple of 512, or overlapping extents.
    """
    block = 0
    size = 0
    extents: list[FileExtent] = []
    for line in text.splitlines():
        mo = _SIZE_RE.match(line.strip())
        if mo:
            if block:
                raise ParseError(name, "more than one file in the filefrag output")
            block, size = int(mo.group("bsize")), int(mo.group("bytes"))
            if block <= 0 or block % 512:
                raise ParseError(name, f"block size {block} is not a multiple of 512 bytes")
            continue
        ex = _EXT_RE.match(line)
        if not ex:
            continue
        if not block:
            raise ParseError(name, "extent lines before the 'File size of' line")
        flags = ex.group("flags").split(",")
        if any(f in _NO_LOCATION for f in flags):
            continue
        k = block // 512
        n = int(ex.group("len"))
        extents.append(FileExtent(int(ex.group("l0")) * k, int(ex.group("p0")) * k, n * k,
                                  "unwritten" in flags))
    if not block:
        raise ParseError(name, "not filefrag -v output (no 'File size of ... blocks of N "
                               "bytes' line)")
    extents.sort(key=lambda e: e.logical)
    for a, b in zip(extents, extents[1:], strict=False):
        if a.logical + a.sectors > b.logical:
            raise ParseError(name, f"extents overlap at file sector {b.logical}")
    return FileMap(tuple(extents), block, size)


def file_map_from_fields(stack: Mapping[str, Any]) -> FileMap | None:
    """The :class:`FileMap` a manifest's ``[stack]`` states (``file_extents`` rows of
    ``[logical, physical, sectors, unwritten]`` sectors), or None when it states none.

    Raises:
        ParseError: a malformed row.
    """
    rows = stack.get("file_extents")
    if rows is None:
        return None
    if not isinstance(rows, Sequence) or isinstance(rows, str):
        raise ParseError("blkreview.toml", "[stack] file_extents must be a list of "
                                           "[logical, physical, sectors, unwritten] rows")
    out = []
    for row in rows:
        if (not isinstance(row, Sequence) or isinstance(row, str) or len(row) not in (3, 4)
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                           for x in row)):
            raise ParseError("blkreview.toml", f"[stack] file_extents row {row!r}: expected "
                                               "[logical, physical, sectors, unwritten] "
                                               "(sectors, non-negative integers)")
        out.append(FileExtent(row[0], row[1], row[2], bool(row[3]) if len(row) == 4 else False))
    out.sort(key=lambda e: e.logical)
    return FileMap(tuple(out), int(stack.get("file_block_bytes", 4096) or 4096),
                   int(stack.get("file_size_bytes", 0) or 0))


__all__ = ["FileExtent", "FileMap", "HEADER_RE", "file_map_from_fields", "parse_filefrag"]
