"""Patch metadata from a git-format-patch mail or an mbox (stdlib email only, no ORM).

Parsing is pure: :func:`parse_patch_mail` returns a :class:`PatchMeta` or raises
:class:`MailParseError`; the services decide what to store (style.md habit 4).
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import parseaddr

#: ``[PATCH v2 3/8]``, ``[PATCH -next RFC v2 0/8]``, ``[PATCH V3]``, ``[RFC PATCH]``.
_PREFIX_RE = re.compile(r"^\s*(?:(?:Re|Fwd?)\s*:\s*)*((?:\[[^\]]*\]\s*)+)", re.IGNORECASE)
_VERSION_RE = re.compile(r"^[vV](\d+)$")
_BASE_COMMIT_RE = re.compile(r"^base-commit:\s*([0-9a-f]{7,40})\s*$", re.MULTILINE)
_FIXES_RE = re.compile(r"^Fixes:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)
_FROM_BODY_RE = re.compile(r"^From:\s*(.+?)\s*$", re.MULTILINE)


class MailParseError(ValueError):
    """Not a mail with a Subject (the reason is user-facing)."""


@dataclass(frozen=True)
class PatchMeta:
    """What a patch mail says about itself."""

    title: str
    version: str = ""
    author: str = ""
    message_id: str = ""
    base_commit: str = ""
    fixes: tuple[str, ...] = field(default_factory=tuple)
    subject: str = ""


def split_subject(subject: str) -> tuple[str, str]:
    """``"[PATCH -next RFC v2 0/8] improve tag"`` -> ``("improve tag", "RFC v2")``.

    The version is the ``vN`` tag (spelled as sent: v2 or V3), with ``RFC`` in front when the
    series is an RFC; a patch without a version tag is "" (or "RFC").
    """
    subject = " ".join(subject.split())
    m = _PREFIX_RE.match(subject)
    if not m:
        return subject.strip(), ""
    tags = re.findall(r"\[([^\]]*)\]", m.group(1))
    words = [w for t in tags for w in t.split()]
    version = next((w for w in words if _VERSION_RE.match(w)), "")
    rfc = any(w.upper() == "RFC" for w in words)
    title = subject[m.end():].strip()
    parts = (["RFC"] if rfc else []) + ([version] if version else [])
    return title, " ".join(parts)


def _body_text(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain",)) if msg.is_multipart() else msg
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, KeyError, AssertionError):
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
    return content if isinstance(content, str) else content.decode("utf-8", "replace")


def _author(msg: EmailMessage, body: str) -> str:
    """The patch author: an in-body ``From:`` (sent on someone's behalf) wins over the header."""
    m = _FROM_BODY_RE.search(body[:2000])
    raw = m.group(1) if m else str(msg.get("From", ""))
    name, addr = parseaddr(raw)
    if name and addr:
        return f"{name} <{addr}>"
    return name or addr or raw.strip()


def meta_from_message(msg: EmailMessage) -> PatchMeta:
    subject = str(msg.get("Subject", "") or "")
    if not subject.strip():
        raise MailParseError("the mail has no Subject header")
    body = _body_text(msg)
    title, version = split_subject(subject)
    base = _BASE_COMMIT_RE.search(body)
    fixes = tuple(dict.fromkeys(m.strip() for m in _FIXES_RE.findall(body)))
    return PatchMeta(
        title=title,
        version=version,
        author=_author(msg, body),
        message_id=str(msg.get("Message-ID", "") or "").strip().strip("<>"),
        base_commit=base.group(1) if base else "",
        fixes=fixes,
        subject=" ".join(subject.split()),
    )


def parse_patch_mail(data: bytes | str) -> PatchMeta:
    """Metadata of the first mail in ``data`` (a single mail or an mbox).

    For a series mbox the first message is the cover letter or patch 1; its subject names the
    series. Raises:
        MailParseError: no message with a Subject.
    """
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    if not raw.strip():
        raise MailParseError("the patch mail is empty")
    if raw.startswith(b"From ") and b"\n" in raw:
        # mbox: split on the "From " separator lines; take the first message.
        chunks = re.split(rb"(?m)^From [^\n]*\n", raw)
        raw = next((ch for ch in chunks if ch.strip()), b"")
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    return meta_from_message(msg)


__all__ = ["MailParseError", "PatchMeta", "parse_patch_mail", "split_subject"]
