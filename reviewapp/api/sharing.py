"""/api/v1/{comparisons,series,patches}/<id>/access/: who may see and change a comparison, a
series or a patch (its owner only).

GET answers ``{"public": bool, "grants": [{"id", "user" | "group", "level"}]}``; PUT sets
``public`` (when given) and replaces every grant (when ``grants`` is given). Readers who are
not the owner get 403; anyone who cannot read the object gets 404 (reviewapp.access). A grant
on a series reaches its patches too (reviewapp.access.patches_readable_by).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp import access
from reviewapp import constants as c
from reviewapp.api.base import ErrorSerializer
from reviewapp.services.grants import access_replace, grants_describe


class GrantSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    user = serializers.CharField(required=False, allow_null=True, allow_blank=True,
                                 help_text="a user name (or give group)")
    group = serializers.CharField(required=False, allow_null=True, allow_blank=True,
                                  help_text="a Django group name (or give user)")
    level = serializers.ChoiceField(choices=c.GRANT_LEVELS, default=c.GRANT_READ,
                                    help_text="read, or write (read and change)")


class AccessInput(serializers.Serializer):
    public = serializers.BooleanField(required=False, help_text="omit to keep it as is")
    grants = GrantSerializer(many=True, required=False,
                             help_text="the complete list (replaces the previous one)")


class AccessOutput(serializers.Serializer):
    public = serializers.BooleanField()
    grants = GrantSerializer(many=True)


def access_data(obj: Model) -> dict[str, Any]:
    return {"public": bool(obj.public), "grants": grants_describe(obj)}  # type: ignore[attr-defined]


class _AccessApi(APIView):
    """Visibility and grants of one shareable object; the owner (and staff) only."""

    #: ``reviewapp.access.*_for_reader``: the object or 404.
    reader: Any = None

    def _object(self, request: Request, pk: int) -> Any:
        obj = self.reader(pk=pk, user=request.user)
        return access.for_sharer(obj, request.user)  # 403 to readers who are not the owner

    def get(self, request: Request, version: str, pk: int) -> Response:
        return Response(access_data(self._object(request, pk)))

    def put(self, request: Request, version: str, pk: int) -> Response:
        obj = self._object(request, pk)
        ser = AccessInput(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        access_replace(obj=obj, by=request.user, public=d.get("public"), grants=d.get("grants"))
        return Response(access_data(obj))


_ERRORS = {403: ErrorSerializer, 404: ErrorSerializer}
_PUT = {200: AccessOutput, 400: ErrorSerializer, 401: ErrorSerializer, **_ERRORS}


class ComparisonAccessApi(_AccessApi):
    """Visibility and grants of a comparison; the owner (and staff) only."""

    reader = staticmethod(access.comparison_for_reader)

    @extend_schema(operation_id="comparison_access", responses={200: AccessOutput, **_ERRORS})
    def get(self, request: Request, version: str, pk: int) -> Response:
        return super().get(request, version, pk)

    @extend_schema(operation_id="comparison_access_set", request=AccessInput, responses=_PUT)
    def put(self, request: Request, version: str, pk: int) -> Response:
        return super().put(request, version, pk)


class SeriesAccessApi(_AccessApi):
    """Visibility and grants of a series; the owner (and staff) only. A grant on a series
    reaches its patches (their pages, threads, checks and verdicts) at the same level."""

    reader = staticmethod(access.series_for_reader)

    @extend_schema(operation_id="series_access", responses={200: AccessOutput, **_ERRORS})
    def get(self, request: Request, version: str, pk: int) -> Response:
        return super().get(request, version, pk)

    @extend_schema(operation_id="series_access_set", request=AccessInput, responses=_PUT)
    def put(self, request: Request, version: str, pk: int) -> Response:
        return super().put(request, version, pk)


class PatchAccessApi(_AccessApi):
    """Visibility and grants of a patch; the owner (and staff) only."""

    reader = staticmethod(access.patch_for_reader)

    @extend_schema(operation_id="patch_access", responses={200: AccessOutput, **_ERRORS})
    def get(self, request: Request, version: str, pk: int) -> Response:
        return super().get(request, version, pk)

    @extend_schema(operation_id="patch_access_set", request=AccessInput, responses=_PUT)
    def put(self, request: Request, version: str, pk: int) -> Response:
        return super().put(request, version, pk)
