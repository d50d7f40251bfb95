"""Access control over /api/v1/ (issue 10 §1-4): private data answers 404 to outsiders, only
usable bundles and patches make a comparison, only writers change one."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from reviewapp.models import AnalysisJob, Comparison, TraceBundle
from reviewapp.services.comparisons import submission_create

pytestmark = pytest.mark.django_db


def _client(user: Any) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c


@pytest.fixture
def private(user, make_upload, seed000_before, seed000_after) -> Comparison:
    comparison, _ = submission_create(
        title="PRIVATE patch", baseline_files=[make_upload("secret-before.txt", seed000_before)],
        patched_files=[make_upload("secret-after.txt", seed000_after)],
        baseline_kernel="6.1-secret", patched_kernel="6.2-secret", public=False, user=user)
    return comparison


@pytest.fixture
def public(user, make_upload, seed000_before, seed000_after) -> Comparison:
    comparison, _ = submission_create(
        title="public patch", baseline_files=[make_upload("b.txt", seed000_before)],
        patched_files=[make_upload("a.txt", seed000_after)], public=True, user=user)
    return comparison


def _bundle_urls(comparison: Comparison) -> list[tuple[str, str]]:
    bundle = comparison.baseline_bundles.get()
    job = AnalysisJob.objects.filter(bundle=bundle).first()
    assert job is not None
    return [(f"/api/v1/bundles/{bundle.pk}/", "/api/v1/bundles/{id}/"),
            (f"/api/v1/bundles/{bundle.pk}/results/", "/api/v1/bundles/{id}/results/"),
            (f"/api/v1/jobs/{job.pk}/", "/api/v1/jobs/{id}/")]


def test_bundles_results_jobs_of_private_comparison_are_404_to_others(
        private, user, other_user, client, check):
    """§1: bundle, bundle results and job of a private comparison: 404 to another user and to
    anonymous, 200 to the owner."""
    for url, path in _bundle_urls(private):
        r = _client(other_user).get(url)
        assert r.status_code == 404, (url, r.status_code)
        assert check(r, "get", path)["code"] == "not_found"
        assert b"secret" not in r.content
        assert client.get(url).status_code in (401, 404), url
        r = _client(user).get(url)
        assert r.status_code == 200, (url, r.status_code)
        check(r, "get", path)


def test_bundles_results_jobs_of_public_comparison_are_readable(public, other_user, client,
                                                                check):
    """§1: what a public comparison shows (its bundles and jobs) stays readable to anyone."""
    for url, path in _bundle_urls(public):
        check(_client(other_user).get(url), "get", path)
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)
        check(r, "get", path)


def test_create_comparison_from_others_private_bundles_is_refused(private, other_user, check):
    """§2: another user's private bundle or patch ids do not make a (public) comparison: 400
    "no such bundle", as for an id that does not exist, and nothing is created."""
    b = private.baseline_bundles.get().pk
    p = private.patched_bundles.get().pk
    before = Comparison.objects.count()
    api = _client(other_user)
    r = api.post("/api/v1/comparisons/", {"title": "steal", "baseline": [b], "patched": [p],
                                          "public": True}, format="json")
    body = check(r, "post", "/api/v1/comparisons/")
    assert r.status_code == 400 and f"no bundle with id {b}" in body["error"]
    own = api.post("/api/v1/bundles/", {"files": [_upload(private)]}, format="multipart")
    own_id = own.json()["id"]
    r = api.post("/api/v1/comparisons/", {"patch": private.patch_id, "baseline": [own_id],
                                          "patched": [own_id], "public": True}, format="json")
    body = check(r, "post", "/api/v1/comparisons/")
    assert r.status_code == 400 and f"no patch with id {private.patch_id}" in body["error"]
    assert Comparison.objects.count() == before


def _upload(comparison: Comparison) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.conftest import blkparse_lines

    return SimpleUploadedFile("mine.txt", blkparse_lines([0, 128, 256]))


def test_public_bundles_may_be_reused(public, other_user, check):
    """§2: bundles already public (in a public comparison) may make another comparison."""
    b = public.baseline_bundles.get().pk
    p = public.patched_bundles.get().pk
    r = _client(other_user).post("/api/v1/comparisons/", {
        "title": "re-check", "baseline": [b], "patched": [p]}, format="json")
    assert r.status_code == 201, r.content
    check(r, "post", "/api/v1/comparisons/")


def test_add_bundles_and_thresholds_need_write_access(public, private, user, other_user,
                                                      check):
    """§3: adding runs and setting thresholds agree: 403 on a public comparison of someone
    else, 404 on a private one, allowed to the owner."""
    api = _client(other_user)
    own = api.post("/api/v1/bundles/", {"files": [_upload(public)]}, format="multipart").json()
    for comparison, status in ((public, 403), (private, 404)):
        url = f"/api/v1/comparisons/{comparison.pk}/bundles/"
        r = api.post(url, {"side": "patched", "bundles": [own["id"]]}, format="json")
        assert r.status_code == status, (url, r.content)
        check(r, "post", "/api/v1/comparisons/{id}/bundles/")
        url = f"/api/v1/comparisons/{comparison.pk}/thresholds/"
        r = api.put(url, {"thresholds": {"throughput_drop_fail_pct": 1}}, format="json")
        assert r.status_code == status, (url, r.content)
        check(r, "put", "/api/v1/comparisons/{id}/thresholds/")
    assert public.patched_bundles.count() == 1 and private.patched_bundles.count() == 1
    mine = _client(user).post("/api/v1/bundles/", {"files": [_upload(public)]},
                              format="multipart").json()
    r = _client(user).post(f"/api/v1/comparisons/{public.pk}/bundles/",
                           {"side": "patched", "bundles": [mine["id"]]}, format="json")
    assert r.status_code == 200 and mine["id"] in r.json()["patched"]


def test_add_bundles_only_from_usable_bundles(private, public, user, other_user, check):
    """§2/§3: the owner cannot pull another user's private bundle into their comparison."""
    theirs, _ = submission_create(
        title="theirs", baseline_files=[_upload(public)], patched_files=[_upload(public)],
        public=False, user=other_user)
    b = theirs.baseline_bundles.get().pk
    r = _client(user).post(f"/api/v1/comparisons/{public.pk}/bundles/",
                           {"side": "patched", "bundles": [b]}, format="json")
    assert r.status_code == 400 and f"no bundle with id {b}" in r.json()["error"]
    check(r, "post", "/api/v1/comparisons/{id}/bundles/")
    assert not public.patched_bundles.filter(pk=b).exists()
    assert TraceBundle.objects.filter(pk=b).exists()


