"""Reads: what pages and the API show. No writes here."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch, QuerySet, prefetch_related_objects
from django.http import Http404

from reviewapp import chartstore
from reviewapp import constants as c
from reviewapp.access import (
    comparison_for_reader,
    comparisons_readable_by,
    patches_readable_by,
    series_readable_by,
)
from reviewapp.chartstore import ChartRef
from reviewapp.models import (
    AnalysisJob,
    BundleResult,
    Comparison,
    ComparisonChart,
    ComparisonResult,
    Patch,
    Series,
    TraceBundle,
)

log = logging.getLogger(__name__)


def comparison_list_for_user(user: Any) -> QuerySet[Comparison]:
    """Comparisons ``user`` may read (reviewapp.access), patch loaded."""
    return comparisons_readable_by(user).select_related("patch")


def comparison_get_for_user(*, pk: int, user: Any) -> Comparison:
    """A comparison the user may read (public ones need no login), else Http404.

    Kept for callers; the rule is :func:`reviewapp.access.comparison_for_reader`.
    """
    return comparison_for_reader(pk=pk, user=user)


def side_bundles(comparison: Comparison, *, files: bool = False, state: bool = False
                 ) -> dict[str, list[TraceBundle]]:
    """Each side's bundles in id order (``files``: with their TraceFiles prefetched;
    ``state``: with their result row and jobs, so :func:`latest_job` and ``bundle.result``
    cost no query per bundle)."""
    base = comparison.baseline_bundles.order_by("pk")
    patched = comparison.patched_bundles.order_by("pk")
    if files:
        base, patched = base.prefetch_related("files"), patched.prefetch_related("files")
    if state:
        base, patched = (qs.select_related("result").prefetch_related(jobs_prefetch())
                         for qs in (base, patched))
    return {c.ROLE_BASELINE: list(base), c.ROLE_PATCHED: list(patched)}


def jobs_prefetch() -> Prefetch:
    """A bundle's jobs, newest first (what :func:`latest_job` reads when prefetched)."""
    return Prefetch("jobs", queryset=AnalysisJob.objects.order_by("-created", "-pk"))


def comparisons_with_bundles(qs: Any) -> Any:
    """Comparisons with both sides' bundles and their jobs prefetched: a list serializes in a
    constant number of queries (issue 10 item 12). Works on a QuerySet or a list of rows."""
    bundles = TraceBundle.objects.order_by("pk").prefetch_related(jobs_prefetch())
    lookups = (Prefetch("baseline_bundles", queryset=bundles),
               Prefetch("patched_bundles", queryset=bundles),
               # the comparison step's state (for the overall status), without its results
               Prefetch("result", queryset=ComparisonResult.objects.defer(
                   "compare", "model", "report", "inputs", "verdict")))
    if isinstance(qs, QuerySet):
        return qs.prefetch_related(*lookups)
    prefetch_related_objects(list(qs), *lookups)
    return qs


def latest_job(bundle: TraceBundle) -> AnalysisJob | None:
    """The bundle's newest job (from the prefetched jobs when there are)."""
    if "jobs" in getattr(bundle, "_prefetched_objects_cache", {}):
        jobs = list(bundle.jobs.all())
        return max(jobs, key=lambda j: (j.created, j.pk)) if jobs else None
    return bundle.jobs.order_by("-created", "-pk").first()


def bundle_result_of(bundle: TraceBundle) -> BundleResult | None:
    """The bundle's result row or None (no query when it was select_related)."""
    try:
        return bundle.result
    except BundleResult.DoesNotExist:
        return None


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


def chart_ref(*, comparison: Comparison, section: str, dev: str = "",
              stage: str = "") -> ChartRef | None:
    """Where one section's stored JSON text is (first device when ``dev`` is empty), or None."""
    if section == "index":
        dev = ""
    elif not dev:
        devs = chart_index_devices(comparison)
        if not devs:
            return None
        dev = devs[0]
    row = ComparisonChart.objects.filter(comparison=comparison, section=section, dev=dev,
                                         stage=stage).values_list(
        "storage_name", "offset", "nbytes").first()
    if row is None or not row[0]:
        return None
    return ChartRef(name=row[0], offset=row[1], nbytes=row[2])


