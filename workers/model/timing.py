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
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from workers.errors import ModelConfigError
from workers.events import (
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_SLEEPRQ,
    ACT_SPLIT,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    DeviceInfo,
    EventTable,
    make_dev,
)
from workers.model.device import (
    KIND_SSD,
    DeviceModel,
    _service_parts,
    default_device,
    device_from_spec,
)
from workers.model.limits import QueueLimits
from workers.model.policy import Policy
from workers.model.sbitmap import TagQueue
from workers.model.split import OP_READ, OP_WRITE, split_bio

MIB = 1 << 20

# mq-deadline defaults (block/mq-deadline.c): expiries in ns, fifo_batch.
DD_READ_EXPIRE_NS = 500_000_000
DD_WRITE_EXPIRE_NS = 5_000_000_000
DD_FIFO_BATCH = 16


# ============================================================================================
# dispatch_times: the single-stream timing contract
# ============================================================================================
@njit(cache=True)
def _dispatch_kernel(kind: int, p: npt.NDArray[np.float64], parallel: int, exclusive_discard: bool,
                     queue_depth: int, ready: npt.NDArray[np.int64],
                     sector: npt.NDArray[np.int64], nr: npt.NDArray[np.int64],
                     is_write: npt.NDArray[np.bool_], is_discard: npt.NDArray[np.bool_],
                     head0: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    n = len(ready)
    d_out = np.empty(n, np.int64)
    c_out = np.empty(n, np.int64)
    units = np.zeros(max(parallel, 1), np.float64)
    bus_free = 0.0
    last_c = 0.0
    prev_d = -1.0e300
    head = head0
    for i in range(n):
        d = float(ready[i])
        if d < prev_d:
            d = prev_d  # dispatch order is the array order
        if i >= queue_depth:
            qd_free = float(c_out[i - queue_depth])
            if d < qd_free:
                d = qd_free
        prev_d = d
        u = 0
        for k in range(1, len(units)):
            if units[k] < units[u]:
                u = k
        start = max(d, units[u])
        setup, xfer = _service_parts(kind, p, sector[i], nr[i], is_write[i], is_discard[i], head)
        if exclusive_discard and is_discard[i]:
            start = max(d, last_c)  # a non-queued command drains the device first
            c = start + setup + xfer
            for k in range(len(units)):
                units[k] = c
        else:
            c = max(start + setup, bus_free) + xfer
            units[u] = c
        bus_free = c
        if c > last_c:
            last_c = c
        head = sector[i] + nr[i]
        d_out[i] = np.int64(math.ceil(d))
        c_out[i] = np.int64(math.ceil(c))
    return d_out, c_out


def _kernel_args(device: DeviceModel) -> tuple[int, npt.NDArray[np.float64], int, bool]:
    p = device.params()
    exclusive = device.kind_code == KIND_SSD and p[7] == 0.0
    return device.kind_code, p, device.parallelism, bool(exclusive)


def dispatch_times(ready_ns: npt.ArrayLike, sector: npt.ArrayLike, nr_sectors: npt.ArrayLike,
                   device: DeviceModel | str | Mapping[str, Any], queue_depth: int, *,
                   is_write: npt.ArrayLike | bool = False,
                   is_discard: npt.ArrayLike | bool = False,
                   head: int = -1) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """D and C times of one device's requests, given in dispatch order.

    Args:
        ready_ns: when each request could be dispatched (its I event, or the unplug).
        sector / nr_sectors: the requests.
        device: a service model or a spec for :func:`~workers.model.device.device_from_spec`.
        queue_depth: driver tags (``queue_depth`` of the tag set): request ``i`` is not
            dispatched before request ``i - queue_depth`` completed.
        is_write / is_discard: per request (arrays) or for all (bools).
        head: the HDD head position before the first request (-1: unknown, random).

    Returns:
        ``(d_ns, c_ns)``, int64 arrays. D is never before ready nor before the previous D;
        C >= D. Completions are in dispatch order (a single transfer channel).
    """
    dev = device_from_spec(device)
    if queue_depth <= 0:
        raise ModelConfigError(f"queue_depth must be positive, not {queue_depth}")
    r = np.ascontiguousarray(ready_ns, dtype=np.int64)
    n = len(r)
    s = np.ascontiguousarray(sector, dtype=np.int64)
    ln = np.ascontiguousarray(nr_sectors, dtype=np.int64)
    if len(s) != n or len(ln) != n:
        raise ValueError("ready_ns, sector and nr_sectors must have the same length")
    w = np.ascontiguousarray(np.broadcast_to(np.asarray(is_write, dtype=np.bool_), (n,)))
    dc = np.ascontiguousarray(np.broadcast_to(np.asarray(is_discard, dtype=np.bool_), (n,)))
    kind, p, par, excl = _kernel_args(dev)
    return _dispatch_kernel(kind, p, par, excl, int(queue_depth), r, s, ln, w, dc, int(head))


class DeviceServer:
    """The same two-stage server as :func:`dispatch_times`, fed one request at a time.

    The event simulation knows a request's completion the moment it dispatches it, because a
    device here serves in dispatch order and nothing dispatched later can overtake it.
    """

    def __init__(self, device: DeviceModel, head: int = -1) -> None:
        self.device = device
        self._kind, self._p, par, self._exclusive = _kernel_args(device)
        self._units = [0.0] * max(par, 1)
        self._bus_free = 0.0
        self._last_c = 0.0
        self.head = head
        self.busy_ns = 0.0

    def submit(self, t: int, sector: int, nr_sectors: int, is_write: bool,
               is_discard: bool = False) -> int:
        units = self._units
        u = min(range(len(units)), key=units.__getitem__) if len(units) > 1 else 0
        start = max(float(t), units[u])
        setup, xfer = _service_parts(self._kind, self._p, sector, nr_sectors, is_write,
                                     is_discard, self.head)
        if self._exclusive and is_discard:
            start = max(float(t), self._last_c)
            c = start + setup + xfer
            for k in range(len(units)):
                units[k] = c
        else:
            c = max(start + setup, self._bus_free) + xfer
            units[u] = c
        self.busy_ns += setup + xfer
        self._bus_free = c
        self._last_c = max(self._last_c, c)
        self.head = sector + nr_sectors
        return int(math.ceil(c))


# ============================================================================================
# simulate_jobs: many submitting threads, tags, an elevator and a device
# ============================================================================================
@dataclass(frozen=True)
class HostCosts:
    """CPU-side times of the simulation (ns).

    Attributes:
        submit_ns: one piece through ``blk_mq_submit_bio`` (split, tag, insert).
        wakeup_ns: a woken thread running again (``io_schedule`` return; tag or I/O wait).
        think_ns: fio's turnaround between one psync I/O's return and the next submit.
    """

    submit_ns: int = 3_000
    wakeup_ns: int = 20_000
    think_ns: int = 10_000


@dataclass(frozen=True)
class FioJobs:
    """A fio-like psync job group (``-ioengine=psync -direct=1``).

    Attributes:
        rw: ``randwrite`` | ``write`` | ``randread`` | ``read``.
        bs: bytes per I/O.
        numjobs: threads.
        offset_increment: bytes; job ``j`` works from ``j * offset_increment``.
        size: bytes each job covers; 0 = from its offset to the end of the device.
        runtime_ns: simulated time after which no new I/O starts; 0 = run ``count`` I/Os.
        ramp_ns: throughput is measured after this (fio ``ramp_time``).
        count: I/Os per job (0 = until ``runtime_ns``).
        seed: random offsets are drawn from ``numpy.random.default_rng(seed)``.
    """

    rw: str = "randwrite"
    bs: int = MIB
    numjobs: int = 1
    offset_increment: int = 1 << 30
    size: int = 0
    runtime_ns: int = 2_000_000_000
    ramp_ns: int = 0
    count: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rw not in ("randwrite", "write", "randread", "read"):
            raise ModelConfigError(f"rw={self.rw!r}: expected randwrite|write|randread|read")
        if self.bs < 512 or self.bs % 512:
            raise ModelConfigError(f"bs={self.bs} must be a positive multiple of 512")
        if self.numjobs <= 0:
            raise ModelConfigError("numjobs must be positive")
        if self.runtime_ns <= 0 and self.count <= 0:
            raise ModelConfigError("give runtime_ns or count")
        if self.ramp_ns < 0 or (self.runtime_ns and self.ramp_ns >= self.runtime_ns):
            raise ModelConfigError("ramp_ns must be below runtime_ns")

    @property
    def is_write(self) -> bool:
        return "write" in self.rw

    @property
    def is_random(self) -> bool:
        return self.rw.startswith("rand")


@dataclass
class JobsResult:
    """What :func:`simulate_jobs` measured.

    Attributes:
        table: the predicted events (empty when ``emit_events=False``).
        bytes_in_window: bytes of requests completed inside the measured window.
        window_ns: length of the window.
        ios_done: whole I/Os (all pieces) completed in total.
        requests_done: requests completed in total.
        sequential_fraction: share of dispatched requests that started where the previous
            one ended (what the HDD's stream bonus rewards).
        tag_stats: the tag queue's counters.
        max_waiters_per_queue: the largest ``waiters_cnt`` seen per wait queue.
        rescues: times the simulation had to wake every waiter because nothing was in flight
            (an I/O hang in the policy; 0 for a sound policy).
    """

    table: EventTable
    bytes_in_window: int
    window_ns: int
    ios_done: int
    requests_done: int
    sequential_fraction: float
    tag_stats: dict[str, int] = field(default_factory=dict)
    max_waiters_per_queue: list[int] = field(default_factory=list)
    rescues: int = 0

    @property
    def mib_s(self) -> float:
        """Throughput in MiB/s over the window (fio's ``bw``)."""
        if self.window_ns <= 0:
            return 0.0
        return self.bytes_in_window / MIB / (self.window_ns / 1e9)


class _Deadline:
    """mq-deadline's dispatch order for one direction (``dd_dispatch_request``, simplified).

    Sector-sorted pending requests; a batch continues with the next higher sector after the
    last dispatched one (looked up at dispatch time, as the 6.x ``latest_pos`` code does) for up
    to ``fifo_batch`` requests; a new batch starts at the oldest request when the sweep ran
    out or that request's deadline expired, else continues the sweep.
    """

    def __init__(self, expire_ns: int, fifo_batch: int = DD_FIFO_BATCH) -> None:
        self.keys: list[tuple[int, int]] = []
        self.fifo: deque[tuple[int, int, int]] = deque()  # (insert time, rid, sector)
        self.pending: set[int] = set()
        self.expire_ns = expire_ns
        self.fifo_batch = fifo_batch
        self.batching = 0
        self.last_key: tuple[int, int] = (-1, -1)

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, t: int, rid: int, sector: int) -> None:
        bisect.insort(self.keys, (sector, rid))
        self.fifo.append((t, rid, sector))
        self.pending.add(rid)

    def _oldest(self) -> tuple[int, int, int]:
        while self.fifo[0][1] not in self.pending:
            self.fifo.popleft()
        return self.fifo[0]

    def pop(self, t: int) -> int:
        pos = bisect.bisect_right(self.keys, self.last_key)
        nxt = self.keys[pos] if pos < len(self.keys) else None
        if nxt is not None and self.batching < self.fifo_batch:
            key = nxt
        else:
            t0, rid0, s0 = self._oldest()
            if nxt is None or t - t0 >= self.expire_ns:
                key = (s0, rid0)
            else:
                key = nxt
            self.batching = 0
        self.batching += 1
        i = bisect.bisect_left(self.keys, key)
        del self.keys[i]
        self.pending.discard(key[1])
        self.last_key = key
        return key[1]


