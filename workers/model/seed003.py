"""Seed 003's experiment: throughput by numjobs under the two tag-preemption policies.

The seed's setting (fio psync randwrite on one SATA HDD, max_sectors_kb 128, mq-deadline) and
its table layout, on top of :func:`workers.model.simulate.simulate_jobs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workers.model.device import (
    DeviceModel,
)
from workers.model.jobs import MIB, FioJobs
from workers.model.limits import QueueLimits
from workers.model.simulate import simulate_jobs

# ============================================================================================
# seed 003: the numjobs table
# ============================================================================================
#: The seed's numjobs column.
SEED003_NUMJOBS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


#: Seed 003's disk: a 7200-rpm SATA HDD with its write-back cache on (``device.PRESETS``).
#: The cache is what lets pieces that reach the disk apart in time still be written back to
#: back (docs/model-timing.md, "Write-back cache").
SEED003_DEVICE = "hdd_wce"


def seed003_limits(max_sectors_kb: int = 128) -> QueueLimits:
    """A SATA HDD as seed 003 assumes it: queue_depth 32, mq-deadline, nr_requests 64."""
    return QueueLimits(max_sectors=max_sectors_kb * 2, max_hw_sectors=max(max_sectors_kb * 2,
                                                                          2560),
                       queue_depth=32, nr_requests=64, scheduler="mq-deadline", rotational=1)


def numjobs_sweep(numjobs: Sequence[int] = SEED003_NUMJOBS, *,
                  preempts: Sequence[str] = ("always", "waiters_first"), wakeup: str = "per_queue",
                  bs: int = MIB, limits: QueueLimits | None = None,
                  device: DeviceModel | str | Mapping[str, Any] | None = None,
                  runtime_ns: int = 12_000_000_000, ramp_ns: int = 2_000_000_000,
                  seed: int = 0, engine: str = "python") -> dict[str, dict[int, float]]:
    """Throughput (MiB/s) by tag_preempt policy and numjobs: seed 003's experiment.

    The default device is :data:`SEED003_DEVICE` (write-back cache on); pass ``device="hdd"``
    for the write-through disk. ``ramp_ns`` excludes the cache's fill-up burst, as fio's
    ``ramp_time`` does in the seed.
    """
    lim = limits or seed003_limits()
    out: dict[str, dict[int, float]] = {}
    for pre in preempts:
        row: dict[int, float] = {}
        for n in numjobs:
            res = simulate_jobs(
                FioJobs(rw="randwrite", bs=bs, numjobs=n, offset_increment=1 << 30,
                        runtime_ns=runtime_ns, ramp_ns=ramp_ns, seed=seed),
                limits=lim, device=device if device is not None else SEED003_DEVICE,
                wakeup=wakeup,
                preempt=pre, emit_events=False, engine=engine)
            row[n] = res.mib_s
        out[pre] = row
    return out


def format_numjobs_table(results: Mapping[str, Mapping[int, float]],
                         labels: Mapping[str, str] | None = None) -> str:
    """The seed's "Test result: MiB/s" table layout, one column per policy."""
    names = list(results)
    heads = [(labels or {}).get(n, f"tag_preempt={n}") for n in names]
    widths = [max(len(h), 6) for h in heads]
    lines = ["| numjobs | " + " | ".join(h.ljust(w) for h, w in zip(heads, widths)) + " |",
             "| ------- | " + " | ".join("-" * w for w in widths) + " |"]
    rows = sorted({n for r in results.values() for n in r})
    for n in rows:
        cells = [f"{results[name].get(n, float('nan')):.1f}".ljust(w)
                 for name, w in zip(names, widths)]
        lines.append(f"| {str(n).ljust(7)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

