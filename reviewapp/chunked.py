"""Chunked request bodies (``Transfer-Encoding: chunked``, issue 10 item 13).

A chunked request carries no Content-Length, and Django reads the body of such a request as
empty: a chunked upload was answered "no files uploaded" although the file was sent. This WSGI
middleware (wrapped around the application in ``reviewapp.wsgi``) makes it an ordinary request:

* gunicorn decodes the chunks and marks the stream ``wsgi.input_terminated`` (it ends where the
  body ends). The body is spooled to a temporary file (in memory up to 1 MiB, then on disk, so a
  large upload does not grow the worker), capped at what the largest upload may be (two sides of
  BLKREVIEW_MAX_UPLOAD_MB plus the multipart slack: 413 beyond), and handed on with its
  Content-Length; the usual size checks, quotas and parsers then apply.
* A server that passes the raw chunked stream on (wsgiref, ``runserver``) cannot tell where the
  body ends: the request is answered **411** with a JSON error asking for Content-Length.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

SPOOL_MEMORY = 1 << 20
READ = 1 << 16


def _json(start_response: Callable[..., Any], status: str, body: dict[str, str]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(data)))])
    return [data]


class _Closing:
    """The application's response iterable, closing the spooled body when the server is done."""

    def __init__(self, result: Iterable[bytes], spool: Any) -> None:
        self.result = result
        self.spool = spool

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.result)

    def close(self) -> None:
        try:
            close = getattr(self.result, "close", None)
            if close is not None:
                close()
        finally:
            self.spool.close()


class ChunkedBodyMiddleware:
    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if "chunked" not in str(environ.get("HTTP_TRANSFER_ENCODING", "")).lower():
            return self.app(environ, start_response)
        if not environ.get("wsgi.input_terminated"):
            return _json(start_response, "411 Length Required", {
                "error": "a chunked request body is not supported by this server: send the "
                         "upload with a Content-Length header (curl does unless told to chunk)",
                "code": "length_required"})
        from django.conf import settings

        from reviewapp.api.base import MULTIPART_SLACK

        limit = 2 * settings.BLKREVIEW_MAX_UPLOAD_BYTES + MULTIPART_SLACK
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
        size = 0
        stream = environ["wsgi.input"]
        try:
            while True:
                chunk = stream.read(READ)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    spool.close()
                    return _json(start_response, "413 Request Entity Too Large", {
                        "error": f"request body over the upload limit of "
                                 f"{settings.BLKREVIEW_MAX_UPLOAD_BYTES // 2**20} MB per side",
                        "code": "too_large"})
                spool.write(chunk)
        except Exception:
            spool.close()
            raise
        spool.seek(0)
        environ = dict(environ)
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        environ["CONTENT_LENGTH"] = str(size)
        environ["wsgi.input"] = spool
        return _Closing(self.app(environ, start_response), spool)