def test_add_runs_page_needs_write_access(public, private, other_user, client, make_upload,
                                          make_blkparse):
    """§3: the page form /comparisons/<id>/runs/ refuses another user: 403 public, 404
    private; nothing is added."""
    client.force_login(other_user)
    for comparison, status in ((public, 403), (private, 404)):
        r = client.post(f"/comparisons/{comparison.pk}/runs/", {
            "side": "patched", "files": [make_upload("x.txt", make_blkparse([0, 128]))]})
        assert r.status_code == status
        assert comparison.patched_bundles.count() == 1


def test_same_bytes_on_both_sides_are_two_bundles(api_client, check, make_upload,
                                                  seed000_before):
    """Issue 11 REST / issue 10 §4: one file on both sides of a submission is one bundle per
    side, each with the kernel given for its side."""
    url = "/api/v1/submissions/"
    r = api_client.post(url, {
        "title": "same bytes", "baseline_kernel": "6.1", "patched_kernel": "6.1+fix",
        "baseline_files": [make_upload("run.txt", seed000_before)],
        "patched_files": [make_upload("run.txt", seed000_before)]}, format="multipart")
    body = check(r, "post", url)
    assert r.status_code == 201
    (b,), (p,) = body["baseline"], body["patched"]
    assert b != p
    assert TraceBundle.objects.get(pk=b).kernel == "6.1"
    assert TraceBundle.objects.get(pk=p).kernel == "6.1+fix"


def test_upload_tells_nothing_of_another_users_upload(private, other_user, check, make_upload,
                                                      seed000_before):
    """§4: uploading bytes someone else uploaded returns a new bundle with the caller's own
    metadata, never the other's kernel or file names."""
    theirs = private.baseline_bundles.get()
    r = _client(other_user).post("/api/v1/bundles/", {
        "files": [make_upload("mine.txt", seed000_before)], "kernel": "7.0"}, format="multipart")
    body = check(r, "post", "/api/v1/bundles/")
    assert r.status_code == 201 and body["id"] != theirs.pk
    assert body["kernel"] == "7.0" and [f["name"] for f in body["files"]] == ["mine.txt"]
    assert b"secret" not in r.content


def test_migration_splits_shared_bundles(user, other_user, make_upload, seed000_before):
    """§4 data migration: a bundle in another user's comparison, or on both sides of one,
    gets a copy per use (sharing the stored bytes and results); the original stays with its
    uploader."""
    import importlib

    from django.apps import apps

    from reviewapp.models import BundleResult, ComparisonResult
    from reviewapp.services.bundles import bundle_create
    from reviewapp.services.comparisons import comparison_create
    from reviewapp.services.patches import patch_create

    mig = importlib.import_module("reviewapp.migrations.0005_split_shared_bundles")
    bundle, _ = bundle_create(files=[make_upload("secret.txt", seed000_before)],
                              kernel="6.1-secret", user=user)
    result = BundleResult.objects.create(bundle=bundle, data={"x": 1})
    patch = patch_create(title="t", user=other_user)
    # as the old dedupe made it: the owner's bundle on both sides of another user's comparison
    comparison = comparison_create(patch=patch, baseline=[bundle], patched=[bundle],
                                   user=other_user, public=True)
    ComparisonResult.objects.update_or_create(comparison=comparison, defaults={
        "state": "succeeded", "inputs": {"baseline": [result.pk], "patched": [result.pk]}})
    mig.split_shared_bundles(apps, None)
    b, p = comparison.baseline_bundles.get(), comparison.patched_bundles.get()
    assert len({b.pk, p.pk, bundle.pk}) == 3
    assert b.uploaded_by == other_user and p.uploaded_by == other_user
    assert b.files.get().storage_name == bundle.files.get().storage_name
    assert b.result.data == {"x": 1} and p.result.data == {"x": 1}
    inputs = ComparisonResult.objects.get(comparison=comparison).inputs
    assert inputs == {"baseline": [b.result.pk], "patched": [p.result.pk]}
    assert TraceBundle.objects.get(pk=bundle.pk).uploaded_by == user
    # the original is no longer reachable through the other user's public comparison
    from reviewapp.access import bundles_readable_by

    assert not bundles_readable_by(None).filter(pk=bundle.pk).exists()
