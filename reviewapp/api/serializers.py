"""Output shapes shared by the resource modules (flat, explicit fields: the schema is the code)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.reverse import reverse

from reviewapp import constants as c
from reviewapp.models import AnalysisJob, Comparison, Patch, TraceBundle, TraceFile
from reviewapp.selectors import comparison_step_of, comparison_steps, overall_status, running_step


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
        fields = ["id", "role", "name", "kernel", "stack", "limits", "workload", "strict", "checksum",
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


STATUS_HELP = ("pending | running | ready | failed: ready only when every bundle is analyzed "
               "and the comparison step has finished; what to poll")


class RunningStepOutput(serializers.Serializer):
    """The step a comparison is waiting for (a bundle's analysis job, or the comparison step)."""

    kind = serializers.ChoiceField(choices=c.STEP_KINDS)
    id = serializers.IntegerField()
    bundle = serializers.IntegerField(allow_null=True)
    side = serializers.CharField(allow_null=True)
    state = serializers.ChoiceField(choices=["queued", "running"])
    progress = serializers.IntegerField(min_value=0, max_value=100)
    message = serializers.CharField(allow_blank=True)


class StepOutput(serializers.Serializer):
    """One step of a comparison: a bundle's latest analysis job (``kind`` analyze, ``url`` the
    job) or the comparison step (``kind`` compare, ``bundle`` null, ``url`` the check)."""

    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=c.STEP_KINDS)
    bundle = serializers.IntegerField(allow_null=True)
    side = serializers.CharField(allow_null=True)
    state = serializers.ChoiceField(choices=c.STEP_STATES)
    progress = serializers.IntegerField(min_value=0, max_value=100)
    message = serializers.CharField(allow_blank=True)
    error = serializers.CharField(allow_blank=True)
    error_detail = NullableObjectField(help_text="file, line, offset, reason of a parse error")
    created = serializers.DateTimeField()
    started = serializers.DateTimeField(allow_null=True)
    finished = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField()


def steps_data(comparison: Comparison, request: Any) -> tuple[str, list[dict[str, Any]],
                                                               dict[str, Any] | None]:
    """``(overall status, steps, running step)`` of a comparison, as the API shows them."""
    result = comparison_step_of(comparison)
    steps = comparison_steps(comparison, result)
    out = []
    for step in steps:
        if step["kind"] == "compare":
            path = reverse("api-comparison-check", kwargs={"version": "v1", "pk": comparison.pk})
        else:
            path = reverse("api-job-detail", kwargs={"version": "v1", "pk": step["id"]})
        out.append({**{k: v for k, v in step.items() if k != "_obj"},
                    "url": absolute(request, path)})
    return overall_status(comparison, result), out, running_step(steps)


class ComparisonOutput(serializers.ModelSerializer):
    patch = PatchOutput(read_only=True)
    baseline = serializers.SerializerMethodField()
    patched = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField(help_text=STATUS_HELP)
    analysis_status = serializers.CharField(
        source="status", read_only=True,
        help_text="the bundle analyses only (ready: every bundle analyzed)")
    running = serializers.SerializerMethodField(
        help_text="the step being waited for, null when none is queued or running")
    jobs = serializers.SerializerMethodField(
        help_text="each bundle's latest analysis job once, then the comparison step")
    url = serializers.SerializerMethodField(help_text="the comparison page")
    api_url = serializers.SerializerMethodField()
    results_url = serializers.SerializerMethodField()

    class Meta:
        model = Comparison
        fields = ["id", "status", "analysis_status", "running", "policy", "thresholds",
                  "public", "patch", "baseline", "patched", "jobs", "created", "url", "api_url",
                  "results_url", "check_url", "analysis_url", "report_url"]

    thresholds = serializers.DictField(
        child=serializers.FloatField(),
        help_text="this comparison's overrides of settings.BLKREVIEW_CHECK_THRESHOLDS")
    check_url = serializers.SerializerMethodField(help_text="the CI check verdict")
    analysis_url = serializers.SerializerMethodField(
        help_text="compare + check + model panel results")
    report_url = serializers.SerializerMethodField(help_text="the plain-text report")

    def get_check_url(self, obj: Comparison) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-comparison-check", kwargs={"version": "v1", "pk": obj.pk}))

    def get_analysis_url(self, obj: Comparison) -> str:
        return absolute(self.context.get("request"),
                        reverse("api-comparison-analysis", kwargs={"version": "v1", "pk": obj.pk}))

    def get_report_url(self, obj: Comparison) -> str:
        return absolute(self.context.get("request"),
                        reverse("comparison-report", kwargs={"pk": obj.pk}))

    # Sides, jobs: read from the prefetch of selectors.comparisons_with_bundles when the view
    # made one (a list then costs a constant number of queries), else queried here.
    def get_baseline(self, obj: Comparison) -> list[int]:
        return sorted(b.pk for b in obj.baseline_bundles.all())

    def get_patched(self, obj: Comparison) -> list[int]:
        return sorted(b.pk for b in obj.patched_bundles.all())

    def _steps(self, obj: Comparison) -> tuple[str, list[dict[str, Any]], dict[str, Any] | None]:
        cache = self.__dict__.setdefault("_steps_cache", {})
        if obj.pk not in cache:
            cache[obj.pk] = steps_data(obj, self.context.get("request"))
        return cache[obj.pk]

    @extend_schema_field(serializers.ChoiceField(choices=["pending", "running", "ready",
                                                          "failed"]))
    def get_status(self, obj: Comparison) -> str:
        return self._steps(obj)[0]

    @extend_schema_field(RunningStepOutput(allow_null=True))
    def get_running(self, obj: Comparison) -> dict[str, Any] | None:
        return self._steps(obj)[2]

    @extend_schema_field(StepOutput(many=True))
    def get_jobs(self, obj: Comparison) -> list[dict[str, Any]]:
        return StepOutput(self._steps(obj)[1], many=True).data

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