def chart_payload(*, comparison: Comparison, section: str, dev: str = "",
                  stage: str = "") -> str | None:
    """The stored JSON text of one section (first device when ``dev`` is empty), or None.

    Raises FileNotFoundError when the row exists but its object is gone from storage."""
    ref = chart_ref(comparison=comparison, section=section, dev=dev, stage=stage)
    return None if ref is None else chartstore.read(ref).decode()


def chart_index(comparison: Comparison) -> dict[str, Any]:
    """``{"devices": [{dev, name, stage_note, runs}], "sections": [...]}`` or {} (also when
    the stored object is missing: the page then shows no sections instead of failing)."""
    import json

    try:
        text = chart_payload(comparison=comparison, section="index")
    except OSError:
        log.warning("comparison %s: chart index missing from storage", comparison.pk,
                    exc_info=True)
        return {}
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


# --- series and patches (issue 8) -----------------------------------------------------------

def series_list_for_user(user: Any) -> QuerySet[Series]:
    """Series ``user`` may read (the rule: reviewapp.access.series_readable_by)."""
    return series_readable_by(user)


def series_get_for_user(*, pk: int, user: Any) -> Series:
    """A series the user may read, else Http404 (private = 404, never 403)."""
    series = series_list_for_user(user).select_related("submitted_by", "previous").filter(
        pk=pk).first()
    if series is None:
        raise Http404("no such series")
    return series


def patch_list_for_user(user: Any) -> QuerySet[Patch]:
    """Patches ``user`` may read (the rule: reviewapp.access.patches_readable_by)."""
    return patches_readable_by(user)


def patch_get_for_user(*, pk: int, user: Any) -> Patch:
    patch = patch_list_for_user(user).select_related("series", "submitted_by").filter(
        pk=pk).first()
    if patch is None:
        raise Http404("no such patch")
    return patch


def series_versions(series: Series, user: Any) -> list[Series]:
    """Every version of ``series`` the user may read, oldest first: walk ``previous`` back to
    the first version, then forward along ``next_versions`` (bounded; links can branch when
    two v3 were sent, both are listed)."""
    visible = series_list_for_user(user)
    root = series
    seen = {series.pk}
    for _ in range(50):
        prev = visible.filter(pk=root.previous_id).first() if root.previous_id else None
        if prev is None or prev.pk in seen:
            break
        seen.add(prev.pk)
        root = prev
    out = [root]
    frontier = [root.pk]
    seen = {root.pk}
    for _ in range(50):
        nxt = [s for s in visible.filter(previous_id__in=frontier).order_by("version", "created")
               if s.pk not in seen]
        if not nxt:
            break
        seen.update(s.pk for s in nxt)
        out.extend(nxt)
        frontier = [s.pk for s in nxt]
    return sorted(out, key=lambda s: (s.version, s.created, s.pk))


def series_comparisons(series_list: list[Series], user: Any) -> dict[int, list[Comparison]]:
    """The comparisons (visible to the user) of each series' patches, newest last."""
    qs = (comparison_list_for_user(user).filter(patch__series__in=series_list)
          .select_related("patch", "result").order_by("created", "pk"))
    out: dict[int, list[Comparison]] = {s.pk: [] for s in series_list}
    for cmp in qs:
        out.setdefault(cmp.patch.series_id, []).append(cmp)
    return out


#: The metrics the series page follows across versions (labels of workers.compare.METRICS).
KEY_LABELS = ("backward dispatches", "MB/s", "zero-seek share", "mean request", "r_await",
              "IOPS")


