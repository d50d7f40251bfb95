"""Celery tasks, thin: job id -> files from storage -> engine -> results through a service.

``analyze_bundle(job_id)`` is the only task so far. The work itself is :func:`run_analysis`, a
plain function (``manage.py load_demo`` calls it in-process; the worker calls it through the
task). A ParseError (or any typed engine error) marks the job failed with file, line and
reason; nothing is stored before the engine has finished, and the results and the final state
are written in one transaction, so a failed job leaves no half-written results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded

from workers.celery import app

log = logging.getLogger(__name__)


def _jsonable(value: Any) -> Any:
    """Ingest reports (dataclasses, paths, tuples) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if hasattr(value, "to_json") and callable(value.to_json):
        value = value.to_json()
    return json.loads(json.dumps(value, default=str))


def _ingest_report(ing: Any) -> dict[str, Any]:
    return {
        "files": [_jsonable(f) for f in getattr(ing, "files", [])],
        "warnings": [str(w) for w in getattr(ing, "warnings", [])],
        "manifest": _jsonable(getattr(ing, "manifest", None)),
        "summaries_keys": sorted(getattr(ing, "summaries", {}) or {}),
    }


def run_analysis(job_id: int, *, task_id: str = "") -> str:
    """Parse and analyze the bundle of job ``job_id``; returns the job's final state.

    Steps (progress in brackets): read files [5-20], ``workers.traces.ingest`` [20-60],
    ``workers.analyzers.analyze`` [60-85], save the EventTable .npz and the results [85-100].
    """
    from reviewapp import storage
    from reviewapp.models import TraceFile
    from reviewapp.services import jobs
    from workers.errors import BlkreviewError, ParseError

    job = jobs.job_start(job_id=job_id, task_id=task_id)
    if job is None:
        return "skipped"
    files = list(TraceFile.objects.filter(bundle_id=job.bundle_id).order_by("name", "pk"))
    if not files:
        jobs.job_mark_failed(job_id=job_id, error="the bundle has no files")
        return "failed"
    events_name = ""
    try:
        with contextlib.ExitStack() as stack:
            paths = [stack.enter_context(storage.local_copy(f.storage_name)) for f in files]
            jobs.job_progress(job_id=job_id, progress=20, message="parsing traces")
            from workers.traces import ingest

            ing = ingest(paths, names=[f.name for f in files])
        jobs.job_progress(job_id=job_id, progress=60, message="analyzing")
        from workers.analyzers import analyze

        results = analyze(ing.table, summaries=getattr(ing, "summaries", None))
        results = json.loads(json.dumps(results))  # plain JSON (numpy scalars fail loudly here)
        jobs.job_progress(job_id=job_id, progress=85, message="storing results")
        buf = io.BytesIO()
        ing.table.save(buf)
        buf.seek(0)
        events_name = storage.save_bytes(storage.new_events_name(job.bundle_id), buf)
        manifest = getattr(ing, "manifest", None)
        kernel = str(getattr(manifest, "kernel", "") or "") if manifest is not None else ""
        stored = jobs.job_store_results(job_id=job_id, results=results,
                                        ingest=_ingest_report(ing), events_name=events_name,
                                        kernel=kernel)
        if stored is None:
            storage.delete_quietly(events_name)
            return "skipped"
        return "succeeded"
    except ParseError as exc:
        storage.delete_quietly(events_name)
        jobs.job_mark_failed(job_id=job_id, error=exc.message, detail=exc.to_json(),
                             parse_failed=True)
        return "failed"
    except BlkreviewError as exc:
        storage.delete_quietly(events_name)
        jobs.job_mark_failed(job_id=job_id, error=str(exc), detail={"message": str(exc)},
                             parse_failed=True)
        return "failed"
    except SoftTimeLimitExceeded:
        storage.delete_quietly(events_name)
        jobs.job_mark_failed(job_id=job_id, error="the analysis took longer than the time limit")
        return "failed"
    except Exception:
        storage.delete_quietly(events_name)
        raise


class AnalysisTask(Task):
    """Reports an unexpected exception on the job itself (readable error, state failed)."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any,
                   einfo: Any) -> None:
        from reviewapp.services import jobs

        job_id = args[0] if args else kwargs.get("job_id")
        if job_id is not None:
            jobs.job_mark_failed(
                job_id=int(job_id),
                error=f"internal error in the worker: {type(exc).__name__}: {exc}",
            )


@app.task(bind=True, base=AnalysisTask, name="workers.tasks.analyze_bundle", acks_late=True)
def analyze_bundle(self: Task, job_id: int, **kwargs: Any) -> str:
    """Parse and analyze one bundle (Celery entry point; see :func:`run_analysis`)."""
    if kwargs:
        log.warning("analyze_bundle: ignoring unexpected arguments %s", sorted(kwargs))
    return run_analysis(int(job_id), task_id=self.request.id or "")
