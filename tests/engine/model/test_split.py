"""bio_split_to_limits: worked examples E1.1-E1.4 and the vectorized variant."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.model.limits import QueueLimits
from workers.model.split import OP_DISCARD, OP_READ, split_bio, split_many


def test_e1_1_plain_disk_1028k():
    """E1.1: 0+2056 at max_sectors 1024 gives 1024, 1024, 8; the next bio likewise."""
    lim = QueueLimits(max_sectors=1024)
    r = split_bio(0, 2056, lim)
    assert r.pieces == ((0, 1024), (1024, 1024), (2048, 8))
    assert r.splits == ((0, 1024), (1024, 2048))
    assert split_bio(2056, 2056, lim).pieces == ((2056, 1024), (3080, 1024), (4104, 8))


def test_e1_2_physical_block_alignment():
    """E1.2: pbs 8 sectors aligns the first split end: 3+1021, 1024+1024, 2048+955."""
    lim = QueueLimits(max_sectors=1024, physical_block_size=4096)
    assert split_bio(3, 3000, lim).pieces == ((3, 1021), (1024, 1024), (2048, 955))


def test_e1_3_chunk_boundary():
    """E1.3: chunk_sectors 1024: 512+2048 gives 512+512, 1024+1024, 2048+512."""
    lim = QueueLimits(max_sectors=1024, chunk_sectors=1024)
    assert split_bio(512, 2048, lim).pieces == ((512, 512), (1024, 1024), (2048, 512))


def test_e1_4_discard_granularity():
    """E1.4: granularity 2048, max 5000: 100+3996 then 4096-sized pieces, 16384+3716."""
    lim = QueueLimits(max_discard_sectors=5000, discard_granularity=2048 * 512)
    r = split_bio(100, 20000, lim, op=OP_DISCARD)
    assert r.pieces == ((100, 3996), (4096, 4096), (8192, 4096), (12288, 4096), (16384, 3716))


def test_max_segments_split_for_fragmented_memory():
    """A 1M bio of 4K pages on a 128-segment queue splits at 512K by segments."""
    lim = QueueLimits(max_sectors=2560, max_segments=128)
    assert split_bio(0, 2048, lim, seg_bytes=4096).pieces == ((0, 1024), (1024, 1024))
    assert split_bio(0, 2048, lim, seg_bytes=0).pieces == ((0, 2048),)


def test_split_fronts_are_marked_nomerge():
    """split_many marks every front piece (not the last) as NOMERGE."""
    sp = split_many([0], [2056], QueueLimits(max_sectors=1024))
    assert sp.nomerge.tolist() == [True, True, False]
    assert sp.index.tolist() == [0, 1, 2]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(1, 20000),
                          st.sampled_from([OP_READ, OP_DISCARD]),
                          st.sampled_from([0, 4096, 8192])), min_size=1, max_size=20),
       st.sampled_from([256, 1024, 2560]), st.sampled_from([0, 128, 1000, 7168]),
       st.sampled_from([512, 4096]), st.sampled_from([128, 254]))
def test_split_many_matches_scalar(bios, max_sectors, chunk, pbs, max_segments):
    """The vectorized split equals the scalar reference piece for piece and covers each bio."""
    lim = QueueLimits(max_sectors=max_sectors, chunk_sectors=chunk, physical_block_size=pbs,
                      max_segments=max_segments, max_discard_sectors=3000,
                      discard_granularity=4096)
    s = np.array([b[0] for b in bios])
    n = np.array([b[1] for b in bios])
    ops = np.array([b[2] for b in bios])
    seg = np.array([b[3] for b in bios])
    sp = split_many(s, n, lim, ops=ops, seg_bytes=seg)
    expected = []
    for i, (sec, nr, op, sb) in enumerate(bios):
        pieces = split_bio(sec, nr, lim, op=op, seg_bytes=sb).pieces
        assert sum(p[1] for p in pieces) == nr
        assert pieces[0][0] == sec
        expected += [(i, a, b) for a, b in pieces]
    got = list(zip(sp.bio.tolist(), sp.sector.tolist(), sp.nr_sectors.tolist()))
    assert got == expected
