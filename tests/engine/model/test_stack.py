"""Stacks: raid5/raid0/linear mapping (E2.1-E2.3), limits, specs and manifests."""

import pytest
from model_helpers import d_stream

from workers.errors import ModelConfigError
from workers.events import RWBS_WRITE, make_dev
from workers.model import BioStream, preset_for_kernel, replay, stack_from_manifest, stack_from_spec
from workers.model.stack import all_limits, linear_map, raid0_map, raid5_map


def test_e2_1_raid5_mapping_table():
    """E2.1: 4 disks, chunk 1024: chunks 0-3 map to disks 0,1,2,3, member sectors 0,0,0,1024."""
    got = [raid5_map(c * 1024, 1024, 4)[:2] for c in range(4)]
    assert got == [(0, 0), (1, 0), (2, 0), (3, 1024)]
    assert [raid5_map(c * 1024, 1024, 4)[2] for c in range(4)] == [3, 3, 3, 2]


def test_e2_1_order_old_and_new():
    """E2.1: read 0+4096: new 0,1024,2048,3072; old (code-derived) 0,2048,3072,1024."""
    stack = stack_from_spec("raid5:disks=4,chunk=512k,md_max_sectors_kb=1024,device=nvme")
    bio = BioStream.from_arrays([0], [4096])
    for kernel, expected in (("6.18", ["8,0", "8,16", "8,32", "8,48"]),
                             ("6.1", ["8,0", "8,32", "8,48", "8,16"])):
        got = [d for d, _, _ in d_stream(replay(bio, stack, preset_for_kernel(kernel)))]
        assert got == expected, kernel


def test_e2_2_raid0_write_order_is_the_same_under_both_policies():
    """E2.2: raid0 2 disks, chunk 1024, write 0+4096: d0, d1, d0, d1 under head and tail."""
    stack = stack_from_spec("raid0:disks=2,chunk=512k,device=nvme")
    bio = BioStream.from_arrays([0], [4096], rwbs=RWBS_WRITE)
    expected = [("8,0", 0, 1024), ("8,16", 0, 1024), ("8,0", 1024, 1024), ("8,16", 1024, 1024)]
    for kernel in ("6.1", "6.18"):
        pol = preset_for_kernel(kernel).with_overrides("plug_order=fifo")
        assert d_stream(replay(bio, stack, pol)) == expected


def test_e2_3_raid0_zones():
    """E2.3: zone 0 of 3 disks ends at 6144; sector 7168 (zrel 1024) is on disk 1 both ways."""
    sizes = [2048, 4096, 4096]
    assert raid0_map(7168, 1024, sizes, "orig")[0] == raid0_map(7168, 1024, sizes, "alt")[0]
    idx, msec = raid0_map(7168, 1024, sizes, "orig")
    assert (idx, msec) == (2, 2048)  # index 1 of zone 1 (members 1, 2) is disk 2
    # equal members: plain striping
    assert raid0_map(5 * 1024 + 7, 1024, [1 << 20] * 2) == (1, 2 * 1024 + 7)


def test_linear_map_and_split_at_member_end():
    """md-linear maps by concatenation and splits a bio crossing a member end."""
    assert linear_map(150, [100, 100]) == (1, 50, 50)
    node_stack = stack_from_manifest({"stack": {"top": "9,0", "kind": "linear",
                                                "members": ["8,0", "8,16"],
                                                "sizes_sectors": [1000, 1000]}})
    d = d_stream(replay(BioStream.from_arrays([900], [200]), node_stack,
                        preset_for_kernel("6.18")))
    assert d == [("8,0", 900, 100), ("8,16", 0, 100)]


def test_limits_manifest_wins_and_raid5_defaults():
    """raid5 gets max_hw 1 MiB and io_opt = stripe width; md_io_opt_align sets chunk_sectors to
    the stripe width (7.2); a manifest value always wins."""
    stack = stack_from_spec("raid5:disks=8,chunk=512k")
    lim61 = all_limits(stack, preset_for_kernel("6.1"))[make_dev(9, 0)]
    lim72 = all_limits(stack, preset_for_kernel("7.2"))[make_dev(9, 0)]
    assert lim61.max_hw_sectors == 2048 and lim61.max_sectors == 2048
    assert lim61.io_opt == 7 * 512 * 1024 and lim61.chunk_sectors == 0
    assert lim72.chunk_sectors == 7168 and lim72.max_hw_sectors == 7168
    over = stack_from_spec("raid5:disks=8,chunk=512k,md_max_sectors_kb=1024")
    assert all_limits(over, preset_for_kernel("7.2"))[make_dev(9, 0)].max_sectors == 2048
    disk = all_limits(stack, preset_for_kernel("6.1"))[make_dev(8, 0)]
    assert disk.max_sectors == 2560
    assert all_limits(stack, preset_for_kernel("7.2"))[make_dev(8, 0)].max_sectors == 8192


@pytest.mark.parametrize("spec", ["raid7:disks=2", "raid5:disks=2", "raid0:disks=2,chunk=0",
                                  "raid0:disks=x", "disk:bogus_limit=1", "raid0:chunk"])
def test_bad_stack_specs(spec):
    """Invalid specs are ModelConfigError."""
    with pytest.raises(ModelConfigError):
        stack_from_spec(spec)


def test_bad_manifests():
    """Manifests without a stack or top are ModelConfigError."""
    with pytest.raises(ModelConfigError):
        stack_from_manifest({"kernel": "6.1"})
    with pytest.raises(ModelConfigError):
        stack_from_manifest({"stack": {"kind": "raid0"}})


def test_disk_defaults_by_device_class_and_override():
    """SATA disks default to mq-deadline, 32 tags, 64 requests; NVMe to none; limits win."""
    pol = preset_for_kernel("6.6")
    hdd = all_limits(stack_from_spec("disk:device=hdd"), pol)[make_dev(8, 0)]
    assert (hdd.scheduler, hdd.queue_depth, hdd.nr_requests, hdd.rotational) == \
        ("mq-deadline", 32, 64, 1)
    nvme = all_limits(stack_from_spec("disk:device=nvme"), pol)[make_dev(8, 0)]
    assert nvme.scheduler == "none"
    over = all_limits(stack_from_spec("disk:device=hdd,scheduler=none,queue_depth=4"),
                      pol)[make_dev(8, 0)]
    assert (over.scheduler, over.queue_depth) == ("none", 4)
