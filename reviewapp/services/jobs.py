"""AnalysisJob lifecycle: create + queue on commit, start, progress, fail, store results.

The Celery task (reviewapp/tasks.py) calls these with a job id. Results are written in one
transaction together with the job's final state, so a failed job never leaves half-written
results and a reader never sees "succeeded" without results.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reviewapp import constants as c
from reviewapp.models import AnalysisJob, BundleResult, Comparison, TraceBundle
from reviewapp.services.delivery import (
    WAITING_FOR_QUEUE,
    WAITING_FOR_WORKER,
    delete_file_on_commit,
    is_stale,
)

log = logging.getLogger(__name__)


def _send(job_id: int, task_id: str) -> bool:
    """Publish the task; called after commit so the worker finds the row.

    When the broker is unreachable the job stays queued ("waiting for the queue") and the
    sweeper (:mod:`reviewapp.services.sweeper`) sends it later; the error goes to the log only.
    """
    from workers.celery import app

    try:
        app.send_task(c.TASK_ANALYZE, args=[job_id], task_id=task_id, ignore_result=True,
                      queue=settings.BLKREVIEW_ANALYSIS_QUEUE)
    except Exception:
        log.exception("could not queue job %s; the sweeper will send it", job_id)
        AnalysisJob.objects.filter(pk=job_id, state=c.JOB_STATE_QUEUED,
                                   celery_task_id=task_id).update(message=WAITING_FOR_QUEUE)
        return False
    AnalysisJob.objects.filter(pk=job_id, celery_task_id=task_id).update(sent=timezone.now())
    return True


def job_send_on_commit(job: AnalysisJob) -> None:
    job_id, task_id = job.pk, job.celery_task_id
    transaction.on_commit(lambda: _send(job_id, task_id))


def job_create_for_bundle(*, bundle: TraceBundle) -> AnalysisJob:
    """Create a queued job for ``bundle`` and publish it once the transaction commits."""
    job = AnalysisJob.objects.create(
        bundle=bundle, kind=c.JOB_KIND_ANALYZE, celery_task_id=uuid.uuid4().hex,
        message=WAITING_FOR_WORKER,
    )
    job_send_on_commit(job)
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
    """Claim the job for one attempt: running, ``job.attempts`` is this attempt's token.

    Returns None when there is nothing to do: the job is gone or final, the task was
    superseded (the job was queued again under another task id), or another attempt is running
    it (its heartbeat is fresh). A running job without a heartbeat for
    BLKREVIEW_STALE_AFTER_SECONDS is taken over (its worker was lost). Every later write of the
    attempt (progress, file, results, failure) checks the token, so a superseded attempt that
    is still alive changes nothing.
    """
    with transaction.atomic():
        job = AnalysisJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            log.warning("job %s does not exist; ignoring the task", job_id)
            return None
        if job.state in c.JOB_FINAL_STATES:
            log.info("job %s is already %s; ignoring the task", job_id, job.state)
            return None
        if task_id and job.celery_task_id and task_id != job.celery_task_id:
            log.info("job %s was queued again as task %s; ignoring task %s", job_id,
                     job.celery_task_id, task_id)
            return None
        if job.state == c.JOB_STATE_RUNNING:
            if not is_stale(job.heartbeat, job.started):
                log.info("job %s is running (attempt %s); ignoring a second delivery", job_id,
                         job.attempts)
                return None
            log.warning("job %s: attempt %s lost its worker; taking over", job_id, job.attempts)
            delete_file_on_commit(job.pending_events_name)
        now = timezone.now()
        job.state = c.JOB_STATE_RUNNING
        job.attempts += 1
        job.started = now
        job.heartbeat = now
        job.progress = 5
        job.message = "reading files"
        job.pending_events_name = ""
        if task_id:
            job.celery_task_id = task_id
        job.save(update_fields=["state", "attempts", "started", "heartbeat", "progress", "message",
                                "pending_events_name", "celery_task_id"])
    comparisons_refresh_for_bundle(bundle_id=job.bundle_id)
    return job


def _current(job_id: int, attempt: int | None) -> Any:
    qs = AnalysisJob.objects.filter(pk=job_id, state=c.JOB_STATE_RUNNING)
    return qs if attempt is None else qs.filter(attempts=attempt)


def job_progress(*, job_id: int, progress: int, message: str = "",
                 attempt: int | None = None) -> bool:
    """Progress 0-100 and a short word on what is happening (polled by the page); also a
    heartbeat. False when ``attempt`` is no longer the job's current attempt."""
    progress = max(0, min(100, int(progress)))
    return bool(_current(job_id, attempt).update(
        progress=progress, message=message[:200], heartbeat=timezone.now()))


