"""``manage.py rerun_jobs``: queue fresh analysis jobs and comparison steps.

    manage.py rerun_jobs --failed            # bundles whose latest job failed, except parse
                                             # failures (worker lost, time limit, internal
                                             # error), and failed comparison steps
    manage.py rerun_jobs --parse-failed      # bundles whose parse failed (after a parser fix)
    manage.py rerun_jobs --bundle 3 --bundle 4
    manage.py rerun_jobs --comparison 7      # the comparison step of comparison 7, again
    manage.py rerun_jobs --all               # every bundle (results are replaced when done)

A bundle with a job still queued or running is left alone (the sweeper looks after it). Jobs
that never reached the broker are not failed: they stay queued and the sweeper sends them.
Exit status 0, or 2 when nothing was selected.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from reviewapp import constants as c
from reviewapp.models import AnalysisJob, ComparisonResult, TraceBundle
from reviewapp.services.jobs import job_create_for_bundle
from reviewapp.services.results import result_requeue


def _latest_failed_bundle_ids(*, parse_failed: bool) -> set[int]:
    latest: dict[int, AnalysisJob] = {}
    for job in AnalysisJob.objects.order_by("created", "pk").only("pk", "bundle_id", "state"):
        latest[job.bundle_id] = job
    failed = {b for b, j in latest.items() if j.state == c.JOB_STATE_FAILED}
    parse = set(TraceBundle.objects.filter(pk__in=failed, parse_status=c.PARSE_FAILED)
                .values_list("pk", flat=True))
    return parse if parse_failed else failed - parse


class Command(BaseCommand):
    help = "Queue new analysis jobs (failed, parse-failed, selected or all bundles) and steps."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bundle", type=int, action="append", default=[])
        parser.add_argument("--comparison", type=int, action="append", default=[],
                            help="rerun this comparison's comparison step")
        parser.add_argument("--failed", action="store_true",
                            help="latest job failed (not a parse error); failed comparison steps")
        parser.add_argument("--parse-failed", action="store_true",
                            help="bundles whose parse failed (after a parser fix)")
        parser.add_argument("--all", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        if not any(opts[k] for k in ("all", "failed", "parse_failed", "bundle", "comparison")):
            raise CommandError("say what: --failed, --parse-failed, --bundle ID, "
                               "--comparison ID or --all")
        ids: set[int] = set(opts["bundle"])
        if opts["all"]:
            ids |= set(TraceBundle.objects.values_list("pk", flat=True))
        if opts["failed"]:
            ids |= _latest_failed_bundle_ids(parse_failed=False)
        if opts["parse_failed"]:
            ids |= _latest_failed_bundle_ids(parse_failed=True)
        in_flight = set(AnalysisJob.objects.filter(bundle_id__in=ids).exclude(
            state__in=c.JOB_FINAL_STATES).values_list("bundle_id", flat=True))
        bundles = list(TraceBundle.objects.filter(pk__in=ids - in_flight).order_by("pk"))
        steps = set(ComparisonResult.objects.filter(comparison_id__in=opts["comparison"])
                    .values_list("pk", flat=True))
        missing = set(opts["comparison"]) - set(ComparisonResult.objects.filter(
            pk__in=steps).values_list("comparison_id", flat=True))
        for pk in sorted(missing):
            self.stderr.write(f"comparison {pk}: no comparison step yet (its bundles are not "
                              "all analyzed)")
        if opts["failed"]:
            steps |= set(ComparisonResult.objects.filter(state=c.JOB_STATE_FAILED)
                         .values_list("pk", flat=True))
        for pk in sorted(in_flight):
            self.stderr.write(f"bundle {pk}: a job is still queued or running; left alone")
        if not bundles and not steps:
            self.stderr.write("nothing selected")
            raise SystemExit(2)
        with transaction.atomic():
            jobs = [job_create_for_bundle(bundle=b) for b in bundles]
            requeued = [result_requeue(result_id=pk) for pk in sorted(steps)]
        for b, j in zip(bundles, jobs):
            self.stdout.write(f"bundle {b.pk}: queued job {j.pk}")
        for r in requeued:
            if r is not None:
                self.stdout.write(f"comparison {r.comparison_id}: queued its comparison step")
