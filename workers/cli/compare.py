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

from workers.analyzers.common import SELECTABLE_STAGES
from workers.cli.common import device_arg, guarded
from workers.compare import Thresholds, compare
from workers.report import render_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stage", choices=SELECTABLE_STAGES,
                        help="stage to analyze (default: D, else I, G, Q)")
    parser.add_argument("--device", action="append", metavar="MAJ,MIN", type=device_arg,
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
        Thresholds().with_overrides(overrides)  # unknown names and bad values before parsing
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    missing = [r for r in base + patched if not Path(r).exists()]
    if missing:  # before minutes of parsing the other runs
        sys.stderr.write(f"error: no such file: {', '.join(missing)}\n")
        return 2
    ns = argparse.Namespace(stage=args.stage, device=args.device)

    def body() -> int:
        # each argument is one run: a file, an archive, or a directory (one bundle)
        res_b = [load_and_analyze([r], ns) for r in base]
        res_p = [load_and_analyze([r], ns) for r in patched]
        cmp = compare(res_b, res_p, thresholds=overrides or None)
        if args.json:
            sys.stdout.write(json.dumps(cmp) + "\n")
        else:
            sys.stdout.write(render_report(cmp, title=args.title))
        return 0

    return guarded(body)
