"""``manage.py sweep_jobs``: one pass of the sweeper (reviewapp/services/sweeper.py).

Every Celery worker already sweeps every BLKREVIEW_SWEEP_SECONDS; run this by hand, or from
cron when no worker is up. Prints what it re-queued, failed and sent. Exit status 0.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.core.management.base import BaseCommand

from reviewapp.services.sweeper import sweep


class Command(BaseCommand):
    help = "Re-queue jobs whose worker was lost and send jobs that never reached the broker."

    def handle(self, *args: Any, **opts: Any) -> None:
        report = sweep()
        for field in dataclasses.fields(report):
            ids = getattr(report, field.name)
            if ids:
                self.stdout.write(f"{field.name.replace('_', ' ')}: {', '.join(map(str, ids))}")
        if not report:
            self.stdout.write("nothing to do")
