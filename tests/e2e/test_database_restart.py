"""PostgreSQL restarts and goes down under a live gunicorn: requests across it.

The test starts its own PostgreSQL cluster (initdb into a temporary directory, as the postgres
OS user when run as root) on a free port, so the shared cluster on 5432 is never touched, and a
gunicorn process configured as in production (persistent connections, CONN_MAX_AGE 60, with
CONN_HEALTH_CHECKS). Asserted: the first request after a restart succeeds; while the database
is down every page and API endpoint (all URL patterns but the admin's) answers 503 with a short
body (JSON under /api/) unless it needs no database (then as before), never 500, and /healthz
names the database, with no driver error or address in any answer.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
if not BIN:
    pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql", allow_module_level=True)
PG = Path(BIN[-1])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class Cluster:
    def __init__(self, root: Path, port: int) -> None:
        self.data, self.port, self.log = root / "data", port, root / "postgres.log"
        self.sock = root

    def pg_ctl(self, *args: str) -> None:
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(_as_postgres([str(PG / "pg_ctl"), "-D", str(self.data), "-l",
                                     str(self.log), "-o", opts, "-w", "-t", "60", *args]),
                       check=True, stdout=subprocess.DEVNULL)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="blkreview-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    c = Cluster(root, _free_port())
    try:
        subprocess.run(_as_postgres([str(PG / "initdb"), "-D", str(c.data), "-U", "postgres",
                                     "--auth=trust", "-E", "UTF8", "--no-sync"]),
                       check=True, stdout=subprocess.DEVNULL)
        c.pg_ctl("start")
        yield c
    finally:
        with contextlib.suppress(Exception):
            c.pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(root, ignore_errors=True)


def get(url: str) -> tuple[int, str, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def get_with_token(url: str, token: str) -> tuple[int, str, dict[str, str]]:
    req = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


@contextlib.contextmanager
def gunicorn(env: dict[str, str], port: int, log: Path) -> Iterator[str]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "reviewapp.wsgi:application", "--bind",
             f"127.0.0.1:{port}", "--workers", "1", "--timeout", "60"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            with contextlib.suppress(OSError):
                return get(base + "/healthz")[0] in (200, 503)
            return False

        wait_for(up, timeout=60, what="gunicorn")
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def all_get_urls() -> list[str]:
    """Every URL pattern of the site (admin aside), ids 1 and slugs "x" filled in."""
    import re

    from django.urls import URLResolver, get_resolver

    def walk(patterns: Any, prefix: str = "") -> Iterator[str]:
        for p in patterns:
            s = str(p.pattern).lstrip("^").rstrip("$").replace("\\.", ".").replace("\\Z", "")
            s = re.sub(r"\(\?P<version>[^)]*\)", "v1", s)
            s = re.sub(r"<int:[^>]+>", "1", s)
            s = re.sub(r"<[^>]+>", "x", s)
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + s)
            else:
                yield "/" + prefix + s

    return [u for u in walk(get_resolver().url_patterns) if not u.startswith("/admin/")]


PAGES = ["/", "/comparisons/1/", "/comparisons/1/progress.json", "/series/", "/series/1/"]
API = ["/api/v1/comparisons/", "/api/v1/comparisons/1/", "/api/v1/comparisons/1/check/",
       "/api/v1/bundles/1/"]
LEAKS = ("psycopg", "OperationalError", "connection", "127.0.0.1", "Traceback")


def test_requests_across_a_postgresql_restart_and_outage(tmp_path: Path) -> None:
    with cluster() as pg:
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_VERSION"}
        env.update({
            "DJANGO_SETTINGS_MODULE": "reviewapp.settings", "DATABASE_URL": pg.url,
            "SECRET_KEY": "test-" + "x" * 40, "MEDIA_ROOT": str(tmp_path / "media"),
            "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"),
            "PYTHONPATH": str(ROOT), "ALLOWED_HOSTS": "127.0.0.1",
        })
        (tmp_path / "media").mkdir()
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                       cwd=ROOT, env=env, check=True)
        with gunicorn(env, _free_port(), tmp_path / "gunicorn.log") as base:
            urls = all_get_urls()
            assert len(urls) > 40 and set(PAGES + API) <= set(urls)
            before = {p: get(base + p)[0] for p in urls}
            assert before["/"] == 200 and before["/api/v1/comparisons/"] == 200, before
            assert get(base + "/healthz")[0] == 200

            # connections terminated under the web worker: the next request reconnects
            pg.pg_ctl("restart", "-m", "fast")
            assert get(base + "/")[0] == 200
            assert get(base + "/api/v1/comparisons/")[0] == 200

            pg.pg_ctl("stop", "-m", "fast")
            # every URL: either the same answer as before (it needs no database) or 503
            down = {p: get(base + p) for p in urls}
            for path, (status, body, _) in down.items():
                assert status == before[path] or status == 503, (path, before[path], status,
                                                                 body[:300])
                if status == 503:
                    assert len(body) < 400 and not any(leak in body for leak in LEAKS), path
            assert sum(1 for v in down.values() if v[0] == 503) >= 30
            for path in PAGES + API:
                status, body, headers = get(base + path)
                assert status == 503, (path, status, body[:300])
                assert len(body) < 400 and headers.get("Retry-After") == "30", (path, body)
                assert not any(leak in body for leak in LEAKS), (path, body)
                assert str(pg.port) not in body
                if path.startswith("/api/"):
                    assert json.loads(body)["code"] == "unavailable"
            status, body, _ = get(base + "/healthz")
            assert status == 503
            assert json.loads(body)["database"] == "down" and json.loads(body)["status"] == \
                "unavailable"
            assert not any(leak in body for leak in LEAKS)

            status, body, _ = get_with_token(base + "/api/v1/comparisons/", "not-a-token")
            assert status == 503 and json.loads(body)["code"] == "unavailable"

            pg.pg_ctl("start")
            after = {p: get(base + p)[0] for p in urls}
            assert after == before, (before, after)
            assert get(base + "/healthz")[0] == 200
        log = (tmp_path / "gunicorn.log").read_text()
        assert "database unavailable for GET /" in log  # the details went to the log
