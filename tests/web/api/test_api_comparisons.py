"""Comparisons, submissions, jobs and results over /api/v1/, checked against the schema."""

from __future__ import annotations

import pytest

from reviewapp.models import AnalysisJob, Comparison, ComparisonResult
from reviewapp.tasks import run_analysis, run_compare

pytestmark = pytest.mark.django_db


def _bundle(api_client, check, make_upload, data, name="t.txt", role="baseline"):
    r = api_client.post("/api/v1/bundles/", {"files": [make_upload(name, data)], "role": role},
                        format="multipart")
    return check(r, "post", "/api/v1/bundles/")


def test_comparison_from_bundle_ids(api_client, check, make_upload, seed000_before,
                                    seed000_after):
    """POST /comparisons/ from two bundle ids: 201 with ids, jobs and the page URL."""
    b = _bundle(api_client, check, make_upload, seed000_before)
    p = _bundle(api_client, check, make_upload, seed000_after, role="patched")
    r = api_client.post("/api/v1/comparisons/", {
        "title": "block: place split bios at the head of current->bio_list", "version": "v2",
        "baseline": [b["id"]], "patched": [p["id"]], "policy": "split_remainder=head",
    }, format="json")
    body = check(r, "post", "/api/v1/comparisons/")
    assert r.status_code == 201
    assert body["baseline"] == [b["id"]] and body["patched"] == [p["id"]]
    assert body["url"] == f"http://testserver/comparisons/{body['id']}/"
    assert body["policy"] == "split_remainder=head"
    assert {j["bundle"] for j in body["jobs"]} == {b["id"], p["id"]}
    assert body["patch"]["version"] == "v2"


def test_comparison_create_errors(api_client, check, make_upload, seed000_before):
    """Unknown bundle ids, a missing side and an unknown policy field are 400s."""
    b = _bundle(api_client, check, make_upload, seed000_before)
    url = "/api/v1/comparisons/"
    r = api_client.post(url, {"title": "x", "baseline": [b["id"]], "patched": [424242]},
                        format="json")
    assert "424242" in check(r, "post", url)["error"] and r.status_code == 400
    r = api_client.post(url, {"title": "x", "baseline": [b["id"]]}, format="json")
    assert check(r, "post", url)["fields"]["patched"] and r.status_code == 400
    r = api_client.post(url, {"title": "x", "baseline": [b["id"]], "patched": [b["id"]],
                              "policy": "split_everything=yes"}, format="json")
    assert "unknown field" in check(r, "post", url)["error"]
    r = api_client.post(url, {"baseline": [b["id"]], "patched": [b["id"]]}, format="json")
    assert "title" in check(r, "post", url)["error"]


def test_submission_then_job_and_results(api_client, check, make_upload, seed000_before,
                                         seed000_after):
    """One multipart call creates patch, both bundles and the comparison; results follow."""
    url = "/api/v1/submissions/"
    r = api_client.post(url, {
        "title": "block: place split bios at the head", "baseline_kernel": "6.17.13",
        "patched_kernel": "6.18.15", "baseline_files": [make_upload("before.txt", seed000_before)],
        "patched_files": [make_upload("after.txt", seed000_after)],
        "workload": "dd if=/dev/md0 of=/dev/null bs=4480k iflag=direct",
    }, format="multipart")
    body = check(r, "post", url)
    assert r.status_code == 201
    job_urls = [j["url"] for j in body["jobs"]]
    assert len(job_urls) == 2
    for job in AnalysisJob.objects.all():
        run_analysis(job.pk)  # the worker's function, in-process (e2e runs the real worker)
    job = check(api_client.get(job_urls[0].replace("http://testserver", "")), "get",
                "/api/v1/jobs/{id}/")
    assert job["state"] == "succeeded" and job["progress"] == 100
    res = check(api_client.get(f"/api/v1/comparisons/{body['id']}/results/"), "get",
                "/api/v1/comparisons/{id}/results/")
    assert res["status"] == "ready"
    assert res["baseline"][0]["results"]["devices"]["8,0"]["seek"]["cnt"] == 6
    assert res["patched"][0]["results"]["devices"]["8,0"]["seek"]["cnt"] == 7
    detail = check(api_client.get(f"/api/v1/comparisons/{body['id']}/"), "get",
                   "/api/v1/comparisons/{id}/")
    # every bundle is analyzed, but the comparison step has not run: not ready yet
    assert detail["analysis_status"] == "ready" and detail["status"] == "running"
    assert detail["running"]["kind"] == "compare" and detail["running"]["state"] == "queued"
    assert [j["kind"] for j in detail["jobs"]] == ["analyze", "analyze", "compare"]
    chk = check(api_client.get(f"/api/v1/comparisons/{body['id']}/check/"), "get",
                "/api/v1/comparisons/{id}/check/")
    assert (chk["status"], chk["state"], chk["running"]["kind"]) == ("running", "pending",
                                                                     "compare")
    run_compare(ComparisonResult.objects.get(comparison_id=body["id"]).pk)
    detail = check(api_client.get(f"/api/v1/comparisons/{body['id']}/"), "get",
                   "/api/v1/comparisons/{id}/")
    assert detail["status"] == "ready" and detail["running"] is None
    assert [j["state"] for j in detail["jobs"]] == ["succeeded"] * 3
    assert detail["jobs"][2]["url"].endswith(f"/api/v1/comparisons/{body['id']}/check/")
    chk = api_client.get(f"/api/v1/comparisons/{body['id']}/check/").json()
    assert chk["status"] == "ready" and chk["state"] not in ("pending", "error")


