"""Series and patch pages: list, upload from mbox, versions side by side, patch detail."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from reviewapp import constants as c
from reviewapp.access import can_change_series, can_set_patch_state
from reviewapp.diffview import diff_lines
from reviewapp.models import Series, Verdict
from reviewapp.selectors import (
    comparison_list_for_user,
    event_list_for_user,
    patch_checks_with_comparison,
    patch_get_for_user,
    series_check_rollup,
    series_comparisons,
    series_get_for_user,
    series_key_numbers,
    series_list_for_user,
    series_unresolved,
    series_versions,
)
from reviewapp.services import ServiceError
from reviewapp.services.series import read_mail_upload, series_create_from_mail, series_relink
from reviewapp.views.sharing import sharing_context


class SeriesUploadForm(forms.Form):
    """An mbox / git-format-patch file, or the same text pasted."""

    mbox = forms.FileField(required=False, label="mbox or git-format-patch file",
                           help_text="git format-patch --cover-letter output, b4 am -o, or an "
                                     "mbox saved from lore (one version of one series)")
    text = forms.CharField(required=False, label="…or paste it",
                           widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}))
    public = forms.BooleanField(required=False, initial=True,
                                help_text="Public: anyone may read it. Private: only you (and "
                                          "the people you share it with).")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not data.get("mbox") and not (data.get("text") or "").strip():
            raise forms.ValidationError("Upload an mbox file or paste the patch mails.")
        return data


class RelinkForm(forms.Form):
    previous = forms.IntegerField(required=False, min_value=1,
                                  help_text="id of the earlier version; empty to unlink")


def series_list(request: HttpRequest) -> HttpResponse:
    series = (series_list_for_user(request.user).select_related("previous")
              .order_by("-created")[:100])
    return render(request, "reviewapp/series_list.html", {"series_list": series})


@login_required
def series_upload(request: HttpRequest) -> HttpResponse:
    """Create a series (and its patches) from mail; on success land on the series page."""
    form = (SeriesUploadForm(request.POST, request.FILES) if request.method == "POST"
            else SeriesUploadForm(initial={"public": True}))
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            d = form.cleaned_data
            try:
                data = read_mail_upload(d["mbox"]) if d.get("mbox") else d["text"].encode()
                series = series_create_from_mail(data=data, user=request.user,
                                                 public=d["public"],
                                                 field="mbox" if d.get("mbox") else "text")
            except ServiceError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
                status = exc.status
            else:
                return redirect(series)
    return render(request, "reviewapp/series_upload.html", {"form": form}, status=status)


@require_safe
def series_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Every version side by side, with the key I/O numbers of their comparisons."""
    series = series_get_for_user(pk=pk, user=request.user)
    versions = series_versions(series, request.user)
    comparisons = series_comparisons(versions, request.user)
    columns = []
    for s in versions:
        patches = list(s.patches.order_by("position", "pk"))
        columns.append({
            "series": s, "patches": patches, "comparisons": comparisons.get(s.pk, []),
            "check": series_check_rollup(s, request.user),
            "verdicts": list(s.verdicts.select_related("user")),
            "patch_verdicts": Verdict.objects.filter(patch__in=patches).count(),
            "current": s.pk == series.pk,
            "unresolved": series_unresolved(s, request.user),
        })
    return render(request, "reviewapp/series_detail.html", {
        "series": series, "columns": columns,
        "numbers": series_key_numbers(versions, comparisons),
        "relink_form": RelinkForm(initial={"previous": series.previous_id}),
        "verdict_form": VerdictForm(),
        "can_relink": can_change_series(request.user, series),
        "sharing": sharing_context(series, request.user),
    })


