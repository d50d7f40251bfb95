"""Celery tasks, thin: job id -> files from storage -> engine -> results through a service.

The tasks belong to the web side (they use the ORM and the services); ``workers/`` is the pure
engine plus the Celery app (``workers.celery``), which finds this module by autodiscovery.
Services send the tasks by name (:data:`reviewapp.constants.TASK_ANALYZE`,
:data:`reviewapp.constants.TASK_COMPARE`), so nothing imports this module to enqueue.

``analyze_bundle(job_id)`` parses and analyzes one bundle (a huge one as a chord of
``parse_shard`` tasks and the ``merge_shards`` callback, reviewapp/shards.py); the work itself is
:func:`run_analysis`, a plain function (``manage.py load_demo`` calls it in-process; the worker
calls it through the task). ``compare_comparison(result_id)`` is the comparison-level step
(:func:`run_compare`): ``workers.compare.compare`` over every baseline vs patched run with the
check verdict, the seek histogram of every stage, the model panel (:mod:`workers.whatif`), the
plain-text report and the page's precomputed chart data. A ParseError (or any typed engine error) marks the job failed with file, line and
reason; nothing is stored before the engine has finished, and the results and the final state
are written in one transaction, so a failed job leaves no half-written results.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import (
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)
from django.conf import settings

from reviewapp import constants as c
from workers import whatif
from workers.celery import app
from workers.errors import BlkreviewError

log = logging.getLogger(__name__)


def _ingest_report(ing: Any) -> dict[str, Any]:
    return {
        "files": [whatif.jsonable(f) for f in getattr(ing, "files", [])],
        "warnings": [str(w) for w in getattr(ing, "warnings", [])],
        "manifest": whatif.jsonable(getattr(ing, "manifest", None)),
        "summaries_keys": sorted(getattr(ing, "summaries", {}) or {}),
    }


class Heartbeat:
    """A thread that beats for one running attempt until stopped (its own DB connection).

    A worker killed with SIGKILL stops beating; the sweeper re-queues the job once its
    heartbeat is BLKREVIEW_STALE_AFTER_SECONDS old. The beat comes from a thread, not from the
    engine's progress, so a long parse never looks like a lost worker.
    """

    def __init__(self, beat: Callable[[], bool]) -> None:
        self._beat = beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="blkreview-heartbeat", daemon=True)

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(float(settings.BLKREVIEW_HEARTBEAT_SECONDS)):
                try:
                    if not self._beat():
                        return  # superseded or final: nothing to beat for
                except Exception:
                    log.warning("heartbeat failed", exc_info=True)
                    connection.close()
        finally:
            connection.close()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _pause() -> None:
    """Test only: BLKREVIEW_TEST_STAGE_DELAY seconds between the stages of a job, so a test can
    kill the worker at a known point (0 in every real deployment)."""
    delay = float(getattr(settings, "BLKREVIEW_TEST_STAGE_DELAY", 0) or 0)
    if delay > 0:
        time.sleep(delay)


INTERNAL_ERROR = "an internal error stopped this step; the details are in the worker's log"


def run_analysis(job_id: int, *, task_id: str = "") -> str:
    """Parse and analyze the bundle of job ``job_id``; returns the job's final state.

    Steps (progress in brackets): read files [5-20], ``workers.traces.ingest`` [20-60],
    ``workers.analyzers.analyze`` [60-85], save the EventTable .npz [85-90] and the results
    [90-100]. The job is claimed first (:func:`reviewapp.services.jobs.job_start`); every write
    names this attempt, so a redelivered or superseded task writes nothing, and the .npz name is
    recorded on the job before it is written so that a lost attempt's file is deleted.

    A huge bundle (:func:`reviewapp.shards.wanted`) is only fanned out here as a Celery chord
    and ``"sharded"`` is returned with the job still running under a lease; the shard tasks
    report ``parsed n/N files, E events`` [20-55] and the chord's callback
    (:func:`run_merge`) merges [55-60] and goes on as above.
    """
    from reviewapp import shards
    from reviewapp.services import jobs

    job = jobs.job_start(job_id=job_id, task_id=task_id)
    if job is None:
        return "skipped"
    attempt = job.attempts
    with Heartbeat(lambda: jobs.job_heartbeat(job_id=job_id, attempt=attempt)):
        state = _start(job, attempt)
    if state == "sharded":
        # the chord runs on: hold the attempt by a lease its shard tasks renew (set after the
        # heartbeat thread stopped, which would set the heartbeat back to now)
        jobs.job_lease(job_id=job_id, attempt=attempt, seconds=shards.lease_seconds())
    return state


def _files(job: Any) -> list[Any]:
    from reviewapp.models import TraceFile

    return list(TraceFile.objects.filter(bundle_id=job.bundle_id).order_by("name", "pk"))


def _start(job: Any, attempt: int) -> str:
    """A huge bundle fans out as a chord (``"sharded"``: the callback finishes the job);
    anything else, or a chord that cannot be sent, is analyzed here."""
    from reviewapp import shards
    from reviewapp.services import jobs

    files = _files(job)
    if files and shards.wanted(files):
        units = shards.shard_units(files)
        word = "files" if all(n == 1 for _, _, n in units) else "file parts"
        if not jobs.job_progress(job_id=job.pk, progress=20, attempt=attempt,
                                 message=f"parsed 0/{len(units)} {word}, 0 events"):
            return "skipped"
        try:
            shards.fan_out(job=job, attempt=attempt, files=files,
                           send=lambda ids, anchor: _send_chord(job.pk, attempt, ids, anchor))
            return "sharded"
        except Exception:
            log.exception("job %s (attempt %s): the chord was not sent; parsing in this task",
                          job.pk, attempt)
    return _analyze(job, attempt)


def _send_chord(job_id: int, attempt: int, units: list[tuple[int, int, int]],
                anchor: int | None) -> None:
    """``chord(parse_shard per file or byte range) -> merge_shards`` on the analysis queue
    (a whole file's task keeps the four arguments of the per-file chord)."""
    from celery import chord

    queue = settings.BLKREVIEW_ANALYSIS_QUEUE
    header = [(parse_shard.si(job_id, attempt, fid, anchor) if n == 1 else
               parse_shard.si(job_id, attempt, fid, anchor, i, n)).set(queue=queue)
              for fid, i, n in units]
    chord(header)(merge_shards.s(job_id, attempt, anchor).set(queue=queue))


def run_merge(job_id: int, attempt: int, *, anchor: int | None = None,
              results: list[Any] | None = None) -> str:
    """The chord's callback: merge the shards of attempt ``attempt`` and analyze (as
    :func:`run_analysis` from the parse on). Nothing when the attempt is no longer the job's
    running one (``"stale"``) or another delivery of the callback holds the merge
    (``"taken"``)."""
    from reviewapp import shards
    from reviewapp.models import AnalysisJob
    from reviewapp.services import jobs

    job = AnalysisJob.objects.filter(pk=job_id, state=c.JOB_STATE_RUNNING,
                                     attempts=attempt).first()
    if job is None:
        return "stale"
    if not shards.claim_merge(job):
        return "taken"
    done = [r for r in results or [] if isinstance(r, dict)]
    log.info("job %s (attempt %s): merging; shards %s", job_id, attempt,
             {str(r.get("file_id")): r.get("state") for r in done})
    files = _files(job)
    with Heartbeat(lambda: jobs.job_heartbeat(job_id=job_id, attempt=attempt)):
        try:
            return _analyze(job, attempt, sharded={"anchor": anchor})
        finally:
            shards.cleanup(job=job, files=files)


def _analyze(job: Any, attempt: int, *, sharded: dict[str, Any] | None = None) -> str:
    """Parse (or, for ``sharded``, collect the chord's parts), analyze, store."""
    from reviewapp import metrics, shards, storage
    from reviewapp.services import jobs
    from workers.errors import ParseError

    job_id = job.pk
    files = _files(job)
    if not files:
        jobs.job_mark_failed(job_id=job_id, error="the bundle has no files", attempt=attempt)
        return "failed"
    events_name = ""
    keep = contextlib.ExitStack()  # the merge's work directory: column store, events file
    try:
        _pause()
        with contextlib.ExitStack() as stack:
            copies: dict[int, Path] = {}

            def local(f: Any) -> Path:
                """This worker's copy of a bundle file, downloaded on first use."""
                if f.pk not in copies:
                    copies[f.pk] = Path(stack.enter_context(storage.local_copy(f.storage_name)))
                return copies[f.pk]

            if sharded is None:
                paths = [local(f) for f in files]
            progress, message = ((55, "merging the parsed files") if sharded is not None
                                 else (20, "parsing traces"))
            if not jobs.job_progress(job_id=job_id, progress=progress, message=message,
                                     attempt=attempt):
                return "skipped"
            from workers.traces import ingest

            partials = None
            if sharded is not None:  # huge: the trace files were parsed by the chord
                work = Path(keep.enter_context(tempfile.TemporaryDirectory(
                    prefix="blkreview-merge-")))
                parts, partials = shards.collect(job=job, attempt=attempt, files=files,
                                                 local=local, workdir=work, stack=stack,
                                                 anchor=sharded.get("anchor"))
                ing = shards.merge(files=files, local=local, strict=job.bundle.strict,
                                   parts=parts, workdir=work)
                del parts
            else:
                ing = ingest(paths, names=[f.name for f in files], strict=job.bundle.strict)
        metrics.observe_ingest(nbytes=sum(f.size for f in files),
                               events=sum(int(getattr(r, "events", 0) or 0)
                                          for r in getattr(ing, "files", [])))
        _pause()
        if not jobs.job_progress(job_id=job_id, progress=60, message="analyzing",
                                 attempt=attempt):
            return "skipped"
        merged = shards.merged_partials(ing, partials) if partials else None
        results = _analyze_ingest(ing, merged)
        results = json.loads(json.dumps(results))  # plain JSON (numpy scalars fail loudly here)
        _pause()
        name = storage.new_events_name(job.bundle_id)
        if not jobs.job_file_pending(job_id=job_id, attempt=attempt, name=name):
            return "skipped"
        jobs.job_progress(job_id=job_id, progress=85, message="storing results", attempt=attempt)
        # written to a local file, then streamed to storage: no copy of the .npz in memory
        out = keep.enter_context(tempfile.NamedTemporaryFile(prefix="blkreview-events-",
                                                             suffix=".npz"))
        store = getattr(ing, "store", None)
        if store is not None:
            store.save_npz(out)
        else:
            ing.table.save(out)
        out.flush()
        out.seek(0)
        events_name = storage.save_bytes(name, out)
        if events_name != name and not jobs.job_file_pending(job_id=job_id, attempt=attempt,
                                                              name=events_name):
            storage.delete_quietly(events_name)
            return "skipped"
        jobs.job_progress(job_id=job_id, progress=90, message="storing results", attempt=attempt)
        _pause()
        manifest = getattr(ing, "manifest", None)
        kernel = str(getattr(manifest, "kernel", "") or "") if manifest is not None else ""
        stored = jobs.job_store_results(job_id=job_id, results=results,
                                        ingest=_ingest_report(ing), events_name=events_name,
                                        kernel=kernel, attempt=attempt)
        if stored is None:
            storage.delete_quietly(events_name)
            return "skipped"
        events_name = ""  # stored and referenced by the results: never delete it from here on
        return "succeeded"
    except ParseError as exc:
        storage.delete_quietly(events_name)
        jobs.job_mark_failed(job_id=job_id, error=exc.message, detail=exc.to_json(),
                             parse_failed=True, attempt=attempt)
        return "failed"
    except BlkreviewError as exc:
        storage.delete_quietly(events_name)
        jobs.job_mark_failed(job_id=job_id, error=str(exc), detail={"message": str(exc)},
                             parse_failed=True, attempt=attempt)
        return "failed"
    except SoftTimeLimitExceeded:
        storage.delete_quietly(events_name)
        jobs.job_mark_failed(job_id=job_id, error="the analysis took longer than the time limit",
                             attempt=attempt)
        return "failed"
    except Exception:
        log.exception("job %s (attempt %s): internal error", job_id, attempt)
        storage.delete_quietly(events_name)
        jobs.job_mark_failed(job_id=job_id, error=INTERNAL_ERROR, attempt=attempt)
        return "failed"
    finally:
        keep.close()


def _analyze_ingest(ing: Any, partials: Any) -> dict[str, Any]:
    """``analyze`` of an ``Ingest`` (the table in memory) or of a ``StoredIngest`` (the table
    in a column store, from the chunked merge of a huge bundle: analyzed a chunk at a time by
    ``analyze_chunks``, the same results as ``analyze`` of the whole table)."""
    from workers.analyzers import analyze
    from workers.analyzers.stream import analyze_chunks

    store = getattr(ing, "store", None)
    summaries = getattr(ing, "summaries", None)
    if store is None:
        return analyze(ing.table, summaries=summaries, partials=partials)
    return analyze_chunks(lambda: store.chunks(), summaries=summaries, partials=partials)


class ReportingTask(Task):
    """Reports an unexpected exception on the object the task works on (a readable error, state
    failed; the details in the log only), so a crash before the claim never leaves a job or a
    comparison "running" forever. Subclasses name the id argument and the service that marks
    the object failed."""

    id_arg = ""

    def mark_failed(self, object_id: int, error: str) -> None:
        raise NotImplementedError

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any,
                   einfo: Any) -> None:
        object_id = args[0] if args else kwargs.get(self.id_arg)
        log.error("task %s (%s) failed: %s: %s", self.name, object_id, type(exc).__name__, exc)
        if object_id is not None:
            try:
                self.mark_failed(int(object_id), INTERNAL_ERROR)
            except Exception:
                log.exception("could not mark %s %s failed", self.id_arg, object_id)


