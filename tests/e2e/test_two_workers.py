"""Two worker processes that share only PostgreSQL, Redis and an S3 bucket (a real SeaweedFS).

Each worker runs in its own working directory with its own MEDIA_ROOT and TMPDIR, as on two
hosts; the web side (pytest-django's live server) stores uploads in the bucket. Several
comparisons are submitted over REST; every analysis and comparison task must run on exactly
one of the two workers, exactly once, both workers must have taken work, every result must be
complete, and neither worker's MEDIA_ROOT may receive a byte.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import requests

from tests.conftest import blkparse_lines, start_worker, stop_worker, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

N_COMPARISONS = 4


@pytest.fixture
def two_workers(s3_storage, django_db_blocker, settings, tmp_path):
    """Two ``celery worker`` processes on queues of their own, separate directories."""
    from tests.conftest import _purge_queue

    pid = os.getpid()
    settings.BLKREVIEW_ANALYSIS_QUEUE = f"two-analysis-{pid}"
    settings.BLKREVIEW_REPLAY_QUEUE = f"two-replay-{pid}"
    queues = [settings.BLKREVIEW_ANALYSIS_QUEUE, settings.BLKREVIEW_REPLAY_QUEUE]
    workers = []
    try:
        for name in ("w1", "w2"):
            home = tmp_path / name
            for sub in ("cwd", "media", "tmp"):
                (home / sub).mkdir(parents=True)
            env = worker_env(django_db_blocker, STORAGE_URL=s3_storage.storage_url,
                             MEDIA_ROOT=str(home / "media"), TMPDIR=str(home / "tmp"),
                             BLKREVIEW_ANALYSIS_QUEUE=queues[0], BLKREVIEW_REPLAY_QUEUE=queues[1],
                             # every bundle with 2+ trace files is ingested in parallel
                             BLKREVIEW_PARALLEL_INGEST_MB="0")
            log = home / "worker.log"
            proc = start_worker(env=env, queues=queues, name=f"{name}-{pid}", log=log,
                                cwd=home / "cwd")
            workers.append({"name": name, "home": home, "log": log, "process": proc})
        yield workers
    finally:
        for w in workers:
            stop_worker(w["process"])
        for q in queues:
            _purge_queue(settings.CELERY_BROKER_URL, q)


def task_runs(log: Path) -> dict[str, list[str]]:
    """task id -> the outcomes the worker logged for it (received, succeeded, failed...)."""
    runs: dict[str, list[str]] = {}
    for m in re.finditer(r"Task reviewapp\.tasks\.\w+\[([0-9a-f-]+)\] (received|succeeded|failed"
                         r"|raised|retry)", log.read_text(errors="replace")):
        runs.setdefault(m.group(1).replace("-", ""), []).append(m.group(2))
    return runs


def test_two_workers_share_only_database_broker_and_bucket(two_workers, live_server, user,
                                                           waiter):
    """N comparisons over REST: each job on exactly one worker, once; results complete."""
    from reviewapp.models import AnalysisJob, BundleResult, Comparison, ComparisonResult
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name="two-workers")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    bodies = []
    for i in range(N_COMPARISONS):
        # distinct bytes per comparison and side, so no bundle is deduplicated into another
        before = blkparse_lines([1000 * i + 256 * k for k in range(40)])
        after = blkparse_lines([1000 * i + 7 + 384 * k for k in range(40)])
        resp = session.post(f"{live_server.url}/api/v1/submissions/",
                            data={"title": f"two workers {i}", "version": "v1"},
                            files=[("baseline_files", (f"b{i}.txt", before)),
                                   ("patched_files", (f"p{i}.txt", after))], timeout=30)
        assert resp.status_code == 201, resp.text
        bodies.append(resp.json())

    def all_checked():
        return all(session.get(b["check_url"], timeout=10).json()["state"] != "pending"
                   for b in bodies)
    waiter(all_checked, timeout=240, what="every comparison's check")

    comparisons = Comparison.objects.filter(pk__in=[b["id"] for b in bodies])
    assert comparisons.count() == N_COMPARISONS
    jobs = list(AnalysisJob.objects.filter(
        bundle__in=[bb for c in comparisons for bb in
                    list(c.baseline_bundles.all()) + list(c.patched_bundles.all())]))
    results = list(ComparisonResult.objects.filter(comparison__in=comparisons))
    assert len(jobs) == 2 * N_COMPARISONS and len(results) == N_COMPARISONS
    assert {j.state for j in jobs} == {"succeeded"}, [(j.pk, j.state, j.error) for j in jobs]
    assert {r.state for r in results} == {"succeeded"}, [(r.pk, r.error) for r in results]

    runs = [task_runs(w["log"]) for w in two_workers]
    task_ids = [j.celery_task_id for j in jobs] + [r.celery_task_id for r in results]
    for tid in task_ids:
        where = [(w["name"], r[tid.replace("-", "")]) for w, r in zip(two_workers, runs)
                 if tid.replace("-", "") in r]
        assert len(where) == 1, (tid, where)  # on exactly one worker
        assert where[0][1] == ["received", "succeeded"], (tid, where)  # exactly once
    assert all(runs), "both workers must have taken work"
    assert sum(len(r) for r in runs) == len(task_ids)  # and nothing else ran

    from django.core.files.storage import default_storage

    for c in comparisons:
        for b in list(c.baseline_bundles.all()) + list(c.patched_bundles.all()):
            r = BundleResult.objects.get(bundle=b)
            assert r.data["devices"]["8,0"]["sizes"]["count"] == 40
            assert default_storage.exists(r.events_name)  # the .npz is in the bucket
    for b in bodies:
        analysis = session.get(b["analysis_url"], timeout=10).json()
        assert analysis["check"]["state"] in ("success", "warning", "fail")
        assert analysis["compare"]["runs_note"] == "single run"
    for w in two_workers:  # nothing reached a worker's own media directory
        assert list((w["home"] / "media").rglob("*")) == [], w["name"]
        assert list((w["home"] / "cwd").rglob("*")) == [], w["name"]


def test_two_workers_parse_one_huge_bundle_together(two_workers, live_server, user, waiter):
    """A per-CPU capture (18 blktrace files + manifest) over the parallel threshold runs as a
    Celery chord on the two workers: the analysis task fans out and returns ``sharded``, each
    of the 18 ``parse_shard`` tasks runs once and parses its file (each file parsed exactly
    once across the workers), the ``merge_shards`` callback runs once, and the results equal
    one ingest's."""
    import json as _json

    from reviewapp.models import AnalysisJob, BundleResult
    from reviewapp.services.tokens import token_create
    from tests.conftest import DEMO
    from workers.analyzers import analyze
    from workers.traces import ingest

    _, key = token_create(user=user, name="two-workers-shards")
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    paths = sorted((DEMO / "k72_W1b").iterdir())
    resp = session.post(f"{live_server.url}/api/v1/bundles/", data={"role": "patched"},
                        files=[("files", (p.name, p.read_bytes())) for p in paths], timeout=60)
    assert resp.status_code == 201, resp.text
    job_id = resp.json()["job"]["id"]
    waiter(lambda: AnalysisJob.objects.get(pk=job_id).state in ("succeeded", "failed"),
           timeout=180, what="the sharded analysis")
    job = AnalysisJob.objects.get(pk=job_id)
    assert job.state == "succeeded", job.error
    parsed: dict[str, list[str]] = {}
    for w in two_workers:
        for m in re.finditer(rf"parsed shard (\S+) of job {job_id} ", w["log"].read_text()):
            parsed.setdefault(m.group(1), []).append(w["name"])
    trace_files = [p.name for p in paths if p.name != "blkreview.toml"]
    assert sorted(parsed) == sorted(trace_files)
    assert all(len(v) == 1 for v in parsed.values()), parsed  # exactly once across workers
    ing = ingest(paths, names=[p.name for p in paths])
    single = _json.loads(_json.dumps(analyze(ing.table, summaries=ing.summaries)))
    assert BundleResult.objects.get(bundle_id=resp.json()["id"]).data == single
    by_worker = {w: sum(1 for v in parsed.values() if v == [w]) for w in ("w1", "w2")}
    print("shards parsed per worker:", by_worker)
    # the chord: every task ran on one worker, once, and nothing was retried or failed. The
    # job's results are stored before the callback cleans up (parts, its local column store)
    # and returns: wait for its "succeeded" line before reading the logs
    waiter(lambda: any(re.search(r"Task reviewapp\.tasks\.merge_shards\[[0-9a-f-]+\] "
                                 r"(succeeded|failed|raised)", w["log"].read_text(
                                     errors="replace")) for w in two_workers),
           timeout=60, what="the merge_shards callback's end in a worker log")
    outcomes: dict[str, list[str]] = {}
    for w in two_workers:
        text = w["log"].read_text(errors="replace")
        for m in re.finditer(r"Task reviewapp\.tasks\.(\w+)\[([0-9a-f-]+)\] (received|succeeded"
                             r"|failed|raised|retry)(?:[^\n]*s: (.*))?", text):
            outcomes.setdefault(f"{m.group(1)}:{m.group(2)}", []).append(
                m.group(3) + (f" {m.group(4)}" if m.group(4) else ""))
    kinds = sorted(k.split(":")[0] for k in outcomes)
    assert kinds == ["analyze_bundle", "merge_shards"] + ["parse_shard"] * 18, kinds
    for k, v in outcomes.items():
        assert len(v) == 2 and v[0] == "received" and v[1].startswith("succeeded"), (k, v)
        if k.startswith("parse_shard"):
            assert "'state': 'parsed'" in v[1], (k, v)
    assert [v[1] for k, v in outcomes.items() if k.startswith("analyze_bundle")] == [
        "succeeded 'sharded'"]
    assert [v[1] for k, v in outcomes.items() if k.startswith("merge_shards")] == [
        "succeeded 'succeeded'"]
    job.refresh_from_db()
    assert (job.attempts, job.progress, job.message) == (1, 100, "done")
    logs = "".join(w["log"].read_text(errors="replace") for w in two_workers)
    assert (f"partials of 18 files merged ({len(ing.table)} events of {len(ing.table)}); "
            "throughput bins from the shards: yes") in logs

