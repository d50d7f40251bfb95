"""reviewapp.mbox: patch metadata from the seed threads' mails (stdlib email)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewapp.mbox import MailParseError, parse_patch_mail, split_subject

MBOX = Path(__file__).resolve().parent.parent / "data" / "mbox"


def test_seed000_mbox_first_message_folded_subject_fixes_base_commit():
    """Seed 000: folded subject, RFC v2, Fixes: tag and base-commit from the first message."""
    meta = parse_patch_mail((MBOX / "seed000_split_to_head.mbox").read_bytes())
    assert meta.title == "block: place split bios at the head of current->bio_list"
    assert meta.version == "RFC v2"
    assert meta.author == "Yu Kuai <yukuai3@xxxxxxxxxx>"
    assert meta.message_id == "seed000-illustrative@blkreview.test"
    assert meta.base_commit == "0123456789abcdef0123456789abcdef01234567"
    assert meta.fixes == ('d89d87965dcb ("When stacked block devices are in-use (e.g. md or dm), '
                          'the recursive calls")',)


def test_seed001_in_body_from_wins():
    """Seed 001: the in-body From: (patch author) wins over the sender header."""
    meta = parse_patch_mail((MBOX / "seed001_check_queue_limit.mbox").read_bytes())
    assert meta.title == "block: Check the queue limit before bio submitting"
    assert meta.version == ""
    assert meta.author == "Ed Tsai <ed.tsai@mediatek.com>"


def test_seed002_single_mail_fixes_without_space():
    """Seed 002: a plain .eml (no mbox From line); Fixes: written without a space."""
    meta = parse_patch_mail((MBOX / "seed002_md_mergeable.eml").read_text())
    assert (meta.title, meta.version) == ("MD: make bio mergeable", "")
    assert meta.author == "Shaohua Li <shli@fb.com>"
    assert meta.fixes == ("6ac45aeb6bca(block: avoid to merge splitted bio)",)
    assert meta.base_commit == ""


def test_seed003_and_seed004_versions():
    """Seed 003 '[PATCH -next RFC v2 0/8]' -> 'RFC v2'; seed 004 '[PATCH V3]' keeps 'V3'."""
    m3 = parse_patch_mail((MBOX / "seed003_tag_allocation.mbox").read_bytes())
    m4 = parse_patch_mail((MBOX / "seed004_bcache_opf.mbox").read_bytes())
    assert (m3.title, m3.version) == ("improve tag allocation under heavy load", "RFC v2")
    assert (m4.title, m4.version) == ("bcache: dont reset bio opf in bch_data_insert_start", "V3")
    assert m4.author == "Dongsheng Yang <dongsheng.yang@example.com>"


@pytest.mark.parametrize("subject,expected", [
    ("Re: [PATCH 1/1] block: x", ("block: x", "")),
    ("[RFC PATCH v5 2/3] md: y", ("md: y", "RFC v5")),
    ("no brackets at all", ("no brackets at all", "")),
    ("[PATCH v10] z", ("z", "v10")),
])
def test_split_subject(subject, expected):
    """Subject prefixes are stripped and the version tag kept as spelled."""
    assert split_subject(subject) == expected


def test_not_a_mail_is_a_typed_error():
    """Empty input or a mail without Subject raises MailParseError."""
    with pytest.raises(MailParseError):
        parse_patch_mail(b"")
    with pytest.raises(MailParseError, match="Subject"):
        parse_patch_mail(b"From: a@b\n\nno subject here\n")


# --- series, trailers, diff (issue 8) -------------------------------------------------------

from datetime import UTC, datetime, timedelta, timezone  # noqa: E402

from reviewapp.mbox import (  # noqa: E402
    normalize_msgid,
    parse_mbox,
    parse_series,
    parse_subject,
    subject_stem,
)


@pytest.mark.parametrize("subject,fields", [
    ("[PATCH v2 3/8] block: x", dict(version=2, position=3, total=8, rfc=False, tree="")),
    ("[PATCH -next RFC v2 0/8] improve tag", dict(version=2, position=0, total=8, rfc=True,
                                                  tree="-next")),
    ("[PATCH RESEND V3] md: y", dict(version=3, version_tag="V3", resend=True, position=None)),
    ("[RFC PATCH net-next v5 2/3] z", dict(version=5, rfc=True, tree="net-next", position=2)),
    ("[PATCH] w", dict(version=1, version_tag="", position=None, total=None)),
    ("Re: [PATCH v4 1/2] block: q", dict(version=4, position=1, is_reply=True)),
    ("[PATCH 6.1 1/3] stable: r", dict(version=1, prefixes=("6.1",), position=1, total=3)),
])
def test_parse_subject_prefixes(subject, fields):
    """Version (v2/V3), RFC, RESEND, tree tag (-next, net-next), position m/n, reply marker."""
    info = parse_subject(subject)
    for k, v in fields.items():
        assert getattr(info, k) == v, k


def test_series_v1_cover_and_two_patches():
    """A format-patch series mbox: cover 0/2 -> description; patches in position order."""
    s = parse_series((MBOX / "series_split_head_v1.mbox").read_bytes())
    assert s.cover is not None and s.cover.position == 0 and s.cover.total == 2
    assert s.title == "block: keep split bios in submission order"
    assert s.cover.body.startswith("md raid5 2M direct reads")
    assert "2.43.0" not in s.cover.body  # the signature is not part of the description
    assert [p.position for p in s.patches] == [1, 2]
    assert [p.title for p in s.patches] == ["block: add bio_list_merge_head()",
                                            "block: place split bios at the head of current->bio_list"]
    p2 = s.patches[1]
    assert p2.in_reply_to == s.cover.message_id == "202511041-split-head-v1-0-yukuai@blkreview.test"
    assert p2.references == (s.cover.message_id,)
    assert p2.date == datetime(2025, 11, 4, 10, 0, tzinfo=timezone(timedelta(hours=8)))
    assert p2.author == "Yu Kuai <yukuai3@huawei.com>" and p2.author_email == "yukuai3@huawei.com"
    assert [t.key for t in p2.trailers] == ["Fixes", "Reported-by", "Closes", "Signed-off-by"]
    assert p2.fixes == ('d89d87965dcb ("When stacked block devices are in-use (e.g. md or dm), '
                        'the recursive calls")',)
    assert p2.diffstat == (" block/blk-merge.c | 3 ++-\n"
                           " 1 file changed, 2 insertions(+), 1 deletion(-)")
    assert p2.diff.startswith("diff --git a/block/blk-merge.c b/block/blk-merge.c\n")
    assert p2.diff.rstrip().endswith("errno_to_blk_status(PTR_ERR(split));")
    assert (p2.files_changed, p2.insertions, p2.deletions) == (("block/blk-merge.c",), 2, 1)
    assert "Signed-off-by" not in p2.diff and "2.43.0" not in p2.diff
    assert s.missing == []


def test_series_v2_base_commit_change_id_reviewed_by():
    """v2: base-commit and b4's change-id from the cover letter; Reviewed-by trailers."""
    s = parse_series((MBOX / "series_split_head_v2.mbox").read_bytes())
    assert s.version_number == 2 and s.cover.version == "v2"
    assert s.cover.base_commit == "0123456789abcdef0123456789abcdef01234567"
    assert s.cover.change_id == "20251104-split-head-5a1f0c"
    assert s.patches[0].trailer_values("Reviewed-by") == ["Christoph Hellwig <hch@lst.de>"]
    # the "Changes in v2" notes after --- are neither message nor diffstat
    assert "Changes in v2" not in s.patches[1].body
    assert s.patches[1].diffstat.splitlines()[0] == " block/blk-merge.c | 3 ++-"