def job_heartbeat(*, job_id: int, attempt: int) -> bool:
    """The running attempt is alive; False when it is no longer the current one."""
    return bool(_current(job_id, attempt).update(heartbeat=timezone.now()))


def job_lease(*, job_id: int, attempt: int, seconds: float) -> bool:
    """A fanned-out attempt (parallel ingest, reviewapp/shards.py) stays alive for ``seconds``
    although no task of it may be running: its shard tasks can wait in the queue. The heartbeat
    is set that far ahead, so the sweeper takes the attempt as lost only when no shard task has
    started or finished for ``seconds`` plus BLKREVIEW_STALE_AFTER_SECONDS (a chord that will
    never finish); every shard task renews it. False when ``attempt`` is no longer current."""
    until = timezone.now() + timedelta(seconds=float(seconds))
    return bool(_current(job_id, attempt).update(heartbeat=until))


def job_shard_progress(*, job_id: int, attempt: int, files: int, total: int, events: int,
                       seconds: float, unit: str = "files") -> bool:
    """Progress of a sharded parse: ``parsed 3/8 files, 41,234,567 events`` (progress 20-55;
    ``unit`` "file parts" when large files are parsed as byte ranges), never moving backwards
    (shard tasks report out of order), and a renewed lease."""
    progress = 20 + (35 * files) // max(total, 1)
    message = f"parsed {files}/{total} {unit}, {events:,} events"
    until = timezone.now() + timedelta(seconds=float(seconds))
    return bool(_current(job_id, attempt).filter(progress__lte=progress).update(
        progress=progress, message=message[:200], heartbeat=until))


def job_file_pending(*, job_id: int, attempt: int, name: str) -> bool:
    """Record the EventTable name this attempt is about to write (before writing it), so a
    lost attempt's file is deleted by whoever takes the job over."""
    return bool(_current(job_id, attempt).update(pending_events_name=name[:300],
                                                 heartbeat=timezone.now()))


def job_mark_failed(*, job_id: int, error: str, detail: dict[str, Any] | None = None,
                    parse_failed: bool = False, attempt: int | None = None) -> None:
    """Failed, with a readable error (file, line, reason for a parse error); no results.

    With ``attempt``, only while that attempt is the job's current one."""
    with transaction.atomic():
        job = AnalysisJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.state == c.JOB_STATE_SUCCEEDED:
            return  # gone, or its results are stored: a later error does not undo them
        if attempt is not None and (job.attempts != attempt or job.state != c.JOB_STATE_RUNNING):
            log.info("job %s: attempt %s is superseded; not marking it failed", job_id, attempt)
            return
        job.state = c.JOB_STATE_FAILED
        job.error = error
        job.error_detail = detail
        job.message = "failed"
        job.finished = timezone.now()
        delete_file_on_commit(job.pending_events_name)
        job.pending_events_name = ""
        job.save(update_fields=["state", "error", "error_detail", "message", "finished",
                                "pending_events_name"])
        if parse_failed:
            TraceBundle.objects.filter(pk=job.bundle_id).update(
                parse_status=c.PARSE_FAILED, parse_error=detail or {"message": error}
            )
    comparisons_refresh_for_bundle(bundle_id=job.bundle_id)


def job_store_results(*, job_id: int, results: dict[str, Any], ingest: dict[str, Any],
                      events_name: str = "", kernel: str = "",
                      attempt: int | None = None) -> BundleResult | None:
    """Store a bundle's results and mark the job succeeded, atomically.

    Idempotent per job: None (nothing written) when the job is final already or ``attempt``
    is not its current attempt. One result row per bundle: a rerun replaces it, and the
    replaced EventTable file is deleted once the new result is committed.
    """
    with transaction.atomic():
        job = AnalysisJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.state in c.JOB_FINAL_STATES:
            return None
        if attempt is not None and (job.attempts != attempt or job.state != c.JOB_STATE_RUNNING):
            log.info("job %s: attempt %s is superseded; not storing its results", job_id, attempt)
            return None
        previous = BundleResult.objects.select_for_update().filter(bundle_id=job.bundle_id).first()
        if previous is not None and previous.events_name and previous.events_name != events_name:
            delete_file_on_commit(previous.events_name)
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
        job.pending_events_name = ""
        job.save(update_fields=["state", "progress", "message", "error", "finished",
                                "pending_events_name"])
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
