"""Series/patch pages: upload from mbox (form errors), versions side by side with key numbers,
relink, patch page (highlighted diff, trailers, Message-ID links), private = 404."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from reviewapp import constants as c
from reviewapp.models import Comparison, ComparisonResult, Series
from reviewapp.services.series import series_create_from_mail

pytestmark = pytest.mark.django_db

MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"


def mbox(name: str) -> bytes:
    return (MBOX / name).read_bytes()


def three_versions(user):
    return [series_create_from_mail(data=mbox(f"series_split_head_v{v}.mbox"), user=user)
            for v in (1, 2, 3)]


def finished_comparison(patch, user, zero_share: tuple[float, float], mbps: tuple[float, float]):
    """A comparison of ``patch`` whose comparison step stored these two key metrics."""
    cmp = Comparison.objects.create(patch=patch, public=True, created_by=user,
                                    status=c.COMPARISON_READY)

    def row(label, unit, better, b, p):
        return {"key": f"8,16 {label}", "device": "8,16", "label": label, "unit": unit,
                "better": better, "baseline": {"mean": b}, "patched": {"mean": p},
                "pct": 100.0 * (p - b) / b, "verdict": "single run"}

    ComparisonResult.objects.create(
        comparison=cmp, state=c.JOB_STATE_SUCCEEDED,
        compare={"metrics": [row("zero-seek share", "%", "higher", *zero_share),
                             row("MB/s", "MB/s", "higher", *mbps)],
                 "check": {"state": "success"}},
        verdict={"state": "success", "reasons": []})
    return cmp


def test_upload_form_creates_series_and_redirects(logged_in_client):
    """The series form takes an mbox file and lands on the series page."""
    resp = logged_in_client.post("/series/new/", {
        "mbox": SimpleUploadedFile("v1.mbox", mbox("series_split_head_v1.mbox")), "public": "on"})
    assert resp.status_code == 302
    s = Series.objects.get()
    assert resp["Location"] == f"/series/{s.pk}/"
    assert s.patches.count() == 2


def test_upload_form_pasted_text_and_malformed_errors(logged_in_client):
    """Pasted text works; malformed mail -> 400 with the parser's reason on the field."""
    resp = logged_in_client.post("/series/new/", {
        "text": mbox("single_resend_next_v3.mbox").decode()})
    assert resp.status_code == 302
    resp = logged_in_client.post("/series/new/", {
        "mbox": SimpleUploadedFile("x.mbox", mbox("malformed_cover_only.mbox"))})
    assert resp.status_code == 400
    assert "only a cover letter" in resp.content.decode()
    resp = logged_in_client.post("/series/new/", {})
    assert resp.status_code == 400 and "Upload an mbox file" in resp.content.decode()


def test_upload_needs_login(client):
    """Anonymous users are sent to the login page."""
    resp = client.get("/series/new/")
    assert resp.status_code == 302 and "/accounts/login/" in resp["Location"]


def test_series_page_three_versions_and_key_number_deltas(client, user):
    """Series page: v1, v2, v3 side by side; zero-seek share per version with the step from
    the previous version (v2 fixed it: Δ shown as better)."""
    v1, v2, v3 = three_versions(user)
    finished_comparison(v1.patches.get(position=2), user, (50.0, 50.0), (100.0, 99.0))
    finished_comparison(v2.patches.get(position=2), user, (50.0, 100.0), (100.0, 120.0))
    finished_comparison(v3.patches.get(position=2), user, (50.0, 100.0), (100.0, 121.0))
    html = client.get(f"/series/{v2.pk}/").content.decode()
    for s in (v1, v2, v3):
        assert f'data-series="{s.pk}"' in html
    assert html.index('id="version-1"') < html.index('id="version-2"') < html.index('id="version-3"')
    assert f"follows #{v1.pk} (same subject and author)" in html
    assert f"follows #{v2.pk} (sent in reply to the earlier version)" in html
    row = html[html.index('data-metric="zero-seek share"'):]
    row = row[:row.index("</tr>")]
    assert "50.00" in row and "100.00" in row
    assert '<span class="step better">Δ +100.0%</span>' in row
    assert '<span class="step ">Δ +0.0%</span>' in row  # v3 kept it
    assert "Cover letter" in html and "md raid5 2M direct reads" in html


