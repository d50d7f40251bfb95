"""Loop with direct I/O over a file: the backing file's extent map drives the backing disk's stream.

``lo_rw_aio`` hands a loop request to the file's ``iomap_dio_rw``, which builds one bio per
mapping (extent piece) of the range; a read of an unwritten extent or a hole is zero-filled
with no I/O (``iomap_dio_hole_iter``). The file system's own writes the trace shows on the
disk (jbd2's commit, ``sync`` writing the inode table back) are replayed as the trace shows
them, after the predicted events of the bios submitted before them.
"""

from __future__ import annotations

import numpy as np
import pytest

from workers.errors import ModelConfigError
from workers.events import (
    ACT_BACKMERGE,
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_SPLIT,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_META,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
    make_dev,
    rwbs_from_text,
)
from workers.model import (
    BioStream,
    bios_from_table,
    preset_for_kernel,
    replay,
    stack_from_manifest,
)
from workers.model.own_requests import fold_merged
from workers.model.replay import md_metadata_rows
from workers.model.stack import loop_map
from workers.model.submit import WrittenRanges
from workers.traces.filefrag import FileExtent

LOOP, VDA = make_dev(7, 0), make_dev(254, 0)
#: a file of 3 extents: 0-2047 written at 100000, 2048-4095 unwritten at 300000 (physically
#: after a gap), then a hole, then 8192-10239 unwritten right after the second (contiguous)
EXTENTS = [[0, 100000, 2048, 0], [2048, 300000, 2048, 1], [8192, 302048, 2048, 1]]


def _manifest(extents: list[list[int]] | None = EXTENTS, *, dio: bool = True) -> dict:
    """A loop bundle's manifest (6.12-style limits)."""
    st: dict = {"top": "7,0", "kind": "loop", "direct_io": dio, "fs": "ext4",
                "members": ["254,0"]}
    if extents is not None:
        st["file_extents"] = extents
    return {"kernel": "6.12.117+deb13-amd64", "stack": st,
            "limits": {"7,0": {"max_sectors_kb": 1280, "max_segments": 128,
                               "max_segment_size": 65536, "scheduler": "none"},
                       "254,0": {"max_sectors_kb": 1280, "scheduler": "none"}},
            "devices": {"loop0": "7,0", "vda": "254,0"}}


def _issued(t: EventTable, dev: int) -> list[tuple[int, int, bool]]:
    d = np.flatnonzero((t.action == ACT_ISSUE) & (t.dev == dev))
    d = d[np.argsort(t.time_ns[d], kind="stable")]
    return [(int(t.sector[i]), int(t.nr_sectors[i]), bool(t.rwbs[i] & RWBS_WRITE)) for i in d]


def test_loop_map_pieces_holes_and_unwritten() -> None:
    ext = stack_from_manifest(_manifest()).top.file_extents
    assert loop_map(ext, 1024, 2048) == [(1024, 101024, 1024, False),
                                         (2048, 300000, 1024, True)]
    # past the second extent: a hole up to 8192, then the third extent
    assert loop_map(ext, 4000, 4400) == [(4000, 301952, 96, True), (4096, -1, 4096, False),
                                         (8192, 302048, 208, True)]
    assert loop_map(ext, 20000, 8) == [(20000, -1, 8, False)]


def test_manifest_with_map_is_a_loop_node_else_the_named_approximation() -> None:
    st = stack_from_manifest(_manifest())
    assert st.top.kind == "loop" and [m.dev for m in st.top.members] == [VDA]
    assert st.notes == ()
    assert st.top.file_extents[1] == FileExtent(2048, 300000, 2048, True)
    no_dio_key = _manifest()
    del no_dio_key["stack"]["direct_io"]
    for m, why in ((_manifest(None), "no extent map"), (no_dio_key, "direct I/O")):
        fb = stack_from_manifest(m)
        assert fb.top.kind == "disk" and not fb.top.members
        assert len(fb.notes) == 1 and "loop is approximated as disk" in fb.notes[0]
        assert why in fb.notes[0]
    with pytest.raises(ModelConfigError, match="file_extents"):
        stack_from_manifest(_manifest([[0, 1]]))


