"""series_create_from_mail, series_link_previous, series_relink: series and their patches from
git-format-patch files and mboxes (parsed purely by reviewapp.mbox).

Version linking follows b4 and Patchwork: a new version is the next one of an earlier series
when it was sent In-Reply-To (or References) a mail of that series, when both carry the same
b4 ``change-id:``, or when the subject stems and the author's address are the same. Only series
the uploader may see are candidates, so a private series never leaks through a link.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from reviewapp import constants as c
from reviewapp.mbox import MailParseError, PatchMail, SeriesMail, parse_series, subject_stem
from reviewapp.models import Patch, Series
from reviewapp.services import ServiceError, UploadRejected
from reviewapp.services.events import event_create

MAX_MBOX_BYTES = 20 * 1024 * 1024


class DuplicateSeries(ServiceError):
    """The same cover letter / first patch (Message-ID) was uploaded before."""

    status = 409


def read_mail_upload(file: Any, *, field: str = "mbox") -> bytes:
    """The bytes of an uploaded mbox / patch file, size-checked."""
    if getattr(file, "size", 0) and file.size > MAX_MBOX_BYTES:
        raise UploadRejected(f"{field}: larger than {MAX_MBOX_BYTES // 2**20} MB", field=field)
    if hasattr(file, "seek"):
        file.seek(0)
    data = file.read(MAX_MBOX_BYTES + 1)
    if len(data) > MAX_MBOX_BYTES:
        raise UploadRejected(f"{field}: larger than {MAX_MBOX_BYTES // 2**20} MB", field=field)
    return data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")


def parse_series_upload(data: bytes | str, *, field: str = "mbox") -> SeriesMail:
    """:func:`reviewapp.mbox.parse_series`, its errors turned into a 400 on ``field``."""
    try:
        return parse_series(data)
    except MailParseError as exc:
        raise UploadRejected(f"{field}: {exc}", field=field) from exc


def _visible_q(user: Any) -> Q:
    """Series the user may read (reviewapp.access.series_readable_by) as a filter."""
    from reviewapp.access import series_readable_by

    return Q(pk__in=series_readable_by(user).values("pk"))


def find_previous_version(series: Series, *, mails: list[str], user: Any) -> tuple[Series | None, str]:
    """The earlier version ``series`` continues, and why (a ``constants.LINK_*``)."""
    earlier = (Series.objects.filter(_visible_q(user)).exclude(pk=series.pk)
               .filter(version__lt=series.version).order_by("-version", "-created", "-pk"))
    refs = [m for m in mails if m]
    if refs:
        hit = earlier.filter(Q(message_id__in=refs) | Q(patches__message_id__in=refs)).first()
        if hit:
            return hit, c.LINK_IN_REPLY_TO
    if series.change_id:
        hit = earlier.filter(change_id=series.change_id).first()
        if hit:
            return hit, c.LINK_CHANGE_ID
    if series.author_email:
        hit = earlier.filter(stem=series.stem, author_email=series.author_email).first()
        if hit:
            return hit, c.LINK_SUBJECT
        # A renamed cover letter: the same author's earlier series with the same patch titles.
        titles = sorted(subject_stem(t) for t in series.patches.values_list("title", flat=True))
        if titles:
            for cand in earlier.filter(author_email=series.author_email)[:50]:
                theirs = sorted(subject_stem(t) for t in cand.patches.values_list("title", flat=True))
                if theirs == titles:
                    return cand, c.LINK_SUBJECT
    return None, c.LINK_NONE


def _patch_from_mail(m: PatchMail, *, series: Series | None, public: bool, user: Any) -> Patch:
    return Patch(
        series=series, position=m.position, title=m.title[:300], version=m.version[:40],
        version_number=m.version_number, author=m.author[:200], author_email=m.author_email[:200],
        message_id=m.message_id[:300], in_reply_to=m.in_reply_to[:300],
        references=list(m.references)[:50], date=m.date, base_commit=m.base_commit[:64],
        commit=m.commit[:40], fixes=list(m.fixes), trailers=[[t.key, t.value] for t in m.trailers], body=m.body,
        diffstat=m.diffstat, diff=m.diff, insertions=m.insertions, deletions=m.deletions,
        state=c.PATCH_STATE_RFC if m.rfc else c.PATCH_STATE_NEW, public=public, raw=m.raw,
        submitted_by=user if getattr(user, "is_authenticated", False) else None,
    )


def series_create_from_mail(*, data: bytes | str, user: Any, public: bool = True,
                            field: str = "mbox") -> Series:
    """A Series with its patches from an mbox or git-format-patch file, linked to its earlier
    version. Login required.

    Raises:
        UploadRejected: not a series mbox (the reason says why; HTTP 400).
        DuplicateSeries: its Message-ID was uploaded before (HTTP 409).
    """
    if not getattr(user, "is_authenticated", False):
        from reviewapp.services import NotAllowed

        raise NotAllowed("log in to upload a series")
    parsed = parse_series_upload(data, field=field)
    first = parsed.first
    if first.message_id and Series.objects.filter(_visible_q(user),
                                                  message_id=first.message_id).exists():
        dup = Series.objects.filter(_visible_q(user), message_id=first.message_id).first()
        raise DuplicateSeries(f"{field}: <{first.message_id}> was uploaded before as series "
                              f"#{dup.pk if dup else '?'}", field=field)
    cover = parsed.cover
    base = next((m.base_commit for m in (cover, *parsed.patches) if m and m.base_commit), "")
    change = next((m.change_id for m in (cover, *parsed.patches) if m and m.change_id), "")
    with transaction.atomic():
        series = Series.objects.create(
            title=first.title[:300], stem=subject_stem(first.title)[:300],
            version=first.version_number, version_tag=first.version[:40], tree=first.tree[:40],
            author=first.author[:200], author_email=first.author_email[:200],
            message_id=first.message_id[:300], in_reply_to=first.in_reply_to[:300],
            description=cover.body if cover else "", total=parsed.total, date=first.date,
            base_commit=base[:64], change_id=change[:200], public=public, submitted_by=user,
        )
        patches = Patch.objects.bulk_create(
            [_patch_from_mail(m, series=series, public=public, user=user) for m in parsed.patches])
        event_create(kind=c.EVENT_SERIES_CREATED, actor=user, series=series,
                     payload={"version": series.version, "patches": len(patches),
                              "missing": parsed.missing})
        for p in patches:
            event_create(kind=c.EVENT_PATCH_CREATED, actor=user, series=series, patch=p,
                         payload={"position": p.position})
        refs = [first.in_reply_to, *first.references]
        previous, reason = find_previous_version(series, mails=refs, user=user)
        if previous is not None:
            _link(series=series, previous=previous, reason=reason, user=user)
    return series


def _would_cycle(series: Series, previous: Series) -> bool:
    node: Series | None = previous
    for _ in range(100):
        if node is None:
            return False
        if node.pk == series.pk:
            return True
        node = node.previous
    return True


def _link(*, series: Series, previous: Series | None, reason: str, user: Any) -> None:
    series.previous = previous
    series.link_reason = reason if previous is not None else c.LINK_NONE
    series.save(update_fields=["previous", "link_reason"])
    if previous is not None:
        # The earlier version's open patches are superseded, as maintainers mark them in
        # Patchwork when a new version arrives.
        previous.patches.filter(state__in=[c.PATCH_STATE_NEW, c.PATCH_STATE_UNDER_REVIEW,
                                           c.PATCH_STATE_RFC]).update(
            state=c.PATCH_STATE_SUPERSEDED)
    event_create(kind=c.EVENT_SERIES_LINKED, actor=user, series=series,
                 payload={"previous": previous.pk if previous else None, "reason": reason})


def series_relink(*, series: Series, previous: Series | None, user: Any) -> Series:
    """Set (or clear, with ``previous=None``) the earlier version of ``series`` by hand.

    Only the uploader of ``series`` (or staff) may; ``previous`` must be visible to them and
    must not make a cycle.
    """
    from reviewapp.access import can_change_series
    from reviewapp.services import NotAllowed

    if not can_change_series(user, series):
        raise NotAllowed("only the uploader of a series (or whom they share it with for "
                         "changes) can relink its versions")
    if previous is not None:
        if not Series.objects.filter(_visible_q(user), pk=previous.pk).exists():
            raise UploadRejected(f"previous: no series #{previous.pk}", field="previous")
        if previous.pk == series.pk or _would_cycle(series, previous):
            raise UploadRejected("previous: that would make a loop of versions",
                                 field="previous")
    with transaction.atomic():
        _link(series=series, previous=previous, reason=c.LINK_MANUAL, user=user)
    return series
