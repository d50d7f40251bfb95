"""Shared by the job and comparison-step services: liveness and file clean-up on commit."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

WAITING_FOR_WORKER = "waiting for a worker"
#: A job whose task could not be published (broker unreachable); the sweeper sends it.
WAITING_FOR_QUEUE = "waiting for the queue"


def is_stale(heartbeat: Any, started: Any = None) -> bool:
    """No sign of life for BLKREVIEW_STALE_AFTER_SECONDS (its worker is taken as lost)."""
    last = heartbeat or started
    if last is None:
        return True
    return (timezone.now() - last).total_seconds() > settings.BLKREVIEW_STALE_AFTER_SECONDS


def delete_file_on_commit(name: str) -> None:
    """Delete a stored file once the transaction that stopped referencing it commits."""
    if name:
        from reviewapp import storage

        transaction.on_commit(lambda: storage.delete_quietly(name))
