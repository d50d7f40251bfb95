"""Writes through the flush machinery: REQ_PREFLUSH / REQ_FUA with data, through md raid0.

jbd2's commit block (REQ_PREFLUSH | REQ_FUA), ext4's and jbd2's superblocks (REQ_FUA) reach
md raid0, whose ``md_flush_request`` sends an empty flush to every member first; each member
disk (a volatile write cache, no FUA) turns the write into its data request and a post-flush
(``blk_insert_flush``). On 6.19+ a v1 blktrace records none of the bio's own events
(``__blk_add_trace`` drops what exceeds BLK_TC_END_V1, and BLK_TC_FUA is that bit): the trace
shows only the member request's D and C, and md_flush_request's empty flushes.
"""

from __future__ import annotations

import numpy as np

from workers.events import (
    ACT_COMPLETE,
    ACT_GETRQ,
    ACT_ISSUE,
    ACT_QUEUE,
    ACT_REMAP,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_META,
    RWBS_NONE,
    RWBS_SYNC,
    RWBS_WRITE,
    EventTable,
)
from workers.model import preset_for_kernel, replay
from workers.model.replay import BioStream, bios_from_table
from workers.model.stack import raid0_map, stack_from_spec

MS = 1_000_000
W = RWBS_WRITE | RWBS_SYNC | RWBS_META
FN = RWBS_FLUSH | RWBS_NONE


def _member_d(out: EventTable, dev: int) -> list[tuple[int, int]]:
    d = np.flatnonzero((out.action == ACT_ISSUE) & (out.dev == dev))
    return [(int(out.sector[r]), int(out.nr_sectors[r])) for r in d]


def test_a_preflush_fua_write_through_raid0_flushes_every_member_and_post_flushes_its_own():
    """md_flush_request: an empty flush to every member (last bound first), then the bio
    without REQ_PREFLUSH; the member holding the block writes it (REQ_FUA cleared on a queue
    without FUA) and flushes after it completes (REQ_FSEQ_POSTFLUSH). Before, the write went
    down as a plain one: 6.1.0-57 r0_d3_c128_fs_ddw512k 98.5% -> 100% (its two jbd2 commits:
    3 pre-flushes and a post-flush each)."""
    stack = stack_from_spec("raid0:disks=3,chunk=128k")
    stream = BioStream(time_ns=np.array([0]), sector=np.array([512]), nr_sectors=np.array([8]),
                       rwbs=np.array([W | RWBS_FLUSH | RWBS_FUA]), pid=np.array([1]),
                       plug=np.array([0]), seg_bytes=np.zeros(1, np.int64),
                       bio_pages=np.zeros(1, np.int64), depth=0)
    out = replay(stream, stack, preset_for_kernel("6.1.0"), engine="python")
    vda, vdb, vdc = (m.dev for m in stack.top.members)
    idx, msec = raid0_map(512, 256, [1 << 40] * 3)
    assert idx == 2
    assert _member_d(out, vda) == [(0, 0)]
    assert _member_d(out, vdb) == [(0, 0)]
    assert _member_d(out, vdc) == [(0, 0), (msec, 8), (0, 0)]
    data = np.flatnonzero((out.action == ACT_ISSUE) & (out.nr_sectors > 0))
    assert int(out.rwbs[data[0]]) == W  # the request: neither REQ_PREFLUSH nor REQ_FUA
    # a member with FUA writes it with REQ_FUA and no post-flush; a write-through cache
    # drops both flags (and md still sends its empty flushes, which that disk ends at once)
    fua = stack_from_spec("raid0:disks=3,chunk=128k")
    for m in fua.top.members:
        m.limits["fua"] = "1"
    out = replay(stream, fua, preset_for_kernel("6.1.0"), engine="python")
    assert _member_d(out, vdc) == [(0, 0), (msec, 8)]


