"""The comparison-level step: queue it when every bundle has results, record its life.

``comparison_result_ensure`` is called whenever a comparison's status is refreshed; it queues
the comparison task (:data:`reviewapp.constants.TASK_COMPARE`, after commit) when the comparison is ready and its stored
result was computed from other inputs (another run added, thresholds or policy changed) or
does not exist. The task calls ``result_start`` / ``result_progress`` / ``result_store`` /
``result_mark_failed``; results, charts and the final state are written in one transaction.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reviewapp import chartstore, storage
from reviewapp import constants as c
from reviewapp.models import BundleResult, Comparison, ComparisonChart, ComparisonResult
from reviewapp.services import UploadRejected
from reviewapp.services.delivery import delete_file_on_commit

log = logging.getLogger(__name__)


def effective_thresholds(comparison: Comparison) -> dict[str, float]:
    """Settings defaults updated with the comparison's own overrides."""
    out = dict(settings.BLKREVIEW_CHECK_THRESHOLDS)
    out.update({str(k): float(v) for k, v in (comparison.thresholds or {}).items()})
    return out


def clean_thresholds(value: Any) -> dict[str, float]:
    """``{"throughput_drop_fail_pct": 5}`` or ``"throughput_drop_fail_pct=5,alpha=0.01"`` ->
    a dict of known names to numbers; UploadRejected on unknown names or non-numbers."""
    if value in (None, "", {}):
        return {}
    if isinstance(value, str):
        items: dict[str, Any] = {}
        for part in value.split(","):
            if not part.strip():
                continue
            key, sep, val = part.partition("=")
            if not sep:
                raise UploadRejected(f"thresholds: {part.strip()!r} is not name=value",
                                     field="thresholds")
            items[key.strip()] = val.strip()
        value = items
    if not isinstance(value, Mapping):
        raise UploadRejected("thresholds: expected an object of name: number",
                             field="thresholds")
    known = settings.BLKREVIEW_CHECK_THRESHOLDS
    out = {}
    for key, val in value.items():
        if key not in known:
            raise UploadRejected(f"thresholds: unknown name {key!r} (known: {', '.join(known)})",
                                 field="thresholds")
        try:
            out[str(key)] = float(val)
        except (TypeError, ValueError):
            raise UploadRejected(f"thresholds: {key} must be a number", field="thresholds") from None
    return out


def result_inputs(comparison: Comparison) -> dict[str, Any]:
    """What the comparison step is computed from; a change means it must run again."""
    return {
        "baseline": sorted(BundleResult.objects.filter(
            bundle__in=comparison.baseline_bundles.all()).values_list("pk", flat=True)),
        "patched": sorted(BundleResult.objects.filter(
            bundle__in=comparison.patched_bundles.all()).values_list("pk", flat=True)),
        "thresholds": effective_thresholds(comparison),
        "policy": comparison.policy,
    }


def _send(result_id: int, task_id: str) -> bool:
    """Publish the comparison step after commit; when the broker is unreachable it stays queued
    ("waiting for the queue") for the sweeper, and the error goes to the log only."""
    from reviewapp.services.delivery import WAITING_FOR_QUEUE
    from workers.celery import app

    try:
        app.send_task(c.TASK_COMPARE, args=[result_id], task_id=task_id, ignore_result=True,
                      queue=settings.BLKREVIEW_REPLAY_QUEUE)
    except Exception:
        log.exception("could not queue comparison result %s; the sweeper will send it",
                      result_id)
        ComparisonResult.objects.filter(pk=result_id, state=c.JOB_STATE_QUEUED,
                                        celery_task_id=task_id).update(message=WAITING_FOR_QUEUE)
        return False
    ComparisonResult.objects.filter(pk=result_id, celery_task_id=task_id).update(
        sent=timezone.now())
    return True


def result_send_on_commit(result: ComparisonResult) -> None:
    result_id, task_id = result.pk, result.celery_task_id
    transaction.on_commit(lambda: _send(result_id, task_id))


def result_requeue(*, result_id: int) -> ComparisonResult | None:
    """Run the comparison step again now (``rerun_jobs --comparison``), whatever its state."""
    with transaction.atomic():
        result = ComparisonResult.objects.select_for_update().filter(pk=result_id).first()
        if result is None:
            return None
        result.state = c.JOB_STATE_QUEUED
        result.progress = 0
        result.message = "waiting for a worker"
        result.error = ""
        result.celery_task_id = uuid.uuid4().hex
        result.sent = None
        result.started = result.finished = None
        result.save(update_fields=["state", "progress", "message", "error", "celery_task_id",
                                   "sent", "started", "finished"])
        result_send_on_commit(result)
    return result