class AnalysisTask(ReportingTask):
    """Marks the analysis job failed."""

    id_arg = "job_id"

    def mark_failed(self, object_id: int, error: str) -> None:
        from reviewapp.services import jobs

        jobs.job_mark_failed(job_id=object_id, error=error)


class MergeTask(AnalysisTask):
    """The chord's callback: its job id is the second argument (the first is the header's
    results), and only its own attempt is marked failed."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any,
                   einfo: Any) -> None:
        from reviewapp.services import jobs

        job_id = args[1] if len(args) > 1 else kwargs.get("job_id")
        attempt = args[2] if len(args) > 2 else kwargs.get("attempt")
        log.error("task %s (%s) failed: %s: %s", self.name, job_id, type(exc).__name__, exc)
        if job_id is not None and attempt is not None:
            try:
                jobs.job_mark_failed(job_id=int(job_id), error=INTERNAL_ERROR,
                                     attempt=int(attempt))
            except Exception:
                log.exception("could not mark job %s failed", job_id)


# --- the comparison step ---------------------------------------------------------------------

class _ModelInput:
    """One run as the model panel reads it: its table (whole, or the first rows of a run over
    the bounds, :class:`workers.whatif.ModelWindow`), the observed results of those rows and
    the window (None: the whole run, with its stored results)."""

    def __init__(self, table: Any, observed: dict[str, Any], window: Any) -> None:
        self.table, self.observed, self.window = table, observed, window


def _scan_stored(events_name: str, results: dict[str, Any], *, model: bool
                 ) -> tuple[Any, _ModelInput | None]:
    """One run's stored table read in chunks: the seek of every stage (``RunScan``) and, when
    ``model``, the run as the model panel reads it.

    The .npz is read a chunk of the needed columns at a time (``StoredTable``), never whole:
    the comparison of two 100M-event runs held 6553 MB when both tables were loaded
    (docs/deploy.md, "Huge traces"). A run within ``BLKREVIEW_MODEL_MAX_EVENTS`` and
    ``BLKREVIEW_MODEL_MAX_BIOS`` is handed to the model whole with its stored results, exactly
    as before; a bigger one as its first rows, analyzed here.
    """
    from reviewapp import storage
    from workers.analyzers import analyze
    from workers.traces.columnstore import StoredTable

    max_events = int(settings.BLKREVIEW_MODEL_MAX_EVENTS)
    max_bios = int(settings.BLKREVIEW_MODEL_MAX_BIOS)
    with storage.local_copy(events_name, suffix=".npz") as path:
        stored = StoredTable(path)
        try:
            scan = whatif.scan_run(stored.chunks(columns=whatif.SCAN_COLUMNS), results,
                                   bio_limit=max_bios)
        except whatif.OutOfTimeOrder:
            # no parser stores such a table (they sort by time); the whole-table analyzers
            # sort each stage's rows, which needs the whole table
            log.warning("%s is not in time order: seek of every stage from the whole table",
                        events_name)
            scan = whatif.scan_table(stored.to_table(), results, bio_limit=max_bios)
        if not model:
            return scan, None
        window = whatif.ModelWindow.of(scan, max_events=max_events, max_bios=max_bios)
        if window is None:
            return scan, _ModelInput(stored.to_table(), results, None)
        table = stored.head(window.events)
        return scan, _ModelInput(table, whatif.jsonable(analyze(table)), window)


def model_panel(**kwargs: Any) -> dict[str, Any] | None:
    """:func:`workers.whatif.model_panel`, never raising: a model failure is reported on the
    panel so the observed comparison stands on its own."""
    try:
        return whatif.model_panel(**kwargs)
    except SoftTimeLimitExceeded:
        return {"state": "error", "error": "the model run took longer than the time limit"}
    except Exception as exc:  # the model panel must never fail the observed comparison
        log.warning("model panel failed", exc_info=True)
        return {"state": "error", "error": f"{type(exc).__name__}: {exc}"}


def _replay_other_run(i: int, r: Any, run: _ModelInput, comparison: Any,
                      kernels: dict[str, str]) -> dict[str, Any]:
    """The model panel replays every baseline run, not only the first: per run, the old and
    the new policy's key predictions and the fidelity of the old one against that run (the
    charts stay those of run 1). One run at a time: its table is dropped after."""
    manifest = (r.ingest or {}).get("manifest")
    other = model_panel(
        policy=comparison.policy, baseline_kernel=kernels.get("baseline", ""),
        patched_kernel=kernels.get("patched", ""),
        manifest=manifest if isinstance(manifest, dict) else None,
        stack_text=r.bundle.stack, workload=r.bundle.workload, table=run.table,
        observed=run.observed, window=run.window)
    if not other or other.get("state") != "ok":
        return {"run": i, "error": (other or {}).get("error") or "no model"}
    out = {"run": i, "fidelity": other.get("fidelity"), "predicted": _predicted_numbers(other)}
    if other.get("window"):
        out["window"] = other["window"]
    return out


def _predicted_numbers(model: dict[str, Any]) -> dict[str, Any]:
    """Per predicted device: backward share, mean seek and mean request of both policies."""
    out: dict[str, Any] = {}
    for side in ("predicted_old", "predicted_new"):
        for dev, d in ((model.get(side) or {}).get("devices") or {}).items():
            out.setdefault(dev, {})[side] = {
                "backward_share": (d.get("ordering") or {}).get("backward_share"),
                "mean_seek_bytes": (d.get("seek") or {}).get("mean_bytes"),
                "mean_request_bytes": (d.get("sizes") or {}).get("mean_bytes")}
    return out


def _environment(rows: dict[str, list[Any]], policy: str) -> dict[str, Any] | None:
    """Fingerprint of each side's first run (manifest, the uploader's fields, the devices
    traced) and their consistency, given the policy under test and the fields the two
    kernels' presets set differently."""
    from workers.analyzers.environment import consistency, fingerprint
    from workers.model.presets import preset_difference

    fps = {}
    for side in ("baseline", "patched"):
        if not rows.get(side):
            return None
        r = rows[side][0]
        manifest = (r.ingest or {}).get("manifest")
        b = r.bundle
        fps[side] = fingerprint(manifest if isinstance(manifest, dict) else None,
                                kernel=b.kernel, stack=b.stack, limits=b.limits,
                                workload=b.workload, results=r.data)
    fields = [kv.split("=", 1)[0].strip()
              for kv in (policy.split(": ", 1)[-1] if policy else "").split(",") if "=" in kv]
    fields += [kv.split("=", 1)[0] for kv in preset_difference(fps["baseline"]["kernel"],
                                                                fps["patched"]["kernel"])]
    out = consistency(fps["baseline"], fps["patched"], policy_fields=fields)
    out["sides"] = fps
    return out


