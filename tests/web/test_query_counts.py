"""No N+1 queries (issue 10 item 12): every list and detail endpoint and page runs the same
number of SQL queries with N rows as with 3N rows (comparisons in a list, runs on each side,
files of a bundle, comments, patches of a series, tokens, ...).

Each case builds its rows directly with the ORM (fast), counts the queries of one request with
N rows, adds 2N more, and counts again. The counts are printed (``-s``) so a regression says
how many queries it added.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from reviewapp import constants as c
from reviewapp.models import (
    AnalysisJob,
    ApiToken,
    BundleResult,
    Comparison,
    ComparisonResult,
    Patch,
    Series,
    TraceBundle,
    TraceFile,
)

pytestmark = pytest.mark.django_db

N = 2
_seq = itertools.count(1)
_RESULTS: dict[str, Any] = {}


def results_json() -> dict[str, Any]:
    """Real analyzer output of a tiny trace (computed once), as BundleResult.data."""
    if not _RESULTS:
        from workers.analyzers import analyze
        from workers.events import ACT_COMPLETE, ACT_ISSUE, ACT_QUEUE, RWBS_READ, EventTable

        n = 30
        table = EventTable({
            "time_ns": [1000 * i for i in range(3 * n)], "seq": list(range(1, 3 * n + 1)),
            "dev": [8 << 20] * (3 * n), "cpu": [0] * (3 * n), "pid": [7] * (3 * n),
            "action": [a for _ in range(n) for a in (ACT_QUEUE, ACT_ISSUE, ACT_COMPLETE)],
            "rwbs": [RWBS_READ] * (3 * n),
            "sector": [8 * i for i in range(n) for _ in range(3)], "nr_sectors": [8] * (3 * n)})
        import json

        _RESULTS.update(json.loads(json.dumps(analyze(table))))
    return dict(_RESULTS)


def bundle(user: Any, *, files: int = 1, jobs: int = 1) -> TraceBundle:
    k = next(_seq)
    b = TraceBundle.objects.create(role=c.ROLE_BASELINE, kernel="6.18", checksum=f"{k:064x}",
                                   size=100, uploaded_by=user, parse_status=c.PARSE_PARSED)
    for i in range(files):
        TraceFile.objects.create(bundle=b, name=f"f{i}.txt", format="blkparse", size=50,
                                 checksum=f"{k:060x}{i:04x}", storage_name=f"x/{k}-{i}")
    job = None
    for _ in range(jobs):
        job = AnalysisJob.objects.create(bundle=b, state=c.JOB_STATE_SUCCEEDED, progress=100)
    BundleResult.objects.create(bundle=b, job=job, data=results_json(), ingest={"warnings": []})
    return b


def comparison(user: Any, *, runs: int = 1, patch: Patch | None = None) -> Comparison:
    patch = patch or Patch.objects.create(title=f"patch {next(_seq)}", submitted_by=user)
    cmp = Comparison.objects.create(patch=patch, public=True, created_by=user,
                                    status=c.COMPARISON_READY)
    cmp.baseline_bundles.set([bundle(user) for _ in range(runs)])
    cmp.patched_bundles.set([bundle(user) for _ in range(runs)])
    ComparisonResult.objects.create(
        comparison=cmp, state=c.JOB_STATE_SUCCEEDED, progress=100, report="report\n",
        verdict={"state": "success", "reasons": []}, compare={}, model={})
    from reviewapp.services.results import charts_replace

    charts_replace(comparison_id=cmp.pk,
                   charts={("index", "", ""): '{"devices": [], "sections": []}'})
    return cmp


def more_runs(user: Any, cmp: Comparison, k: int) -> None:
    cmp.baseline_bundles.add(*[bundle(user) for _ in range(k)])
    cmp.patched_bundles.add(*[bundle(user) for _ in range(k)])


def comments(user: Any, cmp: Comparison, k: int) -> None:
    from reviewapp.services.threads import comment_create

    for i in range(k):
        comment_create(user=user, body=f"comment {i}", comparison=cmp)


def count(client: Any, url: str) -> int:
    """Queries of a request in steady state: a first request pays one-off writes (status
    refresh, the token's last_used, the session) and is not counted."""
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        r = client.get(url)
    assert r.status_code == 200, (url, r.status_code, r.content[:300])
    return len(ctx.captured_queries)


def token_client(user: Any) -> APIClient:
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name=f"t{next(_seq)}")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


# (name, setup(user) -> (url, grow(k))): grow adds k more of the rows the page lists.
Case = tuple[str, Callable[[Any], tuple[str, Callable[[int], None]]]]


def _comparison_list(url: str) -> Callable[[Any], tuple[str, Callable[[int], None]]]:
    def setup(user: Any) -> tuple[str, Callable[[int], None]]:
        for _ in range(N):
            comparison(user)
        return url, lambda k: [comparison(user, runs=2) for _ in range(k)] and None
    return setup


def _comparison_detail(path: str) -> Callable[[Any], tuple[str, Callable[[int], None]]]:
    def setup(user: Any) -> tuple[str, Callable[[int], None]]:
        cmp = comparison(user, runs=N)
        comments(user, cmp, N)

        def grow(k: int) -> None:
            more_runs(user, cmp, k)
            comments(user, cmp, k)
        return path.format(pk=cmp.pk), grow
    return setup


