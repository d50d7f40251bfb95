"""The CI check verdict and the comparison analysis over /api/v1/, checked against the schema."""

from __future__ import annotations

import pytest

from reviewapp.models import ComparisonResult
from tests.conftest import finish_comparison

pytestmark = pytest.mark.django_db

CHECK = "/api/v1/comparisons/{id}/check/"
ANALYSIS = "/api/v1/comparisons/{id}/analysis/"


def test_check_of_a_finished_comparison(api_client, check, finished_comparison):
    """GET check/: success/warning/fail with reasons, the summary, the timing verdict, the
    rules and thresholds, the same as stored."""
    body = check(api_client.get(CHECK.format(id=finished_comparison.pk)), "get", CHECK)
    stored = ComparisonResult.objects.get(comparison=finished_comparison).verdict
    assert body["state"] == stored["state"] and body["state"] in ("success", "warning", "fail")
    assert body["reasons"] == stored["reasons"]
    assert body["summary"] == stored["summary"] and "timing:" in body["summary"]
    assert body["timing"].startswith("timing: ")
    assert {r["name"]: r["level"] for r in body["rules"]}["rule_backward_rise"] == 2
    assert body["thresholds"]["throughput_drop_fail_pct"] == 10.0
    assert body["step"]["state"] == "succeeded"
    assert body["report_url"].endswith(f"/comparisons/{finished_comparison.pk}/report.txt")


def test_check_readable_without_login_for_public(client, check, finished_comparison):
    """A public comparison's check is readable anonymously (CI links it in reports)."""
    r = client.get(CHECK.format(id=finished_comparison.pk))
    assert r.status_code == 200 and check(r, "get", CHECK)["state"]


def test_analysis_returns_compare_check_and_model(api_client, check, finished_comparison):
    """GET analysis/: compare() metrics with verdicts, the check and the model panel."""
    body = check(api_client.get(ANALYSIS.format(id=finished_comparison.pk)), "get", ANALYSIS)
    assert body["compare"]["runs_note"] == "single run"
    metric = next(m for m in body["compare"]["metrics"] if m["key"] == "254,0 MB/s")
    # one small run per side: the member's timing is not judged (too few events), its
    # roll-up needs more runs; never a warning or a failure
    assert metric["verdict"] in ("not judged", "needs more runs") and metric["delta"] is not None
    assert metric["kind"] == "timing"
    assert body["check"]["state"] == body["compare"]["check"]["verdict"]
    assert body["model"]["state"] == "ok"
    assert body["model"]["fidelity"]["254,0"]["matched_in_order"] == 1.0


def test_check_pending_before_the_step_and_404_for_unknown(api_client, check, make_upload,
                                                           seed000_before, seed000_after):
    """Before the comparison step the check is pending; an unknown id is a 404."""
    url = "/api/v1/submissions/"
    r = api_client.post(url, {
        "title": "t", "baseline_files": [make_upload("b.txt", seed000_before)],
        "patched_files": [make_upload("a.txt", seed000_after)],
        "thresholds": "throughput_drop_fail_pct=5",
    }, format="multipart")
    body = check(r, "post", url)
    assert body["thresholds"] == {"throughput_drop_fail_pct": 5.0}
    assert body["check_url"].endswith(f"/api/v1/comparisons/{body['id']}/check/")
    pending = check(api_client.get(CHECK.format(id=body["id"])), "get", CHECK)
    assert pending["state"] == "pending" and pending["reasons"] == []
    assert pending["thresholds"]["throughput_drop_fail_pct"] == 5.0
    analysis = check(api_client.get(ANALYSIS.format(id=body["id"])), "get", ANALYSIS)
    assert analysis["compare"] is None and analysis["check"] is None
    r = api_client.get(CHECK.format(id=999999))
    assert r.status_code == 404 and check(r, "get", CHECK)


def test_thresholds_override_through_the_api(api_client, check, make_upload, seed000_before,
                                             seed000_after):
    """thresholds on POST /comparisons/ are stored and used by the check; unknown ones 400."""
    from reviewapp.models import Comparison

    ids = []
    for data, role in ((seed000_before, "baseline"), (seed000_after, "patched")):
        r = api_client.post("/api/v1/bundles/", {"files": [make_upload(f"{role}.txt", data)],
                                                 "role": role}, format="multipart")
        ids.append(check(r, "post", "/api/v1/bundles/")["id"])
    url = "/api/v1/comparisons/"
    r = api_client.post(url, {"title": "x", "baseline": [ids[0]], "patched": [ids[1]],
                              "thresholds": {"bogus": 1}}, format="json")
    assert r.status_code == 400 and "unknown name" in check(r, "post", url)["error"]
    r = api_client.post(url, {"title": "x", "baseline": [ids[0]], "patched": [ids[1]],
                              "thresholds": {"pattern_worse_warn_pct": 1000}}, format="json")
    body = check(r, "post", url)
    comparison = finish_comparison(Comparison.objects.get(pk=body["id"]))
    got = check(api_client.get(CHECK.format(id=comparison.pk)), "get", CHECK)
    assert got["thresholds"]["pattern_worse_warn_pct"] == 1000.0
    assert not any("worse by more than" in reason for reason in got["reasons"])


def test_put_thresholds_requeues_the_step(api_client, check, finished_comparison, other_user):
    """PUT thresholds/ replaces the overrides and queues the comparison step again; another
    user gets 403, an unknown name 400."""
    from rest_framework.test import APIClient

    url = "/api/v1/comparisons/{id}/thresholds/"
    path = url.format(id=finished_comparison.pk)
    r = api_client.put(path, {"thresholds": {"throughput_drop_fail_pct": 1.5}}, format="json")
    body = check(r, "put", url)
    assert r.status_code == 200 and body["thresholds"] == {"throughput_drop_fail_pct": 1.5}
    assert ComparisonResult.objects.get(comparison=finished_comparison).state == "queued"
    pending = check(api_client.get(CHECK.format(id=finished_comparison.pk)), "get", CHECK)
    assert pending["state"] == "pending"
    r = api_client.put(path, {"thresholds": {"nope": 1}}, format="json")
    assert r.status_code == 400 and "unknown name" in check(r, "put", url)["error"]
    other = APIClient()
    other.force_authenticate(other_user)
    r = other.put(path, {"thresholds": {}}, format="json")
    assert r.status_code == 403 and check(r, "put", url)["error"]