def test_writes_go_to_the_extents_blocks_one_bio_per_piece() -> None:
    """A 1 MiB write across the first extent's end reaches the disk as two requests at the
    two extents' blocks; the loop request completes after both."""
    st = stack_from_manifest(_manifest())
    bios = BioStream.from_arrays([1024], [2048], rwbs=RWBS_WRITE | RWBS_SYNC, time_ns=[0])
    t = replay(bios, st, preset_for_kernel("6.12.117"), engine="python")
    assert _issued(t, LOOP) == [(1024, 2048, True)]  # one request (contiguous buffer)
    assert _issued(t, VDA) == [(101024, 1024, True), (300000, 1024, True)]
    c_loop = t.time_ns[(t.action == ACT_COMPLETE) & (t.dev == LOOP)]
    c_vda = t.time_ns[(t.action == ACT_COMPLETE) & (t.dev == VDA)]
    assert c_loop.min() >= c_vda.min() and c_loop.max() >= c_vda.max()


def test_reads_of_unwritten_extents_and_holes_do_no_io() -> None:
    st = stack_from_manifest(_manifest())
    bios = BioStream.from_arrays([0, 2048, 5000], [1024, 1024, 1024], rwbs=RWBS_READ,
                                 time_ns=[0, 1_000_000, 2_000_000], pid=1)
    t = replay(bios, st, preset_for_kernel("6.12.117"), engine="python")
    assert _issued(t, VDA) == [(100000, 1024, False)]  # only the written extent
    assert len(_issued(t, LOOP)) == 3
    assert int(np.sum((t.action == ACT_COMPLETE) & (t.dev == LOOP))) == 3


def test_physically_contiguous_extents_merge_in_iomaps_plug() -> None:
    """Two extents that touch on the disk: two bios under ``__iomap_dio_rw``'s plug, one
    request (the second bio back-merges)."""
    st = stack_from_manifest(_manifest([[0, 100000, 1024, 0], [1024, 101024, 1024, 0]]))
    bios = BioStream.from_arrays([512], [1024], rwbs=RWBS_WRITE | RWBS_SYNC, time_ns=[0])
    t = replay(bios, st, preset_for_kernel("6.12.117"), engine="python")
    assert _issued(t, VDA) == [(100512, 1024, True)]


def test_loop_s_worker_runs_after_the_submitter_dispatched_every_piece() -> None:
    """``loop_queue_rq`` only queues the command to loop's worker (``loop_queue_work``): a
    write the loop queue splits in two is dispatched whole (D, D by the submitter) before the
    worker's first bio reaches the disk, then each command's bio under its own plug
    (6.12.117 p_loop_dio_ddw1M: loop D 0+1048, D 1048+1000, then vda 278528+1048, +1000)."""
    m = _manifest([[0, 100000, 8192, 1]])
    m["limits"]["7,0"]["max_sectors_kb"] = 512
    st = stack_from_manifest(m)
    bios = BioStream.from_arrays([0, 2048], [2048, 2048], rwbs=RWBS_WRITE | RWBS_SYNC,
                                 time_ns=[0, 50_000_000], pid=1)
    t = replay(bios, st, preset_for_kernel("6.12.117"), engine="python")
    d = np.flatnonzero((t.action == ACT_ISSUE) & np.isin(t.dev, [LOOP, VDA]))
    d = d[np.argsort(t.time_ns[d], kind="stable")]
    assert [(int(t.dev[i]), int(t.sector[i]), int(t.nr_sectors[i])) for i in d] == [
        (LOOP, 0, 1024), (LOOP, 1024, 1024), (VDA, 100000, 1024), (VDA, 101024, 1024),
        (LOOP, 2048, 1024), (LOOP, 3072, 1024), (VDA, 102048, 1024), (VDA, 103072, 1024)]


