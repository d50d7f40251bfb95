"""Chart payloads live in storage (issue 12), not in PostgreSQL: one object per comparison step,
rows pointing into it; replaced and deleted objects leave storage; a superseded or lost attempt
leaves nothing behind; the section endpoint serves the same bytes (cached, or streamed when
large) with the same access rule. Runs on local MEDIA_ROOT and, with ``--storage=s3``, on
SeaweedFS (make test-s3)."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from reviewapp import chartstore
from reviewapp import constants as c
from reviewapp.models import Comparison, ComparisonChart, ComparisonResult, Patch
from reviewapp.services.results import (
    charts_replace,
    comparisons_delete,
    result_mark_failed,
    result_start,
    result_store,
)

pytestmark = pytest.mark.django_db

INDEX = json.dumps({"devices": [{"dev": "8,0", "name": "sda", "runs": {}}], "sections": []})


def charts(mark: str) -> dict[tuple[str, str, str], str]:
    return {("index", "", ""): INDEX,
            ("seek", "8,0", ""): json.dumps({"section": "seek", "mark": mark, "x": "é" * 3}),
            ("seek", "8,0", "D"): json.dumps({"section": "seek", "stage": "D", "mark": mark}),
            ("latency", "8,0", ""): json.dumps({"section": "latency", "mark": mark})}


def comparison(user, *, public: bool = True, running: bool = True) -> Comparison:
    patch = Patch.objects.create(title="p", submitted_by=user)
    cmp = Comparison.objects.create(patch=patch, public=public, created_by=user,
                                    status=c.COMPARISON_READY)
    ComparisonResult.objects.create(
        comparison=cmp, state=c.JOB_STATE_RUNNING if running else c.JOB_STATE_SUCCEEDED,
        attempts=1, started=timezone.now(), heartbeat=timezone.now())
    return cmp


def store(cmp: Comparison, mark: str, attempt: int | None = 1) -> ComparisonResult | None:
    result = ComparisonResult.objects.get(comparison=cmp)
    return result_store(result_id=result.pk, compare={}, verdict={"state": "success"},
                        model=None, report="r\n", charts=charts(mark), attempt=attempt)


def names_of(cmp: Comparison) -> set[str]:
    return set(ComparisonChart.objects.filter(comparison=cmp).values_list("storage_name",
                                                                          flat=True))


def test_the_database_holds_no_chart_bytes():
    """The payload column is gone (migration 0012); rows hold a name and a byte range."""
    with connection.cursor() as cur:
        cols = {col.name for col in connection.introspection.get_table_description(
            cur, ComparisonChart._meta.db_table)}
    assert "payload" not in cols
    assert {"storage_name", "offset", "nbytes"} <= cols


def test_result_store_writes_one_object_and_the_rows_point_into_it(user, client,
                                                                  django_capture_on_commit_callbacks):
    cmp = comparison(user)
    with django_capture_on_commit_callbacks(execute=True):
        assert store(cmp, "one") is not None
    (name,) = names_of(cmp)
    assert name.startswith("charts/comparison-") and default_storage.exists(name)
    with default_storage.open(name, "rb") as f:
        blob = f.read()
    for (section, dev, stage), text in charts("one").items():
        row = ComparisonChart.objects.get(comparison=cmp, section=section, dev=dev, stage=stage)
        assert blob[row.offset:row.offset + row.nbytes] == text.encode()
    r = client.get(f"/comparisons/{cmp.pk}/sections/seek.json?dev=8,0")
    assert r.status_code == 200 and r["Content-Type"] == "application/json"
    assert r.content == charts("one")[("seek", "8,0", "")].encode()
    r = client.get(f"/comparisons/{cmp.pk}/sections/seek.json?dev=8,0&stage=D")
    assert json.loads(r.content)["stage"] == "D"
    # no dev: the index's first device, as before
    assert json.loads(client.get(f"/comparisons/{cmp.pk}/sections/latency.json")
                      .content)["mark"] == "one"
    assert client.get(f"/comparisons/{cmp.pk}/sections/latency.json?dev=9,9").status_code == 404
    assert ComparisonResult.objects.get(comparison=cmp).pending_charts_name == ""


def test_a_new_run_replaces_the_object_and_deletes_the_old_one(
        user, client, django_capture_on_commit_callbacks):
    cmp = comparison(user)
    with django_capture_on_commit_callbacks(execute=True):
        store(cmp, "one")
    (old,) = names_of(cmp)
    result = ComparisonResult.objects.get(comparison=cmp)
    ComparisonResult.objects.filter(pk=result.pk).update(state=c.JOB_STATE_QUEUED)
    with django_capture_on_commit_callbacks(execute=True):
        started = result_start(result_id=result.pk)
        assert started is not None
        assert store(cmp, "two", attempt=started.attempts) is not None
    (new,) = names_of(cmp)
    assert new != old and default_storage.exists(new) and not default_storage.exists(old)
    r = client.get(f"/comparisons/{cmp.pk}/sections/seek.json?dev=8,0")
    assert json.loads(r.content)["mark"] == "two"


def test_a_superseded_attempt_leaves_nothing_and_changes_nothing(
        user, django_capture_on_commit_callbacks):
    cmp = comparison(user)
    with django_capture_on_commit_callbacks(execute=True):
        store(cmp, "one")
    before = names_of(cmp)
    listed = set(default_storage.listdir("charts")[1])
    ComparisonResult.objects.filter(comparison=cmp).update(state=c.JOB_STATE_RUNNING, attempts=3)
    with django_capture_on_commit_callbacks(execute=True):
        assert store(cmp, "stale", attempt=2) is None
    assert names_of(cmp) == before
    assert set(default_storage.listdir("charts")[1]) == listed


def test_a_lost_attempts_object_is_deleted_when_the_step_is_taken_over(
        user, settings, django_capture_on_commit_callbacks):
    """The attempt records its object before writing it; the next attempt deletes it."""
    cmp = comparison(user)
    result = ComparisonResult.objects.get(comparison=cmp)
    name, _ = chartstore.write_blob(chartstore.new_name(cmp.pk), charts("lost"))
    ComparisonResult.objects.filter(pk=result.pk).update(
        pending_charts_name=name,
        heartbeat=timezone.now() - timedelta(seconds=settings.BLKREVIEW_STALE_AFTER_SECONDS + 5))
    with django_capture_on_commit_callbacks(execute=True):
        taken = result_start(result_id=result.pk)
    assert taken is not None and taken.attempts == 2
    assert not default_storage.exists(name)
    assert ComparisonResult.objects.get(pk=result.pk).pending_charts_name == ""


def test_a_failed_attempt_deletes_its_pending_object(user, django_capture_on_commit_callbacks):
    cmp = comparison(user)
    result = ComparisonResult.objects.get(comparison=cmp)
    name, _ = chartstore.write_blob(chartstore.new_name(cmp.pk), charts("half"))
    ComparisonResult.objects.filter(pk=result.pk).update(pending_charts_name=name)
    with django_capture_on_commit_callbacks(execute=True):
        result_mark_failed(result_id=result.pk, error="boom", attempt=1)
    assert not default_storage.exists(name)
    assert ComparisonResult.objects.get(pk=result.pk).state == c.JOB_STATE_FAILED


def test_deleting_a_comparison_deletes_its_object(user, django_capture_on_commit_callbacks):
    cmp = comparison(user)
    with django_capture_on_commit_callbacks(execute=True):
        store(cmp, "one")
    (name,) = names_of(cmp)
    with django_capture_on_commit_callbacks(execute=True):
        assert comparisons_delete(queryset=Comparison.objects.filter(pk=cmp.pk)) == 1
    assert not default_storage.exists(name)
    assert not ComparisonChart.objects.filter(storage_name=name).exists()


def test_cleanup_storage_lists_orphaned_chart_objects_only(user, django_capture_on_commit_callbacks):
    cmp = comparison(user)
    with django_capture_on_commit_callbacks(execute=True):
        store(cmp, "one")
    (kept,) = names_of(cmp)
    orphan, _ = chartstore.write_blob(chartstore.new_name(999999), charts("orphan"))
    out = StringIO()
    call_command("cleanup_storage", "--min-age", "0", stdout=out)
    assert f"orphan {orphan} " in out.getvalue()
    assert kept not in out.getvalue()
    call_command("cleanup_storage", "--min-age", "0", "--delete", stdout=StringIO())
    assert not default_storage.exists(orphan) and default_storage.exists(kept)


def test_private_comparison_sections_are_404_to_others(user, other_user, client,
                                                       django_capture_on_commit_callbacks):
    cmp = comparison(user, public=False)
    with django_capture_on_commit_callbacks(execute=True):
        store(cmp, "secret")
    url = f"/comparisons/{cmp.pk}/sections/seek.json?dev=8,0"
    assert client.get(url).status_code == 404
    client.force_login(other_user)
    r = client.get(url)
    assert r.status_code == 404 and b"secret" not in r.content
    client.force_login(user)
    assert json.loads(client.get(url).content)["mark"] == "secret"


def test_small_payloads_are_cached_large_ones_streamed(user, client, settings,
                                                       django_capture_on_commit_callbacks):
    """A small payload, once read, is served from the cache (its object may even be gone); a
    payload over BLKREVIEW_CHART_CACHE_MAX_BYTES is streamed from storage, same bytes."""
    cmp = comparison(user)
    big = json.dumps({"section": "throughput", "points": list(range(60_000))})
    with django_capture_on_commit_callbacks(execute=True):
        name = charts_replace(comparison_id=cmp.pk,
                              charts={**charts("c"), ("throughput", "8,0", ""): big})
    settings.BLKREVIEW_CHART_CACHE_MAX_BYTES = 64 * 1024
    assert len(big) > settings.BLKREVIEW_CHART_CACHE_MAX_BYTES
    base = f"/comparisons/{cmp.pk}/sections"
    first = client.get(f"{base}/latency.json?dev=8,0")
    assert not first.streaming and json.loads(first.content)["mark"] == "c"
    r = client.get(f"{base}/throughput.json?dev=8,0")
    assert r.streaming and int(r["Content-Length"]) == len(big)
    assert b"".join(r.streaming_content) == big.encode()
    default_storage.delete(name)
    again = client.get(f"{base}/latency.json?dev=8,0")
    assert again.status_code == 200 and again.content == first.content  # from the cache
    gone = client.get(f"{base}/throughput.json?dev=8,0")
    assert gone.status_code == 404 and "missing from storage" in gone.json()["error"]
    settings.BLKREVIEW_CHART_CACHE_MAX_BYTES = 0  # past the cache: storage says it is gone
    assert client.get(f"{base}/latency.json?dev=8,0").status_code == 404
    # the page itself still renders (its index is gone too): no sections, no error
    assert client.get(f"/comparisons/{cmp.pk}/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_data_migration_moves_stored_payloads_to_storage_and_back(user):
    """0011 writes each comparison's payloads into one object and empties the column; going
    back reads them into the column again and deletes the objects."""
    from django.db.migrations.executor import MigrationExecutor

    before = [("reviewapp", "0010_chart_payloads_in_storage")]
    executor = MigrationExecutor(connection)
    after = executor.loader.graph.leaf_nodes()  # every app at its latest
    # the models as the database has them at ``before``: the other branches stay applied
    applied = [n for n in executor.loader.graph.leaf_nodes() if n[0] != "reviewapp"] + [
        n for n in executor.loader.graph.nodes
        if n[0] == "reviewapp" and n not in executor.loader.graph.forwards_plan(before[0])
        and before[0] not in executor.loader.graph.forwards_plan(n)] + before
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(applied).apps
        Chart = apps.get_model("reviewapp", "ComparisonChart")
        Cmp = apps.get_model("reviewapp", "Comparison")
        Patch_ = apps.get_model("reviewapp", "Patch")
        patch = Patch_.objects.create(title="old", submitted_by_id=user.pk)
        cmps = [Cmp.objects.create(patch=patch, created_by_id=user.pk) for _ in range(2)]
        texts = {}
        for i, cmp in enumerate(cmps):
            for (section, dev, stage), text in charts(f"old{i}").items():
                Chart.objects.create(comparison=cmp, section=section, dev=dev, stage=stage,
                                     payload=text, nbytes=len(text.encode()))
                texts[(cmp.pk, section, dev, stage)] = text
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        names = {}
        for key, text in texts.items():
            row = ComparisonChart.objects.get(comparison_id=key[0], section=key[1], dev=key[2],
                                              stage=key[3])
            ref = chartstore.ChartRef(row.storage_name, row.offset, row.nbytes)
            assert storage_read(ref) == text.encode()
            names.setdefault(key[0], set()).add(row.storage_name)
        assert all(len(n) == 1 for n in names.values()) and len(names) == 2
        executor = MigrationExecutor(connection)
        executor.migrate(before)
        apps = executor.loader.project_state(applied).apps
        Chart = apps.get_model("reviewapp", "ComparisonChart")
        for key, text in texts.items():
            assert Chart.objects.get(comparison_id=key[0], section=key[1], dev=key[2],
                                     stage=key[3]).payload == text
        for (name,) in names.values():
            assert not default_storage.exists(name)
    finally:
        MigrationExecutor(connection).migrate(after)


def storage_read(ref: chartstore.ChartRef) -> bytes:
    from reviewapp import storage

    return storage.read_range(ref.name, ref.offset, ref.nbytes)


def test_each_process_keeps_its_last_payloads_within_a_byte_budget():
    """The per-process layer: least recently used out first, never past its budget, and a
    payload larger than the budget is not kept at all."""
    recent = chartstore._Recent()
    recent.put("a", b"x" * 40, budget=100)
    recent.put("b", b"y" * 40, budget=100)
    assert recent.get("a") == b"x" * 40  # a is now the most recent
    recent.put("c", b"z" * 40, budget=100)  # 120 > 100: b (least recent) goes
    assert recent.get("b") is None and recent.get("a") and recent.get("c")
    assert recent.nbytes == 80
    recent.put("huge", b"h" * 101, budget=100)
    assert recent.get("huge") is None and recent.nbytes == 80


@pytest.mark.parametrize("attempts", [1, 99])
def test_the_sweeper_deletes_a_lost_attempts_chart_object(user, settings, attempts,
                                                          django_capture_on_commit_callbacks):
    """A step whose worker was lost mid-write: requeued (few attempts) or failed (too many),
    its pending object goes either way, so no row keeps an orphan referenced forever."""
    from reviewapp.services.sweeper import SweepReport, sweep_steps

    cmp = comparison(user)
    result = ComparisonResult.objects.get(comparison=cmp)
    name, _ = chartstore.write_blob(chartstore.new_name(cmp.pk), charts("lost"))
    ComparisonResult.objects.filter(pk=result.pk).update(
        pending_charts_name=name, attempts=attempts,
        heartbeat=timezone.now() - timedelta(seconds=settings.BLKREVIEW_STALE_AFTER_SECONDS + 5))
    from tests.conftest import _purge_queue

    try:
        with django_capture_on_commit_callbacks(execute=True):
            sweep_steps(SweepReport())
    finally:  # the requeued step's message (this run's own queue)
        _purge_queue(settings.CELERY_BROKER_URL, settings.BLKREVIEW_REPLAY_QUEUE)
    after = ComparisonResult.objects.get(pk=result.pk)
    assert after.pending_charts_name == "" and not default_storage.exists(name)
    assert after.state == (c.JOB_STATE_FAILED if attempts == 99 else c.JOB_STATE_QUEUED)
