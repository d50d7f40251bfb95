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
from workers.model.policy import VALUE_ALIASES, Policy
from workers.model.sbitmap import TagQueue
from workers.model.split import OP_READ, OP_WRITE, split_bio

MIB = 1 << 20

#: Integers inside compiled kernels (numpy scalars from arrays, or Python ints).
_I = int | np.integer[Any]

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
        seed: random offsets come from a splitmix64 hash of (seed, job, I/O number), so
            the Python and the compiled engine draw the same offsets.
        iodepth: I/Os a job keeps in flight (fio ``iodepth`` with libaio/io_uring; 1 =
            psync). The job's thread submits one I/O's pieces after the other and starts the
            next I/O while fewer than ``iodepth`` are in flight.
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
    iodepth: int = 1

    def __post_init__(self) -> None:
        if self.iodepth <= 0:
            raise ModelConfigError("iodepth must be positive")
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
        media_sequential_fraction: share of media writes that continue where the head is:
            with a write-back cache the destages (pieces that met in the cache are written
            back to back), else the same as ``sequential_fraction``.
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
    media_sequential_fraction: float = 0.0

    @property
    def mib_s(self) -> float:
        """Throughput in MiB/s over the window (fio's ``bw``)."""
        if self.window_ns <= 0:
            return 0.0
        return self.bytes_in_window / MIB / (self.window_ns / 1e9)


@njit(cache=True)
def _rand_block(seed: int, job: int, io: int, blocks: int) -> int:
    """A deterministic uniform block index: splitmix64 of (seed, job, io) modulo ``blocks``."""
    x = (np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
         + np.uint64(job) * np.uint64(0xD1B54A32D192ED03) + np.uint64(io))
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return int(z % np.uint64(blocks))


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
              limits: QueueLimits, name: str, end_ns: int,
              arr: npt.NDArray[np.int64] | None = None) -> EventTable:
        if arr is None:
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
_DESTAGED = 2


def _write_cache_args(model: DeviceModel, is_write: bool) -> tuple[int, float, float]:
    """(cache bytes, link bytes/s, per-command ns) of a write-back cache; bytes 0 = none."""
    nbytes = int(getattr(model, "write_cache_bytes", 0)) if is_write else 0
    return (nbytes, float(getattr(model, "interface_rate_bps", 600e6)),
            float(getattr(model, "command_overhead_ns", 0)))


@dataclass(slots=True)
class _Job:
    pid: int
    region_start: int
    region_sectors: int
    pieces: list[tuple[int, int]] = field(default_factory=list)
    k: int = 0
    waiting: bool = False
    slept_for_piece: bool = False
    preempt_after_sleep: bool = False
    need: list[int] = field(default_factory=list)
    ios: int = 0
    stopped: bool = False
    next_seq_sector: int = 0
    idle: bool = False
    inflight_ios: int = 0
    slot: int = 0
    io_left: list[int] = field(default_factory=list)
    io_full: list[bool] = field(default_factory=list)
    io_busy: list[bool] = field(default_factory=list)


