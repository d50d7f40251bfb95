"""Settings for blkreview, twelve-factor style: everything comes from the environment.

Three situations share this one module:

* **Production** (docker-compose, a real deployment): ``DATABASE_URL`` and ``CELERY_BROKER_URL``
  (or ``REDIS_URL``) are set; ``SECRET_KEY`` must be set too, there is no default.
* **Embedded default** (``make demo``, ``manage.py serve``): nothing is set. SQLite in ``var/``,
  kombu's filesystem transport as the broker (a directory in ``var/``, no server), and a
  random secret key generated once into ``var/secret_key``. Same code paths, other backends.
* **Tests** (pytest sets ``PYTEST_VERSION``): real PostgreSQL
  (``postgres://postgres@127.0.0.1:5432/blkreview``) and real Redis unless the environment
  says otherwise, so ``make test`` needs no environment of its own.

Environment variables: DATABASE_URL, CELERY_BROKER_URL or REDIS_URL, SECRET_KEY, DEBUG,
ALLOWED_HOSTS (comma separated), CSRF_TRUSTED_ORIGINS (comma separated), MEDIA_ROOT,
STATIC_ROOT, STORAGE_URL (or AWS_STORAGE_BUCKET_NAME and the other AWS_* variables: uploads and
tables in an S3-compatible bucket, see reviewapp/storage_config.py), BLKREVIEW_MAX_UPLOAD_MB, BLKREVIEW_ANALYSIS_QUEUE, BLKREVIEW_REPLAY_QUEUE,
BLKREVIEW_NOTIFY_QUEUE, LOG_FORMAT (json: JSON-lines logs), BLKREVIEW_METRICS_TOKEN,
BLKREVIEW_WORKER_METRICS_PORT (reviewapp/metrics.py), BLKREVIEW_TASK_TIME_LIMIT,
BLKREVIEW_CHECK_* (check verdict thresholds, see BLKREVIEW_CHECK_THRESHOLDS), BLKREVIEW_CACHE_URL,
BLKREVIEW_CHART_CACHE_MAX_KB, BLKREVIEW_CHART_MEMORY_CACHE_MB (chart payload caches, reviewapp/chartstore.py),
BLKREVIEW_THROTTLE_*, BLKREVIEW_LOGIN_*, BLKREVIEW_QUOTA_*, BLKREVIEW_NUM_PROXIES (floods),
BLKREVIEW_HEARTBEAT_SECONDS, BLKREVIEW_STALE_AFTER_SECONDS, BLKREVIEW_SWEEP_SECONDS,
BLKREVIEW_RESEND_AFTER_SECONDS, BLKREVIEW_MAX_ATTEMPTS, BLKREVIEW_VISIBILITY_TIMEOUT,
BLKREVIEW_UNACKED_RESTORE_SECONDS, BLKREVIEW_BROKER_TIMEOUT, BLKREVIEW_CONN_MAX_AGE (delivery,
docs/deploy.md "Delivery guarantees"), BLKREVIEW_TEST_STAGE_DELAY (tests only).
"""

from __future__ import annotations

import os
import secrets
import tempfile
import warnings
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from reviewapp.storage_config import storage_backend

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BLKREVIEW_VAR_DIR", BASE_DIR / "var"))

