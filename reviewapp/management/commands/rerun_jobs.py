"""``manage.py rerun_jobs``: queue fresh analysis jobs (after a parser or analyzer fix).

    manage.py rerun_jobs --failed            # every bundle whose latest job failed
    manage.py rerun_jobs --bundle 3 --bundle 4
    manage.py rerun_jobs --all               # every bundle (results are replaced when done)

Exit status 0, or 2 when nothing was selected.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from reviewapp import constants as c
from reviewapp.models import TraceBundle
from reviewapp.services.jobs import job_create_for_bundle


class Command(BaseCommand):
    help = "Queue new analysis jobs for failed, selected or all bundles."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bundle", type=int, action="append", default=[])
        parser.add_argument("--failed", action="store_true")
        parser.add_argument("--all", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        qs = TraceBundle.objects.none()
        if opts["all"]:
            qs = TraceBundle.objects.all()
        elif opts["failed"] or opts["bundle"]:
            if opts["bundle"]:
                qs = qs | TraceBundle.objects.filter(pk__in=opts["bundle"])
            if opts["failed"]:
                qs = qs | TraceBundle.objects.filter(parse_status=c.PARSE_FAILED)
        else:
            raise CommandError("say which bundles: --failed, --bundle ID or --all")
        bundles = list(qs.distinct().order_by("pk"))
        if not bundles:
            self.stderr.write("no bundles selected")
            raise SystemExit(2)
        with transaction.atomic():
            jobs = [job_create_for_bundle(bundle=b) for b in bundles]
        for b, j in zip(bundles, jobs):
            self.stdout.write(f"bundle {b.pk}: queued job {j.pk}")
