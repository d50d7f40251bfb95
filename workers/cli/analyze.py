"""``python -m workers analyze FILE... [--seek] [--device 8,0] [--stage D] [--json]``.

The files are read together as one bundle (per-CPU files merged, archives unpacked) with
:func:`workers.traces.ingest`, then analyzed. ``--seek`` prints, per device, exactly seed 000's
seek histogram block (``Read|Write seek`` to the last non-empty bucket) after a one-line
device header; without it the request sizes, fragmentation and the iostat-like table follow.
``--json`` prints the full results dict that the web stores.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workers.analyzers import AnalyzeConfig, analyze
from workers.analyzers.common import SELECTABLE_STAGES
from workers.analyzers.seek import SeekHistogram
from workers.cli.common import UsageError, bundle_files, device_arg, guarded
from workers.events import dev_str
from workers.report import iostat_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="trace files of one run (per-CPU files, archives, manifest, or "
                             "the capture directory)")
    parser.add_argument("--seek", action="store_true",
                        help="only the seed-000 seek histogram per device")
    parser.add_argument("--device", action="append", metavar="MAJ,MIN", type=device_arg,
                        help="restrict to a device (repeatable), e.g. 8,0")
    parser.add_argument("--stage", choices=SELECTABLE_STAGES,
                        help="stage to analyze (default: D, else I, G, Q)")
    parser.add_argument("--json", action="store_true", help="print the results dict as JSON")


def config_from_args(args: argparse.Namespace, manifest: Any = None) -> AnalyzeConfig:
    """AnalyzeConfig from the command line, with the md chunk from a manifest if given."""
    chunk = None
    stack = getattr(manifest, "stack", None) or {}
    if isinstance(stack, Mapping) and stack.get("chunk_kb"):
        try:
            chunk = int(float(stack["chunk_kb"]) * 2)
        except (TypeError, ValueError):
            chunk = None
    return AnalyzeConfig(stage=args.stage, devices=tuple(args.device) if args.device else None,
                         chunk_sectors=chunk)


def load_and_analyze(files: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Ingest files (directories expanded) as one bundle and analyze them.

    Raises:
        ParseError: bad input (with file, line/offset and reason).
        UsageError: a file is missing, or a ``--device`` is not in the trace.
    """
    return load_run(files, args)[0]


def load_run(files: list[str], args: argparse.Namespace) -> tuple[dict[str, Any], Any]:
    """:func:`load_and_analyze` plus the bundle's manifest (None without a blkreview.toml)."""
    from workers.cli.progress import parse_bundle

    paths = [Path(f) for f in bundle_files(files)]
    ing = parse_bundle(paths, names=[str(p) for p in paths])
    res = analyze(ing.table, config=config_from_args(args, ing.manifest),
                  summaries=ing.summaries)
    wanted = getattr(args, "device", None)
    if wanted:
        absent = [d for d in wanted if d not in res["devices"]]
        if absent:
            have = ", ".join(dev_str(d) for d in ing.table.device_ids()) or "none"
            raise UsageError(f"device {', '.join(absent)} not in the trace (devices: {have})")
    return res, ing.manifest


def _device_header(dev: str, d: Mapping[str, Any]) -> str:
    name = d.get("name", dev)
    label = f"{dev} ({name})" if name and name != dev else dev
    return f"{label}: {d.get('stage_note', '')}"


def print_text(res: Mapping[str, Any], seek_only: bool, out: Any) -> None:
    for dev, d in res["devices"].items():
        out.write(_device_header(dev, d) + "\n")
        out.write(SeekHistogram.from_json(d["seek"]).text())
        if seek_only:
            out.write("\n")
            continue
        s = d["sizes"]
        if s["count"]:
            pct = ", ".join(f"{k} {v / 1024:g}K" for k, v in s["percentiles_bytes"].items())
            out.write(f"sizes: {s['count']} requests, mean {s['mean_bytes'] / 1024:.1f}K, "
                      f"{pct}, max {s['max_bytes'] / 1024:g}K\n")
            top = ", ".join(f"{n / 2:g}K x{c}" for n, c in
                            zip(s["exact"]["sectors"][:8], s["exact"]["counts"][:8]))
            out.write(f"  most frequent: {top}\n")
        f = d["fragmentation"]
        if f["requests"]:
            pieces = (f"{f['pieces_per_bio']:.2f} pieces/bio ({f['splits_source']})"
                      if f["splits_source"] else "pieces/bio unknown (no Q events)")
            out.write(f"fragmentation: {100 * f['below_max_share']:.1f}% below max_sectors "
                      f"{f['max_sectors']} ({f['max_sectors_source']}), "
                      f"{f['sandwiched']} sandwiched, {pieces}\n")
        o = d["ordering"]
        if o["requests"] > 1:
            out.write(f"ordering: {o['backward']} backward dispatches "
                      f"({100 * o['backward_share']:.1f}%)\n")
        out.write("\n")
    if not res["devices"]:
        kinds = ", ".join(f"{k} ({len(v)} rows)" for k, v in res.get("summaries", {}).items())
        out.write("no trace events to analyze" + (f"; summaries: {kinds}" if kinds else "")
                  + "\n")
    if not seek_only and res["devices"]:
        names = {k: v["name"] for k, v in res["devices"].items()}
        out.write("iostat-like (computed from the trace):\n")
        out.write(iostat_table(res["iostat"], names) + "\n")


def run(args: argparse.Namespace) -> int:
    def body() -> int:
        res = load_and_analyze(args.files, args)
        if args.json:
            sys.stdout.write(json.dumps(res) + "\n")
        else:
            print_text(res, args.seek, sys.stdout)
        return 0

    return guarded(body)
