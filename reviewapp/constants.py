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
