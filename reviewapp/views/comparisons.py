"""Upload form, comparison page, its progress JSON, comments and added runs."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST, require_safe

from reviewapp import charts, chartstore
from reviewapp import constants as c
from reviewapp import sections as sec
from reviewapp.access import (
    bundles_usable_by,
    can_change_comparison,
    comparison_for_writer,
    patches_usable_by,
)
from reviewapp.forms import AddRunsForm, CommentForm, RulesForm, UploadForm, visibility_initial
from reviewapp.selectors import (
    chart_index,
    chart_ref,
    comparison_comments,
    comparison_get_for_user,
    comparison_progress,
    comparison_result,
    side_bundles,
    side_results,
)
from reviewapp.services import ServiceError
from reviewapp.services.bundles import bundle_create
from reviewapp.services.comparisons import comparison_add_bundles, submission_create
from reviewapp.services.threads import comment_create
from reviewapp.views.sharing import sharing_context

log = logging.getLogger(__name__)

FIELD_OF = {"baseline": "baseline_files", "patched": "patched_files", "mbox": "mbox",
            "title": "title", "policy": "policy", "thresholds": "thresholds"}


def _upload_patch(request: HttpRequest, value: Any) -> Any:
    """The existing patch the upload is for (``?patch=`` or the hidden field), if the user may
    use it (reviewapp.access.patches_usable_by: own, write-granted or public)."""
    try:
        pk = int(value)
    except (TypeError, ValueError):
        return None
    return patches_usable_by(request.user).filter(pk=pk).first()


def _baseline_from(request: HttpRequest, offers: list[dict[str, Any]], value: Any) -> list[Any]:
    """The patched runs of an offered comparison (Fixes:-aware pairing); [] when none."""
    if not value:
        return []
    for offer in offers:
        for cmp in offer["comparisons"]:
            if cmp.pk == value:
                # only runs the user may use: a run readable through a private comparison
                # shared with them would be published by a public comparison
                return list(bundles_usable_by(request.user).filter(
                    pk__in=cmp.patched_bundles.values("pk")).order_by("pk"))
    return []


def _mail_offers(request: HttpRequest, mail: Any) -> list[dict[str, Any]]:
    """Fixes:-aware pairing for a patch mail being uploaded (no patch exists yet): the offers
    of the ``Fixes:`` tags of its first mail; [] when it names none or cannot be read (the
    submission reports a bad mail itself)."""
    from reviewapp.selectors import fixes_matches
    from reviewapp.services.patches import patch_meta_from_upload

    if mail is None:
        return []
    try:
        meta, _ = patch_meta_from_upload(mail)
    except ServiceError:
        return []
    finally:
        mail.seek(0)
    return fixes_matches(list(meta.fixes), request.user)


@login_required
@require_POST
def upload_fixes(request: HttpRequest) -> JsonResponse:
    """``{"offers": [...]}`` for the patch mail chosen on the upload form (multipart
    ``mbox``): the form's script shows them as baseline choices before the upload."""
    from reviewapp.selectors import fixes_matches_data

    return JsonResponse({"offers": fixes_matches_data(
        _mail_offers(request, request.FILES.get("mbox")), request.user,
        request.build_absolute_uri)})


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    """The upload form; on success the browser lands on the comparison page.

    With ``?patch=<id>`` the comparison is for that (series) patch; when the patch, or the
    patch mail being uploaded, names ``Fixes:`` of a known patch (by commit id or subject,
    reviewapp.selectors.fixes_matches), that patch's comparisons are offered as the baseline.
    """
    from reviewapp.selectors import fixes_offers

    patch = _upload_patch(request, request.POST.get("patch") if request.method == "POST"
                          else request.GET.get("patch"))
    if patch is not None:
        offers = fixes_offers(patch, request.user)
    elif request.method == "POST":
        offers = _mail_offers(request, request.FILES.get("mbox"))
    else:
        offers = []
    from workers.model.device import PRESETS as DEVICE_PRESETS
    from workers.model.stack import KINDS

    ctx: dict[str, Any] = {"patch": patch, "fix_offers": offers, "stack_kinds": KINDS,
                           "device_types": tuple(DEVICE_PRESETS)}
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES)
        if form.is_valid():
            d = form.cleaned_data
            baseline = _baseline_from(request, offers, d.get("baseline_from"))
            if d.get("baseline_from") and not baseline:
                form.add_error("baseline_from", "Choose one of the offered comparisons.")
                return render(request, "reviewapp/upload.html", {**ctx, "form": form},
                              status=400)
            try:
                comparison, _ = submission_create(
                    patch=patch, baseline_bundles=baseline or None,
                    title=d["title"], version=d["version"], author=d["author"],
                    mail=d.get("mbox"), baseline_files=d["baseline_files"],
                    patched_files=d["patched_files"], baseline_kernel=d["baseline_kernel"],
                    patched_kernel=d["patched_kernel"], stack=d["stack"], limits=d["limits"],
                    workload=d["workload"],
                    policy=d["policy"], public=d["public"], user=request.user,
                    thresholds=d.get("thresholds") or None, strict=d.get("strict", False),
                )
            except ServiceError as exc:
                form.add_error(FIELD_OF.get(exc.field or "", None), exc.message)
                status = exc.status
            else:
                return redirect(comparison)
        else:
            status = 400
        return render(request, "reviewapp/upload.html", {**ctx, "form": form}, status=status)
    # the site's default visibility (BLKREVIEW_DEFAULT_VISIBILITY), or the patch's own
    initial: dict[str, Any] = {"public": visibility_initial(settings.BLKREVIEW_DEFAULT_PUBLIC)}
    if patch is not None:
        initial.update(patch=patch.pk, public=visibility_initial(patch.public))
    return render(request, "reviewapp/upload.html", {**ctx, "form": UploadForm(initial=initial)})


