"""The initramfs of one boot: guest root cpio + the kernel's module subset + ``/init``.

Modules are decompressed on the host (``.ko.xz``/``.ko.zst``/``.ko.gz``: the guest's kmod
need not know the compression) and indexed with the host's ``depmod -b``. Only the subset the
lab uses goes in: block, md, dm, virtio, 9p, loop, null_blk, scsi_debug, file systems, crypto.
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

import zstandard

from workers.lab.host import LabError, cache_dir, need_tool, run
from workers.lab.kernels import Kernel

#: directories (relative to lib/modules/<ver>/kernel) copied whole
MODULE_DIRS = ("arch", "block", "crypto", "lib", "mm", "fs", "drivers/md", "drivers/block",
               "drivers/virtio", "net/9p", "drivers/scsi/scsi_debug.ko", "drivers/scsi/sd_mod.ko",
               "drivers/scsi/scsi_mod.ko", "drivers/scsi/scsi_common.ko")
#: loaded by /init before the script runs (missing or built in: fine)
BOOT_MODULES = ("virtio_pci", "virtio_blk", "9pnet_virtio", "9p", "md-mod", "dm-mod", "loop",
                "ext4")

INIT = r"""#!/bin/sh
# blkreview lab /init (workers/lab/initramfs.py)
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /share /run
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
echo "@@lab init $(uname -r) cpus=$(nproc)" > /dev/console
for m in @BOOT_MODULES@; do modprobe "$m" 2>/dev/null; done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 share /share; then
  echo "@@lab fatal: cannot mount the 9p share (9p/9pnet_virtio modules missing?)" > /dev/console
  busybox poweroff -f
fi
echo "@@lab share mounted" > /dev/console
bash /share/run.sh > /share/run.log 2>&1
echo "@@lab exit $?" > /dev/console
sync
umount /share 2>/dev/null
busybox poweroff -f
echo o > /proc/sysrq-trigger
"""


class Cpio:
    """A minimal newc archive writer (regular files, directories, symlinks)."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.ino = 1000

    def _entry(self, name: str, mode: int, data: bytes) -> None:
        self.ino += 1
        nb = name.encode() + b"\0"
        hdr = b"070701" + b"".join(b"%08X" % v for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
        self.buf.write(hdr + nb)
        self.buf.write(b"\0" * (-(110 + len(nb)) % 4))
        self.buf.write(data)
        self.buf.write(b"\0" * (-len(data) % 4))

    def dir(self, name: str) -> None:
        self._entry(name, stat.S_IFDIR | 0o755, b"")

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name: str, target: str) -> None:
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def tree(self, root: Path, prefix: str) -> None:
        """Add ``root`` (already staged on disk) under ``prefix``."""
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            base = prefix if rel == "." else f"{prefix}/{rel}"
            self.dir(base)
            for f in sorted(filenames):
                p = Path(dirpath) / f
                if p.is_symlink():
                    self.symlink(f"{base}/{f}", os.readlink(p))
                else:
                    self.file(f"{base}/{f}", p.read_bytes())

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0, b"")
        self.buf.write(b"\0" * (-self.buf.tell() % 512))
        return self.buf.getvalue()


def _decompress(src: Path) -> tuple[str, bytes]:
    name = src.name
    data = src.read_bytes()
    if name.endswith(".ko.xz"):
        return name[:-3], lzma.decompress(data)
    if name.endswith(".ko.zst"):
        return name[:-4], zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if name.endswith(".ko.gz"):
        return name[:-3], gzip.decompress(data)
    return name, data


def _module_sources(mods: Path, wanted: Iterable[str]) -> list[Path]:
    out: list[Path] = []
    for rel in wanted:
        p = mods / "kernel" / rel
        if p.is_dir():
            out.extend(x for x in sorted(p.rglob("*")) if ".ko" in x.name and x.is_file())
        else:
            out.extend(x for x in sorted(p.parent.glob(p.name + "*")) if x.is_file())
    return out


def module_cpio(kernel: Kernel) -> Path | None:
    """The kernel's module subset as a cpio (``lib/modules/<ver>``), cached per kernel."""
    if kernel.modules is None:
        return None
    stamp = f"{kernel.version}-{int(kernel.modules.stat().st_mtime)}"
    final = cache_dir() / "modules" / f"{stamp}.cpio"
    if final.exists():
        return final
    need_tool("depmod", "kmod")
    stage = cache_dir() / "modules" / f"{stamp}.stage{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    dest = stage / "lib" / "modules" / kernel.version
    dest.mkdir(parents=True)
    try:
        for f in kernel.modules.iterdir():
            if f.is_file() and f.name.startswith("modules.") and not f.name.endswith(".bin"):
                shutil.copy2(f, dest / f.name)
        for src in _module_sources(kernel.modules, MODULE_DIRS):
            name, data = _decompress(src)
            rel = src.parent.relative_to(kernel.modules)
            (dest / rel).mkdir(parents=True, exist_ok=True)
            (dest / rel / name).write_bytes(data)
        if (dest / "modules.order").exists():  # depmod reads the uncompressed names
            text = (dest / "modules.order").read_text()
            for ext in (".ko.xz", ".ko.zst", ".ko.gz"):
                text = text.replace(ext, ".ko")
            (dest / "modules.order").write_text(text)
        run(["depmod", "-b", str(stage), kernel.version], what=f"depmod for {kernel.version}")
        cpio = Cpio()
        for d in ("usr", "usr/lib", "usr/lib/modules"):
            cpio.dir(d)
        cpio.tree(dest, f"usr/lib/modules/{kernel.version}")
        tmp = final.with_suffix(f".tmp{os.getpid()}")
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(cpio.finish())
        tmp.rename(final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return final


def init_cpio(extra_modules: Iterable[str] = ()) -> bytes:
    """The small cpio with ``/init`` (overrides nothing of the root but ``/init``)."""
    mods = " ".join(dict.fromkeys([*BOOT_MODULES, *extra_modules]))
    cpio = Cpio()
    cpio.file("init", INIT.replace("@BOOT_MODULES@", mods).encode(), mode=0o755)
    return cpio.finish()


def build_initramfs(root_cpio: Path, kernel: Kernel, dest: Path) -> Path:
    """Concatenate root + modules + init into ``dest`` (the kernel unpacks them in order).

    Raises:
        LabError: the root cpio is missing.
    """
    if not root_cpio.exists():
        raise LabError(f"guest root {root_cpio} is missing")
    mods = module_cpio(kernel)
    with dest.open("wb") as out:
        for part in (root_cpio, mods):
            if part is None:
                continue
            with part.open("rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
        out.write(init_cpio())
    return dest
