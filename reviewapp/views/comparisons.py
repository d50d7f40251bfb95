"""Upload form, comparison page, its progress JSON, comments and added runs."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from reviewapp import charts
from reviewapp.forms import AddRunsForm, CommentForm, UploadForm
from reviewapp.selectors import (
    comparison_get_for_user,
    comparison_jobs,
    comparison_progress,
    side_bundles,
    side_results,
)
from reviewapp.services import ServiceError
from reviewapp.services.bundles import bundle_create
from reviewapp.services.comparisons import comparison_add_bundles, submission_create
from reviewapp.services.threads import comment_create

FIELD_OF = {"baseline": "baseline_files", "patched": "patched_files", "mbox": "mbox",
            "title": "title", "policy": "policy"}


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    """The upload form; on success the browser lands on the comparison page."""
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES)
        if form.is_valid():
            d = form.cleaned_data
            try:
                comparison, _ = submission_create(
                    title=d["title"], version=d["version"], author=d["author"],
                    mail=d.get("mbox"), baseline_files=d["baseline_files"],
                    patched_files=d["patched_files"], baseline_kernel=d["baseline_kernel"],
                    patched_kernel=d["patched_kernel"], stack=d["stack"], limits=d["limits"],
                    workload=d["workload"],
                    policy=d["policy"], public=d["public"], user=request.user,
                )
            except ServiceError as exc:
                form.add_error(FIELD_OF.get(exc.field or "", None), exc.message)
                status = exc.status
            else:
                return redirect(comparison)
        else:
            status = 400
        return render(request, "reviewapp/upload.html", {"form": form}, status=status)
    return render(request, "reviewapp/upload.html", {"form": UploadForm(initial={"public": True})})


def detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Baseline vs patched side by side; readable without login when public."""
    comparison = comparison_get_for_user(pk=pk, user=request.user)
    results = side_results(comparison)
    devices = charts.comparison_view_model(results)
    figures = {f"{d.dev}|{key}": fig for d in devices for key, fig in d.figures.items()}
    thread = comparison.threads.order_by("created", "pk").first()
    comments = list(thread.comments.select_related("author")) if thread else []
    return render(request, "reviewapp/comparison.html", {
        "comparison": comparison,
        "patch": comparison.patch,
        "bundles": side_bundles(comparison),
        "jobs": comparison_jobs(comparison),
        "progress": comparison_progress(comparison),
        "devices": devices,
        "figures": figures,
        "comments": comments,
        "comment_form": CommentForm(),
        "add_runs_form": AddRunsForm(),
    })


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
    """Another run on either side of an existing comparison."""
    comparison = comparison_get_for_user(pk=pk, user=request.user)
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