TESTING = "PYTEST_VERSION" in os.environ or os.environ.get("BLKREVIEW_TESTING") == "1"
if TESTING:
    # The test run selects real PostgreSQL and Redis itself (issue 2 item 10). The database
    # name gets the pid so that two concurrent test runs on one machine do not drop each
    # other's test database; pytest-django prefixes it with "test_".
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/blkreview")
    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    os.environ.setdefault("SECRET_KEY", "blkreview-tests-only-" + "x" * 40)
    os.environ.setdefault("BLKREVIEW_ANALYSIS_QUEUE", f"analysis-test-{os.getpid()}")
    os.environ.setdefault("BLKREVIEW_REPLAY_QUEUE", f"replay-test-{os.getpid()}")
    os.environ.setdefault("BLKREVIEW_NOTIFY_QUEUE", f"notify-test-{os.getpid()}")
    # the test worker's mail lands in files the tests read
    os.environ.setdefault("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
    os.environ.setdefault("EMAIL_FILE_PATH", tempfile.mkdtemp(prefix="blkreview-test-mail-"))
    # webhook retries within a test's patience (the worker inherits it)
    os.environ.setdefault("BLKREVIEW_WEBHOOK_BACKOFF_SECONDS", "1")
    os.environ.setdefault("MEDIA_ROOT", tempfile.mkdtemp(prefix="blkreview-test-media-"))
    # with STORAGE_URL=s3...: this run's key prefix in the bucket (the worker inherits it)
    os.environ.setdefault("AWS_LOCATION", f"test-{os.getpid()}")


def ensure_dir(path: Path) -> None:
    """Create a var/ directory when possible (a read-only image build only runs collectstatic)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass


def env_bool(name: str, default: bool = False) -> bool:
    """Read a boolean flag the way people write them in .env files."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


#: True when no DATABASE_URL is set: SQLite + filesystem broker, one command runs everything.
EMBEDDED = not os.environ.get("DATABASE_URL")

# https://docs.djangoproject.com/en/5.2/ref/settings/#debug
DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """SECRET_KEY from the environment; only the embedded default may generate one."""
    key = os.environ.get("SECRET_KEY")
    if key:
        return key
    if not EMBEDDED:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DATABASE_URL is set (no default outside the embedded demo)"
        )
    ensure_dir(VAR_DIR)
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


# https://docs.djangoproject.com/en/5.2/ref/settings/#secret-key
SECRET_KEY = _secret_key()

# https://docs.djangoproject.com/en/5.2/ref/settings/#allowed-hosts
ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] + (["testserver"] if TESTING else [])
)
# https://docs.djangoproject.com/en/5.2/ref/settings/#csrf-trusted-origins
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "reviewapp.apps.ReviewappConfig",
]

