"""Device stacks: ``raid5:disks=8,chunk=64k`` -> the guest commands that build it.

A :class:`Stack` knows how many virtio disks it needs, the shell commands that assemble it on
``/dev/vda``, ``/dev/vdb``, ... (``$D0``, ``$D1``, ... in the script), the top device the
workload runs on, which devices to trace, and the ``[stack]`` fields of the manifest it can
state without looking (the rest, such as md's data offset, is read in the guest).

Kinds: ``disk``, ``partition``, md ``raid0 raid1 raid4 raid5 raid6 raid10 linear`` (optionally
degraded), ``dm-linear``, ``dm-stripe``, ``dm-crypt``, ``loop`` (a file on ext4, direct I/O or
buffered), ``null_blk``, ``scsi_debug``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from workers.lab.host import LabError

MD_LEVELS = ("raid0", "raid1", "raid4", "raid5", "raid6", "raid10", "linear")
KINDS = ("disk", "partition", *MD_LEVELS, "dm-linear", "dm-stripe", "dm-crypt", "loop",
         "null_blk", "scsi_debug")
_MIN_DISKS = {"raid0": 2, "raid1": 2, "raid4": 3, "raid5": 3, "raid6": 4, "raid10": 2,
              "linear": 1, "dm-linear": 1, "dm-stripe": 2}
RAID5_LAYOUTS = ("left-asymmetric", "right-asymmetric", "left-symmetric", "right-symmetric",
                 "parity-first", "parity-last", "ddf-zero-restart", "ddf-N-restart",
                 "ddf-N-continue")
_RAID10_LAYOUT_RE = re.compile(r"^(near|far|offset|[nfo])(\d+)?$")
_SIZE_RE = re.compile(r"^(\d+)\s*([kmgts]?)i?b?$", re.I)
#: the modules a kind needs beyond virtio (modprobe'd in the guest; a missing one is reported)
MODULES = {"raid0": ["raid0"], "raid1": ["raid1"], "raid10": ["raid10"],
           "raid4": ["raid456"], "raid5": ["raid456"], "raid6": ["raid456"],
           "linear": ["linear|md-linear"], "dm-linear": ["dm-mod"], "dm-stripe": ["dm-mod"],
           "dm-crypt": ["dm-crypt"], "loop": ["loop", "ext4"], "null_blk": [],
           "scsi_debug": [], "partition": [], "disk": []}


def parse_size(text: str, *, unit: int = 1) -> int:
    """``64k`` -> 65536 bytes (``s`` = 512-byte sectors); a bare number is in ``unit`` bytes."""
    mo = _SIZE_RE.match(text.strip())
    if not mo:
        raise LabError(f"bad size {text!r} (examples: 64k, 1M, 2048s, 1G)")
    n, suffix = int(mo.group(1)), mo.group(2).lower()
    mult = {"": unit, "s": 512, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[suffix]
    return n * mult


def parse_params(text: str) -> dict[str, str]:
    """``disks=8,chunk=64k`` -> {"disks": "8", "chunk": "64k"} (empty -> {})."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise LabError(f"bad parameter {part!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


@dataclass
class Stack:
    """A parsed stack spec. ``build`` lines use ``$D0..$Dn`` for the virtio disks."""

    kind: str
    params: dict[str, str]
    disks: int
    top: str                       # device path in the guest, may use $D0
    build: list[str] = field(default_factory=list)
    teardown: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)     # device paths to blktrace besides top
    manifest: dict[str, Any] = field(default_factory=dict)
    modules: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: ``(file, command)``: what the stack's state was when the workload started, each
    #: command's output (stdout and stderr) saved as ``file`` of the case (not traced: run
    #: before blktrace starts)
    records: list[tuple[str, str]] = field(default_factory=list)
    #: the same after the workload, once blktrace has stopped
    records_after: list[tuple[str, str]] = field(default_factory=list)

    @property
    def spec(self) -> str:
        args = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.kind}:{args}" if args else self.kind


def _int(params: dict[str, str], key: str, default: int) -> int:
    raw = params.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise LabError(f"{key}={raw!r} is not a number") from None


def _disk_list(n: int) -> list[str]:
    return [f"$D{i}" for i in range(n)]


