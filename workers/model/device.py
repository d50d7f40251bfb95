"""Device service models: how long a disk takes to serve one dispatched request.

The replay model only needs one number per request, the service time, plus how many requests
the device works on at once. Two families cover the seeds:

* :class:`HDDModel`: a single actuator. A request that does not start where the head is pays
  a seek (a function of the distance) plus, on average, half a revolution; a request that
  continues the previous one (or skips a few sectors forward) pays only the transfer. This
  "sequential-stream bonus" is why the pieces of a split bio must reach the disk back to back
  (seed 003): eight contiguous 128K commands cost about what one 1M command costs.
* :class:`SSDModel`: a per-command overhead that overlaps across ``parallelism`` internal
  units, a transfer that is serialised on one channel at the device bandwidth, and discards
  that are bound by an ops/s limit (seed 002: SATA TRIM is not queued, so every discard
  command costs a fixed time and the device does nothing else meanwhile).

Both split the service time into a *setup* part (overlaps with other commands up to
``parallelism``) and a *transfer* part (serialised); :func:`workers.model.timing.dispatch_times`
runs that two-stage server. ``service_ns`` is their sum: the time of the request on an
otherwise idle device.

The HDD defaults are **fitted** to seed 003's single-job table (fio psync randwrite over the
whole disk, max_sectors_kb 1280: 128k 20.1 ... 4m 82.9 MiB/s); they describe that disk's
effective behaviour (about 5 ms positioning, 95 MiB/s media rate), not a datasheet. SSD presets
are round numbers for the device classes (SATA, NVMe, UFS) and are documented in
docs/model-timing.md. Manifests override any field (:func:`device_from_spec`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from numba import njit

from workers.errors import ModelConfigError

SECTOR = 512
NS_PER_S = 1_000_000_000

#: Kind codes of the numba service kernel (:func:`service_parts`).
KIND_HDD = 0
KIND_SSD = 1


def _check_positive(obj: object, names: tuple[str, ...]) -> None:
    for n in names:
        v = getattr(obj, n)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ModelConfigError(f"{n} must be a positive number, not {v!r}")


def _check_non_negative(obj: object, names: tuple[str, ...]) -> None:
    for n in names:
        v = getattr(obj, n)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise ModelConfigError(f"{n} must be a non-negative number, not {v!r}")



@dataclass(frozen=True)
class DeviceModel:
    """Base of the service models.

    Subclasses provide :meth:`params`, a float64 vector the numba kernel reads, so that
    :func:`workers.model.timing.dispatch_times` can run a million requests without a Python
    call per request. ``parallelism`` is how many commands overlap their setup part.
    """

    kind: ClassVar[str] = "device"
    kind_code: ClassVar[int] = -1

    @property
    def parallelism(self) -> int:
        return 1

    def params(self) -> npt.NDArray[np.float64]:  # pragma: no cover - abstract
        raise NotImplementedError

    def service_parts(self, sector: int, nr_sectors: int, is_write: bool, is_discard: bool,
                      prev_end: int) -> tuple[int, int]:
        """(setup_ns, transfer_ns) of one request given where the previous one ended."""
        s, t = _service_parts(self.kind_code, self.params(), int(sector), int(nr_sectors),
                              bool(is_write), bool(is_discard), int(prev_end))
        return int(s), int(t)

    def service_ns(self, sector: int, nr_sectors: int, is_write: bool, is_discard: bool,
                   prev_end: int) -> int:
        """Time to serve one request on an idle device, in ns.

        Args:
            sector: first sector of the request.
            nr_sectors: its length in 512-byte sectors.
            is_write: a write (selects the write bandwidth on SSDs).
            is_discard: a discard / trim.
            prev_end: the end sector of the previous request the device served (where an HDD's
                head is); -1 for unknown, which an HDD treats as a random position.
        """
        s, t = self.service_parts(sector, nr_sectors, is_write, is_discard, prev_end)
        return s + t

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        data.update(dataclasses.asdict(self))
        return data


@dataclass(frozen=True)
class HDDModel(DeviceModel):
    """A rotating disk with one actuator (fitted to seed 003, see the module docstring).

    Attributes:
        capacity_sectors: size; seek distances are fractions of it. Default 4 TB.
        seek_min_ns: track-to-track seek (the shortest non-zero seek).
        seek_full_ns: full-stroke seek. In between the time grows with the square root of
            the distance (the arm accelerates for half the way and brakes for the rest).
        rpm: spindle speed; a repositioned request waits half a revolution on average
            (``60e9 / rpm / 2`` ns). The model uses the mean, which keeps it deterministic.
        media_rate_bps: sustained transfer rate in bytes/s.
        command_overhead_ns: controller time per command, sequential or not.
        stream_window_sectors: a request starting at most this far *ahead* of the head is
            reached by letting the platter turn (gap / rate) instead of seeking: the
            sequential-stream bonus that makes back-to-back split pieces cheap.
        unknown_distance_fraction: seek distance assumed when the head position is unknown
            (-1), as a fraction of the capacity: 1/3 is the mean distance between two
            uniform random points.
        write_cache_bytes: the drive's volatile write-back cache (0 = write-through, the
            default). With it, :func:`workers.model.timing.simulate_jobs` completes a write
            once its data is in the cache (ATA SET FEATURES 02h / SCSI caching mode page WCE,
            which Linux reports as ``write_cache`` = "write back": ``sd_read_cache_type``)
            and the drive destages dirty data on its own: C-LOOK over the cached extents from
            the head, so a piece that arrives while its predecessor is still dirty is written
            without repositioning. :func:`~workers.model.timing.dispatch_times` and
            :class:`~workers.model.timing.DeviceServer` (trace replay) stay write-through.
        interface_rate_bps: link rate for writes into the cache (SATA 6 Gb/s: 600 MB/s).
    """

    kind: ClassVar[str] = "hdd"
    kind_code: ClassVar[int] = KIND_HDD

    capacity_sectors: int = 7_814_037_168
    seek_min_ns: int = 500_000
    seek_full_ns: int = 3_300_000
    rpm: int = 10_000
    media_rate_bps: float = 100_000_000.0
    command_overhead_ns: int = 30_000
    stream_window_sectors: int = 2048
    unknown_distance_fraction: float = 1.0 / 3.0
    write_cache_bytes: int = 0
    interface_rate_bps: float = 600_000_000.0

    def __post_init__(self) -> None:
        _check_positive(self, ("capacity_sectors", "rpm", "media_rate_bps",
                               "interface_rate_bps"))
        _check_non_negative(self, ("seek_min_ns", "seek_full_ns", "command_overhead_ns",
                                   "stream_window_sectors", "unknown_distance_fraction",
                                   "write_cache_bytes"))
        if self.seek_full_ns < self.seek_min_ns:
            raise ModelConfigError("hdd: seek_full_ns must be >= seek_min_ns")

    @property
    def avg_rotational_ns(self) -> float:
        return 30e9 / self.rpm

    def seek_ns(self, distance_sectors: int) -> float:
        """Seek time for a head movement of ``distance_sectors`` (0 for none)."""
        return float(_hdd_seek(self.params(), float(abs(distance_sectors))))

    def params(self) -> npt.NDArray[np.float64]:
        return np.array([self.capacity_sectors, self.seek_min_ns, self.seek_full_ns,
                         self.avg_rotational_ns, self.media_rate_bps, self.command_overhead_ns,
                         self.stream_window_sectors, self.unknown_distance_fraction],
                        dtype=np.float64)


@dataclass(frozen=True)
class SSDModel(DeviceModel):
    """Flash: per-command overhead overlapping on internal units, one shared transfer channel.

    Attributes:
        read_overhead_ns / write_overhead_ns: setup time of one command (controller, FTL
            lookup, flash read / program latency that is not bandwidth), overlapping with up
            to ``units`` other commands.
        read_bandwidth_bps / write_bandwidth_bps: sustained bytes/s of the transfer channel.
        units: internal parallelism (dies / channels that work at once).
        discard_ops_per_s: discard commands per second the device completes (the trim limit).
        discard_bandwidth_bps: bytes/s of discarded range on top of the per-command cost.
        queued_discard: False for SATA without queued TRIM: a discard is a non-NCQ command,
            so it occupies the whole device (its setup part is serialised too).
    """

    kind: ClassVar[str] = "ssd"
    kind_code: ClassVar[int] = KIND_SSD

    read_overhead_ns: int = 80_000
    write_overhead_ns: int = 30_000
    read_bandwidth_bps: float = 540e6
    write_bandwidth_bps: float = 500e6
    units: int = 8
    discard_ops_per_s: float = 500.0
    discard_bandwidth_bps: float = 200e9
    queued_discard: bool = False

    def __post_init__(self) -> None:
        _check_positive(self, ("read_bandwidth_bps", "write_bandwidth_bps", "units",
                               "discard_ops_per_s", "discard_bandwidth_bps"))
        _check_non_negative(self, ("read_overhead_ns", "write_overhead_ns"))

    @property
    def parallelism(self) -> int:
        return int(self.units)

    def params(self) -> npt.NDArray[np.float64]:
        return np.array([self.read_overhead_ns, self.write_overhead_ns, self.read_bandwidth_bps,
                         self.write_bandwidth_bps, self.units, self.discard_ops_per_s,
                         self.discard_bandwidth_bps, 1.0 if self.queued_discard else 0.0],
                        dtype=np.float64)


# --- presets ----------------------------------------------------------------------------------
#: Named device presets for manifests and the CLI. Values are documented in docs/model-timing.md.
PRESETS: dict[str, DeviceModel] = {
    "hdd": HDDModel(),
    # A SATA SSD: 6 Gb/s link, NCQ depth 32, TRIM not queued (about 2 ms per trim command).
    "sata_ssd": SSDModel(),
    # An NVMe SSD (PCIe 3 x4 class): parallel deallocate, cheap per command.
    "nvme": SSDModel(read_overhead_ns=70_000, write_overhead_ns=20_000,
                     read_bandwidth_bps=3.2e9, write_bandwidth_bps=2.4e9, units=64,
                     discard_ops_per_s=200_000.0, discard_bandwidth_bps=20e9,
                     queued_discard=True),
    # UFS 3.x: one 32-deep queue, UNMAP is queued but slow.
    "ufs": SSDModel(read_overhead_ns=90_000, write_overhead_ns=40_000,
                    read_bandwidth_bps=2.0e9, write_bandwidth_bps=1.2e9, units=16,
                    discard_ops_per_s=5_000.0, discard_bandwidth_bps=20e9,
                    queued_discard=True),
}
# Seed 003's disk as a physical 7200-rpm SATA drive with its write cache on (the SATA default;
# 64 MiB buffer, the usual size for 1-4 TB 7200-rpm desktop/nearline drives). See
# docs/model-timing.md "Write-back cache": calibrated on the seed's single-job table like "hdd".
PRESETS["hdd_wce"] = HDDModel(rpm=7200, seek_full_ns=8_000_000,
                              write_cache_bytes=64 << 20)
_ALIASES = {"sata": "sata_ssd", "ssd": "sata_ssd", "rotational": "hdd", "nvme_ssd": "nvme"}
_CLASSES: dict[str, type[DeviceModel]] = {"hdd": HDDModel, "ssd": SSDModel}


def device_from_spec(spec: str | Mapping[str, Any] | DeviceModel | None) -> DeviceModel:
    """A device model from a manifest / CLI description.

    Accepts a preset name (``"hdd"``, ``"sata_ssd"``, ``"nvme"``, ``"ufs"``), a mapping
    ``{"kind": "nvme", "write_bandwidth_bps": 1e9}`` or ``{"kind": "hdd", "params": {...}}``
    (fields override the preset of that kind), or an existing model (returned as is).

    Raises:
        ModelConfigError: unknown kind or field, or a value of the wrong type.
    """
    if isinstance(spec, DeviceModel):
        return spec
    if spec is None:
        return PRESETS["hdd"]
    if isinstance(spec, str):
        return _preset(spec)
    if not isinstance(spec, Mapping):
        raise ModelConfigError(f"device spec must be a name or a table, not {spec!r}")
    data = dict(spec)
    kind = data.pop("kind", data.pop("model", None))
    if kind is None:
        raise ModelConfigError("device spec needs a 'kind' (hdd, sata_ssd, nvme, ufs)")
    base = _preset(str(kind))
    params = data.pop("params", None)
    if params is not None:
        if not isinstance(params, Mapping):
            raise ModelConfigError("device spec 'params' must be a table")
        data.update(params)
    names = {f.name: f for f in dataclasses.fields(base)}
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key not in names:
            raise ModelConfigError(f"unknown {base.kind} parameter {key!r}; "
                                   f"known: {', '.join(sorted(names))}")
        changes[key] = _coerce(base, key, value)
    try:
        return dataclasses.replace(base, **changes)
    except (TypeError, ValueError) as exc:
        raise ModelConfigError(f"bad device parameters: {exc}") from exc


def default_device(rotational: bool) -> DeviceModel:
    """The service model used when a manifest names none: HDD for rotational disks."""
    return PRESETS["hdd"] if rotational else PRESETS["sata_ssd"]


def _preset(name: str) -> DeviceModel:
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in PRESETS:
        raise ModelConfigError(f"unknown device kind {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[key]


def _coerce(base: DeviceModel, key: str, value: Any) -> Any:
    current = getattr(base, key)
    if isinstance(current, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ModelConfigError(f"device parameter {key}={value!r}: expected a boolean")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ModelConfigError(f"device parameter {key}={value!r}: expected a number") from None
    if not math.isfinite(number):
        raise ModelConfigError(f"device parameter {key}={value!r}: not finite")
    return int(number) if isinstance(current, int) else number


# --- numba kernels ----------------------------------------------------------------------------
@njit(cache=True)
def _hdd_seek(p: npt.NDArray[np.float64], distance: float) -> float:
    if distance <= 0.0:
        return 0.0
    frac = min(distance / p[0], 1.0)
    return float(p[1] + (p[2] - p[1]) * math.sqrt(frac))


@njit(cache=True)
def _service_parts(kind: int, p: npt.NDArray[np.float64], sector: int, nr_sectors: int,
                   is_write: bool, is_discard: bool, prev_end: int) -> tuple[float, float]:
    """(setup, transfer) in ns for one request; the shared kernel of every model."""
    nbytes = float(nr_sectors) * SECTOR
    if kind == KIND_HDD:
        transfer = nbytes / p[4] * 1e9
        if is_discard:
            return p[5], 0.0
        if prev_end < 0:
            pos = _hdd_seek(p, p[0] * p[7]) + p[3]
        else:
            gap = float(sector - prev_end)
            if gap == 0.0:
                pos = 0.0
            elif 0.0 < gap <= p[6]:
                pos = gap * SECTOR / p[4] * 1e9
            else:
                pos = _hdd_seek(p, abs(gap)) + p[3]
        return p[5] + pos, transfer
    # SSD
    if is_discard:
        per_op = 1e9 / p[5]
        return per_op, nbytes / p[6] * 1e9
    if is_write:
        return p[1], nbytes / p[3] * 1e9
    return p[0], nbytes / p[2] * 1e9