def test_relink_by_hand_from_the_page(logged_in_client, user):
    """The uploader unlinks and relinks from the series page."""
    v1, v2, _ = three_versions(user)
    resp = logged_in_client.post(f"/series/{v2.pk}/relink/", {"previous": ""})
    assert resp.status_code == 302
    v2.refresh_from_db()
    assert v2.previous_id is None
    logged_in_client.post(f"/series/{v2.pk}/relink/", {"previous": str(v1.pk)})
    v2.refresh_from_db()
    assert (v2.previous_id, v2.link_reason) == (v1.pk, c.LINK_MANUAL)


@override_settings(BLKREVIEW_MSGID_URL="https://archive.example/{msgid}/T/")
def test_patch_page_diff_highlighted_trailers_msgid_links(client, user):
    """Patch page: pygments spans per diff line with anchors, trailers, archive links."""
    v1 = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user)
    p2 = v1.patches.get(position=2)
    html = client.get(f"/patches/{p2.pk}/").content.decode()
    assert "/static/reviewapp/pygments.css" in html
    assert 'id="L1" data-line="1" data-file="block/blk-merge.c"' in html
    assert 'class="diff-line dl-add"' in html and '<span class="gi">' in html
    assert "Fixes:</span>" in html and "Reported-by:</span>" in html
    assert 'href="https://archive.example/202511041-split-head-v1-2-yukuai@blkreview.test/T/"' in html
    assert 'href="https://lore.kernel.org/r/seed000-report@blkreview.test/"' in html
    assert "blkreview-comparison" not in html  # no comparison yet: no own check


def test_private_series_and_patch_404_for_others(client, user, other_user, password):
    """Private series/patch pages are 404 for anonymous users and other users."""
    s = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user, public=False)
    p = s.patches.first()
    for url in (f"/series/{s.pk}/", f"/patches/{p.pk}/"):
        assert client.get(url).status_code == 404
    client.login(username=other_user.username, password=password)
    for url in (f"/series/{s.pk}/", f"/patches/{p.pk}/"):
        assert client.get(url).status_code == 404
    assert s.title not in client.get("/series/").content.decode()
    client.login(username=user.username, password=password)
    assert client.get(f"/series/{s.pk}/").status_code == 200


def test_upload_for_series_patch_with_fixes_pairing(logged_in_client, user, seed000_before,
                                                    seed000_after):
    """?patch= names a series patch; its Fixes: subject matches a known patch whose
    comparison's patched runs are offered and used as this comparison's baseline."""
    fixed_mail = (b"From: A <a@blkreview.test>\nSubject: [PATCH] When stacked block devices are "
                  b"in-use (e.g. md or dm), the recursive calls\nMessage-ID: <fixed@x>\n\n"
                  b"msg\n---\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    fixed = series_create_from_mail(data=fixed_mail, user=user).patches.get()
    resp = logged_in_client.post("/upload/", {
        "patch": str(fixed.pk),
        "baseline_files": SimpleUploadedFile("b.txt", seed000_before),
        "patched_files": SimpleUploadedFile("p.txt", seed000_after), "public": "on"})
    assert resp.status_code == 302, resp.content.decode()[-2000:]
    first = Comparison.objects.get(patch=fixed)
    fix = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user
                                  ).patches.get(position=2)
    page = logged_in_client.get(f"/upload/?patch={fix.pk}").content.decode()
    assert 'id="fix-offers"' in page and f'value="{first.pk}"' in page
    resp = logged_in_client.post("/upload/", {
        "patch": str(fix.pk), "baseline_from": str(first.pk),
        "patched_files": SimpleUploadedFile("p2.txt", seed000_after.replace(b"[dd]", b"[fio]")),
        "public": "on"})
    assert resp.status_code == 302, resp.content.decode()[-2000:]
    second = Comparison.objects.get(patch=fix)
    assert list(second.baseline_bundles.all()) == list(first.patched_bundles.all())
    resp = logged_in_client.post("/upload/", {
        "patch": str(fix.pk), "baseline_from": "999999",
        "patched_files": SimpleUploadedFile("p3.txt", seed000_after)})
    assert resp.status_code == 400 and "Choose one of the offered" in resp.content.decode()


def test_patch_state_form_for_the_submitter(logged_in_client, user):
    """The submitter sees the state form and sets 'accepted'."""
    s = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=user)
    p = s.patches.get(position=1)
    assert 'id="patch-state-form"' in logged_in_client.get(f"/patches/{p.pk}/").content.decode()
    logged_in_client.post(f"/patches/{p.pk}/state/", {"state": "accepted"})
    p.refresh_from_db()
    assert p.state == "accepted"
