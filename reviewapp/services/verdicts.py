"""Reviewer verdicts: Reviewed-by / Tested-by / Acked-by / NAK on a patch or a whole series,
and their export as trailer lines (``Tested-by: Name <email>``) beside the plain-text report."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from reviewapp import constants as c
from reviewapp.models import Patch, Series, Verdict
from reviewapp.services import NotAllowed, UploadRejected
from reviewapp.services.events import event_create

KINDS = [k for k, _ in c.VERDICT_KINDS]


def person(user: Any) -> str:
    """``Name <email>`` as a trailer names a person (the user name when no full name)."""
    name = (user.get_full_name() or user.get_username()).strip()
    return f"{name} <{user.email}>" if user.email else name


def verdict_set(*, user: Any, kind: str, message: str = "", patch: Patch | None = None,
                series: Series | None = None) -> Verdict:
    """Record (or update) ``user``'s verdict of ``kind`` on a patch or a series. The caller
    has checked that the user may read the target."""
    if not getattr(user, "is_authenticated", False):
        raise NotAllowed("log in to give a verdict")
    if kind not in KINDS:
        raise UploadRejected(f"kind: one of {', '.join(KINDS)}", field="kind")
    if (patch is None) == (series is None):
        raise UploadRejected("a verdict is on a patch or on a series", field="patch")
    message = (message or "").strip()
    if len(message) > 5000:
        raise UploadRejected("message: longer than 5000 characters", field="message")
    with transaction.atomic():
        verdict, _ = Verdict.objects.update_or_create(
            user=user, kind=kind, patch=patch, series=series, defaults={"message": message})
        event_create(kind=c.EVENT_VERDICT_CREATED, actor=user, patch=patch,
                     series=series or (patch.series if patch and patch.series_id else None),
                     payload={"verdict": verdict.pk, "kind": kind,
                              "summary": f"{c.VERDICT_TRAILER[kind]}: {person(user)}"})
    return verdict


def verdict_delete(*, verdict: Verdict, user: Any) -> None:
    if verdict.user_id != getattr(user, "pk", None):
        raise NotAllowed("only its author can withdraw a verdict")
    verdict.delete()


def trailer_lines(verdicts: list[Verdict]) -> list[str]:
    """``Reviewed-by: Name <email>`` lines, in the usual trailer order, once each."""
    order = {c.VERDICT_REVIEWED: 1, c.VERDICT_TESTED: 2, c.VERDICT_ACKED: 0, c.VERDICT_NAK: 3}
    lines = [f"{c.VERDICT_TRAILER[v.kind]}: {person(v.user)}"
             for v in sorted(verdicts, key=lambda v: (order[v.kind], v.created, v.pk))]
    return list(dict.fromkeys(lines))


def verdict_export(*, verdicts: list[Verdict], report: str = "", heading: str = "") -> str:
    """The text to paste into a reply: trailers first, then the report (if any)."""
    parts = []
    if heading:
        parts.append(heading)
    parts.extend(trailer_lines(verdicts) or ["(no verdicts yet)"])
    if report:
        parts += ["", report.rstrip()]
    return "\n".join(parts) + "\n"
