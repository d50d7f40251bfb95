"""Data model: what was uploaded, what is being compared, what the worker produced.

Rows hold metadata and results JSON only; trace bytes live in Django storage under generated
names (TraceFile.storage_name), parsed EventTables as .npz beside them (BundleResult.events_name),
chart payloads as one object per comparison step (ComparisonChart.storage_name).
Writes go through ``reviewapp.services``; reads through ``reviewapp.selectors``.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.urls import reverse

from reviewapp import constants as c


class Series(models.Model):
    """One version of a patch series as sent to a list: the cover letter (0/N) and its patches.

    Versions of the same series are chained by ``previous`` (v1 <- v2 <- v3), linked
    automatically by :func:`reviewapp.services.series.series_link_previous` (In-Reply-To chain,
    b4 change-id, or the same subject stem and author, as b4 and Patchwork do) or by hand.
    """

    title = models.CharField(max_length=300)
    stem = models.CharField(max_length=300, db_index=True,
                            help_text="title lowercased, spaces collapsed: the linking key")
    version = models.PositiveSmallIntegerField(default=1)
    version_tag = models.CharField(max_length=40, blank=True, help_text="as sent: v2, RFC v2, V3")
    tree = models.CharField(max_length=40, blank=True, help_text="tree tag: -next, net-next")
    author = models.CharField(max_length=200, blank=True)
    author_email = models.CharField(max_length=200, blank=True, db_index=True)
    message_id = models.CharField(max_length=300, blank=True, db_index=True,
                                  help_text="the cover letter's (or the first patch's)")
    in_reply_to = models.CharField(max_length=300, blank=True)
    description = models.TextField(blank=True, help_text="the cover letter's body")
    total = models.PositiveSmallIntegerField(default=1)
    date = models.DateTimeField(null=True, blank=True)
    base_commit = models.CharField(max_length=64, blank=True)
    change_id = models.CharField(max_length=200, blank=True, db_index=True)
    previous = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="next_versions")
    link_reason = models.CharField(max_length=16, choices=c.LINK_REASONS, blank=True)
    public = models.BooleanField(default=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="series",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "series"

    def __str__(self) -> str:
        return f"[{self.version_tag}] {self.title}" if self.version_tag else self.title

    def get_absolute_url(self) -> str:
        return reverse("series-detail", args=[self.pk])


class Patch(models.Model):
    """The patch under review: typed in the form, or parsed from its mail (reviewapp.mbox),
    alone or as patch ``position`` of a :class:`Series`."""

    series = models.ForeignKey(Series, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="patches")
    position = models.PositiveSmallIntegerField(null=True, blank=True, help_text="m of [m/n]")
    title = models.CharField(max_length=300)
    version = models.CharField(max_length=40, blank=True, help_text="v2, V3, RFC ...")
    version_number = models.PositiveSmallIntegerField(default=1)
    author = models.CharField(max_length=200, blank=True)
    author_email = models.CharField(max_length=200, blank=True, db_index=True)
    message_id = models.CharField(max_length=300, blank=True, db_index=True)
    in_reply_to = models.CharField(max_length=300, blank=True)
    references = models.JSONField(default=list, blank=True)
    date = models.DateTimeField(null=True, blank=True)
    base_commit = models.CharField(max_length=64, blank=True)
    commit = models.CharField(
        max_length=40, blank=True, db_index=True,
        help_text="the patch's own commit id, from git format-patch's 'From <sha> Mon Sep 17 "
                  "00:00:00 2001' line: what a later 'Fixes: <sha>' names")
    fixes = models.JSONField(default=list, blank=True, help_text="Fixes: tags, one string each")
    trailers = models.JSONField(default=list, blank=True, help_text="[[key, value], ...]")
    body = models.TextField(blank=True, help_text="the commit message")
    diffstat = models.TextField(blank=True)
    diff = models.TextField(blank=True)
    insertions = models.PositiveIntegerField(default=0)
    deletions = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=20, choices=c.PATCH_STATES, default=c.PATCH_STATE_NEW)
    public = models.BooleanField(default=True)
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

    def get_absolute_url(self) -> str:
        return reverse("patch-detail", args=[self.pk])

    @property
    def commit_sha_prefixes(self) -> list[str]:
        """The abbreviated commit ids this patch's ``Fixes:`` tags name."""
        import re

        return [m.group(1).lower() for f in self.fixes
                for m in [re.match(r"\s*([0-9a-fA-F]{7,40})\b", str(f))] if m]


