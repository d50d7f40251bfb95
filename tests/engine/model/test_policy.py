"""Policy: section-7 field names, overrides and validation."""

import pytest

from workers.errors import ModelConfigError
from workers.model.policy import CHOICES, Policy


def test_fields_are_the_section7_spellings():
    """Every section-7 field exists with its documented values."""
    names = {"split_remainder", "split_nomerge", "raid0_discard", "bio_build", "plug_order",
             "plug_merge_candidate", "plug_flush_check", "max_plug_count", "sbitmap_wakeup",
             "tag_preempt", "flags_on_resubmit", "max_sectors_cap_kb", "md_io_opt_align"}
    assert names <= set(Policy().to_dict())
    assert CHOICES["plug_order"] == ("fifo_sorted", "lifo", "fifo")


def test_with_overrides_parses_and_coerces():
    """k=v,k=v changes fields, ints are coerced, the original is unchanged."""
    base = Policy(split_remainder="tail")
    p = base.with_overrides("split_remainder=head, max_plug_count=16,bio_build=align:262144")
    assert p.split_remainder == "head" and p.max_plug_count == 16
    assert p.bio_align_bytes == 262144
    assert base.split_remainder == "tail"
    assert Policy().with_overrides("bio_build=align:256k").bio_align_bytes == 262144


@pytest.mark.parametrize("spec", ["split_to=head", "split_remainder=middle", "max_plug_count=17",
                                  "bio_build=align:100", "bio_build=sometimes", "plug_order"])
def test_with_overrides_rejects_unknown(spec):
    """Unknown fields and values raise ModelConfigError."""
    with pytest.raises(ModelConfigError):
        Policy().with_overrides(spec)


def test_to_spec_round_trips():
    """to_spec() fed back through with_overrides gives the same behaviour."""
    p = Policy(split_remainder="tail", plug_order="lifo", bio_build="cap_max_sectors")
    q = Policy().with_overrides(p.to_spec())
    assert {k: v for k, v in q.to_dict().items() if k != "name"} == \
        {k: v for k, v in p.to_dict().items() if k != "name"}


def test_policy_fields_list_every_behaviour_field():
    """POLICY_FIELDS (what the web validates against) is every field but the preset's name."""
    from workers.model.policy import POLICY_FIELDS

    assert "name" not in POLICY_FIELDS
    assert {"split_remainder", "unplug_trace", "dio_bio_limit"} <= set(POLICY_FIELDS)
    assert len(POLICY_FIELDS) == len(Policy().to_spec().split(","))
