"""API tokens (issue 8 Access): scopes read / upload / check, optional expiry; a revoked or
expired token is 401 JSON, a token without the scope a request needs is 403 JSON."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from reviewapp.models import ApiToken, TraceBundle
from reviewapp.services.tokens import token_create

pytestmark = pytest.mark.django_db

URL = "/api/v1/bundles/"


def _api(key: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return c


def test_read_only_token_cannot_upload(user, check, make_upload, seed000_before):
    """A read-scoped token reads (200 on the list) but its upload is 403 JSON; nothing is
    stored."""
    _, key = token_create(user=user, name="dashboard", scopes=["read"])
    api = _api(key)
    r = api.get("/api/v1/comparisons/")
    assert r.status_code == 200
    r = api.post(URL, {"files": [make_upload("a.txt", seed000_before)]}, format="multipart")
    body = check(r, "post", URL)
    assert r.status_code == 403 and "upload" in body["error"]
    assert TraceBundle.objects.count() == 0
    r = api.post("/api/v1/comparisons/", {"title": "x", "baseline": [1], "patched": [1]},
                 format="json")
    assert r.status_code == 403


def test_upload_only_token_cannot_read(user, check):
    """Scopes are what the token holder chose: an upload-only token cannot read."""
    _, key = token_create(user=user, name="uploader", scopes=["upload"])
    r = _api(key).get("/api/v1/comparisons/")
    assert r.status_code == 403 and r.json()["code"] == "permission_denied"
    check(r, "get", "/api/v1/comparisons/")


def test_expired_token_is_401(user, check, make_upload, seed000_before):
    """A token past its expiry no longer authenticates: 401 JSON saying so."""
    token, key = token_create(user=user, name="short", expires=timezone.now() + timedelta(days=1))
    ApiToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(seconds=1))
    r = _api(key).post(URL, {"files": [make_upload("a", seed000_before)]}, format="multipart")
    body = check(r, "post", URL)
    assert r.status_code == 401 and "expired" in body["error"]
    r = _api(key).get("/api/v1/comparisons/")
    assert r.status_code == 401 and r["Content-Type"].startswith("application/json")


def test_revoked_token_is_401_json(user):
    """A revoked token is 401 JSON on reads too."""
    from reviewapp.services.tokens import token_revoke

    token, key = token_create(user=user, name="gone")
    token_revoke(token=token, user=user)
    r = _api(key).get("/api/v1/comparisons/")
    assert r.status_code == 401 and "revoked" in r.json()["error"]


def test_token_create_rejects_bad_scope_and_past_expiry(user):
    """Unknown scopes and an expiry in the past are refused with a message."""
    from reviewapp.services import UploadRejected

    with pytest.raises(UploadRejected, match="scope"):
        token_create(user=user, name="x", scopes=["admin"])
    with pytest.raises(UploadRejected, match="scope"):
        token_create(user=user, name="x", scopes=[])
    with pytest.raises(UploadRejected, match="future"):
        token_create(user=user, name="x", expires=timezone.now() - timedelta(days=1))


def test_tokens_page_creates_scoped_expiring_token(logged_in_client, user):
    """The page offers scopes and an expiry; the list shows them; the key is shown once and
    stored hashed."""
    r = logged_in_client.post(reverse("token-list"), {"name": "ci", "scopes": ["read", "check"],
                                                      "expires_in_days": "30"})
    html = r.content.decode()
    key = re.search(r'<code id="new-key-value">(blk_[A-Za-z0-9_\-]+)</code>', html).group(1)
    token = ApiToken.objects.get(user=user)
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert sorted(token.scopes) == ["check", "read"]
    assert token.expires is not None
    assert 29 <= (token.expires - timezone.now()).days <= 30
    page = logged_in_client.get(reverse("token-list")).content.decode()
    assert key not in page
    assert "read, check" in page or "check, read" in page
    assert token.expires.strftime("%Y-%m-%d") in page


def test_check_scope_posts_checks_and_nothing_else(user, check, make_upload, seed000_before):
    """A CI bot's ``check`` token posts a check on a patch it can read (201) and may do
    nothing else: no upload, no read; a read + upload token cannot post a check (403 JSON
    naming the scope). Nothing is stored by the refused requests."""
    from pathlib import Path

    from reviewapp.models import Check
    from reviewapp.services.series import series_create_from_mail

    mbox = Path(__file__).resolve().parents[2] / "data" / "mbox" / "series_split_head_v1.mbox"
    patch = series_create_from_mail(data=mbox.read_bytes(), user=user).patches.get(position=2)
    checks = f"/api/v1/patches/{patch.pk}/checks/"
    body = {"context": "ci-raid5", "state": "fail", "description": "await +40%"}

    _, bot = token_create(user=user, name="bot", scopes=["check"])
    r = _api(bot).post(checks, body, format="json")
    assert r.status_code == 201, r.content
    assert Check.objects.get(patch=patch).state == "fail"
    r = _api(bot).post(URL, {"files": [make_upload("a", seed000_before)]}, format="multipart")
    assert r.status_code == 403 and "'upload'" in check(r, "post", URL)["error"]
    assert TraceBundle.objects.count() == 0
    r = _api(bot).get(checks)
    assert r.status_code == 403 and "'read'" in r.json()["error"]

    _, uploader = token_create(user=user, name="uploader", scopes=["read", "upload"])
    r = _api(uploader).post(checks, {**body, "context": "other"}, format="json")
    assert r.status_code == 403 and "'check'" in r.json()["error"]
    assert Check.objects.filter(patch=patch).count() == 1
    assert _api(uploader).get(checks).status_code == 200
