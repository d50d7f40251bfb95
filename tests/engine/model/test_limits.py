"""QueueLimits: sysfs names, units and validation."""

import pytest

from workers.errors import ModelConfigError
from workers.model.limits import QueueLimits


def test_from_sysfs_converts_units():
    """max_sectors_kb and discard_max_bytes become sectors; block sizes stay bytes."""
    lim = QueueLimits.from_sysfs({"max_sectors_kb": 512, "max_hw_sectors_kb": "2147483647",
                                  "discard_max_bytes": 2147483136, "logical_block_size": 512,
                                  "physical_block_size": 4096, "scheduler": "[mq-deadline] none",
                                  "nr_requests": 64})
    assert lim.max_sectors == 1024
    assert lim.max_discard_sectors == 2147483136 // 512
    assert lim.physical_block_size == 4096 and lim.pbs_sectors == 8
    assert lim.scheduler == "mq-deadline" and lim.has_elevator
    assert lim.nr_requests == 64


def test_from_sysfs_field_names_and_base():
    """Field names are accepted too and override a base."""
    base = QueueLimits(max_sectors=256, max_hw_sectors=256, chunk_sectors=128)
    lim = QueueLimits.from_sysfs({"chunk_sectors": 1024, "max_segments": 254}, base=base)
    assert (lim.max_sectors, lim.chunk_sectors, lim.max_segments) == (256, 1024, 254)


def test_max_sectors_follows_cap_when_only_hw_given():
    """Without max_sectors_kb the soft limit is min(max_hw, BLK_DEF_MAX_SECTORS_CAP)."""
    old = QueueLimits.from_sysfs({"max_hw_sectors_kb": 32767}, max_sectors_cap_kb=1280)
    new = QueueLimits.from_sysfs({"max_hw_sectors_kb": 32767}, max_sectors_cap_kb=4096)
    assert old.max_sectors == 2560 and new.max_sectors == 8192
    raid5 = QueueLimits.from_sysfs({"max_hw_sectors_kb": 1024, "optimal_io_size": 3670016},
                                   max_sectors_cap_kb=1280)
    assert raid5.max_sectors == 2048


@pytest.mark.parametrize("values", [{"max_sectors_kb": "lots"}, {"no_such_limit": 1},
                                    {"logical_block_size": 1000}, {"max_sectors_kb": -1}])
def test_bad_values_raise_model_config_error(values):
    """Unknown names and bad values are typed errors, not crashes."""
    with pytest.raises(ModelConfigError):
        QueueLimits.from_sysfs(values)


def test_to_sysfs_round_trip():
    """to_sysfs output reads back to the same limits."""
    lim = QueueLimits(max_sectors=1024, max_hw_sectors=4096, chunk_sectors=128,
                      max_discard_sectors=2048, scheduler="mq-deadline")
    assert QueueLimits.from_sysfs(lim.to_sysfs()) == lim
