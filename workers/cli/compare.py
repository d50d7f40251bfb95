"""``python -m workers compare [options] BASELINE... -- PATCHED...``: the plain-text report.

Each BASELINE / PATCHED argument is one run: a trace file, an archive (a bundle) or a
directory whose files form one bundle. Several runs per side give mean, stddev and Welch's
test; one run per side says "single run". Options go before the runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from workers.compare import compare
from workers.errors import ParseError
from workers.report import render_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stage", choices=("Q", "G", "I", "D", "C"),
                        help="stage to analyze (default: D, else I, G, Q)")
    parser.add_argument("--device", action="append", metavar="MAJ,MIN",
                        help="restrict to a device (repeatable)")
    parser.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                        help="override a check threshold, e.g. throughput_drop_fail_pct=5")
    parser.add_argument("--title", help="first line of the report")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("runs", nargs=argparse.REMAINDER, metavar="BASELINE... -- PATCHED...")


def split_runs(runs: list[str]) -> tuple[list[str], list[str]]:
    """Split ``a b -- c d`` into the two sides (ValueError without exactly one ``--``)."""
    if runs.count("--") != 1:
        raise ValueError("give BASELINE... -- PATCHED... (one '--' between the sides)")
    i = runs.index("--")
    base, patched = runs[:i], runs[i + 1:]
    if not base or not patched:
        raise ValueError("each side needs at least one run")
    return base, patched


def _run_files(arg: str) -> list[str]:
    """Files of one run. A directory is one bundle: files of no known format (notes,
    command logs) are skipped with a warning, and when it holds raw blktrace files, the
    blkparse text rendered from them is skipped too (it is the same events twice)."""
    p = Path(arg)
    if not p.is_dir():
        return [arg]
    from workers.traces import detect_format

    found: list[tuple[str, str]] = []
    for f in sorted(x for x in p.rglob("*") if x.is_file() and x.stat().st_size > 0):
        try:
            found.append((str(f), detect_format(f, name=str(f))))
        except ParseError:
            sys.stderr.write(f"warning: {f}: not a trace, summary or manifest; skipped\n")
    has_binary = any(fmt == "blktrace" for _, fmt in found)
    return [f for f, fmt in found if not (has_binary and fmt == "blkparse")]


def run(args: argparse.Namespace) -> int:
    from workers.cli.analyze import load_and_analyze

    try:
        base, patched = split_runs(list(args.runs))
        overrides: dict[str, Any] = {}
        for item in args.threshold:
            name, _, value = item.partition("=")
            if not value:
                raise ValueError(f"bad --threshold {item!r}: use NAME=VALUE")
            overrides[name.strip()] = value.strip()
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    missing = [r for r in base + patched if not Path(r).exists()]
    if missing:
        sys.stderr.write(f"error: no such file: {', '.join(missing)}\n")
        return 2
    ns = argparse.Namespace(stage=args.stage, device=args.device)
    try:
        res_b = [load_and_analyze(_run_files(r), ns) for r in base]
        res_p = [load_and_analyze(_run_files(r), ns) for r in patched]
        cmp = compare(res_b, res_p, thresholds=overrides or None)
    except ParseError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return 1
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(cmp) + "\n")
    else:
        sys.stdout.write(render_report(cmp, title=args.title))
    return 0
