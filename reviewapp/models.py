"""Data model: what was uploaded, what is being compared, what the worker produced.

Rows hold metadata and results JSON only; trace bytes live in Django storage under generated
names (TraceFile.storage_name), parsed EventTables as .npz beside them (BundleResult.events_name).
Writes go through ``reviewapp.services``; reads through ``reviewapp.selectors``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from reviewapp import constants as c


class Patch(models.Model):
    """The patch under review, as typed in the form or parsed from its mail (reviewapp.mbox)."""

    title = models.CharField(max_length=300)
    version = models.CharField(max_length=40, blank=True, help_text="v2, V3, RFC ...")
    author = models.CharField(max_length=200, blank=True)
    message_id = models.CharField(max_length=300, blank=True, db_index=True)
    base_commit = models.CharField(max_length=64, blank=True)
    fixes = models.JSONField(default=list, blank=True, help_text="Fixes: tags, one string each")
    raw = models.TextField(blank=True, help_text="the patch mail as submitted")
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="patches",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"[{self.version}] {self.title}" if self.version else self.title


class TraceBundle(models.Model):
    """One uploaded run: the trace files of one kernel on one device stack and workload.

    Identified by ``checksum`` (sha256 over the sorted sha256 of its files), so the same bytes
    uploaded again are the same bundle. ``role`` is what the uploader declared; the side a
    bundle is on is decided by the comparison that uses it.
    """

    role = models.CharField(max_length=16, choices=c.ROLES, default=c.ROLE_BASELINE)
    name = models.CharField(max_length=200, blank=True)
    kernel = models.CharField(max_length=100, blank=True, help_text="uname -r of the traced kernel")
    stack = models.TextField(blank=True, help_text="device stack, e.g. md raid5 of 8 HDDs, 64k chunk")
    limits = models.TextField(blank=True, help_text="queue limits, e.g. max_sectors_kb=1024")
    workload = models.TextField(blank=True, help_text="e.g. dd if=/dev/md0 bs=4480k iflag=direct")
    checksum = models.CharField(max_length=64, unique=True)
    size = models.BigIntegerField(default=0)
    parse_status = models.CharField(max_length=16, choices=c.PARSE_STATES, default=c.PARSE_PENDING)
    parse_error = models.JSONField(null=True, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="bundles",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"bundle {self.pk} ({self.role}, {self.kernel or 'kernel ?'})"


class TraceFile(models.Model):
    """One file of a bundle. ``name`` is the client's file name (display only, path stripped);
    the bytes are at ``storage_name``, a generated name in Django storage."""

    bundle = models.ForeignKey(TraceBundle, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=255)
    format = models.CharField(max_length=40, blank=True)
    size = models.BigIntegerField()
    checksum = models.CharField(max_length=64, db_index=True)
    storage_name = models.CharField(max_length=300)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["bundle", "name"]

    def __str__(self) -> str:
        return self.name


class Comparison(models.Model):
    """A patch judged on one or more baseline runs against one or more patched runs."""

    patch = models.ForeignKey(Patch, on_delete=models.CASCADE, related_name="comparisons")
    baseline_bundles = models.ManyToManyField(TraceBundle, related_name="baseline_in")
    patched_bundles = models.ManyToManyField(TraceBundle, related_name="patched_in")
    policy = models.CharField(
        max_length=300, blank=True,
        help_text="policy under test, kernel-model.md section 7 names: split_remainder=head",
    )
    status = models.CharField(max_length=16, choices=c.COMPARISON_STATES, default=c.COMPARISON_PENDING)
    thresholds = models.JSONField(
        default=dict, blank=True,
        help_text="check thresholds overriding settings.BLKREVIEW_CHECK_THRESHOLDS for this "
                  "comparison, e.g. {\"throughput_drop_fail_pct\": 5}",
    )
    public = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="comparisons",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"comparison {self.pk}: {self.patch}"

    def get_absolute_url(self) -> str:
        return reverse("comparison-detail", args=[self.pk])


class AnalysisJob(models.Model):
    """One Celery task run: parse and analyze one bundle. Progress 0-100, readable error."""

    kind = models.CharField(max_length=16, choices=c.JOB_KINDS, default=c.JOB_KIND_ANALYZE)
    bundle = models.ForeignKey(TraceBundle, on_delete=models.CASCADE, related_name="jobs")
    state = models.CharField(max_length=16, choices=c.JOB_STATES, default=c.JOB_STATE_QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    message = models.CharField(max_length=200, blank=True, help_text="what the worker is doing")
    error = models.TextField(blank=True)
    error_detail = models.JSONField(null=True, blank=True, help_text="file, line, offset, reason")
    celery_task_id = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.state}, {self.progress}%)"

    @property
    def is_final(self) -> bool:
        return self.state in c.JOB_FINAL_STATES


class BundleResult(models.Model):
    """The analyzers' output for one bundle (results JSON of workers.analyzers.analyze)."""

    bundle = models.OneToOneField(TraceBundle, on_delete=models.CASCADE, related_name="result")
    job = models.ForeignKey(AnalysisJob, null=True, blank=True, on_delete=models.SET_NULL)
    data = models.JSONField()
    ingest = models.JSONField(default=dict, blank=True, help_text="files, warnings, manifest")
    events_name = models.CharField(max_length=300, blank=True, help_text="EventTable .npz in storage")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"result of {self.bundle}"


