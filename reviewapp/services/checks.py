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


def patch_state_set(*, patch: Patch, user: Any, state: str) -> Patch:
    """Set a patch's review state (Patchwork's names): who may change the patch may, and
    maintainers (reviewapp.access.can_set_patch_state)."""
    from reviewapp.access import can_set_patch_state

    if not can_set_patch_state(user, patch):
        raise NotAllowed("only the patch's submitter (or whom they share it with for changes) "
                         "and maintainers can change its state")
    if state not in dict(c.PATCH_STATES):
        raise UploadRejected(f"state: one of {', '.join(dict(c.PATCH_STATES))}", field="state")
    if state == patch.state:
        return patch
    old = patch.state
    with transaction.atomic():
        patch.state = state
        patch.save(update_fields=["state"])
        event_create(kind=c.EVENT_PATCH_STATE_CHANGED, actor=user, patch=patch,
                     payload={"previous_state": old, "current_state": state,
                              "summary": f"{old} -> {state}"})
    return patch
