"""/api/v1/comparisons/<id>/access/: who may see and change a comparison (its owner only).

GET answers ``{"public": bool, "grants": [{"id", "user" | "group", "level"}]}``; PUT sets
``public`` (when given) and replaces every grant (when ``grants`` is given). Readers who are
not the owner get 403; anyone who cannot read the comparison gets 404 (reviewapp.access).
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


class ComparisonAccessApi(APIView):
    """Visibility and grants of a comparison; the owner (and staff) only."""

    def _comparison(self, request: Request, pk: int) -> Any:
        comparison = access.comparison_for_reader(pk=pk, user=request.user)
        return access.for_sharer(comparison, request.user)

    @extend_schema(operation_id="comparison_access",
                   responses={200: AccessOutput, 403: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        return Response(access_data(self._comparison(request, pk)))

    @extend_schema(operation_id="comparison_access_set", request=AccessInput,
                   responses={200: AccessOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              403: ErrorSerializer, 404: ErrorSerializer})
    def put(self, request: Request, version: str, pk: int) -> Response:
        comparison = self._comparison(request, pk)
        ser = AccessInput(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        access_replace(obj=comparison, by=request.user, public=d.get("public"),
                       grants=d.get("grants"))
        return Response(access_data(comparison))