def comparison_result_ensure(*, comparison: Comparison, force: bool = False
                             ) -> ComparisonResult | None:
    """Queue the comparison step unless an up-to-date one exists or is in flight.

    Only for a ready comparison (every bundle has results). Returns the queued row, or None.
    """
    if comparison.status != c.COMPARISON_READY:
        return None
    with transaction.atomic():
        # The comparison row is the lock: the worker storing a bundle's results and a client
        # polling the check may both get here at once; only one creates the result row.
        # FOR NO KEY UPDATE, so the worker inserting chart rows (which key-share-lock the
        # comparison) while it holds the result row is never blocked by us: no deadlock.
        Comparison.objects.select_for_update(no_key=True).filter(pk=comparison.pk).first()
        inputs = result_inputs(comparison)
        existing = ComparisonResult.objects.select_for_update().filter(
            comparison=comparison).first()
        if existing is not None and existing.inputs == inputs and not force:
            return None
        defaults = {"state": c.JOB_STATE_QUEUED, "progress": 0, "message": "waiting for a worker",
                    "error": "", "celery_task_id": uuid.uuid4().hex, "inputs": inputs,
                    "started": None, "finished": None, "sent": None}
        if existing is None:
            result = ComparisonResult.objects.create(comparison=comparison, **defaults)
        else:
            for k, v in defaults.items():
                setattr(existing, k, v)
            existing.save()
            result = existing
        result_send_on_commit(result)
    return result


def result_start(*, result_id: int, task_id: str = "") -> ComparisonResult | None:
    """Claim the step for one attempt (``result.attempts`` is its token), as
    :func:`reviewapp.services.jobs.job_start` does for a job: None when the row is gone or
    final, the task superseded, or another attempt is alive; a stale attempt is taken over."""
    from reviewapp.services.delivery import is_stale

    with transaction.atomic():
        result = ComparisonResult.objects.select_for_update().filter(pk=result_id).first()
        if result is None or result.state in c.JOB_FINAL_STATES:
            return None
        if task_id and result.celery_task_id and task_id != result.celery_task_id:
            return None  # superseded by a newer queueing of the same comparison
        if result.state == c.JOB_STATE_RUNNING:
            if not is_stale(result.heartbeat, result.started):
                log.info("comparison result %s is running; ignoring a second delivery", result_id)
                return None
            log.warning("comparison result %s: attempt %s lost its worker; taking over",
                        result_id, result.attempts)
        # an earlier attempt's chart object (lost, or superseded mid-write) is never current
        delete_file_on_commit(result.pending_charts_name)
        now = timezone.now()
        result.state = c.JOB_STATE_RUNNING
        result.attempts += 1
        result.started = now
        result.heartbeat = now
        result.progress = 5
        result.message = "loading results"
        result.pending_charts_name = ""
        result.save(update_fields=["state", "attempts", "started", "heartbeat", "progress",
                                   "message", "pending_charts_name"])
    return result


def _current(result_id: int, attempt: int | None) -> Any:
    qs = ComparisonResult.objects.filter(pk=result_id, state=c.JOB_STATE_RUNNING)
    return qs if attempt is None else qs.filter(attempts=attempt)


def result_progress(*, result_id: int, progress: int, message: str = "",
                    attempt: int | None = None) -> bool:
    return bool(_current(result_id, attempt).update(
        progress=max(0, min(100, int(progress))), message=message[:200],
        heartbeat=timezone.now()))


def result_heartbeat(*, result_id: int, attempt: int) -> bool:
    return bool(_current(result_id, attempt).update(heartbeat=timezone.now()))


def result_mark_failed(*, result_id: int, error: str, attempt: int | None = None) -> None:
    """Failed with ``error``; the chart object the attempt was writing (if any) is deleted.
    The charts of an earlier successful run stay until a new run replaces them."""
    with transaction.atomic():
        qs = ComparisonResult.objects.select_for_update().filter(pk=result_id).exclude(
            state=c.JOB_STATE_SUCCEEDED)
        if attempt is not None:
            qs = qs.filter(attempts=attempt, state=c.JOB_STATE_RUNNING)
        for pending in qs.exclude(pending_charts_name="").values_list("pending_charts_name",
                                                                       flat=True):
            delete_file_on_commit(pending)
        qs.update(state=c.JOB_STATE_FAILED, error=error, message="failed",
                  finished=timezone.now(), pending_charts_name="")


def result_file_pending(*, result_id: int, attempt: int, name: str) -> bool:
    """Record the chart object this attempt is about to write (before writing it), so a lost
    attempt's object is deleted by whoever takes the step over (as
    :func:`reviewapp.services.jobs.job_file_pending` does for an EventTable)."""
    return bool(_current(result_id, attempt).update(pending_charts_name=name[:300],
                                                    heartbeat=timezone.now()))