MIDDLEWARE = [
    # request latency for /metrics (reviewapp/metrics.py)
    "reviewapp.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # https://whitenoise.readthedocs.io/en/stable/django.html
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "reviewapp.urls"
WSGI_APPLICATION = "reviewapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# https://github.com/jazzband/dj-database-url
DATABASES: dict[str, dict[str, Any]]
if EMBEDDED:
    ensure_dir(VAR_DIR)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "db.sqlite3",
            # The web server and the worker write to the same file; wait instead of failing.
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
else:
    # Persistent connections, checked before reuse in each request: the first request after
    # a PostgreSQL restart reconnects instead of failing (CONN_HEALTH_CHECKS).
    DATABASES = {"default": dict(dj_database_url.parse(
        os.environ["DATABASE_URL"], conn_max_age=int(os.environ.get("BLKREVIEW_CONN_MAX_AGE", "60")),
        conn_health_checks=True))}
if TESTING and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
if TESTING:
    # Fast hashing in tests only (patchwork's dev settings do the same).
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# https://docs.djangoproject.com/en/5.2/howto/static-files/
STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
# https://docs.djangoproject.com/en/5.2/topics/files/
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media" if EMBEDDED else BASE_DIR / "media"))
MEDIA_URL = "media/"
# Uploaded bundles and parsed tables: MEDIA_ROOT by default, an S3-compatible bucket when
# STORAGE_URL (or AWS_STORAGE_BUCKET_NAME) says so; see reviewapp/storage_config.py.
# https://django-storages.readthedocs.io/en/latest/backends/amazon-S3.html
STORAGE_DEFAULT = storage_backend(os.environ)
STORAGES = {
    "default": STORAGE_DEFAULT,
    # Compressed but not manifest-hashed, so pages render without a prior collectstatic.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from the app's static/ when collectstatic has not been run (embedded, tests).
WHITENOISE_USE_FINDERS = DEBUG or EMBEDDED or TESTING or not STATIC_ROOT.exists()
if not STATIC_ROOT.exists():
    # whitenoise warns once per process about the missing collectstatic directory; with
    # finders on, that is expected.
    warnings.filterwarnings("ignore", message="No directory at")

# Uploads always go to a temporary file on disk, never wholly into memory (issue 2 item 2).
# https://docs.djangoproject.com/en/5.2/ref/settings/#file-upload-handlers
FILE_UPLOAD_HANDLERS = ["django.core.files.uploadhandler.TemporaryFileUploadHandler"]
#: Largest bundle (all files of one side together), in bytes.
BLKREVIEW_MAX_UPLOAD_BYTES = int(float(os.environ.get("BLKREVIEW_MAX_UPLOAD_MB", "2048")) * 1024 * 1024)
# Queues (docs/deploy.md, "Queues and worker pools"): each kind of work has its own, so a
# deployment can give each its own pool of workers (``celery worker -Q replay`` on the big
# machines); one worker consuming all of them (``manage.py serve``, compose's ``worker``) is fine.
#: ingest + analysis of one bundle (reviewapp.tasks.analyze_bundle): I/O and parsing
BLKREVIEW_ANALYSIS_QUEUE = os.environ.get("BLKREVIEW_ANALYSIS_QUEUE", "analysis")
#: the comparison step (reviewapp.tasks.compare_comparison): compare + the model panel's
#: replay of the baseline's bios under two policies, the CPU-heavy part
BLKREVIEW_REPLAY_QUEUE = os.environ.get("BLKREVIEW_REPLAY_QUEUE", "replay")
#: notification mail and webhook deliveries: small, latency-sensitive, network-bound
BLKREVIEW_NOTIFY_QUEUE = os.environ.get("BLKREVIEW_NOTIFY_QUEUE", "notify")
#: a bundle larger than this (MB) with two or more trace files is parsed by several workers at
#: once (reviewapp/shards.py); -1 turns the parallel ingest off
BLKREVIEW_PARALLEL_INGEST_MB = float(os.environ.get("BLKREVIEW_PARALLEL_INGEST_MB", "512"))
#: a binary blktrace file larger than this (MB) is parsed as byte ranges of about this size, a
#: shard each (cut at record boundaries: workers/traces/byterange.py), so no shard task holds
#: more than this much of a trace; -1 parses every file as one shard
BLKREVIEW_SHARD_RANGE_MB = float(os.environ.get("BLKREVIEW_SHARD_RANGE_MB", "256"))
#: how long a worker's claim on one shard lasts before another may take it over (seconds)
BLKREVIEW_SHARD_LEASE_SECONDS = int(os.environ.get("BLKREVIEW_SHARD_LEASE_SECONDS", "600"))
#: the model panel replays a run over this many events, or over BLKREVIEW_MODEL_MAX_BIOS bios
#: (Q events with data, any device), on its first rows only and says so
#: (workers.whatif.ModelWindow): the replay holds the bios and both predictions in memory
#: (docs/deploy.md, "Huge traces")
BLKREVIEW_MODEL_MAX_EVENTS = int(os.environ.get("BLKREVIEW_MODEL_MAX_EVENTS", "2000000"))
BLKREVIEW_MODEL_MAX_BIOS = int(os.environ.get("BLKREVIEW_MODEL_MAX_BIOS", "250000"))
#: every queue a worker that does everything consumes (``manage.py serve``, the tests' worker)
BLKREVIEW_QUEUES = list(dict.fromkeys([BLKREVIEW_ANALYSIS_QUEUE, BLKREVIEW_REPLAY_QUEUE,
                                       BLKREVIEW_NOTIFY_QUEUE, "celery"]))

# --- check verdict (issue 5) ----------------------------------------------------------------
# Defaults of the pass/warn/fail check a CI bot reads from /api/v1/comparisons/<id>/check/,
# the fields of workers.compare.Thresholds (same defaults; a test keeps them in step). Each
# comparison may override any of them (Comparison.thresholds; the upload form's and the API's
# "thresholds" field). Percentages are changes of the patched mean vs the baseline mean.
# Environment: BLKREVIEW_CHECK_<NAME upper-case>, e.g. BLKREVIEW_CHECK_THROUGHPUT_DROP_FAIL_PCT=5.
# BLKREVIEW_CHECK_ALPHA is the significance level of Welch's t-test (not a threshold).


def _check_float(name: str, default: float) -> float:
    return float(os.environ.get(f"BLKREVIEW_CHECK_{name.upper()}", default))


BLKREVIEW_CHECK_THRESHOLDS: dict[str, float] = {
    # a throughput metric (MB/s, IOPS) may not drop more than this many percent
    "throughput_drop_warn_pct": _check_float("throughput_drop_warn_pct", 3.0),
    "throughput_drop_fail_pct": _check_float("throughput_drop_fail_pct", 10.0),
    # a latency metric (await, Q2C/D2C p50/p99) may not rise more than this many percent
    "latency_rise_warn_pct": _check_float("latency_rise_warn_pct", 10.0),
    "latency_rise_fail_pct": _check_float("latency_rise_fail_pct", 25.0),
    # ignored since mechanism metrics are judged by the rule_* below (kept: stored overrides)
    "pattern_worse_warn_pct": _check_float("pattern_worse_warn_pct", 20.0),
    # 1: a significant timing regression below the limits above warns; 0: it does not
    "warn_on_regression": _check_float("warn_on_regression", 1.0),
    # model fidelity: L1 of normalized seek/size histograms, relative MB/s error that warn
    "fidelity_l1_warn": _check_float("fidelity_l1_warn", 0.3),
    "fidelity_throughput_err_warn": _check_float("fidelity_throughput_err_warn", 0.25),
    # metrics whose baseline and patched means are both below this are ignored (idle devices)
    "min_value": _check_float("min_value", 1e-9),
    # timing: runs per side before it is judged (lkp's rule), and what a device needs to be
    # judged at all: this many requests at its stage or this long a trace; no rate below
    # min_rate_window_s; power of the runs-needed estimate; bootstrap resamples of the CI
    "min_runs": _check_float("min_runs", 3.0),
    "min_requests": _check_float("min_requests", 100.0),
    "min_window_s": _check_float("min_window_s", 1.0),
    "min_rate_window_s": _check_float("min_rate_window_s", 0.01),
    "power": _check_float("power", 0.8),
    "bootstrap": _check_float("bootstrap", 2000.0),
    # mechanism rules a change must not break: 0 off, 1 warning, 2 fail (workers.compare)
    "rule_backward_rise": _check_float("rule_backward_rise", 2.0),
    "rule_below_max_rise": _check_float("rule_below_max_rise", 2.0),
    "rule_pieces_per_bio_rise": _check_float("rule_pieces_per_bio_rise", 0.0),
    "rule_sandwiched_rise": _check_float("rule_sandwiched_rise", 0.0),
    "rule_mean_request_drop": _check_float("rule_mean_request_drop", 0.0),
    "rule_zero_seek_drop": _check_float("rule_zero_seek_drop", 0.0),
    "rule_mean_seek_rise": _check_float("rule_mean_seek_rise", 0.0),
    "rule_member_order_change": _check_float("rule_member_order_change", 0.0),
    # the sides differ in environment beyond the patch (workloads, stack, scheduler, limits)
    "rule_environment": _check_float("rule_environment", 1.0),
}
BLKREVIEW_CHECK_ALPHA = _check_float("alpha", 0.05)

# --- Celery -----------------------------------------------------------------------------
# https://docs.celeryq.dev/en/stable/userguide/configuration.html
_broker = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL")
if _broker:
    CELERY_BROKER_URL = _broker
    # An unacknowledged message comes back after visibility_timeout: longer than the hard task
    # time limit (a running task is never handed out twice), far shorter than Redis's default
    # 6 hours. A lost worker's job is re-queued sooner by the sweeper (heartbeat, below).
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": int(os.environ.get("BLKREVIEW_VISIBILITY_TIMEOUT", "0"))
        or int(os.environ.get("BLKREVIEW_TASK_TIME_LIMIT", "3600")) + 300,
        "socket_connect_timeout": float(os.environ.get("BLKREVIEW_BROKER_TIMEOUT", "3")),
    }
    if os.environ.get("BLKREVIEW_UNACKED_RESTORE_SECONDS"):
        # how often a worker looks for messages past their visibility timeout (kombu: 10 s x 10)
        CELERY_BROKER_TRANSPORT_OPTIONS["unacked_restore_interval"] = int(
            os.environ["BLKREVIEW_UNACKED_RESTORE_SECONDS"])
        CELERY_BROKER_TRANSPORT_OPTIONS["unacked_restore_throttle"] = 1
else:
    # kombu's filesystem transport: messages are files in one directory shared by the web
    # process and the worker. No server needed (architecture.md, "Embedded default").
    _broker_dir = VAR_DIR / "broker"
    for sub in ("queue", "processed", "control"):
        ensure_dir(_broker_dir / sub)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
        # broadcast/pidbox exchanges; without it kombu writes ./control in the working directory
        "control_folder": str(_broker_dir / "control"),
    }
