"""Delivery services on real PostgreSQL: the claim, attempt tokens, the sweeper, replaced files,
rerun_jobs and cleanup_storage. The same guarantees end to end, with real worker processes
killed and a broker that is down: tests/e2e/test_exactly_once.py."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.utils import timezone

from reviewapp.models import AnalysisJob, BundleResult, ComparisonResult
from reviewapp.services import jobs
from reviewapp.services.bundles import bundle_create
from reviewapp.services.sweeper import sweep
from reviewapp.tasks import run_analysis
from tests.conftest import _purge_queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_commit(django_capture_on_commit_callbacks: Any, settings: Any) -> Any:
    """Run on-commit callbacks (file deletions, publishing) as a real commit would; the
    published messages are removed from this run's queue afterwards."""
    yield lambda: django_capture_on_commit_callbacks(execute=True)
    _purge_queue(settings.CELERY_BROKER_URL, settings.BLKREVIEW_ANALYSIS_QUEUE)


def _job(make_upload: Any, data: bytes) -> AnalysisJob:
    bundle, _ = bundle_create(files=[make_upload("t.txt", data)])
    return AnalysisJob.objects.get(bundle=bundle)


def _age(job: AnalysisJob, seconds: float) -> None:
    old = timezone.now() - timedelta(seconds=seconds)
    AnalysisJob.objects.filter(pk=job.pk).update(heartbeat=old, started=old)


def test_a_second_delivery_does_nothing_while_the_first_attempt_is_alive(make_upload,
                                                                          seed000_before):
    """The claim is exclusive: a duplicate delivery of a running job is ignored."""
    job = _job(make_upload, seed000_before)
    first = jobs.job_start(job_id=job.pk, task_id=job.celery_task_id)
    assert first is not None and first.attempts == 1
    assert jobs.job_start(job_id=job.pk, task_id=job.celery_task_id) is None
    assert AnalysisJob.objects.get(pk=job.pk).attempts == 1


def test_a_stale_attempt_is_taken_over_and_then_writes_nothing(make_upload, seed000_before,
                                                                settings, on_commit):
    """Without a heartbeat for BLKREVIEW_STALE_AFTER_SECONDS the job is taken over; the old
    attempt (alive after all) can no longer write progress, its file or results, and its
    recorded EventTable is deleted when the new attempt's claim commits."""
    job = _job(make_upload, seed000_before)
    jobs.job_start(job_id=job.pk, task_id=job.celery_task_id)
    name = default_storage.save(f"tables/bundle-{job.bundle_id}-stale.npz", io.BytesIO(b"x"))
    assert jobs.job_file_pending(job_id=job.pk, attempt=1, name=name)
    _age(job, settings.BLKREVIEW_STALE_AFTER_SECONDS + 5)
    with on_commit():
        second = jobs.job_start(job_id=job.pk, task_id=job.celery_task_id)
    assert second is not None and second.attempts == 2
    assert not default_storage.exists(name)
    assert not jobs.job_progress(job_id=job.pk, progress=50, attempt=1)
    assert not jobs.job_heartbeat(job_id=job.pk, attempt=1)
    assert jobs.job_store_results(job_id=job.pk, results={}, ingest={}, attempt=1) is None
    jobs.job_mark_failed(job_id=job.pk, error="late", attempt=1)
    assert AnalysisJob.objects.get(pk=job.pk).state == "running"
    assert jobs.job_store_results(job_id=job.pk, results={"a": 1}, ingest={}, attempt=2)
    assert jobs.job_store_results(job_id=job.pk, results={"a": 2}, ingest={}, attempt=2) is None
    assert BundleResult.objects.get(bundle_id=job.bundle_id).data == {"a": 1}


def test_a_task_queued_again_under_another_id_ignores_the_old_message(make_upload,
                                                                       seed000_before):
    job = _job(make_upload, seed000_before)
    assert jobs.job_start(job_id=job.pk, task_id="an-older-task-id") is None
    assert AnalysisJob.objects.get(pk=job.pk).state == "queued"


