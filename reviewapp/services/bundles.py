"""bundle_create: stream uploaded files to storage, checksum them, share stored bytes, queue the
analysis."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import transaction

from reviewapp import constants as c
from reviewapp.models import TraceBundle, TraceFile
from reviewapp.services import UploadRejected, UploadTooLargeError
from reviewapp.storage import UploadTooLarge, delete_quietly, save_stream

log = logging.getLogger(__name__)

SNIFF_BYTES = 64 * 1024


def clean_client_name(name: str | None) -> str:
    """The client's file name without any directory part (display only, never a path)."""
    base = os.path.basename((name or "").replace("\\", "/")).strip()
    base = "".join(ch for ch in base if ch.isprintable())
    return base[:200] or "unnamed"


def _read_head(file: Any) -> bytes:
    file.seek(0)
    head = file.read(SNIFF_BYTES)
    file.seek(0)
    return head if isinstance(head, bytes) else head.encode()


def detect_upload_format(file: Any, name: str) -> str:
    """Format of an uploaded file from its first bytes (workers.traces.detect); the complete
    lines of those bytes are parsed too (workers.traces.precheck), so a malformed line near the
    top is refused now rather than failing the job later.

    Raises:
        UploadRejected: empty, not a recognised trace/summary/archive, or a malformed line in
            the first 64 KiB, with the file, line and reason.
    """
    from workers.errors import BlkreviewError, ParseError
    from workers.traces.detect import detect_bytes
    from workers.traces.precheck import check_head

    head = _read_head(file)
    if not head:
        raise UploadRejected(f"{name}: empty file")
    try:
        fmt = str(detect_bytes(head, name))
        size = getattr(file, "size", None)
        check_head(head, name=name, fmt=fmt, complete=size is not None and size <= len(head))
        return fmt
    except ParseError as exc:
        raise UploadRejected(exc.message) from exc
    except BlkreviewError as exc:
        raise UploadRejected(f"{name}: {exc}") from exc


def bundle_validate(*, files: Sequence[Any], side_label: str) -> list[tuple[Any, str, str]]:
    """Check a side's files before anything is stored: present, recognised, in size.

    An empty file (an idle CPU's ``.blktrace.N``) is accepted when the side has other,
    non-empty files; a side whose files are all empty is rejected.

    Returns:
        ``(file, client name, format)`` per file.
    """
    limit = settings.BLKREVIEW_MAX_UPLOAD_BYTES
    files = [f for f in files if f is not None]
    if not files:
        raise UploadRejected(f"{side_label}: no files uploaded", field=side_label or None)
    declared = sum(int(getattr(f, "size", 0) or 0) for f in files)
    if declared > limit:
        raise UploadTooLargeError(
            f"{side_label}: {declared / 2**20:.1f} MB is over the upload limit of "
            f"{limit // 2**20} MB",
            field=side_label or None,
        )
    checked = []
    empty = []
    for f in files:
        client = clean_client_name(getattr(f, "name", ""))
        if not _read_head(f):
            # blktrace leaves an empty per-CPU file (name.blktrace.N) for an idle CPU: fine
            # beside other trace files; ingest skips it with a warning
            empty.append(client)
            checked.append((f, client, "empty"))
            continue
        checked.append((f, client, detect_upload_format(f, client)))
    if len(empty) == len(checked):
        raise UploadRejected(
            f"{side_label}: {'the file is' if len(empty) == 1 else 'every file is'} empty "
            f"({', '.join(empty[:5])}{', ...' if len(empty) > 5 else ''})",
            field=side_label or None)
    return checked


def bundle_checksum(file_checksums: Sequence[str]) -> str:
    """sha256 over the sorted sha256 of the files: the same bytes give the same bundle,
    whatever the file names or the order of upload."""
    return hashlib.sha256("\n".join(sorted(file_checksums)).encode()).hexdigest()


def bundle_create(
    *,
    files: Sequence[Any],
    role: str = c.ROLE_BASELINE,
    kernel: str = "",
    stack: str = "",
    limits: str = "",
    workload: str = "",
    name: str = "",
    user: Any = None,
    side_label: str = "",
    strict: bool = False,
) -> tuple[TraceBundle, bool]:
    """Store one run's files and queue its analysis.

    Files are streamed into storage under generated names while their sha256 is computed.
    Every call makes a new bundle with this call's metadata and uploader, whatever the bytes
    (issue 10 §4, issue 11): only the stored bytes are shared with an earlier upload of the
    same content, never the bundle, so an upload tells nothing about other users' uploads.

    Args:
        files: Django UploadedFile objects (or anything with ``name``, ``size``, ``read``,
            ``seek`` and ``chunks``), several traces or one archive.
        side_label: "baseline"/"patched", used to word error messages.

    Returns:
        ``(bundle, created)``; ``created`` is always True (kept for callers).

    Raises:
        UploadRejected: no files, only empty files, an unrecognised format.
        UploadTooLargeError: more than BLKREVIEW_MAX_UPLOAD_MB in total.
        UploadQuotaExceeded: over the uploader's daily count or bytes (429).
    """
    label = side_label or role
    limit = settings.BLKREVIEW_MAX_UPLOAD_BYTES
    checked = bundle_validate(files=files, side_label=label)
    from reviewapp.services.limits import upload_quota_check

    upload_quota_check(user=user, count=1, field=side_label or None,
                       nbytes=sum(int(getattr(f, "size", 0) or 0) for f, _, _ in checked))

    stored: list[tuple[str, str, str, str, int]] = []  # (client, fmt, storage, sha, size)
    remaining = limit
    try:
        for f, client, fmt in checked:
            f.seek(0)
            storage_name, sha, size = save_stream(f, remaining=remaining)
            remaining -= size
            stored.append((client, fmt, storage_name, sha, size))
    except UploadTooLarge as exc:
        for item in stored:
            delete_quietly(item[2])
        raise UploadTooLargeError(
            f"{label}: over the upload limit of {exc.limit // 2**20} MB", field=label or None
        ) from exc

    checksum = bundle_checksum([s[3] for s in stored])
    with transaction.atomic():
        bundle = TraceBundle.objects.create(
            role=role, name=name[:200], kernel=kernel[:100], stack=stack, limits=limits,
            workload=workload, checksum=checksum, size=sum(s[4] for s in stored),
            strict=strict,
            uploaded_by=user if getattr(user, "is_authenticated", False) else None,
        )
        for client, fmt, storage_name, sha, size in stored:
            same = (TraceFile.objects.filter(checksum=sha).exclude(storage_name=storage_name)
                    .values_list("storage_name", flat=True).first())
            if same is not None:
                # The bytes are already in storage: point at them, drop the new copy. Stored
                # blobs are shared, bundles are not (see TraceBundle).
                transaction.on_commit(lambda n=storage_name: delete_quietly(n))
                storage_name = same
            TraceFile.objects.create(
                bundle=bundle, name=client, format=fmt, size=size, checksum=sha,
                storage_name=storage_name,
            )
        from reviewapp.services.jobs import job_create_for_bundle

        job_create_for_bundle(bundle=bundle)
    return bundle, True
