"""``python -m workers replay``: predict what the disks see under a kernel preset and policy.

Two inputs (architecture.md "Command line"):

* ``--workload dd:bs=4480k,count=100 --stack raid5:disks=8,chunk=64k --kernel 6.1
  [--policy split_remainder=head]``: a synthetic workload on a described stack;
* ``--trace FILE... --manifest blkreview.toml [--kernel 6.18]``: the Q events of the manifest's
  top device, replayed on the manifest's stack.

It prints per-device seek histograms (seed 000 layout) and request-size histograms of the
predicted D stream; ``--emit blkparse|blktrace|json -o OUT`` writes the predicted events in a
format btt / iowatcher read (or a JSON summary), so a prediction can be diffed against a trace.
Exit status: 0 on success, 2 on bad input (typed engine errors, printed as one line).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path
from typing import Any, TextIO

from workers.cli.common import UsageError, bundle_files
from workers.errors import BlkreviewError, ModelConfigError, ParseError
from workers.events import EventTable, dev_str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("input")
    src.add_argument("--workload", help="dd:bs=4480k,count=100[,contig=all] or "
                     "fio:rw=randwrite,bs=1m,numjobs=4,size=1g")
    src.add_argument("--trace", nargs="+", metavar="FILE", help="trace files, a bundle "
                     "archive or a capture directory; their top-device Q events are replayed")
    src.add_argument("--manifest", help="blkreview.toml: stack, limits and kernel")
    parser.add_argument("--stack", help="raid5:disks=8,chunk=64k | raid0:... | disk:... "
                        "(with --workload; default: the manifest's stack)")
    parser.add_argument("--kernel", help="kernel version choosing the preset (6.1, "
                        "6.1.0-57-amd64, 6.18 ...); default: the manifest's kernel")
    parser.add_argument("--policy", default="", help="overrides, e.g. split_remainder=head,"
                        "plug_order=fifo")
    parser.add_argument("--device", help="service model for disks the manifest gives none: "
                        "hdd, sata_ssd, nvme, ufs (default: hdd if rotational, else nvme)")
    parser.add_argument("--seed", type=int, default=0, help="seed for random workloads")
    parser.add_argument("--emit", choices=("blkparse", "blktrace", "json"),
                        help="write the predicted events in this format")
    parser.add_argument("-o", "--output", help="output file for --emit (default stdout)")
    parser.add_argument("--quiet", action="store_true", help="no histograms on stdout and no "
                        "progress on stderr")
    parser.add_argument("--json", action="store_true", help="the per-device summary as JSON "
                        "on stdout (what --emit json writes)")
    parser.add_argument("--list-policies", action="store_true",
                        help="list every policy field: its values, what it does and which "
                             "kernel changed it (the --policy knobs), then exit")


def _load_manifest(path: str) -> dict[str, Any]:
    if Path(path).is_dir() and (Path(path) / "blkreview.toml").is_file():
        path = str(Path(path) / "blkreview.toml")  # a capture directory names its manifest
    try:
        return tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ParseError(path, f"cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ParseError(path, f"bad TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ParseError(path, "not UTF-8 text") from None


def predict(args: argparse.Namespace) -> tuple[EventTable, Any, Any]:
    """Run the replay the arguments describe; returns (table, stack, policy)."""
    from workers.model import (
        bios_from_table,
        bios_from_workload,
        kernel_version_warnings,
        preset_for_kernel,
        replay,
        stack_from_manifest,
        stack_from_spec,
    )

    manifest: dict[str, Any] | None = None
    if args.manifest:
        manifest = _load_manifest(args.manifest)
    table_in: EventTable | None = None
    if args.trace:
        from workers.cli.progress import parse_bundle

        # a capture directory or an archive is one bundle, as for inspect/analyze/compare
        paths = bundle_files(list(args.trace))
        ing = parse_bundle([Path(p) for p in paths], names=[str(p) for p in paths])
        table_in = ing.table
        if manifest is None and ing.manifest is not None:
            manifest = {k: getattr(ing.manifest, k) for k in ("kernel", "stack", "limits",
                                                             "devices", "workload")}
    if args.stack:
        stack = stack_from_spec(args.stack)
    elif manifest is not None:
        stack = stack_from_manifest(manifest, device=args.device)
    else:
        raise ModelConfigError("give --stack or a --manifest with a [stack] table")
    kernel = args.kernel or (manifest or {}).get("kernel")
    if not kernel:
        raise ModelConfigError("give --kernel (or a manifest with kernel = ...)")
    policy = preset_for_kernel(str(kernel)).with_overrides(args.policy)
    for warning in [*kernel_version_warnings(str(kernel)), *stack.notes]:
        print(f"replay: warning: {warning}", file=sys.stderr)
    if args.workload:
        bios = bios_from_workload(args.workload, seed=args.seed)
    elif table_in is not None:
        work = ((manifest or {}).get("workload") or {}).get("command")
        bios = bios_from_table(table_in, stack.top.dev, workload=work, stack=stack)
    else:
        raise ModelConfigError("give --workload or --trace")
    from workers.cli.progress import current

    bar = current()
    bar.stage(f"replaying on {stack.top.name}", total=len(bios.sector), unit="bios")
    table = replay(bios, stack, policy, seed=args.seed, progress=bar.callback())
    bar.stage("writing")
    return table, stack, policy


def summary(table: EventTable, stack: Any, policy: Any) -> dict[str, Any]:
    """Per-device seek and size statistics of the prediction (JSON-serializable)."""
    from workers.analyzers.common import stage_rows
    from workers.analyzers.seek import seek_histogram
    from workers.analyzers.sizes import size_stats

    devices: dict[str, Any] = {}
    for node in stack.nodes():
        stage = "D" if node.kind == "disk" else "Q"
        entry: dict[str, Any] = {"name": node.name, "kind": node.kind, "stage": stage}
        entry["seek"] = seek_histogram(table, node.dev, stage).to_json()
        entry["sizes"] = size_stats(table, stage_rows(table, node.dev, stage)).to_json()
        devices[dev_str(node.dev)] = entry
    return {"version": 1, "policy": policy.to_dict(), "stack": stack.describe(),
            "events": table.action_counts(), "devices": devices}


def print_histograms(table: EventTable, stack: Any, policy: Any, out: TextIO) -> None:
    from workers.analyzers.common import stage_rows
    from workers.analyzers.seek import seek_histogram
    from workers.analyzers.sizes import size_stats

    out.write(f"policy {policy.name}: {policy.to_spec()}\nstack: {stack.describe()}\n")
    for node in stack.disks():
        out.write(f"\n== {node.name} ({dev_str(node.dev)}) predicted D stage\n")
        out.write(seek_histogram(table, node.dev, "D").text())
        st = size_stats(table, stage_rows(table, node.dev, "D"))
        out.write(f"\nrequest sizes: {st.count} requests, mean {st.mean / 1024:.1f} KB\n")
        peak = max(st.counts) if st.counts else 0
        for i, c in enumerate(st.counts):
            if not c:
                continue
            lo, hi = st.edges_kb[i], st.edges_kb[i + 1] if i + 1 < len(st.edges_kb) else "inf"
            bar = "#" * max(1, round(40 * c / peak))
            out.write(f"  {lo:>6} .. {hi!s:<6} KB : {c:<8} {100 * c / st.count:5.1f}% {bar}\n")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "list_policies", False):
        from workers.model.catalog import text_listing

        sys.stdout.write(text_listing())
        return 0
    json_out = bool(getattr(args, "json", False))  # --json: the summary on stdout
    if json_out and args.emit and not args.output and args.emit != "json":
        print("error: --json and --emit to stdout both write stdout; give -o", file=sys.stderr)
        return 2
    try:
        table, stack, policy = predict(args)
        if not args.quiet and not json_out:
            target = sys.stderr if args.emit and not args.output else sys.stdout
            print_histograms(table, stack, policy, target)
        if args.emit:
            _emit(table, stack, policy, args.emit, args.output)
        if json_out and not (args.emit == "json" and not args.output):
            json.dump(summary(table, stack, policy), sys.stdout, indent=1)
            sys.stdout.write("\n")
    except (BlkreviewError, ParseError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise  # ``| head``: python -m workers stops quietly
    except OSError as exc:  # an unreadable output or input path: a user error, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


def _emit(table: EventTable, stack: Any, policy: Any, fmt: str, output: str | None) -> None:
    from workers.traces.writers import write_blkparse, write_blktrace

    if fmt == "blktrace":
        if output:
            with open(output, "wb") as fb:
                write_blktrace(table, fb)
        else:
            write_blktrace(table, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        return
    fh: TextIO = open(output, "w") if output else sys.stdout  # noqa: SIM115
    try:
        if fmt == "blkparse":
            write_blkparse(table, fh)
        else:
            json.dump(summary(table, stack, policy), fh, indent=1)
            fh.write("\n")
    finally:
        if output:
            fh.close()
