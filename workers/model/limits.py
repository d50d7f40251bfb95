"""Queue limits of one block device, as the split and merge code reads them.

The kernel keeps these in ``struct queue_limits`` (include/linux/blkdev.h) and shows them under
``/sys/block/<dev>/queue/``. The model keeps sizes in the units the kernel code compares: sectors
for ``max_sectors``/``max_hw_sectors``/``chunk_sectors``/``max_discard_sectors``, bytes for
block sizes, segment size and discard granularity (as ``struct queue_limits`` does).

``from_sysfs`` reads the sysfs spellings (``max_sectors_kb``, ``discard_max_bytes``,
``optimal_io_size``, ...) so a bundle manifest's ``[limits."8,0"]`` table or a raw
``cat /sys/block/*/queue/*`` dump can be used unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.errors import ModelConfigError

#: BLK_MAX_SEGMENTS (include/linux/blkdev.h).
BLK_MAX_SEGMENTS = 128
#: BLK_MAX_SEGMENT_SIZE.
BLK_MAX_SEGMENT_SIZE = 65536
#: BLK_SAFE_MAX_SECTORS: the fallback max_hw_sectors of blk_validate_limits.
BLK_SAFE_MAX_SECTORS = 255
#: BLKDEV_DEFAULT_RQ: the scheduler-tag base (block/blk-mq-sched.c).
BLKDEV_DEFAULT_RQ = 128
#: Sentinel for "no limit" (virtio reports max_hw_sectors_kb = INT_MAX).
UNLIMITED = 1 << 62


@dataclass(frozen=True)
class QueueLimits:
    """``struct queue_limits`` plus the tag-set numbers the model needs.

    Attributes:
        max_sectors: soft per-request cap (sysfs max_sectors_kb * 2).
        max_hw_sectors: driver cap (max_hw_sectors_kb * 2).
        chunk_sectors: I/O boundary in sectors; 0 for none (raid0 chunk, zone size).
        max_segments: scatter-gather entries per request.
        max_segment_size: bytes per segment.
        logical_block_size: bytes; split ends are aligned down to it.
        physical_block_size: bytes; ``get_max_io_size`` aligns split ends to it.
        max_discard_sectors: discard cap in sectors (discard_max_bytes / 512); 0 = no discard.
        discard_granularity: bytes.
        discard_alignment: bytes.
        max_discard_segments: ranges one discard request may carry (merges of discontiguous
            discards are allowed when > 1, ``blk_try_merge``).
        max_write_zeroes_sectors: 0 = not supported.
        nr_requests: scheduler tags (or driver tags without a scheduler).
        queue_depth: driver tags per hardware queue.
        nr_hw_queues: hardware queues.
        scheduler: ``"none"`` or ``"mq-deadline"`` (others are modelled as mq-deadline).
        virt_boundary_mask: NVMe-style gap mask (bytes - 1); 0 for none.
        io_min: minimum_io_size in bytes.
        io_opt: optimal_io_size in bytes.
        rotational: 1 for rotating media (selects wbt's min_lat and the default service model).
        nomerges: sysfs nomerges (0, 1 = only simple one-hit merges, 2 = none).
    """

    max_sectors: int = 2560
    max_hw_sectors: int = 2560
    chunk_sectors: int = 0
    max_segments: int = BLK_MAX_SEGMENTS
    max_segment_size: int = BLK_MAX_SEGMENT_SIZE
    logical_block_size: int = 512
    physical_block_size: int = 512
    max_discard_sectors: int = 0
    discard_granularity: int = 512
    discard_alignment: int = 0
    max_discard_segments: int = 1
    max_write_zeroes_sectors: int = 0
    nr_requests: int = 256
    queue_depth: int = 256
    nr_hw_queues: int = 1
    scheduler: str = "none"
    virt_boundary_mask: int = 0
    io_min: int = 512
    io_opt: int = 0
    rotational: int = 0
    nomerges: int = 0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "scheduler":
                if not isinstance(v, str):
                    raise ModelConfigError(f"scheduler must be a string, not {v!r}")
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ModelConfigError(f"queue limit {f.name} must be a non-negative integer, "
                                       f"not {v!r}")
        if self.max_sectors <= 0:
            raise ModelConfigError("max_sectors must be positive")
        lbs = self.logical_block_size
        if lbs < 512 or lbs & (lbs - 1):
            raise ModelConfigError(f"logical_block_size {lbs} is not a power of two >= 512")
        if self.physical_block_size < lbs:
            raise ModelConfigError("physical_block_size is below logical_block_size")
        if self.max_segments <= 0 or self.max_segment_size < 512:
            raise ModelConfigError("max_segments/max_segment_size out of range")

    # --- derived values ------------------------------------------------------------------
    @property
    def lbs_sectors(self) -> int:
        return max(self.logical_block_size >> 9, 1)

    @property
    def pbs_sectors(self) -> int:
        return max(self.physical_block_size >> 9, 1)

    @property
    def has_elevator(self) -> bool:
        return self.scheduler not in ("", "none")

    def replace(self, **changes: Any) -> QueueLimits:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_sysfs(self) -> dict[str, Any]:
        """The sysfs spelling, as stored in ``DeviceInfo.limits`` of predicted tables."""
        return {
            "max_sectors_kb": self.max_sectors // 2,
            "max_hw_sectors_kb": min(self.max_hw_sectors // 2, 2147483647),
            "chunk_sectors": self.chunk_sectors,
            "max_segments": self.max_segments,
            "max_segment_size": self.max_segment_size,
            "logical_block_size": self.logical_block_size,
            "physical_block_size": self.physical_block_size,
            "discard_max_bytes": self.max_discard_sectors * 512,
            "discard_granularity": self.discard_granularity,
            "discard_alignment": self.discard_alignment,
            "max_discard_segments": self.max_discard_segments,
            "write_zeroes_max_bytes": self.max_write_zeroes_sectors * 512,
            "nr_requests": self.nr_requests,
            "queue_depth": self.queue_depth,
            "nr_hw_queues": self.nr_hw_queues,
            "scheduler": self.scheduler,
            "virt_boundary_mask": self.virt_boundary_mask,
            "minimum_io_size": self.io_min,
            "optimal_io_size": self.io_opt,
            "rotational": self.rotational,
            "nomerges": self.nomerges,
        }

    @classmethod
    def from_sysfs(cls, values: Mapping[str, Any], *, base: QueueLimits | None = None,
                   max_sectors_cap_kb: int | None = None, strict: bool = True) -> QueueLimits:
        """Limits from sysfs names (``max_sectors_kb = 512``) or field names.

        Args:
            values: sysfs ``queue/*`` names or :class:`QueueLimits` field names with values
                (ints or the strings sysfs prints; ``scheduler`` may be ``"[mq-deadline] none"``).
            base: limits to start from (a device kind's defaults); values override them.
            strict: an unknown name is an error (a spec someone typed); ``False`` skips it (a
                dump of a kernel with sysfs files the model does not know).
            max_sectors_cap_kb: BLK_DEF_MAX_SECTORS_CAP of the kernel preset. When only
                ``max_hw_sectors_kb`` is given, ``max_sectors`` follows blk_validate_limits:
                min(max_hw, io_opt if io_opt > cap, else cap).

        Raises:
            ModelConfigError: an unknown name or a value that is not a number.
        """
        fields: dict[str, Any] = {}
        seen_max_sectors = False
        for key, raw in values.items():
            name = str(key).strip()
            if name in _IGNORED:
                continue
            if name == "scheduler":
                fields["scheduler"] = _parse_scheduler(raw)
                continue
            if name in _SYSFS:
                field_name, scale = _SYSFS[name]
            elif name in _FIELD_NAMES:
                field_name, scale = name, None
            elif not strict:
                continue
            else:
                raise ModelConfigError(f"unknown queue limit {name!r}")
            value = _parse_int(name, raw)
            if scale is not None:
                value = _scale(value, scale)
            fields[field_name] = value
            if field_name == "max_sectors":
                seen_max_sectors = True
        start = base or cls()
        merged = {f.name: getattr(start, f.name) for f in dataclasses.fields(start)}
        merged.update(fields)
        if not seen_max_sectors and "max_hw_sectors" in fields:
            cap = (max_sectors_cap_kb or 1280) * 2
            hw = merged["max_hw_sectors"]
            io_opt = merged["io_opt"] >> 9
            io_min = merged["io_min"] >> 9
            if io_opt > cap:
                ms = min(hw, io_opt)
            elif io_min > cap:
                ms = min(hw, io_min)
            else:
                ms = min(hw, cap)
            merged["max_sectors"] = ms - ms % max(merged["logical_block_size"] >> 9, 1)
        if merged["max_hw_sectors"] < merged["max_sectors"]:
            merged["max_hw_sectors"] = merged["max_sectors"]
        try:
            return cls(**merged)
        except TypeError as exc:  # pragma: no cover - guarded by the name checks above
            raise ModelConfigError(str(exc)) from exc


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(QueueLimits))

#: sysfs name -> (field, scale). Scale "kb" = KiB to sectors, "bytes" = bytes to sectors.
_SYSFS: dict[str, tuple[str, str | None]] = {
    "max_sectors_kb": ("max_sectors", "kb"),
    "max_hw_sectors_kb": ("max_hw_sectors", "kb"),
    "discard_max_bytes": ("max_discard_sectors", "bytes"),
    "discard_max_hw_bytes": ("max_discard_sectors", "bytes"),
    "write_zeroes_max_bytes": ("max_write_zeroes_sectors", "bytes"),
    "hw_sector_size": ("logical_block_size", None),
    "minimum_io_size": ("io_min", None),
    "optimal_io_size": ("io_opt", None),
}

#: sysfs files that exist but do not change the model.
_IGNORED = frozenset({
    "add_random", "dax", "discard_zeroes_data", "fua", "io_poll", "io_poll_delay",
    "iostats", "iosched", "max_integrity_segments", "nr_zones", "read_ahead_kb", "rq_affinity",
    "stable_writes", "wbt_lat_usec", "write_cache", "write_same_max_bytes", "zone_append_max_bytes",
    "zone_write_granularity", "zoned", "max_open_zones", "max_active_zones", "dma_alignment",
    "io_timeout", "atomic_write_max_bytes", "atomic_write_boundary_bytes",
    "atomic_write_unit_max_bytes", "atomic_write_unit_min_bytes", "throttle_sample_time",
    "max_user_sectors",
})


def _parse_scheduler(raw: Any) -> str:
    text = str(raw).strip()
    if "[" in text and "]" in text:
        text = text[text.index("[") + 1:text.index("]")]
    return text or "none"


def _parse_int(name: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise ModelConfigError(f"queue limit {name} must be a number, not {raw!r}")
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip(), 0)
    except ValueError:
        raise ModelConfigError(f"queue limit {name} must be a number, not {raw!r}") from None


def _scale(value: int, scale: str) -> int:
    if scale == "kb":
        return min(value * 2, UNLIMITED)
    if scale == "bytes":
        return min(value >> 9, UNLIMITED)
    return value
