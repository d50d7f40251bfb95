"""States and choices shared by models, services, API and templates."""

from __future__ import annotations

JOB_STATE_QUEUED = "queued"
JOB_STATE_RUNNING = "running"
JOB_STATE_SUCCEEDED = "succeeded"
JOB_STATE_FAILED = "failed"
JOB_STATES = (
    (JOB_STATE_QUEUED, "Queued"),
    (JOB_STATE_RUNNING, "Running"),
    (JOB_STATE_SUCCEEDED, "Succeeded"),
    (JOB_STATE_FAILED, "Failed"),
)
JOB_FINAL_STATES = (JOB_STATE_SUCCEEDED, JOB_STATE_FAILED)

JOB_KIND_ANALYZE = "analyze"
JOB_KINDS = ((JOB_KIND_ANALYZE, "Parse and analyze a bundle"),)

#: The steps of a comparison as the API lists them (a bundle's analysis job, or the comparison
#: step) and their states; plain values, one enum each in the OpenAPI schema
#: (settings.SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]).
STEP_KINDS = ("analyze", "compare")
STEP_STATES = (JOB_STATE_QUEUED, JOB_STATE_RUNNING, JOB_STATE_SUCCEEDED, JOB_STATE_FAILED)

ROLE_BASELINE = "baseline"
ROLE_PATCHED = "patched"
ROLES = ((ROLE_BASELINE, "Baseline"), (ROLE_PATCHED, "Patched"))

PARSE_PENDING = "pending"
PARSE_PARSED = "parsed"
PARSE_FAILED = "failed"
PARSE_STATES = ((PARSE_PENDING, "Pending"), (PARSE_PARSED, "Parsed"), (PARSE_FAILED, "Failed"))

COMPARISON_PENDING = "pending"
COMPARISON_RUNNING = "running"
COMPARISON_READY = "ready"
COMPARISON_FAILED = "failed"
COMPARISON_STATES = (
    (COMPARISON_PENDING, "Pending"),
    (COMPARISON_RUNNING, "Running"),
    (COMPARISON_READY, "Ready"),
    (COMPARISON_FAILED, "Failed"),
)

#: Archive suffixes accepted as "one bundle per side".
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.zst", ".tar.zstd", ".zip")

#: Celery task names (reviewapp/tasks.py). Services send by name (``app.send_task``); the
#: routes (settings.CELERY_TASK_ROUTES) match them. Stable: queued messages carry these names.
TASK_ANALYZE = "reviewapp.tasks.analyze_bundle"
TASK_COMPARE = "reviewapp.tasks.compare_comparison"
#: one file of a huge bundle parsed in parallel (reviewapp/shards.py), on the analysis queue
TASK_SHARD = "reviewapp.tasks.parse_shard"
#: the callback of a parallel ingest's chord: merges the shards' parts and analyzes
TASK_MERGE = "reviewapp.tasks.merge_shards"
#: Collaboration tasks (issue 8), sent to settings.BLKREVIEW_NOTIFY_QUEUE.
TASK_NOTIFY = "reviewapp.tasks.send_comment_notifications"
TASK_WEBHOOK = "reviewapp.tasks.deliver_webhook"

# --- collaboration (issue 8) ------------------------------------------------------------------

#: Patch states, Patchwork's names.
PATCH_STATE_NEW = "new"
PATCH_STATE_UNDER_REVIEW = "under-review"
PATCH_STATE_CHANGES_REQUESTED = "changes-requested"
PATCH_STATE_ACCEPTED = "accepted"
PATCH_STATE_REJECTED = "rejected"
PATCH_STATE_SUPERSEDED = "superseded"
PATCH_STATE_RFC = "rfc"
PATCH_STATES = (
    (PATCH_STATE_NEW, "New"),
    (PATCH_STATE_UNDER_REVIEW, "Under review"),
    (PATCH_STATE_CHANGES_REQUESTED, "Changes requested"),
    (PATCH_STATE_ACCEPTED, "Accepted"),
    (PATCH_STATE_REJECTED, "Rejected"),
    (PATCH_STATE_SUPERSEDED, "Superseded"),
    (PATCH_STATE_RFC, "RFC"),
)

#: How a series version was linked to the previous one.
LINK_NONE = ""
LINK_IN_REPLY_TO = "in-reply-to"
LINK_CHANGE_ID = "change-id"
LINK_SUBJECT = "subject"
LINK_MANUAL = "manual"
LINK_REASONS = (
    (LINK_NONE, "not linked"),
    (LINK_IN_REPLY_TO, "sent in reply to the earlier version"),
    (LINK_CHANGE_ID, "same b4 change-id"),
    (LINK_SUBJECT, "same subject and author"),
    (LINK_MANUAL, "linked by hand"),
)