def _latest_compare(comparisons: list[Comparison]) -> tuple[Comparison | None, dict[str, Any]]:
    """The newest comparison with a finished comparison step, and its compare JSON."""
    results = {r.comparison_id: r for r in ComparisonResult.objects.filter(
        comparison__in=comparisons, state=c.JOB_STATE_SUCCEEDED).only(
        "comparison_id", "compare", "verdict")}  # one query, not one per comparison
    for cmp in reversed(comparisons):
        res = results.get(cmp.pk)
        if res is not None and res.compare:
            return cmp, res.compare
    return None, {}


def series_key_numbers(versions: list[Series], comparisons: dict[int, list[Comparison]]
                       ) -> dict[str, Any]:
    """Key I/O numbers of each version's newest finished comparison, v1 -> v2 -> v3.

    Returns ``{"columns": [{series, comparison, check}], "rows": [{device, label, unit,
    better, cells: [{baseline, patched, pct, verdict, step_pct, step_class} | None]}]}`` where
    ``step_pct`` is the patched value's change from the previous version that has the row, so
    the page shows which version moved the number (and ``step_class`` whether for the better).
    """
    columns = []
    per_version: list[dict[tuple[str, str], dict[str, Any]]] = []
    for s in versions:
        cmp, data = _latest_compare(comparisons.get(s.pk, []))
        rows = {}
        for m in data.get("metrics", []) if data else []:
            if m.get("label") in KEY_LABELS:
                rows[(str(m.get("device")), str(m.get("label")))] = m
        per_version.append(rows)
        columns.append({"series": s, "comparison": cmp,
                        "check": VERDICT_TO_CHECK.get(str((data.get("check") or {}).get(
                            "state")), None) if data else None})
    keys: list[tuple[str, str]] = []
    for rows in per_version:
        for k in rows:
            if k not in keys:
                keys.append(k)
    keys.sort(key=lambda k: (k[0], KEY_LABELS.index(k[1])))
    out_rows = []
    for dev, label in keys[:40]:
        cells: list[dict[str, Any] | None] = []
        prev_value = None
        unit = better = ""
        for rows in per_version:
            m = rows.get((dev, label))
            if m is None:
                cells.append(None)
                continue
            unit, better = m.get("unit", ""), m.get("better") or ""
            value = (m.get("patched") or {}).get("mean")
            step = None
            step_class = ""
            if prev_value not in (None, 0) and value is not None:
                step = 100.0 * (value - prev_value) / abs(prev_value)
                if better and abs(step) >= 0.05:
                    good = step > 0 if better == "higher" else step < 0
                    step_class = "better" if good else "worse"
            cells.append({"baseline": (m.get("baseline") or {}).get("mean"), "patched": value,
                          "pct": m.get("pct"), "verdict": m.get("verdict"), "step_pct": step,
                          "step_class": step_class})
            prev_value = value if value is not None else prev_value
        out_rows.append({"device": dev, "label": label, "unit": unit, "better": better,
                         "cells": cells})
    return {"columns": columns, "rows": out_rows}


def check_rollup(states: list[str]) -> str | None:
    """Worst of the states (fail > warning > pending > success), None when there are none."""
    if not states:
        return None
    return max(states, key=lambda s: c.CHECK_SEVERITY.get(s, 1))


def patch_checks(patch: Patch) -> list[Any]:
    """The current checks of a patch: the newest per (user, context), the comparison's own
    check as context ``blkreview-comparison`` (one per comparison) included."""
    from reviewapp.models import Check

    latest: dict[tuple[Any, str], Any] = {}
    for chk in Check.objects.filter(patch=patch).select_related("user").order_by("created", "pk"):
        latest[(chk.user_id, chk.context)] = chk
    return sorted(latest.values(), key=lambda x: x.context)


