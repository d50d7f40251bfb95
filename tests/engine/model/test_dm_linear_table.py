"""dm-linear member sizes from the dm table (``linear_map_sector``; dm core splits at a target
end, ``max_io_len_target_boundary``). Known answer: the lab's 3-disk table of 1 GiB members
(7.3.4 dmlinear_d3_dd512k) puts sector 2097152 on the second disk at sector 0, and a bio across
that point is cut there."""

from __future__ import annotations

from model_helpers import d_stream

from workers.events import make_dev
from workers.model import BioStream, preset_for_kernel, replay, stack_from_manifest
from workers.model.stack import dm_linear_sizes

TABLE = ["lab: 0 2097152 linear 254:0 0", "lab: 2097152 2097152 linear 254:16 0",
         "lab: 4194304 2097152 linear 254:32 0"]
MEMBERS = [make_dev(254, 0), make_dev(254, 16), make_dev(254, 32)]


def test_sizes_come_from_the_targets_in_start_order():
    assert dm_linear_sizes(TABLE, MEMBERS) == (2097152,) * 3
    assert dm_linear_sizes(list(reversed(TABLE)), MEMBERS) == (2097152,) * 3
    # not one target per member in member order, or an offset: no sizes (the caller says so)
    assert dm_linear_sizes(TABLE, list(reversed(MEMBERS))) == ()
    assert dm_linear_sizes(["lab: 0 100 linear 254:0 8"], MEMBERS[:1]) == ()
    assert dm_linear_sizes(["lab: 0 100 striped 2 128 254:0 0 254:16 0"], MEMBERS[:2]) == ()


def test_a_bio_across_a_target_end_goes_to_both_members():
    manifest = {"kernel": "7.3.4", "stack": {
        "top": "252,0", "kind": "dm-linear", "dm_table": TABLE,
        "members": ["254,0", "254,16", "254,32"]}}
    stack = stack_from_manifest(manifest)
    assert stack.top.sizes == (2097152,) * 3
    table = replay(BioStream.from_arrays([2097152 - 512], [1024], plug=[-1]), stack,
                   preset_for_kernel("7.3.4"), engine="python")
    assert sorted(d_stream(table)) == [("254,0", 2097152 - 512, 512), ("254,16", 0, 512)]
