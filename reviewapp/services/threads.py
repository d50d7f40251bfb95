"""Threads and comments: anchored discussions on a comparison (as a whole, a chart region, a
metric row) or on a diff line of a patch; replies, edit (history kept), delete (tombstone),
resolve/reopen, @mentions. Writes Event rows and queues mail notifications after commit.

Anchors use the comparison page's addresses (device ``dev``, ``stage``, ``section``), the same
ones its URL state uses, so a thread links back to exactly what it is about.
"""

from __future__ import annotations

import math
import re
from typing import Any

from django.db import transaction
from django.utils import timezone

from reviewapp import constants as c
from reviewapp.models import Comment, CommentRevision, Comparison, ComparisonResult, Patch, Thread
from reviewapp.services import NotAllowed, UploadRejected
from reviewapp.services.events import event_create

MAX_COMMENT = 20000
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_.:,+\-/ ()\[\]%=]{0,80}$")
_KEY_RE = re.compile(r"^[A-Za-z0-9_ .\-]{1,40}$")
SECTION_IDS = ("fragmentation", "seek", "throughput", "latency", "ordering", "model", "lba")


def _need_login(user: Any, what: str) -> None:
    if not getattr(user, "is_authenticated", False):
        raise NotAllowed(f"log in to {what}")


def _clean_body(body: str) -> str:
    body = (body or "").strip("\n\r ")
    if not body.strip():
        raise UploadRejected("the comment is empty", field="body")
    if len(body) > MAX_COMMENT:
        raise UploadRejected(f"the comment is longer than {MAX_COMMENT} characters", field="body")
    return body


def _token(anchor: dict[str, Any], key: str, *, required: bool = False) -> str:
    value = anchor.get(key, "")
    value = "" if value is None else str(value).strip()
    if required and not value:
        raise UploadRejected(f"anchor: '{key}' is required", field="anchor")
    if not _TOKEN_RE.match(value):
        raise UploadRejected(f"anchor: '{key}' has characters or a length it cannot have",
                             field="anchor")
    return value


def _numbers(values: Any) -> dict[str, float | str]:
    """The numbers a chart anchor showed (client-sent): short keys, finite numbers only."""
    out: dict[str, float | str] = {}
    if not isinstance(values, dict):
        return out
    for k, v in list(values.items())[:8]:
        key = str(k)[:40]
        if not _KEY_RE.match(key):
            continue
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            out[key] = float(v)
        elif isinstance(v, str) and _TOKEN_RE.match(v[:80]):
            out[key] = v[:80]
    return out


def _metric_numbers(comparison: Comparison, *, section: str, dev: str, stage: str,
                    metric: str) -> dict[str, Any] | None:
    """The row the page shows for (section, device, stage, metric label): from the stored
    section payload (what the reader saw), else from the comparison step's metrics."""
    import json

    from reviewapp.selectors import chart_payload

    if section:
        try:
            text = chart_payload(comparison=comparison, section=section, dev=dev,
                                 stage=stage) if dev or section == "index" else None
            payload = json.loads(text) if text else {}
        except (OSError, ValueError):  # gone from storage, or not JSON: the metrics below
            payload = {}
        for table in payload.get("tables") or []:
            cols = [str(x) for x in table.get("columns") or []]
            for row in table.get("rows") or []:
                if row and str(row[0]) == metric:
                    cells = dict(zip(cols, row, strict=False))
                    return {"baseline": cells.get("Baseline"), "patched": cells.get("Patched"),
                            "delta": cells.get("Δ"), "pct": cells.get("Δ %"),
                            "verdict": cells.get("Verdict") or "", "table": table.get("title"),
                            "unit": ""}
    res = ComparisonResult.objects.filter(comparison=comparison,
                                          state=c.JOB_STATE_SUCCEEDED).only("compare").first()
    for row in ((res.compare or {}).get("metrics") or []) if res else []:
        if str(row.get("device")) == dev and str(row.get("label")).lower() == metric.lower():
            return {"baseline": (row.get("baseline") or {}).get("mean"),
                    "patched": (row.get("patched") or {}).get("mean"),
                    "pct": row.get("pct"), "unit": row.get("unit") or "",
                    "verdict": row.get("verdict") or ""}
    return None


