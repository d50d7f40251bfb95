"""Seed 004 (bcache: don't reset bio opf in bch_data_insert_start): wbt throttles reset writes.

The thread: fio 1M x 128-deep reads on nvme0n1p1 and 1M x 128-deep O_DIRECT writes on a
bcache device cached on nvme0n1p2. Reads ran at 2000+ MB/s, writes at 0-100 MB/s; with the fix
(flags preserved) writes got about 1000 MB/s.
"""

from __future__ import annotations

import numpy as np
import pytest

from workers.events import ACT_ISSUE, RWBS_SYNC, RWBS_WRITE
from workers.model.policy import Policy
from workers.model.wbt import simulate_bcache_writes


@pytest.fixture(scope="module")
def runs() -> dict[str, object]:
    """Both policies of the thread's experiment (2 s simulated, first 0.5 s excluded)."""
    return {mode: simulate_bcache_writes(flags_on_resubmit=mode)
            for mode in ("reset", "preserve")}


def test_seed004_reset_flags_are_throttled_and_preserve_is_not(runs: dict) -> None:
    """flags_on_resubmit=reset: wbt counts the writes; preserve: SYNC|IDLE, never counted."""
    reset, preserve = runs["reset"], runs["preserve"]
    assert reset.writes_throttled and not preserve.writes_throttled
    assert 1 <= reset.max_write_inflight <= 8  # wb_normal of depth 1023 at most
    assert reset.final_scale_step > 0  # slow reads next to it scaled wbt down


def test_seed004_preserve_gives_at_least_5x_the_write_bandwidth(runs: dict) -> None:
    """The predicted write bandwidth is >= 5x higher with preserve (thread: 0-100 -> ~1000)."""
    reset, preserve = runs["reset"], runs["preserve"]
    print(f"\nseed 004 model: reset {reset.write_mb_s:.0f} MB/s write, "
          f"{reset.read_mb_s:.0f} MB/s read; preserve {preserve.write_mb_s:.0f} MB/s write, "
          f"{preserve.read_mb_s:.0f} MB/s read (thread: 0-100 -> ~1000 MB/s, reads 2000+)")
    assert preserve.write_mb_s >= 5 * reset.write_mb_s
    assert reset.write_mb_s <= 100
    assert 500 <= preserve.write_mb_s <= 2000
    assert reset.read_mb_s >= 2000


def test_seed004_policy_field_selects_the_behaviour() -> None:
    """The Policy's flags_on_resubmit is used when no explicit mode is given."""
    old = simulate_bcache_writes(policy=Policy(flags_on_resubmit="reset"),
                                 runtime_ns=600_000_000, ramp_ns=100_000_000)
    new = simulate_bcache_writes(policy=Policy(flags_on_resubmit="preserve"),
                                 runtime_ns=600_000_000, ramp_ns=100_000_000)
    assert old.writes_throttled and not new.writes_throttled
    assert new.write_mb_s > 5 * old.write_mb_s


def test_seed004_table_shows_the_flags_blkparse_would_print(runs: dict) -> None:
    """Predicted D events: reset writes are plain W, preserved ones WS (REQ_SYNC kept)."""
    for mode, sync in (("reset", False), ("preserve", True)):
        t = runs[mode].table
        d = (t.action == ACT_ISSUE) & ((t.rwbs & RWBS_WRITE) != 0)
        assert d.sum() > 0
        assert bool(np.all((t.rwbs[d] & RWBS_SYNC) != 0)) is sync
        assert (np.diff(t.time_ns) >= 0).all()


def test_seed004_writer_alone_is_not_held_down_for_long() -> None:
    """Without the reader wbt sees only writes and scales up, so reset costs much less."""
    alone = simulate_bcache_writes(flags_on_resubmit="reset", read_depth=0,
                                   runtime_ns=1_500_000_000)
    assert alone.final_scale_step < 0
    assert alone.write_mb_s > 1000
