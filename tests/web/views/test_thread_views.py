"""Thread pages: start (form and JSON), reply, resolve/reopen, edit/delete own, permalink,
history, notification opt-out; login + CSRF-protected forms; private = 404."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewapp import constants as c
from reviewapp.models import Comment, Comparison, NotificationSetting, Thread
from reviewapp.services.series import series_create_from_mail

pytestmark = pytest.mark.django_db
MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"


@pytest.fixture
def comparison(user):
    s = series_create_from_mail(data=(MBOX / "series_split_head_v1.mbox").read_bytes(), user=user)
    return Comparison.objects.create(patch=s.patches.get(position=2), created_by=user,
                                     status=c.COMPARISON_READY)


def test_start_reply_resolve_counts_on_page(logged_in_client, comparison):
    """A thread started by form shows on the comparison page with its unresolved count;
    reply and resolve change what the page says."""
    resp = logged_in_client.post(f"/comparisons/{comparison.pk}/threads/", {
        "anchor_kind": "comparison", "body": "**bold** and <script>alert(1)</script>"})
    assert resp.status_code == 302
    t = Thread.objects.get(comparison=comparison)
    assert resp["Location"] == f"/comparisons/{comparison.pk}/#thread-{t.pk}"
    html = logged_in_client.get(f"/comparisons/{comparison.pk}/").content.decode()
    assert 'data-count="1">1 unresolved' in html
    assert "<strong>bold</strong>" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    logged_in_client.post(f"/threads/{t.pk}/reply/", {"body": "a reply"})
    logged_in_client.post(f"/threads/{t.pk}/resolve/", {"resolved": "1"})
    html = logged_in_client.get(f"/comparisons/{comparison.pk}/").content.decode()
    assert 'data-count="0">0 unresolved' in html and "a reply" in html and ">Reopen<" in html
    patch_html = logged_in_client.get(comparison.patch.get_absolute_url()).content.decode()
    assert 'data-count="0">0 unresolved threads' in patch_html


def test_json_mode_and_anchor_errors(logged_in_client, comparison):
    """Accept: application/json answers JSON; a bad anchor is a 400 with the reason."""
    resp = logged_in_client.post(
        f"/comparisons/{comparison.pk}/threads/",
        {"anchor_kind": "chart", "anchor": json.dumps({"section": "seek", "dev": "8,16"}),
         "body": "x"}, HTTP_ACCEPT="application/json")
    assert resp.status_code == 400 and "bucket or a window" in resp.json()["error"]
    resp = logged_in_client.post(
        f"/comparisons/{comparison.pk}/threads/",
        {"anchor_kind": "chart", "anchor": json.dumps({"section": "seek", "dev": "8,16",
                                                        "bucket": "4096"}), "body": "x"},
        HTTP_ACCEPT="application/json")
    assert resp.status_code == 200 and resp.json()["url"].endswith(f"#thread-{resp.json()['thread']}")


def test_edit_delete_own_and_history(logged_in_client, comparison, other_user, password):
    """Own comments: edit (marked, history page), delete (tombstone); others' comments: 403."""
    logged_in_client.post(f"/comparisons/{comparison.pk}/threads/", {"body": "v1 text"})
    cm = Comment.objects.get()
    logged_in_client.post(f"/comments/{cm.pk}/edit/", {"body": "v2 text"})
    html = logged_in_client.get(f"/threads/{cm.thread_id}/").content.decode()
    assert "v2 text" in html and ">edited<" in html
    hist = logged_in_client.get(f"/comments/{cm.pk}/history/").content.decode()
    assert "v1 text" in hist and "v2 text" in hist
    from django.test import Client

    other = Client()
    other.login(username=other_user.username, password=password)
    assert other.post(f"/comments/{cm.pk}/delete/", HTTP_ACCEPT="application/json"
                      ).status_code == 403
    logged_in_client.post(f"/comments/{cm.pk}/delete/")
    html = logged_in_client.get(f"/threads/{cm.thread_id}/").content.decode()
    assert "comment deleted" in html and "v2 text" not in html


def test_diff_line_thread_on_patch_page(logged_in_client, comparison):
    """A diff-line thread shows on the patch page with a link to #L<n>."""
    patch = comparison.patch
    logged_in_client.post(f"/patches/{patch.pk}/threads/", {
        "anchor_kind": "diff", "anchor": json.dumps({"line": 12}), "body": "why?"})
    html = logged_in_client.get(patch.get_absolute_url()).content.decode()
    assert f'href="/patches/{patch.pk}/#L12"' in html and "block/blk-merge.c:133" in html


def test_private_threads_404_and_login_required(logged_in_client, comparison, other_user,
                                                password):
    """Threads of a private comparison are 404 to others; posting needs login."""
    from django.test import Client

    client = Client()
    logged_in_client.post(f"/comparisons/{comparison.pk}/threads/", {"body": "secret"})
    t = Thread.objects.get()
    cm = t.comments.get()
    resp = client.post(f"/threads/{t.pk}/reply/", {"body": "anon"})
    assert resp.status_code == 302 and "/accounts/login/" in resp["Location"]
    comparison.public = False
    comparison.save()
    client.login(username=other_user.username, password=password)
    for url in (f"/threads/{t.pk}/", f"/comments/{cm.pk}/history/"):
        assert client.get(url).status_code == 404
    for url in (f"/threads/{t.pk}/reply/", f"/threads/{t.pk}/resolve/",
                f"/comments/{cm.pk}/edit/", f"/comments/{cm.pk}/delete/",
                f"/comparisons/{comparison.pk}/threads/"):
        assert client.post(url, {"body": "x"}).status_code == 404, url


def test_notification_opt_out_page(logged_in_client, user):
    """The opt-out page stores the choice."""
    assert logged_in_client.get("/notifications/").status_code == 200
    logged_in_client.post("/notifications/", {})
    assert NotificationSetting.objects.get(user=user).mail is False
    logged_in_client.post("/notifications/", {"mail": "on"})
    assert NotificationSetting.objects.get(user=user).mail is True
