"""Timing: when requests reach the device (D) and complete (C), alone or under tag contention.

Two entry points:

:func:`dispatch_times`
    The timing contract with the replay driver: requests of one device in dispatch order, the
    time each became ready (inserted / unplugged), a :class:`~workers.model.device.DeviceModel`
    and the queue depth -> D and C times. The device is a two-stage server: a *setup* stage
    (positioning, command overhead) that overlaps on ``device.parallelism`` units and a
    *transfer* stage serialised on one channel; at most ``queue_depth`` requests are out at
    once (driver tags; ``blk_mq_get_driver_tag``). Completions come back in dispatch order.
    The loop is compiled with numba: it is sequential by nature and runs per request.

:func:`simulate_jobs`
    A discrete-event simulation of fio-like psync jobs (one synchronous I/O per thread) on
    one disk: each I/O is one bio, split to the queue limits (``bio_split_to_limits`` through
    :func:`workers.model.split.split_bio`), every piece needs a tag from a
    :class:`~workers.model.sbitmap.TagQueue` (``blk_mq_get_new_requests`` ->
    ``blk_mq_get_tag``) and a thread that finds none sleeps on one of the 8 wait queues until a
    completion wakes it. Requests go through an mq-deadline-like elevator (sector-sorted
    sweeps of ``fifo_batch`` requests, FIFO restart when the sweep runs out or a deadline
    expired: ``dd_dispatch_request``) to a device with ``queue_depth`` driver tags. The
    output is an EventTable of Q/X/G/S/I/D/C events (the shape the parsers produce) and the
    throughput over the measured window. This is seed 003's mechanism: with tag preemption
    the pieces of one 1M write reach an HDD far apart in time, so each pays a seek.

Host costs (:class:`HostCosts`) are small fixed times: submitting one piece, a woken thread
getting the CPU back, fio's turnaround between I/Os. They matter only in that a freed tag
can be taken by a running newcomer before a woken waiter gets to it (barging).

``simulate_jobs`` has two engines that produce the same events: ``python`` (the reference,
written on :class:`~workers.model.sbitmap.TagQueue`, ``_Deadline`` and :class:`DeviceServer`)
and ``numba`` (``_jobs_kernel``, the same loop over arrays, for large runs such as the
numjobs-256 benchmark; tests compare the two column by column).

One concept per module; this one only gathers their public names:

* :mod:`workers.model.server`: :func:`dispatch_times` and :class:`DeviceServer`;
* :mod:`workers.model.jobs`: :class:`FioJobs`, :class:`HostCosts`, :class:`JobsResult` and the
  Python engine; :mod:`workers.model.simulate`: :func:`simulate_jobs`, which picks the engine;
* :mod:`workers.model.jobs_fast`: the compiled engine;
* :mod:`workers.model.seed003`: seed 003's numjobs experiment and its table.

mq-deadline's constants have one source, :mod:`workers.model.elevator`.
"""

from __future__ import annotations

from workers.model.jobs import (
    DD_FIFO_BATCH,
    DD_READ_EXPIRE_NS,
    DD_WRITE_EXPIRE_NS,
    MIB,
    FioJobs,
    HostCosts,
    JobsResult,
)
from workers.model.seed003 import (
    SEED003_DEVICE,
    SEED003_NUMJOBS,
    format_numjobs_table,
    numjobs_sweep,
    seed003_limits,
)
from workers.model.server import DeviceServer, dispatch_times
from workers.model.simulate import simulate_jobs

__all__ = ["DD_FIFO_BATCH", "DD_READ_EXPIRE_NS", "DD_WRITE_EXPIRE_NS", "MIB", "SEED003_DEVICE",
           "SEED003_NUMJOBS", "DeviceServer", "FioJobs", "HostCosts", "JobsResult",
           "dispatch_times", "format_numjobs_table", "numjobs_sweep", "seed003_limits",
           "simulate_jobs"]
