"""Shared API pieces: the JSON error shape and the upload size guard.

Every error is ``{"error": "<message>", "code": "<code>", "fields": {...}}`` with the HTTP status
400 (bad input), 401/403 (auth), 404, 413 (over BLKREVIEW_MAX_UPLOAD_MB) or 429 (throttled, or
over the daily upload quota: ``Retry-After`` header and ``retry_after`` seconds in the body).
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from reviewapp.services import ServiceError

#: Room for the metadata fields beside the files of a multipart request.
MULTIPART_SLACK = 1024 * 1024


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the upload is over the size limit"
    default_code = "too_large"


class ErrorSerializer(serializers.Serializer):
    """The one error shape of the API."""

    error = serializers.CharField()
    code = serializers.CharField()
    fields = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                   required=False)
    retry_after = serializers.IntegerField(
        required=False, help_text="429: seconds until the request may succeed (also the "
                                  "Retry-After header)")


def _flatten(detail: Any) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {_flatten(v)}" for k, v in detail.items())
    if isinstance(detail, list):
        return "; ".join(_flatten(v) for v in detail)
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, reshaped to ``{"error", "code", "fields"}``; ServiceError -> its status."""
    if isinstance(exc, ServiceError):
        body: dict[str, Any] = {"error": exc.message, "code": type(exc).__name__}
        if exc.field:
            body["fields"] = {exc.field: [exc.message]}
        headers = {}
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            body["retry_after"] = int(retry_after)
            headers["Retry-After"] = str(int(retry_after))
        return Response(body, status=exc.status, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        return Response({"error": f"the request body is over the upload limit of "
                                  f"{settings.BLKREVIEW_MAX_UPLOAD_BYTES // 2**20} MB per side",
                         "code": "too_large"}, status=413)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    body = {"error": _flatten(detail), "code": getattr(exc, "default_code", "error")}
    if isinstance(exc, exceptions.ValidationError) and isinstance(detail, dict):
        body["error"] = "invalid input: " + _flatten(detail)
        body["fields"] = {k: [str(x) for x in (v if isinstance(v, list) else [v])]
                          for k, v in detail.items()}
        body["code"] = "invalid"
    if isinstance(exc, exceptions.Throttled):
        body["code"] = "throttled"
        what = getattr(exc, "what", "too many requests")
        if exc.wait is not None:
            body["retry_after"] = math.ceil(exc.wait)
            body["error"] = f"request throttled: {what}; try again in {body['retry_after']} s"
        else:
            body["error"] = f"request throttled: {what}"
    response.data = body
    return response


class UploadApiView(APIView):
    """Refuses a request whose body is over the limit before reading it (413)."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if request.method == "POST":
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            limit = settings.BLKREVIEW_MAX_UPLOAD_BYTES
            # A submission carries two sides, each up to the limit.
            sides = getattr(self, "upload_sides", 1)
            if length > sides * limit + MULTIPART_SLACK:
                raise PayloadTooLarge(
                    f"request body of {length / 2**20:.1f} MB is over the upload limit of "
                    f"{limit // 2**20} MB per side"
                )
        super().initial(request, *args, **kwargs)
        if request.method == "POST":
            # over the daily quota already: refuse before the body is read (authenticated,
            # throttled and permitted by now; the body is parsed lazily)
            from reviewapp.services.limits import upload_quota_check

            upload_quota_check(user=request.user, count=getattr(self, "upload_sides", 1),
                               nbytes=max(0, length - MULTIPART_SLACK))


def files_of(request: Request, name: str) -> list[Any]:
    return [f for f in request.FILES.getlist(name) if f is not None]


def flag(value: object, default: bool = True) -> bool:
    """A multipart boolean ("1", "true", "on", ...); empty or missing gives ``default``."""
    if value is None or value == "":
        return default
    return str(value).strip().lower() in {"1", "true", "yes", "on"}