class TraceBundle(models.Model):
    """One uploaded run: the trace files of one kernel on one device stack and workload.

    One row per upload and uploader: the same bytes uploaded twice (by two users, or on both
    sides of one submission) are two bundles, each with its own metadata, names and uploader,
    so nobody learns that someone else uploaded the same bytes. Only the stored bytes are
    shared: a TraceFile whose sha256 is already in storage points at the stored copy
    (``storage_name``), and stored blobs are never deleted while a TraceFile refers to them.
    ``checksum`` is sha256 over the sorted sha256 of the files (not unique). ``role`` is what
    the uploader declared; the side a bundle is on is decided by the comparison that uses it.
    Who may read it: :mod:`reviewapp.access`.
    """

    role = models.CharField(max_length=16, choices=c.ROLES, default=c.ROLE_BASELINE)
    name = models.CharField(max_length=200, blank=True)
    kernel = models.CharField(max_length=100, blank=True, help_text="uname -r of the traced kernel")
    stack = models.TextField(blank=True, help_text="device stack, e.g. md raid5 of 8 HDDs, 64k chunk")
    limits = models.TextField(blank=True, help_text="queue limits, e.g. max_sectors_kb=1024")
    workload = models.TextField(blank=True, help_text="e.g. dd if=/dev/md0 bs=4480k iflag=direct")
    checksum = models.CharField(max_length=64, db_index=True)
    size = models.BigIntegerField(default=0)
    parse_status = models.CharField(max_length=16, choices=c.PARSE_STATES, default=c.PARSE_PENDING)
    parse_error = models.JSONField(null=True, blank=True)
    strict = models.BooleanField(
        default=False, help_text="a damaged binary record fails the analysis instead of being "
                                 "skipped with a warning (or strict = true in the manifest)")
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
        help_text="policy under test as field=value,... (the fields of docs/model.md \"Policy "
                  "fields\", python -m workers replay --list-policies): split_remainder=head",
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
    # delivery (docs/deploy.md, "Delivery guarantees"): each claim by a worker is an attempt;
    # only the current attempt may write, and a running attempt beats every few seconds.
    attempts = models.PositiveIntegerField(default=0, help_text="claims by a worker so far")
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="last sign of life")
    sent = models.DateTimeField(null=True, blank=True,
                                help_text="when the task was published (null: not yet)")
    pending_events_name = models.CharField(
        max_length=300, blank=True,
        help_text="EventTable .npz written by the current attempt, not yet in a result")

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
    attempts = models.PositiveIntegerField(default=0, help_text="claims by a worker so far")
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="last sign of life")
    sent = models.DateTimeField(null=True, blank=True,
                                help_text="when the task was published (null: not yet)")
    pending_charts_name = models.CharField(
        max_length=300, blank=True,
        help_text="chart object the running attempt is writing (deleted if it is lost)")

    def __str__(self) -> str:
        return f"comparison result {self.pk} ({self.state})"

    @property
    def is_final(self) -> bool:
        return self.state in c.JOB_FINAL_STATES


class ComparisonChart(models.Model):
    """Precomputed chart data of one page section for one device (and seek stage).

    The payload is JSON text in storage (MEDIA_ROOT or the S3 bucket, like the traces): the
    ``nbytes`` bytes at ``offset`` of the object ``storage_name``, which holds every payload
    of one comparison step (reviewapp/chartstore.py). The section endpoint serves those bytes as
    they are (no parse, no re-encode), from the cache or streamed from storage, so a stored
    comparison's sections are served in a few milliseconds whatever the trace size, and the
    database holds no chart bytes.
    """

    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="charts")
    section = models.CharField(max_length=32)
    dev = models.CharField(max_length=32)
    stage = models.CharField(max_length=4, blank=True)
    storage_name = models.CharField(max_length=300, blank=True,
                                    help_text="the comparison step's chart object in storage")
    offset = models.PositiveBigIntegerField(default=0, help_text="first byte of this payload")
    nbytes = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["comparison", "section", "dev", "stage"],
                                               name="chart_unique_key")]

    def __str__(self) -> str:
        return f"chart {self.section} {self.dev} {self.stage} of comparison {self.comparison_id}"


class Thread(models.Model):
    """A discussion anchored on a comparison (as a whole, a chart region or a metric row) or on
    a diff line of a patch. ``anchor`` holds the address (issue 11's URL state: ``dev``,
    ``stage``, ``section``, plus ``bucket``/``x0``/``x1`` for a chart region, ``metric`` for a
    row, ``file``/``line`` for a diff line); ``anchor_numbers`` the numbers the anchor showed
    when the thread started, so mail notifications read well without the page."""

    comparison = models.ForeignKey(Comparison, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="threads")
    patch = models.ForeignKey(Patch, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="threads")
    title = models.CharField(max_length=200, default="Discussion")
    anchor_kind = models.CharField(max_length=16, choices=c.ANCHOR_KINDS,
                                   default=c.ANCHOR_COMPARISON)
    anchor = models.JSONField(default=dict, blank=True)
    anchor_label = models.CharField(max_length=300, blank=True)
    anchor_numbers = models.JSONField(default=dict, blank=True)
    resolved = models.BooleanField(default=False)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("thread-detail", args=[self.pk])


