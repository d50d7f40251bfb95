"""AnalysisJob lifecycle: create + queue on commit, start, progress, fail, store results.

The Celery task (reviewapp/tasks.py) calls these with a job id. Results are written in one
transaction together with the job's final state, so a failed job never leaves half-written
results and a reader never sees "succeeded" without results.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reviewapp import constants as c
from reviewapp.models import AnalysisJob, BundleResult, Comparison, TraceBundle

log = logging.getLogger(__name__)


def _send(job_id: int, task_id: str) -> None:
    """Publish the task; called after commit so the worker finds the row."""
    from workers.celery import app

    try:
        app.send_task(c.TASK_ANALYZE, args=[job_id], task_id=task_id,
                      queue=settings.BLKREVIEW_ANALYSIS_QUEUE)
    except Exception as exc:  # broker down: say so on the job instead of a 500 after commit
        log.exception("could not queue job %s", job_id)
        job_mark_failed(job_id=job_id, error=f"could not queue the analysis: {exc}")


def job_create_for_bundle(*, bundle: TraceBundle) -> AnalysisJob:
    """Create a queued job for ``bundle`` and publish it once the transaction commits."""
    job = AnalysisJob.objects.create(
        bundle=bundle, kind=c.JOB_KIND_ANALYZE, celery_task_id=uuid.uuid4().hex,
        message="waiting for a worker",
    )
    transaction.on_commit(lambda: _send(job.pk, job.celery_task_id))
    return job


def job_ensure_for_bundle(*, bundle: TraceBundle) -> AnalysisJob | None:
    """Queue a job unless the bundle has results or a job still in flight."""
    if BundleResult.objects.filter(bundle=bundle).exists():
        return None
    if bundle.jobs.exclude(state__in=c.JOB_FINAL_STATES).exists():
        return None
    if bundle.jobs.filter(state=c.JOB_STATE_FAILED).exists() and bundle.parse_status == c.PARSE_FAILED:
        return None  # a parse failure is final for these bytes; rerun explicitly
    return job_create_for_bundle(bundle=bundle)


def job_rerun(*, job: AnalysisJob) -> AnalysisJob:
    """A fresh job for the same bundle (after a fix to the parser, say)."""
    return job_create_for_bundle(bundle=job.bundle)


def job_start(*, job_id: int, task_id: str = "") -> AnalysisJob | None:
    """Mark the job running. Returns None when there is nothing to do (gone, or final)."""
    with transaction.atomic():
        job = AnalysisJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            log.warning("job %s does not exist; ignoring the task", job_id)
            return None
        if job.state in c.JOB_FINAL_STATES:
            log.info("job %s is already %s; ignoring the task", job_id, job.state)
            return None
        job.state = c.JOB_STATE_RUNNING
        job.started = timezone.now()
        job.progress = 5
        job.message = "reading files"
        if task_id:
            job.celery_task_id = task_id
        job.save(update_fields=["state", "started", "progress", "message", "celery_task_id"])
    comparisons_refresh_for_bundle(bundle_id=job.bundle_id)
    return job


def job_progress(*, job_id: int, progress: int, message: str = "") -> None:
    """Progress 0-100 and a short word on what is happening (polled by the page)."""
    progress = max(0, min(100, int(progress)))
    AnalysisJob.objects.filter(pk=job_id, state=c.JOB_STATE_RUNNING).update(
        progress=progress, message=message[:200]
    )


def job_mark_failed(*, job_id: int, error: str, detail: dict[str, Any] | None = None,
                    parse_failed: bool = False) -> None:
    """Failed, with a readable error (file, line, reason for a parse error); no results."""
    with transaction.atomic():
        job = AnalysisJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.state == c.JOB_STATE_SUCCEEDED:
            return  # gone, or its results are stored: a later error does not undo them
        job.state = c.JOB_STATE_FAILED
        job.error = error
        job.error_detail = detail
        job.message = "failed"
        job.finished = timezone.now()
        job.save(update_fields=["state", "error", "error_detail", "message", "finished"])
        if parse_failed:
            TraceBundle.objects.filter(pk=job.bundle_id).update(
                parse_status=c.PARSE_FAILED, parse_error=detail or {"message": error}
            )
    comparisons_refresh_for_bundle(bundle_id=job.bundle_id)


def job_store_results(*, job_id: int, results: dict[str, Any], ingest: dict[str, Any],
                      events_name: str = "", kernel: str = "") -> BundleResult | None:
    """Store a bundle's results and mark the job succeeded, atomically."""
    with transaction.atomic():
        job = AnalysisJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.state in c.JOB_FINAL_STATES:
            return None
        result, _ = BundleResult.objects.update_or_create(
            bundle_id=job.bundle_id,
            defaults={"job": job, "data": results, "ingest": ingest, "events_name": events_name},
        )
        bundle = TraceBundle.objects.select_for_update().get(pk=job.bundle_id)
        bundle.parse_status = c.PARSE_PARSED
        bundle.parse_error = None
        fields = ["parse_status", "parse_error"]
        if kernel and not bundle.kernel:
            bundle.kernel = kernel[:100]
            fields.append("kernel")
        bundle.save(update_fields=fields)
        job.state = c.JOB_STATE_SUCCEEDED
        job.progress = 100
        job.message = "done"
        job.error = ""
        job.finished = timezone.now()
        job.save(update_fields=["state", "progress", "message", "error", "finished"])
    try:
        comparisons_refresh_for_bundle(bundle_id=job.bundle_id)
    except Exception:
        # The results are committed; a failed status refresh (which also queues the
        # comparison step) is repaired by the next refresh (any page or API read).
        log.exception("refreshing comparisons of bundle %s failed", job.bundle_id)
    return result


def comparison_status_of(comparison: Comparison) -> str:
    """Ready when every bundle has results, failed when any bundle's latest job failed."""
    from reviewapp.selectors import comparison_jobs, status_of_rows

    return status_of_rows(comparison_jobs(comparison))


def comparison_refresh_status(*, comparison: Comparison) -> str:
    """Store the status; a ready comparison gets its comparison step queued if out of date."""
    status = comparison_status_of(comparison)
    if status != comparison.status:
        Comparison.objects.filter(pk=comparison.pk).update(status=status)
        comparison.status = status
    if status == c.COMPARISON_READY:
        from reviewapp.services.results import comparison_result_ensure

        comparison_result_ensure(comparison=comparison)
    return status


def comparisons_refresh_for_bundle(*, bundle_id: int) -> None:
    qs = Comparison.objects.filter(baseline_bundles__id=bundle_id) | Comparison.objects.filter(
        patched_bundles__id=bundle_id
    )
    for comparison in qs.distinct():
        comparison_refresh_status(comparison=comparison)
