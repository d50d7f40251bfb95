"""md raid5 writes and degraded reads through the stripe cache: known answers from
drivers/md/raid5.c (``ops_run_io``'s descending member loop, ``handle_stripe_dirtying``'s
rmw/rcw count over blocks that are not ``R5_UPTODATE``, the stripe cache's LRU per hash list),
each checked against a 6.1.0-57-amd64 lab capture (r5_d4_c64_ddw192k_full,
r5_d5_c128_ddw64k_partial, r5_d4_c64_degraded_dd1M)."""

import dataclasses

import numpy as np

from workers.events import ACT_ISSUE, RWBS_WRITE
from workers.model import bios_from_workload, preset_for_kernel, replay
from workers.model.stack import Stack, stack_from_manifest, stack_from_spec
from workers.model.submit import R5Cache


def _across(table, stack):
    """(member index, member sector, sectors, R/W) of every member D, in issue order."""
    idx = {m.dev: i for i, m in enumerate(stack.top.members)}
    r = np.flatnonzero((table.action == ACT_ISSUE) & np.isin(table.dev, list(idx)))
    r = r[np.argsort(table.time_ns[r], kind="stable")]
    return [(idx[int(table.dev[i])], int(table.sector[i]), int(table.nr_sectors[i]),
             "W" if table.rwbs[i] & RWBS_WRITE else "R") for i in r]


def test_full_stripe_writes_reach_the_members_in_ascending_order_on_6_1():
    """ops_run_io submits member 3, 2, 1, 0 of every stripe_head; raid5d's plug (a LIFO list on
    6.1, blk_mq_dispatch_plug_list taking the newest request's queue first) hands them to the
    members as 0, 1, 2, 3, whatever disk holds the parity (the capture: 0,1,2,3 every stripe)."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k")
    t = replay(bios_from_workload("dd:bs=192k,count=2,contig=all,op=write"), stack,
               preset_for_kernel("6.1.0-57-amd64"))
    assert _across(t, stack) == [(i, 0, 128, "W") for i in range(4)] + \
        [(i, 128, 128, "W") for i in range(4)]


def test_partial_writes_read_only_what_the_stripe_cache_lacks():
    """dd bs=64k on 5 disks, 128k chunks (the r5_d5_c128_ddw64k_partial capture, 6.1):
    the first write to a row reads the old data and parity (rmw: 2 reads < rcw: 3); the next
    chunk of the row finds the parity cached and reads only its old data; the third chunk's
    rcw needs one read (disks 0 and 1 cached) and ties rmw, so rcw; the last chunk reads
    nothing (every other data block is cached)."""
    stack = stack_from_spec("raid5:disks=5,chunk=128k")
    t = replay(bios_from_workload("dd:bs=64k,count=8,contig=all,op=write"), stack,
               preset_for_kernel("6.1.0-57-amd64"))
    got = _across(t, stack)
    want = []
    for half in (0, 128):
        want += [(0, half, 128, "R"), (4, half, 128, "R"), (0, half, 128, "W"),
                 (4, half, 128, "W")]
    for half in (0, 128):
        want += [(1, half, 128, "R"), (1, half, 128, "W"), (4, half, 128, "W")]
    for half in (0, 128):
        want += [(3, half, 128, "R"), (2, half, 128, "W"), (4, half, 128, "W")]
    for half in (0, 128):
        want += [(3, half, 128, "W"), (4, half, 128, "W")]
    assert got == want


def test_a_small_stripe_cache_forgets_the_parity():
    """With stripe_cache_size 16 (2 stripe_heads per hash list) the second half-chunk's 16 rows
    evict the first half's: writing chunk 1 then reads the parity again (rmw, 2 reads)."""
    stack = stack_from_spec("raid5:disks=5,chunk=128k")
    small = Stack(dataclasses.replace(stack.top, stripe_cache=16), stack.notes)
    bios = "dd:bs=64k,count=3,contig=all,op=write"
    big_t = replay(bios_from_workload(bios), stack, preset_for_kernel("6.1"))
    small_t = replay(bios_from_workload(bios), small, preset_for_kernel("6.1"))
    assert _across(big_t, stack)[-3:] == [(1, 0, 128, "R"), (1, 0, 128, "W"), (4, 0, 128, "W")]
    assert _across(small_t, small)[-4:] == [(1, 0, 128, "R"), (4, 0, 128, "R"),
                                            (1, 0, 128, "W"), (4, 0, 128, "W")]


def test_stripe_cache_is_lru_per_hash_list():
    cache = R5Cache(16)  # 2 per list
    assert cache.cap == [2] * 8
    for msec in (0, 64, 128):  # all hash list 0 ((msec >> 3) & 7)
        assert cache.get(msec) == frozenset()
        cache.put(msec, frozenset({msec}))
    # 128 took a free slot after evicting the least recently released (0)
    assert cache.get(0) == frozenset()
    cache.put(0, frozenset())
    assert cache.get(128) == frozenset({128})
    assert cache.get(8) == frozenset()  # another list: untouched


def test_degraded_reads_do_not_reread_a_cached_row():
    """Degraded raid5 (4 disks, 64k, disk 3 missing), dd bs=1M: the first MiB ends in row 5,
    whose chunk 15 is on the missing disk (read from the three others); the next MiB starts
    in the same row and finds it cached (the capture: 768 then 640 sectors per member)."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k,failed=3")
    t = replay(bios_from_workload("dd:bs=1M,count=2,contig=all"), stack,
               preset_for_kernel("6.1.0-57-amd64"))
    assert _across(t, stack) == [(i, 0, 768, "R") for i in range(3)] + \
        [(i, 768, 640, "R") for i in range(3)]


def test_manifest_stripe_cache_size():
    m = {"stack": {"top": "9,0", "kind": "raid5", "chunk_kb": 64, "stripe_cache_size": 4096,
                   "members": ["254,0", "254,16", "254,32"]}}
    assert stack_from_manifest(m).top.stripe_cache == 4096
    del m["stack"]["stripe_cache_size"]
    assert stack_from_manifest(m).top.stripe_cache == 256