def parse_stack(spec: str) -> Stack:
    """Parse ``KIND[:key=value,...]``.

    Raises:
        LabError: unknown kind, bad parameter, or too few disks for the level.
    """
    kind, _, rest = spec.strip().partition(":")
    kind = kind.strip().lower().replace("_", "-") if kind.strip() != "null_blk" else "null_blk"
    aliases = {"null-blk": "null_blk", "nullb": "null_blk", "scsi-debug": "scsi_debug",
               "part": "partition", "md-linear": "linear", "dm-striped": "dm-stripe",
               "raw": "disk"}
    kind = aliases.get(kind, kind)
    if kind not in KINDS:
        raise LabError(f"unknown stack {kind!r}; known: {', '.join(KINDS)}")
    params = parse_params(rest)
    known_common = {"disks"}
    if kind == "disk":
        return _check(Stack(kind, params, 1, "$D0", manifest={"kind": "disk"}), params,
                      known_common)
    if kind == "partition":
        return _partition(params)
    if kind in MD_LEVELS:
        return _md(kind, params)
    if kind.startswith("dm-"):
        return _dm(kind, params)
    if kind == "loop":
        return _loop(params)
    if kind == "null_blk":
        return _null_blk(params)
    return _scsi_debug(params)


def _check(stack: Stack, params: dict[str, str], known: set[str]) -> Stack:
    unknown = sorted(set(params) - known)
    if unknown:
        raise LabError(f"stack {stack.kind}: unknown parameter(s) {', '.join(unknown)}; "
                       f"known: {', '.join(sorted(known)) or 'none'}")
    stack.modules = list(MODULES.get(stack.kind, []))
    return stack


def _partition(params: dict[str, str]) -> Stack:
    start = parse_size(params.get("start", "1M"), unit=512) // 512
    size = params.get("size")
    size_s = parse_size(size, unit=512) // 512 if size else 0
    line = f"start={start}" + (f", size={size_s}" if size_s else "") + ", type=83"
    build = [f"echo {shlex.quote(line)} | sfdisk -q --no-reread --wipe always $D0",
             "blockdev --rereadpt $D0 || partprobe $D0 || true", "udev_wait ${D0}1"]
    manifest = {"kind": "partition", "start_sector": start}
    if size_s:
        manifest["size_sectors"] = size_s
    st = Stack("partition", params, 1, "${D0}1", build=build,
               teardown=["wipefs -a -q $D0 || true"], manifest=manifest)
    st.notes.append("a partition shares its disk's queue: only the partition is traced "
                    "(blktrace allows one trace per queue)")
    return _check(st, params, {"start", "size"})


def _md_layout(kind: str, params: dict[str, str]) -> tuple[str | None, dict[str, Any]]:
    layout = params.get("layout")
    if layout is None:
        if kind in ("raid5", "raid6"):
            return "left-symmetric", {"layout": "left-symmetric"}
        if kind == "raid10":
            return "n2", {"layout": "n2", "raid10_near": 2, "raid10_far": 1,
                          "raid10_offset": False}
        return None, {}
    if kind in ("raid5", "raid6", "raid4"):
        if layout not in RAID5_LAYOUTS and not layout.endswith("-6"):
            raise LabError(f"{kind} layout {layout!r}; known: {', '.join(RAID5_LAYOUTS)}")
        return layout, {"layout": layout}
    if kind == "raid10":
        mo = _RAID10_LAYOUT_RE.match(layout)
        if not mo:
            raise LabError(f"raid10 layout {layout!r}: use n2, f2, o2 (near/far/offset copies)")
        letter = mo.group(1)[0]
        copies = int(mo.group(2) or 2)
        return f"{letter}{copies}", {
            "layout": f"{letter}{copies}",
            "raid10_near": copies if letter == "n" else 1,
            "raid10_far": copies if letter in "fo" else 1,
            "raid10_offset": letter == "o"}
    raise LabError(f"{kind} takes no layout")