class Comment(models.Model):
    """Markdown, rendered sanitized (reviewapp.markup). Edits keep the earlier bodies in
    :class:`CommentRevision`; a deleted comment stays as a tombstone (``deleted`` set, body
    emptied) so replies keep their place."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    body = models.TextField(max_length=20000, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    edited = models.DateTimeField(null=True, blank=True)
    deleted = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"comment {self.pk} by {self.author}"

    def get_absolute_url(self) -> str:
        return f"{reverse('thread-detail', args=[self.thread_id])}#comment-{self.pk}"


class CommentRevision(models.Model):
    """An earlier body of an edited comment."""

    comment = models.ForeignKey(Comment, on_delete=models.CASCADE, related_name="revisions")
    body = models.TextField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created"]


class Verdict(models.Model):
    """A reviewer's Reviewed-by / Tested-by / Acked-by / NAK on a patch or a whole series."""

    patch = models.ForeignKey(Patch, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="verdicts")
    series = models.ForeignKey(Series, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="verdicts")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="review_verdicts")
    kind = models.CharField(max_length=16, choices=c.VERDICT_KINDS)
    message = models.TextField(blank=True, max_length=5000)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"{c.VERDICT_TRAILER[self.kind]} by {self.user}"


class Check(models.Model):
    """A CI result on a patch, Patchwork's checks API: the newest check per (user, context)
    is the current one; a series rolls its patches' current checks up (worst state wins)."""

    patch = models.ForeignKey(Patch, on_delete=models.CASCADE, related_name="checks")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="checks")
    context = models.SlugField(max_length=100)
    state = models.CharField(max_length=16, choices=c.CHECK_STATES)
    description = models.TextField(blank=True, max_length=2000)
    target_url = models.URLField(blank=True, max_length=500)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "pk"]

    def __str__(self) -> str:
        return f"{self.context}: {self.state}"


class Event(models.Model):
    """Something that happened, for ``/api/v1/events/?since=`` and webhooks (Patchwork's
    Event). Written explicitly by the services, never by signals (style.md habit 8)."""

    kind = models.CharField(max_length=32, choices=c.EVENT_KINDS, db_index=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+")
    series = models.ForeignKey(Series, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="events")
    patch = models.ForeignKey(Patch, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="events")
    comparison = models.ForeignKey(Comparison, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="events")
    payload = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created", "pk"]

    def __str__(self) -> str:
        return f"{self.kind} at {self.created:%Y-%m-%d %H:%M:%S}"


class NotificationSetting(models.Model):
    """Per-user mail opt-out (no row = mail on)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="notification_setting")
    mail = models.BooleanField(default=True, help_text="mail me about threads I take part in "
                                                       "or am mentioned in")


class Webhook(models.Model):
    """A URL a user registered for some event kinds; deliveries are signed with ``secret``."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="webhooks")
    url = models.URLField(max_length=500)
    events = models.JSONField(default=list, help_text="event kinds; empty = all")
    secret = models.CharField(max_length=100)
    active = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"webhook {self.pk} -> {self.url}"


class WebhookDelivery(models.Model):
    """One event sent (or being sent) to one webhook: the delivery log."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    state = models.CharField(max_length=16, choices=c.WEBHOOK_DELIVERY_STATES,
                             default=c.WEBHOOK_DELIVERY_PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    last_attempt = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]


def _all_scopes() -> list[str]:
    return list(c.TOKEN_SCOPE_NAMES)


class ApiToken(models.Model):
    """A REST API token. Only its sha256 is stored; the key is shown once at creation.

    ``scopes`` limit what requests made with it may do (read / upload / check, see
    reviewapp.api.permissions.TokenScope); past ``expires`` (if set) it no longer
    authenticates, like a revoked one.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="first characters, to recognise a token")
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(default=_all_scopes, help_text="read, upload, check")
    expires = models.DateTimeField(null=True, blank=True, help_text="none: until revoked")

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def expired(self) -> bool:
        from django.utils import timezone

        return self.expires is not None and self.expires <= timezone.now()

    @property
    def active(self) -> bool:
        return self.revoked is None and not self.expired


class AccessGrant(models.Model):
    """Sharing a private object with a named user or a Django group, to read or to change it.

    Generic (content type + object id), so any shareable model uses the same rows: comparisons
    and patches today, series later. Who may read or change what is decided in one place,
    :mod:`reviewapp.access`; this row only records the owner's decision.
    """

    content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)
    object_id = models.PositiveBigIntegerField()
    target = GenericForeignKey("content_type", "object_id")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
        related_name="access_grants",
    )
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.CASCADE,
        related_name="access_grants",
    )
    level = models.CharField(max_length=8, choices=c.GRANT_LEVELS, default=c.GRANT_READ)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "pk"]
        indexes = [models.Index(fields=["content_type", "object_id"])]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(user__isnull=False, group__isnull=True)
                           | models.Q(user__isnull=True, group__isnull=False)),
                name="grant_user_xor_group"),
            models.UniqueConstraint(fields=["content_type", "object_id", "user"],
                                    name="grant_unique_user"),
            models.UniqueConstraint(fields=["content_type", "object_id", "group"],
                                    name="grant_unique_group"),
        ]

    def __str__(self) -> str:
        who = f"user {self.user}" if self.user_id else f"group {self.group}"
        return f"{self.level} for {who} on {self.content_type.model} {self.object_id}"
