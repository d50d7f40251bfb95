"""The per-line length limit of the streaming text reader, through every text parser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workers.errors import ParseError
from workers.traces import detect_format, parse_file
from workers.traces._textio import MAX_LINE_BYTES
from workers.traces.bpf import parse_biosnoop, parse_bpftrace
from workers.traces.ftrace import parse_ftrace
from workers.traces.iostat import parse_iostat_text
from workers.traces.manifest import Manifest, load_mdstat, load_sysfs

FTRACE = (b"  dd-18069 [001] ..... 470.846132: block_bio_queue: 254,0 RA 29947736 + 128 [dd]\n"
          b"  dd-18069 [001] ..... 470.846153: block_getrq: 254,0 RA 29947736 + 128 [dd]\n")
BPFTRACE = (b"117828811               dd 1475 0: blk_mq_start_request ublkb0 bio 0-524288\n"
            b"117828823               dd 1475 0: blk_mq_start_request ublkb0 bio 400-524288\n")
BIOSNOOP = (b"TIME(s)     COMM           PID    DISK    T SECTOR     BYTES   LAT(ms)\n"
            b"0.000004    supervise      1950   xvda1   W 13092560   4096       0.74\n")
IOSTAT = (b"Device            r/s     w/s     rkB/s     wkB/s   %util\n"
          b"sda              6.90    1.69    222.14     57.08    0.46\n")

PARSERS: list[tuple[str, bytes, Callable[..., Any]]] = [
    ("ftrace", FTRACE, parse_ftrace),
    ("bpftrace", BPFTRACE, parse_bpftrace),
    ("biosnoop", BIOSNOOP, parse_biosnoop),
    ("iostat", IOSTAT, parse_iostat_text),
]
IDS = [p[0] for p in PARSERS]


@pytest.mark.parametrize(("fmt", "head", "parser"), PARSERS, ids=IDS)
def test_good_head_parses(tmp_path: Path, fmt: str, head: bytes,
                          parser: Callable[..., Any]) -> None:
    """The two-line heads used below are valid input of their format (so the limit is what
    fails in the next test, nothing else)."""
    p = tmp_path / "ok.txt"
    p.write_bytes(head)
    assert detect_format(p) == fmt
    assert len(parser(p, name="ok.txt")) >= 1


@pytest.mark.parametrize(("fmt", "head", "parser"), PARSERS, ids=IDS)
def test_overlong_line_reports_line_and_reason(tmp_path: Path, fmt: str, head: bytes,
                                               parser: Callable[..., Any]) -> None:
    """A line over the limit after two good lines is a ParseError naming the file, line 3
    and the limit, from the parser itself and through parse_file."""
    p = tmp_path / "long.txt"
    p.write_bytes(head + b"x" * (MAX_LINE_BYTES + 1) + b"\n" + head)
    with pytest.raises(ParseError) as ei:
        parser(p, name="upload.txt")
    assert ei.value.path == "upload.txt" and ei.value.line == 3
    assert f"line longer than {MAX_LINE_BYTES} bytes" in ei.value.reason
    with pytest.raises(ParseError) as ei2:
        parse_file(p, name="upload.txt", fmt=fmt)
    assert ei2.value.line == 3 and "longer than" in ei2.value.reason


@pytest.mark.parametrize(("fmt", "head", "parser"), PARSERS, ids=IDS)
def test_overlong_last_line_without_newline(tmp_path: Path, fmt: str, head: bytes,
                                            parser: Callable[..., Any]) -> None:
    """An unterminated giant tail (a truncated or hostile upload) is refused at its line."""
    p = tmp_path / "tail.txt"
    p.write_bytes(head + b"7" * (4 * MAX_LINE_BYTES))
    with pytest.raises(ParseError) as ei:
        parser(p, name="tail.txt")
    assert ei.value.line == 3 and "longer than" in ei.value.reason


@pytest.mark.parametrize(("fmt", "head", "parser"), PARSERS, ids=IDS)
def test_line_at_the_limit_is_accepted(tmp_path: Path, fmt: str, head: bytes,
                                       parser: Callable[..., Any]) -> None:
    """A line of exactly the limit (prose the parser skips) is not refused."""
    p = tmp_path / "edge.txt"
    p.write_bytes(head + b"# " + b"y" * (MAX_LINE_BYTES - 2) + b"\n" + head)
    assert len(parser(p, name="edge.txt")) >= 2


@pytest.mark.parametrize(("loader", "head"), [
    (load_sysfs, b"## /sys/block/md0/queue\nmd0 max_sectors_kb 1024\n"),
    (load_mdstat, b"Personalities : [raid5]\n"
                  b"md0 : active raid5 vdb[1] vda[0]\n"),
], ids=["sysfs-queue", "mdstat"])
def test_manifest_text_files_line_limit(tmp_path: Path, loader: Callable[..., Any],
                                        head: bytes) -> None:
    """The queue-limits dump and /proc/mdstat go through the same reader: an overlong line 3
    is a ParseError with that line, after the two good lines load."""
    ok = tmp_path / "ok"
    ok.write_bytes(head)
    loader(ok, "ok", Manifest())
    p = tmp_path / "long"
    p.write_bytes(head + b"z" * (MAX_LINE_BYTES + 1) + b"\n")
    with pytest.raises(ParseError) as ei:
        loader(p, "limits.txt", Manifest())
    assert (ei.value.path, ei.value.line) == ("limits.txt", 3)
    assert "longer than" in ei.value.reason
