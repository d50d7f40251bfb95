"""Format detection from content, never from the file name.

Uploads arrive under storage temp names and users rename files freely, so the only reliable
signal is the bytes: the blktrace magic (``0x65617400 | version`` in either byte order, checked
the way blkparse's ``verify_trace`` does), archive magics, and for text the first line that
matches one of the known layouts (trace-formats.md section 8, "Sniff the format").
"""

from __future__ import annotations

import re
from pathlib import Path

from workers.errors import UnknownFormatError
from workers.traces._textio import strip_quote
from workers.traces.blkparse_text import EVENT_START_RE

#: Bytes read for sniffing.
SNIFF_BYTES = 64 * 1024

BLK_IO_TRACE_MAGIC = 0x65617400

#: Names returned by :func:`detect_format`.
FORMATS = (
    "blktrace",  # binary v1 (0x07) or v2 (0x08) records
    "blkparse",  # blkparse default text
    "ftrace",  # block tracepoints from /sys/kernel/tracing/trace, trace-cmd report, mails
    "bpftrace",  # the blk_mq_start_request kprobe printf of seed 001
    "biosnoop",  # bcc / libbpf-tools biosnoop columns
    "iostat",  # iostat -x text
    "iostat-json",  # iostat -o JSON
    "fio-json",  # fio --output-format=json
    "manifest",  # blkreview.toml
    "sysfs-queue",  # /sys/block/*/queue/* values
    "mdstat",  # /proc/mdstat
    "tar", "zip",  # archives (tar may be compressed: gz, xz, zst)
)

_FTRACE_RE = re.compile(r"\bblock_[a-z_]+:\s")
_BPFTRACE_RE = re.compile(
    r"^\s*\d+\s+.*?\s\d+\s+\d+:\s+\S+\s+\S+\s+bio\s+[0-9a-fA-F]+-\d+\s*$")
_BIOSNOOP_HDR_RE = re.compile(r"^\s*TIME\((?:s|ms)\)\s+COMM\s+PID\s+DISK\s+T\s+SECTOR\s+BYTES")
_IOSTAT_HDR_RE = re.compile(r"^Device:?\s+.*(?:r/s|rrqm/s|tps)")
_SYSFS_RE = re.compile(r"^(?:## /sys/block/\S+/queue\s*$|/sys/block/[^/\s]+/queue/\w+:)")
_MDSTAT_RE = re.compile(r"^Personalities\s*:")
#: a manifest key or table on any line (a manifest may start with comments)
_MANIFEST_KEYS_RE = re.compile(r"^\s*(?:kernel|role|strict)\s*=|^\s*\[(?:stack|workload|limits|devices)",
                               re.MULTILINE)


def _is_blktrace_magic(head: bytes) -> bool:
    if len(head) < 4:
        return False
    le = int.from_bytes(head[:4], "little")
    be = int.from_bytes(head[:4], "big")
    return (le & 0xFFFFFF00) == BLK_IO_TRACE_MAGIC or (be & 0xFFFFFF00) == BLK_IO_TRACE_MAGIC


def sniff_archive(head: bytes) -> str | None:
    """``"tar"`` (plain or gz/xz/zst/bz2 compressed) or ``"zip"`` from magic bytes."""
    if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
        return "zip"
    if head[:2] == b"\x1f\x8b" or head[:6] == b"\xfd7zXZ\x00" or head[:4] == b"\x28\xb5\x2f\xfd":
        return "tar"
    if head[:3] == b"BZh":
        return "tar"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


def detect_bytes(head: bytes, name: str) -> str:
    """Format of a file from its first bytes (see :data:`FORMATS`).

    Raises:
        UnknownFormatError: nothing matched, with what the content looked like.
    """
    if not head:
        raise UnknownFormatError(name, "empty file")
    if _is_blktrace_magic(head):
        return "blktrace"
    archive = sniff_archive(head)
    if archive:
        return archive
    if b"\x00" in head[:4096]:
        raise UnknownFormatError(
            name, f"binary content that is not a blktrace (first bytes {head[:4].hex()}, "
                  "expected magic 0x656174 with version 07/08) nor a tar/zip archive")
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith("{") or "\n{" in text[:4096] or text.startswith("fio:"):
        if '"fio version"' in text:
            return "fio-json"
        if '"sysstat"' in text:
            return "iostat-json"
    if _MANIFEST_KEYS_RE.search(text) and _is_toml(head):
        return "manifest"
    lines = text.splitlines()
    if len(head) >= SNIFF_BYTES and lines:
        lines = lines[:-1]  # the last line may be cut by the sniff window
    for raw in lines:
        line = strip_quote(raw)
        if not line.strip():
            continue
        if EVENT_START_RE.match(line):
            return "blkparse"
        if _FTRACE_RE.search(line) and not line.lstrip().startswith("#"):
            return "ftrace"
        if _BPFTRACE_RE.match(line):
            return "bpftrace"
        if _BIOSNOOP_HDR_RE.match(line):
            return "biosnoop"
        if _IOSTAT_HDR_RE.match(line):
            return "iostat"
        if _SYSFS_RE.match(line):
            return "sysfs-queue"
        if _MDSTAT_RE.match(line):
            return "mdstat"
    if len(head) >= SNIFF_BYTES and not any(ln.strip() for ln in lines):
        # the first non-blank line runs past the sniff window: say so (the parsers' words),
        # not "first line: ''" (issue 10 item 15)
        first_char = len(head) - len(head.lstrip())
        start = head.rfind(b"\n", 0, first_char) + 1
        raise UnknownFormatError(
            name, f"line longer than {len(head) - start - 1} bytes (not a text trace?)",
            line=head.count(b"\n", 0, start) + 1)
    first = next((ln for ln in lines if ln.strip()), "")[:80]
    raise UnknownFormatError(
        name, "not a recognised trace or summary format (blktrace binary, blkparse text, "
              "ftrace block events, bpftrace/biosnoop, iostat -x, iostat/fio JSON); "
              f"first line: {first!r}")


def _is_toml(head: bytes) -> bool:
    import tomllib

    try:
        tomllib.loads(head.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False
    return True


def detect_format(path: str | Path, *, name: str | None = None) -> str:
    """Format of the file at ``path`` from its content (see :data:`FORMATS`).

    Raises:
        UnknownFormatError: the content matches no supported format.
    """
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    return detect_bytes(head, name or str(path))

