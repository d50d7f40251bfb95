"""Parallel ingest (reviewapp/shards.py) with the task bodies run in this process: the analysis
task fans out a chord (its messages land in a queue of this test), the shard bodies parse and
report progress, the callback merges; the results equal the single-task path's exactly, every
stale or repeated delivery writes nothing, a bad file fails the job with the single-task error.
tests/e2e/test_two_workers.py runs the same with real worker processes."""

from __future__ import annotations

import json
from datetime import timedelta
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


@pytest.fixture
def chord_queue(settings):
    """Sharding on for every size, the chord's messages in a queue of this test only."""
    import redis

    from tests.conftest import _purge_queue

    settings.BLKREVIEW_PARALLEL_INGEST_MB = 0
    settings.BLKREVIEW_ANALYSIS_QUEUE = queue = f"{settings.BLKREVIEW_ANALYSIS_QUEUE}-chord"
    r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    _purge_queue(settings.CELERY_BROKER_URL, queue)
    try:
        yield r, queue
    finally:
        _purge_queue(settings.CELERY_BROKER_URL, queue)
        r.close()


def queued_shards(r, queue: str) -> list[list]:
    """The args of the parse_shard messages waiting in ``queue``."""
    import base64

    out = []
    for raw in r.lrange(queue, 0, -1):
        msg = json.loads(raw)
        assert msg["headers"]["task"] == "reviewapp.tasks.parse_shard"
        body = json.loads(base64.b64decode(msg["body"]))
        out.append(body[0])
    return out


def run_shards(job, files) -> list[dict]:
    from reviewapp import shards

    anchor = shards.bundle_anchor(files)
    return [shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk, anchor=anchor)
            for f in shards.shardable_files(files)]


def test_chord_equals_single_task_and_reports_progress(chord_queue, client, monkeypatch):
    """18 per-CPU blktrace files + manifest: the analysis task sends 18 shard tasks (a chord)
    and leaves the job running under a lease; the shards report "parsed n/18 files, N events"
    on the job (API and page); the callback's results are the single-task path's, taken from
    the shards' partials for actions, sizes and throughput; nothing is left in storage and
    every late or repeated delivery does nothing."""
    from django.core.files.storage import default_storage
    from django.utils import timezone

    from reviewapp import shards
    from reviewapp.models import AnalysisJob, BundleResult
    from reviewapp.services.comparisons import submission_create
    from reviewapp.tasks import run_analysis, run_merge
    from workers.analyzers.sizes import SizeAcc
    from workers.analyzers.throughput import SeriesAcc

    r, queue = chord_queue
    paths = demo_files("k61_W1b")
    comparison, made = submission_create(
        title="chord", baseline_files=[uploaded(p.name, p.read_bytes()) for p in paths],
        patched_files=[uploaded(p.name, p.read_bytes()) for p in paths])
    bundle = made["baseline"][0]
    files = list(bundle.files.order_by("name", "pk"))
    job = AnalysisJob.objects.get(bundle=bundle)

    assert run_analysis(job.pk) == "sharded"
    job.refresh_from_db()
    assert job.state == "running" and job.message == "parsed 0/18 files, 0 events"
    # the lease: no heartbeat needed while the shard tasks wait in the queue
    assert job.heartbeat > timezone.now() + timedelta(seconds=shards.lease_seconds() - 30)
    sent = queued_shards(r, queue)
    assert sorted(a[2] for a in sent) == sorted(f.pk for f in shards.shardable_files(files))
    assert {(a[0], a[1], a[3]) for a in sent} == {(job.pk, job.attempts,
                                                  shards.bundle_anchor(files))}

    anchor = shards.bundle_anchor(files)
    trace_files = shards.shardable_files(files)
    first = [shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk, anchor=anchor)
             for f in trace_files[:3]]
    assert [o["state"] for o in first] == ["parsed"] * 3
    events = sum(o["events"] for o in first)
    job.refresh_from_db()
    assert job.message == f"parsed 3/18 files, {events:,} events"
    assert job.progress == 20 + 35 * 3 // 18
    api = client.get(f"/api/v1/jobs/{job.pk}/")
    assert api.status_code == 200 and api.json()["message"] == job.message
    progress = client.get(f"/comparisons/{comparison.pk}/progress.json").json()
    assert job.message in [j["message"] for j in progress["jobs"]]
    page = client.get(f"/comparisons/{comparison.pk}/")
    assert f"({job.message})" in page.content.decode()

    rest = [shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk, anchor=anchor)
            for f in trace_files[3:]]
    assert {o["state"] for o in rest} == {"parsed"}
    job.refresh_from_db()
    assert job.message.startswith("parsed 18/18 files, ")

    def never(*a, **k):
        raise AssertionError("recomputed from the table although the shards' partials fit")
    # the sizes and the throughput series come from the partials, not from the rows
    monkeypatch.setattr(SizeAcc, "add", never)
    monkeypatch.setattr(SeriesAcc, "add", never)
    # the merge is the chunked one (workers.traces.streammerge into a column store), not
    # ingest() holding every part in memory
    import workers.traces as traces
    monkeypatch.setattr(traces, "ingest", never)
    assert run_merge(job.pk, job.attempts, anchor=anchor, results=first + rest) == "succeeded"
    monkeypatch.undo()
    assert BundleResult.objects.get(bundle=bundle).data == single_pass(paths)
    assert not [n for f in files for n in (shards.part_name(job.pk, job.attempts, f.pk),
                                           shards.partial_name(job.pk, job.attempts, f.pk))
                if default_storage.exists(n)]
    # a second delivery of the callback and late shard tasks write nothing
    assert run_merge(job.pk, job.attempts, anchor=anchor) == "stale"
    assert {o["state"] for o in run_shards(job, files)} == {"stale"}


