"""Reads: what pages and the API show. No writes here."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from reviewapp import constants as c
from reviewapp.models import (
    AnalysisJob,
    BundleResult,
    Comparison,
    ComparisonChart,
    ComparisonResult,
    TraceBundle,
)


def comparison_list_for_user(user: Any) -> QuerySet[Comparison]:
    qs = Comparison.objects.select_related("patch")
    if getattr(user, "is_authenticated", False):
        if user.is_staff:
            return qs
        return qs.filter(public=True) | qs.filter(created_by=user)
    return qs.filter(public=True)


def comparison_get_for_user(*, pk: int, user: Any) -> Comparison:
    """A comparison the user may read (public ones need no login), else Http404."""
    comparison = Comparison.objects.select_related("patch", "created_by").filter(pk=pk).first()
    if comparison is None:
        raise Http404("no such comparison")
    if comparison.public:
        return comparison
    if getattr(user, "is_authenticated", False) and (
        user.is_staff or comparison.created_by_id == user.pk
    ):
        return comparison
    raise Http404("no such comparison")


def side_bundles(comparison: Comparison, *, files: bool = False
                 ) -> dict[str, list[TraceBundle]]:
    """Each side's bundles in id order (``files``: with their TraceFiles prefetched)."""
    base = comparison.baseline_bundles.order_by("pk")
    patched = comparison.patched_bundles.order_by("pk")
    if files:
        base, patched = base.prefetch_related("files"), patched.prefetch_related("files")
    return {c.ROLE_BASELINE: list(base), c.ROLE_PATCHED: list(patched)}


def latest_job(bundle: TraceBundle) -> AnalysisJob | None:
    return bundle.jobs.order_by("-created", "-pk").first()


def side_results(comparison: Comparison) -> dict[str, list[dict[str, Any]]]:
    """Stored results JSON of each side's bundles (bundles without results are left out)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for side, bundles in side_bundles(comparison).items():
        results = BundleResult.objects.filter(bundle__in=bundles).order_by("bundle_id")
        out[side] = [r.data for r in results]
    return out


def comparison_jobs(comparison: Comparison,
                    bundles: dict[str, list[TraceBundle]] | None = None) -> list[dict[str, Any]]:
    """Latest job per bundle, for the progress box and the status endpoint (4 queries)."""
    bundles = bundles if bundles is not None else side_bundles(comparison)
    ids = [b.pk for side in bundles.values() for b in side]
    with_result = set(BundleResult.objects.filter(bundle_id__in=ids)
                      .values_list("bundle_id", flat=True))
    latest: dict[int, AnalysisJob] = {}
    for job in AnalysisJob.objects.filter(bundle_id__in=ids).order_by("created", "pk"):
        latest[job.bundle_id] = job
    rows = []
    for side, side_list in bundles.items():
        for bundle in side_list:
            rows.append({"side": side, "bundle": bundle, "job": latest.get(bundle.pk),
                         "has_result": bundle.pk in with_result})
    return rows


def status_of_rows(rows: list[dict[str, Any]]) -> str:
    """Ready when every bundle has results, failed when any bundle's latest job failed."""
    if not rows:
        return c.COMPARISON_PENDING
    states = []
    for row in rows:
        if row["has_result"]:
            states.append(c.JOB_STATE_SUCCEEDED)
        else:
            states.append(row["job"].state if row["job"] else c.JOB_STATE_QUEUED)
    if c.JOB_STATE_FAILED in states:
        return c.COMPARISON_FAILED
    if all(s == c.JOB_STATE_SUCCEEDED for s in states):
        return c.COMPARISON_READY
    if c.JOB_STATE_RUNNING in states or c.JOB_STATE_SUCCEEDED in states:
        return c.COMPARISON_RUNNING
    return c.COMPARISON_PENDING


_UNSET: Any = object()


def comparison_progress(comparison: Comparison,
                        bundles: dict[str, list[TraceBundle]] | None = None,
                        result: ComparisonResult | None = _UNSET) -> dict[str, Any]:
    """The small JSON the page polls: overall state, progress and per-job details.

    ``bundles`` and ``result`` may be passed in when the caller has them already.
    """
    jobs = []
    total = 0
    rows = comparison_jobs(comparison, bundles)
    for row in rows:
        job: AnalysisJob | None = row["job"]
        if row["has_result"]:
            progress, state = 100, c.JOB_STATE_SUCCEEDED
        elif job is None:
            progress, state = 0, c.JOB_STATE_QUEUED
        else:
            progress, state = job.progress, job.state
        total += progress
        jobs.append({
            "id": job.pk if job else None, "side": row["side"], "bundle": row["bundle"].pk,
            "state": state, "progress": progress, "message": job.message if job else "",
            "error": job.error if job and state == c.JOB_STATE_FAILED else "",
        })
    status = status_of_rows(rows)
    done = status in (c.COMPARISON_READY, c.COMPARISON_FAILED)
    if result is _UNSET:
        result = comparison_result(comparison)
    step = None
    if result is not None:
        step = {"state": result.state, "progress": result.progress, "message": result.message,
                "error": result.error}
    return {
        "comparison": comparison.pk,
        "status": status,
        "progress": round(total / len(jobs)) if jobs else 0,
        "jobs": jobs,
        "done": done,
        # the comparison step (compare, check, model, charts) after every bundle is analyzed
        "compare": step,
        "complete": bool(done and (status == c.COMPARISON_FAILED or (
            result is not None and result.state in c.JOB_FINAL_STATES))),
    }


def comparison_result(comparison: Comparison, *, full: bool = False) -> ComparisonResult | None:
    """The comparison step's row; without ``full`` only its state and verdict are loaded."""
    qs = ComparisonResult.objects.filter(comparison=comparison)
    if not full:
        qs = qs.defer("compare", "model", "report", "inputs")
    return qs.first()


def chart_payload(*, comparison: Comparison, section: str, dev: str = "",
                  stage: str = "") -> str | None:
    """The stored JSON text of one section (first device when ``dev`` is empty)."""
    qs = ComparisonChart.objects.filter(comparison=comparison, section=section)
    if section == "index":
        dev = ""
    elif not dev:
        devs = chart_index_devices(comparison)
        if not devs:
            return None
        dev = devs[0]
    return qs.filter(dev=dev, stage=stage).values_list("payload", flat=True).first()


def chart_index(comparison: Comparison) -> dict[str, Any]:
    """``{"devices": [{dev, name, stage_note, runs}], "sections": [...]}`` or {}."""
    import json

    text = ComparisonChart.objects.filter(comparison=comparison, section="index").values_list(
        "payload", flat=True).first()
    return json.loads(text) if text else {}


def chart_index_devices(comparison: Comparison) -> list[str]:
    return [d["dev"] for d in chart_index(comparison).get("devices", [])]


def comparison_comments(comparison: Comparison) -> list[Any]:
    """Comments of the comparison's first thread, oldest first, in one query."""
    from django.db.models import OuterRef, Subquery

    from reviewapp.models import Comment, Thread

    first = Thread.objects.filter(comparison=OuterRef("thread__comparison")).order_by(
        "created", "pk").values("pk")[:1]
    return list(Comment.objects.filter(thread__comparison=comparison,
                                       thread_id=Subquery(first))
                .select_related("author").order_by("created", "pk"))