def _setup(*, limits: QueueLimits, device: DeviceModel | str | Mapping[str, Any] | None,
           policy: Policy | None, wakeup: str | None, preempt: str | None,
           costs: HostCosts | None) -> tuple[str, str, HostCosts, DeviceModel, bool, int,
                                             TagQueue]:
    """What both engines of :func:`simulate_jobs` start from: the wake-up and preemption rules,
    host costs, the device model, and the tag queue threads sleep on (scheduler tags with an
    elevator, else the driver tags).

    Returns ``(wakeup, preempt, costs, device model, has elevator, tag depth, TagQueue)``.
    """
    pol = policy or Policy()
    wake = wakeup or pol.sbitmap_wakeup
    pre = preempt or pol.tag_preempt
    pre = VALUE_ALIASES["tag_preempt"].get(pre, pre)
    model = default_device(bool(limits.rotational)) if device is None else \
        device_from_spec(device)
    elevator = bool(limits.has_elevator)
    depth = limits.nr_requests if elevator else limits.queue_depth
    # mq-deadline's dd_depth_updated sets the scheduler map's min_shallow_depth to async_depth.
    shallow = max(1, 3 * depth // 4) if elevator else None
    tags = TagQueue(depth, wakeup=wake, preempt=pre, min_shallow_depth=shallow)  # validates
    return wake, pre, costs or HostCosts(), model, elevator, depth, tags


def _simulate_python(jobs: FioJobs, *, limits: QueueLimits,
                  device: DeviceModel | str | Mapping[str, Any] | None = None,
                  policy: Policy | None = None, wakeup: str | None = None,
                  preempt: str | None = None, costs: HostCosts | None = None,
                  dev: int = make_dev(8, 0), name: str = "sda", comm: str = "fio",
                  emit_events: bool = True) -> JobsResult:
    """The readable (Python) engine of :func:`simulate_jobs`: same arguments, same result.

    The compiled engine (:func:`_jobs_kernel`) must produce identical events; the tests compare
    the two column by column.
    """
    wake, pre, hc, model, elevator, depth, tags = _setup(
        limits=limits, device=device, policy=policy, wakeup=wakeup, preempt=preempt, costs=costs)
    server = DeviceServer(model)
    capacity = int(getattr(model, "capacity_sectors", 1 << 40))
    op = OP_WRITE if jobs.is_write else OP_READ
    rwbs = (RWBS_WRITE | RWBS_SYNC) if jobs.is_write else RWBS_READ
    bs_sectors = jobs.bs >> 9
    rand_block = _rand_block
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
    # The drive's write-back cache (HDDModel.write_cache_bytes; writes only): commands wait
    # in the drive (``adm``, they hold their driver tag) until their data fits, complete
    # once it is in (link transfer), and dirty extents are destaged C-LOOK from the head.
    wcache, w_iface, w_oh = _write_cache_args(model, jobs.is_write)
    adm: deque[int] = deque()
    dirty: list[tuple[int, int, int]] = []  # (sector, rid, nr) sorted
    wc = [0, 0, 0, 0, 0]  # used bytes, destaging, media head, media sequential, destages
    link_free = [0.0]
    kind_code, dev_p = server._kind, server._p

    # request records
    r_sector: list[int] = []
    r_nr: list[int] = []
    r_job: list[int] = []
    r_tag: list[int] = []
    r_slot: list[int] = []
    iodepth = jobs.iodepth

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
                             next_seq_sector=start, io_left=[0] * jobs.iodepth,
                             io_full=[False] * jobs.iodepth,
                             io_busy=[False] * jobs.iodepth))

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

    def admit(t: int) -> None:
        """Cache admission: FIFO, whole commands, the link serialises the transfers."""
        while adm:
            rid = adm[0]
            nbytes = r_nr[rid] << 9
            if wc[0] and wc[0] + nbytes > wcache:
                break
            adm.popleft()
            wc[0] += nbytes
            s, n = r_sector[rid], r_nr[rid]
            bisect.insort(dirty, (s, rid, n))
            ack = max(float(t), link_free[0]) + w_oh + nbytes / w_iface * 1e9
            link_free[0] = ack
            c = int(math.ceil(ack))
            if emit:
                flat_extend((c, 0, ACT_COMPLETE, s, n, 0))
            heappush(heap, (c, next(counter), _COMPLETE, rid))
        if not wc[1] and dirty:
            # destage: C-LOOK, the first dirty extent at or after the head, else the lowest
            pos = bisect.bisect_left(dirty, (wc[2], -1, 0))
            if pos >= len(dirty):
                pos = 0
            s, _rid, n = dirty.pop(pos)
            if s == wc[2]:
                wc[3] += 1
            wc[4] += 1
            setup, xfer = _service_parts(kind_code, dev_p, s, n, True, False, wc[2])
            wc[2] = s + n
            wc[1] = 1
            heappush(heap, (int(math.ceil(t + setup + xfer)), next(counter), _DESTAGED, n))

    def dispatch(t: int) -> None:
        nonlocal inflight, seq_hits, dispatched, last_end
        while inflight < limits.queue_depth:
            if elevator:
                if not dd:
                    break
                rid = dd.pop(t)
            else:
                if not direct:
                    break
                rid = direct.popleft()
            s, n = r_sector[rid], r_nr[rid]
            if s == last_end:
                seq_hits += 1
            dispatched += 1
            last_end = s + n
            if wcache:
                if emit:
                    flat_extend((t, job_list[r_job[rid]].pid, ACT_ISSUE, s, n, 0))
                inflight += 1
                adm.append(rid)
                continue
            c = submit(t, s, n, is_write)
            if emit:
                flat_extend((t, job_list[r_job[rid]].pid, ACT_ISSUE, s, n, 0,
                             c, 0, ACT_COMPLETE, s, n, 0))
            inflight += 1
            heappush(heap, (c, next(counter), _COMPLETE, rid))
        if wcache:
            admit(t)

    def new_io(job: _Job, t: int) -> bool:
        if t >= end_ns or (jobs.count and job.ios >= jobs.count):
            job.stopped = True
            return False
        if jobs.is_random:
            blocks = job.region_sectors // bs_sectors
            s = job.region_start + int(rand_block(jobs.seed, job.pid - 1000, job.ios,
                                                   blocks)) * bs_sectors
        else:
            s = job.next_seq_sector
            nxt = s + bs_sectors
            job.next_seq_sector = nxt if nxt + bs_sectors <= job.region_start + \
                job.region_sectors else job.region_start
        job.pieces, job.need = split_pieces(s)
        job.k = 0
        job.ios += 1
        slot = job.io_busy.index(False)
        job.slot = slot
        job.io_busy[slot] = True
        job.io_left[slot] = 0
        job.io_full[slot] = False
        job.inflight_ios += 1
        if emit:
            flat_extend((t, job.pid, ACT_QUEUE, s, bs_sectors, 0))
        return True

    def run(j: int, t: int) -> None:
        nonlocal rescues
        job = job_list[j]
        if job.waiting:
            tags.finish_wait(j)
            job.waiting = False
            if pre == "waiters_first":
                job.preempt_after_sleep = True  # data->preemption = true after io_schedule
        if job.k >= len(job.pieces):
            if job.inflight_ios >= iodepth or job.stopped or not new_io(job, t):
                job.idle = True
                return
        s, n = job.pieces[job.k]
        last = job.k == len(job.pieces) - 1
        preemption = job.preempt_after_sleep or (pre == "waiters_first" and job.k > 0)
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
        r_slot.append(job.slot)
        job.io_left[job.slot] += 1
        if emit:
            flat_extend((t, job.pid, ACT_GETRQ, s, n, 0, t, job.pid, ACT_INSERT, s, n, 0))
        if elevator:
            dd.add(t, rid, s)
        else:
            direct.append(rid)
        job.k += 1
        if job.k >= len(job.pieces):
            job.io_full[job.slot] = True
        dispatch(t)
        if job.k < len(job.pieces) or (job.inflight_ios < iodepth and not job.stopped):
            heappush(heap, (t + submit_ns, next(counter), _RUN, j))
        else:
            job.idle = True

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
        slot = r_slot[rid]
        job.io_left[slot] -= 1
        if job.io_left[slot] == 0 and job.io_full[slot]:
            ios_done += 1
            job.io_busy[slot] = False
            job.inflight_ios -= 1
            if job.idle:
                job.idle = False
                push(t + hc.wakeup_ns + hc.think_ns, _RUN, r_job[rid])
        dispatch(t)

    while heap:
        t, _, kind, arg = heapq.heappop(heap)
        if t > end_ns:
            break
        if kind == _RUN:
            run(arg, t)
        elif kind == _COMPLETE:
            complete(arg, t)
        else:  # _DESTAGED: the media write finished, its bytes leave the cache
            wc[1] = 0
            wc[0] -= arg << 9
            dispatch(t)  # a no-op for the elevator (nothing changed since the last event)

    window_end = end_ns if jobs.runtime_ns > 0 else last_c
    meta = {
        "model": "simulate_jobs",
        "workload": {"rw": jobs.rw, "bs": jobs.bs, "numjobs": jobs.numjobs,
                     "offset_increment": jobs.offset_increment, "iodepth": jobs.iodepth},
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
        media_sequential_fraction=(wc[3] / wc[4] if wc[4] else 0.0) if wcache else
        (seq_hits / dispatched if dispatched else 0.0),
        tag_stats={"gets": st.gets, "sleeps": st.sleeps, "wakeups": st.wakeups,
                   "preempted": st.preempted, "refused_preempt": st.refused_preempt,
                   "max_ws_active": st.max_ws_active},
        max_waiters_per_queue=max_ws,
        rescues=rescues,
    )


