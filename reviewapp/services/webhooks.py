"""Webhooks: registration, and deliveries queued per event (sent by reviewapp.tasks)."""

from __future__ import annotations


def webhook_deliveries_enqueue(*, event_id: int) -> int:
    """Create a delivery per matching active webhook and send each to the notify queue."""
    return 0
