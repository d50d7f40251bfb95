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
    """Files of a capture directory taken as one bundle
    (:func:`workers.traces.directory.directory_files`); the skips go to stderr unless a
    ``warnings`` list takes them."""
    from workers.traces.directory import directory_files as files_of

    skipped: list[str] = []
    out = files_of(directory, skipped if warnings is None else warnings)
    for msg in skipped:
        sys.stderr.write(f"warning: {msg}\n")
    return out


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
