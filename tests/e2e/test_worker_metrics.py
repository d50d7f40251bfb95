"""A real worker serves its own Prometheus metrics (BLKREVIEW_WORKER_METRICS_PORT): job
durations by kind and state, trace bytes ingested and events parsed."""

from __future__ import annotations

import urllib.request

import pytest

from tests.conftest import blkparse_lines
from tests.web.test_metrics_logs import sample

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def test_worker_metrics_after_an_analysis(celery_worker, make_upload, waiter,
                                          django_capture_on_commit_callbacks):
    """One 30-event bundle analyzed by the worker moves its counters by exactly that."""
    from reviewapp.models import AnalysisJob
    from reviewapp.services.bundles import bundle_create

    port = celery_worker["metrics_port"]
    before = scrape(port)
    data = blkparse_lines([4096 * k + 13 for k in range(30)])
    with django_capture_on_commit_callbacks(execute=True):
        bundle, _ = bundle_create(files=[make_upload("metrics.txt", data)])
    job = AnalysisJob.objects.get(bundle=bundle)
    waiter(lambda: AnalysisJob.objects.get(pk=job.pk).state in ("succeeded", "failed"),
           timeout=120, what="the analysis")
    assert AnalysisJob.objects.get(pk=job.pk).state == "succeeded"

    def moved():
        after = scrape(port)
        n0 = sample(before, "blkreview_job_duration_seconds_count", kind="analyze",
                    state="succeeded") or 0
        n1 = sample(after, "blkreview_job_duration_seconds_count", kind="analyze",
                    state="succeeded") or 0
        return after if n1 == n0 + 1 else None
    after = waiter(moved, timeout=20, what="the job's duration in the worker's metrics")
    assert (sample(after, "blkreview_events_parsed_total") -
            (sample(before, "blkreview_events_parsed_total") or 0)) == 30
    assert (sample(after, "blkreview_ingested_bytes_total") -
            (sample(before, "blkreview_ingested_bytes_total") or 0)) == len(data)
    # the solo pool runs tasks in the worker's own process: it counts itself
    assert sample(after, "blkreview_processes", role="celery") == 1