@login_required
@require_POST
def series_relink_view(request: HttpRequest, pk: int) -> HttpResponse:
    from reviewapp.access import series_for_writer

    series = series_for_writer(pk=pk, user=request.user)  # 404 unreadable, 403 read-only
    form = RelinkForm(request.POST)
    if not form.is_valid():
        messages.error(request, "previous: give a series id (or leave it empty to unlink).")
        return redirect(series)
    prev_id = form.cleaned_data.get("previous")
    previous = None
    if prev_id:
        previous = series_list_for_user(request.user).filter(pk=prev_id).first()
        if previous is None:
            messages.error(request, f"previous: no series #{prev_id}")
            return redirect(series)
    try:
        series_relink(series=series, previous=previous, user=request.user)
        messages.success(request, "Versions relinked." if previous else "Link removed.")
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect(series)


def patch_timeline(patch: Any, comparisons: list[Any], user: Any) -> list[dict[str, Any]]:
    """Uploads, jobs, comparisons, checks, comments and verdicts of a patch, oldest first.

    ``comparisons`` are the ones ``user`` may read. The events go through
    ``event_list_for_user`` too: an event of a private comparison on this (public) patch
    carries the patch as well, and would otherwise show its creator, its threads and their
    anchor summaries to everyone (private = nothing of it, as on the event API)."""
    from django.db.models import Q

    from reviewapp.models import AnalysisJob

    items: list[dict[str, Any]] = []
    events = event_list_for_user(user).filter(
        Q(patch=patch) | Q(comparison__in=comparisons)).select_related(
        "actor").order_by("created", "pk")[:300]
    for ev in events:
        items.append({"when": ev.created, "what": ev.get_kind_display(), "kind": ev.kind,
                      "who": ev.actor.get_username() if ev.actor else "",
                      "detail": ev.payload.get("summary", "") if isinstance(ev.payload, dict)
                      else ""})
    from reviewapp.models import Comparison

    # both sides of every comparison in two queries (not two per comparison)
    bundle_ids = [*Comparison.baseline_bundles.through.objects.filter(
        comparison__in=comparisons).values_list("tracebundle_id", flat=True),
        *Comparison.patched_bundles.through.objects.filter(
        comparison__in=comparisons).values_list("tracebundle_id", flat=True)]
    for job in AnalysisJob.objects.filter(bundle_id__in=bundle_ids).order_by("created")[:100]:
        items.append({"when": job.created, "what": f"analysis job #{job.pk} queued",
                      "kind": "job", "who": "", "detail": f"bundle #{job.bundle_id}"})
        if job.finished:
            items.append({"when": job.finished, "what": f"analysis job #{job.pk} {job.state}",
                          "kind": "job", "who": "", "detail": job.error[:200]})
    return sorted(items, key=lambda x: x["when"])


