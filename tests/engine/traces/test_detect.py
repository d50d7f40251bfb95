"""Format detection from content."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.errors import UnknownFormatError
from workers.traces import detect_format, ingest

CASES = {
    "blkparse": "  8,0    0        1     0.000000000  42  Q  WS 8 + 8 [fio]\n",
    "ftrace": "          dd-18069   [001] .....   470.846167: block_rq_issue: 254,0 RA 65536 () "
              "29947736 + 128 be,0,4 [dd]\n",
    "bpftrace": "117828811               dd 1475 0: blk_mq_start_request ublkb0 bio 0-524288\n",
    "biosnoop": "TIME(s)     COMM           PID    DISK    T SECTOR     BYTES   LAT(ms)\n",
    "iostat": "Linux 6.1 (vm)\n\nDevice            r/s     rkB/s   rrqm/s  %rrqm r_await\n",
    "fio-json": 'fio: warning\n{\n  "fio version" : "fio-3.33",\n  "jobs": []\n}\n',
    "iostat-json": '{"sysstat": {"hosts": []}}\n',
    "manifest": 'kernel = "6.1.0"\n[stack]\ntop = "9,0"\n',
    "mdstat": "Personalities : [raid5]\nmd0 : active raid5 vdb[1] vda[0]\n",
}


@pytest.mark.parametrize(("fmt", "text"), sorted(CASES.items()))
def test_detect_text_formats(tmp_path: Path, fmt: str, text: str) -> None:
    """Each text format is recognised from its content under a meaningless name."""
    p = tmp_path / "upload.bin"
    p.write_text(text)
    assert detect_format(p) == fmt


def test_detect_binary_both_byte_orders(data_dir: Path) -> None:
    """blktrace magic is recognised little- and big-endian."""
    assert detect_format(data_dir / "demo.blktrace.0") == "blktrace"
    assert detect_format(data_dir / "demo_be.blktrace.0") == "blktrace"


def test_unknown_content_readable_reason(tmp_path: Path) -> None:
    """Prose is an UnknownFormatError that quotes the first line."""
    p = tmp_path / "notes.txt"
    p.write_text("Hello, these are my notes\nnothing here\n")
    with pytest.raises(UnknownFormatError) as ei:
        ingest([p], names=["notes.txt"])
    assert ei.value.path == "notes.txt"
    assert "Hello, these are my notes" in ei.value.reason


def test_unknown_binary_and_empty(tmp_path: Path) -> None:
    """Random binary and empty files are refused with a reason."""
    b = tmp_path / "x"
    b.write_bytes(b"\x00\x01\x02\x03" * 10)
    with pytest.raises(UnknownFormatError, match="binary content"):
        detect_format(b)
    e = tmp_path / "e"
    e.write_bytes(b"")
    with pytest.raises(UnknownFormatError, match="empty"):
        detect_format(e)


@pytest.mark.parametrize("text", ['# capture of 2026-11-29\n\nkernel = "6.1.0"\n',
                                  '[devices]\nublkb0 = "259,0"\n'])
def test_detect_manifest_after_comments_or_with_devices_only(tmp_path: Path, text: str) -> None:
    """A manifest that starts with a comment, or holds only [devices], is still a manifest."""
    p = tmp_path / "upload.bin"
    p.write_text(text)
    assert detect_format(p) == "manifest"


def test_huge_single_line_says_line_too_long(tmp_path: Path) -> None:
    """A 20 MB line that starts like blkparse is 'line longer than N bytes' at detection too,
    with its line number, not 'not a recognised trace ... first line: ""' (issue 10 item 15)."""
    from workers.errors import UnknownFormatError
    from workers.traces.detect import SNIFF_BYTES

    p = tmp_path / "huge.txt"
    with open(p, "wb") as fh:
        fh.write(b"  8,0    0        1     0.000000000   843  Q   R 0 + 8 [dd] ")
        fh.write(b"x" * (20 * 2**20))
    with pytest.raises(UnknownFormatError) as ei:
        detect_format(p, name="huge.txt")
    assert ei.value.line == 1
    assert ei.value.reason == f"line longer than {SNIFF_BYTES - 1} bytes (not a text trace?)"
    # after blank lines the line number is the long line's
    p.write_bytes(b"\n\n" + b"  8,0    0 " + b"y" * SNIFF_BYTES)
    with pytest.raises(UnknownFormatError, match="line longer than 65533 bytes") as ei:
        detect_format(p, name="huge.txt")
    assert ei.value.line == 3
