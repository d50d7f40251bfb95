"""Patches and series from git-format-patch files and mboxes (stdlib ``email`` only, no ORM).

Parsing is pure (style.md habit 4): :func:`parse_mbox` returns :class:`PatchMail` values,
:func:`parse_series` groups them into a :class:`SeriesMail` (cover letter 0/N + patches), and
:func:`parse_patch_mail` keeps the older one-mail entry point. Everything raises
:class:`MailParseError` with a reason a user can act on; the services decide what to store.

What is read from each mail, in the manner of git-format-patch, b4 and Patchwork's parser:

* the subject's bracketed prefixes: ``[PATCH -next RFC v2 3/8]`` -> version 2, RFC, tree tag
  ``-next``, position 3 of 8; ``RESEND``; ``V3`` spelled as sent;
* author (an in-body ``From:`` wins over the sender), date, Message-ID, In-Reply-To, References;
* the commit message, its trailers (``Fixes:``, ``Signed-off-by:``, ``Reviewed-by:``, ...),
  the diffstat after ``---``, the diff, ``base-commit:`` and b4's ``change-id:``;
* the patch's own commit id from git format-patch's separator line
  (``From <40-hex sha> Mon Sep 17 00:00:00 2001``; the cover letter's all-zero id is none):
  what a later ``Fixes: <sha>`` names.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from email.header import decode_header, make_header
from email.message import EmailMessage
from email.utils import getaddresses, parseaddr, parsedate_to_datetime

#: Leading ``Re:``/``Fwd:`` and the bracketed prefixes of a subject.
_PREFIX_RE = re.compile(r"^\s*(?:(?:Re|Fwd?|Aw)\s*:\s*)*((?:\[[^\]]*\]\s*)+)", re.IGNORECASE)
_REPLY_RE = re.compile(r"^\s*(?:Re|Aw)\s*:", re.IGNORECASE)
_VERSION_RE = re.compile(r"^[vV](\d{1,3})$")
_POSITION_RE = re.compile(r"^(\d{1,4})/(\d{1,4})$")
_BASE_COMMIT_RE = re.compile(r"^base-commit:\s*([0-9a-f]{7,40})\s*$", re.MULTILINE)
_CHANGE_ID_RE = re.compile(r"^change-id:\s*(\S+)\s*$", re.MULTILINE)
_FROM_BODY_RE = re.compile(r"\A\s*From:\s*(.+?)\s*$", re.MULTILINE)
#: An mbox separator line: ``From <sha or address> Mon Sep 17 00:00:00 2001`` (git
#: format-patch, lore's ``From mboxrd@z Thu Jan  1 00:00:00 1970``). Stricter than ``^From ``
#: so that a commit message line "From the ..." does not start a new message.
_MBOX_FROM_RE = re.compile(
    rb"^From \S+\s+[A-Z][a-z]{2}\s+[A-Z][a-z]{2}\s+\d{1,2}\s+\d{1,2}:\d{2}(?::\d{2})?"
    rb"(?:\s+\S+)?\s+\d{4}[ \t]*\r?$", re.MULTILINE)
_MBOXRD_RE = re.compile(rb"^>(>*From )", re.MULTILINE)
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
#: Trailer keys recognised in a commit message (any ``Something-by:`` is one too).
TRAILER_KEYS = ("Fixes", "Cc", "Link", "Closes", "Reported-by", "Signed-off-by", "Reviewed-by",
                "Tested-by", "Acked-by", "Suggested-by", "Co-developed-by", "Reported-and-tested-by",
                "Nacked-by")
_TRAILER_RE = re.compile(
    r"^(?P<key>Fixes|Cc|Link|Closes|[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*-by)"
    r"\s*:\s*(?P<value>\S.*?)\s*$", re.IGNORECASE)
_DIFFSTAT_LINE_RE = re.compile(r"^\s*(\S.*?)\s+\|\s+(\d+|Bin\b.*)")
_DIFFSTAT_SUMMARY_RE = re.compile(
    r"^\s*(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?")
_DIFF_START_RE = re.compile(r"^(?:diff --git |Index: |--- (?:a/|/dev/null))", re.MULTILINE)
_DIFF_FILE_RE = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)

MAX_MESSAGES = 500


class MailParseError(ValueError):
    """The input is not a patch mail or mbox we can read (the reason is user-facing)."""


@dataclass(frozen=True)
class Trailer:
    """One ``Key: value`` trailer line of a commit message, key spelled canonically."""

    key: str
    value: str

    def line(self) -> str:
        return f"{self.key}: {self.value}"


@dataclass(frozen=True)
class SubjectInfo:
    """What the subject's bracketed prefixes say."""

    title: str
    version: int = 1
    version_tag: str = ""
    rfc: bool = False
    resend: bool = False
    tree: str = ""
    position: int | None = None
    total: int | None = None
    prefixes: tuple[str, ...] = ()
    is_reply: bool = False

    @property
    def display_version(self) -> str:
        """``"RFC v2"`` / ``"V3"`` / ``""``: the version as the sender wrote it."""
        parts = (["RFC"] if self.rfc else []) + ([self.version_tag] if self.version_tag else [])
        return " ".join(parts)


