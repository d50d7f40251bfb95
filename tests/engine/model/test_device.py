"""Device service models: HDD positioning and stream bonus, SSD overlap, discard limits, specs."""

from __future__ import annotations

import pytest

from workers.errors import ModelConfigError
from workers.model.device import (
    PRESETS,
    HDDModel,
    SSDModel,
    default_device,
    device_from_spec,
)

MIB_SECTORS = 2048


def test_hdd_sequential_request_pays_only_transfer() -> None:
    """A request starting at the head position costs overhead + transfer, no seek/rotation."""
    hdd = HDDModel()
    t = hdd.service_ns(1000, 256, True, False, prev_end=1000)
    transfer = 256 * 512 / hdd.media_rate_bps * 1e9
    assert t == pytest.approx(hdd.command_overhead_ns + transfer, abs=2)


def test_hdd_random_request_pays_seek_and_half_a_revolution() -> None:
    """A far request adds seek(distance) plus the mean rotational latency."""
    hdd = HDDModel()
    far = hdd.capacity_sectors // 2
    t_seq = hdd.service_ns(0, 256, True, False, prev_end=0)
    t_far = hdd.service_ns(far, 256, True, False, prev_end=0)
    assert t_far - t_seq == pytest.approx(hdd.seek_ns(far) + hdd.avg_rotational_ns, abs=2)
    assert hdd.avg_rotational_ns == pytest.approx(30e9 / hdd.rpm)


def test_hdd_seek_grows_with_distance_between_min_and_full_stroke() -> None:
    """Seek time is monotone in distance, track-to-track at the short end, full stroke at the end."""
    hdd = HDDModel()
    distances = [1, 1000, 10**6, 10**8, hdd.capacity_sectors]
    seeks = [hdd.seek_ns(d) for d in distances]
    assert seeks == sorted(seeks)
    assert seeks[0] == pytest.approx(hdd.seek_min_ns, rel=0.01)
    assert seeks[-1] == pytest.approx(hdd.seek_full_ns)
    assert hdd.seek_ns(0) == 0


def test_hdd_small_forward_gap_rotates_instead_of_seeking() -> None:
    """A short forward skip (within the stream window) costs the gap's transfer time only."""
    hdd = HDDModel()
    gap = 64
    t = hdd.service_ns(1000 + gap, 256, True, False, prev_end=1000)
    expected = hdd.command_overhead_ns + (gap + 256) * 512 / hdd.media_rate_bps * 1e9
    assert t == pytest.approx(expected, abs=2)
    backwards = hdd.service_ns(1000 - gap, 256, True, False, prev_end=1000)
    assert backwards > t + hdd.avg_rotational_ns / 2


def test_hdd_eight_contiguous_128k_pieces_cost_about_one_1m_command() -> None:
    """The stream bonus: 8 x 128K back to back ~ one 1M command (seed 003's premise)."""
    hdd = HDDModel()
    one = hdd.service_ns(5_000_000, MIB_SECTORS, True, False, prev_end=-1)
    pieces = hdd.service_ns(5_000_000, 256, True, False, prev_end=-1)
    pieces += sum(hdd.service_ns(5_000_000 + 256 * k, 256, True, False,
                                 prev_end=5_000_000 + 256 * k) for k in range(1, 8))
    assert pieces == pytest.approx(one, rel=0.05)
    scattered = 8 * hdd.service_ns(5_000_000, 256, True, False, prev_end=-1)
    assert scattered > 2.5 * one


def test_ssd_write_and_read_use_their_bandwidths() -> None:
    """SSD service = per-command overhead + bytes / direction bandwidth."""
    ssd = PRESETS["nvme"]
    assert isinstance(ssd, SSDModel)
    w = ssd.service_ns(0, MIB_SECTORS, True, False, prev_end=-1)
    r = ssd.service_ns(0, MIB_SECTORS, False, False, prev_end=-1)
    assert w == pytest.approx(ssd.write_overhead_ns + (1 << 20) / ssd.write_bandwidth_bps * 1e9,
                              abs=2)
    assert r == pytest.approx(ssd.read_overhead_ns + (1 << 20) / ssd.read_bandwidth_bps * 1e9,
                              abs=2)
    assert ssd.parallelism == ssd.units


def test_sata_trim_is_ops_bound_and_nvme_is_not() -> None:
    """Seed 002: a 512K trim on SATA costs ~ a 64M trim; on NVMe cost scales with bytes."""
    sata, nvme = PRESETS["sata_ssd"], PRESETS["nvme"]
    small, big = 1024, 131072
    s_small = sata.service_ns(0, small, False, True, -1)
    s_big = sata.service_ns(0, big, False, True, -1)
    assert s_small == pytest.approx(1e9 / sata.discard_ops_per_s, rel=0.01)
    assert s_big < 1.5 * s_small
    n_small = nvme.service_ns(0, small, False, True, -1)
    n_big = nvme.service_ns(0, big, False, True, -1)
    assert n_big > 20 * n_small
    assert (big // small) * s_small / s_big > 50


def test_device_from_spec_names_mappings_and_params() -> None:
    """Preset names, aliases, {kind: ..., field: ...} and {kind, params: {...}} all work."""
    assert device_from_spec("hdd") == PRESETS["hdd"]
    assert device_from_spec("SATA") == PRESETS["sata_ssd"]
    m = device_from_spec({"kind": "nvme", "write_bandwidth_bps": "1e9"})
    assert isinstance(m, SSDModel) and m.write_bandwidth_bps == 1e9 and m.units == 64
    h = device_from_spec({"kind": "hdd", "params": {"rpm": 7200, "seek_full_ns": 9e6}})
    assert isinstance(h, HDDModel) and h.rpm == 7200 and h.seek_full_ns == 9_000_000
    assert device_from_spec(h) is h
    assert default_device(True).kind == "hdd" and default_device(False).kind == "ssd"
    assert device_from_spec({"kind": "sata_ssd", "queued_discard": "yes"}).queued_discard


@pytest.mark.parametrize("spec", [
    "floppy",
    {"rpm": 7200},
    {"kind": "hdd", "warp": 9},
    {"kind": "hdd", "rpm": "fast"},
    {"kind": "hdd", "rpm": 0},
    {"kind": "nvme", "units": -1},
    {"kind": "hdd", "seek_min_ns": 5e6, "seek_full_ns": 1e6},
    42,
])
def test_device_from_spec_rejects_bad_input_with_typed_error(spec: object) -> None:
    """Unknown kinds, fields and out-of-range values raise ModelConfigError."""
    with pytest.raises(ModelConfigError):
        device_from_spec(spec)  # type: ignore[arg-type]


def test_to_json_round_trips_through_device_from_spec() -> None:
    """A model's JSON (as stored in predicted tables' meta) rebuilds the same model."""
    for model in PRESETS.values():
        data = model.to_json()
        assert device_from_spec(data) == model