def test_shard_claims_once_and_a_stale_attempt_writes_nothing(chord_queue):
    """A shard parses its file once: a second delivery finds it taken; a delivery for another
    attempt does nothing; the callback of an attempt runs once."""
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
        stale = shards.shard_run(job_id=job.pk, attempt=job.attempts + 1, file_id=f.pk)
        assert stale["state"] == "stale"
        assert not default_storage.exists(shards.part_name(job.pk, job.attempts + 1, f.pk))
        assert shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk)["state"] \
            == "parsed"
        assert shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk)["state"] \
            == "taken"
        name = shards.part_name(job.pk, job.attempts, f.pk)
        with default_storage.open(name, "rb") as fh:
            part = part_from_bytes(fh.read())
        assert part.name == "vdc.blktrace.1" and part.binary and part.events > 0
        assert shards.claim_merge(job)
        assert not shards.claim_merge(job)
    finally:
        shards.cleanup(job=job, files=list(bundle.files.all()))


def test_a_shard_that_does_not_parse_fails_the_job_with_the_single_task_error(chord_queue,
                                                                              settings):
    """A per-CPU file cut short: its shard reports an error (no part); the callback parses it
    again through ingest, which fails the job with exactly the single-task path's error."""
    from reviewapp import shards
    from reviewapp.models import AnalysisJob
    from reviewapp.services.bundles import bundle_create
    from reviewapp.tasks import run_analysis, run_merge

    def upload():
        ups = []
        for p in demo_files("k72_W1b"):
            data = p.read_bytes()
            ups.append(uploaded(p.name, data[:-10] if p.name == "vdb.blktrace.1" else data))
        return bundle_create(files=ups)[0]

    settings.BLKREVIEW_PARALLEL_INGEST_MB = -1
    one = upload()
    assert run_analysis(AnalysisJob.objects.get(bundle=one).pk) == "failed"
    single = AnalysisJob.objects.get(bundle=one)
    assert "vdb.blktrace.1" in single.error

    settings.BLKREVIEW_PARALLEL_INGEST_MB = 0
    bundle = upload()
    job = AnalysisJob.objects.get(bundle=bundle)
    assert run_analysis(job.pk) == "sharded"
    job.refresh_from_db()
    outcomes = run_shards(job, list(bundle.files.all()))
    assert [o["state"] for o in outcomes].count("error") == 1
    assert run_merge(job.pk, job.attempts, results=outcomes) == "failed"
    job.refresh_from_db()
    assert job.state == "failed"
    assert (job.error, job.error_detail) == (single.error, single.error_detail)
    bundle.refresh_from_db()
    assert bundle.parse_status == "failed"
    from django.core.files.storage import default_storage

    assert not [f for f in bundle.files.all()
                if default_storage.exists(shards.part_name(job.pk, job.attempts, f.pk))]


