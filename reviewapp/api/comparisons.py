"""/api/v1/comparisons/ (from bundle ids), /api/v1/submissions/ (patch + files in one call),
results, and adding runs to a side."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from reviewapp import constants as c
from reviewapp.access import bundles_usable_by, comparison_for_writer, patches_usable_by
from reviewapp.api.base import ErrorSerializer, UploadApiView, files_of
from reviewapp.api.bundles import bundle_results_data
from reviewapp.api.pagination import Pagination, paginated
from reviewapp.api.serializers import (
    AnalysisOutput,
    CheckOutput,
    ComparisonOutput,
    ComparisonResultsOutput,
    absolute,
    steps_data,
)
from reviewapp.models import ComparisonResult, TraceBundle
from reviewapp.selectors import (
    comparison_get_for_user,
    comparison_list_for_user,
    comparison_result,
    comparisons_with_bundles,
    side_bundles,
)
from reviewapp.services import UploadRejected
from reviewapp.services.comparisons import (
    comparison_add_bundles,
    comparison_create,
    submission_create,
)
from reviewapp.services.jobs import comparison_refresh_status
from reviewapp.services.patches import patch_create
from reviewapp.services.results import comparison_thresholds_set, effective_thresholds
from workers.compare import Thresholds


class ComparisonCreateInput(serializers.Serializer):
    patch = serializers.IntegerField(required=False, help_text="an existing patch id, or:")
    title = serializers.CharField(required=False, allow_blank=True, max_length=300)
    version = serializers.CharField(required=False, allow_blank=True, max_length=40)
    author = serializers.CharField(required=False, allow_blank=True, max_length=200)
    baseline = serializers.ListField(child=serializers.IntegerField(), min_length=1)
    patched = serializers.ListField(child=serializers.IntegerField(), min_length=1)
    policy = serializers.CharField(required=False, allow_blank=True, max_length=300)
    thresholds = serializers.DictField(
        child=serializers.FloatField(), required=False,
        help_text="overrides of the check thresholds, e.g. {\"throughput_drop_fail_pct\": 5}")
    public = serializers.BooleanField(
        required=False, default=lambda: settings.BLKREVIEW_DEFAULT_PUBLIC,
        help_text="default: the site's BLKREVIEW_DEFAULT_VISIBILITY (public unless set)")


class SubmissionInput(serializers.Serializer):
    title = serializers.CharField(required=False, allow_blank=True, max_length=300)
    version = serializers.CharField(required=False, allow_blank=True, max_length=40)
    author = serializers.CharField(required=False, allow_blank=True, max_length=200)
    mbox = serializers.FileField(required=False, help_text="the patch mail / mbox")
    patch = serializers.IntegerField(required=False,
                                     help_text="an existing patch (e.g. of a series) instead of "
                                               "title/mbox")
    baseline_files = serializers.ListField(child=serializers.FileField())
    patched_files = serializers.ListField(child=serializers.FileField())
    baseline_kernel = serializers.CharField(required=False, allow_blank=True, max_length=100)
    patched_kernel = serializers.CharField(required=False, allow_blank=True, max_length=100)
    stack = serializers.CharField(required=False, allow_blank=True)
    limits = serializers.CharField(required=False, allow_blank=True)
    workload = serializers.CharField(required=False, allow_blank=True)
    policy = serializers.CharField(required=False, allow_blank=True, max_length=300)
    thresholds = serializers.CharField(
        required=False, allow_blank=True, max_length=500,
        help_text="overrides of the check thresholds: name=value,... or a JSON object")
    public = serializers.BooleanField(
        required=False, default=lambda: settings.BLKREVIEW_DEFAULT_PUBLIC,
        help_text="default: the site's BLKREVIEW_DEFAULT_VISIBILITY (public unless set)")
    strict = serializers.BooleanField(required=False, default=False, help_text=(
        "fail the analysis on a damaged blktrace record instead of skipping it with a warning"))


class AddBundlesInput(serializers.Serializer):
    side = serializers.ChoiceField(choices=c.ROLES)
    bundles = serializers.ListField(child=serializers.IntegerField(), min_length=1)


def _bundles(ids: list[int], field: str, user: object) -> list[TraceBundle]:
    """The bundles ``ids`` if ``user`` may use them (reviewapp.access.bundles_usable_by); a
    bundle the user may not use is reported exactly like one that does not exist."""
    found = {b.pk: b for b in bundles_usable_by(user).filter(pk__in=ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise UploadRejected(f"{field}: no bundle with id {', '.join(map(str, missing))}",
                             field=field)
    return [found[i] for i in ids]


def _thresholds(value: object) -> object:
    """Multipart gives text: a JSON object or ``name=value,...`` (both accepted)."""
    if isinstance(value, str) and value.strip().startswith("{"):
        import json

        try:
            return json.loads(value)
        except ValueError:
            raise UploadRejected("thresholds: not a JSON object", field="thresholds") from None
    return value or None


def _step(result: ComparisonResult | None) -> dict[str, object] | None:
    if result is None:
        return None
    return {"state": result.state, "progress": result.progress, "message": result.message,
            "error": result.error, "started": result.started, "finished": result.finished}


def _flag(value: object, default: bool = True) -> bool:
    if value is None or value == "":
        return default
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


class ComparisonListCreateApi(APIView):
    """The comparisons the caller may read, newest first, paginated like every list
    (``?limit=``/``?offset=``; before the envelope this answered a bare array of the 100
    newest)."""

    pagination_class = Pagination

    @extend_schema(operation_id="comparison_list", responses={200: ComparisonOutput(many=True)})
    def get(self, request: Request, version: str) -> Response:
        qs: QuerySet = comparison_list_for_user(request.user).order_by("-created", "-pk")
        return paginated(self, request, qs, lambda page: ComparisonOutput(
            comparisons_with_bundles(page), many=True, context={"request": request}).data)

    @extend_schema(
        operation_id="comparison_create", request=ComparisonCreateInput,
        responses={201: ComparisonOutput, 400: ErrorSerializer, 401: ErrorSerializer},
    )
    def post(self, request: Request, version: str) -> Response:
        ser = ComparisonCreateInput(data=request.data)
        ser.is_valid(raise_exception=True)
        d = ser.validated_data
        baseline = _bundles(d["baseline"], "baseline", request.user)
        patched = _bundles(d["patched"], "patched", request.user)
        if d.get("patch"):
            patch = patches_usable_by(request.user).filter(pk=d["patch"]).first()
            if patch is None:
                raise UploadRejected(f"patch: no patch with id {d['patch']}", field="patch")
        else:
            patch = patch_create(title=d.get("title", ""), version=d.get("version", ""),
                                 author=d.get("author", ""), user=request.user)
        comparison = comparison_create(patch=patch, baseline=baseline, patched=patched,
                                       policy=d.get("policy", ""), public=d.get("public", settings.BLKREVIEW_DEFAULT_PUBLIC),
                                       user=request.user, thresholds=d.get("thresholds"))
        return Response(ComparisonOutput(comparisons_with_bundles([comparison])[0],
                                         context={"request": request}).data,
                        status=201)


class SubmissionCreateApi(UploadApiView):
    """Patch metadata + baseline files + patched files in one multipart call."""

    upload_sides = 2

    @extend_schema(
        operation_id="submission_create",
        request={"multipart/form-data": SubmissionInput},
        responses={201: ComparisonOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                   413: ErrorSerializer, 429: ErrorSerializer},
    )
    def post(self, request: Request, version: str) -> Response:
        d = request.data
        mail = request.FILES.get("mbox")
        patch = None
        if d.get("patch"):
            try:
                patch = patches_usable_by(request.user).filter(pk=int(d["patch"])).first()
            except (TypeError, ValueError):
                patch = None
            if patch is None:
                raise UploadRejected(f"patch: no patch with id {d['patch']}", field="patch")
        comparison, _ = submission_create(
            patch=patch,
            title=d.get("title", ""), version=d.get("version", ""), author=d.get("author", ""),
            mail=mail, baseline_files=files_of(request, "baseline_files"),
            patched_files=files_of(request, "patched_files"),
            baseline_kernel=d.get("baseline_kernel", ""), patched_kernel=d.get("patched_kernel", ""),
            stack=d.get("stack", ""), limits=d.get("limits", ""), workload=d.get("workload", ""),
            policy=d.get("policy", ""), public=_flag(d.get("public"), default=settings.BLKREVIEW_DEFAULT_PUBLIC),
            user=request.user,
            thresholds=_thresholds(d.get("thresholds")),
            strict=_flag(d.get("strict"), default=False),
        )
        return Response(ComparisonOutput(comparisons_with_bundles([comparison])[0],
                                         context={"request": request}).data,
                        status=201)


class ComparisonDetailApi(APIView):
    @extend_schema(operation_id="comparison_retrieve",
                   responses={200: ComparisonOutput, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        comparison = comparison_get_for_user(pk=pk, user=request.user)
        comparison_refresh_status(comparison=comparison)
        return Response(ComparisonOutput(comparisons_with_bundles([comparison])[0],
                                         context={"request": request}).data)


class ComparisonResultsApi(APIView):
    @extend_schema(operation_id="comparison_results",
                   responses={200: ComparisonResultsOutput, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        comparison = comparison_get_for_user(pk=pk, user=request.user)
        comparison_refresh_status(comparison=comparison)
        sides = side_bundles(comparison, state=True)
        return Response({
            "comparison": comparison.pk,
            "status": comparison.status,
            "url": absolute(request, comparison.get_absolute_url()),
            "baseline": [bundle_results_data(b) for b in sides[c.ROLE_BASELINE]],
            "patched": [bundle_results_data(b) for b in sides[c.ROLE_PATCHED]],
        })


class ComparisonAddBundlesApi(APIView):
    """More runs on one side: the owner and write grants only (403 to other readers, 404 to
    anyone who cannot read the comparison); only bundles the caller may use."""

    @extend_schema(operation_id="comparison_add_bundles", request=AddBundlesInput,
                   responses={200: ComparisonOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              403: ErrorSerializer, 404: ErrorSerializer})
    def post(self, request: Request, version: str, pk: int) -> Response:
        comparison = comparison_for_writer(pk=pk, user=request.user)
        ser = AddBundlesInput(data=request.data)
        ser.is_valid(raise_exception=True)
        bundles = _bundles(ser.validated_data["bundles"], "bundles", request.user)
        comparison_add_bundles(comparison=comparison, side=ser.validated_data["side"],
                               bundles=bundles)
        return Response(ComparisonOutput(comparisons_with_bundles([comparison])[0],
                                         context={"request": request}).data)


class ComparisonCheckApi(APIView):
    """The CI check: success / warning / fail with reasons (pending until computed)."""

    @extend_schema(operation_id="comparison_check",
                   responses={200: CheckOutput, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        comparison = comparison_get_for_user(pk=pk, user=request.user)
        comparison_refresh_status(comparison=comparison)
        result = comparison_result(comparison)
        verdict = result.verdict if result is not None else None
        if comparison.status == c.COMPARISON_FAILED:
            state, reasons = "error", ["the analysis of a bundle failed; see the jobs"]
        elif result is None or not result.is_final:
            state, reasons = "pending", []
        elif result.state == c.JOB_STATE_FAILED:
            state, reasons = "error", [result.error or "the comparison step failed"]
        elif isinstance(verdict, dict):
            state = str(verdict.get("state") or "error")
            if state not in ("success", "warning", "fail", "error"):
                state = "error"
            reasons = [str(r) for r in verdict.get("reasons") or []]
        else:
            state, reasons = "error", ["no check verdict was computed"]
        v = verdict if isinstance(verdict, dict) and state not in ("pending", "error") else {}
        thresholds = (verdict or {}).get("thresholds") or effective_thresholds(comparison)
        status, _, running = steps_data(comparisons_with_bundles([comparison])[0], request)
        return Response(CheckOutput({
            "comparison": comparison.pk, "status": status,
            "analysis_status": comparison.status, "running": running, "state": state,
            "reasons": reasons, "summary": str(v.get("summary") or ""),
            "timing": str(v.get("timing") or ""),
            "notes": [str(n) for n in v.get("notes") or []],
            "rules": v.get("rules") or Thresholds().with_overrides(
                {k: x for k, x in thresholds.items() if k in Thresholds.__dataclass_fields__}
            ).rules(),
            "thresholds": thresholds,
            "verdict": verdict, "step": _step(result),
            "url": absolute(request, comparison.get_absolute_url()),
            "report_url": absolute(request, reverse("comparison-report", args=[comparison.pk])),
        }).data)


class ComparisonAnalysisApi(APIView):
    """compare() output, the check verdict and the model panel of a comparison."""

    @extend_schema(operation_id="comparison_analysis",
                   responses={200: AnalysisOutput, 404: ErrorSerializer})
    def get(self, request: Request, version: str, pk: int) -> Response:
        comparison = comparison_get_for_user(pk=pk, user=request.user)
        comparison_refresh_status(comparison=comparison)
        result = comparison_result(comparison, full=True)
        done = result if result is not None and result.state == c.JOB_STATE_SUCCEEDED else None
        return Response(AnalysisOutput({
            "comparison": comparison.pk, "status": comparison.status, "step": _step(result),
            "compare": done.compare if done else None,
            "check": done.verdict if done else None,
            "model": done.model if done else None,
            "report_url": absolute(request, reverse("comparison-report", args=[comparison.pk])),
            "url": absolute(request, comparison.get_absolute_url()),
        }).data)


class ThresholdsInput(serializers.Serializer):
    thresholds = serializers.DictField(
        child=serializers.FloatField(),
        help_text="the complete set of overrides (replaces the previous ones; {} for defaults)")


class ComparisonThresholdsApi(APIView):
    """Replace a comparison's check thresholds (who may change it: reviewapp.access); the
    step runs again."""

    @extend_schema(operation_id="comparison_thresholds", request=ThresholdsInput,
                   responses={200: ComparisonOutput, 400: ErrorSerializer, 401: ErrorSerializer,
                              403: ErrorSerializer, 404: ErrorSerializer})
    def put(self, request: Request, version: str, pk: int) -> Response:
        comparison = comparison_for_writer(pk=pk, user=request.user)
        ser = ThresholdsInput(data=request.data)
        ser.is_valid(raise_exception=True)
        comparison_thresholds_set(comparison=comparison,
                                  thresholds=ser.validated_data["thresholds"])
        return Response(ComparisonOutput(comparisons_with_bundles([comparison])[0],
                                         context={"request": request}).data)
