"""The guest root: a minbase Debian (blktrace, fio, mdadm, ...) built once with mmdebstrap.

The whole root is the initramfs: an uncompressed newc cpio of it (kernel-independent, cached)
is concatenated with a per-kernel module cpio and a small cpio holding ``/init`` (see
:mod:`workers.lab.initramfs`), and the kernel boots with ``rdinit=/init``. Documentation,
man pages and locales are left out (``path-exclude``), which keeps it near 270 MB.

The cache key is the suite, mirror and package list: changing :data:`PACKAGES` builds a new root.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from workers.lab.host import LabError, cache_dir, need_tool, run
from workers.lab.kernels import host_archive

#: what the guest needs: tracing, workloads, stacks, file systems, sysfs/proc tools
PACKAGES = ("blktrace", "fio", "mdadm", "util-linux", "e2fsprogs", "sysstat", "fdisk", "kmod",
            "procps", "busybox", "dmsetup", "xfsprogs")
EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")


def root_key(suite: str, mirror: str, packages: tuple[str, ...] = PACKAGES) -> str:
    text = "\n".join([suite, mirror, *sorted(packages), *EXCLUDES])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def default_suite() -> str:
    """The host's own Debian suite (its packages are in the configured archive)."""
    arch = host_archive()
    plain = [s for s in arch.host_suites if "-" not in s]
    return os.environ.get("BLKREVIEW_LAB_SUITE") or (plain[0] if plain else "bookworm")


def mmdebstrap_command(suite: str, mirror: str, target: Path,
                       packages: tuple[str, ...] = PACKAGES) -> list[str]:
    mode = "root" if os.geteuid() == 0 else "unshare"
    cmd = ["mmdebstrap", f"--mode={mode}", "--variant=minbase",
           "--include=" + ",".join(packages)]
    cmd += [f"--dpkgopt=path-exclude={p}" for p in EXCLUDES]
    cmd += [suite, str(target), mirror]
    return cmd


def guest_root(progress: Callable[[str], None] | None = None,
               suite: str | None = None) -> Path:
    """The cached root cpio, built on first use (about a minute with a nearby mirror).

    Raises:
        LabError: mmdebstrap or cpio is missing, or the build failed (with its output).
    """
    suite = suite or default_suite()
    mirror = host_archive().main
    key = root_key(suite, mirror)
    final = cache_dir() / "root" / f"{suite}-{key}.cpio"
    if final.exists():
        return final
    need_tool("mmdebstrap", "mmdebstrap")
    need_tool("cpio", "cpio")
    final.parent.mkdir(parents=True, exist_ok=True)
    work = final.with_name(final.stem + f".build{os.getpid()}")
    if work.exists():
        shutil.rmtree(work)
    say = progress or (lambda _t: None)
    t0 = time.monotonic()
    say(f"guest root: building {suite} with mmdebstrap (once; cached in {final.parent})")
    try:
        run(mmdebstrap_command(suite, mirror, work), what="mmdebstrap (guest root)",
            timeout=1800)
        for p in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(work / p, ignore_errors=True)
        tmp = final.with_suffix(f".cpio.tmp{os.getpid()}")
        with tmp.open("wb") as out:
            names = run(["find", ".", "-mindepth", "1"], what="find (guest root)", cwd=work)
            proc = subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=work,
                                  input=names.encode(), stdout=out, stderr=subprocess.PIPE,
                                  check=False)
            if proc.returncode != 0:
                raise LabError("cpio (guest root) failed: "
                               + proc.stderr.decode(errors="replace")[-2000:])
        tmp.rename(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"guest root: built in {time.monotonic() - t0:.0f} s "
        f"({final.stat().st_size / 2**20:.0f} MiB)")
    return final
