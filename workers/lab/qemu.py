"""qemu: the virtio disks, the command line, the accelerator, and one boot watched to the end.

KVM is used when ``/dev/kvm`` opens *and* a guest actually boots with it: on nested
hypervisors a stock kernel can hang right after "Probing EDD", so the first KVM boot on a machine
is watched and, when no ``@@lab init`` line arrives in time, killed and retried under TCG (the
outcome is remembered in the cache). TCG is ``-accel tcg,thread=multi -cpu max``: the kernel's
split, plug, merge and dispatch decisions are real; its timestamps are not.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workers.lab.host import LabError, cache_dir, need_tool
from workers.lab.stacks import parse_params, parse_size

QEMU = "qemu-system-x86_64"
MARK = "@@lab "
#: the console line of a kernel panic (``panic()``: "Kernel panic - not syncing: ...")
PANIC = "Kernel panic - not syncing"


@dataclass(frozen=True)
class DiskSpec:
    """Every virtio-blk disk of a boot: size, rotational flag, hardware queues, queue depth,
    logical/physical block size. ``rotational=None`` keeps what the kernel reports."""

    size_mb: int = 1024
    rotational: int | None = None
    queues: int = 2
    depth: int = 256
    lbs: int = 512
    pbs: int = 0

    def qemu_props(self) -> str:
        pbs = self.pbs or self.lbs
        return (f"num-queues={self.queues},queue-size={self.depth},"
                f"logical_block_size={self.lbs},physical_block_size={pbs}")

    def to_json(self) -> dict[str, int | None]:
        return {"size_mb": self.size_mb, "rotational": self.rotational, "queues": self.queues,
                "depth": self.depth, "lbs": self.lbs, "pbs": self.pbs or self.lbs}


def parse_disk_spec(text: str) -> DiskSpec:
    """``size=1G,rotational=0,queues=2,depth=128,lbs=4096`` (any subset).

    Raises:
        LabError: unknown key or a value qemu would refuse.
    """
    p = parse_params(text)
    unknown = set(p) - {"size", "rotational", "queues", "depth", "lbs", "pbs"}
    if unknown:
        raise LabError(f"--disk: unknown key(s) {', '.join(sorted(unknown))} "
                       "(size, rotational, queues, depth, lbs, pbs)")
    try:
        spec = DiskSpec(
            size_mb=parse_size(p.get("size", "1G"), unit=1 << 20) >> 20,
            rotational=int(p["rotational"]) if "rotational" in p else None,
            queues=int(p.get("queues", 2)), depth=int(p.get("depth", 256)),
            lbs=parse_size(p.get("lbs", "512")), pbs=parse_size(p.get("pbs", "0")))
    except ValueError as exc:
        raise LabError(f"--disk {text!r}: {exc}") from None
    if spec.rotational not in (None, 0, 1):
        raise LabError("--disk rotational must be 0 or 1")
    if spec.lbs not in (512, 1024, 2048, 4096) or (spec.pbs and spec.pbs < spec.lbs):
        raise LabError("--disk lbs must be 512, 1024, 2048 or 4096 (pbs >= lbs)")
    if not 1 <= spec.queues <= 64 or spec.depth not in (64, 128, 256, 512, 1024):
        raise LabError("--disk queues 1..64 and depth 64/128/256/512/1024 (virtqueue size)")
    if spec.size_mb < 64:
        raise LabError("--disk size must be at least 64M")
    return spec


def parse_disk_args(args: list[str]) -> tuple[DiskSpec, dict[int, DiskSpec]]:
    """``--disk`` values: one without a prefix sets every disk; ``vdc:lbs=4096`` (or
    ``2:lbs=4096``) overrides one disk, starting from the default.

    Raises:
        LabError: a bad spec or disk name.
    """
    default_text = ""
    per: dict[int, str] = {}
    for a in args:
        head, sep, rest = a.partition(":")
        if sep and "=" not in head:
            if re.fullmatch(r"vd[a-p]", head):
                idx = ord(head[2]) - ord("a")
            elif head.isdigit() and int(head) < 16:
                idx = int(head)
            else:
                raise LabError(f"--disk {a!r}: name a disk as vda..vdp or 0..15")
            per[idx] = ",".join(x for x in (per.get(idx, ""), rest) if x)
        else:
            default_text = ",".join(x for x in (default_text, a) if x)
    default = parse_disk_spec(default_text) if default_text else DiskSpec()
    return default, {i: parse_disk_spec(",".join(x for x in (default_text, t) if x))
                     for i, t in per.items()}


def accel_support() -> tuple[bool, bool]:
    """(KVM usable: /dev/kvm opens read-write, TCG compiled into qemu)."""
    kvm = False
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
        os.close(fd)
        kvm = True
    except OSError:
        pass
    try:
        out = subprocess.run([QEMU, "-accel", "help"], capture_output=True, text=True,
                             timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return kvm, "tcg" in out.split()


def _probe_file() -> Path:
    return cache_dir() / "accel.json"


def _host_key() -> str:
    return f"{os.uname().release} {os.uname().machine}"


def kvm_known(state: bool | None = None) -> bool | None:
    """Whether a KVM boot worked on this host before (``state`` given: remember it)."""
    path = _probe_file()
    data: dict[str, bool] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            data = {}
    if state is not None:
        data[_host_key()] = state
        path.write_text(json.dumps(data))
    return data.get(_host_key())


def choose_accel(requested: str) -> list[str]:
    """Accelerators to try in order (``auto``: KVM when it can work, then TCG).

    Raises:
        LabError: neither KVM nor TCG is available, or the requested one is not.
    """
    need_tool(QEMU, "qemu-system-x86")
    kvm, tcg = accel_support()
    if requested == "kvm":
        if not kvm:
            raise LabError("--accel kvm: /dev/kvm cannot be opened (no KVM here)")
        return ["kvm"]
    if requested == "tcg":
        if not tcg:
            raise LabError(f"--accel tcg: {QEMU} has no TCG")
        return ["tcg"]
    if not kvm and not tcg:
        raise LabError(f"no KVM (/dev/kvm cannot be opened) and no TCG in {QEMU}: "
                       "cannot run a guest")
    order = []
    if kvm and kvm_known() is not False:
        order.append("kvm")
    if tcg:
        order.append("tcg")
    return order


def accel_args(accel: str) -> list[str]:
    if accel == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", "tcg,thread=multi", "-cpu", "max"]


def qemu_command(*, image: Path, initrd: Path, disks: list[Path], disk: DiskSpec, share: Path,
                 accel: str, memory_mb: int = 4096, cpus: int = 2, append: str = "",
                 overrides: dict[int, DiskSpec] | None = None) -> list[str]:
    """The full qemu command line of one boot (``overrides``: per-disk specs by index)."""
    overrides = overrides or {}
    cmd = [QEMU, *accel_args(accel), "-m", str(memory_mb), "-smp", str(cpus),
           "-display", "none", "-serial", "stdio", "-monitor", "none", "-no-reboot",
           "-nodefaults", "-kernel", str(image), "-initrd", str(initrd),
           "-append", ("console=ttyS0 rdinit=/init panic=-1 mitigations=off loglevel=4 "
                       + append).strip(),
           "-virtfs", f"local,path={share},mount_tag=share,security_model=none,id=share"]
    for i, path in enumerate(disks):
        cmd += ["-drive", f"file={path},if=none,id=d{i},format=raw,cache=writeback,"
                          "discard=unmap,aio=threads",
                "-device", f"virtio-blk-pci,drive=d{i},{overrides.get(i, disk).qemu_props()}"]
    return cmd


def make_disks(directory: Path, count: int, disk: DiskSpec,
               overrides: dict[int, DiskSpec] | None = None) -> list[Path]:
    """Sparse raw files (they take no space until written)."""
    overrides = overrides or {}
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(count):
        p = directory / f"disk{i}.raw"
        with p.open("wb") as f:
            f.truncate(overrides.get(i, disk).size_mb << 20)
        out.append(p)
    return out


@dataclass
class BootResult:
    accel: str
    seconds: float
    boot_seconds: float
    exit_code: int
    markers: list[str]


class BootTimeout(LabError):
    """No ``@@lab init`` in time (the kernel hung or panicked early)."""


class BootPanic(BootTimeout):
    """The kernel panicked before ``@@lab init`` ("Kernel panic - not syncing" on the
    console): the boot is given up at once instead of waiting out the boot timeout. Under
    TCG a stock kernel sometimes oopses while patching its own text (6.18.15: ``int3`` in
    ``sched_clock_cpu``, then "Fatal exception in interrupt"); booting again usually works,
    and :func:`workers.lab.runner.run_kernel` does that once."""


class GuestStopped(LabError):
    """The guest booted but stopped before ``all done``; ``result`` says what it finished."""

    def __init__(self, message: str, result: BootResult) -> None:
        super().__init__(message)
        self.result = result


def boot(cmd: list[str], *, log: Path, progress: Callable[[str], None],
         boot_timeout: float = 300.0, timeout: float = 3600.0) -> BootResult:
    """Run qemu to its end, passing ``@@lab`` console lines to ``progress``.

    Raises:
        BootTimeout: no init line within ``boot_timeout`` s (console tail quoted).
        LabError: the whole run exceeded ``timeout`` s, or the guest failed fatally.
    """
    accel = "kvm" if "kvm" in cmd[cmd.index("-accel") + 1] else "tcg"
    t0 = time.monotonic()
    tail: deque[str] = deque(maxlen=40)
    markers: list[str] = []
    booted = threading.Event()  # @@lab init, or a panic before it (see ``panicked``)
    panicked: list[str] = []
    with log.open("w", encoding="utf-8", errors="replace") as logf:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)

        def reader() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                line = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line)
                logf.write(line + "\n")
                logf.flush()
                tail.append(line)
                if PANIC in line and not booted.is_set():
                    panicked.append(line)
                    booted.set()  # wakes the waiter: the boot is over
                i = line.find(MARK)
                if i >= 0:
                    msg = line[i + len(MARK):].strip()
                    markers.append(msg)
                    if msg.startswith("init"):
                        booted.set()
                    progress(msg)

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        boot_s = 0.0
        try:
            if not booted.wait(boot_timeout) or panicked:
                if panicked:
                    time.sleep(0.5)  # the panic's last lines, for the quote
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                th.join(5)
                if panicked:
                    raise BootPanic(
                        f"the guest kernel panicked while booting ({accel}, after "
                        f"{time.monotonic() - t0:.0f} s); console log {log}; last lines:\n  "
                        + "\n  ".join(list(tail)[-20:]))
                raise BootTimeout(
                    f"the guest did not reach /init within {boot_timeout:.0f} s ({accel}); "
                    f"console log {log}; last lines:\n  " + "\n  ".join(list(tail)[-20:]))
            boot_s = time.monotonic() - t0
            rest = timeout - boot_s
            try:
                proc.wait(max(rest, 1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise LabError(f"the guest run exceeded {timeout:.0f} s; console log {log}"
                               ) from None
            th.join(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    fatal = [m for m in markers if m.startswith("fatal")]
    if fatal:
        raise LabError(f"guest: {fatal[0]}; console log {log}")
    result = BootResult(accel, time.monotonic() - t0, boot_s, proc.returncode, markers)
    if not any(m.startswith("all done") for m in markers):
        raise GuestStopped(f"the guest stopped before finishing its cases (qemu exit "
                           f"{proc.returncode}); console log {log}; last lines:\n  "
                           + "\n  ".join(list(tail)[-20:]), result)
    return result
