"""patch_create: a Patch from form/API fields, optionally filled from its mail."""

from __future__ import annotations

from typing import Any

from reviewapp.mbox import MailParseError, PatchMeta, parse_patch_mail
from reviewapp.models import Patch
from reviewapp.services import UploadRejected

MAX_MAIL_BYTES = 5 * 1024 * 1024


def patch_meta_from_upload(file: Any) -> tuple[PatchMeta, str]:
    """Parse an uploaded patch mail / mbox. Returns (meta, raw text).

    Raises:
        UploadRejected: too big, or not a mail.
    """
    if getattr(file, "size", 0) and file.size > MAX_MAIL_BYTES:
        raise UploadRejected("patch mail: larger than 5 MB", field="mbox")
    file.seek(0)
    data = file.read(MAX_MAIL_BYTES + 1)
    try:
        meta = parse_patch_mail(data)
    except MailParseError as exc:
        raise UploadRejected(f"patch mail: {exc}", field="mbox") from exc
    return meta, data.decode("utf-8", "replace")


def patch_create(*, title: str = "", version: str = "", author: str = "",
                 meta: PatchMeta | None = None, raw: str = "", user: Any = None,
                 public: bool = True) -> Patch:
    """Create a Patch. Typed fields win over what the mail says; the mail fills the gaps
    (message-id, threading, date, trailers, commit message, diffstat and diff)."""
    if meta is not None:
        title = title or meta.title
        version = version or meta.version
        author = author or meta.author
    title = (title or "").strip()
    if not title:
        raise UploadRejected("a patch title is required (or a patch mail to take it from)",
                             field="title")
    patch = Patch(
        title=title[:300], version=(version or "")[:40], author=(author or "")[:200],
        message_id=(meta.message_id if meta else "")[:300],
        base_commit=(meta.base_commit if meta else "")[:64],
        commit=(meta.commit if meta else "")[:40],
        fixes=list(meta.fixes) if meta else [], raw=raw, public=public,
        submitted_by=user if getattr(user, "is_authenticated", False) else None,
    )
    if meta is not None:
        patch.version_number = meta.version_number
        patch.author_email = meta.author_email[:200]
        patch.in_reply_to = meta.in_reply_to[:300]
        patch.references = list(meta.references)[:50]
        patch.date = meta.date
        patch.trailers = [[t.key, t.value] for t in meta.trailers]
        patch.body, patch.diffstat, patch.diff = meta.body, meta.diffstat, meta.diff
        patch.insertions, patch.deletions = meta.insertions, meta.deletions
    patch.full_clean()
    patch.save()
    from reviewapp import constants as c
    from reviewapp.services.events import event_create

    event_create(kind=c.EVENT_PATCH_CREATED, actor=user, patch=patch)
    return patch
