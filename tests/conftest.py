"""Shared fixtures: users, API clients, and a real Celery worker process for e2e tests.

The test run talks to real PostgreSQL and Redis. reviewapp/settings.py selects them when it
is loaded under pytest (``PYTEST_VERSION`` is set): ``DATABASE_URL`` defaults to
``postgres://postgres@127.0.0.1:5432/blkreview`` (pytest-django creates
``test_blkreview_<pid>`` from it), ``CELERY_BROKER_URL`` to ``redis://127.0.0.1:6379/0`` and the
queues to ``analysis-test-<pid>``, ``replay-test-<pid>`` and ``notify-test-<pid>``, so concurrent
test runs never take each other's tasks. The ``celery_worker`` fixture starts
``celery -A workers.celery worker -Q <those queues> --pool=solo --concurrency=1``
pointed at the test database and the same MEDIA_ROOT.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Property tests: no per-example deadline. The first example of a parser test pays numba's
# one-time compile (tens of seconds on a fresh checkout, where the cache is cold), and the
# machine's two cores are shared, so a wall-clock deadline only measures load. Each test still
# bounds its work through max_examples and input sizes.
settings.register_profile("blkreview", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("blkreview")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
DEMO = ROOT / "reviewapp" / "demo"

# Engine tests (tests/engine) do not need Django; pytest-django still configures it, which
# is harmless. Everything Django is imported lazily inside fixtures.


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--storage", choices=("local", "s3"),
        default=os.environ.get("BLKREVIEW_TEST_STORAGE", "local"),
        help="where the whole run stores uploads and tables: local MEDIA_ROOT (default) or a "
             "SeaweedFS S3 server started for the session (also BLKREVIEW_TEST_STORAGE=s3)")


def pytest_configure(config: Any) -> None:
    # whitenoise warns that STATIC_ROOT does not exist: tests serve static files via finders.
    config.addinivalue_line("filterwarnings", "ignore:No directory at:UserWarning")


@pytest.fixture
def password() -> str:
    return "s3cret-for-tests"


@pytest.fixture
def user(db: Any, password: str) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("maintainer", "m@example.org", password)


@pytest.fixture
def other_user(db: Any, password: str) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("someone", "s@example.org", password)


@pytest.fixture
def logged_in_client(client: Any, user: Any) -> Any:
    client.force_login(user)
    return client


@pytest.fixture
def api_token(user: Any) -> str:
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name="tests")
    return key


@pytest.fixture
def api_client(api_token: str) -> Any:
    from rest_framework.test import APIClient

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {api_token}")
    return c


def blkparse_lines(sectors: list[int], *, length: int = 128, action: str = "G",
                   rwbs: str = "R", dev: str = "8,0") -> bytes:
    """blkparse default-format lines, one request per sector, 1 us apart."""
    lines = []
    for i, s in enumerate(sectors):
        t = 1.0 + i * 1e-6
        lines.append(f"{dev:>5} {0:>2} {i + 1:>8} {t:14.9f} {843:>5}  {action:<2}{rwbs:>3} "
                     f"{s} + {length} [dd]")
    return ("\n".join(lines) + "\n").encode()


def past_head(data: bytes, lines: int = 1000) -> bytes:
    """``data`` followed by enough valid G lines to push what comes next past the 64 KiB the
    upload check parses, so a malformed line there reaches the worker (the job fails)."""
    pad = blkparse_lines([10_000_000 + 128 * i for i in range(lines)])
    assert len(data) + len(pad) > 64 * 1024
    return data + pad


def uploaded(name: str, data: bytes) -> Any:
    """A file object as Django hands uploads to views (on disk, like TemporaryUploadedFile)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="text/plain")


@pytest.fixture
def seed000_before() -> bytes:
    return (DEMO / "seed000_before.blkparse.txt").read_bytes()


@pytest.fixture
def seed000_after() -> bytes:
    return (DEMO / "seed000_after.blkparse.txt").read_bytes()


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[Any]:
    """A real SeaweedFS (``weed server -s3``) on free loopback ports for the session."""
    from tests import seaweedfs as weed

    server = weed.start()
    try:
        yield server
    finally:
        server.stop()


def s3_storages(storage_url: str) -> dict[str, Any]:
    """settings.STORAGES with the default storage at ``storage_url`` (this run's prefix)."""
    from django.conf import settings

    from reviewapp.storage_config import storage_backend

    env = dict(os.environ)
    env["STORAGE_URL"] = storage_url
    return {**settings.STORAGES, "default": storage_backend(env)}


@pytest.fixture(scope="session", autouse=True)
def test_storage(request: Any) -> Iterator[dict[str, str]]:
    """The storage of the whole run (``--storage``): yields the environment a worker process
    needs to use the same one (empty for local MEDIA_ROOT, ``STORAGE_URL`` for S3)."""
    if request.config.getoption("--storage") != "s3":
        yield {}
        return
    from django.test.utils import override_settings

    server = request.getfixturevalue("seaweedfs")
    override = override_settings(STORAGES=s3_storages(server.storage_url))
    override.enable()
    try:
        yield {"STORAGE_URL": server.storage_url}
    finally:
        override.disable()