class CompareStepOutput(serializers.Serializer):
    """The comparison step's life (queued / running / succeeded / failed)."""

    state = serializers.ChoiceField(choices=c.STEP_STATES)
    progress = serializers.IntegerField(min_value=0, max_value=100)
    message = serializers.CharField(allow_blank=True)
    error = serializers.CharField(allow_blank=True)
    started = serializers.DateTimeField(allow_null=True)
    finished = serializers.DateTimeField(allow_null=True)


class RuleOutput(serializers.Serializer):
    name = serializers.CharField(help_text="threshold name, e.g. rule_backward_rise")
    rule = serializers.CharField(help_text="the rule in words")
    level = serializers.IntegerField(help_text="0 off, 1 warning, 2 fail")


class CheckOutput(serializers.Serializer):
    """The CI check: success / warning / fail with reasons; pending until the step has run.

    The state comes from the mechanism rules marked unwanted (``rule_*`` thresholds) and from
    significant timing regressions; timing with too few runs says "needs more runs" in
    ``timing`` and never warns or fails."""

    comparison = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["pending", "running", "ready", "failed"],
                                     help_text=STATUS_HELP)
    analysis_status = serializers.CharField(
        help_text="the bundle analyses only (ready: every bundle analyzed)")
    running = RunningStepOutput(allow_null=True, help_text="the step being waited for")
    state = serializers.ChoiceField(
        choices=["success", "warning", "fail", "pending", "error"],
        help_text="pending: not computed yet; error: the comparison could not be computed")
    reasons = serializers.ListField(child=serializers.CharField())
    summary = serializers.CharField(
        allow_blank=True, help_text="the comparison in words: mechanism facts; timing verdict")
    timing = serializers.CharField(
        allow_blank=True,
        help_text="timing verdict: not judged (why) / needs more runs (how many) / statistics")
    notes = serializers.ListField(child=serializers.CharField(),
                                  help_text="model fidelity notes (never change the state)")
    rules = serializers.ListField(child=RuleOutput(), help_text="mechanism rules and levels")
    thresholds = serializers.DictField(child=serializers.FloatField(),
                                       help_text="the thresholds and rules the verdict used")
    verdict = NullableObjectField(help_text="the check as workers.compare returned it")
    step = CompareStepOutput(allow_null=True)
    url = serializers.CharField(help_text="the comparison page")
    report_url = serializers.CharField()


class AnalysisOutput(serializers.Serializer):
    """compare() output, check verdict and model panel of a comparison."""

    comparison = serializers.IntegerField()
    status = serializers.CharField()
    step = CompareStepOutput(allow_null=True)
    compare = NullableObjectField(help_text="workers.compare.compare output (docs/analyzers.md)")
    check = NullableObjectField(help_text="{state, reasons, thresholds}")
    model = NullableObjectField(
        help_text="model panel: state ok|error, policies, predicted_old/new results, fidelity")
    report_url = serializers.CharField()
    url = serializers.CharField()