# Job state lives in the database (AnalysisJob), not in a result backend: every task ignores
# its result. The one exception is the parallel ingest's chord (reviewapp/shards.py): a Celery
# chord counts its header's results in a backend, so with a Redis broker the broker's own Redis
# is the result backend, used by the shard tasks only (ignore_result=False on them) and expiring
# after BLKREVIEW_RESULT_EXPIRES_SECONDS. Any other broker (the embedded filesystem one) has no
# backend, and bundles are ingested in one task.
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND: str | None = (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else None)
CELERY_RESULT_EXPIRES = int(os.environ.get("BLKREVIEW_RESULT_EXPIRES_SECONDS", "86400"))
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
# Long jobs: acknowledge after the work is done, take one message at a time.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = int(os.environ.get("BLKREVIEW_TASK_TIME_LIMIT", "3600"))
CELERY_TASK_SOFT_TIME_LIMIT = max(CELERY_TASK_TIME_LIMIT - 60, 30)
CELERY_TASK_DEFAULT_QUEUE = "celery"
# The services name the queue when they send (settings read at send time); these routes give
# the same answer to anything sent without one (celery call, admin tools).
CELERY_TASK_ROUTES = {
    "reviewapp.tasks.compare_comparison": {"queue": BLKREVIEW_REPLAY_QUEUE},
    "reviewapp.tasks.analyze_bundle": {"queue": BLKREVIEW_ANALYSIS_QUEUE},
    "reviewapp.tasks.send_comment_notifications": {"queue": BLKREVIEW_NOTIFY_QUEUE},
    "reviewapp.tasks.deliver_webhook": {"queue": BLKREVIEW_NOTIFY_QUEUE},
    "reviewapp.tasks.*": {"queue": BLKREVIEW_ANALYSIS_QUEUE},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Publishing from a web request: give up quickly when the broker is unreachable (the job stays
# queued, "waiting for the queue", and the sweeper sends it later).
CELERY_BROKER_CONNECTION_TIMEOUT = float(os.environ.get("BLKREVIEW_BROKER_TIMEOUT", "3"))
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2,
                                    "interval_max": 0.5}

# --- delivery: heartbeat, stale jobs, the sweeper (docs/deploy.md "Delivery guarantees") ------
# A running job's worker writes a heartbeat every BLKREVIEW_HEARTBEAT_SECONDS; with none for
# BLKREVIEW_STALE_AFTER_SECONDS its worker is taken as lost and the sweeper queues the job again
# (at most BLKREVIEW_MAX_ATTEMPTS claims, then it fails with a readable reason). The sweeper runs
# in every worker process (a thread, every BLKREVIEW_SWEEP_SECONDS) and as
# ``manage.py sweep_jobs``; it also sends queued jobs that never reached the broker once they
# are BLKREVIEW_RESEND_AFTER_SECONDS old.
BLKREVIEW_HEARTBEAT_SECONDS = float(os.environ.get("BLKREVIEW_HEARTBEAT_SECONDS", "10"))
BLKREVIEW_STALE_AFTER_SECONDS = float(os.environ.get("BLKREVIEW_STALE_AFTER_SECONDS", "45"))
BLKREVIEW_SWEEP_SECONDS = float(os.environ.get("BLKREVIEW_SWEEP_SECONDS", "15"))
BLKREVIEW_RESEND_AFTER_SECONDS = float(os.environ.get("BLKREVIEW_RESEND_AFTER_SECONDS", "60"))
BLKREVIEW_MAX_ATTEMPTS = int(os.environ.get("BLKREVIEW_MAX_ATTEMPTS", "3"))
# Test only: seconds the analysis task sleeps between its stages (to kill a worker mid-job).
BLKREVIEW_TEST_STAGE_DELAY = float(os.environ.get("BLKREVIEW_TEST_STAGE_DELAY", "0"))
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Celery events (task sent/received/started/succeeded/failed) for exporters and flower
# https://docs.celeryq.dev/en/stable/userguide/monitoring.html#events
CELERY_WORKER_SEND_TASK_EVENTS = True
CELERY_TASK_SEND_SENT_EVENT = True

# --- cache (throttles, login limits) -----------------------------------------------------
# https://docs.djangoproject.com/en/5.2/topics/cache/
# Throttle and login-failure counters must be shared by every web worker: Redis when one is
# configured (BLKREVIEW_CACHE_URL, else REDIS_URL, else a redis:// broker URL), otherwise a
# file cache in var/ (the embedded default: one machine, several gunicorn workers).
_cache_url = os.environ.get("BLKREVIEW_CACHE_URL") or os.environ.get("REDIS_URL") or (
    os.environ.get("CELERY_BROKER_URL", "") if os.environ.get("CELERY_BROKER_URL", "").startswith(
        ("redis://", "rediss://")) else "")
CACHES: dict[str, dict[str, Any]]
if _cache_url.startswith(("redis://", "rediss://")):
    CACHES = {"default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url,
        # one Redis may serve several deployments and concurrent test runs: keys carry a prefix
        "KEY_PREFIX": os.environ.get("BLKREVIEW_CACHE_PREFIX",
                                     f"blkreview-test-{os.getpid()}" if TESTING else "blkreview"),
    }}
