"""API throttles (issue 10 item 11): per token/user, per client IP, writes, bad tokens.

Counters live in Django's cache (Redis in production and tests, a file cache in the embedded
default), so every web worker shares them. Rates come from ``settings.BLKREVIEW_THROTTLE_RATES``
at request time (DRF's own classes read theirs once at import, which no test can override).
A throttled request is answered 429 with ``Retry-After`` and the JSON error shape of
:mod:`reviewapp.api.base`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class RateThrottle(SimpleRateThrottle):
    """A SimpleRateThrottle whose rate is ``BLKREVIEW_THROTTLE_RATES[scope]`` ("0"/"off": none)."""

    cache_format = "throttle:%(scope)s:%(ident)s"

    def get_rate(self) -> str | None:
        rate = str(settings.BLKREVIEW_THROTTLE_RATES.get(self.scope) or "").strip()
        if rate.lower() in ("", "0", "off", "none"):
            return None
        return rate


def principal(request: Request) -> str | None:
    """``token:<id>`` for token requests, ``user:<id>`` for sessions, None when anonymous."""
    user = getattr(request, "user", None)
    if not getattr(user, "is_authenticated", False):
        return None
    token = getattr(request, "auth", None)
    token_id = getattr(token, "pk", None)
    return f"token:{token_id}" if token_id is not None else f"user:{user.pk}"


class AnonIpThrottle(RateThrottle):
    """Anonymous requests, per client IP."""

    scope = "anon"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if principal(request) is not None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class UserTokenThrottle(RateThrottle):
    """Authenticated requests, per token (a user's tokens are counted apart) or session user."""

    scope = "user"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        who = principal(request)
        if who is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": who}


class IpThrottle(RateThrottle):
    """Every request, per client IP: many tokens from one address share one budget."""

    scope = "ip"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class WriteThrottle(RateThrottle):
    """Writes (uploads, new comparisons, added runs, thresholds), per token/user (else IP)."""

    scope = "write"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if request.method in SAFE_METHODS:
            return None
        who = principal(request) or f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": who}


class BadTokenThrottle(RateThrottle):
    """Failed token authentications, per client IP (guessing tokens)."""

    scope = "bad_token"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class BadTokenThrottled(exceptions.Throttled):
    what = "too many requests with an invalid token from this address"


def bad_token_seen(request: Request) -> None:
    """Count a failed token authentication; raise Throttled once the IP is over its budget."""
    throttle = BadTokenThrottle()
    if not throttle.allow_request(request, None):
        raise BadTokenThrottled(wait=throttle.wait())
