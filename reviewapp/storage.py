"""Trace bytes and parsed tables in Django storage, under generated names.

Uploads are streamed chunk by chunk into storage while a sha256 and a byte count are kept
(:class:`HashingFile`), so a bundle is never read wholly into memory and its checksum costs no
second pass. Names are generated (``traces/<uuid>``); the client's path is never used.
For the worker, :func:`local_copy` gives a filesystem path for a stored name (the storage's own
path when it has one, else a temporary copy streamed from the bucket), because the engine reads
files by path. The storage is MEDIA_ROOT or an S3-compatible bucket (reviewapp/storage_config.py);
web and workers share only the storage, never a filesystem.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import default_storage

CHUNK = 1024 * 1024


class UploadTooLarge(Exception):
    """The bytes streamed so far exceed the allowed size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"upload exceeds the limit of {limit // (1024 * 1024)} MB")


class HashingFile(File):
    """A File whose reads feed a sha256 and a byte counter, and stop at a limit.

    ``remaining`` is how many bytes may still be read before :class:`UploadTooLarge` is raised
    (the limit is per bundle, so the caller passes what is left of it). Every byte passes
    through :meth:`read` exactly once, whichever way the storage consumes it:
    FileSystemStorage iterates :meth:`chunks`; the S3 backend hands the file to boto3's
    multipart upload, which reads it part by part. It says it is not seekable, so boto3 never
    rewinds it (a rewind would hash bytes twice).
    """

    def __init__(self, file: Any, *, remaining: int) -> None:
        super().__init__(file, name=getattr(file, "name", None))
        self.sha256 = hashlib.sha256()
        self.nbytes = 0
        self.remaining = remaining
        with contextlib.suppress(AttributeError, OSError, ValueError):
            file.seek(0)  # the upload check may have read the head already

    def read(self, size: int | None = -1) -> bytes:
        chunk = self.file.read(-1 if size is None else size)
        if isinstance(chunk, str):
            chunk = chunk.encode()
        self.nbytes += len(chunk)
        if self.nbytes > self.remaining:
            raise UploadTooLarge(self.remaining)
        self.sha256.update(chunk)
        return chunk

    def seekable(self) -> bool:
        return False

    def seek(self, *args: Any) -> int:
        raise OSError("HashingFile is read once, front to back")

    def chunks(self, chunk_size: int | None = None) -> Iterator[bytes]:
        return iter(lambda: self.read(chunk_size or CHUNK), b"")

    def multiple_chunks(self, chunk_size: int | None = None) -> bool:
        return True

    def __iter__(self) -> Iterator[bytes]:
        return self.chunks()


def new_trace_name() -> str:
    return f"traces/{uuid.uuid4().hex}"


def new_events_name(bundle_id: int) -> str:
    return f"tables/bundle-{bundle_id}-{uuid.uuid4().hex[:12]}.npz"


def save_stream(file: Any, *, remaining: int) -> tuple[str, str, int]:
    """Stream ``file`` into storage under a generated name.

    Returns:
        ``(storage_name, sha256_hex, size)``.

    Raises:
        UploadTooLarge: more than ``remaining`` bytes; nothing is left in storage.
    """
    hashing = HashingFile(file, remaining=remaining)
    name = new_trace_name()
    try:
        stored = default_storage.save(name, hashing)
    except UploadTooLarge:
        with contextlib.suppress(Exception):
            default_storage.delete(name)
        raise
    return stored, hashing.sha256.hexdigest(), hashing.nbytes


def delete_quietly(name: str) -> None:
    if name:
        with contextlib.suppress(Exception):
            default_storage.delete(name)


def save_bytes(name: str, fileobj: IO[bytes]) -> str:
    """Store an open binary file (e.g. a just-written .npz) under ``name``."""
    return default_storage.save(name, File(fileobj))


def _s3_object(name: str) -> Any:
    """The boto3 Object of ``name`` when the default storage is S3, else None."""
    bucket = getattr(default_storage, "bucket", None)
    normalize = getattr(default_storage, "_normalize_name", None)
    if bucket is None or normalize is None:
        return None
    from storages.utils import clean_name

    return bucket.Object(normalize(clean_name(name)))


def read_head(name: str, nbytes: int) -> bytes:
    """The first ``nbytes`` of a stored file: one ranged GET from S3 (django-storages' file
    object would download the whole object first), a plain read elsewhere."""
    obj = _s3_object(name)
    if obj is not None:
        from botocore.exceptions import ClientError

        try:
            return bytes(obj.get(Range=f"bytes=0-{max(nbytes, 1) - 1}")["Body"].read())
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code"))
            if code in ("404", "NoSuchKey", "NotFound"):
                raise FileNotFoundError(f"{name}: not in the bucket") from exc
            raise
    with default_storage.open(name, "rb") as fh:
        return bytes(fh.read(nbytes))


