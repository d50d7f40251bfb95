"""Many submitting threads on one disk: fio-like psync jobs contending for tags (Python engine).

:func:`simulate_jobs` and the readable reference engine built on
:class:`~workers.model.sbitmap.TagQueue`, an mq-deadline-like elevator and
:class:`~workers.model.server.DeviceServer`; :mod:`workers.model.jobs_fast` is the compiled
twin. See :mod:`workers.model.timing` for the whole picture.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import deque
from collections.abc import Mapping
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
    DeviceModel,
    _service_parts,
    default_device,
    device_from_spec,
)
from workers.model.elevator import FIFO_BATCH, READ_EXPIRE_NS, WRITE_EXPIRE_NS
from workers.model.limits import QueueLimits
from workers.model.policy import VALUE_ALIASES, Policy
from workers.model.sbitmap import TagQueue
from workers.model.server import DeviceServer
from workers.model.split import OP_READ, OP_WRITE, split_bio

MIB = 1 << 20

#: Integers inside compiled kernels (numpy scalars from arrays, or Python ints).
_I = int | np.integer[Any]

# mq-deadline defaults (block/mq-deadline.c): one source, workers.model.elevator.
DD_READ_EXPIRE_NS = READ_EXPIRE_NS
DD_WRITE_EXPIRE_NS = WRITE_EXPIRE_NS
DD_FIFO_BATCH = FIFO_BATCH



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