#: A comparison's check verdict as a Patchwork check state.
VERDICT_TO_CHECK = {"success": c.CHECK_STATE_SUCCESS, "warning": c.CHECK_STATE_WARNING,
                    "pass": c.CHECK_STATE_SUCCESS, "warn": c.CHECK_STATE_WARNING,
                    "fail": c.CHECK_STATE_FAIL, "error": c.CHECK_STATE_FAIL}


@dataclass(frozen=True)
class ComparisonCheck:
    """The comparison's own check, shown among a patch's checks (context
    ``constants.CHECK_CONTEXT_COMPARISON``); not a stored row, so it is never stale."""

    comparison: Comparison
    state: str
    description: str
    created: Any
    context: str = c.CHECK_CONTEXT_COMPARISON
    id: None = None
    user: None = None

    @property
    def target_url(self) -> str:
        return self.comparison.get_absolute_url()


def comparison_check(comparison: Comparison, result: Any = _UNSET) -> ComparisonCheck:
    """The comparison's own check (``result``: its ComparisonResult or None when the caller
    loaded it already, e.g. for many comparisons in one query)."""
    if result is _UNSET:
        result = ComparisonResult.objects.filter(comparison=comparison).only(
            "state", "verdict", "error", "finished").first()
    if comparison.status == c.COMPARISON_FAILED or (
            result is not None and result.state == c.JOB_STATE_FAILED):
        return ComparisonCheck(comparison, c.CHECK_STATE_FAIL,
                               f"comparison #{comparison.pk}: the analysis failed",
                               comparison.created)
    verdict = result.verdict if result is not None and result.state == c.JOB_STATE_SUCCEEDED \
        else None
    if not isinstance(verdict, dict):
        return ComparisonCheck(comparison, c.CHECK_STATE_PENDING,
                               f"comparison #{comparison.pk}: running", comparison.created)
    state = VERDICT_TO_CHECK.get(str(verdict.get("state")), c.CHECK_STATE_FAIL)
    reasons = [str(r) for r in verdict.get("reasons") or []]
    desc = f"comparison #{comparison.pk}: {verdict.get('state')}"
    if reasons:
        desc += " - " + "; ".join(reasons[:3])[:400]
    return ComparisonCheck(comparison, state, desc, result.finished or comparison.created)


def patch_checks_with_comparison(patch: Patch, user: Any) -> list[Any]:
    """Bots' current checks plus the newest visible comparison's own check."""
    checks = patch_checks(patch)
    cmp = comparison_list_for_user(user).filter(patch=patch).order_by("-created", "-pk").first()
    if cmp is not None:
        checks = [comparison_check(cmp), *checks]
    return checks


def series_check_rollup(series: Series, user: Any) -> str | None:
    """The roll-up of patch_checks_with_comparison over the series' patches, in four queries
    whatever the number of patches (issue 10 item 12)."""
    from reviewapp.models import Check

    patches = list(series.patches.values_list("pk", flat=True))
    latest: dict[tuple[Any, ...], Any] = {}
    for chk in Check.objects.filter(patch__in=patches).order_by("created", "pk"):
        latest[(chk.patch_id, chk.user_id, chk.context)] = chk
    newest: dict[int, Comparison] = {}
    for cmp in (comparison_list_for_user(user).filter(patch__in=patches)
                .order_by("created", "pk")):
        newest[cmp.patch_id] = cmp
    results = {r.comparison_id: r for r in ComparisonResult.objects.filter(
        comparison__in=list(newest.values())).only("comparison_id", "state", "verdict", "error",
                                                   "finished")}
    states = [comparison_check(cmp, results.get(cmp.pk)).state for cmp in newest.values()]
    states += [chk.state for chk in latest.values()]
    return check_rollup(states)


#: ``Fixes: <sha> ("subject")``: the abbreviated id and the quoted subject (both optional
#: past the id; kernel style is 12 hex digits and the subject in quotes and parentheses).
_FIXES_TAG_RE = re.compile(r'\s*([0-9a-fA-F]{7,40})\b\s*(?:\(\s*"?(.*?)"?\s*\)\s*)?$')
#: The shortest id matched against stored commit ids: kernel style (Documentation/process/
#: submitting-patches.rst asks for at least 12 characters); 7 would name several commits.
FIXES_MIN_SHA = 12