def test_fs_writes_run_whole_sequence_by_sequence_after_the_loop_io() -> None:
    """jbd2's log blocks (merged in its plug), its commit block (PREFLUSH|FUA: pre-flush,
    data, post-flush on a write-back disk without FUA), then the inode table block ``sync``
    writes: in that order, after the loop device's own I/O, whatever the scheduler preset."""
    st = stack_from_manifest(_manifest())
    meta_rw = RWBS_WRITE | RWBS_SYNC | RWBS_META
    meta = np.array([[50, 51, 60, 70], [VDA] * 4, [1048688, 1048696, 1048704, 1160],
                     [8, 8, 8, 8], [meta_rw, meta_rw, meta_rw | RWBS_FLUSH | RWBS_FUA,
                                    meta_rw]], dtype=np.int64)
    meta = fold_merged(meta, np.array([False, True, False, False]))
    assert meta[3].tolist() == [16, 8, 8]
    bios = BioStream.from_arrays([0], [1024], rwbs=RWBS_READ, time_ns=[0])
    for sched in ("cfs", "eevdf"):
        rows = md_metadata_rows(meta, bios, st, np.array([[40]], np.int64), sched)
        d = rows[3] == ACT_ISSUE
        assert list(zip(rows[5][d].tolist(), rows[6][d].tolist(), strict=True)) == [
            (1048688, 16), (0, 0), (1048704, 8), (0, 0), (1160, 8)]
        assert int(rows[0].min()) > 40


def _trace(rows: list[tuple[int, int, int, str, int, int]]) -> EventTable:
    """rows: (time, dev, action, rwbs text, sector, nr)."""
    t, dev, act, rw, sec, nr = zip(*rows, strict=True)
    table = EventTable.from_columns(time_ns=np.array(t), dev=np.array(dev),
                                    action=np.array(act), sector=np.array(sec),
                                    nr_sectors=np.array(nr), pid=np.full(len(t), 7),
                                    rwbs=np.array([rwbs_from_text(x) for x in rw]))
    table.meta["format"] = "blktrace"
    return table


def test_the_file_systems_own_io_on_the_disk_below_is_replayed_from_the_trace() -> None:
    """The shape of the 6.12.117 loop_dio_ddw512k capture: ext4lazyinit zeroing an inode
    table (a plain write and a bare flush) before the loop writes, the loop writes at the
    file's blocks, then jbd2's log blocks (two Q, the second back-merged), its commit block
    (PREFLUSH|FUA) and ``sync``'s inode table write. Everything on vda that is not the file's
    is the file system's and comes out as the trace shows it, around the predicted loop I/O."""
    Q, M, INS, D = ACT_QUEUE, ACT_BACKMERGE, ACT_INSERT, ACT_ISSUE
    rows = [(0, VDA, Q, "WS", 1168, 4088), (1, VDA, INS, "WS", 1168, 4088),
            (2, VDA, D, "WS", 1168, 4088), (5, VDA, Q, "FWS", 0, 0), (6, VDA, D, "FN", 0, 0)]
    t = 1000
    for k in range(2):  # two 512 KiB loop writes at file sector 0 and 1024
        rows += [(t, LOOP, Q, "WS", k * 1024, 1024), (t + 1, LOOP, ACT_GETRQ, "WS", k * 1024,
                                                        1024),
                 (t + 2, LOOP, D, "WS", k * 1024, 1024),
                 (t + 3, VDA, Q, "WS", 100000 + k * 1024, 1024),
                 (t + 4, VDA, D, "WS", 100000 + k * 1024, 1024),
                 (t + 50, VDA, ACT_COMPLETE, "WS", 100000 + k * 1024, 1024),
                 (t + 51, LOOP, ACT_COMPLETE, "WS", k * 1024, 1024)]
        t += 100
    rows += [(2000, VDA, Q, "WSM", 1048688, 8), (2001, VDA, Q, "WSM", 1048696, 8),
             (2002, VDA, M, "WSM", 1048696, 8), (2003, VDA, D, "WSM", 1048688, 16),
             (2010, VDA, Q, "FWFSM", 1048704, 8), (2011, VDA, D, "FN", 0, 0),
             (2012, VDA, INS, "WSM", 1048704, 8), (2013, VDA, D, "WSM", 1048704, 8),
             (2014, VDA, D, "FN", 0, 0), (2020, VDA, Q, "WSM", 1160, 8),
             (2021, VDA, D, "WSM", 1160, 8)]
    table = _trace(rows)
    st = stack_from_manifest(_manifest())
    bios = bios_from_table(table, LOOP, stack=st)
    pred = replay(bios, st, preset_for_kernel("6.12.117"), engine="python")
    assert _issued(pred, VDA) == _issued(table, VDA)
    assert _issued(pred, LOOP) == _issued(table, LOOP)
    # without the stack (or the map) the writes that are not REQ_META are not told apart
    # from the loop device's: only the journal and sync writes are kept, as for md (each Q
    # its own write: the back-merge is read only under a loop device)
    plain = bios_from_table(table, LOOP)
    assert plain.meta["md_meta"][2].tolist() == [1048688, 1048696, 1048704, 1160]


