"""Writeback throttling: which bios are throttled, limits by depth and scale step, the wake rule."""

from __future__ import annotations

import pytest

from workers.errors import ModelConfigError
from workers.model.wbt import (
    DIO_WRITE,
    MIN_LAT_ROT_NS,
    REQ_BACKGROUND,
    REQ_IDLE,
    REQ_META,
    REQ_OP_DISCARD,
    REQ_OP_READ,
    REQ_OP_WRITE,
    REQ_SYNC,
    Wbt,
    WbtLimits,
    calc_max_depth,
    get_limit,
    resubmit_flags,
    wbt_limits,
    wbt_should_throttle,
)


@pytest.mark.parametrize(("opf", "throttled"), [
    (REQ_OP_WRITE, True),
    (REQ_OP_WRITE | REQ_SYNC, True),
    (REQ_OP_WRITE | REQ_IDLE, True),
    (DIO_WRITE, False),
    (REQ_OP_DISCARD, True),
    (REQ_OP_READ, False),
    (REQ_OP_READ | REQ_SYNC, False),
])
def test_wbt_should_throttle_writes_without_sync_and_idle(opf: int, throttled: bool) -> None:
    """wbt_should_throttle: writes unless SYNC|IDLE, discards always, reads never."""
    assert wbt_should_throttle(opf) is throttled


def test_e5_1_limits_by_queue_depth() -> None:
    """E5.1: depth 32 or 1023 -> 16/8/4; depth 2 -> 2/2/1."""
    assert wbt_limits(32) == WbtLimits(16, 8, 4)
    assert wbt_limits(1023) == WbtLimits(16, 8, 4)
    assert wbt_limits(2) == WbtLimits(2, 2, 1)
    assert calc_max_depth(1) == (2, True)
    assert calc_max_depth(1, 1) == (1, False)
    assert wbt_limits(32, min_lat_ns=0) == WbtLimits(16, 0, 0)


def test_scale_steps_shrink_and_grow_max_depth() -> None:
    """rq_depth_calc_max_depth: 1 + (15 >> step) down; 1 + (15 << -step) up to 3/4 depth."""
    assert [calc_max_depth(1023, s)[0] for s in (0, 1, 2, 3, 4, 5)] == [16, 8, 4, 2, 1, 1]
    assert calc_max_depth(1023, -1) == (31, False)
    assert calc_max_depth(32, -1) == (24, True)  # capped at 3 * 32 / 4
    assert wbt_limits(1023, 1) == WbtLimits(8, 4, 2)
    assert wbt_limits(1023, 4) == WbtLimits(1, 1, 1)


def test_e5_2_background_writeback_gets_wb_background_and_dio_is_not_counted() -> None:
    """E5.2: REQ_BACKGROUND -> 4 at depth 32; an O_DIRECT write is never throttled."""
    lim = wbt_limits(32)
    assert get_limit(REQ_OP_WRITE | REQ_BACKGROUND, lim) == 4
    assert get_limit(REQ_OP_WRITE | REQ_META, lim) == 16  # HIPRIO
    assert get_limit(REQ_OP_DISCARD, lim) == 4
    w = Wbt(32)
    assert all(w.may_queue(DIO_WRITE, 0) for _ in range(100))
    assert w.inflight == 0


def test_e5_3_bcache_reset_flags_are_limited_to_normal_or_background() -> None:
    """E5.3: a reset-flag write gets 8 with no recent other I/O, 4 with it; preserve is free."""
    lim = wbt_limits(1023)
    reset = resubmit_flags(DIO_WRITE, "reset")
    assert reset == REQ_OP_WRITE
    assert get_limit(reset, lim, close_io=False) == 8
    assert get_limit(reset, lim, close_io=True) == 4
    preserved = resubmit_flags(DIO_WRITE, "preserve")
    assert preserved == DIO_WRITE and not wbt_should_throttle(preserved)
    with pytest.raises(ModelConfigError):
        resubmit_flags(DIO_WRITE, "keep")


def test_wbt_state_admits_up_to_the_limit_and_queues_the_rest() -> None:
    """may_queue counts throttled writes to the limit; later ones wait behind sleepers."""
    w = Wbt(1023)
    t = 10**9  # no other I/O yet: wb_normal = 8
    admitted = sum(w.may_queue(REQ_OP_WRITE, t) for _ in range(20))
    assert admitted == 8 and w.inflight == 8
    w.done(False, t)  # a read completes: close_io from now on
    assert w.limit_for(REQ_OP_WRITE, t + 1) == 4
    assert w.limit_for(REQ_OP_WRITE, t + 200_000_000) == 8


def test_wbt_rqw_done_with_write_cache_wakes_only_when_drained() -> None:
    """QUEUE_FLAG_WC: sleepers wake when the throttled count reaches 0; without WC earlier."""
    w = Wbt(1023, write_cache=True)
    for _ in range(4):
        assert w.may_queue(REQ_OP_WRITE, 10**9)
    w.waiters.append(1)
    assert [w.done(True, 10**9) for _ in range(4)] == [False, False, False, True]
    nwc = Wbt(1023, write_cache=False)
    for _ in range(8):
        nwc.may_queue(REQ_OP_WRITE, 10**9)
    nwc.waiters.append(1)
    wakes = [nwc.done(True, 10**9) for _ in range(8)]
    # 7 in flight: diff 8 - 7 = 1 < background 4 // 2, no wake; 6 in flight: diff 2, wake.
    assert wakes[:2] == [False, True]
    assert all(wakes[1:])


def test_wb_timer_scales_down_on_slow_reads_and_up_on_writes_only() -> None:
    """wb_timer_fn: min read latency over target -> step+1; writes only -> step-1."""
    w = Wbt(1023)
    w.sample(True, 50_000_000)
    w.timer(100_000_000)
    assert w.scale_step == 1 and w.limits.max_depth == 8
    for k in range(5):
        w.sample(True, 50_000_000)
        w.timer(200_000_000 + k)
    assert w.limits.max_depth == 1
    w2 = Wbt(1023)
    w2.sample(False, 1)
    w2.timer(1)
    assert w2.scale_step == -1 and w2.limits.max_depth == 31
    w3 = Wbt(8, min_lat_ns=MIN_LAT_ROT_NS)
    w3.sample(True, 1_000_000)
    w3.timer(1)
    assert w3.scale_step == -1  # fast reads: scale up
