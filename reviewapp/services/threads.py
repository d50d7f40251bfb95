"""comment_create: plain-text comments on a comparison's thread."""

from __future__ import annotations

from typing import Any

from reviewapp.models import Comment, Comparison, Thread
from reviewapp.services import NotAllowed, UploadRejected

MAX_COMMENT = 20000


def thread_get_or_create(*, comparison: Comparison) -> Thread:
    thread = comparison.threads.order_by("created", "pk").first()
    if thread is None:
        thread = Thread.objects.create(comparison=comparison, title="Discussion")
    return thread


def comment_create(*, comparison: Comparison, user: Any, body: str,
                   thread: Thread | None = None) -> Comment:
    """Post a comment; login required. The body is stored as typed and rendered escaped."""
    if not getattr(user, "is_authenticated", False):
        raise NotAllowed("log in to comment")
    body = (body or "").strip()
    if not body:
        raise UploadRejected("the comment is empty", field="body")
    if len(body) > MAX_COMMENT:
        raise UploadRejected(f"the comment is longer than {MAX_COMMENT} characters", field="body")
    if thread is None:
        thread = thread_get_or_create(comparison=comparison)
    elif thread.comparison_id != comparison.pk:
        raise UploadRejected("the thread belongs to another comparison", field="thread")
    return Comment.objects.create(thread=thread, author=user, body=body)
