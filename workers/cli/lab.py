"""``python -m workers lab``: capture traces on real kernels in qemu (see docs/lab.md).

The common case, baseline vs patched on one stack and workload::

    python -m workers lab --baseline 6.17.13+deb13-amd64 --patched 6.18.15+deb13-amd64 \\
        --stack raid5:disks=8,chunk=64k --workload "dd bs=4480k count=200 iflag=direct"

One kernel (``--kernel``, or ``--kernel-image bzImage --modules DIR``), several workloads, or
the whole fidelity matrix (``--matrix workers/lab/matrix.toml --out DIR``): one boot per kernel
runs every case. ``--upload URL --token T`` posts baseline and patched as one comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from workers.cli.progress import Progress
from workers.lab.host import LabError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    k = parser.add_argument_group("kernels")
    k.add_argument("--kernel", action="append", default=[], metavar="VERSION",
                   help="Debian kernel: 6.1.0-57-amd64, 6.17.13+deb13-amd64, or 6.1 (newest "
                        "6.1); repeat for several")
    k.add_argument("--kernel-image", type=Path, metavar="BZIMAGE",
                   help="a local build: arch/x86/boot/bzImage")
    k.add_argument("--modules", type=Path, metavar="DIR",
                   help="its modules: lib/modules/<version> or the INSTALL_MOD_PATH root")
    k.add_argument("--baseline", metavar="VERSION", help="baseline Debian kernel")
    k.add_argument("--patched", metavar="VERSION", help="patched Debian kernel")
    k.add_argument("--baseline-image", type=Path, metavar="BZIMAGE")
    k.add_argument("--baseline-modules", type=Path, metavar="DIR")
    k.add_argument("--patched-image", type=Path, metavar="BZIMAGE")
    k.add_argument("--patched-modules", type=Path, metavar="DIR")
    k.add_argument("--list-kernels", action="store_true",
                   help="print the Debian kernel versions the archive offers and exit")
    w = parser.add_argument_group("what to run")
    w.add_argument("--stack", default="disk", help="e.g. raid5:disks=8,chunk=64k (default disk)")
    w.add_argument("--workload", action="append", default=[],
                   help='e.g. "dd bs=4480k count=200 iflag=direct"; repeat for several cases')
    w.add_argument("--set", action="append", default=[], dest="settings", metavar="SETTING",
                   help="queue setting [top|members|all|vdX:]attr=value, e.g. "
                        "max_sectors_kb=1024, members:scheduler=mq-deadline")
    w.add_argument("--disk", action="append", default=[], metavar="SPEC",
                   help="virtio disks: size=1G,rotational=0,queues=2,depth=256,lbs=512; "
                        "vdc:lbs=4096 (or 2:...) sets one disk; repeat")
    w.add_argument("--matrix", type=Path, metavar="FILE",
                   help="run a matrix file (kernels x cases), e.g. workers/lab/matrix.toml")
    w.add_argument("--only", action="append", default=[], metavar="REGEX",
                   help="with --matrix: only cases (or kernels) matching")
    w.add_argument("--export", type=Path, metavar="DEST",
                   help="with --matrix and --out: copy captured bundles (--kernel, --only "
                        "filter) to DEST/<split>/<kernel>/ as regression data; no VM runs")
    o = parser.add_argument_group("machine and output")
    o.add_argument("--out", type=Path, default=Path("lab-out"),
                   help="output directory (default ./lab-out)")
    o.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto")
    o.add_argument("--memory", type=int, default=4096, metavar="MB")
    o.add_argument("--cpus", type=int, default=2)
    o.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="limit for one boot (default 600 s + 300 s per case)")
    o.add_argument("--keep-scratch", action="store_true",
                   help="keep disk images and the share (in the cache's runs/)")
    o.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    u = parser.add_argument_group("upload")
    u.add_argument("--upload", metavar="URL", help="post baseline + patched as one comparison")
    u.add_argument("--token", default=os.environ.get("BLKREVIEW_TOKEN", ""),
                   help="API token (or $BLKREVIEW_TOKEN)")
    u.add_argument("--title", default="", help="the comparison's title")


class _Clock:
    """The lab's stages (package lists, downloads, guest root, boot, each case, upload).

    On a terminal: a progress bar of captures done/total (kernels x cases) whose text is the
    current stage, with each stage's timestamped line printed above it. Not a terminal (CI
    logs): the timestamped lines alone, as before. ``--quiet``: nothing but failures.
    """

    def __init__(self, bar: Progress | None = None, *, quiet: bool = False) -> None:
        self.t0 = time.monotonic()
        self.bar = bar
        self.quiet = quiet

    def line(self, text: str) -> str:
        return f"[{time.monotonic() - self.t0:6.0f}s] {text}"

    def __call__(self, text: str) -> None:
        if self.bar is not None and self.bar.enabled:
            self.bar.update(text.splitlines()[0] if text else text)
            self.bar.log(self.line(text))
        elif not self.quiet:
            sys.stderr.write(self.line(text) + "\n")
            sys.stderr.flush()

    def failed(self, text: str) -> None:
        """A failure is shown even with ``--quiet``."""
        if self.bar is not None and self.bar.enabled:
            self.bar.log(self.line(text))
        else:
            sys.stderr.write(self.line(text) + "\n")
            sys.stderr.flush()


def _case_name(stack: str, workload: str, i: int) -> str:
    base = re.sub(r"[^\w.+-]+", "_", f"{stack.split(':')[0]}_{workload.split()[0]}")
    return f"{base}_{i}".strip("_")


def run(args: argparse.Namespace) -> int:
    from workers.cli.progress import Progress, wanted

    quiet = bool(getattr(args, "quiet", False))
    try:
        with Progress(enabled=wanted(quiet), what="lab") as bar:
            return _run(args, _Clock(bar, quiet=quiet))
    except LabError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


def _run(args: argparse.Namespace, clock: _Clock) -> int:
    from workers.lab import kernels as K
    from workers.lab.qemu import parse_disk_args
    from workers.lab.runner import run_kernel
    from workers.lab.script import Case

    if args.list_kernels:
        apt = K.PrivateApt()
        apt.update()
        print("\n".join(K.available_versions(apt)))
        return 0
    if args.matrix:
        from workers.lab.matrix import export_subset, run_matrix

        if args.export:
            kept = export_subset(args.out, args.export, kernels=args.kernel or None,
                                 only=args.only or None)
            print(f"{len(kept)} bundle(s) exported to {args.export}")
            return 0 if kept else 1
        return run_matrix(args.matrix, args.out, only=args.only, accel=args.accel,
                          progress=clock, kernels=args.kernel or None, warn=clock.failed)
    disk, overrides = parse_disk_args(args.disk)
    workloads = args.workload or ["dd bs=1M count=64 iflag=direct"]
    cases = [Case.make(_case_name(args.stack, w, i), args.stack, w, args.settings)
             for i, w in enumerate(workloads, 1)]

    sides: list[tuple[str | None, tuple[Any, ...]]] = []
    comparing = bool(args.baseline or args.patched or args.baseline_image or args.patched_image)
    if comparing:
        for role in ("baseline", "patched"):
            img = getattr(args, f"{role}_image")
            ver = getattr(args, role)
            if img:
                sides.append((role, ("local", img, getattr(args, f"{role}_modules"))))
            elif ver:
                sides.append((role, ("debian", ver)))
            else:
                raise LabError(f"--{role} VERSION (or --{role}-image) is missing")
    else:
        if args.kernel_image:
            sides.append((None, ("local", args.kernel_image, args.modules)))
        for v in args.kernel:
            sides.append((None, ("debian", v)))
        if not sides:
            raise LabError("say which kernel: --kernel VERSION, --kernel-image BZIMAGE, or "
                           "--baseline/--patched (try --list-kernels)")
    if args.upload and not comparing:
        raise LabError("--upload needs --baseline and --patched")
    if args.upload and not args.token:
        raise LabError("--upload needs --token (or $BLKREVIEW_TOKEN)")

    results = []
    bundles: dict[str, list[Path]] = {}
    versions: dict[str, str] = {}
    failed = 0
    total = len(sides) * len(cases)
    done = 0
    if clock.bar is not None:
        clock.bar.stage("lab: starting", total=total, unit="captures")
    # every kernel is found (and checked bootable) before the first boots: a patched kernel
    # the archive cannot boot fails now, not after the baseline's run
    kernels = [K.local_kernel(how[1], how[2]) if how[0] == "local"
               else K.fetch_debian(how[1], progress=clock) for _side, how in sides]
    for (side, _how), kernel in zip(sides, kernels, strict=True):
        clock(f"kernel {kernel.version}: {kernel.source}")
        res = run_kernel(kernel, cases, args.out, disk=disk, disk_overrides=overrides,
                         accel=args.accel,
                         memory_mb=args.memory, cpus=args.cpus, role=side, progress=clock,
                         timeout=args.timeout, keep_scratch=args.keep_scratch)
        results.append(res)
        done += len(cases)
        if clock.bar is not None:
            clock.bar.advance(done)
        for c in res.cases:
            if c.ok:
                clock(f"{kernel.version} {c.name}: bundle {c.bundle}")
            else:
                failed += 1
                clock.failed(f"{kernel.version} {c.name}: FAILED: {c.reason}"
                             + (f"\n--- its output (last lines) ---\n{c.output}"
                                if c.output else ""))
        if side:
            bundles[side] = [c.bundle for c in res.cases if c.ok and c.bundle]
            versions[side] = kernel.version
    upload = None
    if args.upload and not failed:
        from workers.lab.upload import upload_comparison

        title = args.title or (f"lab: {args.stack} / {'; '.join(workloads)} "
                               f"({versions['baseline']} vs {versions['patched']})")
        upload = upload_comparison(args.upload, args.token, title=title,
                                   baseline=bundles["baseline"], patched=bundles["patched"],
                                   baseline_kernel=versions["baseline"],
                                   patched_kernel=versions["patched"],
                                   workload="; ".join(workloads), stack=args.stack)
        clock(f"uploaded: comparison {upload.get('id')} {upload.get('url', '')}")
    if args.json:
        print(json.dumps({"runs": [{"kernel": r.kernel, "accel": r.accel,
                                    "timings": r.timings,
                                    "cases": [c.to_json() for c in r.cases]} for r in results],
                          "upload": upload}, indent=1))
    if failed:
        return 1
    return 0
