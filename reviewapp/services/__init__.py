"""Writes: every change to the data goes through a function here, named ``<entity>_<action>``.

Views, API views, management commands and Celery tasks only translate their input and call one
of these (style.md habit 1). Errors a user can act on are :class:`ServiceError` subclasses
carrying the HTTP status the REST API answers with.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A request that cannot be carried out; ``message`` is shown to the user as is."""

    status = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.message = message
        self.field = field
        super().__init__(message)


class UploadRejected(ServiceError):
    """Empty upload, unrecognised file, bad metadata."""


class UploadTooLargeError(ServiceError):
    """Over BLKREVIEW_MAX_UPLOAD_MB."""

    status = 413


class NotAllowed(ServiceError):
    status = 403
