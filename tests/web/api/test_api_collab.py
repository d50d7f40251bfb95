"""REST for CI bots (issue 8): series/patches from mbox with filters and pagination, checks
(Patchwork's API, the comparison's own check, series roll-up), threads, verdicts, events
?since=, webhooks; every answer validated against the generated OpenAPI schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from reviewapp import constants as c
from reviewapp.models import Comparison, ComparisonResult, WebhookDelivery

pytestmark = pytest.mark.django_db
MBOX = Path(__file__).resolve().parents[2] / "data" / "mbox"


def mbox(name: str) -> bytes:
    return (MBOX / name).read_bytes()


def create(api_client, check, name: str, **extra):
    r = api_client.post("/api/v1/series/", {"mbox": SimpleUploadedFile(name, mbox(name)),
                                            **extra}, format="multipart")
    return check(r, "post", "/api/v1/series/"), r.status_code


def test_series_create_from_mbox_and_json_text(api_client, check):
    """multipart mbox and JSON text both create a series; the answer lists its patches and
    versions; duplicates are 409 and malformed mail 400 with the parser's reason."""
    body, status = create(api_client, check, "series_split_head_v1.mbox")
    assert status == 201 and body["version"] == 1 and len(body["patches"]) == 2
    r = api_client.post("/api/v1/series/", {"text": mbox("series_split_head_v2.mbox").decode()},
                        format="json")
    v2 = check(r, "post", "/api/v1/series/")
    assert r.status_code == 201 and v2["previous"] == body["id"]
    assert [v["version"] for v in v2["versions"]] == [1, 2]
    again, status = create(api_client, check, "series_split_head_v1.mbox")
    assert status == 409 and "uploaded before" in again["error"]
    bad, status = create(api_client, check, "malformed_cover_only.mbox")
    assert status == 400 and "only a cover letter" in bad["error"]
    assert bad["fields"]["mbox"]
    r = APIClient().post("/api/v1/series/", {"text": "x"}, format="json")
    assert r.status_code in (401, 403)


def test_series_and_patch_filters_pagination(api_client, check):
    """Patches filter by series, version, author, state, message-id; lists paginate."""
    v1, _ = create(api_client, check, "series_split_head_v1.mbox")
    create(api_client, check, "series_split_head_v2.mbox")
    create(api_client, check, "single_resend_next_v3.mbox")
    page = check(api_client.get("/api/v1/patches/?limit=2"), "get", "/api/v1/patches/")
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]
    by_series = check(api_client.get(f"/api/v1/patches/?series={v1['id']}"), "get",
                      "/api/v1/patches/")
    assert {p["position"] for p in by_series["results"]} == {1, 2}
    assert check(api_client.get("/api/v1/patches/?version=3"), "get",
                 "/api/v1/patches/")["results"][0]["title"] == "md/raid5: align chunk-sized reads"
    assert check(api_client.get("/api/v1/patches/?author=Ren%C3%A9"), "get",
                 "/api/v1/patches/")["count"] == 1
    assert check(api_client.get("/api/v1/patches/?state=superseded"), "get",
                 "/api/v1/patches/")["count"] == 2
    mid = "<202511042-split-head-v2-1-yukuai@blkreview.test>"
    assert check(api_client.get("/api/v1/patches/", {"message_id": mid}), "get",
                 "/api/v1/patches/")["count"] == 1
    series = check(api_client.get("/api/v1/series/?version=2"), "get", "/api/v1/series/")
    assert series["count"] == 1
    r = api_client.get("/api/v1/patches/?state=nonsense")
    assert r.status_code == 400 and "state" in check(r, "get", "/api/v1/patches/")["error"]


