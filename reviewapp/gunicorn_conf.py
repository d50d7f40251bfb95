"""gunicorn's hooks for the metrics of several worker processes: ``gunicorn -c
python:reviewapp.gunicorn_conf reviewapp.wsgi:application ...`` (the Dockerfile, docker-compose
and ``manage.py serve`` start it so).

With ``PROMETHEUS_MULTIPROC_DIR`` set (reviewapp/metrics.py), the master removes the files of
processes of an earlier run before it forks (``on_starting``), each worker counts itself in
``blkreview_processes{role="web"}`` once the application is loaded (``post_worker_init``), and
the master marks a worker dead when it exits, however it exits (``child_exit``, called by the
arbiter when it reaps the worker: recycled by ``--max-requests``, killed on timeout, crashed),
so the live gauges sum only the workers that serve. Without the variable the hooks change
nothing. Command-line options still apply (gunicorn reads this module first).
"""

from __future__ import annotations

import os
from typing import Any


def on_starting(server: Any) -> None:
    # before prometheus-client is imported: its multiprocess mode opens files there at once
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)
    from reviewapp import metrics

    metrics.multiproc_prepare()


def post_worker_init(worker: Any) -> None:
    from reviewapp import metrics

    metrics.process_started("web")


def child_exit(server: Any, worker: Any) -> None:
    from reviewapp import metrics

    metrics.process_exited(worker.pid)
