"""The mq-deadline-like elevator and the bcache-like stack on the Python engine."""

from model_helpers import d_stream

from workers.events import ACT_INSERT, RWBS_READ, RWBS_SYNC, RWBS_WRITE
from workers.model import BioStream, preset_for_kernel, replay, stack_from_spec
from workers.model.elevator import DeadlineQueue
from workers.model.limits import QueueLimits
from workers.model.plug import Bio, Request
from workers.model.split import OP_READ, OP_WRITE


def _rq(rid, sector, nr=8, op=OP_READ):
    return Request(Bio(1, sector, nr, op, 1, 0, None, None, 0, 0, 1), 1, rid)


def test_deadline_sweeps_in_sector_order_and_prefers_reads():
    """A batch starts at the oldest request (no sweep position yet, or the sweep ran out), then
    continues in ascending sector order; reads before the write."""
    q = DeadlineQueue(QueueLimits())
    for rid, s in enumerate([5000, 100, 3000, 200], start=1):
        q.insert(_rq(rid, s), 0)
    q.insert(_rq(9, 50, op=OP_WRITE), 0)
    out = [q.pop(0).sector for _ in range(5)]
    assert out[:4] == [5000, 100, 200, 3000]
    assert out[4] == 50


def test_deadline_insert_merge_and_bio_merge():
    """A request continuing a queued one merges on insert; a bio merges into a queued request."""
    q = DeadlineQueue(QueueLimits(max_sectors=64))
    assert q.insert(_rq(1, 0), 0) is True
    assert q.insert(_rq(2, 8), 0) is False  # merged into request 1: 0+16
    hit = q.try_bio_merge(Bio(1, 16, 8, OP_READ, 1, 0, None, None, 0, 0, 1), 1)
    assert hit is not None and hit[0].sector == 0 and hit[0].nr == 24
    assert len(q) == 1


def test_replay_with_mq_deadline_reorders_a_busy_queue():
    """With one driver tag, requests queued behind a busy HDD leave oldest first, then in
    sector order (300 overtakes 500), and every request gets an I event."""
    stack = stack_from_spec("disk:device=hdd,scheduler=mq-deadline,queue_depth=1")
    bios = BioStream.from_arrays([900000, 100, 500, 300], 8, time_ns=[0, 10, 20, 30])
    t = replay(bios, stack, preset_for_kernel("6.6"))
    assert [s for _, s, _ in d_stream(t)] == [900000, 100, 300, 500]
    assert int((t.action == ACT_INSERT).sum()) == 4


def test_cache_stack_resets_or_preserves_sync_on_resubmit():
    """bcache-like: O_DIRECT writes reach the cache disk without REQ_SYNC under
    flags_on_resubmit=reset and with it under preserve (seed 004)."""
    stack = stack_from_spec("cache:device=nvme")
    bios = BioStream.from_arrays([0, 2048], 2048, rwbs=RWBS_WRITE | RWBS_SYNC)
    for mode, has_sync in (("reset", False), ("preserve", True)):
        pol = preset_for_kernel("6.1").with_overrides(f"flags_on_resubmit={mode}")
        t = replay(bios, stack, pol)
        cache_d = (t.action == 7) & (t.dev == stack.top.members[0].dev)
        assert cache_d.sum() == 2
        assert bool(((t.rwbs[cache_d] & RWBS_SYNC) != 0).all()) is has_sync
        assert bool((t.rwbs[cache_d] & RWBS_WRITE).all())
    reads = replay(BioStream.from_arrays([0], 8, rwbs=RWBS_READ), stack, preset_for_kernel("6.1"))
    assert d_stream(reads) == [("8,0", 0, 8)]