def parse_fixes_tag(tag: str) -> tuple[str, str]:
    """``(sha, subject)`` of one ``Fixes:`` value (lowercased sha; ``""`` for what it lacks)."""
    m = _FIXES_TAG_RE.match(str(tag))
    if not m:
        return "", ""
    return m.group(1).lower(), (m.group(2) or "").strip()


def fixes_matches(fixes: list[str], user: Any, *, exclude: int | None = None,
                  ) -> list[dict[str, Any]]:
    """For each ``Fixes: <sha> ("subject")`` tag: the known patch of the fixed commit and its
    comparisons ``user`` may read, newest first (their patched runs - the kernel with the
    fixed commit - are the natural baseline of the fixing patch).

    The fixed patch is one ``user`` may read whose own commit id (``Patch.commit``, from git
    format-patch's separator line) starts with the tag's sha (at least :data:`FIXES_MIN_SHA`
    hex digits), else the newest whose title is the quoted subject. ``match`` says which:
    ``"sha"`` (the subject agreeing or absent), ``"sha-subject-differs"``, or ``"subject"``.
    A patch's ``base_commit`` is not a match: it names the commit the patch applies on, not
    the patch itself. Tags that name no known patch are left out.
    """
    out = []
    readable = patch_list_for_user(user)
    if exclude is not None:
        readable = readable.exclude(pk=exclude)
    for tag in fixes or []:
        sha, subject = parse_fixes_tag(tag)
        if not sha and not subject:
            continue
        fixed, match = None, ""
        if len(sha) >= FIXES_MIN_SHA:
            fixed = readable.filter(commit__startswith=sha).order_by("-created", "-pk").first()
            if fixed is not None:
                same = not subject or fixed.title.strip().lower() == subject.lower()
                match = "sha" if same else "sha-subject-differs"
        if fixed is None and subject:
            fixed = (readable.filter(title__iexact=subject).order_by("-created", "-pk")
                     .first())
            match = "subject"
        if fixed is None:
            continue
        comps = list(comparison_list_for_user(user).filter(patch=fixed)
                     .order_by("-created", "-pk")[:10])
        out.append({"fixes": str(tag), "sha": sha, "subject": subject, "match": match,
                    "patch": fixed, "comparisons": comps})
    return out


def fixes_matches_data(offers: list[dict[str, Any]], user: Any,
                       absolute: Any = str) -> list[dict[str, Any]]:
    """:func:`fixes_matches` as JSON (the upload form's script and the patch API share the
    shape): each tag, how it matched, the fixed patch, and its comparisons with the patched
    runs ``user`` may use as a baseline (reviewapp.access.bundles_usable_by: a run seen only
    through a private comparison is not offered). ``absolute`` makes a path a full URL."""
    from reviewapp.access import bundles_usable_by

    usable = bundles_usable_by(user)
    out = []
    for o in offers:
        fixed = o["patch"]
        out.append({
            "fixes": o["fixes"], "sha": o["sha"], "subject": o["subject"], "match": o["match"],
            "patch": {"id": fixed.pk, "title": fixed.title, "version": fixed.version,
                      "commit": fixed.commit, "url": absolute(fixed.get_absolute_url())},
            "comparisons": [{
                "id": cmp.pk, "status": cmp.status, "created": cmp.created.isoformat(),
                "url": absolute(cmp.get_absolute_url()),
                "baseline_bundles": list(usable.filter(
                    pk__in=cmp.patched_bundles.values("pk")).order_by("pk")
                    .values_list("pk", flat=True)),
            } for cmp in o["comparisons"]],
        })
    return out