@dataclass(frozen=True)
class PatchMail:
    """One mail of a patch series: a patch (position >= 1 or none) or a cover letter (0/N)."""

    title: str
    version: str = ""
    author: str = ""
    message_id: str = ""
    base_commit: str = ""
    fixes: tuple[str, ...] = ()
    subject: str = ""
    version_number: int = 1
    rfc: bool = False
    resend: bool = False
    tree: str = ""
    position: int | None = None
    total: int | None = None
    prefixes: tuple[str, ...] = ()
    author_name: str = ""
    author_email: str = ""
    date: datetime | None = None
    in_reply_to: str = ""
    references: tuple[str, ...] = ()
    trailers: tuple[Trailer, ...] = ()
    body: str = ""
    diffstat: str = ""
    diff: str = ""
    files_changed: tuple[str, ...] = ()
    insertions: int = 0
    deletions: int = 0
    change_id: str = ""
    cc: tuple[str, ...] = ()
    commit: str = ""
    raw: str = field(default="", repr=False)

    @property
    def is_cover(self) -> bool:
        """A cover letter: ``0/N``, or a mail of a series without a diff (b4's rule)."""
        return self.position == 0

    @property
    def has_diff(self) -> bool:
        return bool(self.diff)

    def trailer_values(self, key: str) -> list[str]:
        return [t.value for t in self.trailers if t.key.lower() == key.lower()]


#: The older name of :class:`PatchMail` (reviewapp.services.patches used it first).
PatchMeta = PatchMail


@dataclass(frozen=True)
class SeriesMail:
    """A series as sent: the cover letter (if any) and the patches in position order."""

    cover: PatchMail | None
    patches: tuple[PatchMail, ...]
    replies: tuple[PatchMail, ...] = ()

    @property
    def first(self) -> PatchMail:
        return self.cover or self.patches[0]

    @property
    def title(self) -> str:
        return self.first.title

    @property
    def version_number(self) -> int:
        return self.first.version_number

    @property
    def total(self) -> int:
        return self.first.total or len(self.patches)

    @property
    def missing(self) -> list[int]:
        """Positions 1..N announced by the subjects but absent from the mbox."""
        have = {p.position for p in self.patches}
        if not self.first.total:
            return []
        return [i for i in range(1, self.first.total + 1) if i not in have]


def normalize_msgid(value: str) -> str:
    """``" <abc@x> "`` -> ``"abc@x"`` (how Message-IDs are stored and compared)."""
    value = (value or "").strip()
    m = re.search(r"<([^<>\s]+)>", value)
    return m.group(1) if m else value.strip("<>").strip()


def msgid_list(value: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(re.findall(r"<([^<>\s]+)>", value or "")))


def subject_stem(title: str) -> str:
    """The key of version linking: the title lowercased, spaces collapsed (b4 and Patchwork
    compare subjects without their ``[PATCH vN m/n]`` prefixes)."""
    return " ".join(title.lower().split())


