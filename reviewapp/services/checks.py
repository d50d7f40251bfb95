"""check_create: a CI bot's result on a patch (Patchwork's checks API)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from reviewapp import constants as c
from reviewapp.models import Check, Patch
from reviewapp.services import NotAllowed, UploadRejected
from reviewapp.services.events import event_create


def check_create(*, patch: Patch, user: Any, context: str, state: str, description: str = "",
                 target_url: str = "") -> Check:
    """Record a check. Login (a token) required; the caller has checked the user may read
    the patch. The newest check per (user, context) is the current one."""
    if not getattr(user, "is_authenticated", False):
        raise NotAllowed("log in (or send a token) to post a check")
    if state not in dict(c.CHECK_STATES):
        raise UploadRejected(f"state: one of {', '.join(dict(c.CHECK_STATES))}", field="state")
    if context == c.CHECK_CONTEXT_COMPARISON:
        raise UploadRejected(f"context: {context!r} is the comparison's own check",
                             field="context")
    with transaction.atomic():
        chk = Check(patch=patch, user=user, context=context, state=state,
                    description=description or "", target_url=target_url or "")
        chk.full_clean()
        chk.save()
        event_create(kind=c.EVENT_CHECK_CREATED, actor=user, patch=patch,
                     payload={"check": chk.pk, "context": context, "state": state,
                              "summary": f"{context}: {state}"})
    return chk
