"""event_create: the Event rows behind /api/v1/events/ and webhooks (style.md habit 8).

Services call this explicitly after their writes (never a signal). Webhook deliveries for the
event are queued after the transaction commits (reviewapp.services.webhooks).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from reviewapp.models import Comparison, Event, Patch, Series


def event_create(*, kind: str, actor: Any = None, series: Series | None = None,
                 patch: Patch | None = None, comparison: Comparison | None = None,
                 payload: dict[str, Any] | None = None) -> Event:
    """Record one event; webhooks subscribed to ``kind`` get it after commit."""
    if patch is not None and series is None and patch.series_id:
        series = patch.series
    event = Event.objects.create(
        kind=kind, actor=actor if getattr(actor, "is_authenticated", False) else None,
        series=series, patch=patch, comparison=comparison, payload=payload or {},
    )
    from reviewapp.services.webhooks import webhook_deliveries_enqueue

    transaction.on_commit(lambda: webhook_deliveries_enqueue(event_id=event.pk))
    return event