elif _cache_url.startswith("locmem://"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    ensure_dir(VAR_DIR / "cache")
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache"), "OPTIONS": {"MAX_ENTRIES": 10000}}}

#: Chart payloads (reviewapp/chartstore.py) up to this size are kept in the cache above after
#: their first read from storage; larger ones are streamed from storage on every request.
BLKREVIEW_CHART_CACHE_MAX_BYTES = int(float(os.environ.get("BLKREVIEW_CHART_CACHE_MAX_KB",
                                                           "2048")) * 1024)
#: ... and each web process keeps the payloads it served last, up to this many bytes
BLKREVIEW_CHART_MEMORY_CACHE_BYTES = int(float(os.environ.get("BLKREVIEW_CHART_MEMORY_CACHE_MB",
                                                              "32")) * 1024 * 1024)

# --- floods: API throttles, login limits, upload quotas (issue 10 item 11) ---------------------
# Rates are "N/second|minute|hour|day" (DRF's syntax); "0" or "off" disables one. The defaults
# stop floods (a password or token guessed at full speed, ids enumerated, uploads in a loop) and
# stay far above what a person, a CI bot, the test suite or benchmarks/ need.
# https://www.django-rest-framework.org/api-guide/throttling/
BLKREVIEW_THROTTLE_RATES: dict[str, str] = {
    # anonymous API requests, per client IP
    "anon": os.environ.get("BLKREVIEW_THROTTLE_ANON", "1200/minute"),
    # authenticated API requests, per token (or per user for session logins)
    "user": os.environ.get("BLKREVIEW_THROTTLE_USER", "6000/minute"),
    # every API request, per client IP, whoever it authenticates as
    "ip": os.environ.get("BLKREVIEW_THROTTLE_IP", "12000/minute"),
    # API writes (uploads, comparisons, runs, thresholds), per token/user
    "write": os.environ.get("BLKREVIEW_THROTTLE_WRITE", "3000/hour"),
    # requests with an invalid or revoked token, per client IP
    "bad_token": os.environ.get("BLKREVIEW_THROTTLE_BAD_TOKEN", "60/minute"),
}
#: Failed logins (login page and admin) before the username, and separately the client IP,
#: is locked out for BLKREVIEW_LOGIN_LOCKOUT_SECONDS (the count restarts after that too).
BLKREVIEW_LOGIN_MAX_FAILURES = int(os.environ.get("BLKREVIEW_LOGIN_MAX_FAILURES", "10"))
BLKREVIEW_LOGIN_IP_MAX_FAILURES = int(os.environ.get("BLKREVIEW_LOGIN_IP_MAX_FAILURES", "50"))
BLKREVIEW_LOGIN_LOCKOUT_SECONDS = int(os.environ.get("BLKREVIEW_LOGIN_LOCKOUT_SECONDS", "900"))
#: Per-user upload quotas over the last 24 hours (form and REST); 0 = no limit.
BLKREVIEW_QUOTA_UPLOADS_PER_DAY = int(os.environ.get("BLKREVIEW_QUOTA_UPLOADS_PER_DAY", "2000"))
BLKREVIEW_QUOTA_BYTES_PER_DAY = int(
    float(os.environ.get("BLKREVIEW_QUOTA_MB_PER_DAY", str(200 * 1024))) * 1024 * 1024)
#: Number of proxies in front of the web server whose X-Forwarded-For is trusted for the
#: client IP (DRF's NUM_PROXIES); 0 = the socket's address only.
_num_proxies = os.environ.get("BLKREVIEW_NUM_PROXIES", "")

# --- REST framework ---------------------------------------------------------------------
# https://www.django-rest-framework.org/api-guide/settings/
REST_FRAMEWORK = {
    "DEFAULT_VERSIONING_CLASS": "rest_framework.versioning.URLPathVersioning",
    "DEFAULT_VERSION": "v1",
    "ALLOWED_VERSIONS": ["v1"],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "reviewapp.api.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # reviewapp/access.py decides per object (404 when unreadable); TokenScope limits tokens
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly",
                                   "reviewapp.api.permissions.TokenScope"],
    "DEFAULT_PARSER_CLASSES": [
        "rest_framework.parsers.JSONParser",
        "rest_framework.parsers.MultiPartParser",
        "rest_framework.parsers.FormParser",
    ],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "reviewapp.api.base.exception_handler",
    # https://django-filter.readthedocs.io/en/stable/guide/rest_framework.html
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # rates: BLKREVIEW_THROTTLE_RATES (read at request time, so tests can override them)
    "DEFAULT_THROTTLE_CLASSES": [
        "reviewapp.api.throttles.AnonIpThrottle",
        "reviewapp.api.throttles.UserTokenThrottle",
        "reviewapp.api.throttles.IpThrottle",
        "reviewapp.api.throttles.WriteThrottle",
    ],
    "NUM_PROXIES": int(_num_proxies) if _num_proxies else None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
# https://drf-spectacular.readthedocs.io/en/latest/settings.html
SPECTACULAR_SETTINGS = {
    "TITLE": "blkreview API",
    "DESCRIPTION": "Upload block-layer trace bundles, compare baseline and patched kernels.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "OAS_VERSION": "3.1.0",
    "ENUM_NAME_OVERRIDES": {"RoleEnum": "reviewapp.constants.ROLES",
                            "PatchStateEnum": "reviewapp.constants.PATCH_STATES",
                            "CheckStateEnum": "reviewapp.constants.CHECK_STATES",
                            "VerdictKindEnum": "reviewapp.constants.VERDICT_KINDS",
                            "EventKindEnum": "reviewapp.constants.EVENT_KINDS",
                            "AnchorKindEnum": "reviewapp.constants.ANCHOR_KINDS",
                            "DeliveryStateEnum": "reviewapp.constants.WEBHOOK_DELIVERY_STATES",
                            "LinkReasonEnum": "reviewapp.constants.LINK_REASONS",
                            # a comparison's steps (`kind`, `state` of jobs lists)
                            "StepKindEnum": "reviewapp.constants.STEP_KINDS",
                            "StepStateEnum": "reviewapp.constants.STEP_STATES"},
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "reviewapp.api.schema.add_auth_errors"],
    # Swagger UI / Redoc assets from drf-spectacular-sidecar, served locally (no CDN).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- collaboration (issue 8) --------------------------------------------------------------
#: Where a Message-ID links to: a URL template with ``{msgid}`` (lore-style by default).
BLKREVIEW_MSGID_URL = os.environ.get("BLKREVIEW_MSGID_URL", "https://lore.kernel.org/r/{msgid}")
# Visibility of a new comparison when the upload does not say (the form preselects it, the API's
# `public` field defaults to it): "public" (anyone may read it without logging in) or "private"
# (its uploader, whom they share it with, and staff). docs/deploy.md "Configuration".
_visibility = os.environ.get("BLKREVIEW_DEFAULT_VISIBILITY", "public").strip().lower()
if _visibility not in ("public", "private"):
    raise ImproperlyConfigured(
        f"BLKREVIEW_DEFAULT_VISIBILITY={_visibility!r}: expected public or private")
BLKREVIEW_DEFAULT_PUBLIC = _visibility == "public"
#: Maintainers (Patchwork's project maintainers): members of this Django group may change the
#: review state of any patch they can read, besides its submitter and write grants
#: (reviewapp.access.can_set_patch_state). Empty: no such role.
BLKREVIEW_MAINTAINERS_GROUP = os.environ.get("BLKREVIEW_MAINTAINERS_GROUP", "maintainers").strip()
# (the notification mail and webhook tasks go to BLKREVIEW_NOTIFY_QUEUE, with the other queues)
#: Webhook deliveries: attempts before giving up, first retry delay (doubles each time), timeout.
BLKREVIEW_WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("BLKREVIEW_WEBHOOK_MAX_ATTEMPTS", "5"))
BLKREVIEW_WEBHOOK_BACKOFF_SECONDS = float(os.environ.get("BLKREVIEW_WEBHOOK_BACKOFF_SECONDS", "10"))
BLKREVIEW_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("BLKREVIEW_WEBHOOK_TIMEOUT_SECONDS", "10"))
# https://docs.djangoproject.com/en/5.2/topics/email/#email-backends
# The embedded default prints mail on the console; a deployment sets EMAIL_BACKEND + EMAIL_HOST.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "blkreview <blkreview@localhost>")
#: Absolute base of links in mails and webhook payloads, e.g. https://blkreview.example.org
BLKREVIEW_BASE_URL = os.environ.get("BLKREVIEW_BASE_URL", "http://127.0.0.1:8000")

# --- security -----------------------------------------------------------------------------
# https://docs.djangoproject.com/en/5.2/ref/settings/#secure-proxy-ssl-header
if env_bool("BLKREVIEW_BEHIND_TLS_PROXY"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# LOG_FORMAT=json: one JSON object per line with the job/bundle/comparison ids
# (reviewapp/logjson.py); otherwise plain text that names the same ids when a task sets them.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text").strip().lower()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "reviewapp.logjson.ContextFilter"}},
    "formatters": {
        "json": {"()": "reviewapp.logjson.JsonFormatter"},
        "text": {"format": "%(levelname)s %(name)s: %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["context"],
                             "formatter": "json" if LOG_FORMAT == "json" else "text"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