def _trace(top_flush: bool, with_g: bool) -> EventTable:
    """md0 (9,0) on 8,0 and 8,16 (raid0, 64k chunks, data_offset 2048): a journal write the
    trace shows (Q on md0, A/Q/G/D on the member), then a REQ_PREFLUSH | REQ_FUA commit by the
    same thread of which a 6.19+ v1 trace keeps md_flush_request's empty flushes (Q, G) and
    the member request's D and C only. ``top_flush``: an empty flush on md0 above the member
    flushes (blkdev_issue_flush), so they are that flush's; ``with_g``: the member's D has a
    G (a traced request)."""
    md, vda, vdb = 9 << 20, 8 << 20, (8 << 20) | 16
    rows = [(0, md, ACT_QUEUE, 0, 8, W), (1, vda, ACT_REMAP, 2048, 8, W),
            (1, vda, ACT_QUEUE, 2048, 8, W),
            (2, vda, ACT_GETRQ, 2048, 8, W), (3, vda, ACT_ISSUE, 2048, 8, W),
            (4, vda, ACT_COMPLETE, 2048, 8, W)]
    if top_flush:
        rows.append((9, md, ACT_QUEUE, 0, 0, RWBS_FLUSH | RWBS_WRITE | RWBS_SYNC))
    rows += [(10, vdb, ACT_QUEUE, 0, 0, RWBS_FLUSH | RWBS_WRITE),
             (11, vda, ACT_QUEUE, 0, 0, RWBS_FLUSH | RWBS_WRITE),
             (12, vdb, ACT_GETRQ, 0, 0, RWBS_FLUSH | RWBS_WRITE),
             (13, vda, ACT_GETRQ, 0, 0, RWBS_FLUSH | RWBS_WRITE)]
    if with_g:
        rows.append((14, vdb, ACT_GETRQ, 2048 + 64, 8, W))
    rows += [(15, vdb, ACT_ISSUE, 2048 + 64, 8, W), (16, vdb, ACT_ISSUE, 0, 0, FN),
             (17, vda, ACT_ISSUE, 0, 0, FN), (18, vdb, ACT_COMPLETE, 2048 + 64, 8, W)]
    t, dev, act, sec, nr, rw = (np.array(c, np.int64) for c in zip(*rows, strict=True))
    remap = act == ACT_REMAP  # A: from md0's sector 0
    return EventTable.from_columns(time_ns=t * MS, dev=dev, action=act, sector=sec,
                                   nr_sectors=nr, rwbs=rw, pid=np.full(len(t), 7),
                                   aux=np.zeros(len(t), np.int64), aux2=np.where(remap, md, 0))


def test_a_member_request_with_no_bio_event_is_the_fua_write_the_trace_dropped():
    """The member D with no G, I or Q before it is a REQ_FUA write whose bio events the
    trace lost: it is queued on md0 at its array sector (raid0_unmap), with REQ_FUA, and
    REQ_PREFLUSH where md_flush_request's member flushes have no empty flush on md0 above
    them; the replay then sends it down with its flushes. Before, those writes were missing:
    7.3.4 r0_d2_c256_fstrim 97.4% -> 99.8% (mount's, jbd2's and umount's 7 writes)."""
    from workers.model.stack import raid0_unmap

    stack = stack_from_spec("raid0:disks=2,chunk=64k,data_offset=2048")
    top = stack.top.dev
    sector = raid0_unmap(1, 64, 128, [1 << 40] * 2)
    assert sector == 128 + 64
    bios = bios_from_table(_trace(top_flush=False, with_g=False), top, stack=stack)
    assert bios.sector.tolist() == [0, sector]
    assert bios.rwbs.tolist() == [W, W | RWBS_FUA | RWBS_FLUSH]
    assert bios.pid.tolist() == [7, 7]
    # the member flushes are an empty flush's on md0: the dropped write had REQ_FUA alone
    bios = bios_from_table(_trace(top_flush=True, with_g=False), top, stack=stack)
    assert bios.rwbs.tolist() == [W, RWBS_FLUSH | RWBS_WRITE | RWBS_SYNC, W | RWBS_FUA]
    # a request with its own G is a traced one: nothing to add
    bios = bios_from_table(_trace(top_flush=False, with_g=True), top, stack=stack)
    assert bios.sector.tolist() == [0]
    out = replay(bios_from_table(_trace(top_flush=False, with_g=False), top, stack=stack),
                 stack, preset_for_kernel("7.3.4"), engine="python")
    vda, vdb = (m.dev for m in stack.top.members)
    assert _member_d(out, vdb) == [(2048 + 64, 8), (0, 0), (0, 0)]
    assert _member_d(out, vda) == [(2048, 8), (0, 0)]


def test_md_flush_inline_leaves_the_member_flushes_to_kblockd_after_the_data():
    """md_flush=work (<= 6.11, md_wq's submit_flushes): every member flushes, then
    md_submit_flush_data maps the data. inline (6.12+, "md: remove flush handling"): the
    submitter submits the chained empty flushes and maps the data at once; blk_kick_flush
    leaves each member's flush request to kblockd, so the data request, issued by the
    submitter, reaches its member first (7.3.4: jbd2's D, then kworker's FN). 7.3.4
    r0_d3_c128_fs_ddw512k 99.75% -> 100%."""
    stack = stack_from_spec("raid0:disks=2,chunk=64k")
    stream = BioStream(time_ns=np.array([0]), sector=np.array([128]), nr_sectors=np.array([8]),
                       rwbs=np.array([W | RWBS_FLUSH | RWBS_FUA]), pid=np.array([1]),
                       plug=np.array([-1]), seg_bytes=np.zeros(1, np.int64),
                       bio_pages=np.zeros(1, np.int64), depth=0)
    vdb = stack.top.members[1].dev
    work = replay(stream, stack, preset_for_kernel("6.1.0-57-amd64"), engine="python")
    assert _member_d(work, vdb) == [(0, 0), (0, 8), (0, 0)]
    inline = replay(stream, stack, preset_for_kernel("7.3.4"), engine="python")
    assert _member_d(inline, vdb) == [(0, 8), (0, 0), (0, 0)]
    assert preset_for_kernel("6.11.0").md_flush == "work"
    assert preset_for_kernel("6.12.0").md_flush == "inline"


