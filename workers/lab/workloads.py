"""Workloads: ``dd bs=4480k count=200 iflag=direct`` -> the guest command run on the top device.

Forms (``$TOP`` is the stack's top device in the guest; it may be written explicitly):

* ``dd ARGS``: without ``if=``/``of=``, a read of the top device into /dev/null, or a write from
  /dev/zero when ``oflag=`` is given (``oflag=direct``);
* ``fio OPTIONS`` (``--rw=read --bs=1M --iodepth=32 --ioengine=libaio ...``): ``--filename=$TOP``,
  ``--direct=1`` and a job name are added when missing; ``fio FILE.fio``: a job file whose
  ``filename=`` may say ``${TOP}`` (fio expands environment variables);
* ``blkdiscard [ARGS]``: discard (``-o``/``-l``/``-s`` pass through);
* ``mkfs+fstrim [ext4|xfs]``: mkfs (discards the device itself), mount, write a file, delete it,
  fstrim the file system;
* ``writeback SIZE [bs=BS]``: buffered writes then ``sync``: what the flusher sends down;
* ``sh COMMAND``: any shell command.

``on=fs`` (prefix, e.g. ``on=fs dd bs=1M count=64 oflag=direct``) runs a dd/fio workload on a
file of an ext4 file system made on the top device instead of on the device itself.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from workers.lab.host import LabError
from workers.lab.stacks import parse_size

KINDS = ("dd", "fio", "blkdiscard", "mkfs+fstrim", "writeback", "sh")


@dataclass(frozen=True)
class Workload:
    """A parsed workload: its kind, the spec as given and the guest shell lines that run it."""

    kind: str
    spec: str
    commands: tuple[str, ...]
    on_fs: bool = False
    job_file: Path | None = None
    writes: bool = False

    def shown(self, top: str) -> str:
        """The main command as it runs, ``$TOP`` replaced (the manifest's ``command``)."""
        main = self.commands[-1] if self.kind != "mkfs+fstrim" else " && ".join(self.commands)
        return main.replace("${TOP}", top).replace("$TOP", top)


def _has(args: list[str], *keys: str) -> bool:
    return any(a.split("=", 1)[0] in keys for a in args)


def parse_workload(spec: str) -> Workload:
    """Parse a workload spec (see the module docstring).

    Raises:
        LabError: unknown kind or a malformed argument.
    """
    text = spec.strip()
    on_fs = False
    if text.startswith("on=fs "):
        on_fs, text = True, text[len("on=fs "):].strip()
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise LabError(f"workload {spec!r}: {exc}") from None
    if not words:
        raise LabError("empty workload")
    kind, args = words[0], words[1:]
    target = "$LAB_FILE" if on_fs else "$TOP"
    if kind == "dd":
        for a in args:
            if "=" not in a:
                raise LabError(f"dd argument {a!r} is not key=value")
        writes = _has(args, "oflag", "of") and not _has(args, "if")
        if not _has(args, "if", "of"):
            args = ([f"if={target}", "of=/dev/null"] if not _has(args, "oflag")
                    else ["if=/dev/zero", f"of={target}"]) + args
        elif _has(args, "of") and any(a.split("=", 1)[1] in ("$TOP", "${TOP}")
                                      for a in args if a.startswith("of=")):
            writes = True
        cmd = "dd " + " ".join(shlex.quote(a) if "$" not in a else a for a in args)
        if on_fs and writes:
            cmd += " conv=fsync" if not _has(args, "conv") else ""
        return Workload("dd", spec, (cmd,), on_fs=on_fs, writes=writes)
    if kind == "fio":
        if len(args) == 1 and not args[0].startswith("-"):
            path = Path(args[0])
            if not path.is_file():
                raise LabError(f"fio job file {path} not found")
            return Workload("fio", spec, (f"fio --output-format=json --output=$OUT/fio.json "
                                          f"/share/jobs/{path.name}",),
                            job_file=path, writes=True)
        opts = list(args)
        for a in opts:
            if not a.startswith("--"):
                raise LabError(f"fio option {a!r}: use --name=value options, or one job file")
        if not _has(opts, "--filename"):
            opts.append(f"--filename={target}")
        if not _has(opts, "--name"):
            opts.insert(0, "--name=lab")
        if not _has(opts, "--direct", "--buffered"):
            opts.append("--direct=1")
        if on_fs and not _has(opts, "--size"):
            opts.append("--size=256M")
        writes = any(a.split("=", 1)[0] == "--rw" and "write" in a or "trim" in a for a in opts)
        cmd = "fio --output-format=json --output=$OUT/fio.json " + " ".join(
            shlex.quote(a) if "$" not in a else a for a in opts)
        return Workload("fio", spec, (cmd,), on_fs=on_fs, writes=writes)
    if on_fs:
        raise LabError("on=fs applies to dd and fio workloads")
    if kind == "blkdiscard":
        return Workload("blkdiscard", spec,
                        ("blkdiscard " + " ".join(shlex.quote(a) for a in args) + " $TOP",),
                        writes=True)
    if kind in ("mkfs+fstrim", "fstrim"):
        fs = args[0] if args else "ext4"
        if fs not in ("ext4", "xfs", "ext2"):
            raise LabError(f"mkfs+fstrim: file system {fs!r} (ext4, ext2 or xfs)")
        return Workload("mkfs+fstrim", spec, (
            f"mkfs.{fs} -q {'-f' if fs == 'xfs' else '-F'} $TOP",
            "mount $TOP /mnt/lab",
            "dd if=/dev/zero of=/mnt/lab/fill bs=1M count=64 conv=fsync status=none",
            "rm /mnt/lab/fill && sync",
            "fstrim -v /mnt/lab",
            "umount /mnt/lab"), writes=True)
    if kind == "writeback":
        if not args:
            raise LabError("writeback SIZE [bs=BS]: e.g. writeback 64M bs=1M")
        size = parse_size(args[0], unit=1 << 20)
        bs = parse_size(args[1].split("=", 1)[1], unit=1) if len(args) > 1 else 1 << 20
        if size % bs:
            raise LabError(f"writeback size {args[0]} is not a multiple of bs")
        return Workload("writeback", spec, (
            f"dd if=/dev/zero of=$TOP bs={bs} count={size // bs} status=none && sync",),
            writes=True)
    if kind == "sh":
        if not args:
            raise LabError("sh COMMAND: the command is missing")
        return Workload("sh", spec, (text[2:].strip(),), writes=True)
    raise LabError(f"unknown workload {kind!r}; known: {', '.join(KINDS)}")
