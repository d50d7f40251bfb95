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