@pytest.fixture
def s3_storage(seaweedfs: Any) -> Iterator[Any]:
    """This test's default storage is the session's SeaweedFS bucket (web side only)."""
    from django.test.utils import override_settings

    with override_settings(STORAGES=s3_storages(seaweedfs.storage_url)):
        yield seaweedfs


@pytest.fixture(autouse=True)
def _fresh_cache(request: Any) -> Iterator[None]:
    """Throttle and login-failure counters do not leak from one test into the next.

    The cache is Redis shared with the broker and other test runs, so only this run's keys
    (its KEY_PREFIX) are deleted, never the whole database. Engine tests skip this."""
    yield
    if "django_db_setup" not in request.fixturenames and "db" not in request.fixturenames \
            and "client" not in request.fixturenames:
        return
    from django.conf import settings

    cfg = settings.CACHES["default"]
    if cfg["BACKEND"].endswith("RedisCache"):
        import redis

        r = redis.Redis.from_url(cfg["LOCATION"])
        try:
            keys = list(r.scan_iter(f"{cfg['KEY_PREFIX']}:*", count=1000))
            if keys:
                r.delete(*keys)
        finally:
            r.close()
    else:
        from django.core.cache import cache

        cache.clear()


@pytest.fixture(autouse=True)
def _media_root_exists() -> None:
    from django.conf import settings

    Path(settings.MEDIA_ROOT).mkdir(parents=True, exist_ok=True)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Remove the per-run media directory settings.py created in /tmp."""
    try:
        from django.conf import settings

        media = str(settings.MEDIA_ROOT)
    except Exception:
        return
    if "blkreview-test-media-" in media:
        shutil.rmtree(media, ignore_errors=True)


# --- a real Celery worker process ------------------------------------------------------------

def _purge_queue(broker: str, queue: str) -> None:
    try:
        import redis

        r = redis.Redis.from_url(broker)
        r.delete(queue, f"_kombu.binding.{queue}")
        r.close()
    except Exception:
        pass


def worker_env(django_db_blocker: Any, **extra: str) -> dict[str, str]:
    """The environment of a worker process on this run's test database, broker and queues."""
    from django.conf import settings
    from django.db import connection

    with django_db_blocker.unblock():
        db = connection.settings_dict
        test_db_name = db["NAME"]
    user = db.get("USER") or "postgres"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    pw = db.get("PASSWORD") or ""
    auth = f"{user}:{pw}@" if pw else f"{user}@"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_VERSION"}
    env.update({
        "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
        "DATABASE_URL": f"postgres://{auth}{host}:{port}/{test_db_name}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "BLKREVIEW_ANALYSIS_QUEUE": settings.BLKREVIEW_ANALYSIS_QUEUE,
        "BLKREVIEW_REPLAY_QUEUE": settings.BLKREVIEW_REPLAY_QUEUE,
        "BLKREVIEW_NOTIFY_QUEUE": settings.BLKREVIEW_NOTIFY_QUEUE,
        "SECRET_KEY": settings.SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    })
    env.update(extra)
    return env


