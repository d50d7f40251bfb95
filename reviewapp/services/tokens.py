"""API tokens: created with a random key shown once, stored as sha256, revocable, with scopes
(read / upload / check) and an optional expiry."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any

from django.utils import timezone

from reviewapp import constants as c
from reviewapp.models import ApiToken
from reviewapp.services import NotAllowed, UploadRejected

KEY_PREFIX = "blk_"


def hash_key(key: str) -> str:
    """sha256 is enough here: keys are 256-bit random, not passwords."""
    return hashlib.sha256(key.encode()).hexdigest()


def clean_scopes(scopes: Any) -> list[str]:
    """The token's scopes, checked: a non-empty subset of read / upload / check."""
    if scopes is None:
        return list(c.TOKEN_SCOPE_NAMES)
    if isinstance(scopes, str):
        scopes = [x.strip() for x in scopes.split(",") if x.strip()]
    out = []
    for scope in scopes:
        if scope not in c.TOKEN_SCOPE_NAMES:
            raise UploadRejected(f"unknown token scope {scope!r} (known: "
                                 f"{', '.join(c.TOKEN_SCOPE_NAMES)})", field="scopes")
        if scope not in out:
            out.append(scope)
    if not out:
        raise UploadRejected("choose at least one token scope", field="scopes")
    return [s for s in c.TOKEN_SCOPE_NAMES if s in out]


def token_create(*, user: Any, name: str, scopes: Any = None,
                 expires: datetime | None = None) -> tuple[ApiToken, str]:
    """Returns the token row and the plain key (the only time it exists in clear).

    Args:
        scopes: read / upload / check (default all three).
        expires: when it stops working (None: until revoked); must be in the future.
    """
    name = (name or "").strip()
    if not name:
        raise UploadRejected("give the token a name (what will use it?)", field="name")
    scopes = clean_scopes(scopes)
    if expires is not None and expires <= timezone.now():
        raise UploadRejected("the expiry must be in the future", field="expires")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name[:100], prefix=key[:10],
                                    key_hash=hash_key(key), scopes=scopes, expires=expires)
    return token, key


def token_revoke(*, token: ApiToken, user: Any) -> ApiToken:
    if token.user_id != user.pk:
        raise NotAllowed("not your token")
    if token.revoked is None:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])
    return token


class TokenRejected(Exception):
    """A known key that no longer authenticates; ``reason`` says why (revoked, expired)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def token_authenticate(*, key: str) -> ApiToken | None:
    """The active token for ``key`` (and its user), or None for an unknown key.

    Touches ``last_used``.

    Raises:
        TokenRejected: the key is known but revoked, expired, or its user is disabled.
    """
    if not key:
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(key.strip())).first()
    if token is None:
        return None
    if token.revoked is not None:
        raise TokenRejected("this token was revoked")
    if token.expired:
        raise TokenRejected("this token has expired")
    if not token.user.is_active:
        raise TokenRejected("this token's user is disabled")
    now = timezone.now()
    if token.last_used is None or (now - token.last_used).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
    return token
