"""Streaming line reader shared by the text parsers.

Uploads can be large and hostile, so text is read line by line from a binary file handle with a
hard per-line limit (a "line" of 100 MB without a newline is a corrupt or malicious file, not a
trace), decoded leniently (comm names are arbitrary bytes), and with mail quoting stripped:
traces pasted into mailing-list replies arrive as ``> 8,0 0 1 ...`` or ``> > block_split: ...``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from workers.errors import ParseError

#: Longest accepted text line in bytes. blkparse lines are < 200 bytes; ftrace lines < 1 KiB;
#: iostat -x with -p ALL stays far below this; fio JSON is parsed as a whole document instead.
MAX_LINE_BYTES = 64 * 1024

#: Mail quote markers at the start of a line (``>``, ``> >``, ``>>>``), with following space.
_QUOTE_RE = re.compile(r"^(?:[ \t]*>)+[ \t]?")


def strip_quote(line: str) -> str:
    """Remove leading mail quote markers so quoted trace lines parse like raw ones."""
    if line and (line[0] == ">" or (line.lstrip()[:1] == ">")):
        return _QUOTE_RE.sub("", line, count=1)
    return line


def iter_lines(fh: BinaryIO, name: str, *, max_line: int = MAX_LINE_BYTES,
               unquote: bool = True) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` with the newline removed.

    Raises:
        ParseError: a line is longer than ``max_line`` bytes (reported with its line number).
    """
    lineno = 0
    readline = fh.readline
    while True:
        raw = readline(max_line + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > max_line and not raw.endswith(b"\n"):
            raise ParseError(name, f"line longer than {max_line} bytes (not a text trace?)",
                             line=lineno)
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if unquote:
            text = strip_quote(text)
        yield lineno, text


def open_lines(path: str | Path, name: str, **kw: int | bool) -> Iterator[tuple[int, str]]:
    """Open ``path`` and stream its lines (see :func:`iter_lines`)."""
    with open(path, "rb") as fh:
        yield from iter_lines(fh, name, **kw)  # type: ignore[arg-type]
