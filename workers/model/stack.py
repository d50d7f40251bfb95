"""Stacks of block devices: a plain disk, md raid0/raid1/raid10/raid5/raid6/linear, a bcache-like
cache device.

A stack is a small tree of :class:`Node` objects, top device first, described by a bundle
manifest (architecture.md ``[stack]``) or a short spec (``"raid5:disks=8,chunk=64k"``). Nodes
hold what the manifest says (dev numbers, chunk, layout, sysfs limit overrides, a service
model spec); :func:`node_limits` turns that into the :class:`QueueLimits` the kernel would
compute under a given :class:`Policy`, with **manifest limits always winning** over defaults.

Mapping functions follow drivers/md:

* :func:`raid5_map`: ``raid5_compute_sector`` for the LEFT_SYMMETRIC layout (also
  right/left asymmetric/symmetric for completeness): parity disk ``D - stripe mod n``, data
  disk ``(pd + 1 + chunk mod D) mod n``.
* :func:`raid0_map`: ``map_sector`` for equal-size members (one zone) and the multi-zone
  ORIG / ALT layouts (``find_zone``).
* :func:`linear_map`: ``which_dev`` over concatenated members.
* :func:`raid6_map`: ``raid5_compute_sector`` for level 6 (P and Q parity disks).
* :func:`raid10_copies`: ``__raid10_find_phys`` (near, far and offset copies; ``calc_sectors``
  gives the far stride).
* :func:`loop_map`: a loop device with direct I/O over a file (drivers/block/loop.c
  ``lo_rw_aio`` -> the file system's ``iomap_dio_rw``): its sectors -> the backing disk's,
  through the file's extent map (``[stack] file_extents``, FIEMAP as ``filefrag -v`` prints it).

Stacks the model has no rules for (dm targets, partitions, null_blk, scsi_debug; loop without
direct I/O or without its file's extent map) are mapped to the closest kind it has, and the stack says so in :attr:`Stack.notes`
(:data:`APPROXIMATIONS`).
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workers.errors import ModelConfigError, ParseError
from workers.events import dev_str, make_dev, parse_dev
from workers.model.limits import UNLIMITED, QueueLimits
from workers.model.policy import Policy, parse_size
from workers.traces.filefrag import FileExtent, file_map_from_fields

KINDS = ("disk", "raid0", "raid1", "raid10", "raid5", "raid6", "linear", "cache", "loop")
#: md kinds are bio-based (BD_HAS_SUBMIT_BIO): they go through __submit_bio_noacct.
BIO_BASED = frozenset({"raid0", "raid1", "raid10", "raid5", "raid6", "linear", "cache"})
#: Kinds whose reads and writes go through raid5.c (chunk_aligned_read, the stripe cache).
RAID456 = frozenset({"raid5", "raid6"})
#: Kinds that keep copies (raid1.c / raid10.c read_balance, writes to every copy).
MIRRORED = frozenset({"raid1", "raid10"})

#: Stack kinds the model has no rules for yet: the closest kind it has, and why that is close.
APPROXIMATIONS: dict[str, tuple[str, str]] = {
    "dm-linear": ("linear", "dm-linear remaps each bio to one target like md-linear"),
    "dm-stripe": ("raid0", "dm-stripe splits at the chunk and maps round robin like raid0"),
    "dm-crypt": ("linear", "dm-crypt remaps 1:1 (its request size cut and its write "
                 "thread's plug sessions are modelled, kcryptd's encryption time is not)"),
    "loop": ("disk", "one disk, the file system below it not modelled: a loop device is "
             "mapped to its disk only from a manifest with direct I/O and the backing file's "
             "extent map, [stack] file_extents"),
    "partition": ("disk", "a partition is modelled as its disk (blk_partition_remap only adds "
                  "the start sector)"),
    "null_blk": ("disk", "null_blk is a blk-mq disk; its default limits come from the manifest"),
    "scsi_debug": ("disk", "scsi_debug is a SCSI disk; its limits come from the manifest"),
}
_KIND_ALIASES = {"bcache": "cache", "dm_linear": "dm-linear", "dm_stripe": "dm-stripe",
                 "dm_crypt": "dm-crypt", "crypt": "dm-crypt", "striped": "dm-stripe",
                 "nullb": "null_blk", "null-blk": "null_blk", "scsi-debug": "scsi_debug",
                 "part": "partition", "mirror": "raid1", "raid4": "raid5"}


def _approximated(kind: str, note: str | None) -> str:
    """The kind a node stands in for when :func:`resolve_kind` approximated it, else ""."""
    return _KIND_ALIASES.get(kind.strip().lower(), kind.strip().lower()) if note else ""


def resolve_kind(kind: str) -> tuple[str, str | None]:
    """``(modelled kind, note)`` for a stack kind: the note says when it is an approximation.

    Raises:
        ModelConfigError: a kind neither modelled nor approximated.
    """
    k = _KIND_ALIASES.get(kind.strip().lower(), kind.strip().lower())
    if k in KINDS and k != "loop":  # loop: modelled from a manifest with an extent map only
        return k, None
    if k in APPROXIMATIONS:
        target, why = APPROXIMATIONS[k]
        if k == "loop":
            return target, f"loop is approximated as {target} ({why})"
        return target, f"{k} is not modelled yet: approximated as {target} ({why})"
    known = ", ".join([*KINDS, *APPROXIMATIONS])
    raise ModelConfigError(f"unknown stack kind {kind!r}; known: {known}")
#: RAID5_MAX_REQ_STRIPES << (stripe shift of a 4K stripe): raid5's max_hw_sectors (1 MiB).
RAID5_MAX_HW_SECTORS = 256 << 3
#: Member size when the manifest does not give one (big enough never to matter).
HUGE = 1 << 40
#: Default max_hw_sectors of a disk (SCSI/ATA: 32767 KiB).
DISK_MAX_HW_SECTORS = 65534


@dataclass(frozen=True)
class Node:
    """One device of a stack.

    Attributes:
        dev: dev_t (``make_dev(major, minor)``).
        name: device name (``md0``, ``sda``).
        kind: ``disk`` | ``raid0`` | ``raid5`` | ``linear`` | ``cache``.
        members: lower devices (raid members; for ``cache`` the cache disk first, then an
            optional backing disk).
        chunk_sectors: md chunk in sectors.
        data_offset: sectors before md data on each member.
        layout: raid5/raid6 ``left-symmetric`` (default) etc.; raid0 ``orig`` | ``alt``;
            raid10 ``n2`` (default), ``f2``, ``o2``, ``n2f2`` ... (``near=2`` and md's layout
            number are accepted by :func:`raid10_geometry`).
        failed: member indices that are missing or faulty (a degraded array).
        sizes: member data sizes in sectors (linear concatenation, raid0 zones).
        limits: sysfs overrides from the manifest (``max_sectors_kb`` ...); they win.
        device: service-model spec for :func:`workers.model.device.device_from_spec`.
        stripe_cache: raid4/5/6 ``stripe_cache_size`` (``/sys/block/mdX/md/``; md's default
            NR_STRIPES = 256 stripe_heads), how many 4 KiB rows the stripe cache keeps.
        approximates: the stack kind this node stands in for (``dm-stripe`` modelled as
            ``raid0``, :data:`APPROXIMATIONS`); "" for a kind the model has. Rules of one md
            personality's own code (e.g. ``raid0_split``) are not applied to a stand-in.
        file_extents: ``loop``: the backing file's extent map (sectors; sorted by file
            offset), one member: the disk the file system sits on.
        loop_dio: ``loop``: the backing file is opened with O_DIRECT (``losetup
            --direct-io=on``); False: its I/O goes through the page cache.
    """

    dev: int
    name: str
    kind: str = "disk"
    members: tuple[Node, ...] = ()
    chunk_sectors: int = 0
    data_offset: int = 0
    layout: str = ""
    sizes: tuple[int, ...] = ()
    failed: tuple[int, ...] = ()
    limits: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    device: Any = field(default=None, compare=False, hash=False)
    stripe_cache: int = 256
    approximates: str = ""
    file_extents: tuple[FileExtent, ...] = ()
    loop_dio: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ModelConfigError(f"unknown stack kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.kind in ("raid0", "raid5", "raid6", "raid10"):
            if self.chunk_sectors <= 0:
                raise ModelConfigError(f"{self.kind} needs a positive chunk size")
        need = {"raid0": 1, "raid1": 1, "raid10": 2, "raid5": 3, "raid6": 4}.get(self.kind, 0)
        if len(self.members) < need:
            raise ModelConfigError(f"{self.kind} needs at least {need} members")
        if self.kind == "raid10":
            near, far, _offset = raid10_geometry(self.layout)
            if near * far > len(self.members):
                raise ModelConfigError(f"raid10 layout {self.layout!r} keeps {near * far} "
                                       f"copies on {len(self.members)} members")
        bad = [i for i in self.failed if not 0 <= i < len(self.members)]
        if bad:
            raise ModelConfigError(f"failed member index {bad[0]} is not a member")
        tolerate = {"raid1": len(self.members) - 1, "raid5": 1, "raid6": 2,
                    "raid10": 1}.get(self.kind, 0)
        if len(set(self.failed)) > tolerate:
            raise ModelConfigError(f"{self.kind} with {len(set(self.failed))} failed members "
                                   "cannot serve I/O")
        if self.kind in ("linear", "cache") and not self.members:
            raise ModelConfigError(f"{self.kind} needs members")
        if self.kind == "disk" and self.members:
            raise ModelConfigError("a disk has no members")
        if self.kind == "loop" and len(self.members) != 1:
            raise ModelConfigError("a loop device has one member: the disk under its file")

    @property
    def bio_based(self) -> bool:
        return self.kind in BIO_BASED

    def member_size(self, i: int) -> int:
        return self.sizes[i] if i < len(self.sizes) and self.sizes[i] > 0 else HUGE


@dataclass(frozen=True)
class Stack:
    """A tree of devices; ``top`` receives the submitted bios. ``notes`` say where the stack
    was approximated by a kind the model has (:data:`APPROXIMATIONS`)."""

    top: Node
    notes: tuple[str, ...] = ()

    def nodes(self) -> list[Node]:
        """Every node once, top first (depth first)."""
        out: list[Node] = []
        seen: set[int] = set()

        def walk(n: Node) -> None:
            if n.dev in seen:
                return
            seen.add(n.dev)
            out.append(n)
            for m in n.members:
                walk(m)

        walk(self.top)
        return out

    def by_dev(self) -> dict[int, Node]:
        return {n.dev: n for n in self.nodes()}

    def disks(self) -> list[Node]:
        return [n for n in self.nodes() if n.kind == "disk"]

    def describe(self) -> str:
        def one(n: Node) -> str:
            extra = f" chunk={n.chunk_sectors // 2}k" if n.chunk_sectors else ""
            inner = ", ".join(one(m) for m in n.members)
            return f"{n.name}({dev_str(n.dev)}) {n.kind}{extra}" + (f" [{inner}]" if inner else "")
        return one(self.top)


# --- limits ------------------------------------------------------------------------------------
def node_limits(node: Node, policy: Policy, member_limits: Sequence[QueueLimits] = ()
                ) -> QueueLimits:
    """The queue limits a kernel under ``policy`` gives ``node`` (manifest overrides win).

    Defaults follow kernel-model.md section 1(a): raid5 ``raid5_set_limits`` (max_hw 1 MiB,
    USHRT_MAX segments, io_min chunk, io_opt stripe width), raid0 ``raid0_set_limits``
    (max_hw = chunk_sectors = chunk), and ``blk_validate_limits`` for max_sectors with the
    preset's BLK_DEF_MAX_SECTORS_CAP. ``md_io_opt_align=on`` sets md chunk_sectors to the stripe
    width and max_hw_sectors to a multiple of io_opt (seen on 7.2: 7168 / 3584 KiB).
    """
    cap = policy.max_sectors_cap_kb * 2
    c = node.chunk_sectors
    if node.kind in ("disk", "loop"):  # loop: blk-mq, its own limits (the manifest's)
        hw = DISK_MAX_HW_SECTORS
        base = QueueLimits(max_sectors=min(hw, cap), max_hw_sectors=hw,
                           max_discard_sectors=0xFFFFFFFF >> 9, discard_granularity=512,
                           **_device_defaults(node.device))
    elif node.kind == "raid5":
        data = len(node.members) - 1
        io_opt = c * data
        hw = RAID5_MAX_HW_SECTORS
        chunk = 0
        if policy.md_io_opt_align == "on":
            hw = max(io_opt, hw - hw % io_opt)
            chunk = io_opt
        ms = _validate_max_sectors(hw, cap, io_opt, c)
        base = QueueLimits(max_sectors=ms, max_hw_sectors=hw, chunk_sectors=chunk,
                           max_segments=65535, max_segment_size=0xFFFFFFFF, io_min=c << 9,
                           io_opt=io_opt << 9, max_discard_sectors=0, rotational=1)
    elif node.kind == "raid0":
        n = len(node.members)
        io_opt = c * n
        hw = c
        chunk = c
        if node.approximates == "dm-stripe" and policy.dm_stripe_chunk_limit == "off":
            chunk = 0  # stripe_io_hints sets io_min and io_opt only (before 5fb9d4341b78)
        elif policy.md_io_opt_align == "on":
            hw = io_opt
            chunk = io_opt
        ms = _validate_max_sectors(hw, cap, io_opt, c)
        if policy.raid0_discard == "per_chunk":
            md, gran = c, c << 9
        else:
            md, gran = 0xFFFFFFFF >> 9, 512
        base = QueueLimits(max_sectors=ms, max_hw_sectors=hw, chunk_sectors=chunk,
                           max_segments=65535, max_segment_size=0xFFFFFFFF, io_min=c << 9,
                           io_opt=io_opt << 9, max_discard_sectors=md, discard_granularity=gran)
    elif node.kind == "raid6" or node.kind == "raid10":
        if node.kind == "raid6":
            # raid5_set_limits, like raid5 with two parity disks
            io_opt = c * (len(node.members) - 2)
            hw = RAID5_MAX_HW_SECTORS
            chunk = 0
            if policy.md_io_opt_align == "on":
                hw = max(io_opt, hw - hw % io_opt)
                chunk = io_opt
            ms = _validate_max_sectors(hw, cap, io_opt, c)
        else:
            # raid10_set_queue_limits: stacked member limits, io_min chunk, io_opt per stripe
            near, far, _o = raid10_geometry(node.layout)
            io_opt = c * max(len(node.members) // near, 1)
            hw = min((m.max_hw_sectors for m in member_limits), default=DISK_MAX_HW_SECTORS)
            ms = min(min((m.max_sectors for m in member_limits), default=min(hw, cap)),
                     _validate_max_sectors(hw, cap, io_opt, c))
            chunk = c if policy.raid10_chunk_limit == "on" and near < len(node.members) else 0
        base = QueueLimits(max_sectors=ms, max_hw_sectors=max(hw, ms), chunk_sectors=chunk,
                           max_segments=65535, max_segment_size=0xFFFFFFFF, io_min=c << 9,
                           io_opt=io_opt << 9, max_discard_sectors=0, rotational=1)
    else:  # linear, cache, raid1: stacked limits (blk_stack_limits takes the minimum)
        ms = min((m.max_sectors for m in member_limits), default=min(DISK_MAX_HW_SECTORS, cap))
        hw = min((m.max_hw_sectors for m in member_limits), default=DISK_MAX_HW_SECTORS)
        mds = min((m.max_discard_sectors for m in member_limits), default=0)
        base = QueueLimits(max_sectors=ms, max_hw_sectors=max(hw, ms), max_segments=65535,
                           max_segment_size=0xFFFFFFFF, max_discard_sectors=mds)
    if node.limits:
        # a manifest's dump may carry sysfs files of a newer kernel: not an error
        return QueueLimits.from_sysfs(node.limits, base=base, max_sectors_cap_kb=
                                      policy.max_sectors_cap_kb, strict=False)
    return base


#: Queue defaults by device class (a manifest's limits override them): SATA disks get
#: mq-deadline with 32 NCQ tags and 64 scheduler tags (2 x min(qd, BLKDEV_DEFAULT_RQ) would be
#: 64 too); NVMe/UFS get no scheduler.
_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "hdd": {"scheduler": "mq-deadline", "queue_depth": 32, "nr_requests": 64, "rotational": 1},
    "sata_ssd": {"scheduler": "mq-deadline", "queue_depth": 32, "nr_requests": 64},
    "nvme": {"scheduler": "none", "queue_depth": 1023, "nr_requests": 1023},
    "ufs": {"scheduler": "none", "queue_depth": 32, "nr_requests": 32},
}
_CLASS_ALIASES = {"sata": "sata_ssd", "ssd": "sata_ssd", "rotational": "hdd", "nvme_ssd": "nvme"}


def _device_defaults(device: Any) -> dict[str, Any]:
    """Queue defaults for a disk's service-model spec (name or ``{"kind": ...}``)."""
    if isinstance(device, Mapping):
        device = device.get("kind", device.get("model"))
    if not isinstance(device, str):
        return {}
    name = _CLASS_ALIASES.get(device.strip().lower(), device.strip().lower())
    return dict(_CLASS_DEFAULTS.get(name, {}))


