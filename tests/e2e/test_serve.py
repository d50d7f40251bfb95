"""The embedded default end to end: ``load_demo --queue`` then ``serve`` (gunicorn + a real
worker on kombu's filesystem broker, SQLite) shows the demo comparison, analyzed by the worker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS",
         "MEDIA_ROOT", "PYTEST_VERSION", "BLKREVIEW_TESTING", "BLKREVIEW_ANALYSIS_QUEUE",
         "BLKREVIEW_REPLAY_QUEUE", "BLKREVIEW_NOTIFY_QUEUE", "AWS_LOCATION", "STORAGE_URL",
         "DJANGO_SETTINGS_MODULE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except OSError:
        return 0, ""


def test_serve_embedded_default_with_demo(tmp_path):
    """migrate + load_demo --queue + serve: the worker analyzes the demo; the page shows it."""
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    env["BLKREVIEW_VAR_DIR"] = str(tmp_path / "var")
    manage = [sys.executable, "manage.py"]
    subprocess.run(manage + ["migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True,
                   timeout=120)
    demo = subprocess.run(manage + ["load_demo", "--queue"], cwd=ROOT, env=env, check=True,
                          timeout=120, capture_output=True, text=True)
    assert "Demo login: user 'demo'" in demo.stdout
    assert (tmp_path / "var" / "db.sqlite3").exists()
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(manage + ["serve", "--port", str(port), "--web-workers", "1"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        progress: dict = {}
        while time.time() < deadline:
            status, body = get(f"{base}/comparisons/1/progress.json")
            if status == 200:
                progress = json.loads(body)
                if progress["complete"]:
                    break
            time.sleep(0.5)
        assert progress.get("status") == "ready", (tmp_path / "serve.log").read_text()[-3000:]
        status, html = get(f"{base}/comparisons/1/")
        assert status == 200
        assert progress["compare"]["state"] == "succeeded", progress
        assert 'data-section="seek"' in html and 'id="device-select"' in html
        status, seek = get(f"{base}/comparisons/1/sections/seek.json?dev=8,0")
        assert status == 200 and json.loads(seek)["charts"][0]["panels"]
        assert get(f"{base}/static/reviewapp/plotly.min.js")[0] == 200
        assert "analyze_bundle" in (tmp_path / "serve.log").read_text()
        assert "compare_comparison" in (tmp_path / "serve.log").read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
    # serve stops its children: nothing is left listening on the port.
    assert get(f"http://127.0.0.1:{port}/healthz")[0] == 0
