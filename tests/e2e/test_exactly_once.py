"""Every job and comparison step finishes exactly once: real worker processes on a real Redis.

Each test runs its own redis-server on a free port (so killing workers, short visibility
timeouts and a broker that is down touch nothing else on the machine) and its own workers,
started and killed here. docs/deploy.md "Delivery guarantees" states what these tests prove.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import start_worker, stop_worker, use_broker, wait_for, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def redis_server(port: int, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A private redis-server on ``port`` (no persistence), stopped on exit."""
    proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(workdir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def up() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                return True
            return False

        wait_for(up, timeout=20, what="redis-server")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's main process and its pool children (one process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    wait_for(lambda: not _group_alive(proc.pid), timeout=10, what="worker children gone")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stored_tables(bundle_id: int) -> list[str]:
    from django.conf import settings

    d = Path(settings.MEDIA_ROOT) / "tables"
    return sorted(f"tables/{p.name}" for p in d.glob(f"bundle-{bundle_id}-*.npz")) if d.exists() else []


FAST = {  # liveness figures scaled down for a test: the defaults are 10 / 45 / 15 / 60 s
    "BLKREVIEW_HEARTBEAT_SECONDS": "0.5",
    "BLKREVIEW_STALE_AFTER_SECONDS": "3",
    "BLKREVIEW_SWEEP_SECONDS": "1",
    "BLKREVIEW_RESEND_AFTER_SECONDS": "2",
}


def queues_env(settings: Any, django_db_blocker: Any, name: str, url: str,
               **extra: str) -> tuple[dict[str, str], list[str]]:
    """This test's own analysis and replay queues (here and in its workers) on broker ``url``."""
    settings.BLKREVIEW_ANALYSIS_QUEUE = analysis = f"delivery-{name}-{os.getpid()}"
    settings.BLKREVIEW_REPLAY_QUEUE = replay = f"delivery-{name}-replay-{os.getpid()}"
    env = worker_env(django_db_blocker, CELERY_BROKER_URL=url, BLKREVIEW_ANALYSIS_QUEUE=analysis,
                     BLKREVIEW_REPLAY_QUEUE=replay, **extra)
    return env, [analysis, replay]


def test_sigkill_of_the_whole_worker_mid_job_finishes_the_job_exactly_once(
        transactional_db: Any, django_db_blocker: Any, settings: Any, tmp_path: Path,
        make_upload: Any, seed000_before: bytes) -> None:
    """Kill -9 the worker (main process and prefork child) after the job wrote its EventTable
    and before it stored results; a new worker's sweeper finds the job stale, re-queues it, and
    it finishes once: one result row, 2 attempts, the killed attempt's file deleted, and the
    killed worker's own message, redelivered by Redis after its visibility timeout, does
    nothing."""
    from reviewapp.models import AnalysisJob, BundleResult
    from reviewapp.services.bundles import bundle_create

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    env, queues = queues_env(settings, django_db_blocker, "kill", url,
                             BLKREVIEW_TEST_STAGE_DELAY="1.5", **FAST)
    # a third worker with a 1-second visibility timeout makes Redis hand out the killed
    # worker's unacknowledged message again (in production: after BLKREVIEW_TASK_TIME_LIMIT +
    # 300 s); its sweeper is off so only the redelivery is at work
    env_c = dict(env, BLKREVIEW_VISIBILITY_TIMEOUT="1", BLKREVIEW_UNACKED_RESTORE_SECONDS="1",
                 BLKREVIEW_SWEEP_SECONDS="0")
    logs = {n: tmp_path / f"worker-{n}.log" for n in "abc"}
    workers: dict[str, subprocess.Popen[bytes]] = {}
    with redis_server(port, tmp_path), use_broker(url):
        try:
            workers["a"] = start_worker(env=env, queues=queues, log=logs["a"], pool="prefork", name="a")
            bundle, _ = bundle_create(files=[make_upload("before.txt", seed000_before)])
            job = AnalysisJob.objects.get(bundle=bundle)
            first_task = job.celery_task_id

            def file_written() -> Any:
                j = AnalysisJob.objects.get(pk=job.pk)
                return j if j.progress >= 90 and j.pending_events_name else None

            running = wait_for(file_written, timeout=90, what="the job to write its EventTable")
            pending = running.pending_events_name
            assert stored_tables(bundle.pk) == [pending]
            kill_group(workers["a"])
            assert AnalysisJob.objects.get(pk=job.pk).state == "running"

            workers["b"] = start_worker(env=env, queues=queues, log=logs["b"], pool="prefork", name="b")
            done = wait_for(lambda: AnalysisJob.objects.filter(pk=job.pk, state="succeeded")
                            .first(), timeout=120, what="the job to finish on the new worker")
            stop_worker(workers.pop("b"))

            workers["c"] = start_worker(env=env_c, queues=queues, log=logs["c"], pool="prefork",
                                        name="c")
            wait_for(lambda: f"Task reviewapp.tasks.analyze_bundle[{first_task}] succeeded"
                     in logs["c"].read_text(), timeout=60,
                     what="the killed worker's message to be redelivered")
        finally:
            for w in workers.values():
                stop_worker(w)
            if workers.get("a") is not None and workers["a"].poll() is None:
                kill_group(workers["a"])

    log_b, log_c = logs["b"].read_text(), logs["c"].read_text()
    assert f"job {job.pk}: no heartbeat since" in log_b  # the sweeper re-queued it
    assert f"[{first_task}] succeeded in" in log_c and "'skipped'" in log_c
    assert f"job {job.pk} is already succeeded; ignoring the task" in log_c
    after = AnalysisJob.objects.get(pk=job.pk)
    assert after.attempts == done.attempts == 2
    assert after.celery_task_id != first_task and after.finished == done.finished
    results = list(BundleResult.objects.filter(bundle=bundle))
    assert len(results) == 1 and results[0].job_id == job.pk
    assert stored_tables(bundle.pk) == [results[0].events_name] != [pending]
    assert after.pending_events_name == ""


def test_broker_down_at_upload_then_back_the_sweeper_sends_jobs_and_steps_once(
        transactional_db: Any, django_db_blocker: Any, settings: Any, tmp_path: Path,
        client: Any, make_upload: Any, seed000_before: bytes, seed000_after: bytes,
        caplog: Any) -> None:
    """Uploads while the broker is unreachable land; their jobs (and a comparison step that
    could not be queued) stay queued, "waiting for the queue", with no connection error stored
    or shown; once a broker listens on that port, a worker's sweeper sends them and each
    finishes once."""
    from reviewapp.models import AnalysisJob, ComparisonResult
    from reviewapp.services.comparisons import submission_create
    from reviewapp.tasks import run_analysis

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    env, queues = queues_env(settings, django_db_blocker, "down", url, **FAST)
    with use_broker(url):
        # comparison X: nothing could be sent
        x, _ = submission_create(title="x", baseline_files=[make_upload("b.txt", seed000_before)],
                                 patched_files=[make_upload("p.txt", seed000_after)], public=True)
        # comparison Y: its bundles analyzed here, so its comparison step is what is unsent
        y, _ = submission_create(
            title="y", baseline_files=[make_upload("b2.txt", seed000_before + b"\n")],
            patched_files=[make_upload("p2.txt", seed000_after + b"\n")], public=True)
        for job in AnalysisJob.objects.filter(bundle__in=list(y.baseline_bundles.all())
                                              + list(y.patched_bundles.all())):
            assert run_analysis(job.pk) == "succeeded"
        x_jobs = list(AnalysisJob.objects.filter(
            bundle__in=list(x.baseline_bundles.all()) + list(x.patched_bundles.all())))
        step_y = ComparisonResult.objects.get(comparison=y)
        assert len(x_jobs) == 2
        for j in x_jobs:
            assert (j.state, j.message, j.error, j.sent) == ("queued", "waiting for the queue",
                                                             "", None)
        assert (step_y.state, step_y.message, step_y.sent) == ("queued", "waiting for the queue",
                                                               None)
        page = client.get(x.get_absolute_url()).content.decode()
        assert "waiting for the queue" in page
        for leak in (str(port), "Connection refused", "Error "):
            assert leak not in page
        api = client.get(f"/api/v1/comparisons/{x.pk}/").content.decode()
        assert str(port) not in api and "refused" not in api
        assert "could not queue job" in caplog.text  # the details are in the log

        with redis_server(port, tmp_path):
            worker = start_worker(env=env, queues=queues, log=tmp_path / "worker.log", name="w")
            try:
                def all_done() -> bool:
                    states = [AnalysisJob.objects.get(pk=j.pk).state for j in x_jobs]
                    steps = [r.state for r in ComparisonResult.objects.filter(comparison__in=[x, y])]
                    return states == ["succeeded"] * 2 and steps == ["succeeded"] * 2
                wait_for(all_done, timeout=150, what="jobs and steps sent by the sweeper")
            finally:
                stop_worker(worker)
    for j in x_jobs:
        j.refresh_from_db()
        assert j.attempts == 1 and j.sent is not None and j.error == ""
    step_y.refresh_from_db()
    assert step_y.attempts == 1 and step_y.sent is not None
    check = client.get(f"/api/v1/comparisons/{y.pk}/check/").json()
    assert check["state"] not in ("pending", "error"), check


def test_sigkill_mid_chord_the_sweeper_sends_the_job_again_and_it_finishes_once(
        transactional_db: Any, django_db_blocker: Any, settings: Any, tmp_path: Path,
        make_upload: Any) -> None:
    """A huge bundle's chord (parallel ingest): the worker is killed -9 while a shard task holds
    its file's claim. The attempt's lease (BLKREVIEW_SHARD_LEASE_SECONDS, renewed by running
    shards) runs out, a second worker's sweeper queues the job again, and attempt 2 fans out,
    parses every file exactly once and merges: the results are the single-task path's, no part
    is left in storage, and the killed attempt's shard and callback, delivered late, write
    nothing (``stale``)."""
    import json

    from reviewapp.models import AnalysisJob, BundleResult
    from reviewapp.services.bundles import bundle_create
    from tests.conftest import DEMO
    from workers.analyzers import analyze
    from workers.traces import ingest

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    env, queues = queues_env(settings, django_db_blocker, "chord", url,
                             BLKREVIEW_TEST_STAGE_DELAY="1", BLKREVIEW_PARALLEL_INGEST_MB="0",
                             BLKREVIEW_SHARD_LEASE_SECONDS="4", **FAST)
    env_c = dict(env, BLKREVIEW_VISIBILITY_TIMEOUT="1", BLKREVIEW_UNACKED_RESTORE_SECONDS="1",
                 BLKREVIEW_SWEEP_SECONDS="0")
    paths = [DEMO / "k72_W1b" / n for n in ("vda.blktrace.0", "vda.blktrace.1")]
    logs = {n: tmp_path / f"worker-{n}.log" for n in "abc"}
    workers: dict[str, subprocess.Popen[bytes]] = {}
    import redis

    r = None
    with redis_server(port, tmp_path), use_broker(url):
        r = redis.Redis.from_url(url)
        try:
            workers["a"] = start_worker(env=env, queues=queues, log=logs["a"], pool="prefork",
                                        name="a")
            bundle, _ = bundle_create(files=[make_upload(p.name, p.read_bytes()) for p in paths])
            job = AnalysisJob.objects.get(bundle=bundle)
            wait_for(lambda: r.keys(f"blkreview:shard:{job.pk}:1:*"), timeout=90,
                     what="a shard task to claim its file")
            kill_group(workers["a"])
            assert AnalysisJob.objects.get(pk=job.pk).state == "running"

            workers["b"] = start_worker(env=env, queues=queues, log=logs["b"], pool="prefork",
                                        name="b")
            done = wait_for(lambda: AnalysisJob.objects.filter(pk=job.pk, state__in=(
                "succeeded", "failed")).first(), timeout=150, what="the job to finish")
            stop_worker(workers.pop("b"))
            # the killed worker's unacknowledged shard message, redelivered
            workers["c"] = start_worker(env=env_c, queues=queues, log=logs["c"],
                                        pool="prefork", name="c")
            stale_merge = re.compile(r"merge_shards\[[0-9a-f-]+\] succeeded in \S+ 'stale'")
            wait_for(lambda: "'state': 'stale'" in logs["c"].read_text()
                     and stale_merge.search(logs["c"].read_text()), timeout=60,
                     what="the killed shard task redelivered, then attempt 1's callback")
        finally:
            for w in workers.values():
                stop_worker(w)
            if workers.get("a") is not None and workers["a"].poll() is None:
                kill_group(workers["a"])
            r.close()

    assert done.state == "succeeded", done.error
    assert done.attempts == 2
    text = {n: p.read_text(errors="replace") for n, p in logs.items()}
    assert f"job {job.pk}: no heartbeat since" in text["b"]  # the sweeper sent it again
    parsed2 = [m for t in text.values()
               for m in re.findall(rf"parsed shard (\S+) of job {job.pk} \(attempt 2\)", t)]
    assert sorted(parsed2) == ["vda.blktrace.0", "vda.blktrace.1"]  # each once
    assert "succeeded in" in text["b"] and "merge_shards" in text["b"]
    assert not re.search(rf"parsed shard \S+ of job {job.pk} \(attempt 1\)", text["a"])
    names = [p.name for p in paths]
    ing = ingest(paths, names=names)
    single = json.loads(json.dumps(analyze(ing.table, summaries=ing.summaries)))
    assert BundleResult.objects.get(bundle=bundle).data == single
    shards_dir = Path(settings.MEDIA_ROOT) / "shards"
    assert not shards_dir.exists() or not [p for p in shards_dir.rglob("*") if p.is_file()]