def _validate_max_sectors(hw: int, cap: int, io_opt: int, io_min: int) -> int:
    """blk_validate_limits step 2 (no max_user_sectors)."""
    if io_opt > cap:
        return min(hw, io_opt)
    if io_min > cap:
        return min(hw, io_min)
    return min(hw, cap)


def all_limits(stack: Stack, policy: Policy) -> dict[int, QueueLimits]:
    """Limits of every node, members before the stacked devices that depend on them."""
    out: dict[int, QueueLimits] = {}

    def walk(n: Node) -> QueueLimits:
        if n.dev in out:
            return out[n.dev]
        mem = [walk(m) for m in n.members]
        out[n.dev] = node_limits(n, policy, mem)
        return out[n.dev]

    walk(stack.top)
    return out


# --- mapping ---------------------------------------------------------------------------------
#: raid4: md's level 4 keeps the parity on the last disk (``raid5_compute_sector``: ``case 4:
#: pd_idx = data_disks``), which is raid5's ALGORITHM_PARITY_N; the model runs it as raid5
RAID4_LAYOUT = "parity-last"


def raid5_map(sector: int, chunk: int, raid_disks: int, layout: str = "left-symmetric"
              ) -> tuple[int, int, int]:
    """(data disk, member sector without data_offset, parity disk): raid5_compute_sector
    (the four rotating layouts, and ALGORITHM_PARITY_0 / ALGORITHM_PARITY_N: parity on the
    first / last disk, which raid4 is)."""
    data_disks = raid_disks - 1
    chunk_number = sector // chunk
    off = sector % chunk
    stripe = chunk_number // data_disks
    dd_idx = chunk_number % data_disks
    if layout in ("left-symmetric", "left_symmetric", "", "2"):
        pd = data_disks - stripe % raid_disks
        disk = (pd + 1 + dd_idx) % raid_disks
    elif layout in ("left-asymmetric", "left_asymmetric", "0"):
        pd = data_disks - stripe % raid_disks
        disk = dd_idx + 1 if dd_idx >= pd else dd_idx
    elif layout in ("right-asymmetric", "right_asymmetric", "1"):
        pd = stripe % raid_disks
        disk = dd_idx + 1 if dd_idx >= pd else dd_idx
    elif layout in ("right-symmetric", "right_symmetric", "3"):
        pd = stripe % raid_disks
        disk = (pd + 1 + dd_idx) % raid_disks
    elif layout in ("parity-first", "parity_first", "4"):  # ALGORITHM_PARITY_0
        pd, disk = 0, dd_idx + 1
    elif layout in ("parity-last", "parity_last", "5"):  # ALGORITHM_PARITY_N, raid4
        pd, disk = data_disks, dd_idx
    else:
        raise ModelConfigError(f"unknown raid5 layout {layout!r}")
    return disk, stripe * chunk + off, pd


