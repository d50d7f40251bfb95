"""Per-user daily upload quotas (issue 10 item 11): count and bytes, on REST and the form,
answered 429 with a clear message, the limit and when to retry."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from reviewapp.models import TraceBundle

pytestmark = pytest.mark.django_db

BUNDLES = "/api/v1/bundles/"


def upload(api_client, make_upload, make_blkparse, i: int):
    data = make_blkparse([8 * 1024 * i + 128 * k for k in range(20)])
    return api_client.post(BUNDLES, {"files": [make_upload(f"run{i}.txt", data)]},
                           format="multipart")


def test_upload_count_quota_on_rest(settings, api_client, make_upload, make_blkparse):
    """The third upload of a day over a quota of 2 is 429 with the limit and a retry time;
    an upload older than a day no longer counts."""
    settings.BLKREVIEW_QUOTA_UPLOADS_PER_DAY = 2
    assert upload(api_client, make_upload, make_blkparse, 1).status_code == 201
    assert upload(api_client, make_upload, make_blkparse, 2).status_code == 201
    r = upload(api_client, make_upload, make_blkparse, 3)
    assert r.status_code == 429
    body = r.json()
    assert body["code"] == "UploadQuotaExceeded"
    assert body["error"].startswith("daily upload quota reached: 2 uploads in the last 24 "
                                    "hours, the limit is 2 per day; try again after ")
    assert 86000 < int(r["Retry-After"]) <= 86400 and body["retry_after"] == int(r["Retry-After"])
    assert TraceBundle.objects.count() == 2
    TraceBundle.objects.filter(pk=TraceBundle.objects.order_by("pk")[0].pk).update(
        created=timezone.now() - dt.timedelta(hours=25))
    assert upload(api_client, make_upload, make_blkparse, 4).status_code == 201


def test_upload_bytes_quota_on_rest_and_submission(settings, api_client, make_upload,
                                                   make_blkparse):
    """Bytes per day: an upload that would pass the limit is refused, before anything is
    stored; a submission counts both sides."""
    first = upload(api_client, make_upload, make_blkparse, 1)
    assert first.status_code == 201
    used = first.json()["size"]
    settings.BLKREVIEW_QUOTA_BYTES_PER_DAY = used + 500
    r = upload(api_client, make_upload, make_blkparse, 2)
    assert r.status_code == 429 and "daily upload quota: " in r.json()["error"]
    assert "MB per day; try again after" in r.json()["error"]
    side = make_blkparse([900_000 + 128 * k for k in range(5)])
    other = make_blkparse([950_000 + 128 * k for k in range(5)])
    r = api_client.post("/api/v1/submissions/", {
        "title": "t", "baseline_files": [make_upload("b.txt", side)],
        "patched_files": [make_upload("p.txt", other)]}, format="multipart")
    assert r.status_code == 429 and TraceBundle.objects.count() == 1


def test_single_upload_larger_than_quota_says_so(settings, api_client, make_upload,
                                                 make_blkparse):
    """An upload bigger than the whole daily quota cannot be retried later: say that."""
    settings.BLKREVIEW_QUOTA_BYTES_PER_DAY = 100
    r = upload(api_client, make_upload, make_blkparse, 1)
    assert r.status_code == 429
    assert r.json()["error"].endswith("it is larger than the daily quota itself")
    assert "Retry-After" not in r


def test_quota_on_the_upload_form(settings, logged_in_client, make_upload, make_blkparse):
    """The form shows the quota message as a form error (status 429), nothing stored."""
    settings.BLKREVIEW_QUOTA_UPLOADS_PER_DAY = 1
    data = make_blkparse([128 * k for k in range(10)])
    other = make_blkparse([50_000 + 128 * k for k in range(10)])
    r = logged_in_client.post("/upload/", {
        "title": "quota", "baseline_files": [make_upload("b.txt", data)],
        "patched_files": [make_upload("p.txt", other)], "public": "on"})
    assert r.status_code == 429
    assert "daily upload quota reached: 0 uploads in the last 24 hours, the limit is 1 per " \
           "day" in r.content.decode()
    assert TraceBundle.objects.count() == 0


def test_quota_refuses_before_reading_the_body(settings, api_client):
    """At the quota, a REST upload is refused from its headers (nothing parsed or stored)."""
    settings.BLKREVIEW_QUOTA_UPLOADS_PER_DAY = 1
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="maintainer")
    TraceBundle.objects.create(checksum="x" * 64, size=10, uploaded_by=user)
    r = api_client.post(BUNDLES, data=b"--x--\r\n", content_type="multipart/form-data; boundary=x")
    assert r.status_code == 429 and "limit is 1 per day" in r.json()["error"]
