"""/metrics (Prometheus text: request latency, queue depth, jobs by state; token-gated when
configured) and the JSON-lines logs with the ids of what a task works on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of metric ``name`` whose labels include ``labels``, or None."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.django_db
def test_metrics_request_latency_queue_depth_and_jobs(client, make_upload, seed000_before,
                                                      django_capture_on_commit_callbacks,
                                                      settings):
    """A page request is timed under its route name; a queued job shows in the queue depth
    (Redis) and in blkreview_jobs{kind="analyze",state="queued"}."""
    from reviewapp.services.bundles import bundle_create
    from tests.conftest import _purge_queue

    assert client.get("/").status_code == 200
    queue = settings.BLKREVIEW_ANALYSIS_QUEUE
    _purge_queue(settings.CELERY_BROKER_URL, queue)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            bundle_create(files=[make_upload("a.txt", seed000_before)])
        resp = client.get("/metrics")
        assert resp.status_code == 200 and resp["Content-Type"].startswith("text/plain")
        text = resp.content.decode()
    finally:
        _purge_queue(settings.CELERY_BROKER_URL, queue)
    assert sample(text, "blkreview_http_request_duration_seconds_count", method="GET",
                  route="home", status="200") >= 1
    assert sample(text, "blkreview_queue_depth", queue=queue) == 1
    assert sample(text, "blkreview_queue_depth", queue=settings.BLKREVIEW_REPLAY_QUEUE) is not None
    assert sample(text, "blkreview_jobs", kind="analyze", state="queued") == 1
    assert "blkreview_job_duration_seconds" in text  # declared, filled by the workers


@pytest.mark.django_db
def test_metrics_token(client, monkeypatch):
    """With BLKREVIEW_METRICS_TOKEN set, /metrics is 404 without the bearer token."""
    monkeypatch.setenv("BLKREVIEW_METRICS_TOKEN", "scrape-me")
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").status_code == 200


def test_json_logs_carry_the_ids():
    """LOG_FORMAT=json: one JSON object per line with job/bundle/comparison ids of the block."""
    code = ("import django, logging; django.setup()\n"
            "from reviewapp.logjson import log_context\n"
            "log = logging.getLogger('reviewapp.tasks')\n"
            "with log_context(job_id=3, bundle_id=7):\n"
            "    log.info('analysis done')\n"
            "    with log_context(comparison_id=11):\n"
            "        log.warning('nested %s', 'x')\n"
            "log.info('outside', extra={'bundle_id': 9})\n")
    env = {**os.environ, "LOG_FORMAT": "json", "DJANGO_SETTINGS_MODULE": "reviewapp.settings",
           "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    assert [(x["message"], x.get("job_id"), x.get("bundle_id"), x.get("comparison_id"))
            for x in lines] == [("analysis done", 3, 7, None), ("nested x", 3, 7, 11),
                                ("outside", None, 9, None)]
    assert all(x["logger"] == "reviewapp.tasks" and x["ts"].endswith("Z") for x in lines)
    text = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**env, "LOG_FORMAT": "text"}, cwd=ROOT, timeout=60)
    assert "INFO reviewapp.tasks: analysis done" in text.stderr and "{" not in text.stderr


def test_multiprocess_live_gauge_leaves_when_the_worker_process_exits(tmp_path):
    """Multiprocess mode, in a process of its own: a process counted in blkreview_processes
    writes a live gauge file; Celery's worker_shutdown handler (reviewapp/tasks.py) marks the
    process dead and the file, and so its share of the sum, is gone."""
    mp = tmp_path / "prom"
    code = ("import os, django; django.setup()\n"
            "from reviewapp import metrics, tasks\n"
            "metrics.process_started('celery')\n"
            "f = os.path.join(os.environ['PROMETHEUS_MULTIPROC_DIR'], "
            "f'gauge_livesum_{os.getpid()}.db')\n"
            "assert os.path.exists(f)\n"
            "from prometheus_client import generate_latest\n"
            "before = generate_latest(metrics.registry()).decode()\n"
            "assert 'blkreview_processes{role=\"celery\"} 1.0' in before, before\n"
            "tasks._worker_exited()\n"
            "assert not os.path.exists(f)\n"
            "after = generate_latest(metrics.registry()).decode()\n"
            "assert 'role=\"celery\"' not in after, after\n")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(mp),
           "DJANGO_SETTINGS_MODULE": "reviewapp.settings", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert mp.is_dir()  # created by reviewapp.metrics when missing
