"""The sweeper: every job and comparison step reaches a worker and finishes exactly once.

:func:`sweep` is idempotent and safe to run from several processes at once (rows are locked
with ``SKIP LOCKED`` and re-checked under the lock). It runs in every Celery worker process (a
thread started when the worker is ready, every BLKREVIEW_SWEEP_SECONDS; reviewapp/tasks.py)
and as ``manage.py sweep_jobs``. Each pass:

1. re-queues running jobs and comparison steps without a heartbeat for
   BLKREVIEW_STALE_AFTER_SECONDS (their worker was lost, e.g. killed), under a new task id so a
   late redelivery of the old message does nothing; after BLKREVIEW_MAX_ATTEMPTS claims the job
   fails with a readable reason instead (a trace that kills its worker every time);
2. sends queued jobs and steps that never reached the broker (it was unreachable) once they are
   BLKREVIEW_RESEND_AFTER_SECONDS old, and re-sends queued ones whose message was sent longer
   than the broker's visibility timeout ago (a lost message); a duplicate message is harmless,
   the claim (:func:`reviewapp.services.jobs.job_start`) runs each job once.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from reviewapp import constants as c
from reviewapp.models import AnalysisJob, ComparisonResult
from reviewapp.services import jobs as job_svc
from reviewapp.services import results as result_svc
from reviewapp.services.delivery import delete_file_on_commit, is_stale

log = logging.getLogger(__name__)

REQUEUED_MESSAGE = "its worker was lost; queued again"


@dataclasses.dataclass
class SweepReport:
    requeued_jobs: list[int] = dataclasses.field(default_factory=list)
    failed_jobs: list[int] = dataclasses.field(default_factory=list)
    sent_jobs: list[int] = dataclasses.field(default_factory=list)
    requeued_steps: list[int] = dataclasses.field(default_factory=list)
    failed_steps: list[int] = dataclasses.field(default_factory=list)
    sent_steps: list[int] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return any(dataclasses.astuple(self))


def _resend_sent_after() -> float:
    opts = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}) or {}
    return float(opts.get("visibility_timeout") or 3600)


def _stale_q(now: object) -> Q:
    cutoff = now - timedelta(seconds=settings.BLKREVIEW_STALE_AFTER_SECONDS)  # type: ignore[operator]
    return (Q(heartbeat__lt=cutoff)
            | Q(heartbeat__isnull=True, started__lt=cutoff)
            | Q(heartbeat__isnull=True, started__isnull=True))


def _unsent_q(now: object) -> Q:
    fresh = now - timedelta(seconds=settings.BLKREVIEW_RESEND_AFTER_SECONDS)  # type: ignore[operator]
    lost = now - timedelta(seconds=_resend_sent_after())  # type: ignore[operator]
    return Q(sent__isnull=True, created__lt=fresh) | Q(sent__lt=lost)


def lost_attempts_error(attempts: int) -> str:
    return (f"the worker running this was lost {attempts} times (killed or out of memory?); "
            "not retried again — rerun it with manage.py rerun_jobs")


def sweep_jobs(report: SweepReport) -> None:
    now = timezone.now()
    stale_ids = list(AnalysisJob.objects.filter(state=c.JOB_STATE_RUNNING)
                     .filter(_stale_q(now)).values_list("pk", flat=True)[:500])
    for job_id in stale_ids:
        with transaction.atomic():
            job = (AnalysisJob.objects.select_for_update(skip_locked=True)
                   .filter(pk=job_id, state=c.JOB_STATE_RUNNING).first())
            if job is None or not is_stale(job.heartbeat, job.started):
                continue
            delete_file_on_commit(job.pending_events_name)
            job.pending_events_name = ""
            if job.attempts >= settings.BLKREVIEW_MAX_ATTEMPTS:
                job.state = c.JOB_STATE_FAILED
                job.error = lost_attempts_error(job.attempts)
                job.message = "failed"
                job.finished = now
                report.failed_jobs.append(job.pk)
                log.error("job %s: worker lost %s times; failed", job.pk, job.attempts)
            else:
                job.state = c.JOB_STATE_QUEUED
                job.progress = 0
                job.message = REQUEUED_MESSAGE
                job.celery_task_id = uuid.uuid4().hex
                job.sent = None
                job_svc.job_send_on_commit(job)
                report.requeued_jobs.append(job.pk)
                log.warning("job %s: no heartbeat since %s (attempt %s); queued again",
                            job.pk, job.heartbeat, job.attempts)
            job.save()
        if job is not None and job.state == c.JOB_STATE_FAILED:
            job_svc.comparisons_refresh_for_bundle(bundle_id=job.bundle_id)
    unsent = list(AnalysisJob.objects.filter(state=c.JOB_STATE_QUEUED)
                  .filter(_unsent_q(now)).values_list("pk", "celery_task_id")[:500])
    for job_id, task_id in unsent:
        if not task_id:
            task_id = uuid.uuid4().hex
            AnalysisJob.objects.filter(pk=job_id).update(celery_task_id=task_id)
        if not job_svc._send(job_id, task_id):
            return  # the broker is unreachable: try again on the next pass
        report.sent_jobs.append(job_id)


def sweep_steps(report: SweepReport) -> None:
    now = timezone.now()
    stale_ids = list(ComparisonResult.objects.filter(state=c.JOB_STATE_RUNNING)
                     .filter(_stale_q(now)).values_list("pk", flat=True)[:500])
    for result_id in stale_ids:
        with transaction.atomic():
            result = (ComparisonResult.objects.select_for_update(skip_locked=True)
                      .filter(pk=result_id, state=c.JOB_STATE_RUNNING)
                      .only("pk", "state", "heartbeat", "started", "attempts",
                            "pending_charts_name").first())
            if result is None or not is_stale(result.heartbeat, result.started):
                continue
            # the lost attempt's chart object, if it began writing one, is never current
            delete_file_on_commit(result.pending_charts_name)
            if result.attempts >= settings.BLKREVIEW_MAX_ATTEMPTS:
                ComparisonResult.objects.filter(pk=result.pk).update(
                    state=c.JOB_STATE_FAILED, error=lost_attempts_error(result.attempts),
                    message="failed", finished=now, pending_charts_name="")
                report.failed_steps.append(result.pk)
                continue
            task_id = uuid.uuid4().hex
            ComparisonResult.objects.filter(pk=result.pk).update(
                state=c.JOB_STATE_QUEUED, progress=0, message=REQUEUED_MESSAGE,
                celery_task_id=task_id, sent=None, pending_charts_name="")
            transaction.on_commit(lambda rid=result.pk, tid=task_id: result_svc._send(rid, tid))
            report.requeued_steps.append(result.pk)
            log.warning("comparison result %s: no heartbeat (attempt %s); queued again",
                        result.pk, result.attempts)
    unsent = list(ComparisonResult.objects.filter(state=c.JOB_STATE_QUEUED)
                  .filter(_unsent_q(now)).values_list("pk", "celery_task_id")[:500])
    for result_id, task_id in unsent:
        if not task_id:
            task_id = uuid.uuid4().hex
            ComparisonResult.objects.filter(pk=result_id).update(celery_task_id=task_id)
        if not result_svc._send(result_id, task_id):
            return
        report.sent_steps.append(result_id)


def sweep() -> SweepReport:
    """One pass over jobs and comparison steps (see the module docstring)."""
    report = SweepReport()
    sweep_jobs(report)
    sweep_steps(report)
    if report:
        log.info("sweep: %s", report)
    return report