def test_the_sweeper_requeues_a_stale_job_and_fails_it_after_max_attempts(
        make_upload, seed000_before, settings, on_commit):
    """A job whose worker was lost is queued again under a new task id; after
    BLKREVIEW_MAX_ATTEMPTS lost attempts it fails with a readable reason."""
    settings.BLKREVIEW_MAX_ATTEMPTS = 2
    job = _job(make_upload, seed000_before)
    with on_commit():
        jobs.job_start(job_id=job.pk, task_id=job.celery_task_id)
        assert sweep().requeued_jobs == []  # alive
        _age(job, settings.BLKREVIEW_STALE_AFTER_SECONDS + 5)
        assert sweep().requeued_jobs == [job.pk]
    again = AnalysisJob.objects.get(pk=job.pk)
    assert again.state == "queued" and again.celery_task_id != job.celery_task_id
    assert again.sent is not None  # published on commit
    with on_commit():
        assert jobs.job_start(job_id=job.pk, task_id=again.celery_task_id).attempts == 2
        _age(job, settings.BLKREVIEW_STALE_AFTER_SECONDS + 5)
        assert sweep().failed_jobs == [job.pk]
    failed = AnalysisJob.objects.get(pk=job.pk)
    assert failed.state == "failed" and "lost 2 times" in failed.error


def test_rerunning_a_bundle_deletes_the_replaced_eventtable(make_upload, seed000_before,
                                                             on_commit):
    """One result row per bundle; the previous run's .npz is deleted once the new result is
    committed (not before: a reader of the old result still finds its file)."""
    job = _job(make_upload, seed000_before)
    with on_commit():
        assert run_analysis(job.pk) == "succeeded"
    old = BundleResult.objects.get(bundle_id=job.bundle_id).events_name
    with on_commit():
        rerun = jobs.job_rerun(job=job)
    with on_commit():
        assert run_analysis(rerun.pk) == "succeeded"
    new = BundleResult.objects.get(bundle_id=job.bundle_id).events_name
    assert new != old and default_storage.exists(new) and not default_storage.exists(old)
    assert BundleResult.objects.filter(bundle_id=job.bundle_id).count() == 1


def test_cleanup_storage_lists_orphans_and_deletes_them_only_when_asked(make_upload,
                                                                         seed000_before):
    job = _job(make_upload, seed000_before)
    assert run_analysis(job.pk) == "succeeded"
    kept = BundleResult.objects.get(bundle_id=job.bundle_id).events_name
    orphan = default_storage.save("tables/bundle-999999-orphan.npz", io.BytesIO(b"x" * 10))
    out = io.StringIO()
    call_command("cleanup_storage", "--min-age", "0", stdout=out)
    assert f"orphan {orphan} (10 bytes)" in out.getvalue() and kept not in out.getvalue()
    assert default_storage.exists(orphan)
    out = io.StringIO()
    call_command("cleanup_storage", "--min-age", "60", stdout=out)
    assert orphan not in out.getvalue()  # too young: may be being written
    call_command("cleanup_storage", "--min-age", "0", "--delete", stdout=io.StringIO())
    assert not default_storage.exists(orphan) and default_storage.exists(kept)


def test_rerun_jobs_failed_selects_lost_jobs_and_failed_steps_not_parse_failures(
        finished_comparison, on_commit):
    """--failed: bundles whose latest job failed for another reason than a parse error, and
    failed comparison steps; --comparison ID reruns one comparison step."""
    bundle = finished_comparison.baseline_bundles.get()
    lost = AnalysisJob.objects.create(bundle=bundle, state="failed", error="worker lost")
    step = ComparisonResult.objects.get(comparison=finished_comparison)
    ComparisonResult.objects.filter(pk=step.pk).update(state="failed", error="x")
    out = io.StringIO()
    with on_commit():
        call_command("rerun_jobs", "--failed", stdout=out)
    text = out.getvalue()
    assert f"bundle {bundle.pk}: queued job" in text
    assert f"comparison {finished_comparison.pk}: queued its comparison step" in text
    assert AnalysisJob.objects.filter(bundle=bundle, state="queued").exclude(pk=lost.pk).count() == 1
    step.refresh_from_db()
    assert step.state == "queued" and step.error == "" and step.sent is not None
    out = io.StringIO()
    with on_commit():
        call_command("rerun_jobs", "--comparison", str(finished_comparison.pk), stdout=out)
    assert "queued its comparison step" in out.getvalue()


def test_sweep_jobs_command_reports_what_it_did(make_upload, seed000_before, on_commit):
    out = io.StringIO()
    call_command("sweep_jobs", stdout=out)
    assert "nothing to do" in out.getvalue()
