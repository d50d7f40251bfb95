"""Output shapes shared by the resource modules (flat, explicit fields: the schema is the code)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.reverse import reverse

from reviewapp.models import AnalysisJob, Comparison, Patch, TraceBundle, TraceFile


@extend_schema_field({"type": ["object", "null"], "additionalProperties": True})
class NullableObjectField(serializers.JSONField):
    """A JSON object or null (documented as such; a bare JSONField documents as 'anything')."""


def absolute(request: Any, path: str) -> str:
    return request.build_absolute_uri(path) if request is not None else path


class JobOutput(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    error_detail = NullableObjectField(help_text="file, line, offset, reason of a parse error")

    class Meta:
        model = AnalysisJob
        fields = ["id", "kind", "bundle", "state", "progress", "message", "error", "error_detail",
                  "celery_task_id", "created", "started", "finished", "url"]

    def get_url(self, obj: AnalysisJob) -> str:
        request = self.context.get("request")
        return absolute(request, reverse("api-job-detail", kwargs={"version": "v1", "pk": obj.pk}))


class TraceFileOutput(serializers.ModelSerializer):
    class Meta:
        model = TraceFile
        fields = ["id", "name", "format", "size", "checksum"]


class BundleOutput(serializers.ModelSerializer):
    files = TraceFileOutput(many=True, read_only=True)
    parse_error = NullableObjectField()
    job = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    results_url = serializers.SerializerMethodField()
    has_results = serializers.SerializerMethodField()

    class Meta:
        model = TraceBundle
        fields = ["id", "role", "name", "kernel", "stack", "limits", "workload", "checksum",
                  "size", "parse_status", "parse_error", "created", "files", "job",
                  "has_results", "url", "results_url"]

    @extend_schema_field(JobOutput(allow_null=True))
    def get_job(self, obj: TraceBundle) -> dict[str, Any] | None:
        job = obj.jobs.order_by("-created", "-pk").first()
        return JobOutput(job, context=self.context).data if job else None

    def get_url(self, obj: TraceBundle) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-bundle-detail", kwargs={"version": "v1", "pk": obj.pk}))

    def get_results_url(self, obj: TraceBundle) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-bundle-results", kwargs={"version": "v1", "pk": obj.pk}))

    def get_has_results(self, obj: TraceBundle) -> bool:
        return hasattr(obj, "result")


class PatchOutput(serializers.ModelSerializer):
    fixes = serializers.ListField(child=serializers.CharField(), help_text="Fixes: tags")

    class Meta:
        model = Patch
        fields = ["id", "title", "version", "author", "message_id", "base_commit", "fixes",
                  "created"]


class ComparisonOutput(serializers.ModelSerializer):
    patch = PatchOutput(read_only=True)
    baseline = serializers.SerializerMethodField()
    patched = serializers.SerializerMethodField()
    jobs = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField(help_text="the comparison page")
    api_url = serializers.SerializerMethodField()
    results_url = serializers.SerializerMethodField()

    class Meta:
        model = Comparison
        fields = ["id", "status", "policy", "public", "patch", "baseline", "patched", "jobs",
                  "created", "url", "api_url", "results_url"]

    def get_baseline(self, obj: Comparison) -> list[int]:
        return list(obj.baseline_bundles.order_by("pk").values_list("pk", flat=True))

    def get_patched(self, obj: Comparison) -> list[int]:
        return list(obj.patched_bundles.order_by("pk").values_list("pk", flat=True))

    @extend_schema_field(JobOutput(many=True))
    def get_jobs(self, obj: Comparison) -> list[dict[str, Any]]:
        out = []
        for bundle in list(obj.baseline_bundles.order_by("pk")) + list(obj.patched_bundles.order_by("pk")):
            job = bundle.jobs.order_by("-created", "-pk").first()
            if job is not None:
                out.append(JobOutput(job, context=self.context).data)
        return out

    def get_url(self, obj: Comparison) -> str:
        return absolute(self.context.get("request"), obj.get_absolute_url())

    def get_api_url(self, obj: Comparison) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-comparison-detail", kwargs={"version": "v1", "pk": obj.pk}))

    def get_results_url(self, obj: Comparison) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-comparison-results", kwargs={"version": "v1", "pk": obj.pk}))


class BundleResultsOutput(serializers.Serializer):
    bundle = serializers.IntegerField()
    state = serializers.CharField(help_text="the latest job's state")
    error = serializers.CharField(allow_blank=True)
    results = NullableObjectField(help_text="workers.analyzers.analyze output (docs/analyzers.md)")
    ingest = NullableObjectField(help_text="files, warnings, manifest")


class ComparisonResultsOutput(serializers.Serializer):
    comparison = serializers.IntegerField()
    status = serializers.CharField()
    url = serializers.CharField()
    baseline = BundleResultsOutput(many=True)
    patched = BundleResultsOutput(many=True)
