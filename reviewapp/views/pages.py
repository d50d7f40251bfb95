"""Home (recent comparisons) and the health check."""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from reviewapp.selectors import comparison_list_for_user

log = logging.getLogger(__name__)


def home(request: HttpRequest) -> HttpResponse:
    comparisons = comparison_list_for_user(request.user).order_by("-created")[:50]
    return render(request, "reviewapp/home.html", {"comparisons": comparisons})


def healthz(request: HttpRequest) -> JsonResponse:
    """Which dependency is up: ``{"status": "ok"|"unavailable", "database": "ok"|"down",
    "broker": ..., "storage": ...}``; 503 when any is down. No internals (addresses, driver
    errors) in the answer: they go to the log. docker-compose's health check polls it."""
    checks = {"database": _database_ok(), "broker": _broker_ok(), "storage": _storage_ok()}
    ok = all(checks.values())
    body = {"status": "ok" if ok else "unavailable",
            **{name: "ok" if up else "down" for name, up in checks.items()}}
    return JsonResponse(body, status=200 if ok else 503)


def _database_ok() -> bool:
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        return True
    except Exception:
        log.warning("healthz: database check failed", exc_info=True)
        return False


def _broker_ok() -> bool:
    from workers.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
        return True
    except Exception:
        log.warning("healthz: broker check failed", exc_info=True)
        return False


def _storage_ok() -> bool:
    from reviewapp.storage import storage_health

    return bool(storage_health()["ok"])
