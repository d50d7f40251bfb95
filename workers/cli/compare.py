"""``python -m workers compare [options] BASELINE... -- PATCHED...``: the plain-text report.

Each BASELINE / PATCHED argument is one run: a trace file, an archive (a bundle) or a
directory whose files form one bundle. Several runs per side give mean, stddev and Welch's
test; one run per side says "single run". Options go before the runs.

The report's header (kernels, workload, stack) comes from the runs' blkreview.toml manifests
unless ``--baseline-kernel`` / ``--patched-kernel`` / ``--workload`` / ``--stack`` say otherwise;
the title is ``--title`` or "<baseline kernel> vs <patched kernel>: <workload>".

Exit status, so that CI can act on it (docs/traces.md "compare"):

====  ===============================================================
0     check success (timing that needs more runs or is not judged never warns)
1     check warning (a rule at warning level, a significant timing regression)
2     check fail (a rule at fail level, a significant timing regression past its limit)
3     usage or input error (bad option, missing file, unreadable trace)
====  ===============================================================
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from workers.analyzers.common import SELECTABLE_STAGES
from workers.cli.common import UsageError, device_arg
from workers.compare import Thresholds, compare
from workers.errors import BlkreviewError, ParseError
from workers.report import ReportHeader, render_report, title_from
from workers.summary import with_summary

#: Exit status per check verdict; usage and input errors exit :data:`EXIT_USAGE`.
EXIT_CODES = {"success": 0, "warning": 1, "fail": 2}
EXIT_USAGE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    def usage_error(message: str) -> NoReturn:
        # argparse exits 2, which is "check fails" here: a usage error exits 3
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"{parser.prog}: error: {message}\n")
        sys.exit(EXIT_USAGE)

    parser.error = usage_error  # type: ignore[method-assign]
    parser.add_argument("--stage", choices=SELECTABLE_STAGES,
                        help="stage to analyze (default: D, else I, G, Q)")
    parser.add_argument("--device", action="append", metavar="MAJ,MIN", type=device_arg,
                        help="restrict to a device (repeatable)")
    parser.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                        help="override a check threshold, e.g. throughput_drop_fail_pct=5")
    parser.add_argument("--title", help="the patch's subject, first line of the report; the "
                        "sides are then 'Before/After this patch' (default: the kernels and "
                        "the workload of the manifests, sides named by their kernels)")
    parser.add_argument("--baseline-kernel", help="default: the baseline manifest's kernel")
    parser.add_argument("--patched-kernel", help="default: the patched manifest's kernel")
    parser.add_argument("--workload", help="default: the baseline manifest's workload command")
    parser.add_argument("--stack", help="default: the baseline manifest's stack")
    parser.add_argument("--url", help="the comparison's page, printed under the title")
    parser.add_argument("--message-id", help="the patch mail's Message-ID: the sides are "
                        "then 'Before/After this patch'")
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


def stack_text(stack: dict[str, Any]) -> str:
    """``raid5, 8 members, 512 KB chunk`` from a manifest's [stack] table."""
    if not stack:
        return ""
    parts = [str(stack.get("kind") or "stack")]
    if stack.get("members"):
        parts.append(f"{len(stack['members'])} members")
    if stack.get("chunk_kb"):
        parts.append(f"{stack['chunk_kb']} KB chunk")
    return ", ".join(parts)


def header_from(args: argparse.Namespace, base_manifest: Any, patched_manifest: Any
                ) -> ReportHeader:
    """The report header: the options first, then the manifests."""
    bk = args.baseline_kernel or getattr(base_manifest, "kernel", None) or ""
    pk = args.patched_kernel or getattr(patched_manifest, "kernel", None) or ""
    work = args.workload or str((getattr(base_manifest, "workload", None) or {})
                                .get("command") or "")
    stack = args.stack or stack_text(getattr(base_manifest, "stack", None) or {})
    return ReportHeader(title=args.title or title_from(bk, pk, work), url=args.url or "",
                        baseline_kernel=bk, patched_kernel=pk, workload=work, stack=stack,
                        message_id=args.message_id or "",
                        has_patch=bool(args.message_id or args.title))


def environment_of(base: tuple[dict[str, Any], Any], patched: tuple[dict[str, Any], Any],
                   args: argparse.Namespace) -> dict[str, Any]:
    """The environment consistency gate of the two sides' first runs, as the web computes it:
    fingerprints from the manifests (``--baseline-kernel`` etc. when a manifest is silent) and
    the fields the two kernels' presets set differently as what the patch may change."""
    from dataclasses import asdict

    from workers.analyzers.environment import consistency, fingerprint
    from workers.model.presets import preset_difference

    fps = []
    for (res, manifest), kernel in ((base, args.baseline_kernel),
                                    (patched, args.patched_kernel)):
        m = asdict(manifest) if manifest is not None else None
        if m is not None and kernel:
            m["kernel"] = kernel
        fps.append(fingerprint(m, kernel=kernel or "", workload=args.workload or "",
                               results=res))
    fields = [kv.split("=", 1)[0] for kv in preset_difference(fps[0]["kernel"],
                                                              fps[1]["kernel"])]
    out = consistency(fps[0], fps[1], policy_fields=fields)
    out["sides"] = {"baseline": fps[0], "patched": fps[1]}
    return out


def run(args: argparse.Namespace) -> int:
    from workers.cli.analyze import load_run

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
        return EXIT_USAGE
    missing = [r for r in base + patched if not Path(r).exists()]
    if missing:  # before minutes of parsing the other runs
        sys.stderr.write(f"error: no such file: {', '.join(missing)}\n")
        return EXIT_USAGE
    ns = argparse.Namespace(stage=args.stage, device=args.device)
    try:
        # each argument is one run: a file, an archive, or a directory (one bundle)
        loaded_b = [load_run([r], ns) for r in base]
        loaded_p = [load_run([r], ns) for r in patched]
        env = environment_of(loaded_b[0], loaded_p[0], args)
        cmp = with_summary(compare([r for r, _ in loaded_b], [r for r, _ in loaded_p],
                                   thresholds=overrides or None, environment=env))
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    except ParseError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return EXIT_USAGE
    except BlkreviewError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json.dumps(cmp) + "\n")
    else:
        header = header_from(args, loaded_b[0][1], loaded_p[0][1])
        sys.stdout.write(render_report(cmp, header=header))
    return EXIT_CODES.get(str((cmp.get("check") or {}).get("verdict")), 0)
