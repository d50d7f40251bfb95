"""Known answers for max_segment_size, lbs-aligned splits, discard segments and max_plug_count.

Every expected value is computed by hand from the kernel rule in kernel-model.md (sections 1(b)
and 3(b)), not read back from the model.
"""

import pytest

from workers.model import preset_for_kernel
from workers.model.limits import QueueLimits
from workers.model.plug import (
    MERGE_BACK,
    MERGE_DISCARD,
    MERGE_NONE,
    Bio,
    Plug,
    Request,
    attempt_bio_merge,
)
from workers.model.split import OP_DISCARD, split_bio, split_many

# --- 1. max_segment_size with max_segments (bio_split_rw_at / bvec_split_segs) ----------------

def test_contiguous_bio_split_by_max_segment_size():
    """bvec_split_segs: contiguous memory, 4 segments of max_segment_size 4K = 32 sectors each."""
    lim = QueueLimits(max_sectors=2560, max_segments=4, max_segment_size=4096)
    assert split_bio(0, 100, lim).pieces == ((0, 32), (32, 32), (64, 32), (96, 4))


def test_runs_longer_than_max_segment_size_cost_two_segments_each():
    """bvec_split_segs: a 96K run is cut into 64K + 32K, so 4 segments reach 2 runs = 384."""
    lim = QueueLimits(max_sectors=2560, max_segments=4, max_segment_size=65536)
    r = split_bio(0, 1024, lim, seg_bytes=96 * 1024)
    assert r.pieces == ((0, 384), (384, 384), (768, 256))


def test_runs_that_are_multiples_of_max_segment_size():
    """bvec_split_segs: 8K runs at max_segment_size 4K use 2 segments each: 4 segments = 32."""
    lim = QueueLimits(max_sectors=2560, max_segments=4, max_segment_size=4096)
    assert split_bio(0, 80, lim, seg_bytes=8192).pieces == ((0, 32), (32, 32), (64, 16))


def test_segments_restart_at_the_remainder_start():
    """get_max_segment_size: a remainder's segments start at its own first byte, not on a
    max_segment_size grid of the original bio: chunk 12, 2x4K segments, bio 6+40 gives 6, 12,
    12, 10 (get_max_io_size binds each piece)."""
    lim = QueueLimits(max_sectors=2560, chunk_sectors=12, max_segments=2, max_segment_size=4096)
    assert split_bio(6, 40, lim).pieces == ((6, 6), (12, 12), (24, 12), (36, 10))


def test_max_segment_size_split_vectorized_matches():
    """split_many gives the same bvec_split_segs answers as the scalar cases above."""
    lim = QueueLimits(max_sectors=2560, max_segments=4, max_segment_size=65536)
    sp = split_many([0, 2048], [1024, 1024], lim, seg_bytes=[96 * 1024, 4096])
    got = list(zip(sp.bio.tolist(), sp.sector.tolist(), sp.nr_sectors.tolist()))
    # 4K pages: one segment each, 4 segments = 32 sectors per piece
    assert got == [(0, 0, 384), (0, 384, 384), (0, 768, 256)] + \
        [(1, 2048 + 32 * i, 32) for i in range(32)]


# --- 2. logical block size alignment (bio_split_rw_at: ALIGN_DOWN(bytes, lbs)) ---------------

def test_segment_split_point_rounded_down_to_4k_lbs():
    """bio_split_rw_at: 3 runs of 6K reach 36 sectors; ALIGN_DOWN to 4K lbs makes it 32, and a
    remainder starting 4K into a run reaches 2K + 12K = 28 -> 24."""
    lim = QueueLimits(max_segments=3, logical_block_size=4096, physical_block_size=4096)
    assert split_bio(0, 96, lim, seg_bytes=6144).pieces == ((0, 32), (32, 24), (56, 24), (80, 16))


def test_segment_split_point_with_512_lbs_is_not_rounded():
    """bio_split_rw_at: the same bio at 512-byte lbs splits exactly at 3 runs = 36 sectors."""
    lim = QueueLimits(max_segments=3)
    assert split_bio(0, 96, lim, seg_bytes=6144).pieces == ((0, 36), (36, 36), (72, 24))