def _compare(baseline: list[dict[str, Any]], patched: list[dict[str, Any]],
             thresholds: dict[str, Any], alpha: float,
             fidelity_result: dict[str, Any] | None,
             model: dict[str, Any] | None = None,
             environment: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(compare output, check verdict)``; the verdict as the API serves it:
    ``{"state": success|warning|fail, "reasons": [...], "notes": [...], "summary": "...",
    "timing": "...", "rules": [...], "runs_note": ..., "thresholds": {...}}``."""
    from reviewapp.sections import summary_facts
    from workers.compare import compare
    from workers.summary import with_summary

    out = whatif.jsonable(with_summary(
        compare(baseline, patched, thresholds=thresholds, alpha=alpha,
                fidelity_result=fidelity_result or None, environment=environment), model))
    check = dict(out.get("check") or {})
    verdict = {"state": str(check.get("state") or "error"),
               "reasons": [str(r) for r in check.get("reasons") or []],
               "notes": [str(r) for r in check.get("notes") or []],
               "summary": check.get("summary") or "",
               "timing": check.get("timing") or "",
               "rules": check.get("rules") or [],
               "words": summary_facts(out.get("words") or {}),
               "environment": {k: (out.get("environment") or {}).get(k)
                               for k in ("diffs", "warn", "unexpected")}
               if out.get("environment") else None,
               "runs_note": check.get("runs_note"),
               "thresholds": check.get("thresholds") or thresholds}
    return out, verdict


def _report(compare_out: dict[str, Any], *, header: Any, model: dict[str, Any] | None) -> str:
    from workers.report import render_report

    return str(render_report(compare_out, header=header, model=model))


def run_compare(result_id: int, *, task_id: str = "") -> str:
    """The comparison step of result ``result_id``; returns its final state.

    Steps: load every run's results [5-15], seek histograms of every stage from the stored
    EventTables [15-35], the model panel with its fidelity [35-70], ``workers.compare.compare``
    + check verdict (fidelity included) [70-80], chart payloads and the report [80-95], store
    results, charts and state atomically [95-100]. Claimed and written per attempt, as
    :func:`run_analysis`.
    """
    from reviewapp.services import results as svc

    result = svc.result_start(result_id=result_id, task_id=task_id)
    if result is None:
        return "skipped"
    attempt = result.attempts
    with Heartbeat(lambda: svc.result_heartbeat(result_id=result_id, attempt=attempt)):
        return _compare_step(result, attempt)


def _compare_step(result: Any, attempt: int) -> str:
    from reviewapp import sections
    from reviewapp.charts import seek_text
    from reviewapp.models import BundleResult
    from reviewapp.selectors import side_bundles
    from reviewapp.services import results as svc

    result_id = result.pk
    comparison = result.comparison
    try:
        sides = side_bundles(comparison)
        rows: dict[str, list[BundleResult]] = {}
        for side, bundles in sides.items():
            rows[side] = list(BundleResult.objects.filter(bundle__in=bundles)
                              .select_related("bundle").order_by("bundle_id"))
        side_results = {side: [r.data for r in rs] for side, rs in rows.items()}
        thresholds = dict((result.inputs or {}).get("thresholds") or {})
        if "warn_on_regression" in thresholds:
            thresholds["warn_on_regression"] = bool(thresholds["warn_on_regression"])
        svc.result_progress(result_id=result_id, progress=15, message="seek at every stage",
                            attempt=attempt)
        # One run's table at a time, read in chunks (_scan_stored): the seek of every stage of
        # every run, and the model's input of the runs it replays: the first baseline run and
        # the first patched run (held for the panel), then each other baseline run (replayed
        # and dropped at once).
        by_stage: dict[str, Any] = {}
        kept: dict[str, tuple[Any, _ModelInput]] = {}  # side -> (row, model input) of run 1
        others: list[tuple[Any, dict[str, Any]]] = []  # later baseline runs: (row, results)
        missing: list[str] = []

        def scan(side: str, r: Any, *, model: bool) -> _ModelInput | None:
            try:
                if not r.events_name:
                    raise ValueError("no EventTable stored")
                run_scan, run = _scan_stored(r.events_name, r.data, model=model)
            except (OSError, ValueError, KeyError) as exc:
                # results without their table still compare; only the extra seek
                # stages and the model panel need the events
                log.warning("bundle %s: cannot load %r: %s", r.bundle_id, r.events_name, exc)
                missing.append(f"bundle {r.bundle_id}")
                return None
            whatif.add_run_seek(by_stage.setdefault(side, {}), side, run_scan.seek)
            return run

        for side, rs in rows.items():
            for r in rs:
                if side in kept:
                    if side == "baseline":
                        others.append((r, {}))
                        continue
                    scan(side, r, model=False)
                    continue
                run = scan(side, r, model=side in ("baseline", "patched"))
                if run is not None:
                    kept[side] = (r, run)
        svc.result_progress(result_id=result_id, progress=35, message="model", attempt=attempt)
        model: dict[str, Any] | None = None
        kernels = {side: next((r.bundle.kernel for r in rs if r.bundle.kernel), "")
                   for side, rs in rows.items()}
        if rows.get("baseline") and "baseline" not in kept:
            model = {"state": "error", "error": "the baseline run's parsed events are missing "
                     f"from storage ({', '.join(missing)}); rerun its analysis"}
        elif "baseline" in kept:
            base, run = kept["baseline"]
            manifest = (base.ingest or {}).get("manifest")
            pat = kept.get("patched")
            model = model_panel(
                policy=comparison.policy, baseline_kernel=kernels.get("baseline", ""),
                patched_kernel=kernels.get("patched", ""),
                manifest=manifest if isinstance(manifest, dict) else None,
                stack_text=base.bundle.stack, workload=base.bundle.workload,
                table=run.table, observed=run.observed, window=run.window,
                patched_table=pat[1].table if pat else None,
                patched_observed=pat[1].observed if pat else None,
                patched_window=pat[1].window if pat else None)
        replay_others = bool(model and model.get("state") == "ok")
        runs: list[dict[str, Any]] = []
        if replay_others and model is not None:
            runs.append({"run": 0, "fidelity": model.get("fidelity"),
                         "predicted": _predicted_numbers(model)})
        kept.clear()  # the first runs' tables go before the other runs are read
        for r, _ in others:
            run = scan("baseline", r, model=replay_others)
            if run is not None and replay_others:
                runs.append(_replay_other_run(len(runs), r, run, comparison, kernels))
            del run
        if len(runs) > 1 and model is not None:
            model["runs"] = runs
        by_stage = _merge_sides(by_stage)
        svc.result_progress(result_id=result_id, progress=70, message="comparing runs",
                            attempt=attempt)
        fid = model.get("fidelity") if model and model.get("state") == "ok" else None
        compare_out, verdict = _compare(
            side_results.get("baseline", []), side_results.get("patched", []), thresholds,
            float(settings.BLKREVIEW_CHECK_ALPHA), fid, model,
            environment=_environment(rows, comparison.policy))
        svc.result_progress(result_id=result_id, progress=80, message="charts and report",
                            attempt=attempt)
        payloads = sections.build_payloads(side_results, seek_by_stage=by_stage,
                                           compare=compare_out, model=model,
                                           seek_text=seek_text)
        charts = {k: sections.encode(v) for k, v in payloads.items()}
        try:
            from reviewapp.selectors import report_header

            report = _report(compare_out, header=report_header(comparison), model=model)
        except Exception:  # the report is a view of stored results: never fail the step
            log.exception("render_report failed for comparison %s", comparison.pk)
            report = ""
        stored = svc.result_store(result_id=result_id, compare=compare_out, verdict=verdict,
                                  model=model, report=report, charts=charts, attempt=attempt)
        return "succeeded" if stored is not None else "skipped"
    except SoftTimeLimitExceeded:
        svc.result_mark_failed(result_id=result_id,
                               error="the comparison took longer than the time limit",
                               attempt=attempt)
        return "failed"
    except BlkreviewError as exc:
        svc.result_mark_failed(result_id=result_id, error=str(exc), attempt=attempt)
        return "failed"
    except Exception:
        log.exception("comparison result %s (attempt %s): internal error", result_id, attempt)
        svc.result_mark_failed(result_id=result_id, error=INTERNAL_ERROR, attempt=attempt)
        return "failed"


def _merge_sides(by_side: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{side: {dev: {stage: {side: [...]}}}}`` -> ``{dev: {stage: {side: [...]}}}`` with the
    sides in the order the runs were read (baseline first, as ``side_bundles`` gives them)."""
    out: dict[str, Any] = {}
    for side_map in by_side.values():
        for dev, stages in side_map.items():
            for stage, sides in stages.items():
                out.setdefault(dev, {}).setdefault(stage, {}).update(sides)
    return out


class CompareTask(ReportingTask):
    """Marks the comparison result failed."""

    id_arg = "result_id"

    def mark_failed(self, object_id: int, error: str) -> None:
        from reviewapp.services import results as svc

        svc.result_mark_failed(result_id=object_id, error=error)


@contextlib.contextmanager
def _observed(kind: str, **ids: Any) -> Any:
    """Log context (the ids on every record) and ``blkreview_job_duration_seconds`` of a task;
    yields a list the body appends its final state to (none: it raised, state "failed")."""
    import time

    from reviewapp import metrics
    from reviewapp.logjson import log_context

    ids.update(_object_ids(kind, ids.get("job_id") or ids.get("result_id")))
    start, done = time.monotonic(), []
    with log_context(**ids):
        try:
            yield done
        finally:
            state = done[-1] if done else "failed"
            metrics.observe_job(kind, state, time.monotonic() - start)
            log.info("%s %s in %.2f s", kind, state, time.monotonic() - start)


def _object_ids(kind: str, object_id: int | None) -> dict[str, Any]:
    """The bundle (analysis) or comparison (comparison step) the job belongs to, for logs."""
    try:
        if kind == "analyze":
            from reviewapp.models import AnalysisJob

            return {"bundle_id": AnalysisJob.objects.filter(pk=object_id)
                    .values_list("bundle_id", flat=True).first()}
        from reviewapp.models import ComparisonResult

        return {"comparison_id": ComparisonResult.objects.filter(pk=object_id)
                .values_list("comparison_id", flat=True).first()}
    except Exception:  # logging context only: never fail the task over it
        return {}


@worker_ready.connect
def _worker_metrics(sender: Any = None, **kwargs: Any) -> None:
    """BLKREVIEW_WORKER_METRICS_PORT: this worker serves its metrics (reviewapp/metrics.py).
    A worker whose tasks run in its own process (``--pool=solo`` or threads, not prefork)
    counts itself in ``blkreview_processes{role="celery"}``."""
    from reviewapp import metrics

    metrics.start_worker_server()
    pool = getattr(sender, "pool", None)
    if pool is not None and not type(pool).__module__.endswith(".prefork"):
        metrics.process_started("celery")


@worker_shutdown.connect
def _worker_exited(**kwargs: Any) -> None:
    """The worker's main process stops: a solo worker's live gauge leaves the sums."""
    import os

    from reviewapp import metrics

    metrics.process_exited(os.getpid())


@worker_process_init.connect
def _pool_process_started(**kwargs: Any) -> None:
    """A prefork pool process counts itself in ``blkreview_processes{role="celery"}``."""
    from reviewapp import metrics

    metrics.process_started("celery")


@worker_process_shutdown.connect
def _pool_process_exited(pid: int | None = None, **kwargs: Any) -> None:
    """A pool process is about to exit: multiprocess mode drops its live gauges (its counters
    and histograms stay in the sums)."""
    import os

    from reviewapp import metrics

    metrics.process_exited(pid or os.getpid())


@app.task(bind=True, base=CompareTask, name=c.TASK_COMPARE, acks_late=True)
def compare_comparison(self: Task, result_id: int, **kwargs: Any) -> str:
    """The comparison-level step (Celery entry point; see :func:`run_compare`)."""
    if kwargs:
        log.warning("compare_comparison: ignoring unexpected arguments %s", sorted(kwargs))
    with _observed("compare", result_id=int(result_id), task_id=self.request.id or "") as done:
        done.append(run_compare(int(result_id), task_id=self.request.id or ""))
        return done[-1]


@app.task(bind=True, base=AnalysisTask, name=c.TASK_ANALYZE, acks_late=True)
def analyze_bundle(self: Task, job_id: int, **kwargs: Any) -> str:
    """Parse and analyze one bundle (Celery entry point; see :func:`run_analysis`)."""
    if kwargs:
        log.warning("analyze_bundle: ignoring unexpected arguments %s", sorted(kwargs))
    with _observed("analyze", job_id=int(job_id), task_id=self.request.id or "") as done:
        done.append(run_analysis(int(job_id), task_id=self.request.id or ""))
        return done[-1]


@app.task(name=c.TASK_SHARD, acks_late=True, ignore_result=False)
def parse_shard(job_id: int, attempt: int, file_id: int, anchor: int | None = None,
                index: int = 0, count: int = 1, **kwargs: Any) -> dict[str, Any]:
    """Parse one trace file of a huge bundle, or byte range ``index`` of ``count`` of a large
    binary one, a member of its chord (reviewapp/shards.py).

    The only task whose result is stored (the chord counts its header's results in the
    backend); it renews the attempt's lease while it runs and never raises."""
    if kwargs:
        log.warning("parse_shard: ignoring unexpected arguments %s", sorted(kwargs))
    from reviewapp import shards
    from reviewapp.logjson import log_context
    from reviewapp.services import jobs

    job_id, attempt = int(job_id), int(attempt)
    with log_context(job_id=job_id, task_id=parse_shard.request.id or ""), Heartbeat(
            lambda: jobs.job_lease(job_id=job_id, attempt=attempt,
                                   seconds=shards.lease_seconds())):
        return shards.shard_run(job_id=job_id, attempt=attempt, file_id=int(file_id),
                                anchor=None if anchor is None else int(anchor),
                                index=int(index), count=int(count))


@app.task(bind=True, base=MergeTask, name=c.TASK_MERGE, acks_late=True, ignore_result=True)
def merge_shards(self: Task, results: Any, job_id: int, attempt: int,
                 anchor: int | None = None, **kwargs: Any) -> str:
    """The chord's callback: merge a huge bundle's shards and analyze (see :func:`run_merge`)."""
    if kwargs:
        log.warning("merge_shards: ignoring unexpected arguments %s", sorted(kwargs))
    with _observed("analyze", job_id=int(job_id), task_id=self.request.id or "") as done:
        done.append(run_merge(int(job_id), int(attempt),
                              anchor=None if anchor is None else int(anchor),
                              results=results if isinstance(results, list) else None))
        return done[-1]


# --- collaboration (issue 8): mail notifications and webhook deliveries -----------------------

@app.task(name=c.TASK_NOTIFY, acks_late=True, ignore_result=True)
def send_comment_notifications(comment_id: int, **kwargs: Any) -> int:
    """Mail the participants and mentioned users of one comment (sent after commit)."""
    if kwargs:
        log.warning("send_comment_notifications: ignoring unknown arguments %s", sorted(kwargs))
    from reviewapp.services.notifications import notification_send

    return notification_send(comment_id=comment_id)


@app.task(name=c.TASK_WEBHOOK, bind=True, acks_late=True, ignore_result=True, max_retries=None)
def deliver_webhook(self: Task, delivery_id: int, **kwargs: Any) -> None:
    """POST one webhook delivery; on failure retry with backoff until the attempts run out."""
    if kwargs:
        log.warning("deliver_webhook: ignoring unknown arguments %s", sorted(kwargs))
    from django.conf import settings

    from reviewapp.services.webhooks import webhook_deliver

    retry_in = webhook_deliver(delivery_id=delivery_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in, queue=settings.BLKREVIEW_NOTIFY_QUEUE)


# --- the sweeper, in every worker process ------------------------------------------------------

class _Sweeper:
    """Runs :func:`reviewapp.services.sweeper.sweep` every BLKREVIEW_SWEEP_SECONDS in a thread
    of the worker's main process (started when the worker is ready, stopped at shutdown)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def run(self) -> None:
        from django.db import connection

        from reviewapp.services.sweeper import sweep

        while not self.stop.wait(float(settings.BLKREVIEW_SWEEP_SECONDS)):
            try:
                sweep()
            except Exception:
                log.exception("sweep failed; trying again in %ss", settings.BLKREVIEW_SWEEP_SECONDS)
            finally:
                connection.close()  # no connection kept open across a pool fork

    def start(self) -> None:
        if self.thread is None and float(settings.BLKREVIEW_SWEEP_SECONDS) > 0:
            self.thread = threading.Thread(target=self.run, name="blkreview-sweeper", daemon=True)
            self.thread.start()
            log.info("sweeper: every %ss", settings.BLKREVIEW_SWEEP_SECONDS)


_sweeper = _Sweeper()


@worker_ready.connect
def _start_sweeper(**kwargs: Any) -> None:
    _sweeper.start()


@worker_shutdown.connect
def _stop_sweeper(**kwargs: Any) -> None:
    _sweeper.stop.set()