class ComparisonResult(models.Model):
    """The comparison-level step (issue 5): compare + check verdict (``verdict``) + model panel + report.

    Written by ``reviewapp.tasks.compare_comparison`` once every bundle of the comparison has
    results. ``inputs`` records which bundle results and thresholds it was computed from, so a
    new run on either side (or new thresholds) queues it again. The model panel's failure is
    stored in ``model`` (``{"state": "error", "error": ...}``) and never fails the step.
    """

    comparison = models.OneToOneField(Comparison, on_delete=models.CASCADE, related_name="result")
    state = models.CharField(max_length=16, choices=c.JOB_STATES, default=c.JOB_STATE_QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    message = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    celery_task_id = models.CharField(max_length=64, blank=True)
    inputs = models.JSONField(default=dict, blank=True, help_text="bundle result ids, thresholds")
    compare = models.JSONField(null=True, blank=True, help_text="workers.compare.compare output")
    verdict = models.JSONField(null=True, blank=True, help_text="check verdict: {state, reasons, thresholds}")
    model = models.JSONField(null=True, blank=True, help_text="model panel: predictions, fidelity")
    report = models.TextField(blank=True, help_text="workers.report.render_report text")
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"comparison result {self.pk} ({self.state})"

    @property
    def is_final(self) -> bool:
        return self.state in c.JOB_FINAL_STATES


class ComparisonChart(models.Model):
    """Precomputed chart data of one page section for one device (and seek stage).

    ``payload`` is the JSON text the section endpoint serves as is (no parse, no re-encode),
    so a stored comparison's sections are served in a few milliseconds whatever the trace size.
    """

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="charts")
    section = models.CharField(max_length=32)
    dev = models.CharField(max_length=32)
    stage = models.CharField(max_length=4, blank=True)
    payload = models.TextField()
    nbytes = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["comparison", "section", "dev", "stage"],
                                               name="chart_unique_key")]

    def __str__(self) -> str:
        return f"chart {self.section} {self.dev} {self.stage} of comparison {self.comparison_id}"


class Thread(models.Model):
    """A discussion on a comparison."""

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="threads")
    title = models.CharField(max_length=200, default="Discussion")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return self.title


class Comment(models.Model):
    """Plain text; rendered escaped."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    body = models.TextField(max_length=20000)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"comment {self.pk} by {self.author}"


class ApiToken(models.Model):
    """A REST API token. Only its sha256 is stored; the key is shown once at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="first characters, to recognise a token")
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked is None
