"""Prometheus multiprocess mode with real processes: gunicorn with two workers and a Celery
worker (prefork: the job runs in a pool process) share one PROMETHEUS_MULTIPROC_DIR, and every
scrape of the web's /metrics, whichever worker answers it, sums the requests of both gunicorn
workers and shows the job durations and ingest counters the Celery pool process recorded.
A worker that exits is marked dead (gunicorn's child_exit, Celery's worker_process_shutdown):
it leaves ``blkreview_processes`` at once while its counts stay in the sums."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, blkparse_lines, start_worker, stop_worker, wait_for, worker_env
from tests.e2e.test_serve import free_port
from tests.web.test_metrics_logs import sample

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MAX_HOME_REQUESTS = 480
STALE = "counter_99999999.db"  # a process id above any pid_max: an earlier run's file


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode()


def served_by(access_log: Path, path: str) -> list[int]:
    """gunicorn worker pids that answered ``GET path`` (the access log's ``%(p)s``: ``<pid>``)."""
    pids = []
    for line in access_log.read_text().splitlines():
        m = re.match(r"<(\d+)> GET (\S+) (\d+)$", line.strip())
        if m and m.group(2) == path:
            pids.append(int(m.group(1)))
    return pids


@pytest.fixture
def stack(django_db_blocker: Any, settings: Any, test_storage: dict[str, str],
          tmp_path: Path) -> Iterator[dict[str, Any]]:
    """gunicorn (2 workers, reviewapp.gunicorn_conf) + a prefork Celery worker, one metrics dir."""
    from tests.conftest import _purge_queue

    pid = os.getpid()
    settings.BLKREVIEW_ANALYSIS_QUEUE = f"mp-analysis-{pid}"
    settings.BLKREVIEW_REPLAY_QUEUE = f"mp-replay-{pid}"
    queues = [settings.BLKREVIEW_ANALYSIS_QUEUE, settings.BLKREVIEW_REPLAY_QUEUE]
    mp = tmp_path / "prometheus"
    mp.mkdir()
    (mp / STALE).write_bytes(b"")
    env = worker_env(django_db_blocker, PROMETHEUS_MULTIPROC_DIR=str(mp),
                     BLKREVIEW_SWEEP_SECONDS="0", BLKREVIEW_ANALYSIS_QUEUE=queues[0],
                     BLKREVIEW_REPLAY_QUEUE=queues[1], ALLOWED_HOSTS="127.0.0.1,localhost",
                     **test_storage)
    port = free_port()
    access = tmp_path / "access.log"
    web_log = tmp_path / "gunicorn.log"
    with open(web_log, "wb") as out:
        web = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:reviewapp.gunicorn_conf",
             "reviewapp.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "2",
             "--access-logfile", str(access), "--access-logformat", "%(p)s %(m)s %(U)s %(s)s"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    worker = None
    try:
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            if web.poll() is not None:
                raise RuntimeError(web_log.read_text()[-3000:])
            try:
                return get(f"{base}/healthz")[0] == 200
            except OSError:
                return False
        wait_for(up, timeout=90, what="gunicorn")
        worker = start_worker(env=env, queues=queues, name=f"mp-{pid}",
                              log=tmp_path / "worker.log", pool="prefork")
        yield {"base": base, "dir": mp, "access": access, "web": web, "worker": worker,
               "web_log": web_log}
    finally:
        if worker is not None:
            stop_worker(worker)
        web.terminate()
        try:
            web.wait(timeout=30)
        except subprocess.TimeoutExpired:
            web.kill()
        for q in queues:
            _purge_queue(settings.CELERY_BROKER_URL, q)


def children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                out.add(int(entry.name))
    return out


def test_metrics_sum_gunicorn_workers_and_celery_processes(stack, make_upload,
                                                           django_capture_on_commit_callbacks):
    from reviewapp.models import AnalysisJob
    from reviewapp.services.bundles import bundle_create

    base, mp = stack["base"], stack["dir"]
    assert not (mp / STALE).exists()  # the master removed an earlier run's file at start

    # requests until both workers have answered some (a sync worker drains the backlog while
    # the other sleeps, so one batch may all go to one of them): bounded, 12 at a time
    web_pids = set(children(stack["web"].pid))
    assert len(web_pids) == 2
    sent = 0
    with ThreadPoolExecutor(12) as pool:
        while sent < MAX_HOME_REQUESTS:
            codes = list(pool.map(lambda _: get(f"{base}/")[0], range(24)))
            assert codes == [200] * len(codes)
            sent += len(codes)
            home = wait_for(lambda n=sent: len(p := served_by(stack["access"], "/")) == n and p,
                            timeout=10, what="the access log")
            if set(home) == web_pids:
                break
    assert set(home) == web_pids, "both gunicorn workers must have answered"

    # several scrapes, whichever worker answers: the same sum over both workers
    with ThreadPoolExecutor(4) as pool:
        scrapes = list(pool.map(lambda _: get(f"{base}/metrics"), range(8)))
    for status, text in scrapes:
        assert status == 200
        assert sample(text, "blkreview_http_request_duration_seconds_count", method="GET",
                      route="home", status="200") == sent
        assert sample(text, "blkreview_processes", role="web") == 2
        assert sample(text, "blkreview_processes", role="celery") == 1  # the pool process
    assert set(served_by(stack["access"], "/metrics")) <= web_pids

    # a job in the Celery pool process: its numbers reach the web's /metrics
    data = blkparse_lines([4096 * k + 13 for k in range(30)])
    with django_capture_on_commit_callbacks(execute=True):
        bundle, _ = bundle_create(files=[make_upload("mp.txt", data)])
    job = AnalysisJob.objects.get(bundle=bundle)
    wait_for(lambda: AnalysisJob.objects.get(pk=job.pk).is_final, timeout=120,
             what="the analysis")
    assert AnalysisJob.objects.get(pk=job.pk).state == "succeeded"

    def job_seen() -> str | None:
        text = get(f"{base}/metrics")[1]
        n = sample(text, "blkreview_job_duration_seconds_count", kind="analyze",
                   state="succeeded")
        return text if n == 1 else None
    text = wait_for(job_seen, timeout=30, what="the job in the web's /metrics")
    assert sample(text, "blkreview_job_duration_seconds_bucket", kind="analyze",
                  state="succeeded", le="+Inf") == 1
    assert sample(text, "blkreview_events_parsed_total") == 30
    assert sample(text, "blkreview_ingested_bytes_total") == len(data)
    pool_pids = children(stack["worker"].pid)
    assert pool_pids and any((mp / f"histogram_{p}.db").exists() for p in pool_pids), \
        sorted(os.listdir(mp))

    # a gunicorn worker exits: child_exit marks it dead, its replacement counts instead
    gone = sorted(web_pids)[0]
    os.kill(gone, signal.SIGTERM)
    wait_for(lambda: gone not in children(stack["web"].pid)
             and len(children(stack["web"].pid)) == 2, timeout=60, what="a new gunicorn worker")
    assert not (mp / f"gauge_livesum_{gone}.db").exists()

    def web_two() -> str | None:
        text = get(f"{base}/metrics")[1]
        return text if sample(text, "blkreview_processes", role="web") == 2 else None
    text = wait_for(web_two, timeout=30, what="two live web processes")
    # the exited worker's requests still count
    assert sample(text, "blkreview_http_request_duration_seconds_count", method="GET",
                  route="home", status="200") == sent

    # the Celery worker stops: its pool process marks itself dead, its job stays counted
    stop_worker(stack["worker"])
    for p in pool_pids:
        assert not (mp / f"gauge_livesum_{p}.db").exists()
    text = get(f"{base}/metrics")[1]
    assert not sample(text, "blkreview_processes", role="celery")
    assert sample(text, "blkreview_job_duration_seconds_count", kind="analyze",
                  state="succeeded") == 1