def _md(kind: str, params: dict[str, str]) -> Stack:
    n = _int(params, "disks", 4 if kind in ("raid5", "raid6", "raid10") else 2)
    if n < _MIN_DISKS[kind]:
        raise LabError(f"{kind} needs at least {_MIN_DISKS[kind]} disks, not {n}")
    if n > 16:
        raise LabError(f"at most 16 disks, not {n}")
    chunk_b = parse_size(params.get("chunk", "512k"), unit=1024)
    if chunk_b % 4096 or chunk_b & (chunk_b - 1):
        raise LabError(f"chunk {params.get('chunk')!r} must be a power of two >= 4k")
    degraded = _int(params, "degraded", 0)
    redundancy = {"raid1": n - 1, "raid4": 1, "raid5": 1, "raid6": 2, "raid10": 1}.get(kind, 0)
    if degraded > redundancy:
        raise LabError(f"{kind} with {n} disks survives {redundancy} missing disk(s), "
                       f"not degraded={degraded}")
    layout, layout_fields = _md_layout(kind, params)
    members = _disk_list(n)
    devs = members[: n - degraded] + ["missing"] * degraded
    level = {"linear": "linear"}.get(kind, kind.replace("raid", ""))
    cmd = ["mdadm", "--create", "/dev/md0", "--run", "--assume-clean", "--metadata=1.2",
           f"--level={level}", f"--raid-devices={n}"]
    if kind not in ("raid1", "linear"):
        cmd.append(f"--chunk={chunk_b // 1024}")
    if layout is not None:
        cmd.append(f"--layout={layout}")
    if kind in ("raid1", "raid4", "raid5", "raid6", "raid10"):
        cmd.append("--bitmap=none")
    if kind == "linear" and n == 1:
        cmd.append("--force")
    cmd += devs
    manifest: dict[str, Any] = {"kind": kind, "raid_disks": n}
    if kind not in ("raid1", "linear"):
        manifest["chunk_kb"] = chunk_b // 1024
    manifest.update(layout_fields)
    if degraded:
        manifest["degraded"] = degraded
        manifest["missing_slots"] = list(range(n - degraded, n))
    st = Stack(kind, params, n - degraded, "/dev/md0",
               build=[" ".join(cmd), "udev_wait /dev/md0"],
               teardown=["mdadm --stop /dev/md0",
                         "mdadm --zero-superblock " + " ".join(members[: n - degraded])],
               trace=members[: n - degraded], manifest=manifest)
    return _check(st, params, {"disks", "chunk", "layout", "degraded"})