def parse_subject(subject: str) -> SubjectInfo:
    """``"[PATCH -next RFC v2 3/8] improve tag"`` -> title, version 2, RFC, ``-next``, 3/8."""
    subject = " ".join((subject or "").split())
    is_reply = bool(_REPLY_RE.match(subject))
    m = _PREFIX_RE.match(subject)
    if not m:
        title = re.sub(r"^\s*(?:(?:Re|Fwd?|Aw)\s*:\s*)+", "", subject, flags=re.IGNORECASE)
        return SubjectInfo(title=title.strip(), is_reply=is_reply)
    tags = re.findall(r"\[([^\]]*)\]", m.group(1))
    words = [w for t in tags for w in re.split(r"[\s,]+", t) if w]
    version_tag, version, rfc, resend, tree = "", 1, False, False, ""
    position = total = None
    extra = []
    for w in words:
        vm, pm = _VERSION_RE.match(w), _POSITION_RE.match(w)
        if vm:
            version_tag, version = w, int(vm.group(1))
        elif pm:
            position, total = int(pm.group(1)), int(pm.group(2))
        elif w.upper() == "RFC":
            rfc = True
        elif w.upper() == "RESEND":
            resend = True
        elif w.upper() == "PATCH":
            continue
        else:
            if not tree and (w.startswith("-") or w.lower().endswith("next")):
                tree = w
            extra.append(w)
    return SubjectInfo(title=subject[m.end():].strip(), version=version, version_tag=version_tag,
                       rfc=rfc, resend=resend, tree=tree, position=position, total=total,
                       prefixes=tuple(extra), is_reply=is_reply)


def split_subject(subject: str) -> tuple[str, str]:
    """``"[PATCH -next RFC v2 0/8] improve tag"`` -> ``("improve tag", "RFC v2")``.

    The version is the ``vN`` tag (spelled as sent: v2 or V3), with ``RFC`` in front when the
    series is an RFC; a patch without a version tag is "" (or "RFC").
    """
    info = parse_subject(subject)
    return info.title, info.display_version


def _body_text(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain",)) if msg.is_multipart() else msg
    if part is None:
        # A patch sent as a text/x-patch attachment (some mailers do that).
        for p in msg.walk():
            if p.get_content_maintype() == "text":
                part = p
                break
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, KeyError, AssertionError, ValueError):
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
    text = content if isinstance(content, str) else content.decode("utf-8", "replace")
    return text.replace("\r\n", "\n")


def _name_addr(raw: str) -> tuple[str, str]:
    if "=?" in raw:  # an RFC 2047 encoded in-body From: line
        try:
            raw = str(make_header(decode_header(raw)))
        except (ValueError, LookupError, UnicodeDecodeError):
            pass
    name, addr = parseaddr(raw)
    return name.strip(), addr.strip()


def _fmt_person(name: str, addr: str, raw: str = "") -> str:
    if name and addr:
        return f"{name} <{addr}>"
    return name or addr or raw.strip()


def canonical_key(key: str) -> str:
    """``"signed-off-by"`` -> ``"Signed-off-by"``, ``"CC"`` -> ``"Cc"``."""
    for known in TRAILER_KEYS:
        if known.lower() == key.lower():
            return known
    return key[:1].upper() + key[1:].lower()


def parse_trailers(message: str) -> tuple[Trailer, ...]:
    """Trailer lines of a commit message (its last paragraphs of ``Key: value`` lines).

    Git's rule is "the last paragraph"; kernel mail often has a ``Fixes:`` paragraph above the
    sign-offs and a ``Link:`` inside, so every line of the message that is a known trailer is
    taken, in order, except quoted lines (``> ...``) of a reply.
    """
    out = []
    for line in message.splitlines():
        if line.startswith(">"):
            continue
        m = _TRAILER_RE.match(line)
        if m:
            out.append(Trailer(canonical_key(m.group("key")), m.group("value")))
    return tuple(out)


def _split_body(body: str) -> tuple[str, str, str, str]:
    """Commit message, diffstat, diff and the tail (after the diff) of a patch mail body."""
    m = _DIFF_START_RE.search(body)
    head, diff = (body[:m.start()], body[m.start():]) if m else (body, "")
    tail = ""
    if not diff:
        sig = re.search(r"^-- $", head, re.MULTILINE)
        if sig:
            head, tail = head[:sig.start()], head[sig.start():]
    if diff:
        # git-format-patch's signature "-- \n2.43.0" ends the diff; base-commit sits before it.
        sig = re.search(r"^-- $", diff, re.MULTILINE)
        if sig:
            diff, tail = diff[:sig.start()], diff[sig.start():]
        base = re.search(r"^(?:base-commit|prerequisite-patch-id|change-id):", diff, re.MULTILINE)
        if base:
            diff, tail = diff[:base.start()], diff[base.start():] + tail
    sep = re.search(r"^---\s*$", head, re.MULTILINE)
    if sep:
        message, notes = head[:sep.start()], head[sep.end():]
    else:
        message, notes = head, ""
    stat_lines = []
    for line in notes.splitlines():
        if _DIFFSTAT_LINE_RE.match(line) or _DIFFSTAT_SUMMARY_RE.match(line) or (
                stat_lines and line.startswith((" create mode", " delete mode", " rename"))):
            stat_lines.append(line.rstrip())
    return message.rstrip(), "\n".join(stat_lines), diff.rstrip("\n") + ("\n" if diff else ""), tail


