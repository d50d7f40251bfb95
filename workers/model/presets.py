"""Kernel presets: every policy field as a given kernel behaves (kernel-model.md section 7).

A preset is chosen from the **full** version, because stable backports change behaviour inside
a series (the FIFO plug list arrived in 6.12.25). ``preset_for_kernel`` accepts what a bundle
carries: ``uname -r`` ("6.1.0-57-amd64", "7.2.13+deb14-amd64"), ``uname -a`` (which names the
Debian package version, "Debian 6.1.192-1"), plain versions ("6.18", "v6.18-rc3").

The table is a list of change points, each the first version with a behaviour; a version takes
every change point at or below it. Versions newer than the newest known take the newest.
Change points marked *inferred* in kernel-model.md are marked so here and in docs/model.md.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from workers.errors import ModelConfigError
from workers.model.policy import Policy

Version = tuple[int, int, int]

#: Debian ABI names that hide the stable version: (major, minor, abi) -> sublevel.
#: "6.1.0-57-amd64" is 6.1.192 (kernel-model.md section 7; the samples' uname.txt). The rest
#: are the package versions of bookworm's ``linux-image-6.1.0-NN-amd64`` (``apt-cache show``,
#: Version: 6.1.170-3 for -47, ...; every 6.1 ABI the archive offers on 2026-12-03). Debian
#: raises the ABI number with each new upload, so an ABI between two known ones is at least
#: the lower one's sublevel (:func:`debian_abi_sublevel`).
DEBIAN_ABI: dict[tuple[int, int, int], int] = {
    (6, 1, 47): 170, (6, 1, 48): 172, (6, 1, 49): 174, (6, 1, 50): 176, (6, 1, 51): 177,
    (6, 1, 52): 180, (6, 1, 53): 187, (6, 1, 54): 190, (6, 1, 55): 192, (6, 1, 56): 192,
    (6, 1, 57): 192,
}


def debian_abi_sublevel(major: int, minor: int, abi: int) -> tuple[int, bool]:
    """The stable sublevel of Debian's ``MAJOR.MINOR.0-ABI`` kernel and whether it is exact:
    the table's entry, else the sublevel of the nearest lower ABI the table knows (a lower
    bound: the ABI only grows with new uploads), else 0 (unknown)."""
    exact = DEBIAN_ABI.get((major, minor, abi))
    if exact is not None:
        return exact, True
    lower = [k[2] for k in DEBIAN_ABI if k[:2] == (major, minor) and k[2] < abi]
    return (DEBIAN_ABI[(major, minor, max(lower))], False) if lower else (0, False)

#: Change points: (first version, changes, source). Applied in order on top of the oldest.
CHANGES: tuple[tuple[Version, dict[str, Any], str], ...] = (
    ((4, 9, 0), dict(split_remainder="tail", split_nomerge="cleared_by_md",
                     raid0_discard="per_chunk", raid10_discard="per_chunk", bio_build="uncapped",
                     plug_order="fifo_sorted",
                     plug_merge_candidate="scan", plug_flush_check="newest", max_plug_count=16,
                     sbitmap_wakeup="per_queue", tag_preempt="always", flags_on_resubmit="reset",
                     max_sectors_cap_kb=1280, md_io_opt_align="off", dio_bio_limit="pages",
                     unplug_trace="always", md_read_balance="scan",
                     raid10_chunk_limit="off", raid0_split="resubmit",
                     sched_wakeup="cfs", dm_crypt_split="writes_1m", md_flush="work",
                     raid1_barrier="window", write_zeroes_chunk="off",
                     dm_stripe_chunk_limit="off"),
     "baseline: v4.6 'MD: make bio mergeable' (seed 002) is in; no multipage bvecs"),
    ((4, 11, 0), dict(raid1_barrier="units"),
     "fd76863e37fe RAID1: a new I/O barrier implementation to remove resync window (Coly Li, "
     "inferred v4.11): bios cut at 64 MiB barrier units (6.12.117: md0 X every 131072 sectors "
     "of a BLKDISCARD)"),
    ((4, 12, 0), dict(raid0_discard="per_member"), "raid0_handle_discard (about 4.12)"),
    ((5, 1, 0), dict(dio_bio_limit="vecs"), "07173c3ec276 block: enable multipage bvecs"),
    ((5, 12, 0), dict(flags_on_resubmit="preserve"),
     "bcache: dont reset bio opf in bch_data_insert_start (inferred 5.11/5.12)"),
    ((5, 13, 0), dict(raid10_discard="per_member"),
     "md/raid10: improve raid10 discard request (Xiao Ni; re-merged about 5.13 after a revert): "
     "raid10_handle_discard, one discard per member (the 6.1.192 capture: member 0 first)"),
    ((5, 15, 132), dict(raid0_split="map_both"),
     "319ff40a5427 md/raid0: Fix performance regression for large sequential writes "
     "(5.15.132 stable review, patch 188/511)"),
    ((5, 16, 0), dict(raid0_split="resubmit"), "5.16-6.1.52 without 319ff40a5427"),
    ((5, 16, 0), dict(plug_order="lifo", plug_merge_candidate="newest",
                      plug_flush_check="newest", max_plug_count=32, unplug_trace="not_direct"),
     "bc490f81731e singly linked plug list; ba0ffdd8ce48 plug count 32"),
    ((6, 1, 53), dict(raid0_split="map_both"),
     "319ff40a5427 md/raid0 maps both parts of a split bio, backported to 6.1.53 (6.1 stable "
     "review of 2023-09-11, after patch 319/600 'Factor out helper for mapping and submitting "
     "a bio'; the 6.1.192 raid0 capture maps the remainder first)"),
    ((6, 2, 0), dict(sbitmap_wakeup="global"), "4f8126bb2308 sbitmap single wakeup counter"),
    ((6, 2, 0), dict(raid0_split="resubmit"),
     "6.2-6.5 without 319ff40a5427 (its 6.4/6.5 stable backports are not checked)"),
    ((6, 6, 0), dict(raid0_split="map_both"),
     "319ff40a5427 md/raid0: Fix performance regression for large sequential writes (v6.6)"),
    ((6, 6, 0), dict(sched_wakeup="eevdf"),
     "147f3efaa241 sched/fair: Implement an EEVDF-like scheduling policy (v6.6): a woken "
     "kblockd worker no longer preempts md's thread (the 6.18/7.x captures insert every "
     "member's superblock write before any step of md_update_sb's flush sequences; 6.1's "
     "the next member's only once kblockd's worker is idle)"),
    ((6, 11, 0), dict(dm_crypt_split="128k"),
     "0d815e3400e6 dm-crypt: limit the size of encryption requests (dm tree for 6.11): reads "
     "and writes at 128 KiB (the 7.3.4 dm-crypt captures: 256 + 256 sectors per 256 KiB read)"),
    ((6, 12, 0), dict(md_flush="inline"),
     "md: remove flush handling (Yu Kuai, md-6.12): md_flush_request chains an empty flush per "
     "member to the bio and maps the bio at once (7.3.4: the members' flush Q by jbd2, the "
     "data D before kblockd's flush D; 6.1.0-57: md_wq's kworker, flushes first)"),
    ((6, 12, 0), dict(unplug_trace="always"),
     "blk-mq: add missing unplug trace event (Keith Busch, posted 2024-09-06; inferred 6.12)"),
    ((6, 12, 2), dict(write_zeroes_chunk="on"),
     "60dc5ea6bcfd block: take chunk_sectors into account in bio_split_write_zeroes (Christoph "
     "Hellwig, for-6.13/block; 6.12 stable review of 2024-12-03, also 6.11.11)"),
    ((6, 12, 25), dict(plug_order="fifo", plug_merge_candidate="oldest",
                       plug_flush_check="oldest"),
     "e70c301faece backported to 6.12.25 (merge looks at the head = oldest)"),
    ((6, 12, 35), dict(plug_merge_candidate="newest"),
     "block: use plug request list tail for one-shot backmerge attempt, backported to 6.12.35 "
     "(6.12.35-rc1 review list; the 6.12.117 writeback capture merges as it says)"),
    ((6, 12, 43), dict(dm_stripe_chunk_limit="on"),
     "5fb9d4341b78 dm-stripe: limit chunk_sectors to the stripe size, backported to 6.12.43 "
     "(6.12 stable review 073/444 of 2025-08-18; sublevel inferred)"),
    ((6, 13, 0), dict(plug_merge_candidate="oldest"),
     "6.13.0 has the FIFO plug list without that fix (mainline fix in 6.16-rc2)"),
    ((6, 13, 0), dict(dm_stripe_chunk_limit="off"),
     "6.13-6.16 without 5fb9d4341b78 (its 6.15/6.16 stable backports are not checked)"),
    ((6, 16, 0), dict(plug_merge_candidate="newest"),
     "block: use plug request list tail for one-shot backmerge attempt (inferred 6.16)"),
    ((6, 17, 0), dict(max_sectors_cap_kb=4096, raid10_chunk_limit="on"),
     "9b8b84879d4a BLK_DEF_MAX_SECTORS_CAP 4096 KiB (7.2 capture: 4096); md/raid10: set "
     "chunk_sectors limit (John Garry, inferred 6.17)"),
    ((6, 17, 0), dict(dm_stripe_chunk_limit="on"),
     "5fb9d4341b78 dm-stripe: limit chunk_sectors to the stripe size (John Garry, "
     "for-6.17/block; the 6.18.15 and 7.3.4 dm-stripe captures: chunk_sectors = the chunk, "
     "6.1.0-57's 0)"),
    ((6, 18, 0), dict(split_remainder="head", dio_bio_limit="pages"),
     "b2f5974079d8 split bios at the head (observed 6.18.15); dio bio build 1 MiB (inferred, "
     "observed 7.2.13)"),
    ((7, 0, 0), dict(md_io_opt_align="on"), "md: align bio to io_opt (inferred 7.0; seen 7.2.13)"),
)

#: Named presets required by the issue; each label is the version it stands for.
NAMED: tuple[str, ...] = ("4.9", "5.15", "6.1", "6.6", "6.12", "6.17", "6.18", "7.2")


def parse_kernel_version(text: str) -> Version:
    """(major, minor, sublevel) from any common spelling of a kernel version.

    Raises:
        ModelConfigError: no version number in ``text``.
    """
    s = str(text).strip()
    m = re.search(r"Debian\s+(\d+)\.(\d+)\.(\d+)", s)
    if m:
        return int(m.group(1)), int(m.group(2)), int(m.group(3))
    m = re.search(r"(?<![\d.])v?(\d+)\.(\d+)(?:\.(\d+))?(?:-(\d+))?", s)
    if not m:
        raise ModelConfigError(f"cannot read a kernel version from {text!r}")
    major, minor = int(m.group(1)), int(m.group(2))
    sub = int(m.group(3)) if m.group(3) is not None else 0
    abi = m.group(4)
    if sub == 0 and abi is not None and m.group(3) is not None:
        # Debian ABI spelling "6.1.0-57-amd64": the stable sublevel is not in the string.
        sub = debian_abi_sublevel(major, minor, int(abi))[0]
    return major, minor, sub


#: The newest kernel the change points were checked against (a newer one takes its preset):
#: 7.3.4, whose whole lab matrix the fidelity table scores (docs/fidelity.md).
NEWEST_KNOWN: Version = (7, 3, 4)


def kernel_version_warnings(text: str) -> list[str]:
    """What a reader must know about how ``text`` was mapped to a preset, one sentence each.

    The preset table is keyed by upstream stable versions; a distribution ABI name
    ("6.12.0-31-amd64" without a known sublevel, RHEL's "5.14.0-427.el9") hides which stable
    backports are in, a kernel older than the oldest change point takes that one's behaviour,
    and one newer than the newest known takes the newest. None of these is an error (the model
    still runs), but each is a guess the model panel and the CLI must say out loud.
    Returns an empty list for a version the table covers exactly.

    Raises:
        ModelConfigError: no version number in ``text``.
    """
    version = parse_kernel_version(text)
    s = str(text).strip()
    out: list[str] = []
    m = re.search(r"(?<![\d.])v?(\d+)\.(\d+)\.0-(\d+)", s)
    label = ".".join(str(v) for v in version)
    if re.search(r"\.el\d+", s):
        out.append(f"{s!r} is a RHEL-style kernel: its backports are not in the preset table; "
                   f"modelled as upstream {label}")
    elif m and "Debian" not in s and not debian_abi_sublevel(
            int(m.group(1)), int(m.group(2)), int(m.group(3)))[1]:
        if version[2] == 0:
            out.append(f"{s!r} names a distribution ABI, not a stable version: the sublevel "
                       f"is unknown, modelled as {label} (stable backports inside "
                       f"{version[0]}.{version[1]} may differ)")
        else:
            out.append(f"{s!r} names a Debian ABI the preset table does not list: modelled as "
                       f"{label}, the sublevel of the nearest older ABI it knows (the real "
                       "one may be newer)")
    oldest = CHANGES[0][0]
    if version < oldest:
        out.append(f"{label} is older than the oldest preset ({'.'.join(map(str, oldest))}): "
                   "modelled with that preset's behaviour")
    elif version[:2] > NEWEST_KNOWN[:2]:
        out.append(f"{label} is newer than the newest kernel the presets were checked against "
                   f"({'.'.join(map(str, NEWEST_KNOWN))}): modelled with its preset")
    return out


def preset_for_version(version: Version) -> Policy:
    """The policy of a parsed version (every change point at or below it)."""
    fields: dict[str, Any] = {}
    for first, changes, _source in CHANGES:
        if version >= first or first == CHANGES[0][0]:
            fields.update(changes)
    label = ".".join(str(v) for v in version)
    return Policy(**fields, name=f"linux-{label}")


def preset_for_kernel(version: str) -> Policy:
    """The kernel preset for a full version string (see the module docstring).

    Raises:
        ModelConfigError: the string holds no version.
    """
    return preset_for_version(parse_kernel_version(version))


def preset_names() -> list[str]:
    return list(NAMED)


def describe(policy: Policy) -> dict[str, Any]:
    """Policy fields plus the preset name, for reports."""
    data = dataclasses.asdict(policy)
    return data


def policy_choices() -> list[dict[str, Any]]:
    """Every behaviour change a kernel made, as the upload form's "policy under test" offers it.

    One entry per (field, old value -> new value) of :data:`CHANGES`, in kernel order:
    ``{"field", "old", "new", "kernel" ("6.18"), "what" (the change point's source line),
    "value" ("split_remainder=head")}``. Fields set by no change point (``bio_build``, the
    seed patches' own policies) are offered with their choices by :func:`extra_policy_choices`.
    """
    out: list[dict[str, Any]] = []
    current: dict[str, Any] = dict(CHANGES[0][1])
    for first, changes, source in CHANGES[1:]:
        for field, new in changes.items():
            old = current.get(field)
            if old == new:
                continue
            out.append({"field": field, "old": old, "new": new,
                        "kernel": ".".join(str(v) for v in first[:2]) if first[2] == 0
                        else ".".join(str(v) for v in first),
                        "what": source, "value": f"{field}={new}"})
            current[field] = new
    return out


#: Policies of the seed patches that no kernel preset changes (they stayed patches or RFCs).
EXTRA_CHOICES: tuple[tuple[str, str, str, str], ...] = (
    ("bio_build", "uncapped", "cap_max_sectors",
     "Ed Tsai's 'check the queue limit before bio submitting' (seed 001, not merged)"),
    ("bio_build", "uncapped", "align:262144",
     "Ming Lei's align-to-256K counter-patch (seed 001, not merged)"),
    ("tag_preempt", "always", "waiters_first",
     "Yu Kuai's 'improve tag allocation under heavy load' series (seed 003)"),
)


def extra_policy_choices() -> list[dict[str, Any]]:
    return [{"field": f, "old": old, "new": new, "kernel": "", "what": what,
             "value": f"{f}={new}"} for f, old, new, what in EXTRA_CHOICES]


def preset_difference(baseline_kernel: str, patched_kernel: str) -> list[str]:
    """``["split_remainder=head", ...]``: the fields the two kernels' presets set differently,
    with the patched kernel's value (what the upload form preselects). Empty when either
    version cannot be read."""
    try:
        old = preset_for_kernel(baseline_kernel)
        new = preset_for_kernel(patched_kernel)
    except ModelConfigError:
        return []
    a, b = dataclasses.asdict(old), dataclasses.asdict(new)
    return [f"{k}={b[k]}" for k in a if k != "name" and a[k] != b[k]]