def test_raid0_unmap_inverts_raid0_map_on_every_zone_and_layout():
    """raid0_unmap gives back the array sector raid0_map sends to a member (equal members:
    one zone; unequal: a zone per size, RAID0_ORIG and ALT_MULTIZONE layouts)."""
    from workers.model.stack import raid0_unmap

    for sizes in ([2048] * 3, [512, 768, 1536]):
        for layout in ("orig", "alt"):
            for sector in range(0, 2048, 7):
                try:
                    idx, msec = raid0_map(sector, 128, sizes, layout)
                except Exception:
                    break
                assert raid0_unmap(idx, msec, 128, sizes, layout) == sector
    assert raid0_unmap(0, 10_000, 128, [2048] * 3) is None


def test_on_raid1_the_members_ds_of_a_dropped_fua_write_are_one_bio():
    """raid1_write_request clones the bio to every member: a REQ_PREFLUSH | REQ_FUA write
    whose bio events a 6.19+ v1 trace dropped shows as a D on each member at the same sector
    (and md_flush_request's empty flushes before them). They are one top bio at the member
    sector less data_offset; the replay sends it to both members with its flushes. Twice in
    a row at the same sector: two bios (7.3.4 p_r1_d2_fstrim: jbd2's commit blocks and
    umount's superblock writes, 94.9% -> 99.6%)."""
    stack = stack_from_spec("raid1:disks=2,data_offset=2048")
    top = stack.top.dev
    vda, vdb = (m.dev for m in stack.top.members)
    rows = [(0, top, ACT_QUEUE, 0, 8, W), (1, vda, ACT_REMAP, 2048, 8, W),
            (1, vda, ACT_QUEUE, 2048, 8, W), (1, vdb, ACT_REMAP, 2048, 8, W),
            (1, vdb, ACT_QUEUE, 2048, 8, W), (2, vda, ACT_GETRQ, 2048, 8, W),
            (2, vdb, ACT_GETRQ, 2048, 8, W), (3, vda, ACT_ISSUE, 2048, 8, W),
            (3, vdb, ACT_ISSUE, 2048, 8, W), (4, vda, ACT_COMPLETE, 2048, 8, W),
            (4, vdb, ACT_COMPLETE, 2048, 8, W)]
    for t0 in (10, 30):  # two commits of block 64: flushes, D on both, post-flushes
        rows += [(t0, vdb, ACT_QUEUE, 0, 0, RWBS_FLUSH | RWBS_WRITE),
                 (t0, vda, ACT_QUEUE, 0, 0, RWBS_FLUSH | RWBS_WRITE),
                 (t0 + 1, vdb, ACT_GETRQ, 0, 0, RWBS_FLUSH | RWBS_WRITE),
                 (t0 + 1, vda, ACT_GETRQ, 0, 0, RWBS_FLUSH | RWBS_WRITE),
                 (t0 + 2, vdb, ACT_ISSUE, 0, 0, FN), (t0 + 2, vda, ACT_ISSUE, 0, 0, FN),
                 (t0 + 3, vda, ACT_ISSUE, 2048 + 64, 8, W),
                 (t0 + 3, vdb, ACT_ISSUE, 2048 + 64, 8, W),
                 (t0 + 4, vda, ACT_COMPLETE, 2048 + 64, 8, W),
                 (t0 + 4, vdb, ACT_COMPLETE, 2048 + 64, 8, W),
                 (t0 + 5, vda, ACT_ISSUE, 0, 0, FN), (t0 + 5, vdb, ACT_ISSUE, 0, 0, FN)]
    rows.sort(key=lambda r: r[0])
    t, dev, act, sec, nr, rw = (np.array(c, np.int64) for c in zip(*rows, strict=True))
    remap = act == ACT_REMAP
    table = EventTable.from_columns(time_ns=t * MS, dev=dev, action=act, sector=sec,
                                    nr_sectors=nr, rwbs=rw, pid=np.full(len(t), 7),
                                    aux=np.zeros(len(t), np.int64),
                                    aux2=np.where(remap, top, 0))
    bios = bios_from_table(table, top, stack=stack)
    assert bios.sector.tolist() == [0, 64, 64]
    assert bios.rwbs.tolist() == [W] + [W | RWBS_FUA | RWBS_FLUSH] * 2
    out = replay(bios, stack, preset_for_kernel("7.3.4"), engine="python")
    for m in (vda, vdb):  # md_flush=inline: the data before kblockd's flush requests
        assert _member_d(out, m) == [(2048, 8)] + [(2048 + 64, 8), (0, 0), (0, 0)] * 2
