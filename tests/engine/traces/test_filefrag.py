"""filefrag -v output (a loop file's extent map) -> extents in sectors."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.errors import ParseError
from workers.traces.filefrag import FileExtent, file_map_from_fields, parse_filefrag

DATA = Path(__file__).resolve().parents[2] / "data" / "lab"
#: e2fsprogs 1.47 filefrag -v of a 512 MiB fallocated file on ext4 (4 KiB blocks)
FALLOCATED = (DATA / "loop_extents.txt").read_text()
#: the same file after one 4 KiB direct write at block 5 (ext4 split the unwritten extent)
WRITTEN = "".join(line + "\n" for line in (
    "Filesystem type is: ef53",
    "File size of /mnt/lower/loop.img is 536870912 (131072 blocks of 4096 bytes)",
    " ext:     logical_offset:        physical_offset: length:   expected: flags:",
    "   0:        0..       4:    6686720..   6686724:      5:             unwritten",
    "   1:        5..       5:    6686725..   6686725:      1:            ",  # (as printed)
    "   2:        6..   30719:    6686726..   6717439:  30714:             unwritten",
    "/mnt/lower/loop.img: 3 extents found"))


def test_fallocated_file_in_sectors() -> None:
    """Blocks of the 'File size' line's unit -> 512-byte sectors; unwritten flags kept."""
    fm = parse_filefrag(FALLOCATED)
    assert fm.block_bytes == 4096 and fm.file_bytes == 512 << 20
    assert len(fm.extents) == 5
    assert fm.extents[0] == FileExtent(0, 6686720 * 8, 30720 * 8, True)
    assert fm.extents[1] == FileExtent(30720 * 8, 6719488 * 8, 30720 * 8, True)
    assert fm.extents[4] == FileExtent(122880 * 8, 6817792 * 8, 8192 * 8, True)
    assert sum(e.sectors for e in fm.extents) == (512 << 20) // 512


def test_written_extent_has_no_flag_and_empty_flag_column_parses() -> None:
    fm = parse_filefrag(WRITTEN)
    assert [e.unwritten for e in fm.extents] == [True, False, True]
    assert fm.extents[1] == FileExtent(40, 6686725 * 8, 8, False)


def test_manifest_fields_round_trip() -> None:
    fm = parse_filefrag(FALLOCATED)
    fields = fm.manifest_fields()
    assert fields["file_extents"][0] == [0, 6686720 * 8, 30720 * 8, 1]
    assert file_map_from_fields(fields) == fm
    assert file_map_from_fields({"kind": "loop"}) is None


def test_other_units_and_bad_text() -> None:
    """``filefrag -v -b512``: the columns are then sectors."""
    text = FALLOCATED.replace("131072 blocks of 4096 bytes", "1048576 blocks of 512 bytes")
    assert parse_filefrag(text).extents[0] == FileExtent(0, 6686720, 30720, True)
    with pytest.raises(ParseError, match="not filefrag"):
        parse_filefrag("bash: filefrag: command not found\n")
    with pytest.raises(ParseError, match="overlap"):
        parse_filefrag(FALLOCATED.replace("   1:    30720..", "   1:    30000.."))
    with pytest.raises(ParseError, match="file_extents"):
        file_map_from_fields({"file_extents": [[0, 1]]})
