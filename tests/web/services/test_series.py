"""series_create_from_mail, version linking (In-Reply-To, change-id, subject+author), relink."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewapp import constants as c
from reviewapp.models import Event, Patch, Series
from reviewapp.selectors import series_get_for_user, series_versions
from reviewapp.services import NotAllowed, UploadRejected
from reviewapp.services.series import DuplicateSeries, series_create_from_mail, series_relink

pytestmark = pytest.mark.django_db

MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"


def mbox(name: str) -> bytes:
    return (MBOX / name).read_bytes()


def test_series_from_mbox_cover_is_description_patches_stored(user):
    """v1 mbox -> Series (cover body as description) + 2 patches with diff, trailers, events."""
    s = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user)
    assert (s.title, s.version, s.total, s.author_email) == (
        "block: keep split bios in submission order", 1, 2, "yukuai3@huawei.com")
    assert s.description.startswith("md raid5 2M direct reads")
    patches = list(s.patches.order_by("position"))
    assert [p.position for p in patches] == [1, 2]
    p2 = patches[1]
    assert p2.diff.startswith("diff --git a/block/blk-merge.c")
    assert ["Fixes", p2.fixes[0]] in p2.trailers
    assert p2.in_reply_to == s.message_id
    assert (p2.insertions, p2.deletions) == (2, 1)
    kinds = list(Event.objects.filter(series=s).values_list("kind", flat=True))
    assert kinds.count(c.EVENT_PATCH_CREATED) == 2 and c.EVENT_SERIES_CREATED in kinds


def test_three_versions_link_by_change_id_subject_and_in_reply_to(user):
    """v2 links to v1 by subject stem + author, v3 (renamed) to v2 by In-Reply-To; earlier
    patches become superseded; the versions walk v1 -> v2 -> v3 from any of them."""
    v1 = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user)
    v2 = series_create_from_mail(data=mbox("series_split_head_v2.mbox"), user=user)
    v3 = series_create_from_mail(data=mbox("series_split_head_v3.mbox"), user=user)
    v2.refresh_from_db()
    assert (v2.previous_id, v2.link_reason) == (v1.pk, c.LINK_SUBJECT)
    assert (v3.previous_id, v3.link_reason) == (v2.pk, c.LINK_IN_REPLY_TO)
    assert set(Patch.objects.filter(series__in=[v1, v2]).values_list("state", flat=True)) == {
        c.PATCH_STATE_SUPERSEDED}
    assert set(v3.patches.values_list("state", flat=True)) == {c.PATCH_STATE_NEW}
    for s in (v1, v2, v3):
        assert [x.version for x in series_versions(s, user)] == [1, 2, 3]


def test_change_id_links_when_subject_and_thread_differ(user):
    """Two versions with b4's change-id link even when the subject and In-Reply-To differ."""
    v2 = series_create_from_mail(data=mbox("series_split_head_v2.mbox"), user=user)
    raw = mbox("series_split_head_v2.mbox").decode()
    v4 = raw.replace("PATCH v2", "PATCH v4").replace("keep split bios in submission order",
                                                     "something else entirely").replace(
        "-split-head-v2-", "-split-head-v4-").replace("block: add bio_list_merge_head()",
                                                      "block: other").replace(
        "block: place split bios at the head", "block: other two")
    s4 = series_create_from_mail(data=raw.replace(raw, v4), user=user)
    assert (s4.previous_id, s4.link_reason) == (v2.pk, c.LINK_CHANGE_ID)


def test_other_users_private_series_is_never_a_link_target(user, other_user):
    """Linking only considers series the uploader may read: a private v1 stays unlinked."""
    series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=other_user, public=False)
    v2 = series_create_from_mail(data=mbox("series_split_head_v2.mbox"), user=user)
    assert v2.previous_id is None


def test_duplicate_upload_is_409_and_malformed_is_400(user):
    """The same cover Message-ID twice -> DuplicateSeries (409); a bad mbox -> 400 with reason."""
    series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user)
    with pytest.raises(DuplicateSeries) as exc:
        series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user)
    assert exc.value.status == 409
    with pytest.raises(UploadRejected, match="mixes versions"):
        series_create_from_mail(data=mbox("malformed_mixed_versions.mbox"), user=user)
    assert Series.objects.count() == 1


def test_relink_by_hand_owner_only_no_cycles(user, other_user):
    """The uploader relinks (manual), clears the link; others get NotAllowed; loops refused."""
    v1 = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user)
    v3 = series_create_from_mail(data=mbox("series_split_head_v3.mbox"), user=user)
    # v2 was never uploaded; v3's cover is renamed but its patch titles are v1's
    assert (v3.previous_id, v3.link_reason) == (v1.pk, c.LINK_SUBJECT)
    series_relink(series=v3, previous=None, user=user)
    v3.refresh_from_db()
    assert v3.previous_id is None
    series_relink(series=v3, previous=v1, user=user)
    v3.refresh_from_db()
    assert (v3.previous_id, v3.link_reason) == (v1.pk, c.LINK_MANUAL)
    with pytest.raises(NotAllowed):
        series_relink(series=v3, previous=None, user=other_user)
    with pytest.raises(UploadRejected, match="loop"):
        series_relink(series=v1, previous=v3, user=user)
    series_relink(series=v3, previous=None, user=user)
    v3.refresh_from_db()
    assert v3.previous_id is None


def test_private_series_is_404_for_others(user, other_user):
    """A private series is readable by its uploader only."""
    from django.http import Http404

    s = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user, public=False)
    assert series_get_for_user(pk=s.pk, user=user) == s
    with pytest.raises(Http404):
        series_get_for_user(pk=s.pk, user=other_user)
    assert set(s.patches.values_list("public", flat=True)) == {False}
