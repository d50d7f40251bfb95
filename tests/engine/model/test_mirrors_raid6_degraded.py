"""md raid1, raid10 (near/far/offset), raid6 and degraded raid5/6: known answers from the md
driver's own mapping and read_balance rules, and the stacks the model only approximates."""

import numpy as np
import pytest

from workers.errors import ModelConfigError
from workers.events import ACT_ISSUE, RWBS_WRITE
from workers.model import bios_from_workload, preset_for_kernel, replay, stack_from_manifest
from workers.model.stack import (
    raid5_map,
    raid6_map,
    raid10_copies,
    raid10_geometry,
    stack_from_spec,
)
from workers.model.submit import Engine


def _d(table, node):
    r = (table.action == ACT_ISSUE) & (table.dev == node.dev)
    return [(s, n, "W" if w & RWBS_WRITE else "R") for s, n, w in
            zip(table.sector[r].tolist(), table.nr_sectors[r].tolist(), table.rwbs[r].tolist())]


@pytest.mark.parametrize("layout,expected", [
    ("n2", (2, 1, False)), ("near=2", (2, 1, False)), ("258", (2, 1, False)),
    ("f2", (1, 2, False)), ("far=2", (1, 2, False)), ("513", (1, 2, False)),
    ("o2", (1, 2, True)), ("offset=2", (1, 2, True)), ("0x10201", (1, 2, True)),
    ("n2f2", (2, 2, False)), ("", (2, 1, False)),
])
def test_raid10_layout_names(layout, expected):
    assert raid10_geometry(layout) == expected


def test_raid10_layout_garbage_is_refused():
    with pytest.raises(ModelConfigError, match="raid10 layout"):
        raid10_geometry("zigzag")


def test_raid10_copies_match_the_md_man_page_diagrams():
    """md(4): near 2 on 4 disks puts A1 on disks 0,1 and A2 on 2,3; far 2 puts the second
    copy of chunk k on disk k+1 in the second half; offset 2 on the next chunk row."""
    c = 1024  # 512k chunks
    assert [raid10_copies(k * c, c, 4, "n2") for k in range(3)] == [
        [(0, 0), (1, 0)], [(2, 0), (3, 0)], [(0, c), (1, c)]]
    dev = 100 * c
    stride = 50 * c  # calc_sectors: half of each member per far copy
    assert [raid10_copies(k * c, c, 4, "f2", dev) for k in range(5)] == [
        [(0, 0), (1, stride)], [(1, 0), (2, stride)], [(2, 0), (3, stride)],
        [(3, 0), (0, stride)], [(0, c), (1, stride + c)]]
    assert [raid10_copies(k * c, c, 4, "o2") for k in (0, 3, 4)] == [
        [(0, 0), (1, c)], [(3, 0), (0, c)], [(0, 2 * c), (1, 3 * c)]]


def test_raid6_left_symmetric_rotates_p_and_q():
    """raid5_compute_sector, level 6, ALGORITHM_LEFT_SYMMETRIC on 5 disks: stripe 0 is
    Q D D D P, stripe 1 D D D P Q, stripe 2 D D P Q D."""
    c = 128
    rows = [[raid6_map((s * 3 + i) * c, c, 5) for i in range(3)] for s in range(3)]
    assert [(r[0][2], r[0][3]) for r in rows] == [(4, 0), (3, 4), (2, 3)]
    assert [[x[0] for x in r] for r in rows] == [[1, 2, 3], [0, 1, 2], [4, 0, 1]]
    assert all(x[1] == s * c for s, r in enumerate(rows) for x in r)


def test_raid1_sequential_reads_stay_on_one_member_and_writes_go_to_all():
    stack = stack_from_spec("raid1:disks=2")
    a, b = stack.top.members
    reads = replay(bios_from_workload("dd:bs=1m,count=4,contig=all"), stack,
                   preset_for_kernel("6.12"))
    assert _d(reads, a) == [(i * 2048, 2048, "R") for i in range(4)]
    assert _d(reads, b) == []
    writes = replay(bios_from_workload("dd:bs=1m,count=2,contig=all,op=write"), stack,
                    preset_for_kernel("6.12"))
    assert _d(writes, a) == _d(writes, b) == [(0, 2048, "W"), (2048, 2048, "W")]


def test_raid1_degraded_skips_the_failed_member():
    stack = stack_from_spec("raid1:disks=3,failed=0")
    m0, m1, m2 = stack.top.members
    t = replay(bios_from_workload("dd:bs=64k,count=3,op=write"), stack, preset_for_kernel("6.1"))
    assert _d(t, m0) == [] and _d(t, m1) == _d(t, m2) != []
    r = replay(bios_from_workload("dd:bs=64k,count=3"), stack, preset_for_kernel("6.1"))
    assert _d(r, m0) == [] and len(_d(r, m1)) + len(_d(r, m2)) == 3


