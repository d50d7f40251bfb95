"""The analysis job: run_analysis (the task body) storing results, failing cleanly."""

from __future__ import annotations

import pytest
from django.core.files.storage import default_storage

from reviewapp.models import AnalysisJob, BundleResult
from reviewapp.services.bundles import bundle_create
from reviewapp.services.jobs import job_mark_failed, job_progress, job_start, job_store_results
from reviewapp.tasks import run_analysis
from tests.conftest import past_head

pytestmark = pytest.mark.django_db


def _bundle(make_upload, data, name="trace.txt"):
    bundle, _ = bundle_create(files=[make_upload(name, data)])
    return bundle, AnalysisJob.objects.get(bundle=bundle)


def test_run_analysis_stores_seek_and_size_results(make_upload, seed000_before):
    """The task body parses, analyzes and stores results; the job ends at 100 %."""
    bundle, job = _bundle(make_upload, seed000_before)
    assert run_analysis(job.pk) == "succeeded"
    job.refresh_from_db()
    bundle.refresh_from_db()
    assert (job.state, job.progress, job.error) == ("succeeded", 100, "")
    assert job.started is not None and job.finished is not None
    assert bundle.parse_status == "parsed"
    result = BundleResult.objects.get(bundle=bundle)
    dev = result.data["devices"]["8,0"]
    assert dev["seek"]["stage"] == "G"
    assert dev["sizes"]["count"] == 7
    assert result.ingest["files"][0]["name"] == "trace.txt"
    assert default_storage.exists(result.events_name)


def test_run_analysis_parse_error_marks_failed_without_results(make_upload, seed000_before):
    """A malformed line past the upload check fails the job with file, line and reason and
    stores nothing."""
    bad = past_head(seed000_before) + b"8,0 0 9 11.4 843 G R notasector + 128 [dd]\n"
    bundle, job = _bundle(make_upload, bad, name="before-broken.txt")
    assert run_analysis(job.pk) == "failed"
    job.refresh_from_db()
    bundle.refresh_from_db()
    assert job.state == "failed"
    assert job.error.startswith("before-broken.txt, line 1008:")
    assert job.error_detail["file"] == "before-broken.txt"
    assert job.error_detail["line"] == 1008
    assert job.error_detail["reason"]
    assert bundle.parse_status == "failed"
    assert not BundleResult.objects.filter(bundle=bundle).exists()


def test_failed_job_does_not_affect_other_bundles(make_upload, seed000_before, seed000_after):
    """One bundle failing leaves another bundle's job and results alone."""
    good, good_job = _bundle(make_upload, seed000_after, name="after.txt")
    bad, bad_job = _bundle(make_upload,
                           past_head(seed000_before) + b"8,0 0 9 11.4 843 G R 1x2 + 128 [dd]\n",
                       name="bad.txt")
    assert run_analysis(bad_job.pk) == "failed"
    assert run_analysis(good_job.pk) == "succeeded"
    assert BundleResult.objects.filter(bundle=good).exists()
    assert not BundleResult.objects.filter(bundle=bad).exists()


def test_run_analysis_ignores_missing_and_finished_jobs(make_upload, seed000_before):
    """A redelivered task for a finished job, or for a job that is gone, does nothing."""
    _, job = _bundle(make_upload, seed000_before)
    assert run_analysis(job.pk) == "succeeded"
    assert run_analysis(job.pk) == "skipped"
    assert run_analysis(999999) == "skipped"


def test_job_progress_only_while_running(make_upload, seed000_before):
    """Progress is clamped to 0-100 and only moves while the job runs."""
    _, job = _bundle(make_upload, seed000_before)
    job_progress(job_id=job.pk, progress=50)
    job.refresh_from_db()
    assert job.progress == 0
    job_start(job_id=job.pk)
    job_progress(job_id=job.pk, progress=250, message="parsing")
    job.refresh_from_db()
    assert (job.progress, job.message) == (100, "parsing")


def test_store_results_after_failure_is_refused(make_upload, seed000_before):
    """Once failed, a late result cannot turn the job into a success."""
    bundle, job = _bundle(make_upload, seed000_before)
    job_start(job_id=job.pk)
    job_mark_failed(job_id=job.pk, error="worker lost")
    assert job_store_results(job_id=job.pk, results={"version": 1}, ingest={}) is None
    assert not BundleResult.objects.filter(bundle=bundle).exists()


def test_manifest_kernel_fills_bundle_kernel(make_upload, seed000_before):
    """A blkreview.toml in the bundle names the kernel when the uploader did not."""
    manifest = b'kernel = "6.1.0-57-amd64"\nrole = "baseline"\n'
    bundle, _ = bundle_create(files=[make_upload("g.txt", seed000_before),
                                     make_upload("blkreview.toml", manifest)])
    job = AnalysisJob.objects.get(bundle=bundle)
    assert run_analysis(job.pk) == "succeeded", AnalysisJob.objects.get(pk=job.pk).error
    bundle.refresh_from_db()
    assert bundle.kernel == "6.1.0-57-amd64"
    assert bundle.result.ingest["manifest"]["kernel"] == "6.1.0-57-amd64"


def test_unexpected_error_fails_the_job_with_details_in_the_log_only(make_upload, seed000_before,
                                                                     monkeypatch, caplog):
    """An engine bug fails the job with a readable sentence; the exception text and traceback
    go to the worker's log, never onto the job (anyone who can read the page sees it)."""
    import workers.analyzers
    from reviewapp.tasks import INTERNAL_ERROR, analyze_bundle

    bundle, job = _bundle(make_upload, seed000_before)

    def boom(*args, **kwargs):
        raise RuntimeError("analyzer exploded at 10.0.0.7:6379")

    monkeypatch.setattr(workers.analyzers, "analyze", boom)
    assert run_analysis(job.pk) == "failed"
    job.refresh_from_db()
    assert job.state == "failed" and job.error == INTERNAL_ERROR
    assert "10.0.0.7" not in job.error + str(job.error_detail) + job.message
    assert "analyzer exploded at 10.0.0.7" in caplog.text
    assert not BundleResult.objects.filter(bundle=bundle).exists()
    # a crash before the claim (on_failure) says the same
    _, job2 = _bundle(make_upload, seed000_before + b"\n")
    analyze_bundle.on_failure(RuntimeError("db at 10.0.0.8"), "tid", [job2.pk], {}, None)
    job2.refresh_from_db()
    assert job2.state == "failed" and job2.error == INTERNAL_ERROR


def test_succeeded_job_is_never_marked_failed_afterwards(make_upload, seed000_before):
    """An error after the results are stored (e.g. queueing the comparison step) leaves the
    job succeeded and its EventTable in storage."""
    from reviewapp.tasks import run_analysis as run

    bundle, job = _bundle(make_upload, seed000_before)
    assert run(job.pk) == "succeeded"
    job_mark_failed(job_id=job.pk, error="late error")
    job.refresh_from_db()
    assert job.state == "succeeded" and job.error == ""
    assert default_storage.exists(BundleResult.objects.get(bundle=bundle).events_name)


def test_malformed_line_near_the_top_is_refused_at_upload(make_upload, seed000_before):
    """A malformed line in the first 64 KiB is refused before anything is stored."""
    from reviewapp.models import TraceBundle
    from reviewapp.services import UploadRejected

    bad = seed000_before + b"8,0 0 9 11.4 843 G R notasector + 128 [dd]\n"
    before = TraceBundle.objects.count()
    with pytest.raises(UploadRejected, match=r"before-broken\.txt, line 8: "):
        _bundle(make_upload, bad, name="before-broken.txt")
    assert TraceBundle.objects.count() == before
