"""One kernel, many cases: fetch the kernel, build the initramfs, boot once, write the bundles.

Output layout (``out`` given by the caller)::

    out/<uname -r>/<case>/            files of the case (traces, records, logs, blkreview.toml)
    out/<uname -r>/<case>.tar.zst     what uploads as is
    out/<uname -r>/console.log        the guest's console
    out/<uname -r>/run.sh             the guest script that ran
    out/<uname -r>/results.json       per case: ok/failed, reason, bundle path, timings

Scratch files (disk images, the share, the initramfs) live in the cache's ``runs/`` and are
removed afterwards.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.lab.bundle import build_manifest, write_bundle
from workers.lab.guestroot import guest_root
from workers.lab.host import LabError, cache_dir
from workers.lab.initramfs import build_initramfs
from workers.lab.kernels import Kernel
from workers.lab.qemu import (
    BootPanic,
    BootTimeout,
    DiskSpec,
    GuestStopped,
    boot,
    choose_accel,
    kvm_known,
    make_disks,
    qemu_command,
)
from workers.lab.script import Case, disks_needed, guest_script
from workers.lab.vmlock import one_vm_at_a_time

Progress = Callable[[str], None]


@dataclass
class CaseResult:
    name: str
    ok: bool
    reason: str = ""
    bundle: Path | None = None
    directory: Path | None = None
    output: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "reason": self.reason,
                "bundle": str(self.bundle) if self.bundle else None,
                "directory": str(self.directory) if self.directory else None}


@dataclass
class RunResult:
    kernel: str
    accel: str
    cases: list[CaseResult] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


def _tail(path: Path, n: int = 25) -> str:
    if not path.exists():
        return ""
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-n:])


def run_kernel(kernel: Kernel, cases: list[Case], out: Path, *, disk: DiskSpec | None = None,
               accel: str = "auto", memory_mb: int = 4096, cpus: int = 2,
               role: str | None = None, progress: Progress | None = None,
               boot_timeout: float = 420.0, timeout: float | None = None,
               keep_scratch: bool = False, label: str = "",
               disk_overrides: dict[int, DiskSpec] | None = None) -> RunResult:
    """Boot ``kernel`` once and run every case; one bundle per case that got to tracing.

    ``label`` names this boot's console log, script and results (``console.<label>.log``)
    when one kernel boots several times into the same ``out`` (matrix groups).

    Raises:
        LabError: no accelerator, the guest root or initramfs could not be built, or the guest
            did not boot. A guest that stops before its last case still yields the bundles
            of the cases it finished; the others are failed with the console's tail.
    """
    disk = disk or DiskSpec()
    if not cases:
        raise LabError("no cases to run")
    tag = kernel.version
    say: Progress = progress or (lambda _t: None)

    def note(text: str) -> None:
        say(f"[{tag}] {text}")

    timings: dict[str, float] = {}
    t0 = time.monotonic()
    order = choose_accel(accel)
    root = guest_root(progress=note)
    timings["guest_root_s"] = time.monotonic() - t0
    kdir = out / kernel.version
    kdir.mkdir(parents=True, exist_ok=True)
    scratch = cache_dir() / "runs" / f"{int(time.time())}-{os.getpid()}"
    share = scratch / "share"
    share.mkdir(parents=True)
    try:
        t1 = time.monotonic()
        initrd = build_initramfs(root, kernel, scratch / "initrd.cpio")
        timings["initramfs_s"] = time.monotonic() - t1
        ndisks = disks_needed(cases)
        over = disk_overrides or {}
        script = guest_script(cases, disks=ndisks, rotational=disk.rotational,
                              rotational_per_disk={i: d.rotational for i, d in over.items()})
        (share / "run.sh").write_text(script)
        sfx = f".{label}" if label else ""
        (kdir / f"run{sfx}.sh").write_text(script)
        jobs = [c.workload.job_file for c in cases if c.workload.job_file]
        if jobs:
            (share / "jobs").mkdir()
            for j in jobs:
                assert j is not None
                shutil.copy2(j, share / "jobs" / j.name)
        disks = make_disks(scratch / "disks", ndisks, disk, over)
        limit = timeout or (600.0 + 300.0 * len(cases))
        result = None
        unfinished = ""
        for i, acc in enumerate(order):
            cmd = qemu_command(image=kernel.image, initrd=initrd, disks=disks, disk=disk,
                               share=share, accel=acc, memory_mb=memory_mb, cpus=cpus,
                               overrides=over)
            (kdir / f"qemu{sfx}.cmd").write_text(" ".join(cmd) + "\n")
            note(f"booting under {acc.upper()} with {ndisks} disk(s), {len(cases)} case(s)")
            try:
                for attempt in (1, 2):
                    try:
                        with one_vm_at_a_time(note):
                            result = boot(cmd, log=kdir / f"console{sfx}.log", progress=note,
                                          boot_timeout=90.0 if acc == "kvm" and len(order) > 1
                                          else boot_timeout, timeout=limit)
                        break
                    except BootPanic as exc:
                        # a panic before /init: no case ran, booting again is safe (once)
                        if attempt == 2:
                            raise
                        shutil.copy2(kdir / f"console{sfx}.log",
                                     kdir / f"console{sfx}.panic.log")
                        note(f"{str(exc).splitlines()[0]}; booting again "
                             f"(first console kept as console{sfx}.panic.log)")
                        shutil.rmtree(share / "cases", ignore_errors=True)
            except GuestStopped as exc:
                note(f"the guest stopped early: {exc}")
                result = exc.result
                unfinished = str(exc)
            except BootTimeout:
                if acc == "kvm" and i + 1 < len(order):
                    note("KVM boot hung (nested hypervisor?); falling back to TCG")
                    kvm_known(False)
                    shutil.rmtree(share / "cases", ignore_errors=True)
                    continue
                raise
            if acc == "kvm":
                kvm_known(True)
            break
        assert result is not None
        done = {m.split()[1] for m in result.markers
                if m.startswith("case ") and " done rc=" in m}
        timings["boot_s"] = result.boot_seconds
        timings["vm_total_s"] = result.seconds
        run = RunResult(kernel.version, result.accel, timings=timings)
        shutil.copy2(share / "uname.txt", kdir / "uname.txt") if (
            share / "uname.txt").exists() else None
        if (share / "run.log").exists():
            shutil.copy2(share / "run.log", kdir / f"run{sfx}.log")
        for case in cases:
            if unfinished and case.name not in done:
                run.cases.append(CaseResult(case.name, False, "the guest stopped before this "
                                            f"case finished: {unfinished[:1500]}"))
                continue
            run.cases.append(_collect(case, share, kdir, kernel, result.accel, disk, role,
                                      over))
        (kdir / f"results{sfx}.json").write_text(json.dumps(
            {"kernel": kernel.version, "source": kernel.source, "accel": result.accel,
             "timings": timings, "cases": [c.to_json() for c in run.cases]}, indent=1))
        timings["total_s"] = time.monotonic() - t0
        return run
    finally:
        if not keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _collect(case: Case, share: Path, kdir: Path, kernel: Kernel, accel: str,
             disk: DiskSpec, role: str | None,
             overrides: dict[int, DiskSpec] | None = None) -> CaseResult:
    cdir = share / "cases" / case.name
    if not cdir.exists():
        return CaseResult(case.name, False, "the guest never started this case")
    failed = (cdir / "failed").read_text().strip() if (cdir / "failed").exists() else ""
    output = _tail(cdir / "output.txt")
    if not (cdir / "devices.txt").exists():
        dest = kdir / case.name
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(cdir, dest)
        return CaseResult(case.name, False, failed or "stack not built", None, dest, output)
    st, wl = case.stack, case.workload
    top_path = st.top.replace("$D0", "/dev/vda")
    workload: dict[str, object] = {"command": wl.shown(top_path), "spec": wl.spec,
                                   "kind": wl.kind, "case": case.name}
    moved = _dd_bytes(cdir / "output.txt") if wl.kind == "dd" else None
    if moved is not None:
        workload["bytes"] = moved  # what dd reported (less than bs*count on a small device)
    lab = {"accel": accel, "kernel_source": kernel.source, "disk": disk.to_json(),
           "disk_overrides": {f"vd{chr(97 + i)}": d.to_json()
                              for i, d in sorted((overrides or {}).items())},
           "stack_spec": st.spec, "settings": [s.text for s in case.settings],
           "notes": st.notes}
    manifest = build_manifest(cdir, stack_fields=st.manifest, workload=workload, lab=lab,
                              role=role)
    if not manifest["kernel"]:
        manifest["kernel"] = kernel.version
    archive = write_bundle(cdir, kdir, manifest)
    top_name = next((ln.split()[1] for ln in (cdir / "devices.txt").read_text().splitlines()
                     if ln.startswith("top ")), "")
    traced = sum(f.stat().st_size for f in cdir.glob(f"{top_name}.blktrace.*"))
    if not failed and traced < 1024:
        failed = (f"the trace of {top_name} is (nearly) empty ({traced} bytes): blktrace "
                  "did not record the workload")
    if not failed:
        failed = _dd_check(case, kdir / case.name, manifest["stack"]["top"])
    return CaseResult(case.name, not failed, failed, archive, kdir / case.name, output)


def _dd_bytes(output: Path) -> int | None:
    """The byte count of dd's last ``N bytes (...) copied`` line, if any."""
    text = output.read_text(errors="replace") if output.exists() else ""
    moved = re.findall(r"^(\d+) bytes .*copied", text, re.M)
    return int(moved[-1]) if moved else None


def _dd_check(case: Case, bundle_dir: Path, top: str) -> str:
    """A dd on the top device must show all its bytes as Q events there: else the trace
    started late or lost events. Returns the reason, or "" when complete (or not a dd)."""
    wl = case.workload
    if wl.kind != "dd" or wl.on_fs or case.stack.kind in ("partition", "loop"):
        return ""
    # what dd itself says it moved (a device smaller than bs*count ends it early)
    moved = _dd_bytes(bundle_dir / "output.txt")
    if moved is None:
        return ""
    from workers.events import ACT_QUEUE, parse_dev
    from workers.traces import ingest
    from workers.traces.directory import directory_files

    want = moved // 512
    table = ingest(directory_files(bundle_dir, [])).table
    q = (table.dev == parse_dev(top)) & (table.action == ACT_QUEUE)
    got = int(table.nr_sectors[q].sum())
    if got != want:
        return (f"the trace is incomplete: Q events on {top} cover {got} sectors, dd moved "
                f"{want} (blktrace started late or dropped events)")
    return ""