def _diff_counts(diff: str) -> tuple[tuple[str, ...], int, int]:
    files = tuple(dict.fromkeys(b for _, b in _DIFF_FILE_RE.findall(diff)))
    ins = dels = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            ins += 1
        elif line.startswith("-") and not line.startswith("---"):
            dels += 1
    return files, ins, dels


def mail_from_message(msg: EmailMessage, raw: str = "") -> PatchMail:
    """One parsed mail. Raises :class:`MailParseError` when it has no Subject."""
    subject = " ".join(str(msg.get("Subject", "") or "").split())
    if not subject:
        raise MailParseError("the mail has no Subject header")
    body = _body_text(msg)
    info = parse_subject(subject)
    # An in-body From: (a patch sent on someone's behalf) names the author.
    in_body = _FROM_BODY_RE.match(body[:2000])
    if in_body:
        author_raw = in_body.group(1)
        body = body[in_body.end():].lstrip("\n")
    else:
        author_raw = str(msg.get("From", "") or "")
    name, addr = _name_addr(author_raw)
    message, diffstat, diff, tail = _split_body(body)
    date = None
    if msg.get("Date"):
        try:
            date = parsedate_to_datetime(str(msg["Date"]))
        except (TypeError, ValueError, IndexError):
            date = None
    trailers = parse_trailers(message)
    base = _BASE_COMMIT_RE.search(body)
    change = _CHANGE_ID_RE.search(body)
    files, ins, dels = _diff_counts(diff)
    cc = tuple(_fmt_person(n, a) for n, a in getaddresses(
        [str(v) for v in (msg.get_all("Cc") or [])]) if a)
    references = msgid_list(str(msg.get("References", "") or ""))
    in_reply_to = normalize_msgid(str(msg.get("In-Reply-To", "") or ""))
    if not in_reply_to and references:
        in_reply_to = references[-1]
    return PatchMail(
        title=info.title, version=info.display_version, author=_fmt_person(name, addr, author_raw),
        message_id=normalize_msgid(str(msg.get("Message-ID", "") or "")),
        base_commit=base.group(1) if base else "",
        fixes=tuple(dict.fromkeys(t.value for t in trailers if t.key == "Fixes")),
        subject=subject, version_number=info.version, rfc=info.rfc, resend=info.resend,
        tree=info.tree, position=info.position, total=info.total, prefixes=info.prefixes,
        author_name=name, author_email=addr.lower(), date=date, in_reply_to=in_reply_to,
        references=references, trailers=trailers, body=message, diffstat=diffstat, diff=diff,
        files_changed=files, insertions=ins, deletions=dels,
        change_id=change.group(1) if change else "", cc=cc, raw=raw,
    )


#: Kept for callers of the first version of this module.
meta_from_message = mail_from_message


def split_mbox(data: bytes) -> list[bytes]:
    """The messages of an mbox (mboxo/mboxrd ``From `` lines), or ``[data]`` for one mail."""
    return [chunk for _, chunk in split_mbox_commits(data)]


def split_mbox_commits(data: bytes) -> list[tuple[str, bytes]]:
    """:func:`split_mbox` with each message's commit id: the 40-hex id git format-patch
    writes on the separator line (``From 1a2b… Mon Sep 17 00:00:00 2001``), lowercased; ``""``
    for an address (lore's ``From mboxrd@z``), the cover letter's all-zero id, or no line."""
    data = data.replace(b"\r\n", b"\n")
    starts = [m.start() for m in _MBOX_FROM_RE.finditer(data)]
    if not starts:
        return [("", data)]
    chunks: list[tuple[str, bytes]] = []
    if data[:starts[0]].strip():
        chunks.append(("", data[:starts[0]]))
    for i, s in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(data)
        nl = data.find(b"\n", s)
        token = data[s:nl if nl >= 0 else end].split()[1].decode("ascii", "replace").lower()
        commit = token if _COMMIT_RE.match(token) and token.strip("0") else ""
        chunk = data[nl + 1:end] if nl >= 0 else b""
        chunks.append((commit, _MBOXRD_RE.sub(rb"\1", chunk)))
    return [(commit, ch) for commit, ch in chunks if ch.strip()]