# ============================================================================================
# simulate_jobs, compiled: the same simulation as _simulate_python, event for event
# ============================================================================================
@njit(cache=True, error_model="numpy")
def _ev_put(ev: npt.NDArray[np.int64], n: _I, t: _I, pid: _I, act: _I, s: _I, nr: _I,
            aux: _I) -> npt.NDArray[np.int64]:
    if n >= ev.shape[0]:
        bigger = np.empty((ev.shape[0] * 2, 6), np.int64)
        bigger[:n] = ev[:n]
        ev = bigger
    ev[n, 0] = t
    ev[n, 1] = pid
    ev[n, 2] = act
    ev[n, 3] = s
    ev[n, 4] = nr
    ev[n, 5] = aux
    return ev


@njit(cache=True, error_model="numpy")
def _hpush(h: npt.NDArray[np.int64], n: _I, t: _I, seq: _I, kind: _I,
           arg: _I) -> npt.NDArray[np.int64]:
    """Push onto a binary min-heap of rows (time, seq, kind, arg) ordered by (time, seq)."""
    if n >= h.shape[0]:
        bigger = np.empty((h.shape[0] * 2, 4), np.int64)
        bigger[:n] = h[:n]
        h = bigger
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        if h[parent, 0] < t or (h[parent, 0] == t and h[parent, 1] < seq):
            break
        h[i] = h[parent]
        i = parent
    h[i, 0] = t
    h[i, 1] = seq
    h[i, 2] = kind
    h[i, 3] = arg
    return h


@njit(cache=True, error_model="numpy")
def _hpop(h: npt.NDArray[np.int64], n: _I) -> tuple[_I, _I, _I, _I]:
    """Pop the smallest row of a heap of ``n`` rows (the caller decrements n)."""
    t, seq, kind, arg = h[0, 0], h[0, 1], h[0, 2], h[0, 3]
    n -= 1
    lt, ls = h[n, 0], h[n, 1]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (h[c + 1, 0] < h[c, 0] or (h[c + 1, 0] == h[c, 0]
                                                   and h[c + 1, 1] < h[c, 1])):
            c += 1
        if lt < h[c, 0] or (lt == h[c, 0] and ls < h[c, 1]):
            break
        h[i] = h[c]
        i = c
    if n > 0:
        h[i, 0] = lt
        h[i, 1] = ls
        h[i, 2] = h[n, 2]
        h[i, 3] = h[n, 3]
    return t, seq, kind, arg


@njit(cache=True, error_model="numpy")
def _wq_pop(wq: npt.NDArray[np.int64], wh: npt.NDArray[np.int64], wn: npt.NDArray[np.int64],
            queued: npt.NDArray[np.bool_], w: _I, cap: _I, limit: _I, by_need: bool,
            nrt: npt.NDArray[np.int64], wk: npt.NDArray[np.int64], nw: _I) -> tuple[int, int]:
    """wake_up_nr on wait queue ``w``: pop waiters in order until ``limit`` is covered.

    Each thread covers 1 (``wake_up_nr``) or, with ``by_need``, the tags it still needs
    (``waiters_first``: seed 003's ``get_wake_nr``). Returns (new woken count, covered).
    """
    covered = 0
    while covered < limit and wn[w] > 0:
        th = wq[w, wh[w]]
        wh[w] = (wh[w] + 1) % cap
        wn[w] -= 1
        queued[th] = False
        wk[nw] = th
        nw += 1
        covered += nrt[th] if by_need else 1
    return int(nw), int(covered)


@njit(cache=True, error_model="numpy")
def _key_less(s1: _I, r1: _I, s2: _I, r2: _I) -> bool:
    return bool(s1 < s2 or (s1 == s2 and r1 < r2))


