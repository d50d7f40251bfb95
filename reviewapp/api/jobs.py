"""/api/v1/jobs/<id>/: state, progress 0-100 and the readable error of an analysis job."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp.api.base import ErrorSerializer
from reviewapp.api.serializers import JobOutput
from reviewapp.models import AnalysisJob


class JobDetailApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="job_retrieve",
                   responses={200: JobOutput, 401: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        job = get_object_or_404(AnalysisJob, pk=pk)
        return Response(JobOutput(job, context={"request": request}).data)
