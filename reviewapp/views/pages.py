"""Home (recent comparisons) and the health check."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from reviewapp.selectors import comparison_list_for_user


def home(request: HttpRequest) -> HttpResponse:
    comparisons = comparison_list_for_user(request.user).order_by("-created")[:50]
    return render(request, "reviewapp/home.html", {"comparisons": comparisons})


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness + database reachability, for docker-compose's health check."""
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return JsonResponse({"status": "ok"})
    except Exception as exc:  # pragma: no cover - only when the database is down
        return JsonResponse({"status": "error", "error": str(exc)}, status=503)