def test_max_sectors_split_rounded_down_to_4k_block():
    """get_max_io_size: max_sectors 1020 with 4K blocks ends the piece at 1016 (rounded to 8)."""
    lim = QueueLimits(max_sectors=1020, max_hw_sectors=1020, logical_block_size=4096,
                      physical_block_size=4096)
    assert split_bio(0, 2048, lim).pieces == ((0, 1016), (1016, 1016), (2032, 16))


# --- 3. discard merging and max_discard_segments (blk_try_merge, bio_attempt_discard_merge) --

def _discard(sector, nr):
    return Bio(1, sector, nr, OP_DISCARD, 0, 0, None, None, 0, 0, 1)


def test_discontiguous_discards_merge_up_to_max_discard_segments():
    """bio_attempt_discard_merge: 3 ranges allowed: 0, 100, 200 join; 300 fails and the request
    is marked NOMERGE (req_set_nomerge), so even a contiguous 24+8 is refused."""
    lim = QueueLimits(max_discard_sectors=1000, max_discard_segments=3)
    rq = Request(_discard(0, 8), 1, 1)
    assert attempt_bio_merge(rq, _discard(100, 8), 1, lim) == MERGE_DISCARD
    assert attempt_bio_merge(rq, _discard(200, 8), 1, lim) == MERGE_DISCARD
    assert (rq.nr, rq.nsegs) == (24, 3)
    assert attempt_bio_merge(rq, _discard(300, 8), 1, lim) == MERGE_NONE
    assert rq.nomerge and (rq.nr, rq.nsegs) == (24, 3)
    assert attempt_bio_merge(rq, _discard(24, 8), 1, lim) == MERGE_NONE


def test_single_range_discard_merges_only_contiguously():
    """blk_try_merge: max_discard_segments 1: 100+8 is no merge; 8+8 back-merges without a new
    segment (ll_new_hw_segment: a discard merge adds no segment)."""
    lim = QueueLimits(max_discard_sectors=1000, max_discard_segments=1)
    rq = Request(_discard(0, 8), 1, 1)
    assert attempt_bio_merge(rq, _discard(100, 8), 1, lim) == MERGE_NONE
    assert not rq.nomerge
    assert attempt_bio_merge(rq, _discard(8, 8), 1, lim) == MERGE_BACK
    assert (rq.nr, rq.nsegs) == (16, 1)


def test_discard_merge_over_max_discard_sectors_marks_nomerge():
    """bio_attempt_discard_merge: 40 + 32 > 64 fails and sets NOMERGE, so a later 8-sector range
    that would fit is refused too."""
    lim = QueueLimits(max_discard_sectors=64, max_discard_segments=4)
    rq = Request(_discard(0, 40), 1, 1)
    assert attempt_bio_merge(rq, _discard(1000, 32), 1, lim) == MERGE_NONE
    assert rq.nomerge
    assert attempt_bio_merge(rq, _discard(2000, 8), 1, lim) == MERGE_NONE
    assert (rq.nr, rq.nsegs) == (40, 1)


# --- 4. plug flush on request count (blk_add_rq_to_plug, BLK_MAX_REQUEST_COUNT) --------------

def _fill_plug(max_plug_count, devs):
    policy = preset_for_kernel("6.1").with_overrides(f"max_plug_count={max_plug_count}")
    flushes = []
    plug = Plug(policy, lambda dev: QueueLimits(), lambda dev: False,
                lambda groups, _sched: flushes.append(sum(len(g.requests) for g in groups)))
    for i, dev in enumerate(devs):
        bio = Bio(dev, i * 100, 8, 0, 0, 0, None, None, 0, 0, 1)
        plug.add(Request(bio, 1, i))
    plug.flush(False)
    return flushes


@pytest.mark.parametrize("count,flushes", [(16, [16, 16, 8]), (32, [32, 8])])
def test_plug_flushes_at_max_plug_count(count, flushes):
    """blk_add_rq_to_plug: 40 small requests on one queue flush when rq_count >= 16 (<= 5.15)
    or 32 (5.16+): 16+16+8 or 32+8."""
    assert _fill_plug(count, [1] * 40) == flushes


@pytest.mark.parametrize("count", [16, 32])
def test_plug_count_multiple_queues(count):
    """blk_plug_max_rq_count: with multiple queues 16 x 4 (<= 5.15) and 32 x 2 (5.16+) are both
    64: 70 requests alternating two queues flush 64, then 6."""
    assert _fill_plug(count, [1, 2] * 35) == [64, 6]