def test_check_is_ready_only_when_every_step_has_finished_and_names_the_running_one(
        api_client, check, make_upload, seed000_before):
    """The issue's case: the step running at 15 % while the bundles are analyzed: the check's
    status is "running" (not "ready") and says which step runs; a bundle used on both sides
    lists its job once."""
    from reviewapp.services import results as svc

    b = check(api_client.post("/api/v1/bundles/", {"files": [make_upload("a.txt", seed000_before)]},
                              format="multipart"), "post", "/api/v1/bundles/")
    r = api_client.post("/api/v1/comparisons/", {"title": "x", "baseline": [b["id"]],
                                                  "patched": [b["id"]]}, format="json")
    body = check(r, "post", "/api/v1/comparisons/")
    assert [j["kind"] for j in body["jobs"]] == ["analyze"] and body["status"] == "pending"
    assert body["running"] == {"kind": "analyze", "id": body["jobs"][0]["id"], "bundle": b["id"],
                               "side": "baseline", "state": "queued", "progress": 0,
                               "message": "waiting for a worker"}
    run_analysis(body["jobs"][0]["id"])
    step = ComparisonResult.objects.get(comparison_id=body["id"])
    svc.result_start(result_id=step.pk)
    svc.result_progress(result_id=step.pk, progress=15, message="seek at every stage")
    chk = check(api_client.get(f"/api/v1/comparisons/{body['id']}/check/"), "get",
                "/api/v1/comparisons/{id}/check/")
    assert chk["analysis_status"] == "ready" and chk["status"] == "running"
    assert chk["state"] == "pending"
    assert chk["running"] == {"kind": "compare", "id": step.pk, "bundle": None, "side": None,
                              "state": "running", "progress": 15,
                              "message": "seek at every stage"}
    detail = api_client.get(f"/api/v1/comparisons/{body['id']}/").json()
    assert [j["id"] for j in detail["jobs"]] == [body["jobs"][0]["id"], step.pk]


def test_submission_errors_are_json(api_client, check, make_upload, seed000_before, settings):
    """Missing side, unrecognised file and over-limit uploads: 400/400/413 JSON; nothing kept."""
    url = "/api/v1/submissions/"
    r = api_client.post(url, {"title": "t", "baseline_files": [make_upload("a", seed000_before)]},
                        format="multipart")
    assert r.status_code == 400 and "patched" in check(r, "post", url)["error"]
    r = api_client.post(url, {"title": "t", "baseline_files": [make_upload("a", seed000_before)],
                              "patched_files": [make_upload("b.bin", b"\x00\x01\x02junk")]},
                        format="multipart")
    assert r.status_code == 400 and check(r, "post", url)["error"].startswith("b.bin")
    settings.BLKREVIEW_MAX_UPLOAD_BYTES = 50
    r = api_client.post(url, {"title": "t", "baseline_files": [make_upload("a", seed000_before)],
                              "patched_files": [make_upload("b", seed000_before)]},
                        format="multipart")
    assert r.status_code == 413 and check(r, "post", url)["code"]
    assert not Comparison.objects.exists()


def test_add_bundles_to_a_side(api_client, check, make_upload, seed000_before, seed000_after,
                               make_blkparse):
    """More runs can be added to either side of an existing comparison."""
    b = _bundle(api_client, check, make_upload, seed000_before)
    p = _bundle(api_client, check, make_upload, seed000_after)
    cmp_ = check(api_client.post("/api/v1/comparisons/", {"title": "t", "baseline": [b["id"]],
                                                          "patched": [p["id"]]}, format="json"),
                 "post", "/api/v1/comparisons/")
    extra = _bundle(api_client, check, make_upload, make_blkparse([0, 128, 256]))
    url = "/api/v1/comparisons/{id}/bundles/"
    r = api_client.post(f"/api/v1/comparisons/{cmp_['id']}/bundles/",
                        {"side": "patched", "bundles": [extra["id"]]}, format="json")
    body = check(r, "post", url)
    assert body["patched"] == sorted([p["id"], extra["id"]])


def test_public_comparison_readable_without_login(api_client, check, client, make_upload,
                                                  seed000_before, seed000_after):
    """Anonymous GET works for a public comparison; a private one is 404 for others."""
    b = _bundle(api_client, check, make_upload, seed000_before)
    p = _bundle(api_client, check, make_upload, seed000_after)
    pub = check(api_client.post("/api/v1/comparisons/", {"title": "pub", "baseline": [b["id"]],
                                                         "patched": [p["id"]]}, format="json"),
                "post", "/api/v1/comparisons/")
    priv = check(api_client.post("/api/v1/comparisons/", {"title": "priv", "public": False,
                                                          "baseline": [b["id"]],
                                                          "patched": [p["id"]]}, format="json"),
                 "post", "/api/v1/comparisons/")
    r = client.get(f"/api/v1/comparisons/{pub['id']}/")
    assert check(r, "get", "/api/v1/comparisons/{id}/")["id"] == pub["id"]
    r = client.get(f"/api/v1/comparisons/{priv['id']}/")
    assert r.status_code == 404 and check(r, "get", "/api/v1/comparisons/{id}/")
    listed = check(client.get("/api/v1/comparisons/"), "get", "/api/v1/comparisons/")
    assert [c["id"] for c in listed["results"]] == [pub["id"]] and listed["count"] == 1
    r = client.post("/api/v1/comparisons/", {"title": "x"}, content_type="application/json")
    assert r.status_code == 401 or r.status_code == 403


def test_schema_endpoint(client):
    """The OpenAPI document is served at /api/v1/schema/."""
    r = client.get("/api/v1/schema/", {"format": "json"})
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    for path in ("/api/v1/bundles/", "/api/v1/submissions/", "/api/v1/comparisons/{id}/results/",
                 "/api/v1/jobs/{id}/"):
        assert path in doc["paths"]
