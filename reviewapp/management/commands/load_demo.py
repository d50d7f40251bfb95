"""``manage.py load_demo``: a demo user and the seed 000 before/after comparison.

The traces are the blkparse G-stage lines quoted in seed 000_bd92b2ca435366b4.txt (7 lines
before the patch, 8 after), shipped in reviewapp/demo/. By default the analysis runs right
here, in this process, through the same function the Celery task calls, so the page is ready
when the server starts; ``--queue`` leaves it to the worker instead.
Idempotent: running it again reuses the user and the comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import BaseCommand
from django.db import transaction

from reviewapp import constants as c
from reviewapp.models import AnalysisJob, BundleResult, Comparison
from reviewapp.services.comparisons import submission_create

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"
TITLE = "block: place split bios at the head of current->bio_list"


class Command(BaseCommand):
    help = "Create a demo user and the seed 000 before/after comparison (prints the login)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo-blkreview")
        parser.add_argument("--queue", action="store_true",
                            help="queue the analysis for the worker instead of running it here")

    def handle(self, *args: Any, **opts: Any) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(username=opts["username"])
        if created or not user.check_password(opts["password"]):
            user.set_password(opts["password"])
            user.save()

        def upload(name: str) -> SimpleUploadedFile:
            return SimpleUploadedFile(name, (DEMO_DIR / name).read_bytes(), "text/plain")

        comparison = (Comparison.objects.filter(patch__title=TITLE, created_by=user)
                      .order_by("pk").first())
        if comparison is None:
            with transaction.atomic():
                comparison, _ = submission_create(
                    title=TITLE, version="", author="Yu Kuai",
                    baseline_files=[upload("seed000_before.blkparse.txt")],
                    patched_files=[upload("seed000_after.blkparse.txt")],
                    baseline_kernel="6.17 (before the patch)",
                    patched_kernel="6.18 (with the patch)",
                    stack="md raid5 of 8 disks, 64k chunk (seed 000); trace of member 8,0",
                    workload="dd if=/dev/md0 of=/dev/null bs=4480k iflag=direct",
                    policy="split_remainder=head", user=user,
                )
        if not opts["queue"]:
            from workers.tasks import run_analysis

            bundles = list(comparison.baseline_bundles.all()) + list(comparison.patched_bundles.all())
            for bundle in bundles:
                if BundleResult.objects.filter(bundle=bundle).exists():
                    continue
                job = (AnalysisJob.objects.filter(bundle=bundle)
                       .exclude(state__in=c.JOB_FINAL_STATES).order_by("-pk").first())
                if job is not None:
                    state = run_analysis(job.pk)
                    self.stdout.write(f"analysis of bundle {bundle.pk}: {state}")
            # then the comparison step (compare, check, model panel, charts), here too
            from reviewapp.models import ComparisonResult
            from reviewapp.services.jobs import comparison_refresh_status
            from workers.tasks import run_compare

            comparison.refresh_from_db()
            comparison_refresh_status(comparison=comparison)
            result = ComparisonResult.objects.filter(comparison=comparison).first()
            if result is not None and not result.is_final:
                state = run_compare(result.pk, task_id=result.celery_task_id)
                self.stdout.write(f"comparison step: {state}")
        self.stdout.write(self.style.SUCCESS(
            f"Demo comparison: /comparisons/{comparison.pk}/\n"
            f"Demo login: user {opts['username']!r}, password {opts['password']!r}"))