def clean_anchor(*, kind: str, anchor: Any, comparison: Comparison | None,
                 patch: Patch | None) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """Validate an anchor; returns (anchor, label, numbers).

    Raises:
        UploadRejected: unknown kind, missing or malformed keys, a metric the comparison does
            not have, a diff line the patch does not have.
    """
    anchor = anchor if isinstance(anchor, dict) else {}
    if kind == c.ANCHOR_COMPARISON:  # the whole comparison (or, on a patch page, patch)
        if comparison is None and patch is None:
            raise UploadRejected("anchor: a thread needs a comparison or a patch",
                                 field="anchor")
        return {}, "the comparison" if comparison is not None else "the patch", {}
    if kind in (c.ANCHOR_CHART, c.ANCHOR_METRIC):
        if comparison is None:
            raise UploadRejected(f"anchor: a {kind} thread needs a comparison", field="anchor")
        section = _token(anchor, "section", required=kind == c.ANCHOR_CHART)
        if section and section not in SECTION_IDS:
            raise UploadRejected(f"anchor: unknown section {section!r}", field="anchor")
        dev = _token(anchor, "dev", required=True)
        stage = _token(anchor, "stage").upper()
        if stage and stage not in ("Q", "G", "I", "D", "C", "X", "M"):
            raise UploadRejected(f"anchor: unknown stage {stage!r}", field="anchor")
        where = f"{dev}" + (f" at {stage}" if stage else "")
        if kind == c.ANCHOR_METRIC:
            metric = _token(anchor, "metric", required=True)
            numbers = _metric_numbers(comparison, section=section, dev=dev, stage=stage,
                                      metric=metric)
            if numbers is None:
                raise UploadRejected(f"anchor: the comparison has no metric {metric!r} on {dev}",
                                     field="anchor")
            clean = {"section": section, "dev": dev, "stage": stage, "metric": metric}
            return clean, f"{where}, {metric}", numbers
        chart = _token(anchor, "chart")
        side = _token(anchor, "side")
        bucket = _token(anchor, "bucket")
        x0, x1 = anchor.get("x0"), anchor.get("x1")
        window = None
        if x0 is not None or x1 is not None:
            try:
                window = (float(x0), float(x1))
            except (TypeError, ValueError):
                raise UploadRejected("anchor: x0/x1 must be numbers", field="anchor") from None
            if not all(math.isfinite(v) for v in window) or window[0] > window[1]:
                raise UploadRejected("anchor: x0..x1 is not a window", field="anchor")
        if not bucket and window is None:
            raise UploadRejected("anchor: a chart region needs a bucket or a window x0..x1",
                                 field="anchor")
        clean = {"section": section, "dev": dev, "stage": stage, "chart": chart, "side": side}
        label = f"{where}, {section}"
        if chart and chart != section:
            label += f" / {chart}"
        if bucket:
            clean["bucket"] = bucket
            label += f": bucket {bucket}"
        if window is not None:
            clean["x0"], clean["x1"] = window
            label += f": window {window[0]:g}..{window[1]:g}"
        return clean, label, _numbers(anchor.get("values"))
    if kind == c.ANCHOR_DIFF:
        if patch is None:
            raise UploadRejected("anchor: a diff-line thread needs a patch", field="anchor")
        try:
            line = int(anchor.get("line"))
        except (TypeError, ValueError):
            raise UploadRejected("anchor: 'line' must be the line number in the diff",
                                 field="anchor") from None
        lines = (patch.diff or "").split("\n")
        if not 1 <= line <= len(lines) or not patch.diff:
            raise UploadRejected(f"anchor: the diff has no line {line}", field="anchor")
        from reviewapp.diffview import diff_lines

        dl = next((x for x in diff_lines(patch.diff) if x.n == line), None)
        file = dl.file if dl else ""
        text = lines[line - 1][:200]
        label = f"{file or 'diff'}" + (f":{dl.file_line}" if dl and dl.file_line else "") + \
            f" (diff line {line})"
        return {"line": line, "file": file}, label, {"text": text}
    raise UploadRejected(f"anchor: unknown kind {kind!r} (comparison, chart, metric, diff)",
                         field="anchor_kind")


def thread_create(*, user: Any, body: str, comparison: Comparison | None = None,
                  patch: Patch | None = None, anchor_kind: str = c.ANCHOR_COMPARISON,
                  anchor: Any = None, title: str = "") -> Thread:
    """Start a thread with its first comment. Login required; the caller has checked that
    the user may read ``comparison`` / ``patch``."""
    _need_login(user, "start a thread")
    body = _clean_body(body)
    clean, label, numbers = clean_anchor(kind=anchor_kind, anchor=anchor,
                                         comparison=comparison, patch=patch)
    if comparison is not None and patch is None:
        patch = None  # a comparison thread hangs off the comparison; its patch is reachable
    title = (title or "").strip()[:200] or (label[:1].upper() + label[1:] if label else
                                            "Discussion")
    with transaction.atomic():
        thread = Thread.objects.create(
            comparison=comparison, patch=patch, title=title, anchor_kind=anchor_kind,
            anchor=clean, anchor_label=label[:300], anchor_numbers=numbers, created_by=user)
        comment = Comment.objects.create(thread=thread, author=user, body=body)
        event_create(kind=c.EVENT_THREAD_CREATED, actor=user, comparison=comparison,
                     patch=patch or (comparison.patch if comparison else None),
                     payload={"thread": thread.pk, "anchor_kind": anchor_kind,
                              "anchor": clean, "summary": label[:200]})
        _after_comment(comment, new_thread=True)
    return thread