def fixes_offers(patch: Patch, user: Any) -> list[dict[str, Any]]:
    """:func:`fixes_matches` of ``patch``'s own ``Fixes:`` tags (the upload form's offers)."""
    return fixes_matches(list(patch.fixes or []), user, exclude=patch.pk)
def report_header(comparison: Comparison) -> Any:
    """The plain-text report's header (``workers.report.ReportHeader``) of a comparison.

    Kernels, workload and stack are the first bundle's of each side that names them; the
    URL is the page's path (the report view makes it absolute for the reader's host); the
    sides are "Before/After this patch" when the patch carries a Message-ID or its mail, or
    its title is a patch subject (``block: place split bios ...``).
    """
    from workers.report import ReportHeader

    sides = side_bundles(comparison)

    def first(side: str, attr: str) -> str:
        return next((str(getattr(b, attr)) for b in sides.get(side, []) if getattr(b, attr)), "")

    patch = comparison.patch
    return ReportHeader(
        title=str(patch), url=comparison.get_absolute_url(),
        baseline_kernel=first(c.ROLE_BASELINE, "kernel"),
        patched_kernel=first(c.ROLE_PATCHED, "kernel"),
        workload=first(c.ROLE_BASELINE, "workload"), stack=first(c.ROLE_BASELINE, "stack"),
        message_id=patch.message_id,
        has_patch=bool(patch.message_id or patch.raw or PATCH_SUBJECT.match(patch.title)))


#: A patch subject: ``subsystem: what`` or ``[PATCH v2 1/3] md/raid5: ...`` (a comparison titled
#: "raid5 reads on 6.1 vs 7.2: ..." is not one).
PATCH_SUBJECT = re.compile(r"^\s*(\[[^\]]*\]\s*)?[\w./-]+: \S")


# --- threads (issue 8) ----------------------------------------------------------------------

def thread_get_for_user(*, pk: int, user: Any) -> Any:
    """A thread whose comparison or patch the user may read, else Http404
    (reviewapp.access.thread_for_reader)."""
    from reviewapp.access import thread_for_reader

    thread = thread_for_reader(pk=pk, user=user)
    return type(thread).objects.select_related("comparison__patch", "patch", "created_by").get(
        pk=thread.pk)


def comment_get_for_user(*, pk: int, user: Any) -> Any:
    from reviewapp.models import Comment

    comment = Comment.objects.select_related("thread").filter(pk=pk).first()
    if comment is None:
        raise Http404("no such comment")
    thread_get_for_user(pk=comment.thread_id, user=user)
    return comment


def thread_list(*, comparison: Comparison | None = None, patch: Patch | None = None) -> list[Any]:
    """Threads with their comments (authors, revision counts) in three queries, oldest first.
    Empty general threads (the comparison's old plain "Discussion" without comments) are left
    out."""
    from django.db.models import Count, Prefetch

    from reviewapp.models import Comment, Thread

    qs = Thread.objects.all()
    qs = qs.filter(comparison=comparison) if comparison is not None else qs.filter(patch=patch)
    comments = Comment.objects.select_related("author").annotate(
        n_revisions=Count("revisions")).order_by("created", "pk")
    threads = list(qs.select_related("created_by", "resolved_by").prefetch_related(
        Prefetch("comments", queryset=comments)).order_by("created", "pk"))
    return [t for t in threads if t.comments.all()]


def unresolved_count(*, comparisons: Any = None, patches: Any = None) -> int:
    """Unresolved threads (with at least one comment) on these comparisons and patches."""
    from django.db.models import Q

    from reviewapp.models import Thread

    q = Q(pk__in=[])
    if comparisons is not None:
        q |= Q(comparison__in=comparisons)
    if patches is not None:
        q |= Q(patch__in=patches)
    return Thread.objects.filter(q, resolved=False, comments__isnull=False).distinct().count()


def patch_unresolved(patch: Patch, user: Any) -> int:
    return unresolved_count(comparisons=comparison_list_for_user(user).filter(patch=patch),
                            patches=[patch])


