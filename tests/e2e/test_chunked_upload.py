"""A chunked (Transfer-Encoding: chunked) upload against a live gunicorn is accepted like one
with a Content-Length (issue 10 item 13); a server that does not decode chunks answers 411."""

from __future__ import annotations

import http.client
import io
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, blkparse_lines
from tests.e2e.test_serve import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def live_gunicorn(transactional_db: Any, tmp_path: Path) -> Iterator[str]:
    """gunicorn reviewapp.wsgi:application on the test database (the production entry point)."""
    from django.conf import settings
    from django.db import connection

    db = connection.settings_dict
    auth = f"{db.get('USER') or 'postgres'}@"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_VERSION"}
    env.update({"DJANGO_SETTINGS_MODULE": "reviewapp.settings",
                "DATABASE_URL": f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:"
                                f"{db.get('PORT') or 5432}/{db['NAME']}",
                "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
                "BLKREVIEW_ANALYSIS_QUEUE": settings.BLKREVIEW_ANALYSIS_QUEUE,
                "MEDIA_ROOT": str(settings.MEDIA_ROOT), "SECRET_KEY": settings.SECRET_KEY,
                "ALLOWED_HOSTS": "127.0.0.1,localhost"})
    port = free_port()
    log = open(tmp_path / "gunicorn.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "reviewapp.wsgi:application",
                             "--bind", f"127.0.0.1:{port}", "--workers", "1"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/api/v1/schema/")
                c.getresponse().read()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError((tmp_path / "gunicorn.log").read_text()[-3000:]) from None
                time.sleep(0.3)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def multipart(fields: dict[str, str], files: list[tuple[str, str, bytes]]) -> tuple[str, bytes]:
    boundary = uuid.uuid4().hex
    out = io.BytesIO()
    for k, v in fields.items():
        out.write(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                  .encode())
    for field, name, data in files:
        out.write(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; "
                  f"filename=\"{name}\"\r\nContent-Type: text/plain\r\n\r\n".encode())
        out.write(data + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", out.getvalue()


def chunks(data: bytes, size: int = 7000) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


def test_chunked_upload_is_accepted(live_gunicorn, user):
    """http.client with encode_chunked=True (no Content-Length): 201, the file is there."""
    from reviewapp.models import TraceBundle
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name="chunked")
    trace = blkparse_lines([128 * i for i in range(3000)])  # ~200 KB: many chunks
    ctype, body = multipart({"role": "baseline", "kernel": "6.18-chunked"},
                            [("files", "chunked.blkparse.txt", trace)])
    conn = http.client.HTTPConnection(live_gunicorn, timeout=60)
    conn.request("POST", "/api/v1/bundles/", body=chunks(body), encode_chunked=True,
                 headers={"Authorization": f"Token {key}", "Content-Type": ctype,
                          "Transfer-Encoding": "chunked"})
    r = conn.getresponse()
    answer = json.loads(r.read())
    assert r.status == 201, answer
    assert answer["files"][0]["name"] == "chunked.blkparse.txt"
    assert answer["files"][0]["size"] == len(trace)
    bundle = TraceBundle.objects.get(pk=answer["id"])
    assert bundle.kernel == "6.18-chunked" and bundle.size == len(trace)


def test_chunked_upload_without_files_is_still_a_clear_400(live_gunicorn, user):
    """A chunked body is parsed, not dropped: a multipart without files says so (400)."""
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name="chunked")
    conn = http.client.HTTPConnection(live_gunicorn, timeout=60)
    ctype, body = multipart({"role": "baseline"}, [])
    conn.request("POST", "/api/v1/bundles/", body=chunks(body), encode_chunked=True,
                 headers={"Authorization": f"Token {key}", "Content-Type": ctype})
    r = conn.getresponse()
    assert r.status == 400 and "no files uploaded" in json.loads(r.read())["error"]


def test_server_without_chunk_decoding_answers_411():
    """wsgiref/runserver hand on the raw chunked stream: 411 with a JSON reason; a request
    with a Content-Length is untouched."""
    from reviewapp.chunked import ChunkedBodyMiddleware

    seen: list[Any] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ)
        start_response("200 OK", [])
        return [b"ok"]

    mw = ChunkedBodyMiddleware(app)
    status: list[str] = []
    out = mw({"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": io.BytesIO(b"5\r\nhello")},
             lambda s, h: status.append(s))
    assert status == ["411 Length Required"] and not seen
    assert "Content-Length" in json.loads(b"".join(out))["error"]
    out = mw({"CONTENT_LENGTH": "2", "wsgi.input": io.BytesIO(b"hi")}, lambda s, h: None)
    assert b"".join(out) == b"ok" and seen[0]["CONTENT_LENGTH"] == "2"


def test_decoded_chunked_body_gets_its_length(settings):
    """gunicorn's decoded stream (wsgi.input_terminated) is spooled and handed on with its
    Content-Length; past the cap it is 413."""
    from reviewapp.chunked import ChunkedBodyMiddleware

    got: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        got["length"] = environ["CONTENT_LENGTH"]
        got["body"] = environ["wsgi.input"].read()
        got["te"] = environ.get("HTTP_TRANSFER_ENCODING")
        start_response("200 OK", [])
        return [b"ok"]

    env = {"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input_terminated": True,
           "wsgi.input": io.BytesIO(b"x" * 300_000)}
    result = ChunkedBodyMiddleware(app)(env, lambda s, h: None)
    assert b"".join(result) == b"ok"
    result.close()
    assert got == {"length": "300000", "body": b"x" * 300_000, "te": None}
    settings.BLKREVIEW_MAX_UPLOAD_BYTES = 1000
    from reviewapp.api.base import MULTIPART_SLACK

    status: list[str] = []
    env["wsgi.input"] = io.BytesIO(b"x" * (2000 + MULTIPART_SLACK + 1))
    body = ChunkedBodyMiddleware(app)(env, lambda s, h: status.append(s))
    assert status == ["413 Request Entity Too Large"]
    assert json.loads(b"".join(body))["code"] == "too_large"
