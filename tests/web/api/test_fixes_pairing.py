"""Fixes:-aware pairing (issue 8): a patch naming ``Fixes: <sha> ("subject")`` is paired with
the known patch of the fixed commit - by its commit id (git format-patch's ``From <sha>``
line, at least 12 hex digits) or by the quoted subject - and that patch's comparisons are
offered as the baseline: on the upload form for ``?patch=`` and for a patch mail being
uploaded, and on the REST side as ``fixes_matches`` of the patch JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from reviewapp.mbox import parse_mbox
from reviewapp.models import Comparison
from reviewapp.selectors import fixes_offers
from reviewapp.services.comparisons import submission_create
from reviewapp.services.series import series_create_from_mail

pytestmark = pytest.mark.django_db
MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"
#: The commit series_split_head_v1.mbox's patch 2 names: Fixes: d89d87965dcb ("When stacked...")
FIXED_SHA = "d89d87965dcbe5cd17d7db8ea5c6ae8e4eb3e2a5"
FIXED_SUBJECT = ("When stacked block devices are in-use (e.g. md or dm), the recursive calls")


def _mail(subject: str, *, commit: str = "", base: str = "", msgid: str = "fixed@x") -> bytes:
    head = f"From {commit} Mon Sep 17 00:00:00 2001\n" if commit else ""
    tail = f"\nbase-commit: {base}\n" if base else ""
    return (f"{head}From: A <a@blkreview.test>\nSubject: [PATCH] {subject}\n"
            f"Message-ID: <{msgid}>\n\nmsg\n---\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n"
            f"@@ -1 +1 @@\n-a\n+b\n{tail}").encode()


def _fixing(user):
    """Patch 2 of series v1: ``Fixes: d89d87965dcb ("When stacked ...")``."""
    return series_create_from_mail(data=(MBOX / "series_split_head_v1.mbox").read_bytes(),
                                   user=user).patches.get(position=2)


def _compare(patch, user, before, after):
    cmp, _ = submission_create(
        patch=patch, baseline_files=[SimpleUploadedFile("b.txt", before)],
        patched_files=[SimpleUploadedFile("p.txt", after)], user=user)
    return cmp


def test_mbox_keeps_the_commit_id_of_each_patch():
    """git format-patch's separator line gives each patch its commit id; the cover letter's
    all-zero id and lore's ``From mboxrd@z`` give none."""
    mails = parse_mbox((MBOX / "series_split_head_v1.mbox").read_bytes())
    assert [m.commit for m in mails] == ["", "1" * 40, "1" * 40]
    lore = b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + _mail("x")
    assert parse_mbox(lore)[0].commit == ""
    upper = _mail("y", commit=FIXED_SHA.upper())
    assert parse_mbox(upper)[0].commit == FIXED_SHA


def test_sha_match_wins_and_reports_a_differing_subject(user):
    """A patch whose commit id starts with the tag's 12-digit sha is the fixed one, even under
    another title (said so); a same-titled patch without that commit is not preferred."""
    renamed = series_create_from_mail(data=_mail("block: a reworded subject", commit=FIXED_SHA,
                                                 msgid="renamed@x"), user=user).patches.get()
    series_create_from_mail(data=_mail(FIXED_SUBJECT, msgid="same-title@x"), user=user)
    offers = fixes_offers(_fixing(user), user)
    assert [(o["patch"].pk, o["match"], o["sha"]) for o in offers] == [
        (renamed.pk, "sha-subject-differs", FIXED_SHA[:12])]
    exact = series_create_from_mail(data=_mail(FIXED_SUBJECT, commit=FIXED_SHA,
                                               msgid="exact@x"), user=user).patches.get()
    offers = fixes_offers(_fixing_again(user), user)  # the newest sha match, same subject
    assert [(o["patch"].pk, o["match"]) for o in offers] == [(exact.pk, "sha")]


def _fixing_again(user):
    """The same fixing patch, uploaded as v2 (a new patch row with the same Fixes: tag)."""
    return series_create_from_mail(data=(MBOX / "series_split_head_v2.mbox").read_bytes(),
                                   user=user).patches.get(position=2)


def test_subject_match(user):
    """No commit id known: the quoted subject finds the patch (the newest of that title)."""
    fixed = series_create_from_mail(data=_mail(FIXED_SUBJECT), user=user).patches.get()
    offers = fixes_offers(_fixing(user), user)
    assert [(o["patch"].pk, o["match"]) for o in offers] == [(fixed.pk, "subject")]


