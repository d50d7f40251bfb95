"""/api/v1/patches/<id>/verdicts/ and /api/v1/series/<id>/verdicts/: Reviewed-by, Tested-by,
Acked-by, NAK (the trailer line included)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp import constants as c
from reviewapp.api.base import ErrorSerializer
from reviewapp.api.pagination import Pagination, paginated
from reviewapp.models import Verdict
from reviewapp.selectors import patch_get_for_user, series_get_for_user
from reviewapp.services.verdicts import person, verdict_set


class VerdictOutput(serializers.ModelSerializer):
    user = serializers.CharField(source="user.get_username")
    trailer = serializers.SerializerMethodField(help_text="e.g. 'Tested-by: Name <email>'")

    class Meta:
        model = Verdict
        fields = ["id", "patch", "series", "user", "kind", "message", "trailer", "created"]

    def get_trailer(self, obj: Verdict) -> str:
        return f"{c.VERDICT_TRAILER[obj.kind]}: {person(obj.user)}"


class VerdictInput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=c.VERDICT_KINDS)
    message = serializers.CharField(required=False, allow_blank=True, max_length=5000)


class _Verdicts(APIView):
    pagination_class = Pagination

    def target(self, request: Request, pk: int) -> dict[str, Any]:
        raise NotImplementedError

    def get(self, request: Request, version: str, pk: int) -> Response:
        target = self.target(request, pk)
        qs = Verdict.objects.filter(**target).select_related("user").order_by("created", "pk")
        return paginated(self, request, qs, lambda page: VerdictOutput(page, many=True).data)

    def post(self, request: Request, version: str, pk: int) -> Response:
        target = self.target(request, pk)
        ser = VerdictInput(data=request.data)
        ser.is_valid(raise_exception=True)
        v = verdict_set(user=request.user, kind=ser.validated_data["kind"],
                        message=ser.validated_data.get("message", ""), **target)
        return Response(VerdictOutput(v).data, status=201)


class PatchVerdictsApi(_Verdicts):
    def target(self, request: Request, pk: int) -> dict[str, Any]:
        return {"patch": patch_get_for_user(pk=pk, user=request.user)}

    @extend_schema(operation_id="patch_verdicts_list",
                   responses={200: VerdictOutput(many=True), 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        return super().get(request, version, pk)

    @extend_schema(operation_id="patch_verdicts_create", request=VerdictInput,
                   responses={201: VerdictOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        return super().post(request, version, pk)


class SeriesVerdictsApi(_Verdicts):
    def target(self, request: Request, pk: int) -> dict[str, Any]:
        return {"series": series_get_for_user(pk=pk, user=request.user)}

    @extend_schema(operation_id="series_verdicts_list",
                   responses={200: VerdictOutput(many=True), 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        return super().get(request, version, pk)

    @extend_schema(operation_id="series_verdicts_create", request=VerdictInput,
                   responses={201: VerdictOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        return super().post(request, version, pk)
