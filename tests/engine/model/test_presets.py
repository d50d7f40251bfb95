"""Kernel presets chosen from full version strings."""

import pytest

from workers.errors import ModelConfigError
from workers.model.presets import NAMED, parse_kernel_version, preset_for_kernel


@pytest.mark.parametrize("text,expected", [
    ("6.1.0-57-amd64", (6, 1, 192)),
    ("7.2.13+deb14-amd64", (7, 2, 13)),
    ("v6.18-rc3", (6, 18, 0)),
    ("Linux vm 6.1.0-57-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-1 (2026) x86_64",
     (6, 1, 192)),
    ("6.12.25", (6, 12, 25)),
])
def test_parse_kernel_version(text, expected):
    """uname -r / uname -a / plain spellings all parse."""
    assert parse_kernel_version(text) == expected


def test_unparseable_version_raises():
    """A string without a version is a typed error."""
    with pytest.raises(ModelConfigError):
        preset_for_kernel("not a kernel")


def test_named_presets_exist_and_differ_where_the_kernels_differ():
    """All required presets build; the seed switches flip at the documented versions."""
    presets = {v: preset_for_kernel(v) for v in NAMED}
    assert set(presets) >= {"4.9", "5.15", "6.1", "6.6", "6.12", "6.17", "6.18", "7.2"}
    assert presets["6.17"].split_remainder == "tail"
    assert presets["6.18"].split_remainder == "head"
    assert presets["5.15"].plug_order == "fifo_sorted" and presets["5.15"].max_plug_count == 16
    assert presets["6.1"].plug_order == "lifo" and presets["6.1"].sbitmap_wakeup == "per_queue"
    assert presets["6.6"].sbitmap_wakeup == "global"
    assert presets["4.9"].raid0_discard == "per_chunk"
    assert presets["6.1"].max_sectors_cap_kb == 1280 and presets["7.2"].max_sectors_cap_kb == 4096
    assert presets["7.2"].md_io_opt_align == "on" and presets["6.18"].md_io_opt_align == "off"


def test_backport_and_newer_than_newest():
    """6.12.25 has the FIFO plug backport; a far-future kernel takes the newest preset."""
    assert preset_for_kernel("6.12.24").plug_order == "lifo"
    assert preset_for_kernel("6.12.25").plug_order == "fifo"
    far = preset_for_kernel("9.9.9")
    newest = preset_for_kernel("7.2")
    assert far.to_spec() == newest.to_spec()
    assert preset_for_kernel("6.1.0-57-amd64").name == "linux-6.1.192"


@pytest.mark.parametrize("abi,sublevel", [(47, 170), (50, 176), (53, 187), (56, 192)])
def test_every_bookworm_6_1_abi_the_archive_offers_is_its_stable_version(abi, sublevel):
    """bookworm's 6.1.0-47 .. 6.1.0-57 are 6.1.170 .. 6.1.192 (their package versions), not
    6.1.0: a capture from any of them keeps the 6.1.53 backport of 319ff40a5427 (raid0 maps
    both parts of a split bio), and no guess is reported."""
    from workers.model.presets import kernel_version_warnings

    text = f"6.1.0-{abi}-amd64"
    assert parse_kernel_version(text) == (6, 1, sublevel)
    assert preset_for_kernel(text).raid0_split == "map_both"
    assert kernel_version_warnings(text) == []


def test_an_unlisted_debian_abi_takes_the_nearest_older_one_and_says_so():
    """An ABI above the newest listed is at least that one's sublevel (Debian's ABI number
    only grows); one below every listed ABI stays unknown (6.1.0)."""
    from workers.model.presets import kernel_version_warnings

    assert parse_kernel_version("6.1.0-60-amd64") == (6, 1, 192)
    assert "nearest older ABI" in kernel_version_warnings("6.1.0-60-amd64")[0]
    assert parse_kernel_version("6.1.0-20-amd64") == (6, 1, 0)
    assert "distribution ABI" in kernel_version_warnings("6.1.0-20-amd64")[0]


@pytest.mark.parametrize("text,needle", [
    ("6.12.0-31-amd64", "distribution ABI"),
    ("5.14.0-427.13.1.el9_4.x86_64", "RHEL-style"),
    ("4.4.0", "older than the oldest preset"),
    ("8.1", "newer than the newest kernel"),
])
def test_guessed_versions_carry_a_warning(text, needle):
    """A version the preset table cannot place exactly is modelled, and says so."""
    from workers.model.presets import kernel_version_warnings

    warnings = kernel_version_warnings(text)
    assert len(warnings) == 1 and needle in warnings[0]
    preset_for_kernel(text)  # still modelled


@pytest.mark.parametrize("text", ["7.3.4+deb13-amd64", "7.2.13+deb14-amd64", "6.1.0-57-amd64"])
def test_measured_kernels_carry_no_warning(text):
    """The kernels the lab matrix measured (docs/fidelity.md) are not guesses: 7.3.4, the newest
    Debian offers, must not be reported as newer than the newest the presets were checked on."""
    from workers.model.presets import kernel_version_warnings

    assert kernel_version_warnings(text) == []


def test_a_minor_release_past_the_newest_measured_is_a_guess():
    from workers.model.presets import NEWEST_KNOWN, kernel_version_warnings

    nxt = f"{NEWEST_KNOWN[0]}.{NEWEST_KNOWN[1] + 1}.1"
    assert any("newer than the newest kernel" in w for w in kernel_version_warnings(nxt))


@pytest.mark.parametrize("text", ["6.1.0-57-amd64", "7.2.13+deb14-amd64", "6.18.15", "v6.18-rc3"])
def test_known_versions_have_no_warning(text):
    from workers.model.presets import kernel_version_warnings

    assert kernel_version_warnings(text) == []


def test_plug_merge_candidate_follows_the_one_shot_backmerge_fix_backport():
    """'block: use plug request list tail for one-shot backmerge attempt' (mainline 6.16-rc2)
    was backported to 6.12.35 (its 6.12.35-rc1 review); 6.13.0 had the FIFO plug list without
    it. The 6.12.117 lab capture of buffered writeback merges as the tail-first rule says."""
    assert preset_for_kernel("6.12.25").plug_merge_candidate == "oldest"
    assert preset_for_kernel("6.12.34").plug_merge_candidate == "oldest"
    assert preset_for_kernel("6.12.35").plug_merge_candidate == "newest"
    assert preset_for_kernel("6.12.117+deb13-amd64").plug_merge_candidate == "newest"
    assert preset_for_kernel("6.13.0").plug_merge_candidate == "oldest"
    assert preset_for_kernel("6.16.0").plug_merge_candidate == "newest"
