"""Threads: start (on a comparison, chart region, metric row or diff line), reply, edit,
delete, resolve/reopen, the permalink page, and the notification opt-out page.

Every POST needs login and CSRF; every object is fetched through a selector that raises 404
when the user may not read it (private = 404). Form posts redirect back to the page the thread
lives on (``#thread-<id>``); with ``Accept: application/json`` they answer JSON instead.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from reviewapp import constants as c
from reviewapp.selectors import (
    comment_get_for_user,
    comparison_get_for_user,
    patch_get_for_user,
    thread_get_for_user,
)
from reviewapp.services import ServiceError
from reviewapp.services.notifications import notification_setting_set
from reviewapp.services.threads import (
    can_resolve,
    comment_create,
    comment_delete,
    comment_edit,
    thread_create,
    thread_set_resolved,
)


class ThreadForm(forms.Form):
    anchor_kind = forms.ChoiceField(choices=c.ANCHOR_KINDS, initial=c.ANCHOR_COMPARISON,
                                    required=False)
    anchor = forms.CharField(required=False, max_length=2000, widget=forms.HiddenInput)
    title = forms.CharField(required=False, max_length=200)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), max_length=20000,
                           label="Comment", help_text="Markdown; code blocks and trace lines "
                                                      "in monospace; @name mentions")


class BodyForm(forms.Form):
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=20000)


def thread_home(thread: Any) -> str:
    """Where a thread is shown: its comparison or patch page, at the thread."""
    page = thread.comparison.get_absolute_url() if thread.comparison_id else \
        thread.patch.get_absolute_url()
    return f"{page}#thread-{thread.pk}"


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _done(request: HttpRequest, thread: Any, ok: str) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"thread": thread.pk, "url": thread_home(thread),
                             "resolved": thread.resolved})
    messages.success(request, ok)
    return redirect(thread_home(thread))


def _failed(request: HttpRequest, back: str, message: str, status: int = 400) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"error": message}, status=status)
    messages.error(request, message)
    return redirect(back)


def _start(request: HttpRequest, *, comparison: Any = None, patch: Any = None) -> HttpResponse:
    back = (comparison or patch).get_absolute_url()
    form = ThreadForm(request.POST)
    if not form.is_valid():
        return _failed(request, back, "The comment is empty or too long.")
    d = form.cleaned_data
    try:
        anchor = json.loads(d["anchor"]) if d["anchor"] else {}
    except ValueError:
        return _failed(request, back, "anchor: not JSON")
    try:
        thread = thread_create(user=request.user, body=d["body"], comparison=comparison,
                               patch=patch, anchor_kind=d["anchor_kind"] or c.ANCHOR_COMPARISON,
                               anchor=anchor,
                               title=d["title"])
    except ServiceError as exc:
        return _failed(request, back, exc.message, exc.status)
    return _done(request, thread, "Thread started.")


@login_required
@require_POST
def comparison_thread_create(request: HttpRequest, pk: int) -> HttpResponse:
    return _start(request, comparison=comparison_get_for_user(pk=pk, user=request.user))


@login_required
@require_POST
def patch_thread_create(request: HttpRequest, pk: int) -> HttpResponse:
    return _start(request, patch=patch_get_for_user(pk=pk, user=request.user))


@require_safe
def thread_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The permalink page of one thread (anchor, numbers, comments, link back)."""
    from reviewapp.selectors import thread_list

    thread = thread_get_for_user(pk=pk, user=request.user)
    threads = thread_list(comparison=thread.comparison) if thread.comparison_id else \
        thread_list(patch=thread.patch)
    thread = next((t for t in threads if t.pk == thread.pk), thread)
    return render(request, "reviewapp/thread_detail.html", {
        "thread": thread, "home": thread_home(thread),
        "can_resolve": can_resolve(thread, request.user)})


