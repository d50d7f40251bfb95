"""Webhooks: a user registers a URL and event kinds; every matching event the user may read is
POSTed there as JSON, signed with HMAC-SHA256 of the body under the webhook's secret
(``X-Blkreview-Signature: sha256=<hex>``), retried with exponential backoff by the Celery task
``reviewapp.tasks.deliver_webhook`` and logged in WebhookDelivery rows.

Receivers verify with ``hmac.compare_digest(sig, "sha256=" + hmac.new(secret, body,
hashlib.sha256).hexdigest())``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from reviewapp import constants as c
from reviewapp.models import Event, Webhook, WebhookDelivery
from reviewapp.services import NotAllowed, UploadRejected

log = logging.getLogger(__name__)
EVENT_KIND_NAMES = [k for k, _ in c.EVENT_KINDS]


def webhook_create(*, user: Any, url: str, events: list[str] | None = None,
                   secret: str = "") -> Webhook:
    """Register a webhook. ``secret`` is generated when not given (returned once by the API)."""
    if not getattr(user, "is_authenticated", False):
        raise NotAllowed("log in to register a webhook")
    url = (url or "").strip()
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise UploadRejected("url: not an http(s) URL", field="url") from None
    if len(url) > 500:
        raise UploadRejected("url: longer than 500 characters", field="url")
    events = list(dict.fromkeys(events or []))
    unknown = [e for e in events if e not in EVENT_KIND_NAMES]
    if unknown:
        raise UploadRejected(f"events: unknown kind {', '.join(map(repr, unknown))} (known: "
                             f"{', '.join(EVENT_KIND_NAMES)})", field="events")
    secret = (secret or "").strip() or secrets.token_hex(32)
    if len(secret) < 16 or len(secret) > 100:
        raise UploadRejected("secret: 16 to 100 characters", field="secret")
    return Webhook.objects.create(user=user, url=url, events=events, secret=secret)


def webhook_delete(*, webhook: Webhook, user: Any) -> None:
    if webhook.user_id != getattr(user, "pk", None):
        raise NotAllowed("only its owner can delete a webhook")
    webhook.delete()


def _event_readable_by(event: Event, user: Any) -> bool:
    if user.is_staff:
        return True
    for obj, owner in ((event.series, "submitted_by_id"), (event.patch, "submitted_by_id"),
                       (event.comparison, "created_by_id")):
        if obj is not None and not (obj.public or getattr(obj, owner) == user.pk):
            return False
    return True


def webhook_deliveries_enqueue(*, event_id: int) -> int:
    """Create a delivery per active webhook that wants this event (and whose owner may read
    it), and send each to the notify queue. Returns the number queued."""
    event = Event.objects.select_related("series", "patch", "comparison").filter(
        pk=event_id).first()
    if event is None:
        return 0
    hooks = Webhook.objects.filter(active=True).select_related("user")
    n = 0
    for hook in hooks:
        if hook.events and event.kind not in hook.events:
            continue
        if not hook.user.is_active or not _event_readable_by(event, hook.user):
            continue
        delivery = WebhookDelivery.objects.create(webhook=hook, event=event)
        _send(delivery.pk)
        n += 1
    return n


def _send(delivery_id: int, countdown: float | None = None) -> None:
    from workers.celery import app

    try:
        app.send_task(c.TASK_WEBHOOK, args=[delivery_id], countdown=countdown, ignore_result=True,
                      queue=settings.BLKREVIEW_NOTIFY_QUEUE)
    except Exception as exc:
        log.exception("could not queue webhook delivery %s", delivery_id)
        WebhookDelivery.objects.filter(pk=delivery_id).update(
            state=c.WEBHOOK_DELIVERY_FAILED, error=f"could not queue the delivery: {exc}"[:500])


def event_payload(event: Event) -> dict[str, Any]:
    """The JSON an event is delivered as (the same shape as /api/v1/events/ items)."""
    base = settings.BLKREVIEW_BASE_URL.rstrip("/")
    return {
        "id": event.pk, "kind": event.kind, "created": event.created.isoformat(),
        "actor": event.actor.get_username() if event.actor_id and event.actor else None,
        "series": event.series_id, "patch": event.patch_id, "comparison": event.comparison_id,
        "payload": event.payload,
        "url": (f"{base}{event.comparison.get_absolute_url()}" if event.comparison_id else
                f"{base}{event.patch.get_absolute_url()}" if event.patch_id else
                f"{base}{event.series.get_absolute_url()}" if event.series_id else None),
    }


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def backoff_seconds(attempt: int) -> float:
    """Delay before attempt ``attempt + 1``: base, 2x base, 4x base ..."""
    return float(settings.BLKREVIEW_WEBHOOK_BACKOFF_SECONDS) * (2 ** max(0, attempt - 1))


def webhook_deliver(*, delivery_id: int) -> float | None:
    """POST one delivery. Returns the delay before the next attempt, or None when done
    (delivered, or failed for good after BLKREVIEW_WEBHOOK_MAX_ATTEMPTS)."""
    with transaction.atomic():
        d = (WebhookDelivery.objects.select_for_update().select_related(
            "webhook", "event").filter(pk=delivery_id).first())
        if d is None or d.state != c.WEBHOOK_DELIVERY_PENDING:
            return None
        if not d.webhook.active:
            d.state, d.error = c.WEBHOOK_DELIVERY_FAILED, "the webhook was deactivated"
            d.save(update_fields=["state", "error"])
            return None
        d.attempts += 1
        d.last_attempt = timezone.now()
        d.save(update_fields=["attempts", "last_attempt"])
    event = Event.objects.select_related("actor", "series", "patch", "comparison").get(
        pk=d.event_id)
    body = json.dumps(event_payload(event), sort_keys=True).encode()
    req = urllib.request.Request(d.webhook.url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "blkreview-webhook/1",
        "X-Blkreview-Event": event.kind, "X-Blkreview-Delivery": str(d.pk),
        "X-Blkreview-Signature": sign(d.webhook.secret, body)})
    status, error = None, ""
    try:
        with urllib.request.urlopen(req, timeout=settings.BLKREVIEW_WEBHOOK_TIMEOUT_SECONDS) as r:
            status = r.status
    except urllib.error.HTTPError as exc:
        status, error = exc.code, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    ok = status is not None and 200 <= status < 300
    fields: dict[str, Any] = {"response_status": status, "error": error[:500]}
    retry_in = None
    if ok:
        fields["state"] = c.WEBHOOK_DELIVERY_SUCCEEDED
    elif d.attempts >= settings.BLKREVIEW_WEBHOOK_MAX_ATTEMPTS:
        fields["state"] = c.WEBHOOK_DELIVERY_FAILED
        fields["error"] = f"{error or 'failed'}; gave up after {d.attempts} attempts"[:500]
    else:
        retry_in = backoff_seconds(d.attempts)
    WebhookDelivery.objects.filter(pk=d.pk).update(**fields)
    return retry_in


def webhook_list_deliveries(*, webhook: Webhook) -> Any:
    return webhook.deliveries.select_related("event").order_by("-created", "-pk")


def _host_is_loopback(url: str) -> bool:  # pragma: no cover - documented for deployers
    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


__all__ = ["Q", "backoff_seconds", "event_payload", "sign", "webhook_create",
           "webhook_deliver", "webhook_deliveries_enqueue"]