def test_a_journal_write_between_two_loop_writes_stays_between_them_on_the_models_clock() -> None:
    """dd writes one bio at a time: the replay runs it on the model's clock (each bio when the
    model completes the one before), which is not the trace's. A journal commit the trace
    shows between the two writes goes after the first write's predicted I/O and before the
    second's, however far the two clocks drift apart."""
    Q, G, D, C = ACT_QUEUE, ACT_GETRQ, ACT_ISSUE, ACT_COMPLETE
    rows: list[tuple[int, int, int, str, int, int]] = []
    for k, t in enumerate((1000, 1100)):  # 100 ns apart in the trace, each completed first
        rows += [(t, LOOP, Q, "WS", k * 1024, 1024), (t + 1, LOOP, G, "WS", k * 1024, 1024),
                 (t + 2, LOOP, D, "WS", k * 1024, 1024),
                 (t + 3, VDA, Q, "WS", 100000 + k * 1024, 1024),
                 (t + 4, VDA, D, "WS", 100000 + k * 1024, 1024),
                 (t + 20, VDA, C, "WS", 100000 + k * 1024, 1024),
                 (t + 21, LOOP, C, "WS", k * 1024, 1024)]
    rows += [(1050, VDA, Q, "WSM", 1048688, 8), (1051, VDA, D, "WSM", 1048688, 8),
             (1060, VDA, C, "WSM", 1048688, 8)]
    table = _trace(sorted(rows))
    st = stack_from_manifest(_manifest())
    bios = bios_from_table(table, LOOP, stack=st)
    assert bios.depth == 1
    pred = replay(bios, st, preset_for_kernel("6.12.117"), engine="python")
    assert _issued(pred, VDA) == [(100000, 1024, True), (1048688, 8, True),
                                  (101024, 1024, True)]


def test_written_ranges_merge_and_split() -> None:
    w = WrittenRanges()
    w.add(100, 50)
    w.add(200, 10)
    w.add(150, 50)  # touches both: one range 100..210
    assert (w.starts, w.ends) == ([100], [210])
    w.add(300, 8)
    assert w.split(90, 230) == [(90, 10, False), (100, 110, True), (210, 90, False),
                                (300, 8, True), (308, 12, False)]
    assert w.split(0, 8) == [(0, 8, False)]


def test_a_read_after_a_write_of_an_unwritten_extent_reads_the_disk() -> None:
    """ext4 converts the written part of the unwritten extent when the direct write completes
    (ext4_convert_unwritten_extents): the read that follows maps it to the disk, the rest of
    the extent still reads as zeroes."""
    st = stack_from_manifest(_manifest())
    bios = BioStream.from_arrays([2048, 2048], [512, 1024],
                                 rwbs=[RWBS_WRITE | RWBS_SYNC, RWBS_READ],
                                 time_ns=[0, 50_000_000], pid=1)
    t = replay(bios, st, preset_for_kernel("6.12.117"), engine="python")
    assert _issued(t, VDA) == [(300000, 512, True), (300000, 512, False)]


def test_loop_without_direct_io_reads_what_the_page_cache_lacks_and_writes_nothing() -> None:
    """``lo_write_simple`` copies into the page cache (no disk I/O until writeback, which the
    trace shows as the disk's own writes); ``lo_read_simple`` reads the disk only for data
    the page cache lacks and the file holds (not unwritten, not a hole, not written or read
    before in this replay)."""
    st = stack_from_manifest(_manifest(dio=False))
    assert st.top.kind == "loop" and not st.top.loop_dio
    assert len(st.notes) == 1 and "page cache" in st.notes[0]
    bios = BioStream.from_arrays([0, 512, 0, 2048, 1024],
                                 [512, 512, 1024, 1024, 512],
                                 rwbs=[RWBS_WRITE, RWBS_READ, RWBS_READ, RWBS_READ, RWBS_READ],
                                 time_ns=[0, 10_000_000, 20_000_000, 30_000_000, 40_000_000],
                                 pid=1)
    t = replay(bios, st, preset_for_kernel("6.12.117"), engine="python")
    # the write: nothing; 512+512: written extent, not cached; 0+1024: cached by then;
    # 2048+1024: unwritten; 1024+512: written extent, not cached
    assert _issued(t, VDA) == [(100512, 512, False), (101024, 512, False)]
    assert int(np.sum((t.action == ACT_COMPLETE) & (t.dev == LOOP))) == 5


