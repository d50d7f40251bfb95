"""Check the first lines of an upload before it is stored, so a malformed line is refused at once.

The upload path already reads the first 64 KiB of every file to detect its format. For the
line-based trace formats the same bytes, cut at the last complete line, go through the real parser:
a malformed line there becomes a form error / HTTP 400 naming the file and line, instead of a job
that fails later. Lines past the head are still checked by the worker (the job then fails with
file, line and reason). Binary, JSON and archive formats are left to the worker: a cut JSON
document or record stream is not an error.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from workers.errors import ParseError

#: Formats whose every complete line can be parsed on its own.
LINE_FORMATS = frozenset({"blkparse", "ftrace", "bpftrace", "biosnoop"})


def check_head(head: bytes, *, name: str, fmt: str, complete: bool = False) -> None:
    """Parse the complete lines of ``head`` as ``fmt``; raise ParseError on a malformed one.

    Args:
        head: the first bytes of the file.
        name: the user-facing file name, for the error message.
        fmt: the format ``workers.traces.detect`` found.
        complete: True when ``head`` is the whole file (its last line need not end in a newline).
    """
    if fmt not in LINE_FORMATS:
        return
    if not complete:
        cut = head.rfind(b"\n")
        if cut < 0:
            return  # one partial line: nothing complete to judge
        head = head[: cut + 1]
    from workers.traces import parse_file  # late: the package imports this module's siblings

    with tempfile.TemporaryDirectory(prefix="blkreview-precheck-") as tmp:
        path = Path(tmp) / "head"
        path.write_bytes(head)
        try:
            parse_file(path, name=name, fmt=fmt)
        except ParseError as exc:
            if exc.line is None:
                return  # whole-file verdicts (e.g. no events yet) are the worker's to give
            raise
