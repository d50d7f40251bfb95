"""Helpers shared by the ``inspect``, ``analyze`` and ``compare`` commands.

A maintainer points the commands at what the capture left behind: per-CPU files, an archive,
or the capture directory itself. The same expansion is used everywhere so that ``inspect DIR``
shows exactly the bundle ``analyze DIR`` and ``compare DIR -- DIR2`` will read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from workers.errors import ParseError
from workers.events import dev_str, parse_dev


class UsageError(Exception):
    """A command-line mistake (missing file, bad option value): exit code 2, one line."""


def guarded(body: Callable[[], int]) -> int:
    """Run a command body; a usage error exits 2 and bad input 1, each with one line."""
    try:
        return body()
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except ParseError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return 1


def device_arg(text: str) -> str:
    """argparse ``type=`` for ``--device``: ``8,0`` or ``8:0``, normalised to ``8,0``."""
    try:
        return dev_str(parse_dev(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def directory_files(directory: Path, warnings: list[str] | None = None) -> list[str]:
    """Files of a capture directory taken as one bundle.

    Files of no known format (notes, command logs) are skipped with a warning on stderr, and
    when the directory holds raw blktrace files the blkparse text rendered from them is
    skipped too: it is the same events twice (``ingest`` would drop it anyway, this keeps the
    file list short). With a ``warnings`` list the skips are appended there instead.
    """
    from workers.traces import detect_format

    found: list[tuple[str, str]] = []
    for f in sorted(x for x in directory.rglob("*") if x.is_file() and x.stat().st_size > 0):
        try:
            found.append((str(f), detect_format(f, name=str(f))))
        except ParseError:
            msg = f"{f}: not a trace, summary or manifest; skipped"
            if warnings is None:
                sys.stderr.write(f"warning: {msg}\n")
            else:
                warnings.append(msg)
    has_binary = any(fmt == "blktrace" for _, fmt in found)
    return [f for f, fmt in found if not (has_binary and fmt == "blkparse")]


def bundle_files(args: list[str]) -> list[str]:
    """Expand one bundle's arguments: files stay, directories become their files.

    Raises:
        UsageError: an argument does not exist or a directory holds no usable file.
    """
    missing = [a for a in args if not Path(a).exists()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    files: list[str] = []
    for a in args:
        p = Path(a)
        if p.is_dir():
            found = directory_files(p)
            if not found:
                raise UsageError(f"{a}: directory holds no trace, summary or manifest file")
            files.extend(found)
        elif p.is_file():
            files.append(a)
        else:
            raise UsageError(f"{a}: not a regular file")
    return files
