"""/api/v1/jobs/<id>/: state, progress 0-100 and the readable error of an analysis job."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp.access import job_for_reader
from reviewapp.api.base import ErrorSerializer
from reviewapp.api.serializers import JobOutput


class JobDetailApi(APIView):
    """A job of a bundle the user may read (reviewapp.access); else 404, like a missing id."""

    @extend_schema(operation_id="job_retrieve",
                   responses={200: JobOutput, 401: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        job = job_for_reader(pk=pk, user=request.user)
        return Response(JobOutput(job, context={"request": request}).data)