def test_checks_post_list_comparison_context_and_series_rollup(api_client, check, user):
    """Bots post checks; the newest per context wins; the comparison's own check appears as
    context blkreview-comparison; the series rolls up to the worst state."""
    v1, _ = create(api_client, check, "series_split_head_v1.mbox")
    p1, p2 = (p["id"] for p in sorted(v1["patches"], key=lambda p: p["position"]))
    url = f"/api/v1/patches/{p1}/checks/"
    for state in ("pending", "success"):
        r = api_client.post(url, {"context": "ci-md-raid5", "state": state,
                                  "description": "fio 2M reads", "target_url":
                                  "https://ci.example.org/runs/1"}, format="json")
        assert check(r, "post", "/api/v1/patches/{id}/checks/")["state"] == state
    checks = check(api_client.get(url), "get", "/api/v1/patches/{id}/checks/")["results"]
    assert [(x["context"], x["state"]) for x in checks] == [("ci-md-raid5", "success")]
    r = api_client.post(url, {"context": "ci", "state": "broken"}, format="json")
    assert r.status_code == 400 and check(r, "post", "/api/v1/patches/{id}/checks/")["fields"]
    cmp = Comparison.objects.create(patch_id=p2, created_by=user, status=c.COMPARISON_READY)
    ComparisonResult.objects.create(comparison=cmp, state=c.JOB_STATE_SUCCEEDED,
                                    verdict={"state": "warning", "reasons": ["slower"]})
    own = check(api_client.get(f"/api/v1/patches/{p2}/checks/"), "get",
                "/api/v1/patches/{id}/checks/")["results"]
    assert own[0]["context"] == c.CHECK_CONTEXT_COMPARISON and own[0]["state"] == "warning"
    assert own[0]["target_url"].endswith(f"/comparisons/{cmp.pk}/")
    roll = check(api_client.get(f"/api/v1/series/{v1['id']}/checks/"), "get",
                 "/api/v1/series/{id}/checks/")
    assert roll["state"] == "warning"
    assert [p["state"] for p in roll["patches"]] == ["success", "warning"]


