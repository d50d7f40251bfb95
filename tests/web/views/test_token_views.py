"""The API tokens page: create (shown once, stored hashed), revoke, only one's own."""

from __future__ import annotations

import hashlib
import re

import pytest
from django.urls import reverse

from reviewapp.models import ApiToken

pytestmark = pytest.mark.django_db


def test_tokens_page_requires_login(client):
    """Anonymous users are sent to log in."""
    r = client.get(reverse("token-list"))
    assert r.status_code == 302 and reverse("login") in r["Location"]


def test_create_token_shown_once_stored_hashed(logged_in_client, user):
    """The key appears once in the response; the database holds only its sha256."""
    r = logged_in_client.post(reverse("token-list"), {"name": "ci bot", "scopes": ["read", "upload"]})
    html = r.content.decode()
    m = re.search(r'<code id="new-key-value">(blk_[A-Za-z0-9_\-]+)</code>', html)
    assert m
    key = m.group(1)
    token = ApiToken.objects.get(user=user)
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key not in {token.name, token.prefix, token.key_hash}
    assert r["Cache-Control"] == "no-store"
    again = logged_in_client.get(reverse("token-list")).content.decode()
    assert key not in again and token.prefix in again
    api = logged_in_client.get("/api/v1/jobs/1/", HTTP_AUTHORIZATION=f"Token {key}")
    assert api.status_code == 404  # authenticated (404, not 401)


def test_revoke_token(logged_in_client, client, user):
    """A revoked token stops working over the API."""
    logged_in_client.post(reverse("token-list"), {"name": "ci", "scopes": ["read"]})
    token = ApiToken.objects.get(user=user)
    r = logged_in_client.post(reverse("token-revoke", args=[token.pk]))
    assert r.status_code == 302
    token.refresh_from_db()
    assert token.revoked is not None and not token.active


def test_cannot_revoke_someone_elses_token(client, user, other_user):
    """Another user's token id is a 404."""
    from reviewapp.services.tokens import token_create

    token, _ = token_create(user=user, name="mine")
    client.force_login(other_user)
    assert client.post(reverse("token-revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked is None


def test_token_needs_a_name(logged_in_client):
    """An empty name is a form error."""
    r = logged_in_client.post(reverse("token-list"), {"name": ""})
    assert "This field is required." in r.content.decode()
    assert not ApiToken.objects.exists()
