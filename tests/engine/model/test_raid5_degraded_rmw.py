"""A degraded raid5 write chooses read-modify-write or reconstruct-write by
``handle_stripe_dirtying``'s costs, where a block on the missing member "cannot be read" and
costs 2 * disks on the side that needs it: it does not always reconstruct."""

from workers.events import ACT_ISSUE, RWBS_WRITE
from workers.model import bios_from_workload, preset_for_kernel, replay
from workers.model.stack import stack_from_spec


def _d(table, node):
    r = (table.action == ACT_ISSUE) & (table.dev == node.dev)
    return [(s, n, "W" if w & RWBS_WRITE else "R") for s, n, w in
            zip(table.sector[r].tolist(), table.nr_sectors[r].tolist(), table.rwbs[r].tolist())]


def _half_row_write(kernel):
    # 5 x 128k, left-symmetric, member 4 missing: stripe 4 has its parity on member 0 and
    # data chunks on members 1, 2, 3, 4; a 256k write fills the chunks of members 1 and 2
    stack = stack_from_spec("raid5:disks=5,chunk=128k,failed=4")
    bios = bios_from_workload("dd:bs=256k,count=1,skip=8,op=write,contig=all")
    return stack.top.members, replay(bios, stack, preset_for_kernel(kernel))


def test_degraded_half_row_write_reads_the_written_blocks_and_parity():
    """rmw reads members 1, 2 and the parity (cost 3); rcw would read member 3 and member
    4's block, which cannot be read (cost 1 + 2 * 5): rmw ("raid5 rmw <sector> 3" in the
    6.1 .. 7.2 captures of r5_d5_c128_degraded_ddw768k)."""
    for kernel in ("6.1", "7.2"):
        m, t = _half_row_write(kernel)
        for x in (m[0], m[1], m[2]):
            assert [e for e in _d(t, x) if e[2] == "R"] == [(1024, 256, "R")], kernel
        assert [e for e in _d(t, m[3]) if e[2] == "R"] == [], kernel
        assert [e for e in _d(t, m[3]) if e[2] == "W"] == [], kernel
        for x in (m[0], m[1], m[2]):
            assert sum(n for _, n, w in _d(t, x) if w == "W") == 256, kernel


def test_degraded_row_missing_a_written_block_still_reconstructs():
    """Stripe 1 (parity on member 3, data on 4, 0, 1, 2): a write of its first half has a
    block on the missing member 4, so rmw costs 2 * 5 + 2 and rcw (members 1 and 2) wins."""
    stack = stack_from_spec("raid5:disks=5,chunk=128k,failed=4")
    m = stack.top.members
    bios = bios_from_workload("dd:bs=256k,count=1,skip=2,op=write,contig=all")
    t = replay(bios, stack, preset_for_kernel("6.1"))
    for x in (m[1], m[2]):
        assert [e for e in _d(t, x) if e[2] == "R"] == [(256, 256, "R")]
    for x in (m[0], m[3]):
        assert [e for e in _d(t, x) if e[2] == "R"] == []


def test_degraded_row_whose_only_block_left_alone_is_missing_reads_for_rmw():
    """3 x 64k, member 2 missing: stripe 1 has its parity on member 1 and data on members 2
    (missing) and 0. A write of member 0's chunk alone leaves only the missing block: rcw
    "cannot read it" (2 * 3), rmw reads member 0 and the parity (2), so the kernel reads
    both before it writes; without them the parity could not be brought up to date."""
    stack = stack_from_spec("raid5:disks=3,chunk=64k,failed=2")
    m = stack.top.members
    bios = bios_from_workload("dd:bs=64k,count=1,skip=3,op=write,contig=all")
    for kernel in ("6.1", "7.2"):
        t = replay(bios, stack, preset_for_kernel(kernel))
        for x in (m[0], m[1]):
            assert [e for e in _d(t, x) if e[2] == "R"] == [(128, 128, "R")], kernel
            assert [e for e in _d(t, x) if e[2] == "W"] == [(128, 128, "W")], kernel
        assert _d(t, m[2]) == [], kernel