@require_safe
def patch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Metadata, highlighted diff (anchors per line), comparisons, verdicts, checks, timeline."""
    patch = patch_get_for_user(pk=pk, user=request.user)
    comparisons = list(comparison_list_for_user(request.user).filter(patch=patch)
                       .order_by("created", "pk"))
    siblings = []
    if patch.series_id:
        siblings = list(patch.series.patches.order_by("position", "pk").only(
            "pk", "position", "title"))
    from reviewapp.selectors import patch_unresolved
    from reviewapp.views.threads import thread_context

    return render(request, "reviewapp/patch_detail.html", {
        **thread_context(request, patch=patch),
        "unresolved_all": patch_unresolved(patch, request.user),
        "patch": patch, "series": patch.series if patch.series_id else None,
        "siblings": siblings, "comparisons": comparisons,
        "diff": diff_lines(patch.diff),
        "trailers": patch.trailers, "checks": patch_checks_with_comparison(patch, request.user),
        "verdicts": list(patch.verdicts.select_related("user")),
        "timeline": patch_timeline(patch, comparisons, request.user),
        "states": c.PATCH_STATES,
        "can_set_state": can_set_patch_state(request.user, patch),
        "verdict_form": VerdictForm(),
        "sharing": sharing_context(patch, request.user),
    })


__all__ = ["Series", "patch_detail", "series_detail", "series_list", "series_relink_view",
           "series_upload"]


class VerdictForm(forms.Form):
    kind = forms.ChoiceField(choices=c.VERDICT_KINDS)
    message = forms.CharField(required=False, max_length=5000,
                              widget=forms.Textarea(attrs={"rows": 2}))


def _record_verdict(request: HttpRequest, **target: Any) -> None:
    """Record the posted verdict on ``patch=`` or ``series=`` and say how it went."""
    from reviewapp.services.verdicts import verdict_set

    form = VerdictForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose Reviewed-by, Tested-by, Acked-by or NAK.")
        return
    try:
        verdict_set(user=request.user, kind=form.cleaned_data["kind"],
                    message=form.cleaned_data["message"], **target)
        messages.success(request, "Verdict recorded.")
    except ServiceError as exc:
        messages.error(request, exc.message)


@login_required
@require_POST
def patch_verdict(request: HttpRequest, pk: int) -> HttpResponse:
    patch = patch_get_for_user(pk=pk, user=request.user)
    _record_verdict(request, patch=patch)
    return redirect(f"{patch.get_absolute_url()}#verdicts")


@login_required
@require_POST
def series_verdict(request: HttpRequest, pk: int) -> HttpResponse:
    series = series_get_for_user(pk=pk, user=request.user)
    _record_verdict(request, series=series)
    return redirect(series)


def _text(body: str, name: str, inline: bool) -> HttpResponse:
    response = HttpResponse(body, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'{"inline" if inline else "attachment"}; filename="{name}"'
    return response


@require_safe
def patch_trailers(request: HttpRequest, pk: int) -> HttpResponse:
    """Trailer lines of the patch's verdicts and the plain-text report of its newest finished
    comparison, ready to paste into a reply."""
    from reviewapp.services.verdicts import verdict_export

    patch = patch_get_for_user(pk=pk, user=request.user)
    cmp = (comparison_list_for_user(request.user).filter(
        patch=patch, result__state=c.JOB_STATE_SUCCEEDED).order_by("-created", "-pk").first())
    report = ""
    if cmp is not None:
        from reviewapp.selectors import comparison_result

        res = comparison_result(cmp, full=True)
        report = res.report if res is not None else ""
    body = verdict_export(verdicts=list(patch.verdicts.select_related("user")), report=report)
    return _text(body, f"blkreview-patch-{patch.pk}-trailers.txt",
                 request.GET.get("inline") == "1")


@require_safe
def series_trailers(request: HttpRequest, pk: int) -> HttpResponse:
    """Series-wide trailers, then each patch's, then the newest finished comparison's report."""
    from reviewapp.services.verdicts import trailer_lines, verdict_export

    series = series_get_for_user(pk=pk, user=request.user)
    parts = [verdict_export(verdicts=list(series.verdicts.select_related("user")),
                            heading=f"# series: {series}").rstrip()]
    for p in series.patches.order_by("position", "pk"):
        lines = trailer_lines(list(p.verdicts.select_related("user")))
        if lines:
            parts.append(f"# [{p.position}/{series.total}] {p.title}\n" + "\n".join(lines))
    cmp = (comparison_list_for_user(request.user).filter(
        patch__series=series, result__state=c.JOB_STATE_SUCCEEDED)
        .order_by("-created", "-pk").first())
    if cmp is not None:
        from reviewapp.selectors import comparison_result

        res = comparison_result(cmp, full=True)
        if res is not None and res.report:
            parts.append(res.report.rstrip())
    return _text("\n\n".join(parts) + "\n", f"blkreview-series-{series.pk}-trailers.txt",
                 request.GET.get("inline") == "1")


@login_required
@require_POST
def patch_state(request: HttpRequest, pk: int) -> HttpResponse:
    """Change the patch's review state (submitter, write grants, staff, maintainers)."""
    from reviewapp.access import patch_for_state_setter
    from reviewapp.services.checks import patch_state_set

    patch = patch_for_state_setter(pk=pk, user=request.user)  # 404 unreadable, 403 read-only
    try:
        patch_state_set(patch=patch, user=request.user, state=request.POST.get("state", ""))
        messages.success(request, f"State: {patch.get_state_display()}.")
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect(patch)