def start_worker(*, env: dict[str, str], queues: list[str], name: str, log: Path,
                 cwd: Path = ROOT, pool: str = "solo") -> subprocess.Popen[bytes]:
    """``celery -A workers.celery worker -Q <queues> --pool=solo`` started and ready.

    The worker is its own process group: ``os.killpg(proc.pid, SIGKILL)`` kills the main
    process and its pool children together (tests/e2e/test_exactly_once.py)."""
    cmd = [sys.executable, "-m", "celery", "-A", "workers.celery", "worker",
           "-Q", ",".join(queues), f"--pool={pool}", "--concurrency=1", "--loglevel=INFO",
           "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{name}@%h"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.time() + 90
        while True:
            text = log.read_text(errors="replace")
            if " ready." in text:
                return proc
            if proc.poll() is not None:
                raise RuntimeError(f"celery worker exited ({proc.returncode}):\n{text[-3000:]}")
            if time.time() > deadline:
                raise RuntimeError(f"celery worker did not become ready:\n{text[-3000:]}")
            time.sleep(0.3)
    except BaseException:
        stop_worker(proc)
        raise


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def celery_worker(django_db_setup: Any, django_db_blocker: Any, test_storage: dict[str, str],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Start ``celery -A workers.celery worker`` against the test database and Redis.

    Yields a dict with the worker's ``log`` path and ``queue``. The worker is terminated (and
    its queues deleted from Redis) at the end of the session, before the test database is
    dropped.
    """
    from django.conf import settings

    # this run's own queues only (never the shared "celery" queue another run may use)
    own = [q for q in settings.BLKREVIEW_QUEUES if q != "celery"]
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    # its sweeper is off: tests of delivery run their own workers, which must not share jobs
    from tests.seaweedfs import free_ports

    metrics_port = free_ports(1)[0]
    env = worker_env(django_db_blocker, BLKREVIEW_SWEEP_SECONDS="0",
                     BLKREVIEW_WORKER_METRICS_PORT=str(metrics_port),
                     BLKREVIEW_WORKER_METRICS_ADDR="127.0.0.1", **test_storage)
    proc = start_worker(env=env, queues=own, name=f"test-{os.getpid()}", log=log)
    try:
        yield {"log": log, "queue": settings.BLKREVIEW_ANALYSIS_QUEUE, "process": proc,
               "metrics_port": metrics_port}
    finally:
        stop_worker(proc)
        for q in own:
            _purge_queue(settings.CELERY_BROKER_URL, q)


@contextlib.contextmanager
def use_broker(url: str) -> Iterator[None]:
    """Point this process's Celery app (the upload side) at ``url``."""
    from workers.celery import app

    def reset() -> None:  # kombu keeps one pool per URL; forget this app's cached ones
        app._pool = None
        app.amqp._producer_pool = None

    old, old_env = app.conf.broker_url, os.environ.get("CELERY_BROKER_URL")
    reset()
    app.conf.broker_url = url
    os.environ["CELERY_BROKER_URL"] = url  # Celery reads it before its own setting
    try:
        yield
    finally:
        reset()
        app.conf.broker_url = old
        if old_env is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = old_env


def wait_for(predicate: Any, *, timeout: float = 90.0, interval: float = 0.3,
             what: str = "condition") -> Any:
    """Poll ``predicate()`` until it returns something truthy."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


@pytest.fixture
def make_blkparse() -> Any:
    """``make_blkparse([sectors], length=128, action="G")`` -> blkparse text bytes."""
    return blkparse_lines


@pytest.fixture
def make_upload() -> Any:
    """``make_upload(name, data)`` -> an uploaded-file object for services and forms."""
    return uploaded


@pytest.fixture
def waiter() -> Any:
    """``waiter(predicate, timeout=..., what=...)`` polls until truthy."""
    return wait_for


# --- a finished comparison, built in-process (the task bodies, no worker) -----------------------

def model_capture(name: str) -> list[Any]:
    """Uploads of one kernel capture of tests/data/model (blkparse .xz + blkreview.toml)."""
    trace = DATA / "model" / f"{name}.blkparse.txt.xz"
    manifest = DATA / "model" / f"{name}.blkreview.toml"
    return [uploaded(trace.name, trace.read_bytes()), uploaded(manifest.name, manifest.read_bytes())]


def finish_comparison(comparison: Any, *, timeout: float = 180.0) -> Any:
    """Run every pending analysis job and then the comparison step in this process.

    With a live worker in the session (transactional tests), the worker may take some of the
    same tasks: this waits for whichever runs them to finish.
    """
    from django.db import transaction

    from reviewapp.models import AnalysisJob, ComparisonResult
    from reviewapp.services.jobs import comparison_refresh_status
    from reviewapp.tasks import run_analysis, run_compare

    for bundle in list(comparison.baseline_bundles.all()) + list(comparison.patched_bundles.all()):
        for job in AnalysisJob.objects.filter(bundle=bundle, state="queued"):
            run_analysis(job.pk)

    def analyzed() -> bool:
        with transaction.atomic():
            return comparison_refresh_status(comparison=comparison) in ("ready", "failed")

    wait_for(analyzed, timeout=timeout, what="bundle analyses")
    result = wait_for(lambda: ComparisonResult.objects.filter(comparison=comparison).first(),
                      timeout=timeout, what="comparison result row")
    if result.state == "queued":
        run_compare(result.pk, task_id=result.celery_task_id)
    wait_for(lambda: ComparisonResult.objects.get(pk=result.pk).is_final, timeout=timeout,
             what="comparison step")
    comparison.refresh_from_db()
    return comparison


@pytest.fixture
def finished_comparison(db: Any, user: Any) -> Any:
    """Kernel 6.1 vs 7.2 captures of tests/data/model (raid5, manifests), compared and modelled,
    policy under test split_remainder=head."""
    from reviewapp.services.comparisons import submission_create

    comparison, _ = submission_create(
        title="md: split remainder to the head of bio_list", version="v2",
        baseline_files=model_capture("6.1_W1b"), patched_files=model_capture("7.2_W1b"),
        policy="split_remainder=head", user=user)
    return finish_comparison(comparison)


@pytest.fixture
def finished_comparison_committed(transactional_db: Any, user: Any) -> Any:
    """:func:`finished_comparison` for live-server tests (data committed)."""
    from reviewapp.services.comparisons import submission_create

    comparison, _ = submission_create(
        title="md: split remainder to the head of bio_list", version="v2",
        baseline_files=model_capture("6.1_W1b"), patched_files=model_capture("7.2_W1b"),
        policy="split_remainder=head", user=user)
    return finish_comparison(comparison)
