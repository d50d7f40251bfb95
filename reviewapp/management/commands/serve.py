"""``manage.py serve``: migrate, then run the web server and one Celery worker together.

This is the run command of the embedded default (``make demo``): SQLite and kombu's
filesystem broker under var/, gunicorn for the web (static files through whitenoise) and a
real ``celery -A workers.celery worker -Q analysis,replay,notify,celery --pool=solo
--concurrency=1``
process. The same code paths as production; only the backends differ. Ctrl-C stops both.
Both processes share ``PROMETHEUS_MULTIPROC_DIR`` (default ``var/prometheus``), so ``/metrics``
adds up the web workers' requests and the worker's jobs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


def worker_command(*, loglevel: str = "INFO") -> list[str]:
    """The worker command line (the same one docker-compose and the e2e tests run)."""
    queues = ",".join(settings.BLKREVIEW_QUEUES)  # every queue: analysis, replay, notify
    return [sys.executable, "-m", "celery", "-A", "workers.celery", "worker", "-Q", queues,
            "--pool=solo", "--concurrency=1", f"--loglevel={loglevel}"]


class Command(BaseCommand):
    help = "Run migrations, then the web server and one Celery worker process together."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("BLKREVIEW_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true", help="web server only")
        parser.add_argument("--no-migrate", action="store_true")
        parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers")

    def handle(self, *args: Any, **opts: Any) -> None:
        if not opts["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        host, port = opts["host"], opts["port"]
        web = [sys.executable, "-m", "gunicorn", "-c", "python:reviewapp.gunicorn_conf",
               "reviewapp.wsgi:application",
               "--bind", f"{host}:{port}", "--workers", str(opts["web_workers"]),
               "--timeout", "300", "--access-logfile", "-"]
        procs: dict[str, subprocess.Popen[bytes]] = {}
        env = dict(os.environ, DJANGO_SETTINGS_MODULE="reviewapp.settings")
        # the web's /metrics sums every gunicorn worker and the Celery worker (reviewapp/metrics.py)
        env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(settings.VAR_DIR / "prometheus"))
        os.makedirs(env["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)
        procs["web"] = subprocess.Popen(web, env=env)
        if not opts["no_worker"]:
            procs["worker"] = subprocess.Popen(worker_command(), env=env)
        mode = "embedded default (SQLite, filesystem broker)" if settings.EMBEDDED else "configured"
        self.stdout.write(self.style.SUCCESS(
            f"blkreview is running at http://{host}:{port}/  [{mode}]  Ctrl-C to stop"))

        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        code = 0
        try:
            while not stopping:
                for name, proc in procs.items():
                    rc = proc.poll()
                    if rc is not None:
                        self.stderr.write(f"{name} exited with status {rc}; stopping")
                        stopping, code = True, rc or 1
                        break
                time.sleep(0.5)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.terminate()
            deadline = time.time() + 15
            for proc in procs.values():
                try:
                    proc.wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    proc.kill()
        if code:
            sys.exit(code)