def test_a_lost_chord_is_sent_again_and_its_parts_deleted(chord_queue, settings):
    """The fanned-out attempt is held by its lease: the sweeper leaves it alone while the lease
    runs, queues the job again once it ran out (no shard started or finished: a lost chord);
    the new attempt's fan-out deletes the lost attempt's parts, and the lost attempt's late
    shard and callback write nothing."""
    from datetime import timedelta

    from django.core.files.storage import default_storage
    from django.utils import timezone

    from reviewapp import shards
    from reviewapp.models import AnalysisJob
    from reviewapp.services.bundles import bundle_create
    from reviewapp.services.sweeper import SweepReport, sweep_jobs
    from reviewapp.tasks import run_analysis, run_merge

    bundle, _ = bundle_create(files=[uploaded(p.name, p.read_bytes())
                                     for p in demo_files("k72_W1b")])
    files = list(bundle.files.all())
    job = AnalysisJob.objects.get(bundle=bundle)
    assert run_analysis(job.pk) == "sharded"
    job.refresh_from_db()
    lost = job.attempts
    f = shards.shardable_files(files)[0]
    assert shards.shard_run(job_id=job.pk, attempt=lost, file_id=f.pk)["state"] == "parsed"
    report = SweepReport()
    sweep_jobs(report)
    assert job.pk not in report.requeued_jobs  # the lease holds it
    AnalysisJob.objects.filter(pk=job.pk).update(
        heartbeat=timezone.now() - timedelta(seconds=settings.BLKREVIEW_STALE_AFTER_SECONDS + 1))
    sweep_jobs(report)
    assert job.pk in report.requeued_jobs
    job.refresh_from_db()
    assert job.state == "queued"
    assert run_analysis(job.pk, task_id=job.celery_task_id) == "sharded"
    job.refresh_from_db()
    assert job.attempts == lost + 1
    assert not default_storage.exists(shards.part_name(job.pk, lost, f.pk))
    # the lost attempt's late tasks
    g = shards.shardable_files(files)[1]
    assert shards.shard_run(job_id=job.pk, attempt=lost, file_id=g.pk)["state"] == "stale"
    assert not default_storage.exists(shards.part_name(job.pk, lost, g.pk))
    assert run_merge(job.pk, lost) == "stale"
    job.refresh_from_db()
    assert (job.state, job.attempts) == ("running", lost + 1)


def test_the_anchor_is_read_from_the_heads_of_the_traces_in_s3(s3_storage):
    """The fan-out reads only the head of each binary trace (a ranged GET from the bucket) and
    finds the bundle's genesis, the same as from local files."""
    from reviewapp import shards, storage
    from reviewapp.services.bundles import bundle_create
    from workers.traces import ingest

    paths = demo_files("k72_W1b")
    bundle, _ = bundle_create(files=[uploaded(p.name, p.read_bytes()) for p in paths])
    f = bundle.files.get(name="vda.blktrace.0")
    assert storage.read_head(f.storage_name, 100) == (DEMO / "k72_W1b" / f.name).read_bytes()[:100]
    anchor = shards.bundle_anchor(list(bundle.files.all()))
    assert anchor == ingest(paths, names=[p.name for p in paths]).table.meta["genesis_ns"]


def test_the_merge_falls_back_to_ingest_in_memory_when_a_part_is_out_of_time_order(tmp_path):
    """shards.merge: a part the chunked merge refuses (a per-CPU file running backwards) is
    merged by ingest(parsed=...) in memory, with the single-task path's table; the same bundle
    in time order takes the chunked merge, which downloads no trace file (sizes from the
    records, formats from the stored heads)."""
    import contextlib
    import io
    from types import SimpleNamespace

    import numpy as np

    from reviewapp import shards, storage
    from workers.events import COLUMNS
    from workers.traces import ingest
    from workers.traces.shards import PartFile, parse_shard, write_part
    from workers.traces.streammerge import StoredIngest
    from workers.traces.synth import realistic_table
    from workers.traces.writers import encode_blktrace

    t = realistic_table(3000, seed=4, cpus=1)
    back = t.take(np.arange(len(t))[::-1])
    paths = [tmp_path / "sdx.blktrace.0", tmp_path / "sdx.blktrace.1"]
    paths[1].write_bytes(encode_blktrace(realistic_table(500, seed=5, cpus=1)))
    names = [p.name for p in paths]

    def merged(first, work):
        paths[0].write_bytes(encode_blktrace(first))
        files, parts = [], {}
        for i, p in enumerate(paths):
            name = storage.save_bytes(f"test-merge/{work}/{p.name}", io.BytesIO(p.read_bytes()))
            files.append(SimpleNamespace(pk=i + 1, name=p.name, size=p.stat().st_size,
                                         storage_name=name))
            with open(tmp_path / f"{work}-{p.name}.part", "wb") as fh:
                write_part(parse_shard(p, p.name, manifest=None), fh)
            parts[p.name] = PartFile(tmp_path / f"{work}-{p.name}.part")
        fetched = []
        with contextlib.ExitStack() as stack:
            def local(f):
                fetched.append(f.name)
                return stack.enter_context(storage.local_copy(f.storage_name))
            ing = shards.merge(files=files, local=local, strict=False, parts=parts,
                               workdir=tmp_path / work)
            single = ingest(paths, names=names)
            table = ing.store.to_table() if isinstance(ing, StoredIngest) else ing.table
            for name, _ in COLUMNS:
                assert np.array_equal(getattr(table, name), getattr(single.table, name)), name
            assert [r.to_json() for r in ing.files] == [r.to_json() for r in single.files]
        for f in files:
            storage.delete_quietly(f.storage_name)
        return ing, fetched

    ing, fetched = merged(back, "a")
    assert not isinstance(ing, StoredIngest) and fetched == names
    ing, fetched = merged(t, "b")
    assert isinstance(ing, StoredIngest) and fetched == []