def charts_replace(*, comparison_id: int, charts: Mapping[tuple[str, str, str], str]) -> str:
    """Store ``charts`` (``{(section, dev, stage): JSON text}``) as the comparison's chart
    payloads, replacing the ones it had; returns the new object's storage name.

    The object is written first (outside any transaction: an upload may take seconds), the
    rows are swapped in one transaction, and the replaced objects are deleted once it commits;
    if the swap fails the new object is deleted. For a comparison step use
    :func:`result_store`, which also checks that its attempt is still the current one.
    """
    name, index = chartstore.write_blob(chartstore.new_name(comparison_id), charts)
    done = False
    try:
        with transaction.atomic():
            _swap_charts(comparison_id, name, index)
        done = True
    finally:
        if not done:
            storage.delete_quietly(name)
    return name


def _swap_charts(comparison_id: int, name: str,
                 index: Mapping[tuple[str, str, str], tuple[int, int]]) -> None:
    """Inside a transaction: the comparison's chart rows now point into ``name``; the objects
    the old rows pointed into are deleted after commit."""
    old = ComparisonChart.objects.filter(comparison_id=comparison_id)
    for previous in set(old.exclude(storage_name=name).values_list("storage_name", flat=True)):
        delete_file_on_commit(previous)
    old.delete()
    ComparisonChart.objects.bulk_create([
        ComparisonChart(comparison_id=comparison_id, section=sec, dev=dev, stage=st,
                        storage_name=name, offset=offset, nbytes=nbytes)
        for (sec, dev, st), (offset, nbytes) in index.items()
    ], batch_size=500)


def result_store(*, result_id: int, compare: dict[str, Any] | None, verdict: dict[str, Any] | None,
                 model: dict[str, Any] | None, report: str,
                 charts: Mapping[tuple[str, str, str], str],
                 attempt: int | None = None) -> ComparisonResult | None:
    """Results, chart payloads and the final state, atomically (charts replaced wholesale).

    The chart payloads go to storage first, as one object (reviewapp/chartstore.py) whose name
    the attempt records before writing it; the rows pointing into it, the results and the final
    state are then written in one transaction, and the object of the charts they replace is
    deleted once it commits. Idempotent: None (and the new object deleted) when the step is not
    running or ``attempt`` is not its current attempt."""
    comparison_id = ComparisonResult.objects.filter(pk=result_id).values_list(
        "comparison_id", flat=True).first()
    if comparison_id is None:
        return None
    name = chartstore.new_name(comparison_id)
    if attempt is not None and not result_file_pending(result_id=result_id, attempt=attempt,
                                                       name=name):
        return None  # superseded before writing anything
    stored, index = chartstore.write_blob(name, charts)
    result = None
    try:
        with transaction.atomic():
            result = ComparisonResult.objects.select_for_update().filter(pk=result_id).first()
            if result is None or result.state != c.JOB_STATE_RUNNING:
                return None
            if attempt is not None and result.attempts != attempt:
                return None
            _swap_charts(result.comparison_id, stored, index)
            result.compare = compare
            result.verdict = verdict
            result.model = model
            result.report = report
            result.state = c.JOB_STATE_SUCCEEDED
            result.progress = 100
            result.message = "done"
            result.error = ""
            result.finished = timezone.now()
            result.pending_charts_name = ""
            result.save()
        stored = ""  # committed: the rows refer to it now
    finally:
        if stored:
            storage.delete_quietly(stored)
    return result


def comparisons_delete(*, queryset: Any) -> int:
    """Delete comparisons (their results and chart rows go by cascade) and, once that commits,
    their chart objects in storage (the admin's delete). Returns how many comparisons were deleted."""
    with transaction.atomic():
        ids = list(queryset.values_list("pk", flat=True))
        names = set(ComparisonChart.objects.filter(comparison_id__in=ids).exclude(
            storage_name="").values_list("storage_name", flat=True).distinct())
        names |= set(ComparisonResult.objects.filter(comparison_id__in=ids).exclude(
            pending_charts_name="").values_list("pending_charts_name", flat=True))
        _, per_model = Comparison.objects.filter(pk__in=ids).delete()
        for name in names:
            delete_file_on_commit(name)
    return int(per_model.get(Comparison._meta.label, 0))


def comparison_thresholds_set(*, comparison: Comparison, thresholds: Any) -> Comparison:
    """New per-comparison thresholds; queues the comparison step again when ready."""
    comparison.thresholds = clean_thresholds(thresholds)
    comparison.save(update_fields=["thresholds"])
    comparison_result_ensure(comparison=comparison)
    return comparison