def _bundle_detail(path: str) -> Callable[[Any], tuple[str, Callable[[int], None]]]:
    def setup(user: Any) -> tuple[str, Callable[[int], None]]:
        b = bundle(user, files=N, jobs=N)
        comparison(user).baseline_bundles.add(b)

        def grow(k: int) -> None:
            for _ in range(k):
                TraceFile.objects.create(bundle=b, name=f"g{next(_seq)}.txt", format="blkparse",
                                         size=5, checksum=f"{next(_seq):064x}", storage_name="y")
                AnalysisJob.objects.create(bundle=b, state=c.JOB_STATE_SUCCEEDED)
        return path.format(pk=b.pk), grow
    return setup


def _job_detail(user: Any) -> tuple[str, Callable[[int], None]]:
    b = bundle(user)
    job = b.jobs.first()
    assert job is not None
    comparison(user).baseline_bundles.add(b)
    return f"/api/v1/jobs/{job.pk}/", lambda k: [comparison(user) for _ in range(k)] and None


def _series(user: Any, patches: int) -> Series:
    s = Series.objects.create(title=f"series {next(_seq)}", total=patches, submitted_by=user)
    for i in range(patches):
        p = Patch.objects.create(title=f"p{i}", series=s, position=i + 1, submitted_by=user)
        comparison(user, patch=p)
    return s


def _series_list(user: Any) -> tuple[str, Callable[[int], None]]:
    for _ in range(N):
        _series(user, 2)
    return "/series/", lambda k: [_series(user, 2) for _ in range(k)] and None


def _series_detail(user: Any) -> tuple[str, Callable[[int], None]]:
    s = _series(user, N)

    def grow(k: int) -> None:
        for i in range(k):
            p = Patch.objects.create(title=f"q{i}", series=s, position=100 + next(_seq),
                                     submitted_by=user)
            comparison(user, patch=p)
    return f"/series/{s.pk}/", grow


def _patch_detail(user: Any) -> tuple[str, Callable[[int], None]]:
    p = Patch.objects.create(title="patch", submitted_by=user)
    for _ in range(N):
        comparison(user, patch=p)
    return f"/patches/{p.pk}/", lambda k: [comparison(user, patch=p, runs=2)
                                           for _ in range(k)] and None


def _tokens(user: Any) -> tuple[str, Callable[[int], None]]:
    from reviewapp.services.tokens import token_create

    for i in range(N):
        token_create(user=user, name=f"n{i}")
    return "/tokens/", lambda k: [token_create(user=user, name=f"m{i}") for i in range(k)] \
        and None


def _thread_detail(user: Any) -> tuple[str, Callable[[int], None]]:
    cmp = comparison(user)
    comments(user, cmp, N)
    from reviewapp.models import Thread

    thread = Thread.objects.filter(comparison=cmp).order_by("pk").first()
    assert thread is not None
    return f"/threads/{thread.pk}/", lambda k: comments(user, cmp, k)


API_CASES: list[Case] = [
    ("api comparison list", _comparison_list("/api/v1/comparisons/")),
    ("api comparison detail", _comparison_detail("/api/v1/comparisons/{pk}/")),
    ("api comparison results", _comparison_detail("/api/v1/comparisons/{pk}/results/")),
    ("api comparison check", _comparison_detail("/api/v1/comparisons/{pk}/check/")),
    ("api comparison analysis", _comparison_detail("/api/v1/comparisons/{pk}/analysis/")),
    ("api bundle detail", _bundle_detail("/api/v1/bundles/{pk}/")),
    ("api bundle results", _bundle_detail("/api/v1/bundles/{pk}/results/")),
    ("api job detail", _job_detail),
]
PAGE_CASES: list[Case] = [
    ("home", _comparison_list("/")),
    ("comparison page", _comparison_detail("/comparisons/{pk}/")),
    ("comparison progress", _comparison_detail("/comparisons/{pk}/progress.json")),
    ("comparison report", _comparison_detail("/comparisons/{pk}/report.txt")),
    ("comparison index section", _comparison_detail("/comparisons/{pk}/sections/index.json")),
    ("series list", _series_list),
    ("series page", _series_detail),
    ("patch page", _patch_detail),
    ("thread page", _thread_detail),
    ("tokens page", _tokens),
]


@pytest.mark.parametrize("name,setup", API_CASES, ids=[n for n, _ in API_CASES])
def test_api_query_count_does_not_grow(name, setup, user):
    """N and 3N rows: the same number of queries (API, token auth)."""
    url, grow = setup(user)
    api = token_client(user)
    before = count(api, url)
    grow(2 * N)
    after = count(api, url)
    print(f"{name}: {before} queries with N rows, {after} with 3N")
    assert after == before, f"{name}: {before} queries with N rows, {after} with 3N ({url})"


@pytest.mark.parametrize("name,setup", PAGE_CASES, ids=[n for n, _ in PAGE_CASES])
def test_page_query_count_does_not_grow(name, setup, user):
    """N and 3N rows: the same number of queries (logged-in pages)."""
    url, grow = setup(user)
    web = Client()
    web.force_login(user)
    before = count(web, url)
    grow(2 * N)
    after = count(web, url)
    print(f"{name}: {before} queries with N rows, {after} with 3N")
    assert after == before, f"{name}: {before} queries with N rows, {after} with 3N ({url})"


def test_anonymous_comparison_list_is_a_handful_of_queries(user):
    """The issue's case: GET /api/v1/comparisons/ anonymously with 100 comparisons (about 600
    queries before) stays a small constant."""
    for _ in range(20):
        comparison(user, runs=2)
    n = count(APIClient(), "/api/v1/comparisons/")
    assert n <= 12, n
    assert ApiToken.objects.count() == 0