@contextlib.contextmanager
def local_copy(name: str, *, suffix: str = "") -> Iterator[Path]:
    """A local filesystem path holding the stored bytes of ``name``.

    The storage's own path when it has one (a local MEDIA_ROOT), else a temporary copy in this
    host's temp directory: from S3 through boto3's ranged download, streamed to disk, never
    whole in memory. Nothing here assumes the web and the worker share a filesystem.
    """
    try:
        path = default_storage.path(name)
    except NotImplementedError:
        path = None
    if path is not None and os.path.exists(path):
        yield Path(path)
        return
    fd, tmp = tempfile.mkstemp(suffix=suffix, prefix="blkreview-")
    try:
        with os.fdopen(fd, "wb") as out:
            obj = _s3_object(name)
            if obj is not None:
                from botocore.exceptions import ClientError

                try:
                    obj.download_fileobj(out, Config=default_storage.transfer_config)
                except ClientError as exc:
                    if _s3_missing(exc):
                        raise FileNotFoundError(f"{name}: not in the bucket") from exc
                    raise
            else:
                with default_storage.open(name, "rb") as src:
                    shutil.copyfileobj(src, out, CHUNK)
        yield Path(tmp)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _s3_missing(exc: Any) -> bool:
    return str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound")


def iter_range(name: str, offset: int, length: int, *, chunk: int = CHUNK) -> Iterator[bytes]:
    """The ``length`` bytes of ``name`` from ``offset``, in chunks of at most ``chunk``.

    The storage is opened (and a missing object reported as FileNotFoundError) when this is
    called, not on the first ``next``, so a caller can still answer 404 before it starts a
    response. S3: one ranged GET, its body streamed, never the whole object; local: a seek.
    """
    if length <= 0:
        return iter(())
    obj = _s3_object(name)
    if obj is not None:
        from botocore.exceptions import ClientError

        try:
            body = obj.get(Range=f"bytes={offset}-{offset + length - 1}")["Body"]
        except ClientError as exc:
            if _s3_missing(exc):
                raise FileNotFoundError(f"{name}: not in the bucket") from exc
            raise

        def s3_chunks() -> Iterator[bytes]:
            try:
                yield from body.iter_chunks(chunk)
            finally:
                body.close()
        return s3_chunks()
    src = default_storage.open(name, "rb")

    def local_chunks() -> Iterator[bytes]:
        try:
            src.seek(offset)
            left = length
            while left > 0:
                data = src.read(min(chunk, left))
                if not data:
                    raise OSError(f"{name}: {left} bytes short of its recorded range")
                left -= len(data)
                yield data
        finally:
            src.close()
    return local_chunks()


def read_range(name: str, offset: int, length: int) -> bytes:
    """The ``length`` bytes of ``name`` from ``offset`` (see :func:`iter_range`)."""
    data = b"".join(iter_range(name, offset, length))
    if len(data) != max(0, length):
        raise OSError(f"{name}: read {len(data)} of {length} bytes at {offset}")
    return data


def storage_kind() -> str:
    """``"s3"`` or ``"local"``: what the default storage is."""
    return "s3" if getattr(default_storage, "bucket_name", None) else "local"


def storage_health() -> dict[str, Any]:
    """Whether the default storage answers: ``{"ok": bool, "backend": "s3"|"local", "error"}``.

    S3: a HEAD of the bucket (credentials, endpoint and bucket all checked). Local: MEDIA_ROOT
    is a writable directory. ``error`` is a short reason for the operator; the exception
    itself is logged, never shown.
    """
    import logging

    kind = storage_kind()
    try:
        if kind == "s3":
            default_storage.connection.meta.client.head_bucket(
                Bucket=default_storage.bucket_name)
        else:
            root = Path(default_storage.location)
            if not (root.is_dir() and os.access(root, os.W_OK)):
                return {"ok": False, "backend": kind, "error": "media directory not writable"}
        return {"ok": True, "backend": kind, "error": ""}
    except Exception:
        logging.getLogger(__name__).warning("storage health check failed", exc_info=True)
        return {"ok": False, "backend": kind, "error": "storage unreachable"}


def ensure_bucket() -> bool:
    """Create the S3 bucket when it does not exist yet; True when one was created.

    A no-op for local storage. ``manage.py init_storage`` calls it (docker-compose's web does
    before migrating), so a fresh SeaweedFS needs no manual step.
    """
    if storage_kind() != "s3":
        return False
    client = default_storage.connection.meta.client
    from botocore.exceptions import ClientError

    try:
        client.head_bucket(Bucket=default_storage.bucket_name)
        return False
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
    client.create_bucket(Bucket=default_storage.bucket_name)
    return True
