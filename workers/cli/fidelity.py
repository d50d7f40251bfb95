"""``python -m workers fidelity DIR...``: how close the replay model is to real kernels.

Every capture directory under DIR (one holding a ``blkreview.toml``) is replayed with its
kernel's preset and scored against its own D events (see :mod:`workers.fidelity`). Prints a
kernel x workload table with the mean and the worst, the calibration set apart from the held-out
rest (``--calibration GLOB`` over ``kernel-dir/workload-dir`` names), and can write the table
to a Markdown file (docs/fidelity.md). Exit status: 0, or 2 on bad input; ``--min-mean`` and
``--min-worst`` make it exit 1 when the held-out captures score below them (for CI).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workers.errors import BlkreviewError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="DIR", help="capture directories, or "
                        "folders holding them (searched for blkreview.toml)")
    parser.add_argument("--mode", choices=("auto", "order", "distribution"), default="auto",
                        help="order: request by request (one submitting thread); "
                        "distribution: sizes, seeks, backward share (racing threads); "
                        "auto picks per capture")
    parser.add_argument("--calibration", action="append", default=[], metavar="GLOB",
                        help="captures the model was calibrated on (reported apart); repeat")
    parser.add_argument("--kernel", help="replay every capture with this kernel's preset "
                        "instead of its own (what would another kernel's model predict?)")
    parser.add_argument("--against", action="append", default=[], metavar="DIR",
                        help="other runs of the same captures (another lab --out): score "
                        "each capture against its namesake's D events there, i.e. predict a "
                        "run the replay has not seen; repeat")
    parser.add_argument("--real", action="store_true",
                        help="with --against: score the capture's own D events instead of the "
                        "replay (the kernel's run-to-run agreement)")
    parser.add_argument("--write", metavar="FILE", help="write the Markdown table here")
    parser.add_argument("--json", action="store_true", help="JSON on stdout instead of text")
    parser.add_argument("--min-mean", type=float, help="exit 1 if the held-out mean is below")
    parser.add_argument("--min-worst", type=float, help="exit 1 if the held-out worst is below")


def run(args: argparse.Namespace) -> int:
    from workers.cli.progress import current
    from workers.fidelity import markdown_table, score_all, summarize

    bar = current()
    bar.stage("replaying and scoring captures", total=None, unit="captures")
    try:
        scores = score_all(args.paths, mode=args.mode, calibration=args.calibration,
                           kernel=args.kernel, progress=bar.callback(), against=args.against,
                           real=args.real)
    except BlkreviewError as exc:
        print(f"fidelity: {exc}", file=sys.stderr)
        return 2
    if not scores:
        print("fidelity: no captures (directories with a blkreview.toml) found",
              file=sys.stderr)
        return 2
    table = markdown_table(scores)
    if args.json:
        held = summarize([s for s in scores if not s.calibration])
        json.dump({"captures": [s.to_json() for s in scores],
                   "held_out": {"count": held.count, "mean": held.mean, "worst": held.worst,
                                "worst_name": held.worst_name, "errors": held.errors}},
                  sys.stdout, indent=1)
        print()
    else:
        sys.stdout.write(table)
    if args.write:
        Path(args.write).write_text(table)
    held = summarize([s for s in scores if not s.calibration])
    if args.min_mean is not None and (held.mean is None or held.mean < args.min_mean):
        return 1
    if args.min_worst is not None and (held.worst is None or held.worst < args.min_worst):
        return 1
    return 0