@pytest.mark.parametrize("policy,expected", [("scan", 2), ("first_idle", 0)])
def test_raid1_read_balance_scan_vs_first_idle(policy, expected):
    """Member 2 continues a sequential read, member 0 is idle: the kernel's scan finds the
    sequential member anywhere (choose_best_rdev returns early only for it); the first_idle
    what-if stops at the idle member."""
    stack = stack_from_spec("raid1:disks=3")
    eng = Engine(stack, preset_for_kernel("6.12").with_overrides(f"md_read_balance={policy}"))
    st = eng.mirrors[stack.top.dev]
    st.next_seq = [0, 0, 5000]
    st.head = [100_000, 0, 5000]
    copies = [(i, 5000) for i in range(3)]
    assert eng._read_balance(stack.top, copies, 8) == expected


def test_raid1_read_balance_busy_rotational_members_take_the_nearest_head():
    stack = stack_from_spec("raid1:disks=2,device=hdd")
    eng = Engine(stack, preset_for_kernel("6.1"))
    st = eng.mirrors[stack.top.dev]
    st.pending = [1, 1]
    st.head = [90_000, 10_000]
    assert eng._read_balance(stack.top, [(0, 12_000), (1, 12_000)], 8) == 1


def test_md_read_balance_is_the_scan_on_every_kernel():
    """6.9's choose_best_rdev refactor kept read_balance's rule: no preset stops at the first
    idle member (the 7.2 raid1 captures read from a sequential second member, the first idle)."""
    for v in ("4.9", "6.1", "6.8", "6.9", "6.12", "7.2", "7.3"):
        assert preset_for_kernel(v).md_read_balance == "scan", v


def test_raid10_near_reads_take_the_first_idle_copy_and_writes_every_copy():
    stack = stack_from_spec("raid10:disks=4,chunk=512k,layout=n2")
    m = stack.top.members
    t = replay(bios_from_workload("dd:bs=1m,count=2,contig=all"), stack,
               preset_for_kernel("6.12"))
    assert _d(t, m[0]) == [(0, 1024, "R"), (1024, 1024, "R")]
    assert _d(t, m[2]) == [(0, 1024, "R"), (1024, 1024, "R")]
    assert _d(t, m[1]) == _d(t, m[3]) == []
    w = replay(bios_from_workload("dd:bs=1m,count=1,contig=all,op=write"), stack,
               preset_for_kernel("6.12"))
    assert [_d(w, x) for x in m] == [[(0, 1024, "W")]] * 4


def test_raid10_far_reads_use_the_lowest_address_copy():
    """With the chunk limit (6.17+) a 2M read is four chunks, each read from its first (near)
    copy: every member once, at the start of its first half."""
    stack = stack_from_spec("raid10:disks=4,chunk=512k,layout=f2,size=100m")
    t = replay(bios_from_workload("dd:bs=2m,count=1,contig=all"), stack,
               preset_for_kernel("6.18"))
    for x in stack.top.members:
        assert _d(t, x) == [(0, 1024, "R")]


def test_raid10_without_the_chunk_limit_splits_at_max_sectors_first():
    """Before the chunk limit md splits the 2M read at max_sectors (1280K = 2.5 chunks) and
    raid10 then at chunks: the third chunk reaches its member as two 256K pieces."""
    stack = stack_from_spec("raid10:disks=4,chunk=512k,layout=f2,size=100m")
    t = replay(bios_from_workload("dd:bs=2m,count=1,contig=all"), stack,
               preset_for_kernel("6.12"))
    assert sorted(_d(t, stack.top.members[2])) == [(0, 512, "R"), (512, 512, "R")]
    assert preset_for_kernel("6.12").raid10_chunk_limit == "off"


