"""``raid10_handle_discard`` (drivers/md/raid10.c, 5.13+): one discard per member.

A discard of two stripes or more is not split per chunk: for the stripes it covers every member
(in slot order) gets one discard of its whole range, ``md_submit_discard_bio`` (A, then Q);
the members' requests then leave the submitter's plug one by one (each new one is
BLK_PLUG_FLUSH_SIZE or more behind the previous, ``blk_add_rq_to_plug``), so the disks see
member 0 first (6.1.192 r10n2_d4_c64_blkdiscard: vda, vdb, vdc, vdd, 131072 sectors each).
A shorter discard goes the chunk-by-chunk way of a write; the parts before the first and after
the last stripe boundary are split off and resubmitted.
"""

from __future__ import annotations

from model_helpers import d_stream

from workers.events import ACT_REMAP, RWBS_DISCARD, dev_str
from workers.model import BioStream, preset_for_kernel, replay, stack_from_spec

SPEC = "raid10:disks=4,chunk=64k,layout=n2,size=1G"


def _run(sector: int, nr: int, kernel: str = "6.1.0-57-amd64", spec: str = SPEC):
    stack = stack_from_spec(spec)
    table = replay(BioStream.from_arrays([sector], [nr], rwbs=RWBS_DISCARD), stack,
                   preset_for_kernel(kernel))
    return table, stack


def test_one_discard_per_member_in_slot_order():
    table, stack = _run(0, 262144)
    members = [dev_str(m.dev) for m in stack.top.members]
    off = stack.top.data_offset
    assert d_stream(table) == [(d, off, 131072) for d in members]
    # one A per member, no per-chunk clones
    assert int((table.action == ACT_REMAP).sum()) == 4


def test_before_5_13_the_discard_goes_chunk_by_chunk():
    table, stack = _run(0, 262144, kernel="5.10")
    assert int((table.action == ACT_REMAP).sum()) == 262144 // 128 * 2
    assert preset_for_kernel("5.10").raid10_discard == "per_chunk"
    assert preset_for_kernel("6.1.0-57-amd64").raid10_discard == "per_member"
    assert preset_for_kernel("7.3.4").raid10_discard == "per_member"


def test_short_discard_takes_the_write_path():
    # under two stripes (2 * 2 chunks of 128 sectors): raid10_handle_discard returns -EAGAIN
    table, _ = _run(0, 511)
    assert int((table.action == ACT_REMAP).sum()) > 4


def test_unaligned_ends_are_split_off_and_resubmitted():
    # stripe = 256 sectors; 100..(100 + 2000): head 100..256 and tail 2048..2100 resubmitted,
    # the stripes 256..2048 one discard per member
    table, stack = _run(100, 2000)
    off = stack.top.data_offset
    a = table.action == ACT_REMAP
    remaps = sorted(zip(table.dev[a].tolist(), table.sector[a].tolist(),
                        table.nr_sectors[a].tolist(), strict=True))
    per_member = [r for r in remaps if r[2] == (2048 - 256) // 2]
    assert [r[1] for r in per_member] == [off + 128] * 4
    # every sector of the discard reaches two members
    assert sum(r[2] for r in remaps) == 2 * 2000


def test_far_layout_discards_each_far_copy():
    table, stack = _run(0, 4096, spec="raid10:disks=4,chunk=64k,layout=f2,size=1G")
    a = table.action == ACT_REMAP
    assert int(a.sum()) == 8  # one r10_bio per far copy, four members each
    assert int(table.nr_sectors[a].sum()) == 2 * 4096