def test_series_v3_in_reply_to_previous_cover():
    """v3 is sent In-Reply-To v2's cover letter and renames the series."""
    s = parse_series((MBOX / "series_split_head_v3.mbox").read_bytes())
    assert s.cover.in_reply_to == "202511042-split-head-v2-0-yukuai@blkreview.test"
    assert s.title == "block: submit split bio remainders ahead of later bios"
    assert s.patches[1].trailer_values("Tested-by") == ["Coly Li <colyli@kernel.org>"]


def test_single_resend_next_mboxrd_in_body_from_trailers():
    """lore mboxrd single patch: RESEND -next V3, encoded in-body From, >From unescaped, trailers."""
    (m,) = parse_mbox((MBOX / "single_resend_next_v3.mbox").read_bytes())
    assert (m.version, m.version_number, m.resend, m.tree) == ("V3", 3, True, "-next")
    assert m.author == "René Example <rene@blkreview.test>"
    assert "\nFrom the member disk's view" in m.body
    assert {t.key: t.value for t in m.trailers} == {
        "Fixes": '6ac45aeb6bca ("block: avoid to merge splitted bio")',
        "Reported-by": "Kernel Test Robot <lkp@intel.com>",
        "Link": "https://lore.kernel.org/r/raid5-align-report@blkreview.test/",
        "Cc": "stable@vger.kernel.org",
        "Signed-off-by": "René Example <rene@blkreview.test>",
        "Acked-by": "Song Liu <song@kernel.org>",
    }
    assert m.base_commit == "fedcba9876543210fedcba9876543210fedcba98"
    assert m.cc == ("linux-raid@vger.kernel.org", "Song Liu <song@kernel.org>")
    assert m.date == datetime(2025, 11, 12, 8, 0, tzinfo=UTC)
    assert (m.insertions, m.deletions) == (3, 1)
    assert "base-commit" not in m.diff
    s = parse_series((MBOX / "single_resend_next_v3.mbox").read_bytes())
    assert s.cover is None and s.title == "md/raid5: align chunk-sized reads" and s.total == 1


def test_commit_message_line_from_the_does_not_split_the_mbox():
    """A body line 'From the ...' (unescaped, mboxo) is not a message separator."""
    raw = (MBOX / "series_split_head_v1.mbox").read_text().replace(
        "pieces out of order (helper).", "pieces out of order (helper).\nFrom the md side too.")
    assert len(parse_mbox(raw)) == 3


@pytest.mark.parametrize("name,reason", [
    ("malformed_no_headers.mbox", "no mail headers"),
    ("malformed_cover_only.mbox", "only a cover letter"),
    ("malformed_mixed_versions.mbox", "mixes versions v1, v2"),
])
def test_malformed_series_clear_reason(name, reason):
    """Malformed input raises MailParseError with a reason a user can act on."""
    with pytest.raises(MailParseError, match=reason):
        parse_series((MBOX / name).read_bytes())


def test_binary_and_duplicate_position_rejected():
    """Binary bytes and a patch position given twice are refused with a reason."""
    with pytest.raises(MailParseError, match="binary"):
        parse_series(b"\x7fELF\x00\x00\x01")
    v1 = (MBOX / "series_split_head_v1.mbox").read_text()
    second = v1[v1.index("From 1111"):]
    with pytest.raises(MailParseError, match="appears twice"):
        parse_series(v1 + second.split("From 1111", 2)[1].join(["From 1111", ""]))


def test_msgid_and_stem_helpers():
    """Message-IDs lose their brackets; subject stems compare case- and space-insensitively."""
    assert normalize_msgid(" <a.b@c> ") == "a.b@c"
    assert subject_stem("Block:  Keep  Split") == subject_stem("block: keep split")
