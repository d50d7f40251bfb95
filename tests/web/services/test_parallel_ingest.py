"""Parallel ingest (reviewapp/shards.py) in-process: a bundle over the threshold is parsed as
shards (claimed once each through Redis, parts through storage) and its results equal the
single-task path's exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DEMO, uploaded

pytestmark = pytest.mark.django_db


def demo_files(capture: str) -> list[Path]:
    return sorted((DEMO / capture).iterdir())


def single_pass(paths: list[Path]) -> dict:
    from workers.analyzers import analyze
    from workers.traces import ingest

    ing = ingest(paths, names=[p.name for p in paths])
    return json.loads(json.dumps(analyze(ing.table, summaries=ing.summaries)))


def test_parallel_ingest_equals_single_task(settings, django_capture_on_commit_callbacks):
    """19 files (18 per-CPU blktrace + manifest) over a 0 MB threshold: 17 shard tasks are
    sent, the coordinator (alone here) parses all 18, results identical to one ingest."""
    from reviewapp.models import AnalysisJob, BundleResult
    from reviewapp.services.bundles import bundle_create
    from reviewapp.tasks import run_analysis
    from tests.conftest import _purge_queue

    settings.BLKREVIEW_PARALLEL_INGEST_MB = 0
    settings.BLKREVIEW_ANALYSIS_QUEUE = queue = f"{settings.BLKREVIEW_ANALYSIS_QUEUE}-par"
    paths = demo_files("k61_W1b")
    bundle, _ = bundle_create(files=[uploaded(p.name, p.read_bytes()) for p in paths])
    job = AnalysisJob.objects.get(bundle=bundle)
    import redis

    r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    _purge_queue(settings.CELERY_BROKER_URL, queue)
    try:
        assert run_analysis(job.pk) == "succeeded"
        assert r.llen(queue) == 17  # one shard task per trace file but the coordinator's own
    finally:
        _purge_queue(settings.CELERY_BROKER_URL, queue)
        r.close()
    assert BundleResult.objects.get(bundle=bundle).data == single_pass(paths)
    from django.core.files.storage import default_storage

    from reviewapp import shards

    job.refresh_from_db()
    assert not any(default_storage.exists(shards.part_name(job.pk, job.attempts, f.pk))
                   for f in bundle.files.all())  # no part left behind
    # the 17 shard tasks still queued arrive late: each finds its file taken, parses nothing
    late = [shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk)
            for f in shards.shardable_files(list(bundle.files.all()))]
    assert set(late) <= {"taken", "stale"}


def test_shard_task_claims_once_and_stores_a_part(settings):
    """A shard task parses its file once: a second delivery finds it taken; a stale attempt
    does nothing."""
    from django.core.files.storage import default_storage

    from reviewapp import shards
    from reviewapp.models import AnalysisJob
    from reviewapp.services import jobs
    from reviewapp.services.bundles import bundle_create
    from workers.traces.shards import part_from_bytes

    paths = demo_files("k72_W1b")
    bundle, _ = bundle_create(files=[uploaded(p.name, p.read_bytes()) for p in paths])
    job = jobs.job_start(job_id=AnalysisJob.objects.get(bundle=bundle).pk)
    f = bundle.files.get(name="vdc.blktrace.1")
    try:
        assert shards.shard_run(job_id=job.pk, attempt=job.attempts + 1, file_id=f.pk) == "stale"
        assert shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk) == "parsed"
        assert shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk) == "taken"
        name = shards.part_name(job.pk, job.attempts, f.pk)
        with default_storage.open(name, "rb") as fh:
            part = part_from_bytes(fh.read())
        assert part.name == "vdc.blktrace.1" and part.binary and part.events > 0
    finally:
        import redis

        r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        r.delete(f"blkreview:shard:{job.pk}:{job.attempts}:{f.pk}")
        r.close()
