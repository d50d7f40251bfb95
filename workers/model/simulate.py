"""``simulate_jobs``: the one entry point of the job simulators, choosing the engine.

:func:`workers.model.jobs._simulate_python` is the readable reference,
:func:`workers.model.jobs_fast._simulate_numba` the compiled twin that gives the same events.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workers.errors import ModelConfigError
from workers.events import make_dev
from workers.model.device import DeviceModel
from workers.model.jobs import FioJobs, HostCosts, JobsResult, _simulate_python
from workers.model.jobs_fast import _simulate_numba
from workers.model.limits import QueueLimits
from workers.model.policy import Policy


def simulate_jobs(jobs: FioJobs, *, limits: QueueLimits,
                  device: DeviceModel | str | Mapping[str, Any] | None = None,
                  policy: Policy | None = None, wakeup: str | None = None,
                  preempt: str | None = None, costs: HostCosts | None = None,
                  dev: int = make_dev(8, 0), name: str = "sda", comm: str = "fio",
                  emit_events: bool = True, engine: str = "python") -> JobsResult:
    """Discrete-event simulation of psync jobs contending for tags on one disk.

    Args:
        jobs: the workload.
        limits: the disk's queue limits. ``max_sectors`` decides the split; ``nr_requests``
            is the tag depth threads sleep on when ``scheduler`` is set (scheduler tags,
            block/blk-mq-sched.c), ``queue_depth`` the driver tags (requests at the device).
            Without a scheduler threads sleep on the ``queue_depth`` driver tags.
        device: service model (default: HDD when ``limits.rotational`` else SATA SSD).
        policy: reads ``sbitmap_wakeup`` and ``tag_preempt`` (default: :class:`Policy`());
            ``wakeup`` / ``preempt`` override them.
        costs: host-side times.
        emit_events: build the EventTable (turn off for sweeps that only need throughput).
        engine: ``python`` (the readable reference built on :class:`TagQueue` and
            :class:`DeviceServer`) or ``numba`` (the same loop over arrays, compiled; tested
            to give the same events, about 5x faster; the first compile costs about 20 s of
            CPU once per checkout, numba caches it in ``__pycache__``).

    Returns:
        :class:`JobsResult`; ``mib_s`` is the measured throughput.
    """
    if engine not in ("python", "numba"):
        raise ModelConfigError(f"engine={engine!r}: expected python | numba")
    if limits.queue_depth <= 0 or (limits.has_elevator and limits.nr_requests <= 0):
        raise ModelConfigError("queue_depth and nr_requests must be positive for a simulation")
    kwargs: dict[str, Any] = dict(limits=limits, device=device, policy=policy, wakeup=wakeup,
                                  preempt=preempt, costs=costs, dev=dev, name=name, comm=comm,
                                  emit_events=emit_events)
    if engine == "python":
        return _simulate_python(jobs, **kwargs)
    return _simulate_numba(jobs, **kwargs)