def _to_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data


def parse_mbox(data: bytes | str) -> list[PatchMail]:
    """Every mail of ``data`` (an mbox or a single mail), in file order.

    Raises:
        MailParseError: empty input, binary data, too many messages, a message without
            headers or Subject (the reason names the message's number).
    """
    raw = _to_bytes(data)
    if not raw.strip():
        raise MailParseError("the patch mail is empty")
    if b"\x00" in raw[:65536]:
        raise MailParseError("this is binary data, not a mail or mbox")
    chunks = split_mbox_commits(raw)
    if len(chunks) > MAX_MESSAGES:
        raise MailParseError(f"the mbox has {len(chunks)} messages; at most {MAX_MESSAGES} "
                             "are read at once")
    mails = []
    for n, (commit, chunk) in enumerate(chunks, 1):
        where = f"message {n} of {len(chunks)}: " if len(chunks) > 1 else ""
        head = chunk.lstrip()[:4096].split(b"\n\n", 1)[0]
        if not re.search(rb"^[A-Za-z][A-Za-z0-9-]*:", head, re.MULTILINE):
            raise MailParseError(f"{where}no mail headers (expected lines like 'From:' and "
                                 "'Subject:' before the first blank line)")
        msg = email.message_from_bytes(chunk.lstrip(), policy=email.policy.default)
        assert isinstance(msg, EmailMessage)
        try:
            mail = mail_from_message(msg, raw=chunk.decode("utf-8", "replace"))
            mails.append(replace(mail, commit=commit) if commit else mail)
        except MailParseError as exc:
            raise MailParseError(f"{where}{exc}") from None
    return mails


def parse_patch_mail(data: bytes | str) -> PatchMail:
    """The first mail of ``data`` (a single mail or an mbox): for a series mbox the cover
    letter or patch 1, whose subject names the series.

    Raises:
        MailParseError: see :func:`parse_mbox`.
    """
    return parse_mbox(data)[0]


def group_series(mails: list[PatchMail]) -> SeriesMail:
    """The cover letter and the patches of one series, replies kept apart.

    Raises:
        MailParseError: no patch in the input, two different series, or a position given twice.
    """
    cover = None
    patches: list[PatchMail] = []
    replies: list[PatchMail] = []
    for m in mails:
        if m.is_cover and not m.has_diff and cover is None and not _REPLY_RE.match(m.subject):
            cover = m
        elif m.has_diff:
            patches.append(m)
        else:
            replies.append(m)
    if not patches:
        what = "only a cover letter" if cover else "no diff in any message"
        raise MailParseError(f"no patch found: {what} (expected git format-patch output)")
    versions = {p.version_number for p in patches}
    if cover:
        versions.add(cover.version_number)
    if len(versions) > 1:
        raise MailParseError("the mbox mixes versions "
                             f"{', '.join('v' + str(v) for v in sorted(versions))}; "
                             "upload one version of a series at a time")
    seen: dict[int, PatchMail] = {}
    for p in patches:
        if p.position is not None:
            if p.position in seen:
                raise MailParseError(f"patch {p.position}/{p.total} appears twice "
                                     f"({seen[p.position].title!r} and {p.title!r})")
            seen[p.position] = p
    patches.sort(key=lambda p: (p.position if p.position is not None else 0))
    return SeriesMail(cover=cover, patches=tuple(patches), replies=tuple(replies))


def parse_series(data: bytes | str) -> SeriesMail:
    """A series from a git-format-patch file or an mbox (cover letter 0/N optional)."""
    return group_series(parse_mbox(data))


__all__ = ["MailParseError", "PatchMail", "PatchMeta", "SeriesMail", "SubjectInfo", "Trailer",
           "group_series", "normalize_msgid", "parse_mbox", "parse_patch_mail", "parse_series",
           "parse_subject", "parse_trailers", "split_subject", "subject_stem"]
