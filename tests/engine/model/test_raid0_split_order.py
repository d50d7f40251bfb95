"""raid0_make_request's own split: which part of a chunk-crossing bio reaches its member first.

On 6.1-6.16 md raid0 leaves the queue's ``chunk_sectors`` at 0 and caps ``max_sectors`` at one
chunk, so ``bio_split_to_limits`` cuts a bio at max_sectors and a piece that starts inside a
chunk still crosses the next chunk boundary when it reaches ``raid0_make_request``, which splits
it once more (``bio_split`` + ``bio_chain``). What it does with the remainder is the policy
``raid0_split``:

* ``resubmit`` (f00d7c85be9e, v4.14): the remainder goes back to ``submit_bio_noacct`` and is
  mapped only after the front's member bio has left the bio list;
* ``map_both`` (319ff40a5427 "md/raid0: Fix performance regression for large sequential
  writes", v6.6, stable 5.15.132 / 6.1.53): ``raid0_map_submit_bio(mddev, bio)`` maps the
  remainder to its member at once, then the front; both member bios are on the bio list before
  the next md bio (the rest ``bio_split_to_limits`` resubmitted) is taken.

Known answer (the 6.1.192 capture r0_d4_c64_blkdiscard, a 124 KiB read at sector 264 of a
4-disk raid0 with 64 KiB chunks): ``bio_split_to_limits`` cuts 264+128 (the rest, 392+120,
waits on the bio list), raid0 cuts 264+120 / 384+8, and the members see 384+8 (disk 3) before
264+120 (disk 2); the rest 392+120 then merges behind 384+8 on disk 3.
"""

from __future__ import annotations

import pytest
from model_helpers import d_stream

from workers.errors import ModelConfigError
from workers.events import ACT_QUEUE, ACT_REMAP, RWBS_READ, dev_str
from workers.model import BioStream, preset_for_kernel, replay, stack_from_spec
from workers.model.replay import FAST_MIN_BIOS

#: 6.1-6.16 md raid0 limits: chunk_sectors 0, max_sectors = one 64 KiB chunk
SPEC = "raid0:disks=4,chunk=64k,md_chunk_sectors=0,md_max_sectors_kb=64"


def _member_queue_order(table):
    rows = [i for i in range(len(table)) if int(table.action[i]) == ACT_REMAP]
    return [(dev_str(int(table.dev[i])), int(table.aux[i]), int(table.nr_sectors[i]))
            for i in rows]


@pytest.mark.parametrize("engine", ["python", "fast"])
def test_map_both_sends_the_remainder_first(engine):
    stack = stack_from_spec(SPEC)
    policy = preset_for_kernel("6.1.0-57-amd64")
    assert policy.raid0_split == "map_both"
    table = replay(BioStream.from_arrays([264], [248], rwbs=RWBS_READ), stack, policy,
                   engine=engine)
    disk2, disk3 = (dev_str(stack.top.members[i].dev) for i in (2, 3))
    # A events: (member, array sector, sectors) in the order raid0 mapped them
    assert _member_queue_order(table) == [(disk3, 384, 8), (disk2, 264, 120), (disk3, 392, 120)]
    d = d_stream(table)
    assert sorted(d) == sorted([(disk2, 8, 120), (disk3, 0, 128)])


@pytest.mark.parametrize("engine", ["python", "fast"])
def test_resubmit_maps_the_front_first(engine):
    stack = stack_from_spec(SPEC)
    policy = preset_for_kernel("6.1.0-57-amd64").with_overrides("raid0_split=resubmit")
    table = replay(BioStream.from_arrays([264], [248], rwbs=RWBS_READ), stack, policy,
                   engine=engine)
    disk2, disk3 = (dev_str(stack.top.members[i].dev) for i in (2, 3))
    # front to disk 2; then the bio list holds (rest 392+120, raid0's remainder 384+8) in
    # submission order: the rest is mapped before raid0's own remainder
    assert _member_queue_order(table) == [(disk2, 264, 120), (disk3, 392, 120), (disk3, 384, 8)]


def test_a_bio_inside_one_chunk_is_not_split_by_raid0():
    stack = stack_from_spec(SPEC)
    for kernel in ("6.1.0-57-amd64", "6.12.117"):
        table = replay(BioStream.from_arrays([256, 384], [128, 128]), stack,
                       preset_for_kernel(kernel), engine="python")
        assert [a[1:] for a in _member_queue_order(table)] == [(256, 128), (384, 128)]


def test_change_points():
    assert preset_for_kernel("6.1.52").raid0_split == "resubmit"
    assert preset_for_kernel("6.1.53").raid0_split == "map_both"
    assert preset_for_kernel("6.1.0-57-amd64").raid0_split == "map_both"
    assert preset_for_kernel("5.15.131").raid0_split == "resubmit"
    assert preset_for_kernel("5.15.132").raid0_split == "map_both"
    assert preset_for_kernel("6.3").raid0_split == "resubmit"
    assert preset_for_kernel("6.6").raid0_split == "map_both"
    assert preset_for_kernel("6.17.13").raid0_split == "map_both"


def test_fast_and_python_agree_on_many_unaligned_bios():
    """The compiled engine's twin: a long stream of chunk-crossing bios gives the same events."""
    import numpy as np

    stack = stack_from_spec(SPEC)
    policy = preset_for_kernel("6.1.0-57-amd64")
    n = FAST_MIN_BIOS // 10
    sector = np.arange(n, dtype=np.int64) * 256 + 8
    bios = BioStream.from_arrays(sector, 248, rwbs=RWBS_READ, time_ns=np.arange(n) * 50_000)
    slow = replay(bios, stack, policy, engine="python")
    fast = replay(bios, stack, policy, engine="fast")
    for col in ("action", "dev", "sector", "nr_sectors", "time_ns"):
        assert np.array_equal(getattr(slow, col), getattr(fast, col)), col
    assert int(np.sum(slow.action == ACT_QUEUE)) > n


def test_dm_stripe_stand_in_keeps_resubmitting():
    """dm-stripe is modelled as raid0 but is not raid0.c: dm's ``__split_and_process_bio``
    maps one target piece (up to the chunk end, ``max_io_len``) and resubmits the rest, so
    raid0_make_request's map_both is not applied to the stand-in; and
    ``dm_split_and_process_bio`` does not cut a read to the queue's limits (only abnormal I/O),
    so the 64 KiB max_sectors of the spec does not split it either. The compiled engine, which
    always cuts to limits, refuses dm stand-ins."""
    stack = stack_from_spec(SPEC.replace("raid0:", "dm-stripe:"))
    assert stack.top.approximates == "dm-stripe"
    bios = BioStream.from_arrays([264], [248], rwbs=RWBS_READ)
    table = replay(bios, stack, preset_for_kernel("6.1.0-57-amd64"), engine="python")
    disk2, disk3 = (dev_str(stack.top.members[i].dev) for i in (2, 3))
    assert _member_queue_order(table) == [(disk2, 264, 120), (disk3, 384, 128)]
    with pytest.raises(ModelConfigError):
        replay(bios, stack, preset_for_kernel("6.1.0-57-amd64"), engine="fast")
