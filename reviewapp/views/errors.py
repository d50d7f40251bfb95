"""Error pages that never need the database: 503 when a dependency is down, else 500.

Django calls :func:`server_error` (``handler500``) for any uncaught exception, from a view or a
middleware (the session or user lookup, say), with the exception still being handled. A
database that cannot be reached (``OperationalError`` / ``InterfaceError``: refused, restarted,
connections terminated) answers 503 with ``Retry-After``; anything else 500. The body is one
short sentence (JSON under /api/); the exception is logged by Django's ``django.request``
logger and here, never shown. The page is a fixed string, not a template: rendering a template
could touch the database again (the user, the messages).
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger(__name__)

UNAVAILABLE = "The service is temporarily unavailable (its database cannot be reached). Try again in a minute."
INTERNAL = "Internal error. It has been logged."

_PAGE = ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
         '</head><body><h1>{title}</h1><p>{text}</p></body></html>')


def database_unavailable(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, (OperationalError, InterfaceError)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _answer(request: HttpRequest, status: int, text: str, title: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        code = "unavailable" if status == 503 else "internal_error"
        response: HttpResponse = JsonResponse({"error": text, "code": code}, status=status)
    else:
        response = HttpResponse(_PAGE.format(title=title, text=text), status=status,
                                content_type="text/html; charset=utf-8")
    if status == 503:
        response["Retry-After"] = "30"
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: 503 for an unreachable database, 500 otherwise; details in the log only."""
    exc = sys.exc_info()[1]
    if database_unavailable(exc):
        log.error("database unavailable for %s %s: %s", request.method, request.path,
                  type(exc).__name__)
        return _answer(request, 503, UNAVAILABLE, "Service unavailable")
    return _answer(request, 500, INTERNAL, "Server error")