def series_unresolved(series: Series, user: Any) -> int:
    patches = list(series.patches.all())
    return unresolved_count(comparisons=comparison_list_for_user(user).filter(
        patch__in=patches), patches=patches)


def event_list_for_user(user: Any) -> QuerySet[Any]:
    """Events whose series, patch and comparison (those set) the user may read."""
    from django.db.models import Q

    from reviewapp.models import Event

    return Event.objects.filter(
        Q(series__isnull=True) | Q(series__in=series_list_for_user(user).values("pk")),
        Q(patch__isnull=True) | Q(patch__in=patch_list_for_user(user).values("pk")),
        Q(comparison__isnull=True) | Q(comparison__in=comparisons_readable_by(user).values("pk")),
    )


# --- one status for everything a comparison waits for (bundle analyses, then its step) -------

def comparison_step_of(comparison: Comparison) -> ComparisonResult | None:
    """The comparison step's row without its large fields (prefetched when the caller did)."""
    cache = getattr(comparison, "_prefetched_objects_cache", {})
    if "result" in cache or "result" in getattr(comparison._state, "fields_cache", {}):
        try:
            return comparison.result
        except ComparisonResult.DoesNotExist:
            return None
    return comparison_result(comparison)


def overall_status(comparison: Comparison, result: ComparisonResult | None) -> str:
    """``ready`` only when every bundle is analyzed AND the comparison step has succeeded;
    ``failed`` when a bundle's analysis or the step failed; else ``pending`` (nothing started)
    or ``running``. What a CI bot polls (README, docs/api.md)."""
    status = comparison.status
    if status != c.COMPARISON_READY:
        return status
    if result is None or result.state in (c.JOB_STATE_QUEUED, c.JOB_STATE_RUNNING):
        return c.COMPARISON_RUNNING
    return c.COMPARISON_FAILED if result.state == c.JOB_STATE_FAILED else c.COMPARISON_READY


def comparison_steps(comparison: Comparison, result: ComparisonResult | None = _UNSET
                     ) -> list[dict[str, Any]]:
    """Every step of the comparison once, in order: the latest analysis job of each bundle
    (baseline, then patched; a job shared by two rows is listed once) and the comparison step
    (``kind`` "compare", once it exists). Each: kind, id, bundle, side, state, progress,
    message, error, error_detail, created, started, finished, and the job row (``_obj``)."""
    if result is _UNSET:
        result = comparison_step_of(comparison)
    steps: list[dict[str, Any]] = []
    seen: set[int] = set()
    sides = ((c.ROLE_BASELINE, comparison.baseline_bundles),
             (c.ROLE_PATCHED, comparison.patched_bundles))
    for side, related in sides:
        for bundle in sorted(related.all(), key=lambda b: b.pk):  # prefetched when listed
            job = latest_job(bundle)
            if job is None or job.pk in seen:
                continue
            seen.add(job.pk)
            steps.append({"kind": c.JOB_KIND_ANALYZE, "id": job.pk, "bundle": bundle.pk,
                          "side": side, "state": job.state, "progress": job.progress,
                          "message": job.message, "error": job.error,
                          "error_detail": job.error_detail, "created": job.created,
                          "started": job.started, "finished": job.finished, "_obj": job})
    if result is not None:
        steps.append({"kind": "compare", "id": result.pk, "bundle": None, "side": None,
                      "state": result.state, "progress": result.progress,
                      "message": result.message, "error": result.error, "error_detail": None,
                      "created": result.created, "started": result.started,
                      "finished": result.finished, "_obj": result})
    return steps


def running_step(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The step the comparison waits for: the first running one, else the first queued."""
    for wanted in (c.JOB_STATE_RUNNING, c.JOB_STATE_QUEUED):
        for step in steps:
            if step["state"] == wanted:
                return {k: step[k] for k in ("kind", "id", "bundle", "side", "state", "progress",
                                             "message")}
    return None