def test_threads_verdicts_events_since(api_client, check, user):
    """Start a diff-line thread, reply, resolve; record a verdict; the event list has them
    in order and ?since= returns only later ones."""
    v1, _ = create(api_client, check, "series_split_head_v1.mbox")
    p2 = max(v1["patches"], key=lambda p: p["position"])["id"]
    r = api_client.post(f"/api/v1/patches/{p2}/threads/", {
        "anchor_kind": "diff", "anchor": {"line": 12}, "body": "Why `nocheck`?"}, format="json")
    thread = check(r, "post", "/api/v1/patches/{id}/threads/")
    assert thread["anchor_label"].startswith("block/blk-merge.c:133")
    assert "<code>nocheck</code>" in thread["comments"][0]["html"]
    r = api_client.post(f"/api/v1/threads/{thread['id']}/comments/", {"body": "ok"},
                        format="json")
    check(r, "post", "/api/v1/threads/{id}/comments/")
    r = api_client.post(f"/api/v1/threads/{thread['id']}/resolve/", {"resolved": True},
                        format="json")
    assert check(r, "post", "/api/v1/threads/{id}/resolve/")["resolved"] is True
    listed = check(api_client.get(f"/api/v1/patches/{p2}/threads/"), "get",
                   "/api/v1/patches/{id}/threads/")
    assert listed["count"] == 1 and len(listed["results"][0]["comments"]) == 2
    r = api_client.post(f"/api/v1/patches/{p2}/verdicts/", {"kind": "tested-by"}, format="json")
    assert check(r, "post", "/api/v1/patches/{id}/verdicts/")["trailer"].startswith("Tested-by: ")
    events = check(api_client.get("/api/v1/events/?limit=200"), "get", "/api/v1/events/")
    kinds = [e["kind"] for e in events["results"]]
    assert kinds[0] == "series-created" and kinds[-1] == "verdict-created"
    assert "thread-created" in kinds and "comment-created" in kinds and "thread-resolved" in kinds
    middle = events["results"][len(kinds) // 2]
    later = check(api_client.get("/api/v1/events/", {"since": middle["created"]}), "get",
                  "/api/v1/events/")
    assert all(e["created"] > middle["created"] for e in later["results"])
    assert check(api_client.get("/api/v1/events/?kind=verdict-created"), "get",
                 "/api/v1/events/")["count"] == 1
    assert api_client.get("/api/v1/events/?since=yesterday").status_code == 400


def test_private_series_events_and_threads_hidden(api_client, check, other_user):
    """Another user's private series: 404 on detail, absent from lists and events."""
    from reviewapp.services.series import series_create_from_mail

    s = series_create_from_mail(data=mbox("series_split_head_v1.mbox"), user=other_user,
                                public=False)
    p = s.patches.first()
    for url, path in [(f"/api/v1/series/{s.pk}/", "/api/v1/series/{id}/"),
                      (f"/api/v1/patches/{p.pk}/", "/api/v1/patches/{id}/"),
                      (f"/api/v1/patches/{p.pk}/checks/", "/api/v1/patches/{id}/checks/"),
                      (f"/api/v1/patches/{p.pk}/threads/", "/api/v1/patches/{id}/threads/"),
                      (f"/api/v1/series/{s.pk}/checks/", "/api/v1/series/{id}/checks/")]:
        r = api_client.get(url)
        assert r.status_code == 404, url
        check(r, "get", path)
    r = api_client.post(f"/api/v1/patches/{p.pk}/checks/", {"context": "x", "state": "fail"},
                        format="json")
    assert r.status_code == 404
    assert check(api_client.get("/api/v1/series/"), "get", "/api/v1/series/")["count"] == 0
    assert check(api_client.get("/api/v1/events/"), "get", "/api/v1/events/")["count"] == 0


def test_webhook_register_list_deliveries_created(api_client, check, settings):
    """A webhook is registered (secret shown once); a matching event creates a delivery;
    unknown kinds and non-http URLs are 400."""
    r = api_client.post("/api/v1/webhooks/", {"url": "http://127.0.0.1:9/hook",
                                              "events": ["series-created"]}, format="json")
    hook = check(r, "post", "/api/v1/webhooks/")
    assert r.status_code == 201 and len(hook["secret"]) == 64
    listed = check(api_client.get("/api/v1/webhooks/"), "get", "/api/v1/webhooks/")
    assert "secret" not in listed["results"][0]
    for bad in ({"url": "ftp://x/", "events": []}, {"url": "http://x/", "events": ["nope"]}):
        r = api_client.post("/api/v1/webhooks/", bad, format="json")
        assert r.status_code == 400 and check(r, "post", "/api/v1/webhooks/")["fields"]
    from reviewapp.models import Event
    from reviewapp.services.webhooks import webhook_deliveries_enqueue

    create(api_client, check, "series_split_head_v1.mbox")
    ev = Event.objects.get(kind="series-created")
    # on_commit does not run inside the test transaction: enqueue as the commit would
    webhook_deliveries_enqueue(event_id=ev.pk)
    assert WebhookDelivery.objects.filter(webhook_id=hook["id"], event=ev).count() == 1
    log = check(api_client.get(f"/api/v1/webhooks/{hook['id']}/deliveries/"), "get",
                "/api/v1/webhooks/{id}/deliveries/")
    assert log["results"][0]["kind"] == "series-created"
    r = APIClient().get(f"/api/v1/webhooks/{hook['id']}/")
    assert r.status_code in (401, 403)


def test_swagger_and_redoc_served_with_local_assets(client):
    """The API docs pages load their JS/CSS from our static files, not a CDN."""
    for url in ("/api/v1/docs/", "/api/v1/redoc/"):
        html = client.get(url).content.decode()
        assert "/static/drf_spectacular_sidecar/" in html, url
        assert "cdn.jsdelivr" not in html and "unpkg" not in html


def test_patch_state_change_by_submitter_only(api_client, check, other_user):
    """The submitter sets a state (event patch-state-changed); others get 403; bad state 400."""
    v1, _ = create(api_client, check, "series_split_head_v1.mbox")
    pid = v1["patches"][0]["id"]
    r = api_client.patch(f"/api/v1/patches/{pid}/", {"state": "accepted"}, format="json")
    assert check(r, "patch", "/api/v1/patches/{id}/")["state"] == "accepted"
    r = api_client.patch(f"/api/v1/patches/{pid}/", {"state": "merged!"}, format="json")
    assert r.status_code == 400 and check(r, "patch", "/api/v1/patches/{id}/")["fields"]
    ev = check(api_client.get("/api/v1/events/?kind=patch-state-changed"), "get",
               "/api/v1/events/")
    assert ev["results"][0]["payload"]["current_state"] == "accepted"
    other = APIClient()
    other.force_authenticate(other_user)
    r = other.patch(f"/api/v1/patches/{pid}/", {"state": "rejected"}, format="json")
    assert r.status_code == 403 and check(r, "patch", "/api/v1/patches/{id}/")
