"""The memory layout of trace bios read from the kernel's splits (X): MemoryLayout's segment walk
(bvec_split_segs), the evidence tied back to top bios through remaps (A), and the replay
reproducing the trace's cuts under any policy."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.events import (
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_SPLIT,
    RWBS_READ,
    EventTable,
    make_dev,
)
from workers.model import preset_for_kernel, replay
from workers.model.layout import layouts_from_evidence, split_evidence
from workers.model.limits import QueueLimits
from workers.model.replay import BioStream, bios_from_table
from workers.model.split import MemoryLayout, segment_reach, split_bio
from workers.model.stack import stack_from_spec

PAGE = 4096


def _runs(sizes):
    return MemoryLayout(tuple(np.cumsum(sizes).tolist()))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([4096, 8192, 12288, 69632]), st.integers(0, 1 << 20),
       st.sampled_from([4, 62, 128, 254]), st.sampled_from([65536, 0xFFFFFFFF]))
def test_uniform_runs_reach_what_the_seg_bytes_model_reaches(seg, off, segs, size):
    """A layout of equal runs is the uniform seg_bytes model: same reach from any offset."""
    off -= off % 512
    layout = _runs([seg] * ((32 << 20) // seg))
    assert layout.reach(off, segs, size) == segment_reach(off, segs, size, seg)


def test_adjacent_pages_share_a_segment():
    """256 pages on a 62-segment queue: with pages 0-1 and 2-3 adjacent (two 8 KiB bvecs) the
    first piece holds 64 pages, the next ones 62, and the remainder 6 pages."""
    lim = QueueLimits(max_sectors=2560, max_segments=62, max_segment_size=0xFFFFFFFF)
    layout = _runs([2 * PAGE, 2 * PAGE] + [PAGE] * 252)
    r = split_bio(0, 2048, lim, layout=layout)
    assert [n for _, n in r.pieces] == [64 * 8, 62 * 8, 62 * 8, 62 * 8, 6 * 8]
    assert layout.nsegs(0, 64 * PAGE, 0xFFFFFFFF) == 62
    # a 64 KiB max_segment_size cuts a 16-page run into segments of its own
    assert _runs([16 * PAGE]).nsegs(0, 16 * PAGE, 65536) == 1
    assert _runs([16 * PAGE]).nsegs(0, 16 * PAGE, 32768) == 2


def _table(rows):
    """An EventTable from (action, dev, sector, nr, aux, aux2) rows, one microsecond apart."""
    a = np.array(rows, dtype=np.int64)
    n = len(a)
    return EventTable.from_columns(time_ns=np.arange(n) * 1000, dev=a[:, 1], action=a[:, 0],
                                   rwbs=np.full(n, RWBS_READ), sector=a[:, 2],
                                   nr_sectors=a[:, 3], aux=a[:, 4], aux2=a[:, 5],
                                   pid=np.full(n, 7))


def test_a_members_split_is_traced_back_to_the_top_bio():
    """dm-linear: a 1 MiB read at top sector 4096 is remapped to the member at 8192 (A), which
    splits it after 1016 KiB (X on the member): byte offset 0 of top bio 1, on the member; the
    dm-style X of a resubmitted remainder (new sector == its own sector) carries no cut."""
    top, mem = make_dev(252, 0), make_dev(254, 0)
    t = _table([(ACT_QUEUE, top, 0, 2048, 0, 0),
                (ACT_QUEUE, top, 4096, 2048, 0, 0),
                (ACT_SPLIT, top, 4096, 2048, 4096, 0),
                (ACT_REMAP, mem, 8192, 2048, 4096, top),
                (ACT_QUEUE, mem, 8192, 2048, 0, 0),
                (ACT_SPLIT, mem, 8192, 2032, 10224, 0)])
    q = np.flatnonzero((t.action == ACT_QUEUE) & (t.dev == top))
    ev = split_evidence(t, q, top)
    assert ev is not None and ev.tolist() == [[1, mem, 8192, 2032, 0, RWBS_READ]]
    lim = QueueLimits(max_sectors=2560, max_segments=254, max_segment_size=0xFFFFFFFF)
    lay = layouts_from_evidence(ev, np.array([2048, 2048]), {mem: lim, top: lim})
    assert list(lay) == [1]
    # 254 runs hold the 254 pages of the cut piece, the last 2 pages are one run each
    assert len(lay[1].ends) == 256 and lay[1].reach(0, 254, lim.max_segment_size) == 2032 << 9


def test_size_limit_cuts_are_not_layout():
    """A cut where max_sectors ends says nothing about the memory."""
    dev = make_dev(254, 0)
    t = _table([(ACT_QUEUE, dev, 0, 4096, 0, 0), (ACT_SPLIT, dev, 0, 2560, 2560, 0)])
    ev = split_evidence(t, np.array([0]), dev)
    lim = QueueLimits(max_sectors=2560, max_segments=62)
    assert ev is not None and layouts_from_evidence(ev, np.array([4096]), {dev: lim}) == {}


def _issued(table, dev):
    r = (table.action == ACT_ISSUE) & (table.dev == dev)
    return list(zip(table.sector[r].tolist(), table.nr_sectors[r].tolist()))


def _stream(evidence, n=3):
    """n synchronous 1 MiB reads with the given split evidence (rows for bio 0, repeated)."""
    bios = BioStream.from_arrays(np.arange(n) * 2048, 2048, time_ns=np.arange(n) * 10**7)
    ev = [(q, d, int(bios.sector[q]) + s, f, off, RWBS_READ)
          for q in range(n) for d, s, f, off in evidence]
    return BioStream(time_ns=bios.time_ns, sector=bios.sector, nr_sectors=bios.nr_sectors,
                     rwbs=bios.rwbs, pid=bios.pid, plug=bios.plug, seg_bytes=bios.seg_bytes,
                     bio_pages=bios.bio_pages, depth=1,
                     meta={"split_evidence": np.array(ev, dtype=np.int64)})


def test_the_replay_takes_the_cuts_the_trace_shows():
    """A 62-segment disk, 1 MiB reads cut by the kernel after 64, 62, 62 and 62 pages (no
    uniform run length gives that): the replay issues those pieces, its own X events read back
    as a trace give them again, and the Q events alone would give one request per bio."""
    stack = stack_from_spec("disk:max_segments=62,max_sectors_kb=1280")
    dev = stack.top.dev
    cuts = [(dev, 0, 512, 0), (dev, 512, 496, 512 << 9), (dev, 1008, 496, 1008 << 9),
            (dev, 1504, 496, 1504 << 9)]
    first = replay(_stream(cuts), stack, preset_for_kernel("6.12"))
    want = _issued(first, dev)
    assert want[:5] == [(0, 512), (512, 496), (1008, 496), (1504, 496), (2000, 48)]
    assert len(want) == 15
    again = replay(bios_from_table(first, dev), stack, preset_for_kernel("6.12"))
    assert _issued(again, dev) == want
    q_only = first.take(np.flatnonzero(first.action != ACT_SPLIT))
    assert len(_issued(replay(bios_from_table(q_only, dev), stack,
                              preset_for_kernel("6.12")), dev)) == 3


def test_the_layout_not_the_cut_carries_to_another_kernel():
    """dm-crypt reads on 6.1 reach the member whole and the member cuts a scattered 1 MiB
    buffer after 254 pages; on 6.12 dm-crypt first cuts reads at 128 KiB
    (``get_max_request_sectors``), 32 pages each, which no member splits again."""
    stack = stack_from_spec("dm-crypt:disks=1,max_segments=254")
    member = stack.top.members[0].dev
    bios = _stream([(member, 0, 2032, 0)], n=2)
    old = _issued(replay(bios, stack, preset_for_kernel("6.1")), member)
    assert old == [(0, 2032), (2032, 16), (2048, 2032), (4080, 16)]
    new = replay(bios, stack, preset_for_kernel("6.12"))
    on_member = new.dev == member
    q = on_member & (new.action == ACT_QUEUE)
    assert list(zip(new.sector[q].tolist(), new.nr_sectors[q].tolist())) == \
        [(i * 256, 256) for i in range(16)]
    assert not bool(np.any(on_member & (new.action == ACT_SPLIT)))


def test_a_trace_top_with_another_device_number_is_the_stacks_top():
    """A trace of 254,0 replayed on a spec'd disk (8,0): its X still tells the layout."""
    stack = stack_from_spec("disk:max_segments=62,max_sectors_kb=1280")
    dev = make_dev(254, 0)
    t = _table([(ACT_QUEUE, dev, 0, 2048, 0, 0), (ACT_SPLIT, dev, 0, 512, 512, 0),
                (ACT_SPLIT, dev, 512, 496, 1008, 0), (ACT_SPLIT, dev, 1008, 496, 1504, 0),
                (ACT_SPLIT, dev, 1504, 496, 2000, 0)])
    got = _issued(replay(bios_from_table(t, dev), stack, preset_for_kernel("6.12")),
                  stack.top.dev)
    assert got == [(0, 512), (512, 496), (1008, 496), (1504, 496), (2000, 48)]


def test_equal_runs_are_the_seg_bytes_model():
    """A layout of equal runs is replayed as seg_bytes (the compiled engine's model too), with
    the same requests as its own runs would give."""
    assert _runs([PAGE] * 8).uniform() == PAGE
    assert _runs([PAGE, 2 * PAGE]).uniform() == 0
    stack = stack_from_spec("disk:max_segments=62,max_sectors_kb=1280")
    dev = stack.top.dev
    cuts = [(dev, 0, 496, 0), (dev, 496, 496, 496 << 9), (dev, 992, 496, 992 << 9),
            (dev, 1488, 496, 1488 << 9)]
    table = replay(_stream(cuts), stack, preset_for_kernel("6.12"))
    assert _issued(table, dev)[:5] == [(0, 496), (496, 496), (992, 496), (1488, 496),
                                       (1984, 64)]
