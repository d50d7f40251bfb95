"""The sharing panel: the owner makes a comparison, patch or series public or private and shares
it with users and groups (a series grant reaches its patches) (reviewapp.services.grants; the rules: reviewapp.access)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from reviewapp import access
from reviewapp.forms import ShareForm
from reviewapp.services import ServiceError
from reviewapp.services.grants import grant_remove, grant_set, grantee_find, visibility_set


def _share(request: HttpRequest, obj: Any, back: str) -> HttpResponse:
    access.for_sharer(obj, request.user)  # 403 to readers who are not the owner
    form = ShareForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing to change: choose a user or group and a level.")
        return redirect(back)
    d = form.cleaned_data
    try:
        if d["action"] == "add":
            user, group = grantee_find(name=d.get("name") or "")
            grant_set(obj=obj, by=request.user, level=d.get("level") or "read", user=user,
                      group=group)
            messages.success(request, f"Shared with {d['name'].strip()} ({d.get('level')}).")
        elif d["action"] == "remove":
            grant_remove(obj=obj, by=request.user, grant_id=d.get("grant") or 0)
            messages.success(request, "No longer shared with them.")
        else:
            visibility_set(obj=obj, by=request.user, public=bool(d.get("public")))
            messages.success(request, "Now public: anyone can read it." if d.get("public")
                             else "Now private: only you and whom you share it with.")
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect(back)


@login_required
@require_POST
def comparison_sharing(request: HttpRequest, pk: int) -> HttpResponse:
    comparison = access.comparison_for_reader(pk=pk, user=request.user)
    return _share(request, comparison, f"{comparison.get_absolute_url()}#sharing")


@login_required
@require_POST
def patch_sharing(request: HttpRequest, pk: int) -> HttpResponse:
    patch = access.patch_for_reader(pk=pk, user=request.user)
    from django.urls import reverse

    return _share(request, patch, reverse("patch-detail", args=[patch.pk]) + "#sharing")


@login_required
@require_POST
def series_sharing(request: HttpRequest, pk: int) -> HttpResponse:
    series = access.series_for_reader(pk=pk, user=request.user)
    return _share(request, series, f"{series.get_absolute_url()}#sharing")


def sharing_context(obj: Any, user: Any) -> dict[str, Any]:
    """What the sharing panel shows (only to those who may share)."""
    from reviewapp.services.grants import grants_describe

    if not access.can_share(user, obj):
        return {"can_share": False}
    return {"can_share": True, "grants": grants_describe(obj), "share_form": ShareForm()}