def thread_get_or_create(*, comparison: Comparison) -> Thread:
    """The comparison's general discussion thread (kept for the plain comment box)."""
    thread = comparison.threads.filter(anchor_kind=c.ANCHOR_COMPARISON).order_by(
        "created", "pk").first()
    if thread is None:
        thread = Thread.objects.create(comparison=comparison, title="Discussion")
    return thread


def comment_create(*, user: Any, body: str, comparison: Comparison | None = None,
                   thread: Thread | None = None) -> Comment:
    """Reply in ``thread`` (or in the comparison's general thread). Login required."""
    _need_login(user, "comment")
    body = _clean_body(body)
    if thread is None:
        if comparison is None:
            raise UploadRejected("no thread to reply in", field="thread")
        thread = thread_get_or_create(comparison=comparison)
    elif comparison is not None and thread.comparison_id != comparison.pk:
        raise UploadRejected("the thread belongs to another comparison", field="thread")
    with transaction.atomic():
        comment = Comment.objects.create(thread=thread, author=user, body=body)
        event_create(kind=c.EVENT_COMMENT_CREATED, actor=user, comparison=thread.comparison,
                     patch=thread.patch or (thread.comparison.patch if thread.comparison_id
                                            else None),
                     payload={"thread": thread.pk, "comment": comment.pk,
                              "summary": thread.anchor_label[:200]})
        _after_comment(comment, new_thread=False)
    return comment


def _own(comment: Comment, user: Any) -> None:
    _need_login(user, "change a comment")
    if comment.author_id != user.pk:
        raise NotAllowed("only its author can change a comment")
    if comment.deleted is not None:
        raise UploadRejected("the comment was deleted", field="body")


def comment_edit(*, comment: Comment, user: Any, body: str) -> Comment:
    """Edit one's own comment: the earlier body is kept as a revision, ``edited`` is set."""
    _own(comment, user)
    body = _clean_body(body)
    if body == comment.body:
        return comment
    with transaction.atomic():
        CommentRevision.objects.create(comment=comment, body=comment.body)
        comment.body = body
        comment.edited = timezone.now()
        comment.save(update_fields=["body", "edited"])
    return comment


def comment_delete(*, comment: Comment, user: Any) -> Comment:
    """Delete one's own comment: a tombstone stays (who, when), the text and its history go."""
    _own(comment, user)
    with transaction.atomic():
        comment.revisions.all().delete()
        comment.body = ""
        comment.deleted = timezone.now()
        comment.save(update_fields=["body", "deleted"])
    return comment


def can_resolve(thread: Thread, user: Any) -> bool:
    """The thread's starter, whoever may change its comparison or patch, or staff."""
    from reviewapp.access import can_change_comparison, can_change_patch

    if not getattr(user, "is_authenticated", False):
        return False
    if user.is_staff or thread.created_by_id == user.pk:
        return True
    if thread.comparison_id:
        return can_change_comparison(user, thread.comparison)
    return bool(thread.patch_id and can_change_patch(user, thread.patch))


def thread_set_resolved(*, thread: Thread, user: Any, resolved: bool) -> Thread:
    """Resolve or reopen a thread."""
    _need_login(user, "resolve a thread")
    if not can_resolve(thread, user):
        raise NotAllowed("only the thread's starter or the owner can resolve it")
    if thread.resolved == resolved:
        return thread
    with transaction.atomic():
        thread.resolved = resolved
        thread.resolved_by = user if resolved else None
        thread.resolved_at = timezone.now() if resolved else None
        thread.save(update_fields=["resolved", "resolved_by", "resolved_at"])
        event_create(kind=c.EVENT_THREAD_RESOLVED if resolved else c.EVENT_THREAD_REOPENED,
                     actor=user, comparison=thread.comparison,
                     patch=thread.patch or (thread.comparison.patch if thread.comparison_id
                                            else None),
                     payload={"thread": thread.pk, "summary": thread.anchor_label[:200]})
    return thread


def _after_comment(comment: Comment, *, new_thread: bool) -> None:
    """Queue the notification mails of a new comment once the transaction commits."""
    from reviewapp.services.notifications import notification_enqueue

    transaction.on_commit(lambda: notification_enqueue(comment_id=comment.pk))
