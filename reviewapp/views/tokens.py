"""The user's own API tokens: create (key shown once) and revoke."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from reviewapp.forms import TokenForm
from reviewapp.models import ApiToken
from reviewapp.services import ServiceError
from reviewapp.services.tokens import token_create, token_revoke


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    new_key = None
    form = TokenForm()
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            try:
                days = form.cleaned_data.get("expires_in_days")
                _, new_key = token_create(
                    user=request.user, name=form.cleaned_data["name"],
                    scopes=form.cleaned_data["scopes"],
                    expires=timezone.now() + timedelta(days=days) if days else None)
                form = TokenForm()
            except ServiceError as exc:
                form.add_error(exc.field if exc.field in form.fields else "name", exc.message)
    tokens = ApiToken.objects.filter(user=request.user)
    response = render(request, "reviewapp/tokens.html",
                      {"tokens": tokens, "form": form, "new_key": new_key})
    if new_key:
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    try:
        token_revoke(token=token, user=request.user)
        messages.success(request, f"Token {token.name!r} revoked.")
    except ServiceError as exc:
        messages.error(request, exc.message)
    return redirect("token-list")
