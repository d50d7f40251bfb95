"""API tokens: created with a random key shown once, stored as sha256, revocable."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.utils import timezone

from reviewapp.models import ApiToken
from reviewapp.services import NotAllowed, UploadRejected

KEY_PREFIX = "blk_"


def hash_key(key: str) -> str:
    """sha256 is enough here: keys are 256-bit random, not passwords."""
    return hashlib.sha256(key.encode()).hexdigest()


def token_create(*, user: Any, name: str) -> tuple[ApiToken, str]:
    """Returns the token row and the plain key (the only time it exists in clear)."""
    name = (name or "").strip()
    if not name:
        raise UploadRejected("give the token a name (what will use it?)", field="name")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name[:100], prefix=key[:10],
                                    key_hash=hash_key(key))
    return token, key


def token_revoke(*, token: ApiToken, user: Any) -> ApiToken:
    if token.user_id != user.pk:
        raise NotAllowed("not your token")
    if token.revoked is None:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])
    return token


def token_authenticate(*, key: str) -> ApiToken | None:
    """The active token for ``key`` (and its user), or None. Touches ``last_used``."""
    if not key:
        return None
    token = (ApiToken.objects.select_related("user")
             .filter(key_hash=hash_key(key.strip()), revoked__isnull=True).first())
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used is None or (now - token.last_used).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
    return token