def test_no_match(user, other_user):
    """Nothing is offered for: a patch of another title and commit; a patch whose
    base-commit (not its own commit) is the sha; a sha shorter than 12 digits; a matching
    patch the user may not read."""
    series_create_from_mail(data=_mail("block: unrelated", commit="ab" * 20, base=FIXED_SHA,
                                       msgid="unrelated@x"), user=user)
    fixing = _fixing(user)
    assert fixes_offers(fixing, user) == []
    fixing.fixes = [f"{FIXED_SHA[:8]}"]
    series_create_from_mail(data=_mail("other", commit=FIXED_SHA, msgid="o@x"), user=user)
    assert fixes_offers(fixing, user) == []  # 8 digits name no commit (kernel style is 12)
    series_create_from_mail(data=_mail(FIXED_SUBJECT, commit=FIXED_SHA, msgid="private@x"),
                            user=other_user, public=False)
    fixing.fixes = [f'{FIXED_SHA[:12]} ("{FIXED_SUBJECT}")']
    mine = fixes_offers(fixing, user)
    assert [o["patch"].submitted_by_id for o in mine] == [user.pk]  # not the private one


def test_api_patch_lists_fixes_matches(user, api_client, check, seed000_before, seed000_after):
    """GET /api/v1/patches/<id>/: ``fixes_matches`` names the fixed patch, how it matched and
    its comparisons with the patched runs to pass as ``baseline``; a patch without Fixes:
    has none."""
    fixed = series_create_from_mail(data=_mail(FIXED_SUBJECT, commit=FIXED_SHA),
                                    user=user).patches.get()
    cmp = _compare(fixed, user, seed000_before, seed000_after)
    fixing = _fixing(user)
    body = check(api_client.get(f"/api/v1/patches/{fixing.pk}/"), "get",
                 "/api/v1/patches/{id}/")
    [m] = body["fixes_matches"]
    assert m["match"] == "sha" and m["patch"]["id"] == fixed.pk
    assert m["patch"]["commit"] == FIXED_SHA
    assert [c["id"] for c in m["comparisons"]] == [cmp.pk]
    assert m["comparisons"][0]["baseline_bundles"] == [b.pk for b in cmp.patched_bundles.all()]
    plain = check(api_client.get(f"/api/v1/patches/{fixed.pk}/"), "get",
                  "/api/v1/patches/{id}/")
    assert plain["fixes_matches"] == [] and plain["commit"] == FIXED_SHA
    # the bundles offered are accepted as the baseline of a comparison of the fixing patch
    patched = APIClient()
    patched.force_authenticate(user)
    b = patched.post("/api/v1/bundles/", {"files": [SimpleUploadedFile("n.txt", seed000_after)],
                                          "role": "patched"}, format="multipart").json()
    r = api_client.post("/api/v1/comparisons/", {
        "patch": fixing.pk, "baseline": m["comparisons"][0]["baseline_bundles"],
        "patched": [b["id"]]}, format="json")
    assert r.status_code == 201, r.content


def test_upload_form_offers_for_a_mail_being_uploaded(logged_in_client, user, seed000_before,
                                                      seed000_after):
    """No ?patch=: the form's script asks /upload/fixes.json about the chosen mail and gets
    the offers; posting the mail with ``baseline_from`` uses the fixed patch's patched runs."""
    fixed = series_create_from_mail(data=_mail(FIXED_SUBJECT, commit=FIXED_SHA),
                                    user=user).patches.get()
    first = _compare(fixed, user, seed000_before, seed000_after)
    fixing_mail = (MBOX / "seed000_split_to_head.mbox").read_bytes()  # Fixes: d89d87965dcb
    page = logged_in_client.get("/upload/").content.decode()
    assert 'id="fix-offers-slot"' in page and 'data-url="/upload/fixes.json"' in page
    r = logged_in_client.post("/upload/fixes.json",
                              {"mbox": SimpleUploadedFile("fix.mbox", fixing_mail)})
    [offer] = r.json()["offers"]
    assert offer["match"] == "sha" and [c["id"] for c in offer["comparisons"]] == [first.pk]
    r = logged_in_client.post("/upload/fixes.json",
                              {"mbox": SimpleUploadedFile("x.mbox", _mail("no fixes here"))})
    assert r.json() == {"offers": []}
    resp = logged_in_client.post("/upload/", {
        "mbox": SimpleUploadedFile("fix.mbox", fixing_mail), "baseline_from": str(first.pk),
        "patched_files": SimpleUploadedFile("p2.txt", seed000_after.replace(b"[dd]", b"[fio]")),
        "public": "on"})
    assert resp.status_code == 302, resp.content.decode()[-2000:]
    second = Comparison.objects.exclude(pk=first.pk).get()
    assert second.patch.fixes and second.patch.commit  # the mail's patch, with its commit id
    assert list(second.baseline_bundles.all()) == list(first.patched_bundles.all())
