"""Login attempt limits and per-user upload quotas (issue 10 item 11).

Login: failed attempts are counted per username and per client IP in Django's cache (shared by
every web worker); at ``BLKREVIEW_LOGIN_MAX_FAILURES`` for a username (or
``BLKREVIEW_LOGIN_IP_MAX_FAILURES`` for an IP) further attempts are refused, even with the right
password, for ``BLKREVIEW_LOGIN_LOCKOUT_SECONDS``, and the form says when to retry.

Uploads: bundles a user uploaded in the last 24 hours are counted and summed
(``BLKREVIEW_QUOTA_UPLOADS_PER_DAY``, ``BLKREVIEW_QUOTA_MB_PER_DAY``); an upload that would go
over is refused with 429, the limit, the use and the time it becomes possible again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Sum
from django.utils import timezone

from reviewapp.services import ServiceError

DAY = dt.timedelta(days=1)


class UploadQuotaExceeded(ServiceError):
    """Over the per-user daily upload count or bytes; ``retry_after`` in seconds (or None)."""

    status = 429

    def __init__(self, message: str, *, retry_after: int | None = None,
                 field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


def client_ip(request: Any) -> str:
    """The client's address: REMOTE_ADDR, or the X-Forwarded-For entry of the outermost trusted
    proxy when ``REST_FRAMEWORK["NUM_PROXIES"]`` is set (the same rule as DRF's throttles)."""
    meta = request.META
    remote = str(meta.get("REMOTE_ADDR") or "")
    proxies = settings.REST_FRAMEWORK.get("NUM_PROXIES")
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    if proxies and forwarded:
        addrs = [a.strip() for a in str(forwarded).split(",") if a.strip()]
        if addrs:
            return addrs[-min(int(proxies), len(addrs))]
    return remote or "unknown"


def _login_keys(username: str, ip: str) -> list[tuple[str, int]]:
    user_hash = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [(f"login-fail:user:{user_hash}", settings.BLKREVIEW_LOGIN_MAX_FAILURES),
            (f"login-fail:ip:{ip}", settings.BLKREVIEW_LOGIN_IP_MAX_FAILURES)]


def login_locked_until(*, username: str, ip: str) -> float | None:
    """Epoch seconds until which logins for this username or from this IP are refused."""
    now = time.time()
    until = [cache.get(f"{key}:until") for key, limit in _login_keys(username, ip) if limit > 0]
    live = [float(u) for u in until if u is not None and float(u) > now]
    return max(live) if live else None


def login_failure_record(*, username: str, ip: str) -> float | None:
    """Count one failed login; returns the lockout end when this failure started one."""
    window = settings.BLKREVIEW_LOGIN_LOCKOUT_SECONDS
    locked = None
    for key, limit in _login_keys(username, ip):
        if limit <= 0:
            continue
        cache.add(key, 0, timeout=window)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=window)
            count = 1
        if count >= limit:
            until = time.time() + window
            cache.set(f"{key}:until", until, timeout=window)
            cache.delete(key)
            locked = max(locked or 0.0, until)
    return locked


def login_success_record(*, username: str, ip: str) -> None:
    """A good login clears the username's failure count (not the IP's)."""
    key = _login_keys(username, ip)[0][0]
    cache.delete(key)


def lockout_message(until: float) -> str:
    wait = max(1, math.ceil((until - time.time()) / 60))
    at = dt.datetime.fromtimestamp(until, tz=dt.UTC).strftime("%H:%M")
    return (f"Too many failed logins for this account or from this address. Try again in "
            f"{wait} minute{'s' if wait != 1 else ''} (after {at} UTC).")


def upload_quota_check(*, user: Any, nbytes: int, count: int = 1, field: str | None = None
                       ) -> None:
    """Refuse an upload of ``count`` bundles totalling ``nbytes`` over the user's daily quota.

    Raises:
        UploadQuotaExceeded: with the limit, the use in the last 24 hours and when the upload
            becomes possible (``retry_after`` seconds; None when it never fits the quota).
    """
    from reviewapp.models import TraceBundle

    if not getattr(user, "is_authenticated", False):
        return
    max_count = settings.BLKREVIEW_QUOTA_UPLOADS_PER_DAY
    max_bytes = settings.BLKREVIEW_QUOTA_BYTES_PER_DAY
    if max_count <= 0 and max_bytes <= 0:
        return
    now = timezone.now()
    recent = TraceBundle.objects.filter(uploaded_by=user, created__gte=now - DAY)
    used = recent.aggregate(n=Count("pk"), b=Sum("size"))
    used_count, used_bytes = int(used["n"] or 0), int(used["b"] or 0)

    def retry(excess_count: int, excess_bytes: int) -> int | None:
        # the moment enough of the last day's uploads have aged out
        freed_n = freed_b = 0
        for created, size in recent.order_by("created").values_list("created", "size"):
            freed_n += 1
            freed_b += int(size or 0)
            if freed_n >= excess_count and freed_b >= excess_bytes:
                return max(1, math.ceil((created + DAY - now).total_seconds()))
        return None

    def when(seconds: int | None) -> str:
        if seconds is None:
            return "it is larger than the daily quota itself"
        at = now + dt.timedelta(seconds=seconds)
        return f"try again after {at:%Y-%m-%d %H:%M} UTC"

    if max_count > 0 and used_count + count > max_count:
        wait = retry(used_count + count - max_count, 0)
        raise UploadQuotaExceeded(
            f"daily upload quota reached: {used_count} upload{'s' if used_count != 1 else ''} "
            f"in the last 24 hours, the limit is {max_count} per day; {when(wait)}",
            retry_after=wait, field=field)
    if max_bytes > 0 and used_bytes + nbytes > max_bytes:
        wait = retry(0, used_bytes + nbytes - max_bytes) if nbytes <= max_bytes else None
        raise UploadQuotaExceeded(
            f"daily upload quota: {nbytes / 2**20:.1f} MB more on top of the "
            f"{used_bytes / 2**20:.1f} MB uploaded in the last 24 hours is over the limit of "
            f"{max_bytes / 2**20:.0f} MB per day; {when(wait)}",
            retry_after=wait, field=field)