def stage_label(entry: dict[str, Any]) -> str:
    """"stage D" (or "stage G → D" when the sides differ) for the device selector."""
    stages = entry.get("stage") or {}
    if not isinstance(stages, dict):
        return ""
    b, p = ("/".join(stages.get(s) or []) for s in ("baseline", "patched"))
    if not (b or p):
        return ""
    return f"stage {b or p}" if b == p or not (b and p) else f"stage {b} → {p}"


def default_device(devices: list[dict[str, Any]]) -> str:
    """The device the page opens on: the first one analyzed at stage D on both sides (a disk
    whose dispatch order the patch is about), else the first one."""
    for d in devices:
        stages = d.get("stage") or {}
        if d.get("members"):
            continue  # the all-members view is one choice away, not the default
        if isinstance(stages, dict) and all(stages.get(s) == ["D"]
                                            for s in ("baseline", "patched")):
            return str(d["dev"])
    return str(devices[0]["dev"]) if devices else ""


@require_safe
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Baseline vs patched side by side; readable without login when public.

    Once the comparison step has run, the page is a frame: the check verdict, the report
    buttons, a device selector and one lazy section per analysis whose chart data is fetched
    from :func:`section` when it scrolls into view, so the HTML stays small and never loads
    results JSON. Before that, the observed histograms are drawn inline (issue 2's page).
    """
    comparison = comparison_get_for_user(pk=pk, user=request.user)
    result = comparison_result(comparison)
    lazy = result is not None and result.state == c.JOB_STATE_SUCCEEDED
    index = chart_index(comparison) if lazy else {}
    devices = [] if lazy else charts.comparison_view_model(side_results(comparison))
    figures = {f"{d.dev}|{key}": fig for d in devices for key, fig in d.figures.items()}
    comments = comparison_comments(comparison)
    bundles = side_bundles(comparison, files=True)
    index_devices = [{**d, "stage_label": stage_label(d)} for d in index.get("devices", [])]
    from reviewapp.views.threads import thread_context

    return render(request, "reviewapp/comparison.html", {
        **thread_context(request, comparison=comparison),
        "comparison": comparison,
        "patch": comparison.patch,
        "bundles": bundles,
        "progress": comparison_progress(comparison, bundles, result),
        "devices": devices,
        "figures": figures,
        "comments": comments,
        "comment_form": CommentForm(),
        "add_runs_form": AddRunsForm(),
        "can_change": can_change_comparison(request.user, comparison),
        "sharing": sharing_context(comparison, request.user),
        "result": result,
        "lazy": lazy,
        "index_devices": index_devices,
        "default_device": default_device(index_devices),
        "sections": sec.SECTIONS,
        "run_range": list(range(max([max((d.get("runs") or {}).values() or [1])
                                     for d in index_devices] or [1]))),
        "rules_form": RulesForm(rules=_rules_of(comparison)),
        "can_edit_rules": can_change_comparison(request.user, comparison),
    })


@require_GET
def section(request: HttpRequest, pk: int, section: str) -> HttpResponse:
    """One section's precomputed chart data (``?dev=8,0&stage=D``), served as stored.

    202 with ``{"pending": true}`` while the comparison step has not finished; 404 for an
    unknown section, device or stage.
    """
    comparison = comparison_get_for_user(pk=pk, user=request.user)
    if section not in sec.SECTION_IDS and section != "index":
        return JsonResponse({"error": f"unknown section {section!r}"}, status=404)
    stage = request.GET.get("stage", "").upper()
    if stage and (section != "seek" or stage not in sec.STAGES):
        return JsonResponse({"error": f"no stage {stage!r} for section {section}"}, status=404)
    ref = chart_ref(comparison=comparison, section=section, dev=request.GET.get("dev", ""),
                    stage=stage)
    if ref is None:
        result = comparison_result(comparison)
        if result is None or result.state != c.JOB_STATE_SUCCEEDED:
            return JsonResponse({"pending": True,
                                 "state": result.state if result else "pending"}, status=202)
        return JsonResponse({"error": "no such device or stage in this comparison"}, status=404)
    response: HttpResponse | StreamingHttpResponse
    try:
        if chartstore.cacheable(ref):
            response = HttpResponse(chartstore.read(ref), content_type="application/json")
        else:  # large: streamed from storage, never whole in this process
            response = StreamingHttpResponse(chartstore.chunks(ref),
                                             content_type="application/json")
            response["Content-Length"] = str(ref.nbytes)
    except OSError:
        log.exception("comparison %s: chart %s missing from storage", comparison.pk, ref.name)
        return JsonResponse({"error": "this chart's data is missing from storage; run the "
                             "comparison step again"}, status=404)
    response["Cache-Control"] = "private, max-age=60"
    return response


@require_GET
def report(request: HttpRequest, pk: int) -> HttpResponse:
    """The plain-text report (workers.report.render_report), ready to paste into a mail."""
    comparison = comparison_get_for_user(pk=pk, user=request.user)
    result = comparison_result(comparison, full=True)
    if result is None or result.state != c.JOB_STATE_SUCCEEDED or not result.report:
        raise Http404("the report is not ready")
    # the worker knows the page's path, not the host the reader uses: make it absolute
    path = comparison.get_absolute_url()
    text = result.report.replace(f"\n{path}\n", f"\n{request.build_absolute_uri(path)}\n", 1)
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    inline = request.GET.get("inline") == "1"
    response["Content-Disposition"] = (
        f'{"inline" if inline else "attachment"}; filename="blkreview-comparison-{pk}.txt"')
    return response


@require_GET
def progress(request: HttpRequest, pk: int) -> JsonResponse:
    """The small JSON the page polls while jobs run."""
    comparison = comparison_get_for_user(pk=pk, user=request.user)
    return JsonResponse(comparison_progress(comparison))


@login_required
@require_POST
def comment(request: HttpRequest, pk: int) -> HttpResponse:
    comparison = comparison_get_for_user(pk=pk, user=request.user)
    form = CommentForm(request.POST)
    if form.is_valid():
        try:
            comment_create(comparison=comparison, user=request.user, body=form.cleaned_data["body"])
        except ServiceError as exc:
            messages.error(request, exc.message)
    else:
        messages.error(request, "The comment is empty or too long.")
    return redirect(f"{comparison.get_absolute_url()}#comments")


@login_required
@require_POST
def add_runs(request: HttpRequest, pk: int) -> HttpResponse:
    """Another run on either side of an existing comparison (who may change it:
    reviewapp.access; 403 to other readers, 404 to anyone else)."""
    comparison = comparison_for_writer(pk=pk, user=request.user)
    form = AddRunsForm(request.POST, request.FILES)
    if form.is_valid():
        side = form.cleaned_data["side"]
        try:
            bundle, _ = bundle_create(files=form.cleaned_data["files"], role=side,
                                      kernel=form.cleaned_data["kernel"], user=request.user,
                                      side_label=side)
            comparison_add_bundles(comparison=comparison, side=side, bundles=[bundle])
            messages.success(request, f"Run added to the {side} side.")
        except ServiceError as exc:
            messages.error(request, exc.message)
    else:
        messages.error(request, "Choose a side and at least one file.")
    return redirect(comparison)


def _rules_of(comparison: Any) -> list[dict[str, Any]]:
    """The comparison's rules with the levels in effect (settings defaults + its overrides)."""
    from reviewapp.services.results import effective_thresholds
    from workers.compare import Thresholds

    th = effective_thresholds(comparison)
    return Thresholds().with_overrides(
        {k: v for k, v in th.items() if k in Thresholds.__dataclass_fields__}).rules()


@login_required
@require_POST
def rules(request: HttpRequest, pk: int) -> HttpResponse:
    """Set the mechanism rules of a comparison (who may change it: reviewapp.access, as for
    thresholds and runs; 403 to other readers, 404 to anyone else); the step runs again."""
    from reviewapp.services.results import comparison_thresholds_set

    comparison = comparison_for_writer(pk=pk, user=request.user)
    form = RulesForm(request.POST, rules=_rules_of(comparison))
    if not form.is_valid():
        messages.error(request, "Each rule is off, warning or fail.")
        return redirect(f"{comparison.get_absolute_url()}#check")
    overrides = dict(comparison.thresholds or {})
    overrides.update({name: float(level) for name, level in form.cleaned_data.items()})
    try:
        comparison_thresholds_set(comparison=comparison, thresholds=overrides)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Rules saved; the check is being computed again.")
    return redirect(f"{comparison.get_absolute_url()}#check")


@require_GET
def preset_diff(request: HttpRequest) -> JsonResponse:
    """``{"values": ["split_remainder=head", ...]}``: what the presets of two kernels set
    differently (the upload form preselects these policies). Unreadable versions give []."""
    from workers.model.presets import preset_difference

    base = request.GET.get("baseline", "")[:100]
    patched = request.GET.get("patched", "")[:100]
    return JsonResponse({"values": preset_difference(base, patched) if base and patched
                         else []})