#: Patchwork's check states.
CHECK_STATE_PENDING = "pending"
CHECK_STATE_SUCCESS = "success"
CHECK_STATE_WARNING = "warning"
CHECK_STATE_FAIL = "fail"
CHECK_STATES = (
    (CHECK_STATE_PENDING, "Pending"),
    (CHECK_STATE_SUCCESS, "Success"),
    (CHECK_STATE_WARNING, "Warning"),
    (CHECK_STATE_FAIL, "Fail"),
)
#: Roll-up order: the worst state wins (fail > warning > pending > success).
CHECK_SEVERITY = {CHECK_STATE_SUCCESS: 0, CHECK_STATE_PENDING: 1, CHECK_STATE_WARNING: 2,
                  CHECK_STATE_FAIL: 3}
#: The context under which a comparison's own check appears in the checks API.
CHECK_CONTEXT_COMPARISON = "blkreview-comparison"

#: Reviewer verdicts and the trailer each one exports as.
VERDICT_REVIEWED = "reviewed-by"
VERDICT_TESTED = "tested-by"
VERDICT_ACKED = "acked-by"
VERDICT_NAK = "nacked-by"
VERDICT_KINDS = (
    (VERDICT_REVIEWED, "Reviewed-by"),
    (VERDICT_TESTED, "Tested-by"),
    (VERDICT_ACKED, "Acked-by"),
    (VERDICT_NAK, "NAK"),
)
VERDICT_TRAILER = {VERDICT_REVIEWED: "Reviewed-by", VERDICT_TESTED: "Tested-by",
                   VERDICT_ACKED: "Acked-by", VERDICT_NAK: "Nacked-by"}

#: Event kinds (Patchwork's names where they exist), for /api/v1/events/ and webhooks.
EVENT_SERIES_CREATED = "series-created"
EVENT_PATCH_CREATED = "patch-created"
EVENT_PATCH_STATE_CHANGED = "patch-state-changed"
EVENT_SERIES_LINKED = "series-linked"
EVENT_CHECK_CREATED = "check-created"
EVENT_COMPARISON_CREATED = "comparison-created"
EVENT_THREAD_CREATED = "thread-created"
EVENT_COMMENT_CREATED = "comment-created"
EVENT_THREAD_RESOLVED = "thread-resolved"
EVENT_THREAD_REOPENED = "thread-reopened"
EVENT_VERDICT_CREATED = "verdict-created"
EVENT_KINDS = (
    (EVENT_SERIES_CREATED, "Series created"),
    (EVENT_PATCH_CREATED, "Patch created"),
    (EVENT_PATCH_STATE_CHANGED, "Patch state changed"),
    (EVENT_SERIES_LINKED, "Series version linked"),
    (EVENT_CHECK_CREATED, "Check created"),
    (EVENT_COMPARISON_CREATED, "Comparison created"),
    (EVENT_THREAD_CREATED, "Thread created"),
    (EVENT_COMMENT_CREATED, "Comment created"),
    (EVENT_THREAD_RESOLVED, "Thread resolved"),
    (EVENT_THREAD_REOPENED, "Thread reopened"),
    (EVENT_VERDICT_CREATED, "Verdict created"),
)

#: Thread anchors: what a discussion is about.
ANCHOR_COMPARISON = "comparison"
ANCHOR_CHART = "chart"
ANCHOR_METRIC = "metric"
ANCHOR_DIFF = "diff"
ANCHOR_KINDS = (
    (ANCHOR_COMPARISON, "the comparison"),
    (ANCHOR_CHART, "a chart region"),
    (ANCHOR_METRIC, "a metric row"),
    (ANCHOR_DIFF, "a diff line"),
)

WEBHOOK_DELIVERY_PENDING = "pending"
WEBHOOK_DELIVERY_SUCCEEDED = "succeeded"
WEBHOOK_DELIVERY_FAILED = "failed"
WEBHOOK_DELIVERY_STATES = (
    (WEBHOOK_DELIVERY_PENDING, "Pending"),
    (WEBHOOK_DELIVERY_SUCCEEDED, "Succeeded"),
    (WEBHOOK_DELIVERY_FAILED, "Failed"),
)
#: Levels of an AccessGrant (reviewapp.access): read, or read and change.
GRANT_READ = "read"
GRANT_WRITE = "write"
GRANT_LEVELS = ((GRANT_READ, "Read"), (GRANT_WRITE, "Read and change"))

#: Scopes of an API token: what a request made with it may do (reviewapp.api.permissions).
TOKEN_SCOPE_READ = "read"
TOKEN_SCOPE_UPLOAD = "upload"
TOKEN_SCOPE_CHECK = "check"
TOKEN_SCOPES = (
    (TOKEN_SCOPE_READ, "Read: GET every resource the user may read"),
    (TOKEN_SCOPE_UPLOAD, "Upload: bundles, submissions, comparisons, runs, thresholds, sharing"),
    (TOKEN_SCOPE_CHECK, "Check: post CI checks and verdicts"),
)
TOKEN_SCOPE_NAMES = tuple(s for s, _ in TOKEN_SCOPES)