def test_without_direct_io_every_write_on_the_disk_is_replayed_from_the_trace() -> None:
    """Writeback of the loop file's pages lands inside the file's blocks: through the page
    cache it is no loop request's own I/O, so it is replayed as the trace shows it."""
    Q, D = ACT_QUEUE, ACT_ISSUE
    rows = [(1000, LOOP, Q, "WS", 0, 1024), (1001, LOOP, ACT_GETRQ, "WS", 0, 1024),
            (1002, LOOP, D, "WS", 0, 1024), (1010, LOOP, ACT_COMPLETE, "WS", 0, 1024),
            (2000, VDA, Q, "W", 100000, 1024), (2001, VDA, D, "W", 100000, 1024),
            (2010, VDA, Q, "WSM", 1160, 8), (2011, VDA, D, "WSM", 1160, 8)]
    table = _trace(rows)
    buffered = stack_from_manifest(_manifest(dio=False))
    pred = replay(bios_from_table(table, LOOP, stack=buffered), buffered,
                  preset_for_kernel("6.12.117"), engine="python")
    assert _issued(pred, VDA) == [(100000, 1024, True), (1160, 8, True)]
    direct = stack_from_manifest(_manifest())
    assert bios_from_table(table, LOOP, stack=direct).meta["md_meta"][2].tolist() == [1160]


def test_a_metadata_read_before_the_first_loop_read_is_replayed_first() -> None:
    """ext4 reading an extent tree block (REQ_META) on the first access to the file: outside
    the file's blocks, so the file system's own; it comes before the loop I/O it served."""
    Q, D = ACT_QUEUE, ACT_ISSUE
    rows = [(1000, LOOP, Q, "R", 0, 1024), (1001, LOOP, ACT_GETRQ, "R", 0, 1024),
            (1002, LOOP, D, "R", 0, 1024), (1003, VDA, Q, "RM", 263176, 8),
            (1004, VDA, D, "RM", 263176, 8), (1010, VDA, ACT_COMPLETE, "RM", 263176, 8),
            (1011, VDA, Q, "R", 100000, 1024), (1012, VDA, D, "R", 100000, 1024),
            (1020, VDA, ACT_COMPLETE, "R", 100000, 1024),
            (1021, LOOP, ACT_COMPLETE, "R", 0, 1024)]
    table = _trace(rows)
    st = stack_from_manifest(_manifest())
    pred = replay(bios_from_table(table, LOOP, stack=st), st, preset_for_kernel("6.12.117"),
                  engine="python")
    assert _issued(pred, VDA) == [(263176, 8, False), (100000, 1024, False)]


def test_writeback_bios_are_cut_where_the_trace_split_them() -> None:
    """A page cache writeback bio on the disk, split by the disk (X: its pages' layout is not
    known otherwise): one request per piece, no Q (and no flush) for the remainder's I."""
    Q, D, X = ACT_QUEUE, ACT_ISSUE, ACT_SPLIT
    rows = [(1000, LOOP, Q, "WS", 0, 1024), (1001, LOOP, ACT_GETRQ, "WS", 0, 1024),
            (1002, LOOP, D, "WS", 0, 1024), (1010, LOOP, ACT_COMPLETE, "WS", 0, 1024),
            (2000, VDA, Q, "W", 100000, 2080), (2001, VDA, X, "W", 100000, 2064),
            (2002, VDA, D, "W", 100000, 2064), (2003, VDA, ACT_INSERT, "W", 102064, 16),
            (2004, VDA, D, "W", 102064, 16)]
    table = _trace(rows)
    table.aux[5] = 102064  # the X: where the remainder starts
    st = stack_from_manifest(_manifest(dio=False))
    pred = replay(bios_from_table(table, LOOP, stack=st), st, preset_for_kernel("6.12.117"),
                  engine="python")
    assert _issued(pred, VDA) == [(100000, 2064, True), (102064, 16, True)]
    assert int(np.sum((pred.action == ACT_QUEUE) & (pred.dev == VDA))) == 1