def _run_units(job, files, *, skip: int | None = None) -> list[dict]:
    from reviewapp import shards

    anchor = shards.bundle_anchor(files)
    return [shards.shard_run(job_id=job.pk, attempt=job.attempts, file_id=f.pk, anchor=anchor,
                             index=i, count=n)
            for k, (f, i, n) in enumerate(shards.shard_units(files)) if k != skip]


def test_large_files_in_byte_ranges_equal_the_single_task_path(chord_queue, settings,
                                                                monkeypatch, caplog):
    """BLKREVIEW_SHARD_RANGE_MB under the files' sizes: every binary file is parsed as byte
    ranges, a shard task each (a range one shard did not parse is parsed by the callback);
    the callback chains them and merges in chunks; the results are the single-task path's and
    no part is left in storage."""
    from django.core.files.storage import default_storage

    from reviewapp import shards
    from reviewapp.models import AnalysisJob, BundleResult
    from reviewapp.services.bundles import bundle_create
    from reviewapp.tasks import run_analysis, run_merge

    r, queue = chord_queue
    settings.BLKREVIEW_SHARD_RANGE_MB = 6000 / 1024 / 1024  # 6000 bytes: 2 to 4 ranges a file
    paths = demo_files("k72_W1b")
    bundle, _ = bundle_create(files=[uploaded(p.name, p.read_bytes()) for p in paths])
    files = list(bundle.files.order_by("name", "pk"))
    job = AnalysisJob.objects.get(bundle=bundle)
    units = shards.shard_units(files)
    assert {n for _, _, n in units} == {2, 4} and len(units) > 2 * 18
    assert run_analysis(job.pk) == "sharded"
    job.refresh_from_db()
    assert job.message == f"parsed 0/{len(units)} file parts, 0 events"
    sent = queued_shards(r, queue)
    assert sorted((a[2], a[4], a[5]) for a in sent) == sorted((f.pk, i, n) for f, i, n in units)
    out = _run_units(job, files, skip=5)
    assert {o["state"] for o in out} == {"parsed"} and len(out) == len(units) - 1
    job.refresh_from_db()
    assert job.message.startswith(f"parsed {len(units) - 1}/{len(units)} file parts, ")

    def never(*a, **k):
        raise AssertionError("the chunked merge was not used")
    import workers.traces as traces
    monkeypatch.setattr(traces, "ingest", never)
    assert run_merge(job.pk, job.attempts, anchor=shards.bundle_anchor(files),
                     results=out) == "succeeded"
    monkeypatch.undo()
    assert "parsed whole" not in caplog.text  # every file's ranges were chained
    assert BundleResult.objects.get(bundle=bundle).data == single_pass(paths)
    assert not [n for n in shards._unit_names(job.pk, job.attempts, files)
                if default_storage.exists(n)]


def test_one_large_file_in_byte_ranges_from_s3(chord_queue, settings, s3_storage, tmp_path):
    """A bundle of one binary file (one merged stream) in S3: its ranges are fetched by
    ranged reads and merged into the single-task path's results."""
    from reviewapp import shards
    from reviewapp.models import AnalysisJob, BundleResult
    from reviewapp.services.bundles import bundle_create
    from reviewapp.tasks import run_analysis, run_merge
    from workers.traces.synth import realistic_table
    from workers.traces.writers import encode_blktrace

    data = encode_blktrace(realistic_table(30_000, seed=6))
    path = tmp_path / "all.blktrace"
    path.write_bytes(data)
    settings.BLKREVIEW_SHARD_RANGE_MB = (len(data) // 5 + 1) / 1024 / 1024
    bundle, _ = bundle_create(files=[uploaded(path.name, data)])
    files = list(bundle.files.all())
    assert [n for _, _, n in shards.shard_units(files)] == [5] * 5
    job = AnalysisJob.objects.get(bundle=bundle)
    assert run_analysis(job.pk) == "sharded"
    job.refresh_from_db()
    out = _run_units(job, files)
    assert [o["state"] for o in out] == ["parsed"] * 5
    assert run_merge(job.pk, job.attempts, anchor=shards.bundle_anchor(files),
                     results=out) == "succeeded"
    assert BundleResult.objects.get(bundle=bundle).data == single_pass([path])