def raid0_map(sector: int, chunk: int, sizes: Sequence[int], layout: str = "orig"
              ) -> tuple[int, int]:
    """(member index, member sector without data_offset): find_zone + map_sector.

    Zones: zone k covers the members whose size exceeds the previous zone's end (per member);
    equal members give one zone. ``layout`` selects RAID0_ORIG_LAYOUT (absolute sector picks
    the disk) or RAID0_ALT_MULTIZONE_LAYOUT (zone-relative sector).
    """
    n = len(sizes)
    # round member sizes down to whole chunks, as raid0 does
    sz = [s - s % chunk for s in sizes]
    zone_start_array = 0
    dev_start = 0
    order = sorted(set(sz))
    for z_end_member in order:
        members = [i for i in range(n) if sz[i] >= z_end_member]
        nb = len(members)
        zone_len = (z_end_member - dev_start) * nb
        if sector < zone_start_array + zone_len:
            zrel = sector - zone_start_array
            if layout == "alt":
                idx = (zrel // chunk) % nb
            else:
                idx = (sector // chunk) % nb
            msec = (zrel // (chunk * nb)) * chunk + sector % chunk + dev_start
            return members[idx], msec
        zone_start_array += zone_len
        dev_start = z_end_member
    raise ModelConfigError(f"sector {sector} is beyond the raid0 array")


def raid0_unmap(idx: int, msec: int, chunk: int, sizes: Sequence[int], layout: str = "orig"
                ) -> int | None:
    """The array sector :func:`raid0_map` sends to member ``idx`` at ``msec`` (member sector
    without data_offset); None where no array sector maps there (past the member's last
    whole chunk)."""
    n = len(sizes)
    sz = [s - s % chunk for s in sizes]
    zone_start_array = 0
    dev_start = 0
    for z_end_member in sorted(set(sz)):
        members = [i for i in range(n) if sz[i] >= z_end_member]
        nb = len(members)
        if dev_start <= msec < z_end_member and idx in members:
            p = members.index(idx)
            row, off = divmod(msec - dev_start, chunk)
            j = p if layout == "alt" else (p - zone_start_array // chunk) % nb
            sector = zone_start_array + (row * nb + j) * chunk + off
            return sector if raid0_map(sector, chunk, sizes, layout) == (idx, msec) else None
        zone_start_array += (z_end_member - dev_start) * nb
        dev_start = z_end_member
    return None


def linear_map(sector: int, sizes: Sequence[int]) -> tuple[int, int, int]:
    """(member index, member sector, sectors left on that member): which_dev."""
    start = 0
    for i, s in enumerate(sizes):
        if sector < start + s:
            return i, sector - start, start + s - sector
        start += s
    raise ModelConfigError(f"sector {sector} is beyond the linear array")


def raid6_map(sector: int, chunk: int, raid_disks: int, layout: str = "left-symmetric"
              ) -> tuple[int, int, int, int]:
    """(data disk, member sector without data_offset, P disk, Q disk): raid5_compute_sector
    for level 6 (the four classic layouts; ``ALGORITHM_LEFT_SYMMETRIC`` is mdadm's default)."""
    data_disks = raid_disks - 2
    chunk_number = sector // chunk
    off = sector % chunk
    stripe = chunk_number // data_disks
    dd = chunk_number % data_disks
    r = stripe % raid_disks
    if layout in ("left-symmetric", "left_symmetric", "", "2"):
        pd = raid_disks - 1 - r
        qd = (pd + 1) % raid_disks
        disk = (pd + 2 + dd) % raid_disks
    elif layout in ("left-asymmetric", "left_asymmetric", "0"):
        pd = raid_disks - 1 - r
        qd = pd + 1
        if pd == raid_disks - 1:
            disk, qd = dd + 1, 0  # Q D D D P
        else:
            disk = dd + 2 if dd >= pd else dd  # D D P Q D
    elif layout in ("right-asymmetric", "right_asymmetric", "1"):
        pd = r
        qd = pd + 1
        if pd == raid_disks - 1:
            disk, qd = dd + 1, 0
        else:
            disk = dd + 2 if dd >= pd else dd
    elif layout in ("right-symmetric", "right_symmetric", "3"):
        pd = r
        qd = (pd + 1) % raid_disks
        disk = (pd + 2 + dd) % raid_disks
    elif layout in ("parity-first", "parity_first", "4"):  # ALGORITHM_PARITY_0
        pd, qd, disk = 0, 1, dd + 2
    elif layout in ("parity-last", "parity_last", "5"):  # ALGORITHM_PARITY_N
        pd, qd, disk = data_disks, data_disks + 1, dd
    else:
        raise ModelConfigError(f"raid6 layout {layout!r} is not modelled (left/right "
                               "symmetric/asymmetric and parity-first/last are)")
    return disk, stripe * chunk + off, pd, qd


def raid10_geometry(layout: str) -> tuple[int, int, bool]:
    """``(near_copies, far_copies, far_offset)`` from a raid10 layout.

    Accepts mdadm's names (``n2``, ``f2``, ``o2``, ``n2f2`` ...), ``mdadm --detail``'s
    ``near=2`` / ``far=2`` / ``offset=2`` and md's layout number (``258`` = 0x102 = n2: near in
    the low byte, far in the second, bit 16 offset). Empty means mdadm's default, n2.
    """
    text = str(layout or "").strip().lower().replace(" ", "")
    if not text:
        return 2, 1, False
    if text.isdigit() or text.startswith("0x"):
        v = int(text, 0)
        near, far, offset = v & 0xFF, (v >> 8) & 0xFF, bool(v & (1 << 16))
        if near < 1 or far < 1:
            raise ModelConfigError(f"raid10 layout number {layout!r} has no copies")
        return near, far, offset
    near, far, offset = 1, 1, False
    found = False
    for key, num in re.findall(r"(near|far|offset|n|f|o)=?(\d+)", text):
        found = True
        if key in ("near", "n"):
            near = int(num)
        elif key in ("far", "f"):
            far = int(num)
        else:
            far, offset = int(num), True
    if not found or re.sub(r"(near|far|offset|n|f|o)=?\d+|[-,_]|copies", "", text):
        raise ModelConfigError(f"raid10 layout {layout!r}: expected n2, f2, o2 (or near=2, "
                               "far=2, offset=2, or md's layout number)")
    return near, far, offset


def raid10_stride(layout: str, chunk: int, raid_disks: int, dev_sectors: int) -> int:
    """``geo.stride`` (sectors between far copies on a member): ``calc_sectors``."""
    near, far, offset = raid10_geometry(layout)
    if offset:
        return chunk
    size = dev_sectors // chunk
    size //= far
    size = size * raid_disks
    size //= near
    size *= near * far  # conf->copies
    size = -(-size // raid_disks)
    return (size // far) * chunk


def raid10_copies(sector: int, chunk: int, raid_disks: int, layout: str,
                  dev_sectors: int = HUGE) -> list[tuple[int, int]]:
    """Every copy of an array sector as ``(member index, member sector without data_offset)``,
    in md's slot order: ``__raid10_find_phys`` (far sets of the whole array)."""
    near, far, offset = raid10_geometry(layout)
    stride = raid10_stride(layout, chunk, raid_disks, dev_sectors)
    chunk_no = sector // chunk
    msec = sector % chunk
    chunk_no *= near
    stripe, dev = divmod(chunk_no, raid_disks)
    if offset:
        stripe *= far
    msec += stripe * chunk
    out: list[tuple[int, int]] = []
    for _n in range(near):
        d, s = dev, msec
        out.append((d, s))
        for _f in range(1, far):
            d = (d + near) % raid_disks
            s += stride
            out.append((d, s))
        dev += 1
        if dev >= raid_disks:
            dev = 0
            msec += chunk
    return out


# --- construction ------------------------------------------------------------------------------
_SD_NAMES = "abcdefghijklmnopqrstuvwxyz"


def _disk_node(i: int, limits: Mapping[str, Any], device: Any) -> Node:
    dev = make_dev(8, 16 * i)
    return Node(dev=dev, name=f"sd{_SD_NAMES[i % 26]}", kind="disk", limits=dict(limits),
                device=device)


def stack_from_spec(spec: str) -> Stack:
    """A stack from ``kind:key=value,...``.

    Kinds: ``disk``, ``raid0``, ``raid1``, ``raid10``, ``raid5``, ``raid6``, ``linear``,
    ``cache`` (alias ``bcache``), and the approximated ones of :data:`APPROXIMATIONS`. Keys:
    ``disks`` (members), ``chunk`` (``64k``), ``layout``, ``data_offset`` (sectors),
    ``device`` (service model: hdd, sata_ssd, nvme, ufs), ``size`` (data size of
    each member, e.g. ``64m``: where md-linear moves to the next member), ``scheduler``, ``queue_depth``,
    ``nr_requests``, ``failed`` (member indices of a degraded array, ``failed=1`` or
    ``failed=1+3``), any sysfs limit of the members (``max_sectors_kb`` ...) and ``md_<limit>``
    for the array's own limits (``md_max_sectors_kb=1024``). Members are sda, sdb, ...
    (8,0 8,16 ...), the array is md0 (9,0), a cache device bcache0 (252,0).

    Raises:
        ModelConfigError: unknown kind, key or bad value.
    """
    text = spec.strip()
    kind, _, rest = text.partition(":")
    raid4 = kind.strip().lower() == "raid4"
    kind, note = resolve_kind(kind)
    notes = (note,) if note else ()
    params: dict[str, str] = {}
    for part in rest.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ModelConfigError(f"stack item {part!r} is not key=value")
        k, _, v = part.partition("=")
        params[k.strip()] = v.strip()
    try:
        n = int(params.pop("disks", "1" if kind == "disk" else "2"))
    except ValueError:
        raise ModelConfigError("disks must be a number") from None
    chunk = parse_size(params.pop("chunk", "512k")) >> 9
    layout = params.pop("layout", "")
    if raid4:
        layout = RAID4_LAYOUT
    data_offset = _int(params.pop("data_offset", "0"), "data_offset")
    device = params.pop("device", None)
    msize = parse_size(params.pop("size", "0")) >> 9
    failed = tuple(_int(x, "failed") for x in params.pop("failed", "").replace("+", " ").split())
    member_limits: dict[str, Any] = {}
    md_limits: dict[str, Any] = {}
    for k, v in params.items():
        if k.startswith("md_"):
            md_limits[k[3:]] = v
        else:
            member_limits[k] = v
    QueueLimits.from_sysfs(member_limits)  # validate names early
    if md_limits:
        QueueLimits.from_sysfs(md_limits)
    if kind == "disk":
        if n != 1:
            raise ModelConfigError("a disk stack has exactly one disk")
        return Stack(_disk_node(0, member_limits, device), notes)
    if kind == "cache":
        cache = Node(dev=make_dev(8, 0), name="sda", kind="disk", limits=dict(member_limits),
                     device=device or "nvme")
        backing = Node(dev=make_dev(8, 16), name="sdb", kind="disk", device="hdd")
        return Stack(Node(dev=make_dev(252, 0), name="bcache0", kind="cache",
                          members=(cache, backing), limits=md_limits), notes)
    members = tuple(_disk_node(i, member_limits, device) for i in range(n))
    sizes = (msize,) * n if msize > 0 else ()
    return Stack(Node(dev=make_dev(9, 0), name="md0", kind=kind, members=members,
                      chunk_sectors=chunk if kind != "raid1" else 0, data_offset=data_offset,
                      layout=layout, sizes=sizes, failed=failed, limits=md_limits,
                      approximates=_approximated(text.partition(":")[0], note)), notes)


def _int(text: Any, what: str) -> int:
    try:
        return int(str(text).strip(), 0)
    except ValueError:
        raise ModelConfigError(f"{what} must be a number, not {text!r}") from None


def _manifest_dict(manifest: Any) -> dict[str, Any]:
    if isinstance(manifest, Mapping):
        return dict(manifest)
    out: dict[str, Any] = {}
    for key in ("kernel", "stack", "limits", "devices", "workload", "md"):
        if hasattr(manifest, key):
            out[key] = getattr(manifest, key)
    return out


def stack_from_manifest(manifest: Any, *, device: Any = None) -> Stack:
    """A stack from a bundle manifest (architecture.md layout; a dict or a traces Manifest).

    ``device`` is the service model for disks the manifest gives none (``[stack] device`` or
    ``device_models``); without either, rotational disks get the HDD model, others NVMe.

    ``[stack]`` gives ``top``, ``kind``, ``chunk_kb``, ``layout``, ``members`` (dev numbers),
    ``data_offset_sectors``, optional ``sizes_sectors`` and ``device`` / ``[devices]`` service
    models; ``[limits."maj,min"]`` tables become each node's sysfs overrides.

    Raises:
        ModelConfigError: missing or malformed fields.
    """
    m = _manifest_dict(manifest)
    st = dict(m.get("stack") or {})
    limits = {str(k): dict(v) for k, v in (m.get("limits") or {}).items()
              if isinstance(v, Mapping)}
    names = {}
    for name, devtext in (m.get("devices") or {}).items():
        if isinstance(devtext, str) and re.match(r"^\d+[,:]\d+$", devtext):
            names[parse_dev(devtext)] = str(name)
    service = st.get("device_models") or {}
    if not st:
        raise ModelConfigError("manifest has no [stack] table")
    kind, note = resolve_kind(str(st.get("kind", "disk")))
    notes = (note,) if note else ()
    top_text = st.get("top")
    if not top_text:
        raise ModelConfigError("manifest [stack] needs top = \"maj,min\"")
    try:
        top = parse_dev(str(top_text))
    except ValueError:
        raise ModelConfigError(f"bad top device {top_text!r}") from None

    def lim(dev: int) -> dict[str, Any]:
        return dict(limits.get(dev_str(dev), {}))

    def model(dev: int) -> Any:
        if isinstance(service, Mapping) and dev_str(dev) in service:
            return service[dev_str(dev)]
        return st.get("device", device)

    def disk(dev: int, default_name: str) -> Node:
        return Node(dev=dev, name=names.get(dev, default_name), kind="disk", limits=lim(dev),
                    device=model(dev))

    members_text = st.get("members") or []
    if str(st.get("kind", "")).strip().lower() == "loop":
        loop, lacking = _loop_node(st, top, members_text, names, lim(top), disk)
        if loop is not None:
            return Stack(loop, () if loop.loop_dio else (LOOP_BUFFERED_NOTE,))
        notes = (f"loop is approximated as disk: {lacking}, so the loop device is modelled "
                 "as one disk and the disk under its file system gets no predicted I/O",)
    if kind == "disk":
        return Stack(disk(top, "disk"), notes)
    if not isinstance(members_text, Sequence) or isinstance(members_text, str):
        raise ModelConfigError("manifest [stack] members must be a list of \"maj,min\"")
    try:
        member_devs = [parse_dev(str(x)) for x in members_text]
    except ValueError:
        raise ModelConfigError(f"bad member list {members_text!r}") from None
    # a degraded array's manifest may list only the present members, in slot order, with
    # ``raid_disks`` and the empty slots (``missing_slots``): the missing ones become failed
    # placeholders (they never receive I/O) so that every slot keeps its raid-disk index
    missing = sorted({_int(x, "missing_slots") for x in (st.get("missing_slots") or ())})
    raid_disks = _int(st.get("raid_disks", len(member_devs) + len(missing)), "raid_disks")
    if missing and len(member_devs) + len(missing) != raid_disks:
        raise ModelConfigError(f"{len(member_devs)} members and {len(missing)} missing slots "
                               f"do not make raid_disks = {raid_disks}")
    slots: list[int | None] = []
    present = iter(member_devs)
    for slot in range(raid_disks if missing else len(member_devs)):
        slots.append(None if slot in missing else next(present))
    members = tuple(disk(d, f"member{i}") if d is not None else
                    Node(dev=make_dev(0, 0xFFF00 + i), name=f"missing{i}", kind="disk")
                    for i, d in enumerate(slots))
    chunk_kb = st.get("chunk_kb", st.get("chunk", 0))
    chunk = _int(chunk_kb, "chunk_kb") * 2 if not isinstance(chunk_kb, str) or \
        chunk_kb.strip().isdigit() else parse_size(chunk_kb) >> 9
    sizes = tuple(_int(x, "sizes_sectors") for x in (st.get("sizes_sectors") or ()))
    if not sizes and kind == "linear" and st.get("dm_table"):
        sizes = dm_linear_sizes(st.get("dm_table") or (), member_devs)
    component = st.get("component_size_sectors", st.get("dev_sectors"))
    if not sizes and component:
        sizes = (_int(component, "component_size_sectors"),) * len(members)
    layout = str(st.get("layout", ""))
    if str(st.get("kind", "")).strip().lower() == "raid4":
        layout = RAID4_LAYOUT
    if kind == "raid0" and layout not in ("", "orig", "alt"):
        layout = "alt" if "alt" in layout else "orig"
    failed: list[int] = list(missing)
    for f in st.get("failed") or st.get("failed_members") or ():
        if isinstance(f, int):
            failed.append(f)
            continue
        try:
            failed.append(slots.index(parse_dev(str(f))))
        except ValueError:
            raise ModelConfigError(f"failed member {f!r} is not in the member list") from None
    node = Node(dev=top, name=names.get(top, "md0" if kind != "cache" else "bcache0"),
                kind=kind, members=members, chunk_sectors=chunk if kind != "raid1" else 0,
                data_offset=_int(st.get("data_offset_sectors", 0), "data_offset_sectors"),
                layout=layout, sizes=sizes, failed=tuple(sorted(set(failed))), limits=lim(top),
                stripe_cache=max(_int(st.get("stripe_cache_size", 256), "stripe_cache_size"), 1),
                approximates=_approximated(str(st.get("kind", "disk")), note))
    return Stack(node, notes)


#: What a loop device without direct I/O is modelled as (:meth:`Engine.loop_rw`).
LOOP_BUFFERED_NOTE = (
    "loop without direct I/O: its reads of unwritten extents, holes and what it read or wrote "
    "before do no I/O (zeroes, the page cache), its other reads are approximated as direct "
    "reads of the file's blocks (the page cache's readahead is not modelled), its writes stay "
    "in the page cache; the writes on the disk below (writeback, the file system's own) are "
    "replayed as the trace shows them")


def _loop_node(st: Mapping[str, Any], top: int, members_text: Any, names: Mapping[int, str],
               limits: dict[str, Any], disk: Any) -> tuple[Node | None, str]:
    """The loop node of a manifest that states what :func:`loop_map` needs (direct I/O, the
    backing file's extent map, the one disk under the file system), or None and what is
    missing (the caller approximates loop as a disk and says so)."""
    if "direct_io" not in st:
        return None, "the manifest does not say whether it uses direct I/O ([stack] direct_io)"
    try:
        fmap = file_map_from_fields(st)
    except ParseError as exc:
        raise ModelConfigError(exc.reason) from None
    if fmap is None or not fmap.extents:
        return None, "the manifest has no extent map of the backing file ([stack] file_extents)"
    if not isinstance(members_text, Sequence) or isinstance(members_text, str) or \
            len(members_text) != 1:
        return None, "the manifest does not name the one disk under the file ([stack] members)"
    try:
        member = parse_dev(str(members_text[0]))
    except ValueError:
        raise ModelConfigError(f"bad member list {members_text!r}") from None
    return Node(dev=top, name=names.get(top, "loop0"), kind="loop",
                members=(disk(member, "disk"),), limits=limits,
                file_extents=fmap.extents, loop_dio=bool(st.get("direct_io"))), ""


def loop_map(extents: Sequence[FileExtent], sector: int, nr: int
             ) -> list[tuple[int, int, int, bool]]:
    """A loop request's range -> ``(file sector, disk sector or -1, sectors, unwritten)`` pieces.

    Loop with direct I/O (drivers/block/loop.c ``lo_rw_aio``, lo_offset 0) hands the request's
    pages to the file's ``->read_iter`` / ``->write_iter`` at byte offset ``sector << 9``; the
    file system's ``iomap_dio_rw`` walks the range one mapping at a time (``iomap_iter`` ->
    ``ext4_iomap_begin`` -> ``ext4_map_blocks``: at most up to the end of one extent) and
    ``iomap_dio_bio_iter`` builds one bio per mapping (its iterator truncated to the mapping's
    length; a bvec iterator needs no page array, ``bio_iov_vecs_to_alloc`` -> 0). A range no
    extent covers is a hole (-1: a read zero-fills it, ``iomap_dio_hole_iter``).
    """
    out: list[tuple[int, int, int, bool]] = []
    pos, end = sector, sector + nr
    starts = [e.logical for e in extents]
    i = max(bisect.bisect_right(starts, pos) - 1, 0)
    while pos < end:
        e = extents[i] if i < len(extents) else None
        if e is not None and e.logical <= pos < e.logical + e.sectors:
            n = min(end, e.logical + e.sectors) - pos
            out.append((pos, e.physical + pos - e.logical, n, e.unwritten))
            pos += n
            i += 1
            continue
        if e is not None and e.logical + e.sectors <= pos:
            i += 1
            continue
        hole_end = min(end, e.logical) if e is not None else end
        out.append((pos, -1, hole_end - pos, False))
        pos = hole_end
    return out


def dm_linear_sizes(table: Sequence[str], members: Sequence[int]) -> tuple[int, ...]:
    """Member lengths (sectors) of a dm-linear device from its table (``dmsetup table``).

    Each ``linear`` target maps ``[start, start + len)`` of the device to its ``dev`` at an
    offset (``linear_map_sector``), and dm core never lets a bio cross a target
    (``max_io_len_target_boundary`` in ``__split_and_process_bio``): the targets in start
    order, one per member, are the member sizes md-linear's ``which_dev`` needs. Empty when
    the table is not one linear target per member at offset 0, in member order.
    """
    rows: list[tuple[int, int, int]] = []
    for line in table:
        words = str(line).split(":", 1)[-1].split()
        if len(words) < 5 or words[2] != "linear":
            return ()
        try:
            start, length, off = int(words[0]), int(words[1]), int(words[4])
            dev = parse_dev(words[3].replace(":", ","))
        except ValueError:
            return ()
        if off != 0:
            return ()
        rows.append((start, length, dev))
    rows.sort()
    if [d for _, _, d in rows] != list(members):
        return ()
    return tuple(length for _, length, _ in rows)


def md_member_sizes(examine: str, members: Sequence[str], *, array_sectors: int = 0,
                    chunk_sectors: int = 0) -> tuple[int, ...]:
    """Member data sizes (sectors) of an md array from ``mdadm --examine`` text.

    ``rdev->sectors`` of a v1.x superblock is its ``data_size`` (``super_1_load``), which
    ``--examine`` prints as ``Avail Dev Size``; ``linear_conf`` rounds it down to whole chunks
    when the array has a chunk size (its ``end_sector`` of member *i* is the running sum).
    ``members`` are the member names in raid-disk order (``vda``); a member with no section of
    its own gets an equal share of what ``array_sectors`` (mdstat) leaves, else the size of
    the examined member. Returns ``()`` when the text names no size.
    """
    known: dict[str, int] = {}
    cur = None
    for line in examine.splitlines():
        head = re.match(r"^(/dev/)?(\S+):\s*$", line.strip())
        if head and not line.startswith(" "):
            cur = head.group(2)
            continue
        mo = re.search(r"Avail Dev Size\s*:\s*(\d+)\s*sectors", line)
        if mo and cur is not None:
            known[cur] = int(mo.group(1))
    if not known:
        return ()
    missing = [m for m in members if m not in known]
    share = 0
    if missing and array_sectors > sum(known.get(m, 0) for m in members):
        share = (array_sectors - sum(known.get(m, 0) for m in members)) // len(missing)
    fallback = next(iter(known.values()))
    out = []
    for m in members:
        s = known.get(m, share or fallback)
        if chunk_sectors > 0:
            s -= s % chunk_sectors
        out.append(s)
    return tuple(out)


def with_limits(stack: Stack, overrides: Mapping[int, Mapping[str, Any]]) -> Stack:
    """A copy of ``stack`` with extra sysfs overrides per dev."""
    def rebuild(n: Node) -> Node:
        mem = tuple(rebuild(m) for m in n.members)
        lim = dict(n.limits)
        lim.update(overrides.get(n.dev, {}))
        return dataclasses.replace(n, members=mem, limits=lim)
    return Stack(rebuild(stack.top), stack.notes)


__all__ = ["APPROXIMATIONS", "Node", "Stack", "node_limits", "all_limits", "loop_map", "raid5_map",
           "raid6_map", "raid0_map", "raid10_copies", "raid10_geometry", "linear_map",
           "md_member_sizes", "resolve_kind", "stack_from_spec", "stack_from_manifest", "with_limits", "UNLIMITED"]