def test_degraded_raid5_reads_reconstruct_from_every_other_member():
    """No chunk_aligned_read on a degraded array: a chunk on the failed member is read from
    every other member of its rows (4 KiB stripe_heads, merged below); one on a working member
    from that member only."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k,failed=1")
    m = stack.top.members
    # left-symmetric, 4 disks: stripe 0 data on disks 0, 1, 2 (parity 3)
    lost = replay(bios_from_workload("dd:bs=64k,count=1,skip=1"), stack, preset_for_kernel("6.1"))
    assert _d(lost, m[1]) == []
    for x in (m[0], m[2], m[3]):
        assert _d(lost, x) == [(0, 128, "R")]
    kept = replay(bios_from_workload("dd:bs=64k,count=1"), stack, preset_for_kernel("6.1"))
    assert _d(kept, m[0]) == [(0, 128, "R")]
    assert all(_d(kept, x) == [] for x in (m[1], m[2], m[3]))


def test_raid6_full_stripe_write_writes_p_and_q():
    stack = stack_from_spec("raid6:disks=5,chunk=64k")
    t = replay(bios_from_workload("dd:bs=192k,count=1,contig=all,op=write"), stack,
               preset_for_kernel("6.12"))
    assert [_d(t, x) for x in stack.top.members] == [[(0, 128, "W")]] * 5


def test_too_many_failed_members_is_a_clear_error():
    with pytest.raises(ModelConfigError, match="cannot serve"):
        stack_from_spec("raid5:disks=4,chunk=64k,failed=0+1")


@pytest.mark.parametrize("kind,target", [("dm-stripe", "raid0"), ("dm-linear", "linear"),
                                         ("loop", "disk"), ("null_blk", "disk")])
def test_unmodelled_stacks_are_approximated_and_say_so(kind, target):
    spec = f"{kind}:disks=2,chunk=64k" if target in ("raid0", "linear") else kind
    stack = stack_from_spec(spec)
    assert stack.top.kind == target
    assert stack.notes and "approximated as " + target in stack.notes[0]


def test_unknown_stack_kind_lists_what_is_known():
    with pytest.raises(ModelConfigError, match="known: .*raid10.*dm-crypt"):
        stack_from_spec("zfs:disks=2")


def test_manifest_names_failed_members_by_device_and_raid10_layout_as_mdadm_does():
    manifest = {"kernel": "6.12.0", "stack": {
        "top": "9,0", "kind": "raid10", "chunk_kb": 512, "layout": "near=2",
        "members": ["254,0", "254,16", "254,32", "254,48"], "failed": ["254,16"],
        "component_size_sectors": 2097152}}
    stack = stack_from_manifest(manifest)
    assert stack.top.failed == (1,) and stack.top.layout == "near=2"
    assert stack.top.sizes == (2097152,) * 4
    t = replay(bios_from_workload("dd:bs=512k,count=2"), stack, preset_for_kernel("6.12"))
    issued = {int(d) for d in np.unique(t.dev[t.action == ACT_ISSUE])}
    assert stack.top.members[1].dev not in issued


def test_degraded_raid5_is_not_taken_by_the_compiled_engine():
    """engine='fast' refuses what it does not model instead of answering wrongly."""
    stack = stack_from_spec("raid5:disks=4,chunk=64k,failed=1")
    with pytest.raises(ModelConfigError, match="compiled engine"):
        replay(bios_from_workload("dd:bs=64k,count=2"), stack, preset_for_kernel("6.1"),
               engine="fast")


def test_manifest_of_a_degraded_array_listing_only_present_members():
    """The lab (like mdadm --detail) lists the present members and the empty slot: slot 3 of a
    4-disk raid5 is missing, so rows whose data is in slot 3 are rebuilt from slots 0-2."""
    manifest = {"kernel": "6.1.0", "stack": {
        "top": "9,0", "kind": "raid5", "raid_disks": 4, "chunk_kb": 64,
        "layout": "left-symmetric", "degraded": 1, "missing_slots": [3],
        "members": ["254,0", "254,16", "254,32"], "data_offset_sectors": 4096}}
    stack = stack_from_manifest(manifest)
    assert len(stack.top.members) == 4 and stack.top.failed == (3,)
    assert [m.dev for m in stack.top.members[:3]] == [254 << 20, (254 << 20) | 16,
                                                      (254 << 20) | 32]
    # left-symmetric, 4 disks: stripe 1 has parity on disk 2 and data on 3, 0, 1; its first
    # chunk (array chunk 3) lives on the missing disk 3
    t = replay(bios_from_workload("dd:bs=64k,count=1,skip=3"), stack, preset_for_kernel("6.1"))
    for x in stack.top.members[:3]:
        assert _d(t, x) == [(4096 + 128, 128, "R")]
    with pytest.raises(ModelConfigError, match="raid_disks"):
        stack_from_manifest({"stack": {**manifest["stack"], "raid_disks": 5}})


def test_raid4_keeps_parity_on_the_last_disk():
    """md level 4 (raid5_compute_sector: case 4, pd_idx = data_disks) is raid5's
    ALGORITHM_PARITY_N, modelled exactly (no approximation note); PARITY_0 puts it first."""
    stack = stack_from_spec("raid4:disks=4,chunk=64k")
    assert stack.top.kind == "raid5" and stack.top.layout == "parity-last" and not stack.notes
    assert [raid5_map(c * 128, 128, 4, "parity-last") for c in range(4)] == [
        (0, 0, 3), (1, 0, 3), (2, 0, 3), (0, 128, 3)]
    assert [raid5_map(c * 128, 128, 4, "parity-first") for c in range(4)] == [
        (1, 0, 0), (2, 0, 0), (3, 0, 0), (1, 128, 0)]
    assert raid6_map(3 * 128, 128, 5, "parity-first") == (2, 128, 0, 1)
    assert raid6_map(3 * 128, 128, 5, "parity-last") == (0, 128, 3, 4)
    # a full-stripe write: data on the first three members, parity on the last, every row
    m = stack.top.members
    t = replay(bios_from_workload("dd:bs=192k,count=2,op=write"), stack, preset_for_kernel("6.1"))
    writes = [[s for s, _n, op in _d(t, node) if op == "W"] for node in m]
    assert all(writes) and writes[3] == writes[0]
    manifest = {"kernel": "6.1.0-57-amd64", "stack": {
        "top": "9,0", "kind": "raid4", "chunk_kb": 64, "members": ["8,0", "8,16", "8,32"]}}
    assert stack_from_manifest(manifest).top.layout == "parity-last"
