"""The files of a capture directory taken as one bundle.

A capture directory (what the lab or a maintainer's script leaves behind) holds per-CPU
blktrace files, the blkparse text rendered from them, manifests, sysfs dumps and notes.
Shared by the command line (``inspect DIR``, ``analyze DIR``, ``compare DIR -- DIR2``) and
:mod:`workers.fidelity`, so every reader takes the same files.
"""

from __future__ import annotations

from pathlib import Path

from workers.errors import ParseError


def directory_files(directory: Path, warnings: list[str]) -> list[str]:
    """Trace, summary and manifest files under ``directory``, sorted.

    Files of no known format (notes, command logs) are skipped, each with a sentence appended
    to ``warnings``; when the directory holds raw blktrace files the blkparse text rendered
    from them is skipped too (it is the same events twice), also with a sentence.
    """
    from workers.traces.detect import detect_format

    found: list[tuple[str, str]] = []
    for f in sorted(x for x in directory.rglob("*") if x.is_file() and x.stat().st_size > 0):
        try:
            found.append((str(f), detect_format(f, name=str(f))))
        except ParseError:
            warnings.append(f"{f}: not a trace, summary or manifest; skipped")
    has_binary = any(fmt == "blktrace" for _, fmt in found)
    if has_binary:
        warnings.extend(f"{f}: blkparse text beside the raw blktrace files, the same events "
                        "twice; skipped (the binary files are read)"
                        for f, fmt in found if fmt == "blkparse")
    return [f for f, fmt in found if not (has_binary and fmt == "blkparse")]
