"""Mail notifications of comments: to the thread's participants and the @mentioned users.

``notification_enqueue`` sends the task (reviewapp.tasks.send_comment_notifications) to
``settings.BLKREVIEW_NOTIFY_QUEUE`` after commit; the task calls :func:`notification_send`,
which mails each recipient through Django's email backend (the console backend in the embedded
default). Users who opted out (NotificationSetting.mail = False), users without an address,
the comment's author and users who may not read the thread are left out. The text carries the
anchor and its numbers, so it reads well in a mail client without the page.
"""

from __future__ import annotations

import logging
import textwrap
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage

from reviewapp import constants as c
from reviewapp.markup import mentions
from reviewapp.models import Comment, NotificationSetting, Thread

log = logging.getLogger(__name__)


def notification_enqueue(*, comment_id: int) -> None:
    from workers.celery import app

    try:
        app.send_task(c.TASK_NOTIFY, args=[comment_id], queue=settings.BLKREVIEW_NOTIFY_QUEUE,
                      ignore_result=True)
    except Exception:  # broker down: the comment stands; the mail is lost and logged
        log.exception("could not queue the notifications of comment %s", comment_id)


def _may_read(thread: Thread, user: Any) -> bool:
    """The access policy's answer (reviewapp.access): no mail about what one may not read."""
    from reviewapp.access import can_read_comparison, can_read_patch

    if thread.comparison_id:
        return can_read_comparison(user, thread.comparison)
    return thread.patch_id is not None and can_read_patch(user, thread.patch)


def notification_recipients(comment: Comment) -> list[Any]:
    """Participants (starter, commenters) and mentioned users, minus the author and opt-outs."""
    User = get_user_model()
    thread = comment.thread
    # participants as of this comment (a later reply does not make its author a recipient
    # of an earlier comment's mail, whenever the worker gets to it)
    ids = set(thread.comments.filter(deleted__isnull=True, pk__lt=comment.pk)
              .values_list("author_id", flat=True))
    if thread.created_by_id:
        ids.add(thread.created_by_id)
    names = mentions(comment.body)
    users = list(User.objects.filter(pk__in=ids, is_active=True))
    if names:
        users += list(User.objects.filter(username__in=names, is_active=True).exclude(pk__in=ids))
    opted_out = set(NotificationSetting.objects.filter(user__in=users, mail=False)
                    .values_list("user_id", flat=True))
    return [u for u in users if u.pk != comment.author_id and u.email and u.pk not in opted_out
            and _may_read(thread, u)]


def _fmt(value: Any, unit: str = "") -> str:
    if isinstance(value, float):
        text = f"{value:,.2f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:,.0f}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip() if unit else text


def anchor_text(thread: Thread) -> list[str]:
    """The anchor and its numbers as plain text lines."""
    lines = [f"On: {thread.anchor_label or 'the comparison'}"]
    n = thread.anchor_numbers or {}
    if thread.anchor_kind == c.ANCHOR_METRIC and n:
        unit = n.get("unit", "")
        line = f"    baseline {_fmt(n.get('baseline'), unit)} -> patched {_fmt(n.get('patched'), unit)}"
        if isinstance(n.get("pct"), (int, float)):
            line += f" ({n['pct']:+.1f}%)"
        elif n.get("pct"):
            line += f" ({n['pct']})"
        if n.get("verdict"):
            line += f", {n['verdict']}"
        lines.append(line)
    elif thread.anchor_kind == c.ANCHOR_DIFF and n.get("text"):
        lines.append(f"    {n['text']}")
    elif n:
        lines.append("    " + ", ".join(f"{k} {_fmt(v)}" for k, v in n.items()) + " (as shown)")
    return lines


def notification_text(comment: Comment) -> tuple[str, str]:
    """(subject, body) of the mail about ``comment``."""
    thread = comment.thread
    base = settings.BLKREVIEW_BASE_URL.rstrip("/")
    if thread.comparison_id:
        where = f"comparison #{thread.comparison_id}: {thread.comparison.patch.title}"
    else:
        where = f"patch #{thread.patch_id}: {thread.patch.title}"
    subject = f"[blkreview] {thread.title} ({where})"[:200]
    if comment.deleted:
        text = "(deleted)"
    else:
        text = "\n".join(textwrap.fill(p, 72, replace_whitespace=False) if not p.startswith(
            ("    ", "\t", "```")) and len(p) > 72 else p for p in comment.body.split("\n"))
    body = "\n".join([
        f"{comment.author.get_username()} wrote on {where}",
        *anchor_text(thread),
        "",
        text,
        "",
        "-- ",
        f"Thread: {base}{thread.get_absolute_url()}",
        f"Comment: {base}{comment.get_absolute_url()}",
        "You get this mail because you take part in the thread or were mentioned;",
        f"turn it off at {base}/notifications/",
    ])
    return subject, body + "\n"


def notification_send(*, comment_id: int) -> int:
    """Mail the recipients of one comment; returns how many mails were sent."""
    comment = (Comment.objects.select_related("thread", "author", "thread__comparison__patch",
                                              "thread__patch").filter(pk=comment_id).first())
    if comment is None or comment.deleted:
        return 0
    recipients = notification_recipients(comment)
    if not recipients:
        return 0
    subject, body = notification_text(comment)
    sent = 0
    for user in recipients:
        msg = EmailMessage(subject=subject, body=body, from_email=settings.DEFAULT_FROM_EMAIL,
                           to=[user.email],
                           headers={"X-Blkreview-Thread": str(comment.thread_id),
                                    "Auto-Submitted": "auto-generated"})
        sent += msg.send(fail_silently=False)
    return sent


def notification_setting_set(*, user: Any, mail: bool) -> NotificationSetting:
    setting, _ = NotificationSetting.objects.update_or_create(user=user, defaults={"mail": mail})
    return setting
