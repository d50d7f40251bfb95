"""/api/v1/bundles/: upload one run (multipart), read it, read its results."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp import constants as c
from reviewapp.access import bundle_for_reader
from reviewapp.api.base import ErrorSerializer, UploadApiView, files_of, flag
from reviewapp.api.permissions import TokenScope
from reviewapp.api.serializers import BundleOutput, BundleResultsOutput
from reviewapp.models import TraceBundle
from reviewapp.selectors import bundle_result_of, latest_job
from reviewapp.services import UploadRejected
from reviewapp.services.bundles import bundle_create


class BundleCreateInput(serializers.Serializer):
    files = serializers.ListField(child=serializers.FileField(), help_text=(
        "one or more trace files, or one .tar/.tar.gz/.tar.xz/.tar.zst/.zip archive"))
    role = serializers.ChoiceField(choices=c.ROLES, default=c.ROLE_BASELINE)
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    kernel = serializers.CharField(required=False, allow_blank=True, max_length=100)
    stack = serializers.CharField(required=False, allow_blank=True)
    limits = serializers.CharField(required=False, allow_blank=True)
    workload = serializers.CharField(required=False, allow_blank=True)
    strict = serializers.BooleanField(required=False, default=False, help_text=(
        "fail the analysis on a damaged blktrace record instead of skipping it with a warning"))


def bundle_results_data(bundle: TraceBundle) -> dict[str, Any]:
    result = bundle_result_of(bundle)  # select_related by side_bundles(state=True)
    job = latest_job(bundle)
    state = c.JOB_STATE_SUCCEEDED if result else (job.state if job else c.JOB_STATE_QUEUED)
    return {
        "bundle": bundle.pk, "state": state,
        "error": job.error if (job and not result and job.state == c.JOB_STATE_FAILED) else "",
        "results": result.data if result else None,
        "ingest": result.ingest if result else None,
    }


class BundleCreateApi(UploadApiView):
    """POST a bundle: always a new bundle of the caller (201), whatever the bytes; stored
    bytes are shared with earlier uploads of the same content, bundles never are."""

    permission_classes = [IsAuthenticated, TokenScope]

    @extend_schema(
        operation_id="bundle_create",
        request={"multipart/form-data": BundleCreateInput},
        responses={201: BundleOutput, 400: ErrorSerializer,
                   401: ErrorSerializer, 413: ErrorSerializer, 429: ErrorSerializer},
    )
    def post(self, request: Request, version: str) -> Response:
        data = request.data
        role = data.get("role") or c.ROLE_BASELINE
        if role not in dict(c.ROLES):
            raise UploadRejected(f"role must be one of {', '.join(dict(c.ROLES))}", field="role")
        bundle, _ = bundle_create(
            files=files_of(request, "files"), role=role,
            name=data.get("name", ""), kernel=data.get("kernel", ""),
            stack=data.get("stack", ""), limits=data.get("limits", ""),
            workload=data.get("workload", ""), user=request.user, side_label="files",
            strict=flag(data.get("strict"), default=False),
        )
        return Response(BundleOutput(bundle, context={"request": request}).data,
                        status=201)


class BundleDetailApi(APIView):
    """A bundle its uploader or a reader of a comparison containing it may see; else 404."""

    @extend_schema(operation_id="bundle_retrieve",
                   responses={200: BundleOutput, 401: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        bundle = bundle_for_reader(pk=pk, user=request.user)
        return Response(BundleOutput(bundle, context={"request": request}).data)


class BundleResultsApi(APIView):
    """Results of a bundle readable by the user (as :class:`BundleDetailApi`); else 404."""

    @extend_schema(operation_id="bundle_results",
                   responses={200: BundleResultsOutput, 401: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        bundle = bundle_for_reader(pk=pk, user=request.user)
        return Response(bundle_results_data(bundle))
