"""Settings from the environment: embedded default, production requirements, safe defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = (
    "import json, reviewapp.settings as s;"
    "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'],"
    " 'name': str(s.DATABASES['default']['NAME']), 'broker': s.CELERY_BROKER_URL,"
    " 'debug': s.DEBUG, 'embedded': s.EMBEDDED, 'hosts': s.ALLOWED_HOSTS,"
    " 'limit': s.BLKREVIEW_MAX_UPLOAD_BYTES, 'media': str(s.MEDIA_ROOT),"
    " 'acks_late': s.CELERY_TASK_ACKS_LATE, 'prefetch': s.CELERY_WORKER_PREFETCH_MULTIPLIER,"
    " 'serializer': s.CELERY_TASK_SERIALIZER, 'accept': s.CELERY_ACCEPT_CONTENT,"
    " 'soft': s.CELERY_TASK_SOFT_TIME_LIMIT, 'hard': s.CELERY_TASK_TIME_LIMIT,"
    " 'routes': s.CELERY_TASK_ROUTES, 'key': s.SECRET_KEY, 'email': s.EMAIL_BACKEND}))"
)

CLEAN = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS",
         "MEDIA_ROOT", "BLKREVIEW_MAX_UPLOAD_MB", "PYTEST_VERSION", "BLKREVIEW_TESTING",
         "BLKREVIEW_ANALYSIS_QUEUE", "BLKREVIEW_REPLAY_QUEUE", "BLKREVIEW_NOTIFY_QUEUE",
         "BLKREVIEW_VAR_DIR", "DJANGO_SETTINGS_MODULE", "STORAGE_URL", "AWS_LOCATION",
         "EMAIL_BACKEND")


def probe(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in CLEAN}
    base["BLKREVIEW_VAR_DIR"] = str(tmp_path / "var")
    base.update(env)
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=base,
                          capture_output=True, text=True, timeout=60)


def test_embedded_default_when_nothing_is_set(tmp_path):
    """No environment: SQLite and the filesystem broker under var/, DEBUG off, a generated key."""
    r = probe(tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["engine"] == "django.db.backends.sqlite3"
    assert s["name"] == str(tmp_path / "var" / "db.sqlite3")
    assert s["broker"] == "filesystem://"
    assert (tmp_path / "var" / "broker" / "queue").is_dir()
    assert s["embedded"] is True and s["debug"] is False
    assert len(s["key"]) >= 50
    # issue 8: notification mail goes to the console backend in the embedded default
    assert s["email"] == "django.core.mail.backends.console.EmailBackend"
    assert (tmp_path / "var" / "secret_key").read_text().strip() == s["key"]
    again = json.loads(probe(tmp_path).stdout)
    assert again["key"] == s["key"]  # stable across restarts (sessions survive)


def test_production_requires_secret_key(tmp_path):
    """With DATABASE_URL set and no SECRET_KEY, settings refuse to load."""
    r = probe(tmp_path, DATABASE_URL="postgres://u:p@db:5432/blkreview")
    assert r.returncode != 0
    assert "SECRET_KEY must be set" in r.stderr


def test_configuration_from_environment(tmp_path):
    """DATABASE_URL, REDIS_URL, DEBUG, ALLOWED_HOSTS, MEDIA_ROOT and the upload limit apply."""
    r = probe(tmp_path, DATABASE_URL="postgres://u:p@db:5432/blkreview", SECRET_KEY="k" * 50,
              REDIS_URL="redis://redis:6379/3", DEBUG="1", ALLOWED_HOSTS="review.example.org, x",
              MEDIA_ROOT=str(tmp_path / "media"), BLKREVIEW_MAX_UPLOAD_MB="3")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["engine"] == "django.db.backends.postgresql" and s["name"] == "blkreview"
    assert s["broker"] == "redis://redis:6379/3"
    assert s["debug"] is True and s["hosts"] == ["review.example.org", "x"]
    assert s["media"] == str(tmp_path / "media") and s["limit"] == 3 * 1024 * 1024
    r2 = probe(tmp_path, DATABASE_URL="postgres://u:p@db:5432/b", SECRET_KEY="k" * 50,
               REDIS_URL="redis://a:1/0", CELERY_BROKER_URL="redis://b:2/0")
    assert json.loads(r2.stdout)["broker"] == "redis://b:2/0"  # CELERY_BROKER_URL wins


def test_celery_settings_for_long_jobs(tmp_path):
    """JSON only, acks_late, prefetch 1, soft < hard limit; analysis, the comparison step
    (model replay) and notifications each on their own queue, each queue renamable."""
    s = json.loads(probe(tmp_path).stdout)
    assert s["serializer"] == "json" and s["accept"] == ["json"]
    assert s["acks_late"] is True and s["prefetch"] == 1
    assert 0 < s["soft"] < s["hard"]
    routes = s["routes"]
    from reviewapp import constants as c

    assert {c.TASK_ANALYZE, c.TASK_COMPARE, c.TASK_NOTIFY, c.TASK_WEBHOOK} <= set(routes)
    assert routes["reviewapp.tasks.analyze_bundle"] == {"queue": "analysis"}
    assert routes["reviewapp.tasks.compare_comparison"] == {"queue": "replay"}
    assert routes["reviewapp.tasks.deliver_webhook"] == {"queue": "notify"}
    assert routes["reviewapp.tasks.send_comment_notifications"] == {"queue": "notify"}
    moved = json.loads(probe(tmp_path, BLKREVIEW_REPLAY_QUEUE="big-cpus",
                             BLKREVIEW_NOTIFY_QUEUE="mail").stdout)["routes"]
    assert moved["reviewapp.tasks.compare_comparison"] == {"queue": "big-cpus"}
    assert moved["reviewapp.tasks.deliver_webhook"] == {"queue": "mail"}
