"""A thread asleep inside a member bio's submission, before its request (``blk_mq_submit_bio``
-> ``blk_mq_get_new_requests`` -> ``rq_qos_throttle``, wbt's ``rq_qos_wait``): the trace shows
its UT between the clone's Q and its G. The clones before it went out with the flushed plug;
it and the thread's next bios meet in a fresh plug (6.12.117 r1_d3_writeback_24M: ``sync``'s
``5888+8`` on vdb after the flusher's wbt sleep there, then ``D 5888+1168``)."""

import numpy as np

from workers.events import (
    ACT_BACKMERGE,
    ACT_GETRQ,
    ACT_INSERT,
    ACT_ISSUE,
    ACT_PLUG,
    ACT_QUEUE,
    ACT_REMAP,
    ACT_UNPLUG_IO,
    ACT_UNPLUG_TIMER,
    EventTable,
    make_dev,
    rwbs_from_text,
)
from workers.model import preset_for_kernel, replay, stack_from_manifest
from workers.model.replay import bios_from_table
from workers.model.trace_plugs import member_request_sleeps

MD, VDA, VDB = make_dev(9, 0), make_dev(254, 0), make_dev(254, 16)
KERNEL = "6.12.117+deb13-amd64"


def _stack():
    return stack_from_manifest({
        "kernel": KERNEL,
        "stack": {"top": "9,0", "kind": "raid1", "members": ["254,0", "254,16"]},
        "limits": {d: {"rotational": 1, "scheduler": "none", "max_sectors_kb": 1280,
                       "write_cache": "write back"} for d in ("9,0", "254,0", "254,16")},
        "devices": {"md0": "9,0", "vda": "254,0", "vdb": "254,16"}})


def _table(rows):
    t, dev, act, sec, nr = zip(*rows, strict=True)
    n = len(rows)
    table = EventTable.from_columns(
        time_ns=np.array(t) * 1000, dev=np.array(dev), action=np.array(act),
        sector=np.array(sec), nr_sectors=np.array(nr), pid=np.full(n, 7),
        rwbs=np.array([rwbs_from_text("N" if a in (ACT_PLUG, ACT_UNPLUG_IO, ACT_UNPLUG_TIMER)
                                      else "WS") for a in act]))
    table.meta["format"] = "blktrace"
    return table


def _trace(sleep_in_vdb: bool):
    """raid1 over vda and vdb: one thread writes md0 0, 8 and 16 (8 sectors each) under one
    plug. With ``sleep_in_vdb`` it sleeps (UT) after vda's request for sector 0 and before
    vdb's (vdb's 8 and 16 then back-merge into vdb's 0, vda's 16 into vda's 8); otherwise
    after both (the next writes start a new plug)."""
    rows = [(0, MD, ACT_QUEUE, 0, 8), (1, VDA, ACT_REMAP, 0, 8), (2, VDA, ACT_QUEUE, 0, 8),
            (3, VDB, ACT_REMAP, 0, 8), (4, VDB, ACT_QUEUE, 0, 8), (5, VDA, ACT_GETRQ, 0, 8),
            (6, VDA, ACT_PLUG, 0, 0)]
    if sleep_in_vdb:
        rows += [(7, VDA, ACT_UNPLUG_TIMER, 0, 0), (8, VDA, ACT_INSERT, 0, 8),
                 (9, VDA, ACT_ISSUE, 0, 8), (50, VDB, ACT_GETRQ, 0, 8), (51, VDB, ACT_PLUG, 0, 0)]
        first = [(ACT_GETRQ, VDA), (ACT_BACKMERGE, VDB)]
    else:
        rows += [(7, VDB, ACT_GETRQ, 0, 8), (50, VDA, ACT_UNPLUG_TIMER, 0, 0),
                 (51, VDA, ACT_INSERT, 0, 8), (52, VDB, ACT_UNPLUG_TIMER, 0, 0),
                 (53, VDB, ACT_INSERT, 0, 8)]
        first = [(ACT_GETRQ, VDA), (ACT_GETRQ, VDB)]
    t = 60
    for s in (8, 16):
        rows += [(t, MD, ACT_QUEUE, s, 8), (t + 1, VDA, ACT_REMAP, s, 8),
                 (t + 2, VDA, ACT_QUEUE, s, 8), (t + 3, VDB, ACT_REMAP, s, 8),
                 (t + 4, VDB, ACT_QUEUE, s, 8)]
        how = first if s == 8 else [(ACT_BACKMERGE, VDA), (ACT_BACKMERGE, VDB)]
        rows += [(t + 5 + k, dev, a, s, 8) for k, (a, dev) in enumerate(how)]
        t += 10
    rows += [(t, VDA, ACT_UNPLUG_IO, 0, 0), (t + 1, VDB, ACT_UNPLUG_IO, 0, 0)]
    return _table(rows)


def _issued(out, dev):
    d = (out.action == ACT_ISSUE) & (out.dev == dev)
    return list(zip(out.sector[d].tolist(), out.nr_sectors[d].tolist(), strict=True))


def test_the_trace_names_the_member_bio_the_thread_slept_in():
    """The UT's next G of the thread is vdb's sector 0, queued before the UT: asleep inside
    that clone's submission (its first Q there); the UT is that sleep's."""
    stack = _stack()
    table = _trace(True)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    sleeps, uts = member_request_sleeps(table, q, MD, stack)
    assert sleeps == {7: {(VDB, 0, 0)}} and uts == {7: [7000]}
    assert member_request_sleeps(_trace(False), q, MD, stack) == ({}, {})


def test_a_sleep_before_a_member_request_flushes_only_the_clones_before_it():
    """vda's request for sector 0 went out with the flushed plug; vdb's was made after the
    wake, in a fresh plug, so the next writes back-merge into it: vda 0+8 and 8+16, vdb 0+24
    (without the evidence both members write 0+24, the sleep read as after the top bio)."""
    stack = _stack()
    bios = bios_from_table(_trace(True), MD, stack=stack)
    out = replay(bios, stack, preset_for_kernel(KERNEL))
    assert _issued(out, VDA) == [(0, 8), (8, 16)]
    assert _issued(out, VDB) == [(0, 24)]


def test_raid10_clones_sleep_the_same_way():
    """raid10 (near=2 over two disks, one chunk) queues its clones on ``current->bio_list`` as
    raid1 does (``raid10_write_request`` -> ``raid10_write_one_disk`` -> ``submit_bio_noacct``),
    so a sleep in vdb's wbt reads and replays the same (6.16.12 r10n2_d4_c64_writeback_16M:
    ``sync`` asleep in vdc's 13168, UTs on all four members, G 13168 after the wake)."""
    stack = stack_from_manifest({
        "kernel": KERNEL,
        "stack": {"top": "9,0", "kind": "raid10", "chunk_kb": 64, "layout": "near=2",
                  "members": ["254,0", "254,16"]},
        "limits": {d: {"rotational": 1, "scheduler": "none", "max_sectors_kb": 1280,
                       "write_cache": "write back"} for d in ("9,0", "254,0", "254,16")},
        "devices": {"md0": "9,0", "vda": "254,0", "vdb": "254,16"}})
    table = _trace(True)
    q = np.flatnonzero((table.action == ACT_QUEUE) & (table.dev == MD))
    assert member_request_sleeps(table, q, MD, stack) == ({7: {(VDB, 0, 0)}}, {7: [7000]})
    out = replay(bios_from_table(table, MD, stack=stack), stack, preset_for_kernel(KERNEL))
    assert _issued(out, VDA) == [(0, 8), (8, 16)]
    assert _issued(out, VDB) == [(0, 24)]
