"""Prometheus metrics (prometheus-client): the web's ``/metrics`` and each worker's own port.

Web (``/metrics``, see :func:`metrics_view`):

* ``blkreview_http_request_duration_seconds{method,route,status}``: request latency
  (histogram), from :class:`RequestMetricsMiddleware`; ``route`` is the URL pattern's name,
  never the raw path, so label values stay few.
* ``blkreview_queue_depth{queue}``: messages waiting in each Celery queue (Redis LLEN at scrape).
* ``blkreview_jobs{kind,state}``: analysis jobs and comparison steps by state (database).

Worker (``BLKREVIEW_WORKER_METRICS_PORT``: each worker serves its own ``/metrics`` there):

* ``blkreview_job_duration_seconds{kind,state}``: wall time of each analysis (``analyze``)
  and comparison step (``compare``) by final state (histogram).
* ``blkreview_ingested_bytes_total`` and ``blkreview_events_parsed_total``: trace bytes read
  and events parsed by the analyses.

* ``blkreview_processes{role}``: processes alive that record metrics (``web``: gunicorn
  workers; ``celery``: processes that run tasks, i.e. prefork pool processes, or a solo worker
  itself); a dead one leaves the sum at once.

Several processes (gunicorn workers, Celery prefork pool processes) share their numbers through
prometheus-client's multiprocess mode: set ``PROMETHEUS_MULTIPROC_DIR`` to a directory of this
host (one per container) in the environment of every process, and each scrape, whichever process
answers it, sums every process's counters and histograms, the exited ones' included (a
counter never goes back when a worker is recycled). Processes that share the directory report
through each other: the web's ``/metrics`` then also shows the job durations of Celery
processes on the same host. A process that exits is marked dead (:func:`process_exited`:
gunicorn's ``child_exit`` hook in reviewapp/gunicorn_conf.py, Celery's
``worker_process_shutdown`` in reviewapp/tasks.py), which drops its live gauges; files of
processes from an earlier run are removed at start (:func:`multiproc_prepare`).
``BLKREVIEW_METRICS_TOKEN`` set: the web's ``/metrics`` wants ``Authorization: Bearer <token>``
(404 otherwise, like anything private).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

log = logging.getLogger(__name__)

# multiprocess mode opens a file there for each metric below as it is created
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)

REQUEST_LATENCY = Histogram(
    "blkreview_http_request_duration_seconds", "HTTP request latency",
    ["method", "route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
JOB_DURATION = Histogram(
    "blkreview_job_duration_seconds", "wall time of a job by kind and final state",
    ["kind", "state"], buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600))
INGESTED_BYTES = Counter("blkreview_ingested_bytes", "trace bytes read by analyses")
EVENTS_PARSED = Counter("blkreview_events_parsed", "trace events parsed by analyses")
#: 1 per live process; multiprocess mode sums the live ones (a dead process's file is dropped)
PROCESSES = Gauge("blkreview_processes", "processes alive that record metrics", ["role"],
                  multiprocess_mode="livesum")


def multiproc_dir() -> str:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def multiproc_prepare() -> None:
    """Create ``PROMETHEUS_MULTIPROC_DIR`` and remove the files of processes that are gone.

    Called once by gunicorn's master (``on_starting``) before it forks its workers. Only files
    whose process id is not alive on this host are removed, so a web and a Celery worker
    sharing the directory (``manage.py serve``) never delete each other's numbers, whichever
    starts first. A container's directory is a tmpfs, new at every start (docker-compose.yml).
    """
    path = multiproc_dir()
    if not path:
        return
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        stem, _, ext = name.rpartition(".")
        pid = stem.rsplit("_", 1)[-1]
        if ext != "db" or not pid.isdigit() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(path, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_started(role: str) -> None:
    """This process serves (``web``) or runs tasks (``celery``): counted in
    ``blkreview_processes`` until :func:`process_exited`."""
    PROCESSES.labels(role=role).set(1)


def process_exited(pid: int) -> None:
    """``pid`` has exited: drop its live gauges (multiprocess mode; a no-op otherwise)."""
    if multiproc_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def observe_job(kind: str, state: str, seconds: float) -> None:
    JOB_DURATION.labels(kind=kind, state=state).observe(seconds)


def observe_ingest(*, nbytes: int, events: int) -> None:
    INGESTED_BYTES.inc(max(0, int(nbytes)))
    EVENTS_PARSED.inc(max(0, int(events)))


class StateCollector:
    """Numbers read at scrape time from the broker and the database (right across processes)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.conf import settings

        depth = GaugeMetricFamily("blkreview_queue_depth", "messages waiting in a Celery queue",
                                  labels=["queue"])
        broker = str(getattr(settings, "CELERY_BROKER_URL", ""))
        if broker.startswith(("redis://", "rediss://")):
            try:
                import redis

                r = redis.Redis.from_url(broker, socket_timeout=2)
                try:
                    for q in settings.BLKREVIEW_QUEUES:
                        depth.add_metric([q], float(r.llen(q)))
                finally:
                    r.close()
            except Exception:
                log.warning("metrics: cannot read the queue depths", exc_info=True)
        yield depth

        jobs = GaugeMetricFamily("blkreview_jobs", "jobs by kind and state", labels=["kind", "state"])
        try:
            from django.db.models import Count

            from reviewapp.models import AnalysisJob, ComparisonResult

            for row in AnalysisJob.objects.values("state").annotate(n=Count("id")):
                jobs.add_metric(["analyze", row["state"]], float(row["n"]))
            for row in ComparisonResult.objects.values("state").annotate(n=Count("id")):
                jobs.add_metric(["compare", row["state"]], float(row["n"]))
        except Exception:
            log.warning("metrics: cannot count the jobs", exc_info=True)
        yield jobs


def registry() -> CollectorRegistry:
    """This process's metrics, or every process's in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        reg = CollectorRegistry()
        multiprocess.MultiProcessCollector(reg)
        return reg
    from prometheus_client import REGISTRY

    return REGISTRY


def metrics_view(request: Any) -> Any:
    """``GET /metrics``: Prometheus text format; the scrape-time gauges are added here."""
    from django.http import Http404, HttpResponse

    token = os.environ.get("BLKREVIEW_METRICS_TOKEN", "")
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            raise Http404()
    body = generate_latest(registry())
    state = CollectorRegistry(auto_describe=False)
    state.register(StateCollector())  # type: ignore[arg-type]
    body += generate_latest(state)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


class RequestMetricsMiddleware:
    """Times every request into ``blkreview_http_request_duration_seconds``."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        start = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = (match.view_name if match is not None and match.view_name else "unmatched")
        REQUEST_LATENCY.labels(method=request.method, route=route,
                               status=str(getattr(response, "status_code", 0))).observe(
            time.perf_counter() - start)
        return response


def start_worker_server() -> int | None:
    """Serve this worker's metrics on ``BLKREVIEW_WORKER_METRICS_PORT`` (if set); the port."""
    port = os.environ.get("BLKREVIEW_WORKER_METRICS_PORT")
    if not port:
        return None
    from prometheus_client import start_http_server

    start_http_server(int(port), addr=os.environ.get("BLKREVIEW_WORKER_METRICS_ADDR", "0.0.0.0"),
                      registry=registry())
    log.info("worker metrics on port %s", port)
    return int(port)