@login_required
@require_POST
def thread_reply(request: HttpRequest, pk: int) -> HttpResponse:
    thread = thread_get_for_user(pk=pk, user=request.user)
    form = BodyForm(request.POST)
    if not form.is_valid():
        return _failed(request, thread_home(thread), "The reply is empty or too long.")
    try:
        comment_create(user=request.user, body=form.cleaned_data["body"], thread=thread)
    except ServiceError as exc:
        return _failed(request, thread_home(thread), exc.message, exc.status)
    return _done(request, thread, "Reply posted.")


@login_required
@require_POST
def thread_resolve(request: HttpRequest, pk: int) -> HttpResponse:
    thread = thread_get_for_user(pk=pk, user=request.user)
    if not can_resolve(thread, request.user):  # before reading the form: 403, as the API
        raise PermissionDenied("only the thread's starter or whoever may change its "
                               "comparison or patch can resolve it")
    resolved = request.POST.get("resolved", "1") in ("1", "true", "on")
    try:
        thread_set_resolved(thread=thread, user=request.user, resolved=resolved)
    except ServiceError as exc:
        return _failed(request, thread_home(thread), exc.message, exc.status)
    return _done(request, thread, "Thread resolved." if resolved else "Thread reopened.")


@login_required
@require_POST
def comment_edit_view(request: HttpRequest, pk: int) -> HttpResponse:
    comment = comment_get_for_user(pk=pk, user=request.user)
    if comment.author_id != request.user.pk:
        raise PermissionDenied("only its author can change a comment")
    form = BodyForm(request.POST)
    if not form.is_valid():
        return _failed(request, thread_home(comment.thread), "The comment is empty or too long.")
    try:
        comment_edit(comment=comment, user=request.user, body=form.cleaned_data["body"])
    except ServiceError as exc:
        return _failed(request, thread_home(comment.thread), exc.message, exc.status)
    return _done(request, comment.thread, "Comment edited.")


@login_required
@require_POST
def comment_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    comment = comment_get_for_user(pk=pk, user=request.user)
    if comment.author_id != request.user.pk:
        raise PermissionDenied("only its author can change a comment")
    try:
        comment_delete(comment=comment, user=request.user)
    except ServiceError as exc:
        return _failed(request, thread_home(comment.thread), exc.message, exc.status)
    return _done(request, comment.thread, "Comment deleted.")


@login_required
@require_safe
def comment_history(request: HttpRequest, pk: int) -> HttpResponse:
    """Earlier bodies of an edited comment (login required; same visibility as the thread)."""
    comment = comment_get_for_user(pk=pk, user=request.user)
    return render(request, "reviewapp/comment_history.html", {
        "comment": comment, "revisions": list(comment.revisions.order_by("created", "pk")),
        "home": thread_home(comment.thread)})


@login_required
def notification_settings(request: HttpRequest) -> HttpResponse:
    """Per-user opt-out of notification mail."""
    from reviewapp.models import NotificationSetting

    if request.method == "POST":
        notification_setting_set(user=request.user, mail=request.POST.get("mail") == "on")
        messages.success(request, "Saved.")
        return redirect("notification-settings")
    setting = NotificationSetting.objects.filter(user=request.user).first()
    return render(request, "reviewapp/notifications.html", {
        "mail": setting.mail if setting else True, "email": request.user.email})


def thread_context(request: HttpRequest, *, comparison: Any = None, patch: Any = None
                   ) -> dict[str, Any]:
    """What partials/threads.html needs: threads, unresolved count, the form, permissions."""
    from reviewapp.selectors import thread_list

    threads = thread_list(comparison=comparison, patch=patch)
    for t in threads:
        t.can_resolve = can_resolve(t, request.user)
    return {"threads": threads, "thread_form": ThreadForm(),
            "unresolved": sum(1 for t in threads if not t.resolved),
            "thread_target": comparison or patch, "thread_on_patch": comparison is None,
            "thread_create_url": (f"/comparisons/{comparison.pk}/threads/" if comparison
                                  else f"/patches/{patch.pk}/threads/")}


__all__ = ["Any", "thread_context"]