@njit(cache=True, error_model="numpy")
def _jobs_kernel(cfg: npt.NDArray[np.int64], region_start: npt.NDArray[np.int64],
                 region_sectors: npt.NDArray[np.int64], slot_of_mod: npt.NDArray[np.int64],
                 p_off: npt.NDArray[np.int64], p_len: npt.NDArray[np.int64],
                 p_need: npt.NDArray[np.int64], p_n: npt.NDArray[np.int64],
                 dev_kind: int, dev_p: npt.NDArray[np.float64], dev_par: int,
                 dev_excl: bool, wc_f: npt.NDArray[np.float64]
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The event loop of :func:`simulate_jobs` over arrays (see ``_simulate_python``).

    Tags index the in-flight request records; ``rid`` (a running count) only breaks ties in
    the elevator's sector order exactly as the Python engine's request ids do.
    """
    numjobs, seed, is_random, is_write, bs_sectors, count = cfg[0], cfg[1], cfg[2], cfg[3], \
        cfg[4], cfg[5]
    end_ns, ramp, submit_ns, wakeup_ns, think_ns = cfg[6], cfg[7], cfg[8], cfg[9], cfg[10]
    elevator, queue_depth, depth, wb, wake_mode, pre = cfg[11], cfg[12], cfg[13], cfg[14], \
        cfg[15], cfg[16]
    expire_ns, fifo_batch, emit, mod_l, iodepth = cfg[17], cfg[18], cfg[19], cfg[20], cfg[21]
    wcache = cfg[22]
    w_iface, w_oh = wc_f[0], wc_f[1]
    # --- write-back cache (see _simulate_python's admit)
    adm = np.zeros(queue_depth + 1, np.int64)
    admh = 0
    admn = 0
    dcap = (wcache // 512 + queue_depth + 2) if wcache > 0 else 1
    d_sec = np.zeros(dcap, np.int64)
    d_rid = np.zeros(dcap, np.int64)
    d_nr = np.zeros(dcap, np.int64)
    dn = 0
    wc_used = 0
    wc_busy = False
    wc_head = np.int64(0)
    wc_seq = 0
    wc_n = 0
    link_free = 0.0
    nq = 8
    # int64 (not literal) constants: one compiled variant of each helper instead of eight
    z64 = np.int64(0)
    k_run = np.int64(0)
    k_done = np.int64(1)
    a_q = np.int64(ACT_QUEUE)
    a_x = np.int64(ACT_SPLIT)
    a_s = np.int64(ACT_SLEEPRQ)
    a_g = np.int64(ACT_GETRQ)
    a_i = np.int64(ACT_INSERT)
    a_d = np.int64(ACT_ISSUE)
    a_c = np.int64(ACT_COMPLETE)
    no_discard = cfg[0] < 0
    # --- jobs
    j_k = np.zeros(numjobs, np.int64)
    j_np = np.zeros(numjobs, np.int64)
    j_slot = np.zeros(numjobs, np.int64)
    j_base = np.zeros(numjobs, np.int64)
    j_infl = np.zeros(numjobs, np.int64)  # I/Os in flight
    j_idle = np.zeros(numjobs, np.bool_)
    j_io = np.zeros(numjobs, np.int64)  # slot of the I/O being submitted
    io_left = np.zeros((numjobs, iodepth), np.int64)
    io_full = np.zeros((numjobs, iodepth), np.bool_)
    io_busy = np.zeros((numjobs, iodepth), np.bool_)
    j_wait = np.zeros(numjobs, np.bool_)
    j_slept = np.zeros(numjobs, np.bool_)
    j_pas = np.zeros(numjobs, np.bool_)
    j_ios = np.zeros(numjobs, np.int64)
    j_stop = np.zeros(numjobs, np.bool_)
    j_next = region_start.copy()
    # --- tags (TagQueue)
    free = np.empty(depth, np.int64)
    for i in range(depth):
        free[i] = depth - 1 - i
    nfree = depth
    cap = numjobs + 1
    wq = np.empty((nq, cap), np.int64)
    wh = np.zeros(nq, np.int64)
    wn = np.zeros(nq, np.int64)
    queued = np.zeros(numjobs, np.bool_)
    where = np.full(numjobs, -1, np.int64)
    nrt = np.ones(numjobs, np.int64)
    waiters_cnt = np.zeros(nq, np.int64)
    wait_cnt = np.full(nq, wb, np.int64)
    wake_index = 0
    hctx = 0
    ws_active = 0
    completion_cnt = 0
    wakeup_cnt = 0
    force = True
    st_gets = 0
    st_sleeps = 0
    st_wakeups = 0
    st_pre = 0
    st_ref = 0
    st_maxws = 0
    wk = np.empty(numjobs + 1, np.int64)
    # --- requests by tag
    r_sec = np.zeros(depth, np.int64)
    r_nr = np.zeros(depth, np.int64)
    r_job = np.zeros(depth, np.int64)
    r_rid = np.full(depth, -1, np.int64)
    r_io = np.zeros(depth, np.int64)
    pend = np.zeros(depth, np.bool_)
    rid_next = 0
    # --- elevator
    ksec = np.zeros(depth, np.int64)
    krid = np.zeros(depth, np.int64)
    ktag = np.zeros(depth, np.int64)
    kn = 0
    fcap = 4 * depth + 16
    f_t = np.zeros(fcap, np.int64)
    f_rid = np.zeros(fcap, np.int64)
    f_sec = np.zeros(fcap, np.int64)
    f_tag = np.zeros(fcap, np.int64)
    fh = 0
    fe = 0
    batching = 0
    last_sec = -1
    last_rid = -1
    dq = np.zeros(depth, np.int64)  # scheduler none: FIFO ring of tags
    dqh = 0
    dqn = 0
    # --- device
    units = np.zeros(max(dev_par, 1), np.float64)
    bus_free = 0.0
    dev_last_c = 0.0
    head = np.int64(-1)
    # --- results
    ev = np.empty((1024, 6), np.int64)
    nev = np.int64(0)
    inflight = np.int64(0)
    bytes_window = 0
    ios_done = 0
    requests_done = 0
    seq_hits = 0
    dispatched = 0
    last_end = np.int64(-1)
    rescues = 0
    last_c = np.int64(0)
    max_ws = np.zeros(nq, np.int64)
    # --- event heap: (time, seq, kind, arg); kind 0 = run job, 1 = complete tag
    heap = np.empty((numjobs + 2 * depth + 16, 4), np.int64)
    hn = np.int64(0)
    seqc = np.int64(0)
    for j in range(numjobs):
        heap = _hpush(heap, hn, j * 1000, seqc, k_run, j)
        hn += 1
        seqc += 1

    while hn > 0:
        t, _, kind, arg = _hpop(heap, hn)
        hn -= 1
        if t > end_ns:
            break
        do_dispatch = False
        run_next = False
        j = -1
        if kind == 0:
            j = arg  # type: ignore[assignment]
            if j_wait[j]:
                # finish_wait
                idx = where[j]
                if idx >= 0:
                    where[j] = -1
                    waiters_cnt[idx] -= 1
                    ws_active -= 1
                    if queued[j]:
                        queued[j] = False
                        m = wn[idx]
                        pos = -1
                        for q in range(m):
                            if wq[idx, (wh[idx] + q) % cap] == j:
                                pos = q
                                break
                        if pos >= 0:
                            for q in range(pos, m - 1):
                                wq[idx, (wh[idx] + q) % cap] = wq[idx, (wh[idx] + q + 1) % cap]
                            wn[idx] -= 1
                j_wait[j] = False
                if pre == 1:
                    j_pas[j] = True
            if j_k[j] >= j_np[j]:
                if j_infl[j] >= iodepth or j_stop[j]:
                    j_idle[j] = True
                    continue
                if t >= end_ns or (count > 0 and j_ios[j] >= count):
                    j_stop[j] = True
                    j_idle[j] = True
                    continue
                if is_random:
                    blocks = region_sectors[j] // bs_sectors
                    s0 = region_start[j] + _rand_block(seed, j, j_ios[j], blocks) * bs_sectors
                else:
                    s0 = j_next[j]
                    nxt = s0 + bs_sectors
                    if nxt + bs_sectors <= region_start[j] + region_sectors[j]:
                        j_next[j] = nxt
                    else:
                        j_next[j] = region_start[j]
                slot = slot_of_mod[s0 % mod_l]
                j_base[j] = s0
                j_slot[j] = slot
                j_np[j] = p_n[slot]
                j_k[j] = 0
                j_ios[j] += 1
                io = 0
                while io_busy[j, io]:
                    io += 1
                j_io[j] = io
                io_busy[j, io] = True
                io_left[j, io] = 0
                io_full[j, io] = False
                j_infl[j] += 1
                if emit:
                    ev = _ev_put(ev, nev, t, 1000 + j, a_q, s0, bs_sectors, z64)
                    nev += 1
            k = j_k[j]
            slot = j_slot[j]
            s = j_base[j] + p_off[slot, k]
            n = p_len[slot, k]
            last = k == j_np[j] - 1
            preemption = j_pas[j] or (pre == 1 and k > 0)
            # TagQueue.get
            tag = -1
            if pre == 1 and not (preemption or ws_active <= nq or force):
                if nfree > 0:
                    st_ref += 1
            elif nfree > 0:
                st_gets += 1
                if ws_active > 0:
                    st_pre += 1
                nfree -= 1
                tag = free[nfree]
            if tag < 0:
                if not j_slept[j]:
                    if emit:
                        if not last:
                            ev = _ev_put(ev, nev, t, 1000 + j, a_x, s, n, s + n)
                            nev += 1
                        ev = _ev_put(ev, nev, t, 1000 + j, a_s, s, n, z64)
                        nev += 1
                    j_slept[j] = True
                # prepare_to_wait
                idx = hctx
                hctx = (idx + 1) % nq
                wq[idx, (wh[idx] + wn[idx]) % cap] = j
                wn[idx] += 1
                queued[j] = True
                waiters_cnt[idx] += 1
                ws_active += 1
                where[j] = idx
                nrt[j] = max(1, p_need[slot, k])
                st_sleeps += 1
                if ws_active > st_maxws:
                    st_maxws = ws_active
                j_wait[j] = True
                if waiters_cnt[idx] > max_ws[idx]:
                    max_ws[idx] = waiters_cnt[idx]
                if nfree == depth:
                    rescues += 1
                    nw = 0
                    for w in range(nq):
                        nw, _c = _wq_pop(wq, wh, wn, queued, w, cap, cap, False, nrt, wk, nw)
                    st_wakeups += nw
                    for q in range(nw):
                        heap = _hpush(heap, hn, t + wakeup_ns, seqc, k_run, wk[q])
                        hn += 1
                        seqc += 1
                continue
            if emit and not j_slept[j] and not last:
                ev = _ev_put(ev, nev, t, 1000 + j, a_x, s, n, s + n)
                nev += 1
            j_slept[j] = False
            j_pas[j] = False
            rid = rid_next
            rid_next += 1
            r_sec[tag] = s
            r_nr[tag] = n
            r_job[tag] = j
            r_rid[tag] = rid
            if emit:
                ev = _ev_put(ev, nev, t, 1000 + j, a_g, s, n, z64)
                nev += 1
                ev = _ev_put(ev, nev, t, 1000 + j, a_i, s, n, z64)
                nev += 1
            if elevator:
                # insort (s, rid)
                pos = kn
                while pos > 0 and _key_less(s, rid, ksec[pos - 1], krid[pos - 1]):
                    ksec[pos] = ksec[pos - 1]
                    krid[pos] = krid[pos - 1]
                    ktag[pos] = ktag[pos - 1]
                    pos -= 1
                ksec[pos] = s
                krid[pos] = rid
                ktag[pos] = tag
                kn += 1
                if fe >= fcap:
                    live = fe - fh
                    if fh > 0:
                        f_t[:live] = f_t[fh:fe].copy()
                        f_rid[:live] = f_rid[fh:fe].copy()
                        f_sec[:live] = f_sec[fh:fe].copy()
                        f_tag[:live] = f_tag[fh:fe].copy()
                    if live >= fcap // 2:
                        fcap *= 2
                        nt = np.zeros(fcap, np.int64)
                        nt[:live] = f_t[:live]
                        f_t = nt
                        nr_ = np.zeros(fcap, np.int64)
                        nr_[:live] = f_rid[:live]
                        f_rid = nr_
                        ns_ = np.zeros(fcap, np.int64)
                        ns_[:live] = f_sec[:live]
                        f_sec = ns_
                        ng = np.zeros(fcap, np.int64)
                        ng[:live] = f_tag[:live]
                        f_tag = ng
                    fh = 0
                    fe = live
                f_t[fe] = t
                f_rid[fe] = rid
                f_sec[fe] = s
                f_tag[fe] = tag
                fe += 1
                pend[tag] = True
            else:
                dq[(dqh + dqn) % depth] = tag
                dqn += 1
            r_io[tag] = j_io[j]
            io_left[j, j_io[j]] += 1
            j_k[j] = k + 1
            if j_k[j] >= j_np[j]:
                io_full[j, j_io[j]] = True
            do_dispatch = True
            run_next = j_k[j] < j_np[j] or (j_infl[j] < iodepth and not j_stop[j])
            if not run_next:
                j_idle[j] = True
        elif kind == 2:
            wc_busy = False
            wc_used -= arg << 9
            do_dispatch = True
        else:
            tag = arg  # type: ignore[assignment]
            inflight -= 1
            requests_done += 1
            last_c = t  # type: ignore[assignment]
            if ramp <= t and t <= end_ns:
                bytes_window += r_nr[tag] << 9
            j = r_job[tag]
            # TagQueue.put -> wake_up(1)
            free[nfree] = tag
            nfree += 1
            nw = 0
            if ws_active > 0:
                if wake_mode == 1:
                    completion_cnt += 1
                    while completion_cnt - wakeup_cnt >= wb:
                        wakeup_cnt += wb
                        if pre == 1:
                            force = nfree >= 2 * wb
                        left = wb
                        idx = wake_index
                        for _q in range(nq):
                            w = idx
                            idx = (idx + 1) % nq
                            if wn[w] == 0:
                                continue
                            nw, got = _wq_pop(wq, wh, wn, queued, w, cap, left, pre == 1, nrt,
                                              wk, nw)
                            left -= got
                            if left <= 0:
                                break
                        wake_index = idx
                elif pre == 1:
                    idx = wake_index
                    wait_cnt[idx] -= 1
                    if wait_cnt[idx] <= 0:
                        best = -1
                        best_n = 0
                        for i in range(nq):
                            if i != idx and waiters_cnt[i] > best_n:
                                best = i
                                best_n = waiters_cnt[i]
                        if best_n > 0:
                            wake_index = best
                        wait_cnt[idx] = wb
                        force = nfree >= 2 * wb
                        if wn[idx] > 0:
                            # get_wake_nr
                            cnt = 1
                            left = wb
                            for q in range(wn[idx]):
                                need = nrt[wq[idx, (wh[idx] + q) % cap]]
                                if left <= need:
                                    break
                                cnt += 1
                                left -= need
                            nw, _c = _wq_pop(wq, wh, wn, queued, idx, cap, cnt, False, nrt,
                                             wk, nw)
                else:
                    idx = wake_index
                    found = False
                    for _q in range(nq):
                        if wn[idx] > 0:
                            found = True
                            break
                        idx = (idx + 1) % nq
                    if found:
                        wake_index = idx
                        wait_cnt[idx] -= 1
                        if wait_cnt[idx] <= 0:
                            wait_cnt[idx] = wb
                            wake_index = (idx + 1) % nq
                            nw, _c = _wq_pop(wq, wh, wn, queued, idx, cap, wb, False, nrt,
                                             wk, nw)
                st_wakeups += nw
            for q in range(nw):
                heap = _hpush(heap, hn, t + wakeup_ns, seqc, k_run, wk[q])
                hn += 1
                seqc += 1
            io = r_io[tag]
            io_left[j, io] -= 1
            if io_left[j, io] == 0 and io_full[j, io]:
                ios_done += 1
                io_busy[j, io] = False
                j_infl[j] -= 1
                if j_idle[j]:
                    j_idle[j] = False
                    heap = _hpush(heap, hn, t + wakeup_ns + think_ns, seqc, k_run, j)
                    hn += 1
                    seqc += 1
            do_dispatch = True
        if not do_dispatch:
            continue
        # dispatch(t)
        while inflight < queue_depth:
            if elevator:
                if kn == 0:
                    break
                # first key > (last_sec, last_rid)
                lo = 0
                hi = kn
                while lo < hi:
                    mid = (lo + hi) // 2
                    if _key_less(last_sec, last_rid, ksec[mid], krid[mid]):
                        hi = mid
                    else:
                        lo = mid + 1
                pos = lo
                has_nxt = pos < kn
                if not (has_nxt and batching < fifo_batch):
                    while not (pend[f_tag[fh]] and r_rid[f_tag[fh]] == f_rid[fh]):
                        fh += 1
                    if not has_nxt or t - f_t[fh] >= expire_ns:
                        s0 = f_sec[fh]
                        r0 = f_rid[fh]
                        lo = 0
                        hi = kn
                        while lo < hi:
                            mid = (lo + hi) // 2
                            if _key_less(ksec[mid], krid[mid], s0, r0):
                                lo = mid + 1
                            else:
                                hi = mid
                        pos = lo
                    batching = 0
                batching += 1
                tag = ktag[pos]
                last_sec = ksec[pos]
                last_rid = krid[pos]
                for q in range(pos, kn - 1):
                    ksec[q] = ksec[q + 1]
                    krid[q] = krid[q + 1]
                    ktag[q] = ktag[q + 1]
                kn -= 1
                pend[tag] = False
            else:
                if dqn == 0:
                    break
                tag = dq[dqh]
                dqh = (dqh + 1) % depth
                dqn -= 1
            s = r_sec[tag]
            n = r_nr[tag]
            if s == last_end:
                seq_hits += 1
            dispatched += 1
            last_end = s + n
            if wcache > 0:
                if emit:
                    ev = _ev_put(ev, nev, t, 1000 + r_job[tag], a_d, s, n, z64)
                    nev += 1
                inflight += 1
                adm[(admh + admn) % (queue_depth + 1)] = tag
                admn += 1
                continue
            # DeviceServer.submit
            u = 0
            for q in range(1, len(units)):
                if units[q] < units[u]:
                    u = q
            start = max(float(t), units[u])
            setup, xfer = _service_parts(dev_kind, dev_p, s, n, is_write == 1, no_discard,
                                         int(head))
            c = max(start + setup, bus_free) + xfer
            units[u] = c
            bus_free = c
            if c > dev_last_c:
                dev_last_c = c
            head = s + n
            ci = int(math.ceil(c))
            if emit:
                ev = _ev_put(ev, nev, t, 1000 + r_job[tag], a_d, s, n, z64)
                nev += 1
                ev = _ev_put(ev, nev, ci, z64, a_c, s, n, z64)
                nev += 1
            inflight += 1
            heap = _hpush(heap, hn, ci, seqc, k_done, tag)
            hn += 1
            seqc += 1
        if wcache > 0:
            # admit: FIFO, whole commands, the link serialises the transfers
            while admn > 0:
                tag = adm[admh]
                nbytes = r_nr[tag] << 9
                if wc_used > 0 and wc_used + nbytes > wcache:
                    break
                admh = (admh + 1) % (queue_depth + 1)
                admn -= 1
                wc_used += nbytes
                s = r_sec[tag]
                n = r_nr[tag]
                rid = r_rid[tag]
                pos = dn  # insort by (sector, rid)
                while pos > 0 and _key_less(s, rid, d_sec[pos - 1], d_rid[pos - 1]):
                    d_sec[pos] = d_sec[pos - 1]
                    d_rid[pos] = d_rid[pos - 1]
                    d_nr[pos] = d_nr[pos - 1]
                    pos -= 1
                d_sec[pos] = s
                d_rid[pos] = rid
                d_nr[pos] = n
                dn += 1
                ack = max(float(t), link_free) + w_oh + nbytes / w_iface * 1e9
                link_free = ack
                ci = int(math.ceil(ack))
                if emit:
                    ev = _ev_put(ev, nev, ci, z64, a_c, s, n, z64)
                    nev += 1
                heap = _hpush(heap, hn, ci, seqc, k_done, tag)
                hn += 1
                seqc += 1
            if not wc_busy and dn > 0:
                # destage: C-LOOK, the first dirty extent at or after the head, else the lowest
                lo = 0
                hi = dn
                while lo < hi:
                    mid = (lo + hi) // 2
                    if d_sec[mid] < wc_head:
                        lo = mid + 1
                    else:
                        hi = mid
                pos = lo if lo < dn else 0
                s = d_sec[pos]
                n = d_nr[pos]
                for q in range(pos, dn - 1):
                    d_sec[q] = d_sec[q + 1]
                    d_rid[q] = d_rid[q + 1]
                    d_nr[q] = d_nr[q + 1]
                dn -= 1
                if s == wc_head:
                    wc_seq += 1
                wc_n += 1
                setup, xfer = _service_parts(dev_kind, dev_p, s, n, True, False, int(wc_head))
                wc_head = s + n
                wc_busy = True
                heap = _hpush(heap, hn, int(math.ceil(t + setup + xfer)), seqc, np.int64(2), n)
                hn += 1
                seqc += 1
        if run_next:
            heap = _hpush(heap, hn, t + submit_ns, seqc, k_run, j)
            hn += 1
            seqc += 1

    out = np.array([bytes_window, ios_done, requests_done, seq_hits, dispatched, rescues,
                    last_c, st_gets, st_sleeps, st_wakeups, st_pre, st_ref, st_maxws, wc_seq,
                    wc_n],
                   dtype=np.int64)
    return ev[:nev], out, max_ws


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


def _job_regions(jobs: FioJobs, capacity: int) -> tuple[npt.NDArray[np.int64],
                                                        npt.NDArray[np.int64]]:
    bs_sectors = jobs.bs >> 9
    inc = jobs.offset_increment >> 9
    starts = np.empty(jobs.numjobs, np.int64)
    spans = np.empty(jobs.numjobs, np.int64)
    for j in range(jobs.numjobs):
        start = (j * inc) % capacity
        span = (jobs.size >> 9) if jobs.size else capacity - start
        span = min(span, capacity - start)
        span -= span % bs_sectors
        if span < bs_sectors:
            raise ModelConfigError(f"job {j} has no room for one {jobs.bs}-byte I/O "
                                   f"(offset {start} of {capacity} sectors)")
        starts[j] = start
        spans[j] = span
    return starts, spans


def _split_table(jobs: FioJobs, limits: QueueLimits, starts: npt.NDArray[np.int64]
                 ) -> tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64],
                            npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Relative splits of a ``bs`` bio for every start residue the jobs can produce.

    ``bio_split_to_limits`` sees the start only through ``start % chunk_sectors`` and
    ``start % physical block``; both are functions of ``start % L`` with L their lcm.
    """
    bs_sectors = jobs.bs >> 9
    mod_l = math.lcm(max(limits.chunk_sectors, 1), limits.pbs_sectors)
    residues: set[int] = set()
    step = bs_sectors % mod_l
    period = mod_l // math.gcd(step, mod_l) if step else 1
    for r0 in {int(s) % mod_l for s in starts}:
        for m in range(period):
            residues.add((r0 + m * step) % mod_l)
    op = OP_WRITE if jobs.is_write else OP_READ
    max_sectors = max(limits.max_sectors, 1)
    rows: list[tuple[list[int], list[int], list[int]]] = []
    slot_of_mod = np.zeros(mod_l, np.int64)
    for r in sorted(residues):
        res = split_bio(r, bs_sectors, limits, op=op)
        offs = [ps - r for ps, _ in res.pieces]
        lens = [pn for _, pn in res.pieces]
        need = [1 + (sum(lens[k:]) - 1) // max_sectors for k in range(len(lens))]
        slot_of_mod[r] = len(rows)
        rows.append((offs, lens, need))
    width = max(len(r[0]) for r in rows)
    p_off = np.zeros((len(rows), width), np.int64)
    p_len = np.zeros((len(rows), width), np.int64)
    p_need = np.zeros((len(rows), width), np.int64)
    p_n = np.zeros(len(rows), np.int64)
    for i, (offs, lens, need) in enumerate(rows):
        p_off[i, :len(offs)] = offs
        p_len[i, :len(lens)] = lens
        p_need[i, :len(need)] = need
        p_n[i] = len(offs)
    return mod_l, slot_of_mod, p_off, p_len, p_need, p_n


def _simulate_numba(jobs: FioJobs, *, limits: QueueLimits,
                    device: DeviceModel | str | Mapping[str, Any] | None, policy: Policy | None,
                    wakeup: str | None, preempt: str | None, costs: HostCosts | None, dev: int,
                    name: str, comm: str, emit_events: bool) -> JobsResult:
    wake, pre, hc, model, elevator, depth, tags = _setup(
        limits=limits, device=device, policy=policy, wakeup=wakeup, preempt=preempt, costs=costs)
    wcache, w_iface, w_oh = _write_cache_args(model, jobs.is_write)
    capacity = int(getattr(model, "capacity_sectors", 1 << 40))
    starts, spans = _job_regions(jobs, capacity)
    mod_l, slot_of_mod, p_off, p_len, p_need, p_n = _split_table(jobs, limits, starts)
    end_ns = jobs.runtime_ns if jobs.runtime_ns > 0 else 1 << 62
    cfg = np.array([
        jobs.numjobs, jobs.seed, int(jobs.is_random), int(jobs.is_write), jobs.bs >> 9,
        jobs.count, end_ns, jobs.ramp_ns, hc.submit_ns, hc.wakeup_ns, hc.think_ns,
        int(elevator), limits.queue_depth, depth, tags.wake_batch,
        1 if wake == "global" else 0, 1 if pre == "waiters_first" else 0,
        DD_WRITE_EXPIRE_NS if jobs.is_write else DD_READ_EXPIRE_NS, DD_FIFO_BATCH,
        int(emit_events), mod_l, jobs.iodepth, wcache,
    ], dtype=np.int64)
    kind, p, par, excl = _kernel_args(model)
    ev, out, max_ws = _jobs_kernel(cfg, starts, spans, slot_of_mod, p_off, p_len, p_need, p_n,
                                   kind, p, par, excl, np.array([w_iface, w_oh], np.float64))
    rwbs = (RWBS_WRITE | RWBS_SYNC) if jobs.is_write else RWBS_READ
    events = _Events(emit_events)
    meta = {
        "model": "simulate_jobs",
        "workload": {"rw": jobs.rw, "bs": jobs.bs, "numjobs": jobs.numjobs,
                     "offset_increment": jobs.offset_increment, "iodepth": jobs.iodepth},
        "policy": {"sbitmap_wakeup": wake, "tag_preempt": pre},
        "device": model.to_json(),
    }
    table = events.table(dev, rwbs, comm, meta, limits, name, end_ns, arr=ev)
    (bytes_window, ios_done, requests_done, seq_hits, dispatched, rescues, last_c, gets, sleeps,
     wakeups, preempted, refused, max_ws_active, wc_seq, wc_n) = (int(x) for x in out)
    seq = seq_hits / dispatched if dispatched else 0.0
    window_end = end_ns if jobs.runtime_ns > 0 else last_c
    return JobsResult(
        table=table,
        bytes_in_window=bytes_window,
        window_ns=max(window_end - jobs.ramp_ns, 0),
        ios_done=ios_done,
        requests_done=requests_done,
        sequential_fraction=seq_hits / dispatched if dispatched else 0.0,
        tag_stats={"gets": gets, "sleeps": sleeps, "wakeups": wakeups, "preempted": preempted,
                   "refused_preempt": refused, "max_ws_active": max_ws_active},
        max_waiters_per_queue=[int(x) for x in max_ws],
        rescues=rescues,
        media_sequential_fraction=(wc_seq / wc_n if wc_n else 0.0) if wcache else seq,
    )


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
