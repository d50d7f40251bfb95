"""``python -m workers inspect FILE...``: check traces before uploading them.

Prints, for the files taken together as one bundle (per-CPU files are merged, archives
unpacked), what the upload pipeline would see: each file's detected format and size, the
devices with their event counts per action, the time span, summary tables and warnings. Any
ParseError is printed with the file, line or byte offset and reason, and the exit code is 1.
The pipeline calls the same :func:`workers.traces.ingest`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from workers.cli.common import UsageError, bundle_files
from workers.cli.progress import parse_bundle
from workers.errors import ParseError
from workers.events import ACTION_LETTERS, EventTable, dev_str
from workers.traces import Ingest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="trace, summary, manifest or archive files, or a capture "
                             "directory (one bundle)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _span(table: EventTable) -> tuple[float, float]:
    if not len(table):
        return 0.0, 0.0
    return float(table.time_ns.min()) / 1e9, float(table.time_ns.max()) / 1e9


def _actions(table: EventTable, rows: Any = None) -> dict[str, int]:
    codes = table.action if rows is None else table.action[rows]
    values, counts = np.unique(codes, return_counts=True)
    return {ACTION_LETTERS.get(int(v), str(int(v))): int(c)
            for v, c in zip(values, counts, strict=True)}


def report(result: Ingest) -> dict[str, Any]:
    """The JSON-serialisable inspection report of an ingest result."""
    t = result.table
    first, last = _span(t)
    devices = []
    for dev in t.device_ids():
        rows = np.flatnonzero(t.dev == dev)
        stage, _ = t.stage(dev)
        info = t.devices.get(dev)
        devices.append({"dev": dev_str(dev), "name": t.device_name(dev) if info else "",
                        "events": int(len(rows)), "actions": _actions(t, rows),
                        "analysis_stage": stage,
                        "limits": dict(info.limits) if info else {}})
    return {
        "files": [f.to_json() for f in result.files],
        "events": len(t),
        "time_known": t.time_known,
        "span_s": [first, last] if t.time_known else None,
        "actions": _actions(t),
        "devices": devices,
        "summaries": {k: len(v) for k, v in result.summaries.items()},
        "manifest": result.manifest.to_json() if result.manifest else None,
        "warnings": result.warnings,
        "diagnostics": t.meta.get("diagnostics", []),
    }


def print_report(rep: dict[str, Any], out: TextIO) -> None:
    """Human-readable form of :func:`report`."""
    width = max((len(f["name"]) for f in rep["files"]), default=10)
    for f in rep["files"]:
        extra = f" error: {f['error']}" if f["error"] else ""
        count = f"  {f['events']} events/rows" if f["events"] else ""
        out.write(f"{f['name']:<{width}}  {f['format']:<11} {f['size']:>12,d} B{count}{extra}\n")
    out.write(f"\nevents: {rep['events']:,}")
    if not rep["events"]:
        out.write("   (summary tables only)\n" if rep["summaries"] else "\n")
    elif rep["time_known"]:
        first, last = rep["span_s"]
        out.write(f"   time span: {first:.9f} .. {last:.9f} s ({last - first:.6f} s)\n")
    else:
        out.write("   time unknown (lines without timestamps): file order kept\n")
    if rep["actions"]:
        out.write("actions: " + "  ".join(f"{k} {v:,}" for k, v in rep["actions"].items())
                  + "\n")
    if rep["devices"]:
        out.write("devices:\n")
        for d in rep["devices"]:
            name = f" ({d['name']})" if d["name"] and d["name"] != d["dev"] else ""
            acts = "  ".join(f"{k} {v:,}" for k, v in d["actions"].items())
            stage = f", analyzed at {d['analysis_stage']}" if d["analysis_stage"] else ""
            out.write(f"  {d['dev']}{name}: {d['events']:,} events{stage}\n")
            if acts:
                out.write(f"    {acts}\n")
            if d["limits"]:
                keys = ("max_sectors_kb", "nr_requests", "scheduler", "rotational")
                lim = ", ".join(f"{k}={d['limits'][k]}" for k in keys if k in d["limits"])
                if lim:
                    out.write(f"    limits: {lim}\n")
    for kind, n in rep["summaries"].items():
        out.write(f"summary {kind}: {n} rows\n")
    m = rep["manifest"]
    if m:
        out.write(f"manifest: kernel={m['kernel'] or '-'} role={m['role'] or '-'} "
                  f"stack={m['stack'].get('kind', '-')}\n")
    for w in rep["warnings"]:
        out.write(f"warning: {w}\n")


def run(args: argparse.Namespace) -> int:
    try:
        paths = [Path(f) for f in bundle_files(args.files)]
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    try:
        result = parse_bundle(paths, names=[str(p) for p in paths])
    except ParseError as exc:
        if args.json:
            sys.stdout.write(json.dumps({"error": exc.to_json()}, indent=2) + "\n")
        else:
            sys.stderr.write(f"error: {exc.message}\n")
        return 1
    rep = report(result)
    if args.json:
        sys.stdout.write(json.dumps(rep, indent=2, default=str) + "\n")
    else:
        print_report(rep, sys.stdout)
    return 0