def _dm(kind: str, params: dict[str, str]) -> Stack:
    size_s = "$(blockdev --getsz $D0)"
    if kind == "dm-crypt":
        cipher = params.get("cipher", "aes-xts-plain64")
        sector = _int(params, "sector_size", 512)
        key = "0" * 64
        opt = f" 1 sector_size:{sector}" if sector != 512 else ""
        table = f"0 {size_s} crypt {cipher} {key} 0 $D0 0{opt}"
        st = Stack(kind, params, 1, "/dev/mapper/lab",
                   build=[f'dmsetup create lab --table "{table}"', "udev_wait /dev/mapper/lab"],
                   teardown=["dmsetup remove lab"], trace=["$D0"],
                   manifest={"kind": kind, "cipher": cipher, "sector_size": sector})
        st = _check(st, params, {"cipher", "sector_size"})
        st.modules += ["dm-crypt", "xts", "aes"]
        return st
    n = _int(params, "disks", 2)
    if n < _MIN_DISKS[kind]:
        raise LabError(f"{kind} needs at least {_MIN_DISKS[kind]} disks, not {n}")
    members = _disk_list(n)
    if kind == "dm-linear":
        # (LAB_TABLE, not T: the case function keeps its trace directory in $T)
        lines = ['LAB_TABLE=""', "OFF=0"]
        for d in members:
            lines.append(f'SZ=$(blockdev --getsz {d}); LAB_TABLE="$LAB_TABLE$OFF $SZ linear '
                         f'{d} 0\\n"; OFF=$((OFF+SZ))')
        build = lines + ['printf "$LAB_TABLE" | dmsetup create lab', "udev_wait /dev/mapper/lab"]
        manifest: dict[str, Any] = {"kind": kind}
        known = {"disks"}
    else:
        chunk_b = parse_size(params.get("chunk", "64k"), unit=1024)
        if chunk_b % 4096:
            raise LabError(f"chunk {params.get('chunk')!r} must be a multiple of 4k")
        cs = chunk_b // 512
        build = [f"SZ=$(blockdev --getsz $D0); SZ=$((SZ / {cs} * {cs} * {n}))",
                 f'dmsetup create lab --table "0 $SZ striped {n} {cs} '
                 + " ".join(f"{d} 0" for d in members) + '"',
                 "udev_wait /dev/mapper/lab"]
        manifest = {"kind": kind, "chunk_kb": chunk_b // 1024, "stripes": n}
        known = {"disks", "chunk"}
    st = Stack(kind, params, n, "/dev/mapper/lab", build=build,
               teardown=["dmsetup remove lab"], trace=members, manifest=manifest)
    return _check(st, params, known)


def _loop(params: dict[str, str]) -> Stack:
    dio = params.get("dio", "1") not in ("0", "off", "no", "false")
    size = parse_size(params.get("size", "512M"), unit=1 << 20)
    fs = params.get("fs", "ext4")
    if fs not in ("ext4", "ext2"):
        raise LabError(f"loop: fs={fs!r} (ext4 or ext2)")
    # inode tables and journal zeroed by mkfs, not by ext4lazyinit after the mount: its
    # writes (2 MiB per block group, ~75 ms apart under TCG) would race with the traced
    # workload on $D0 (ext4_lazyinit_thread -> ext4_init_inode_table)
    build = [f"mkfs.{fs} -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 $D0",
             "mkdir -p /mnt/lower",
             "mount $D0 /mnt/lower", f"fallocate -l {size} /mnt/lower/loop.img",
             f"losetup --direct-io={'on' if dio else 'off'} /dev/loop0 /mnt/lower/loop.img",
             "sync"]
    st = Stack("loop", params, 1, "/dev/loop0", build=build,
               teardown=["losetup -d /dev/loop0", "umount /mnt/lower"], trace=["$D0"],
               manifest={"kind": "loop", "direct_io": dio, "fs": fs, "file_bytes": size})
    # where the file's blocks sit on $D0 (FIEMAP: the loop device's sector -> the disk's),
    # the file system's layout (block groups, inode tables) and its journal's blocks (ext4's
    # own writes land there); after the workload the map again (written extents converted)
    img = "/mnt/lower/loop.img"
    st.records = [("loop_extents.txt", f"filefrag -v {img}"),
                  ("fs_layout.txt", "dumpe2fs $D0"),
                  ("fs_journal.txt", "debugfs -R 'stat <8>' $D0")]
    st.records_after = [("loop_extents_after.txt",
                         f"echo '# filefrag -v after the workload'; filefrag -v {img}")]
    return _check(st, params, {"dio", "size", "fs"})


def _modparams(params: dict[str, str], defaults: dict[str, str]) -> str:
    merged = dict(defaults)
    merged.update(params)
    for k, v in merged.items():
        if not re.fullmatch(r"\w+", k) or not re.fullmatch(r"[\w.,:-]+", v):
            raise LabError(f"bad module parameter {k}={v!r}")
    return " ".join(f"{k}={v}" for k, v in merged.items())


def _null_blk(params: dict[str, str]) -> Stack:
    args = _modparams(params, {"nr_devices": "1", "gb": "4", "queue_mode": "2"})
    st = Stack("null_blk", params, 0, "/dev/nullb0",
               build=[f"modprobe null_blk {args}", "udev_wait /dev/nullb0"],
               teardown=["rmmod null_blk"],
               manifest={"kind": "null_blk", "module_params": args})
    st.modules = ["null_blk"]
    return st


def _scsi_debug(params: dict[str, str]) -> Stack:
    args = _modparams(params, {"dev_size_mb": "1024", "num_tgts": "1", "max_luns": "1"})
    st = Stack("scsi_debug", params, 0, "/dev/sda",
               build=[f"modprobe scsi_debug {args}", "udev_wait /dev/sda"],
               teardown=["rmmod scsi_debug"],
               manifest={"kind": "scsi_debug", "module_params": args})
    st.modules = ["sd_mod"]  # scsi_debug itself is loaded by the build, with its parameters
    return st
