"""POST/GET /api/v1/bundles/: create (a bundle per upload), errors as JSON 400/413, auth."""

from __future__ import annotations

import pytest

from reviewapp.models import TraceBundle

pytestmark = pytest.mark.django_db

URL = "/api/v1/bundles/"


def test_bundle_post_creates_a_bundle_per_upload(api_client, check, make_upload, seed000_before):
    """Every upload is 201 with its own bundle, even with the same bytes (issue 11 REST)."""
    r1 = api_client.post(URL, {"files": [make_upload("before.txt", seed000_before)],
                               "role": "baseline", "kernel": "6.1.0-57-amd64"},
                         format="multipart")
    b1 = check(r1, "post", URL)
    assert r1.status_code == 201
    assert b1["files"][0]["name"] == "before.txt" and b1["files"][0]["format"] == "blkparse"
    assert b1["kernel"] == "6.1.0-57-amd64" and b1["job"]["state"] == "queued"
    assert b1["url"].endswith(f"/api/v1/bundles/{b1['id']}/")
    r2 = api_client.post(URL, {"files": [make_upload("again.txt", seed000_before)]},
                         format="multipart")
    b2 = check(r2, "post", URL)
    assert r2.status_code == 201 and b2["id"] != b1["id"] and b2["checksum"] == b1["checksum"]
    assert b2["kernel"] == "" and b2["files"][0]["name"] == "again.txt"
    assert TraceBundle.objects.count() == 2


def test_bundle_post_empty_is_400_json(api_client, check):
    """No files: 400 with the JSON error shape."""
    r = api_client.post(URL, {"role": "baseline"}, format="multipart")
    body = check(r, "post", URL)
    assert r.status_code == 400 and "no files" in body["error"]


def test_bundle_post_unknown_format_is_400_json(api_client, check, make_upload):
    """A file that is not a trace: 400 naming the file."""
    r = api_client.post(URL, {"files": [make_upload("photo.jpg", b"\xff\xd8\xff\xe0 JFIF")]},
                        format="multipart")
    body = check(r, "post", URL)
    assert r.status_code == 400 and body["error"].startswith("photo.jpg")


def test_bundle_post_malformed_line_is_400_json(api_client, check, make_upload, seed000_before):
    """A malformed line in the first 64 KiB: 400 naming the file and line; nothing stored."""
    bad = seed000_before + b"8,0 0 9 11.4 843 G R 1407x + 128 [dd]\n"
    r = api_client.post(URL, {"files": [make_upload("before.txt", bad)]}, format="multipart")
    body = check(r, "post", URL)
    assert r.status_code == 400 and body["error"].startswith("before.txt, line 8: ")
    assert not TraceBundle.objects.exists()


def test_bundle_post_bad_role_is_400(api_client, check, make_upload, seed000_before):
    """Role must be baseline or patched."""
    r = api_client.post(URL, {"files": [make_upload("a", seed000_before)], "role": "sideways"},
                        format="multipart")
    body = check(r, "post", URL)
    assert r.status_code == 400 and body["fields"]["role"]


def test_bundle_post_over_limit_is_413_json(api_client, check, make_upload, settings,
                                            seed000_before):
    """A bundle over BLKREVIEW_MAX_UPLOAD_MB: 413 with a JSON error."""
    settings.BLKREVIEW_MAX_UPLOAD_BYTES = 100
    r = api_client.post(URL, {"files": [make_upload("big.txt", seed000_before)]},
                        format="multipart")
    body = check(r, "post", URL)
    assert r.status_code == 413 and "limit" in body["error"]
    assert not TraceBundle.objects.exists()


def test_bundle_post_body_over_limit_is_413_before_parsing(api_client, check, settings):
    """A request whose Content-Length is far over the limit is refused unread (413)."""
    settings.BLKREVIEW_MAX_UPLOAD_BYTES = 10
    r = api_client.generic("POST", URL, b"x" * (2 * 1024 * 1024 + 100),
                           content_type="multipart/form-data; boundary=zzz")
    body = check(r, "post", URL)
    assert r.status_code == 413 and "over the upload limit" in body["error"]


def test_bundle_post_requires_auth(client, check, make_upload, seed000_before):
    """Without a token: 401 JSON."""
    r = client.post(URL, {"files": [make_upload("a", seed000_before)]})
    body = check(r, "post", URL)
    assert r.status_code == 401 and body["code"]


def test_bundle_post_with_revoked_token_is_401(api_client, check, make_upload, seed000_before,
                                               user):
    """A revoked token no longer authenticates."""
    from reviewapp.services.tokens import token_revoke

    for t in user.api_tokens.all():
        token_revoke(token=t, user=user)
    r = api_client.post(URL, {"files": [make_upload("a", seed000_before)]}, format="multipart")
    check(r, "post", URL)
    assert r.status_code == 401


def test_bundle_get_and_results(api_client, check, make_upload, seed000_before):
    """GET a bundle and its (not yet computed) results."""
    b = check(api_client.post(URL, {"files": [make_upload("a", seed000_before)]},
                              format="multipart"), "post", URL)
    got = check(api_client.get(f"/api/v1/bundles/{b['id']}/"), "get", "/api/v1/bundles/{id}/")
    assert got["id"] == b["id"] and got["has_results"] is False
    res = check(api_client.get(f"/api/v1/bundles/{b['id']}/results/"), "get",
                "/api/v1/bundles/{id}/results/")
    assert res == {"bundle": b["id"], "state": "queued", "error": "", "results": None,
                   "ingest": None}
    r404 = api_client.get("/api/v1/bundles/987654/")
    assert check(r404, "get", "/api/v1/bundles/{id}/")["code"] == "not_found"
