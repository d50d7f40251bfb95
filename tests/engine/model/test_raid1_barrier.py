"""raid1's I/O barrier units (drivers/md/raid1.c ``align_to_barrier_unit_end``, v4.11+).

``raid1_make_request`` cuts every bio at the end of its 64 MiB barrier unit (1 << 17 sectors
of the array) and resubmits the rest, reads, writes and discards alike: mkfs's BLKDISCARD of
a whole 2 x 1 GiB raid1 reaches each member as 64 MiB discards (6.12.117 p_r1_d2_fstrim:
md0 X at 131072, 262144, ...; vda and vdb D 4096+131072, 135168+131072, ...). The pieces do
not merge on the members: each request is 128 KiB or more, so ``blk_add_rq_to_plug`` flushes
the plug as the next one joins it.
"""

from __future__ import annotations

from model_helpers import d_stream

from workers.events import ACT_REMAP, RWBS_DISCARD, RWBS_READ, dev_str
from workers.model import BioStream, preset_for_kernel, replay, stack_from_spec

SPEC = "raid1:disks=2,size=1G"
UNIT = 1 << 17


def _run(sector: int, nr: int, rwbs: int = RWBS_DISCARD, kernel: str = "6.12.117"):
    stack = stack_from_spec(SPEC)
    table = replay(BioStream.from_arrays([sector], [nr], rwbs=rwbs), stack,
                   preset_for_kernel(kernel))
    return table, stack


def test_a_discard_reaches_each_member_cut_at_the_barrier_units():
    table, stack = _run(1000, 3 * UNIT)
    off = stack.top.data_offset
    pieces = [(1000, UNIT - 1000), (UNIT, UNIT), (2 * UNIT, UNIT), (3 * UNIT, 1000)]
    for m in stack.top.members:
        got = [(s, n) for d, s, n in d_stream(table) if d == dev_str(m.dev)]
        assert got == [(off + s, n) for s, n in pieces]


def test_a_read_across_a_unit_end_is_cut_there():
    """Two member bios (A), one per unit; they may still merge in the submitter's plug."""
    table, stack = _run(UNIT - 8, 16, rwbs=RWBS_READ)
    off = stack.top.data_offset
    a = table.action == ACT_REMAP
    assert sorted(zip(table.sector[a].tolist(), table.nr_sectors[a].tolist(),
                      strict=True)) == [(off + UNIT - 8, 8), (off + UNIT, 8)]


def test_before_4_11_raid1_did_not_cut_at_units():
    assert preset_for_kernel("4.9").raid1_barrier == "window"
    assert preset_for_kernel("6.1.0-57-amd64").raid1_barrier == "units"
    table, stack = _run(1000, 3 * UNIT, kernel="4.9")
    off = stack.top.data_offset
    assert [(s, n) for d, s, n in d_stream(table)
            if d == dev_str(stack.top.members[0].dev)] == [(off + 1000, 3 * UNIT)]
