"""``manage.py cleanup_storage``: find stored files that no row refers to (orphans).

    manage.py cleanup_storage                 # dry run: list orphans and their sizes
    manage.py cleanup_storage --delete        # delete them

Looks at ``traces/`` (uploaded files; referenced by TraceFile.storage_name), ``tables/``
(parsed EventTables; referenced by BundleResult.events_name, or by a running job that is
writing one) and ``charts/`` (chart payloads of a comparison step; referenced by
ComparisonChart.storage_name, or by a running step writing one; a deleted comparison leaves
its object here). Files younger than ``--min-age`` minutes (default 60) are never reported: an
upload or a job may be writing them right now. Works through Django's storage API, so it
covers whatever storage backend is configured. Exit status 0.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.files.storage import default_storage
from django.core.management.base import BaseCommand
from django.utils import timezone

from reviewapp.models import (
    AnalysisJob,
    BundleResult,
    ComparisonChart,
    ComparisonResult,
    TraceFile,
)

PREFIXES = ("traces", "tables", "charts")


def _walk(prefix: str) -> list[str]:
    out: list[str] = []
    try:
        dirs, files = default_storage.listdir(prefix)
    except (FileNotFoundError, NotADirectoryError, OSError):
        return out
    out += [f"{prefix}/{f}" for f in files]
    for d in dirs:
        out += _walk(f"{prefix}/{d}")
    return out


def find_orphans(*, min_age: timedelta) -> list[str]:
    """Stored names under traces/, tables/ and charts/ that no row refers to, older than
    ``min_age``."""
    referenced = set(TraceFile.objects.values_list("storage_name", flat=True))
    referenced |= set(BundleResult.objects.exclude(events_name="")
                      .values_list("events_name", flat=True))
    referenced |= set(AnalysisJob.objects.exclude(pending_events_name="")
                      .values_list("pending_events_name", flat=True))
    referenced |= set(ComparisonChart.objects.exclude(storage_name="")
                      .values_list("storage_name", flat=True).distinct())
    referenced |= set(ComparisonResult.objects.exclude(pending_charts_name="")
                      .values_list("pending_charts_name", flat=True))
    cutoff = timezone.now() - min_age
    orphans = []
    for prefix in PREFIXES:
        for name in _walk(prefix):
            if name in referenced:
                continue
            try:
                if default_storage.get_modified_time(name) > cutoff:
                    continue
            except (NotImplementedError, OSError):
                pass
            orphans.append(name)
    return sorted(orphans)


class Command(BaseCommand):
    help = "List (or with --delete remove) stored files that no row refers to."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--delete", action="store_true", help="delete the orphans")
        parser.add_argument("--min-age", type=float, default=60.0,
                            help="minutes; younger files are left alone (default 60)")

    def handle(self, *args: Any, **opts: Any) -> None:
        orphans = find_orphans(min_age=timedelta(minutes=opts["min_age"]))
        total = 0
        for name in orphans:
            try:
                size = default_storage.size(name)
            except OSError:
                size = 0
            total += size
            if opts["delete"]:
                default_storage.delete(name)
            self.stdout.write(f"{'deleted' if opts['delete'] else 'orphan'} {name} ({size} bytes)")
        verb = "deleted" if opts["delete"] else "found (dry run; --delete removes them)"
        self.stdout.write(f"{len(orphans)} orphaned files, {total} bytes, {verb}")
