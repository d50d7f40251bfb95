"""``manage.py init_storage``: create the S3 bucket when it is missing (no-op on local storage)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from reviewapp import storage


class Command(BaseCommand):
    help = "Create the configured S3 bucket if it does not exist; check that storage answers."

    def handle(self, *args: Any, **options: Any) -> None:
        created = storage.ensure_bucket()
        health = storage.storage_health()
        if not health["ok"]:
            raise CommandError(f"storage ({health['backend']}): {health['error']}")
        self.stdout.write(f"storage: {health['backend']} ok" + (" (bucket created)" if created else ""))