class _Events:
    """Event records for the predicted EventTable: one flat int list, 6 ints per event.

    Records are appended in simulation order (a completion is recorded when its request is
    dispatched, with its future time); a stable sort by time then gives causal order for
    events at the same nanosecond.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.flat: list[int] = []

    def table(self, dev: int, rwbs: int, comm: str, meta: dict[str, Any],
              limits: QueueLimits, name: str, end_ns: int) -> EventTable:
        arr = np.asarray(self.flat, dtype=np.int64).reshape(-1, 6)
        arr = arr[arr[:, 0] <= end_ns]  # completions recorded ahead of the end of the run
        order = np.argsort(arr[:, 0], kind="stable")
        arr = arr[order]
        n = len(arr)
        pid = arr[:, 1].astype(np.uint32)
        cols = {
            "time_ns": arr[:, 0],
            "seq": np.arange(1, n + 1, dtype=np.uint32),
            "dev": np.full(n, dev, dtype=np.uint32),
            "pid": pid,
            "action": arr[:, 2].astype(np.uint8),
            "rwbs": np.full(n, rwbs, dtype=np.uint16),
            "sector": arr[:, 3].astype(np.uint64),
            "nr_sectors": arr[:, 4].astype(np.uint32),
            "aux": arr[:, 5].astype(np.uint64),
            "comm": (pid != 0).astype(np.uint32),
        }
        info = DeviceInfo(dev=dev, name=name, limits=limits.to_sysfs())
        return EventTable(cols, comms=["(null)", comm], devices={dev: info}, meta=meta)


_RUN = 0
_COMPLETE = 1


@dataclass(slots=True)
class _Job:
    pid: int
    region_start: int
    region_sectors: int
    pieces: list[tuple[int, int]] = field(default_factory=list)
    k: int = 0
    outstanding: int = 0
    waiting: bool = False
    slept_for_piece: bool = False
    preempt_after_sleep: bool = False
    need: list[int] = field(default_factory=list)
    ios: int = 0
    stopped: bool = False
    next_seq_sector: int = 0


def simulate_jobs(jobs: FioJobs, *, limits: QueueLimits,
                  device: DeviceModel | str | Mapping[str, Any] | None = None,
                  policy: Policy | None = None, wakeup: str | None = None,
                  preempt: str | None = None, costs: HostCosts | None = None,
                  dev: int = make_dev(8, 0), name: str = "sda", comm: str = "fio",
                  emit_events: bool = True) -> JobsResult:
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

    Returns:
        :class:`JobsResult`; ``mib_s`` is the measured throughput.
    """
    pol = policy or Policy()
    wake = wakeup or pol.sbitmap_wakeup
    pre = preempt or pol.tag_preempt
    hc = costs or HostCosts()
    model = default_device(bool(limits.rotational)) if device is None else \
        device_from_spec(device)
    elevator = limits.has_elevator
    depth = limits.nr_requests if elevator else limits.queue_depth
    # mq-deadline's dd_depth_updated sets the scheduler map's min_shallow_depth to async_depth.
    shallow = max(1, 3 * depth // 4) if elevator else None
    tags = TagQueue(depth, wakeup=wake, preempt=pre, min_shallow_depth=shallow)
    server = DeviceServer(model)
    capacity = int(getattr(model, "capacity_sectors", 1 << 40))
    op = OP_WRITE if jobs.is_write else OP_READ
    rwbs = (RWBS_WRITE | RWBS_SYNC) if jobs.is_write else RWBS_READ
    bs_sectors = jobs.bs >> 9
    rng = np.random.default_rng(jobs.seed)
    ev = _Events(emit_events)
    emit = emit_events
    flat_extend = ev.flat.extend
    submit = server.submit
    is_write = jobs.is_write
    split_cache: dict[tuple[int, int], tuple[list[tuple[int, int]], list[int]]] = {}
    chunk = limits.chunk_sectors
    pbs = limits.pbs_sectors
    max_sectors = max(limits.max_sectors, 1)

    def split_pieces(s: int) -> tuple[list[tuple[int, int]], list[int]]:
        """Pieces of a bs-sized bio at ``s`` and the tags each remainder still needs.

        ``bio_split_to_limits`` depends on the start only through ``s % chunk_sectors`` and
        ``s % physical block``, so the relative split is cached on those. ``need[k]`` is the
        seed003 series' ``1 + nr_split`` of the remainder starting at piece k
        (``caculate_sectors_split``: (sectors - 1) / max_sectors).
        """
        key = (s % chunk if chunk else 0, s % pbs)
        hit = split_cache.get(key)
        if hit is None:
            res = split_bio(s, bs_sectors, limits, op=op)
            rel = [(ps - s, pn) for ps, pn in res.pieces]
            need = []
            for k in range(len(rel)):
                remaining = sum(pn for _, pn in rel[k:])
                need.append(1 + (remaining - 1) // max_sectors)
            hit = (rel, need)
            split_cache[key] = hit
        return [(s + off, pn) for off, pn in hit[0]], hit[1]
    dd = _Deadline(DD_WRITE_EXPIRE_NS if jobs.is_write else DD_READ_EXPIRE_NS)
    direct: deque[int] = deque()

    # request records
    r_sector: list[int] = []
    r_nr: list[int] = []
    r_job: list[int] = []
    r_tag: list[int] = []

    job_list: list[_Job] = []
    inc = jobs.offset_increment >> 9
    for j in range(jobs.numjobs):
        start = (j * inc) % capacity
        span = (jobs.size >> 9) if jobs.size else capacity - start
        span = min(span, capacity - start)
        span -= span % bs_sectors
        if span < bs_sectors:
            raise ModelConfigError(f"job {j} has no room for one {jobs.bs}-byte I/O "
                                   f"(offset {start} of {capacity} sectors)")
        job_list.append(_Job(pid=1000 + j, region_start=start, region_sectors=span,
                             next_seq_sector=start))

    heap: list[tuple[int, int, int, int]] = []
    counter = itertools.count()
    heappush = heapq.heappush

    def push(t: int, kind: int, arg: int) -> None:
        heappush(heap, (t, next(counter), kind, arg))

    for j in range(jobs.numjobs):
        push(j * 1000, _RUN, j)

    end_ns = jobs.runtime_ns if jobs.runtime_ns > 0 else 1 << 62
    submit_ns, wakeup_ns = hc.submit_ns, hc.wakeup_ns
    tags_get = tags.get
    ramp = jobs.ramp_ns
    inflight = 0
    bytes_window = 0
    ios_done = 0
    requests_done = 0
    seq_hits = 0
    dispatched = 0
    last_end = -1
    rescues = 0
    last_c = 0
    max_ws = [0] * 8

    def dispatch(t: int) -> None:
        nonlocal inflight, seq_hits, dispatched, last_end
        while inflight < limits.queue_depth:
            if elevator:
                if not dd:
                    return
                rid = dd.pop(t)
            else:
                if not direct:
                    return
                rid = direct.popleft()
            s, n = r_sector[rid], r_nr[rid]
            if s == last_end:
                seq_hits += 1
            dispatched += 1
            last_end = s + n
            c = submit(t, s, n, is_write)
            if emit:
                flat_extend((t, job_list[r_job[rid]].pid, ACT_ISSUE, s, n, 0,
                             c, 0, ACT_COMPLETE, s, n, 0))
            inflight += 1
            heappush(heap, (c, next(counter), _COMPLETE, rid))

    def new_io(job: _Job, t: int) -> bool:
        if t >= end_ns or (jobs.count and job.ios >= jobs.count):
            job.stopped = True
            return False
        if jobs.is_random:
            blocks = job.region_sectors // bs_sectors
            s = job.region_start + int(rng.integers(blocks)) * bs_sectors
        else:
            s = job.next_seq_sector
            nxt = s + bs_sectors
            job.next_seq_sector = nxt if nxt + bs_sectors <= job.region_start + \
                job.region_sectors else job.region_start
        job.pieces, job.need = split_pieces(s)
        job.k = 0
        job.ios += 1
        if emit:
            flat_extend((t, job.pid, ACT_QUEUE, s, bs_sectors, 0))
        return True

    def run(j: int, t: int) -> None:
        nonlocal rescues
        job = job_list[j]
        if job.waiting:
            tags.finish_wait(j)
            job.waiting = False
            if pre == "seed003":
                job.preempt_after_sleep = True  # data->preemption = true after io_schedule
        if job.k >= len(job.pieces):
            if job.outstanding or job.stopped:
                return
            if not new_io(job, t):
                return
        s, n = job.pieces[job.k]
        last = job.k == len(job.pieces) - 1
        preemption = job.preempt_after_sleep or (pre == "seed003" and job.k > 0)
        tag = tags_get(preemption)
        if tag is None:
            if not job.slept_for_piece:
                if emit:
                    if not last:
                        flat_extend((t, job.pid, ACT_SPLIT, s, n, s + n))
                    flat_extend((t, job.pid, ACT_SLEEPRQ, s, n, 0))
                job.slept_for_piece = True
            ws = tags.prepare_to_wait(j, job.need[job.k])
            job.waiting = True
            cnt = tags.ws[ws].waiters_cnt
            if cnt > max_ws[ws]:
                max_ws[ws] = cnt
            if tags.in_use == 0:
                # Nothing in flight can wake anyone: the policy would hang. Rescue and count.
                rescues += 1
                for w in tags.wake_all():
                    push(t + hc.wakeup_ns, _RUN, w)
            return
        if emit and not job.slept_for_piece and not last:
            flat_extend((t, job.pid, ACT_SPLIT, s, n, s + n))
        job.slept_for_piece = False
        job.preempt_after_sleep = False
        rid = len(r_sector)
        r_sector.append(s)
        r_nr.append(n)
        r_job.append(j)
        r_tag.append(tag)
        if emit:
            flat_extend((t, job.pid, ACT_GETRQ, s, n, 0, t, job.pid, ACT_INSERT, s, n, 0))
        if elevator:
            dd.add(t, rid, s)
        else:
            direct.append(rid)
        job.k += 1
        job.outstanding += 1
        dispatch(t)
        if job.k < len(job.pieces):
            heappush(heap, (t + submit_ns, next(counter), _RUN, j))

    def complete(rid: int, t: int) -> None:
        nonlocal inflight, bytes_window, ios_done, requests_done, last_c
        inflight -= 1
        requests_done += 1
        last_c = t
        if ramp <= t <= end_ns:
            bytes_window += r_nr[rid] << 9
        for w in tags.put(r_tag[rid]):
            heappush(heap, (t + wakeup_ns, next(counter), _RUN, w))
        job = job_list[r_job[rid]]
        job.outstanding -= 1
        if job.outstanding == 0 and job.k >= len(job.pieces):
            ios_done += 1
            push(t + hc.wakeup_ns + hc.think_ns, _RUN, r_job[rid])
        dispatch(t)

    while heap:
        t, _, kind, arg = heapq.heappop(heap)
        if t > end_ns:
            break
        if kind == _RUN:
            run(arg, t)
        else:
            complete(arg, t)

    window_end = end_ns if jobs.runtime_ns > 0 else last_c
    meta = {
        "model": "simulate_jobs",
        "workload": {"rw": jobs.rw, "bs": jobs.bs, "numjobs": jobs.numjobs,
                     "offset_increment": jobs.offset_increment},
        "policy": {"sbitmap_wakeup": wake, "tag_preempt": pre},
        "device": model.to_json(),
    }
    table = ev.table(dev, rwbs, comm, meta, limits, name, end_ns)
    st = tags.stats
    return JobsResult(
        table=table,
        bytes_in_window=bytes_window,
        window_ns=max(window_end - ramp, 0),
        ios_done=ios_done,
        requests_done=requests_done,
        sequential_fraction=seq_hits / dispatched if dispatched else 0.0,
        tag_stats={"gets": st.gets, "sleeps": st.sleeps, "wakeups": st.wakeups,
                   "preempted": st.preempted, "refused_preempt": st.refused_preempt,
                   "max_ws_active": st.max_ws_active},
        max_waiters_per_queue=max_ws,
        rescues=rescues,
    )


# ============================================================================================
# seed 003: the numjobs table
# ============================================================================================
#: The seed's numjobs column.
SEED003_NUMJOBS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def seed003_limits(max_sectors_kb: int = 128) -> QueueLimits:
    """A SATA HDD as seed 003 assumes it: queue_depth 32, mq-deadline, nr_requests 64."""
    return QueueLimits(max_sectors=max_sectors_kb * 2, max_hw_sectors=max(max_sectors_kb * 2,
                                                                          2560),
                       queue_depth=32, nr_requests=64, scheduler="mq-deadline", rotational=1)


def numjobs_sweep(numjobs: Sequence[int] = SEED003_NUMJOBS, *,
                  preempts: Sequence[str] = ("always", "seed003"), wakeup: str = "per_queue",
                  bs: int = MIB, limits: QueueLimits | None = None,
                  device: DeviceModel | str | Mapping[str, Any] | None = None,
                  runtime_ns: int = 12_000_000_000, ramp_ns: int = 2_000_000_000,
                  seed: int = 0) -> dict[str, dict[int, float]]:
    """Throughput (MiB/s) by tag_preempt policy and numjobs: seed 003's experiment."""
    lim = limits or seed003_limits()
    out: dict[str, dict[int, float]] = {}
    for pre in preempts:
        row: dict[int, float] = {}
        for n in numjobs:
            res = simulate_jobs(
                FioJobs(rw="randwrite", bs=bs, numjobs=n, offset_increment=1 << 30,
                        runtime_ns=runtime_ns, ramp_ns=ramp_ns, seed=seed),
                limits=lim, device=device if device is not None else "hdd", wakeup=wakeup,
                preempt=pre, emit_events=False)
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
