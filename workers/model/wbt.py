"""Writeback throttling (block/blk-wbt.c, block/blk-rq-qos.c) and the bcache resubmit (seed 004).

wbt sits in ``rq_qos_throttle``, before a tag is allocated (``blk_mq_submit_bio``). It counts
the writes it throttles and lets a new one in only while that count is below a limit:

* ``wbt_should_throttle``: a WRITE is throttled unless it carries both REQ_SYNC and REQ_IDLE
  (the pair ``blkdev_direct_IO`` sets for O_DIRECT writes); a DISCARD is throttled; reads never.
* ``get_limit``: DISCARD -> ``wb_background``; REQ_HIPRIO (SYNC|META|PRIO) or a recent
  balance_dirty_pages sleeper -> ``max_depth``; REQ_BACKGROUND or other I/O completed within
  the last 100 ms (``close_io``) -> ``wb_background``; else ``wb_normal``.
* ``calc_wb_limits`` / ``rq_depth_calc_max_depth``: ``max_depth`` = min(16, queue_depth)
  shrunk as ``1 + ((depth - 1) >> scale_step)`` when reads miss the latency target, grown up to
  3/4 of the queue depth when only writes run; normal = (max + 1) / 2, background =
  (max + 3) / 4 (max <= 2: normal = max, background = 1).
* ``wb_timer_fn`` every 100 ms window: the *minimum* read latency of the window above
  ``min_lat`` (2 ms on SSDs, 75 ms on rotational disks) scales down; a window with reads under
  target, or with only writes, scales up.
* ``wbt_rqw_done``: on a device with a volatile write cache (QUEUE_FLAG_WC) sleepers are woken
  only when the throttled count drains to 0; otherwise when it falls ``wb_background / 2``
  under ``wb_normal``.

bcache (seed 004): ``bch_data_insert_start`` resubmits each write to the cache device. Since
ad0d9e76a412 it did ``bio_set_op_attrs(n, REQ_OP_WRITE, 0)``, which dropped REQ_SYNC|REQ_IDLE
(``flags_on_resubmit=reset``), so O_DIRECT writes became throttled buffered-looking writes on the
cache SSD; the fix ORs the op in and keeps the flags (``preserve``).
:func:`simulate_bcache_writes` runs the thread's experiment (a 1M x 128-deep O_DIRECT writer
through bcache next to a 1M x 128-deep reader on the same NVMe device) as a discrete-event
simulation and reports both bandwidths.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from workers.errors import ModelConfigError
from workers.events import (
    ACT_COMPLETE,
    ACT_ISSUE,
    ACT_QUEUE,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    DeviceInfo,
    EventTable,
    make_dev,
)
from workers.model.device import DeviceModel, device_from_spec
from workers.model.policy import Policy
from workers.model.server import DeviceServer

# --- request flags (include/linux/blk_types.h names; our own bit values) ---------------------
REQ_OP_READ = 0
REQ_OP_WRITE = 1
REQ_OP_DISCARD = 3
REQ_OP_MASK = 0xFF
REQ_SYNC = 1 << 8
REQ_META = 1 << 9
REQ_PRIO = 1 << 10
REQ_IDLE = 1 << 11
REQ_BACKGROUND = 1 << 12
REQ_SWAP = 1 << 13
#: REQ_HIPRIO (blk-wbt.c): writes that get the full max_depth.
REQ_HIPRIO = REQ_SYNC | REQ_META | REQ_PRIO | REQ_SWAP
#: What ``blkdev_direct_IO`` / iomap set on an O_DIRECT write (``REQ_SYNC | REQ_IDLE``).
DIO_WRITE = REQ_OP_WRITE | REQ_SYNC | REQ_IDLE

#: RWB_DEF_DEPTH.
RWB_DEF_DEPTH = 16
#: RWB_WINDOW_NSEC: the stat window of wb_timer_fn.
RWB_WINDOW_NS = 100_000_000
#: close_io: other I/O within HZ/10 counts as competing.
CLOSE_IO_NS = 100_000_000
#: wbt_default_latency_nsec: 2 ms for SSDs, 75 ms for rotational disks.
MIN_LAT_SSD_NS = 2_000_000
MIN_LAT_ROT_NS = 75_000_000

MB = 1_000_000
MIB = 1 << 20


def wbt_should_throttle(opf: int) -> bool:
    """``wbt_should_throttle`` (blk-wbt.c): which bios wbt counts."""
    op = opf & REQ_OP_MASK
    if op == REQ_OP_WRITE:
        return (opf & (REQ_SYNC | REQ_IDLE)) != (REQ_SYNC | REQ_IDLE)
    return op == REQ_OP_DISCARD


def resubmit_flags(opf: int, flags_on_resubmit: str) -> int:
    """Flags of the bio bcache's ``bch_data_insert_start`` sends to the cache device.

    ``reset``: ``bio_set_op_attrs(n, REQ_OP_WRITE, 0)`` (ad0d9e76a412 until the 2021 fix)
    keeps only the op. ``preserve``: ``n->bi_opf |= REQ_OP_WRITE`` keeps every flag.
    """
    if flags_on_resubmit == "reset":
        return REQ_OP_WRITE
    if flags_on_resubmit == "preserve":
        return opf | REQ_OP_WRITE
    raise ModelConfigError(f"flags_on_resubmit={flags_on_resubmit!r}: expected reset | preserve")


@dataclass(frozen=True)
class WbtLimits:
    """The three depths of ``struct rq_wb`` at one scale step."""

    max_depth: int
    wb_normal: int
    wb_background: int


def calc_max_depth(queue_depth: int, scale_step: int = 0,
                   default_depth: int = RWB_DEF_DEPTH) -> tuple[int, bool]:
    """``rq_depth_calc_max_depth`` (blk-rq-qos.c): (max_depth, scaled_max)."""
    if queue_depth <= 0:
        raise ModelConfigError(f"queue_depth must be positive, not {queue_depth}")
    if queue_depth == 1:
        return (1, False) if scale_step > 0 else (2, True)
    depth = min(default_depth, queue_depth)
    scaled_max = False
    if scale_step > 0:
        depth = 1 + ((depth - 1) >> min(31, scale_step))
    elif scale_step < 0:
        maxd = 3 * queue_depth // 4
        depth = 1 + ((depth - 1) << min(31, -scale_step))
        if depth > maxd:
            depth = maxd
            scaled_max = True
    return depth, scaled_max


def wbt_limits(queue_depth: int, scale_step: int = 0, *, min_lat_ns: int = MIN_LAT_SSD_NS,
               default_depth: int = RWB_DEF_DEPTH) -> WbtLimits:
    """``calc_wb_limits`` after ``rq_depth_calc_max_depth`` (E5.1: depth 32 -> 16/8/4)."""
    max_depth, _ = calc_max_depth(queue_depth, scale_step, default_depth)
    if min_lat_ns == 0:
        return WbtLimits(max_depth, 0, 0)
    if max_depth <= 2:
        return WbtLimits(max_depth, max_depth, 1)
    return WbtLimits(max_depth, (max_depth + 1) // 2, (max_depth + 3) // 4)


def get_limit(opf: int, limits: WbtLimits, *, close_io: bool = False,
              recent_wait: bool = False) -> int:
    """``get_limit`` (blk-wbt.c): the in-flight cap for one throttled bio."""
    if opf & REQ_OP_MASK == REQ_OP_DISCARD:
        return limits.wb_background
    if opf & REQ_HIPRIO or recent_wait:
        return limits.max_depth
    if opf & REQ_BACKGROUND or close_io:
        return limits.wb_background
    return limits.wb_normal


class Wbt:
    """State of one queue's ``struct rq_wb`` for the event simulation.

    Args:
        queue_depth: the device's tag depth (``rqd->queue_depth``).
        min_lat_ns: read latency target (0 disables wbt).
        write_cache: QUEUE_FLAG_WC: wake throttled writers only when the count drains to 0.
    """

    def __init__(self, queue_depth: int, *, min_lat_ns: int = MIN_LAT_SSD_NS,
                 write_cache: bool = True, default_depth: int = RWB_DEF_DEPTH) -> None:
        self.queue_depth = int(queue_depth)
        self.min_lat_ns = int(min_lat_ns)
        self.write_cache = write_cache
        self.default_depth = default_depth
        self.scale_step = 0
        self.scaled_max = False
        self.limits = wbt_limits(queue_depth, 0, min_lat_ns=min_lat_ns,
                                 default_depth=default_depth)
        self.inflight = 0
        self.waiters: deque[int] = deque()
        self.last_other_io_ns = -(1 << 62)
        self.window_start = 0
        self.win_read_min = -1
        self.win_writes = 0
        self.steps: list[tuple[int, int]] = []  # (time, scale_step) history (wbt_step)

    @property
    def enabled(self) -> bool:
        return self.min_lat_ns > 0

    def _recalc(self) -> None:
        max_depth, self.scaled_max = calc_max_depth(self.queue_depth, self.scale_step,
                                                    self.default_depth)
        lim = wbt_limits(self.queue_depth, self.scale_step, min_lat_ns=self.min_lat_ns,
                         default_depth=self.default_depth)
        self.limits = WbtLimits(max_depth, lim.wb_normal, lim.wb_background)

    def limit_for(self, opf: int, t: int) -> int:
        return get_limit(opf, self.limits, close_io=t - self.last_other_io_ns <= CLOSE_IO_NS)

    def may_queue(self, opf: int, t: int) -> bool:
        """``rq_qos_wait``'s fast path: no sleeper ahead and the count is under the limit."""
        if not self.enabled or not wbt_should_throttle(opf):
            return True
        if self.waiters:
            return False
        if self.inflight < self.limit_for(opf, t):
            self.inflight += 1
            return True
        return False

    def retry(self, opf: int, t: int) -> bool:
        """A woken sleeper re-checks (``acquire_inflight_cb``)."""
        if self.inflight < self.limit_for(opf, t):
            self.inflight += 1
            return True
        return False

    def done(self, throttled: bool, t: int) -> bool:
        """``wbt_done`` -> ``wbt_rqw_done``; True when sleepers should be woken."""
        if not throttled:
            self.last_other_io_ns = t
            return False
        self.inflight -= 1
        limit = 0 if self.write_cache else self.limits.wb_normal
        if self.inflight and self.inflight >= limit:
            return False
        diff = limit - self.inflight
        return bool(self.waiters) and (not self.inflight or diff >= self.limits.wb_background // 2)

    def sample(self, is_read: bool, latency_ns: int) -> None:
        if is_read:
            if self.win_read_min < 0 or latency_ns < self.win_read_min:
                self.win_read_min = latency_ns
        else:
            self.win_writes += 1

    def timer(self, t: int) -> None:
        """``wb_timer_fn`` at the end of a window: scale by the window's read latency."""
        if self.win_read_min >= 0:
            if self.win_read_min > self.min_lat_ns:
                # scale_down(rwb, hard_throttle=true)
                if self.limits.max_depth > 1:
                    self.scale_step = 0 if self.scale_step < 0 else self.scale_step + 1
            elif not self.scaled_max:
                self.scale_step -= 1
        elif self.win_writes and not self.scaled_max:
            self.scale_step -= 1  # LAT_UNKNOWN_WRITES: only writes, scale up
        self._recalc()
        self.steps.append((t, self.scale_step))
        self.window_start = t
        self.win_read_min = -1
        self.win_writes = 0


@dataclass
class BcacheResult:
    """What :func:`simulate_bcache_writes` measured over its window."""

    table: EventTable
    write_mb_s: float
    read_mb_s: float
    writes_throttled: bool
    final_scale_step: int
    max_write_inflight: int

    @property
    def write_mib_s(self) -> float:
        return self.write_mb_s * MB / MIB


#: pids of the two fio jobs in the predicted table (the bcache resubmission runs in the
#: writer's context, from current->bio_list).
READER_PID = 3001
WRITER_PID = 3002

_W_ARRIVE = 0
_W_RETRY = 1
_COMPLETE = 2
_TIMER = 3


def simulate_bcache_writes(*, flags_on_resubmit: str | None = None, policy: Policy | None = None,
                           bs: int = MIB, write_depth: int = 128, read_depth: int = 128,
                           device: DeviceModel | str | Mapping[str, Any] | None = "nvme",
                           queue_depth: int = 1023, write_cache: bool = True,
                           min_lat_ns: int = MIN_LAT_SSD_NS,
                           runtime_ns: int = 2_000_000_000, ramp_ns: int = 500_000_000,
                           wakeup_ns: int = 20_000, dev: int = make_dev(259, 0),
                           emit_events: bool = True) -> BcacheResult:
    """Seed 004's experiment: O_DIRECT writes through a bcache-like device next to a reader.

    The writer keeps ``write_depth`` 1M O_DIRECT writes (``REQ_SYNC | REQ_IDLE``) in flight
    on the bcache device; bcache resubmits each to the cache device with its flags reset or
    preserved. The reader keeps ``read_depth`` 1M reads in flight on another partition of the
    same NVMe device (the thread's ``nvme0n1p1``), which is what wbt measures latency on. A
    throttled write makes the submitting thread sleep in ``rq_qos_wait`` until wbt wakes it.

    Args:
        flags_on_resubmit: ``reset`` or ``preserve``; default from ``policy``.
        read_depth: 0 runs the writer alone (then wbt only scales *up*: no reads to protect).
        queue_depth: the NVMe queue depth wbt's max_depth derives from (1023: E5.1).
        write_cache: the device reports a volatile write cache (QUEUE_FLAG_WC).
        runtime_ns / ramp_ns: simulated run and the part excluded from the bandwidths.

    Returns:
        :class:`BcacheResult` with MB/s (10^6 bytes, as fio prints "M/s") of both streams.
    """
    mode = flags_on_resubmit or (policy or Policy()).flags_on_resubmit
    wflags = resubmit_flags(DIO_WRITE, mode)
    model = device_from_spec(device if device is not None else "nvme")
    server = DeviceServer(model)
    wbt = Wbt(queue_depth, min_lat_ns=min_lat_ns, write_cache=write_cache)
    throttled = wbt.enabled and wbt_should_throttle(wflags)
    nr = bs >> 9
    span = 1 << 30  # each stream walks sequentially through its own 1 GiB
    read_base, write_base = 0, 1 << 31

    times: list[int] = []
    pids: list[int] = []
    acts: list[int] = []
    secs: list[int] = []
    rw: list[int] = []
    w_rwbs = RWBS_WRITE | (RWBS_SYNC if wflags & REQ_SYNC else 0)

    def emit(t: int, act: int, s: int, bits: int, pid: int = 0) -> None:
        if emit_events:
            times.append(t)
            pids.append(pid)
            acts.append(act)
            secs.append(s)
            rw.append(bits)

    heap: list[tuple[int, int, int, int]] = []
    seq = 0

    def push(t: int, kind: int, arg: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, arg))

    r_sector: list[int] = []
    r_read: list[bool] = []
    r_start: list[int] = []
    r_thr: list[bool] = []
    next_read = 0
    next_write = 0
    write_bytes = 0
    read_bytes = 0
    max_inflight = 0

    def issue(t: int, is_read: bool, is_throttled: bool) -> None:
        nonlocal next_read, next_write, max_inflight
        if is_read:
            s = read_base + (next_read * nr) % (span >> 9)
            next_read += 1
        else:
            s = write_base + (next_write * nr) % (span >> 9)
            next_write += 1
        rid = len(r_sector)
        r_sector.append(s)
        r_read.append(is_read)
        r_start.append(t)
        r_thr.append(is_throttled)
        bits = RWBS_READ if is_read else w_rwbs
        pid = READER_PID if is_read else WRITER_PID
        emit(t, ACT_QUEUE, s, bits, pid)
        emit(t, ACT_ISSUE, s, bits, pid)
        c = server.submit(t, s, nr, not is_read)
        push(c, _COMPLETE, rid)
        if is_throttled:
            max_inflight = max(max_inflight, wbt.inflight)

    def write_arrive(t: int, writer: int) -> None:
        if not throttled:
            issue(t, False, False)
        elif wbt.may_queue(wflags, t):
            issue(t, False, True)
        else:
            wbt.waiters.append(writer)

    for i in range(read_depth):
        issue(i * 1000, True, False)
    for i in range(write_depth):
        push(i * 1000, _W_ARRIVE, i)
    push(RWB_WINDOW_NS, _TIMER, 0)

    while heap:
        t, _, kind, arg = heapq.heappop(heap)
        if t > runtime_ns:
            break
        if kind == _W_ARRIVE:
            write_arrive(t, arg)
        elif kind == _W_RETRY:
            if wbt.retry(wflags, t):
                issue(t, False, True)
            else:
                wbt.waiters.appendleft(arg)
        elif kind == _TIMER:
            wbt.timer(t)
            push(t + RWB_WINDOW_NS, _TIMER, 0)
        else:
            is_read = r_read[arg]
            emit(t, ACT_COMPLETE, r_sector[arg], RWBS_READ if is_read else w_rwbs)
            if t >= ramp_ns:
                if is_read:
                    read_bytes += bs
                else:
                    write_bytes += bs
            wbt.sample(is_read, t - r_start[arg])
            if wbt.enabled and wbt.done(r_thr[arg], t):
                woken = list(wbt.waiters)
                wbt.waiters.clear()
                for w in woken:
                    push(t + wakeup_ns, _W_RETRY, w)
            if is_read:
                issue(t, True, False)  # libaio: reap and resubmit
            else:
                push(t, _W_ARRIVE, arg)

    window = max(runtime_ns - ramp_ns, 1)
    order = np.argsort(np.asarray(times, dtype=np.int64), kind="stable")
    n = len(times)
    cols: dict[str, Any] = {
        "time_ns": np.asarray(times, dtype=np.int64)[order],
        "seq": np.arange(1, n + 1, dtype=np.uint32),
        "dev": np.full(n, dev, dtype=np.uint32),
        "action": np.asarray(acts, dtype=np.uint8)[order],
        "rwbs": np.asarray(rw, dtype=np.uint16)[order],
        "sector": np.asarray(secs, dtype=np.uint64)[order],
        "nr_sectors": np.full(n, nr, dtype=np.uint32),
        "pid": np.asarray(pids, dtype=np.uint32)[order],
        "comm": (np.asarray(pids, dtype=np.uint32)[order] != 0).astype(np.uint32),
    }
    meta = {"model": "simulate_bcache_writes", "flags_on_resubmit": mode,
            "wbt_steps": wbt.steps[-20:], "device": model.to_json()}
    table = EventTable(cols, comms=["(null)", "fio"],
                       devices={dev: DeviceInfo(dev=dev, name="nvme0n1")}, meta=meta)
    return BcacheResult(
        table=table,
        write_mb_s=write_bytes / MB / (window / 1e9),
        read_mb_s=read_bytes / MB / (window / 1e9),
        writes_throttled=throttled,
        final_scale_step=wbt.scale_step,
        max_write_inflight=max_inflight,
    )
