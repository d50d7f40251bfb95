"""Trace bytes and parsed tables in Django storage, under generated names.

Uploads are streamed chunk by chunk into storage while a sha256 and a byte count are kept
(:class:`HashingFile`), so a bundle is never read wholly into memory and its checksum costs no
second pass. Names are generated (``traces/<uuid>``); the client's path is never used.
For the worker, :func:`local_copy` gives a filesystem path for a stored name (the storage's own
path when it has one, else a temporary copy), because the engine reads files by path.
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
    """A File whose ``chunks()`` feeds a sha256 and a byte counter, and stops at a limit.

    ``remaining`` is how many bytes may still be read before :class:`UploadTooLarge` is raised
    (the limit is per bundle, so the caller passes what is left of it).
    """

    def __init__(self, file: Any, *, remaining: int) -> None:
        super().__init__(file, name=getattr(file, "name", None))
        self.sha256 = hashlib.sha256()
        self.nbytes = 0
        self.remaining = remaining

    def chunks(self, chunk_size: int | None = None) -> Iterator[bytes]:
        source = self.file
        if hasattr(source, "chunks"):
            it = source.chunks(chunk_size or CHUNK)
        else:
            with contextlib.suppress(AttributeError, OSError):
                source.seek(0)
            it = iter(lambda: source.read(chunk_size or CHUNK), b"")
        for chunk in it:
            self.nbytes += len(chunk)
            if self.nbytes > self.remaining:
                raise UploadTooLarge(self.remaining)
            self.sha256.update(chunk)
            yield chunk

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


@contextlib.contextmanager
def local_copy(name: str, *, suffix: str = "") -> Iterator[Path]:
    """A local filesystem path holding the stored bytes of ``name``."""
    try:
        path = default_storage.path(name)
    except NotImplementedError:
        path = None
    if path is not None and os.path.exists(path):
        yield Path(path)
        return
    fd, tmp = tempfile.mkstemp(suffix=suffix, prefix="blkreview-")
    try:
        with os.fdopen(fd, "wb") as out, default_storage.open(name, "rb") as src:
            shutil.copyfileobj(src, out, CHUNK)
        yield Path(tmp)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
