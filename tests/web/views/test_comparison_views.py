"""The comparison page: side by side charts and numbers, progress JSON, comments, access."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from reviewapp.models import AnalysisJob, Comment
from reviewapp.services.comparisons import submission_create
from reviewapp.tasks import run_analysis
from tests.conftest import past_head

pytestmark = pytest.mark.django_db


@pytest.fixture
def comparison(user, make_upload, seed000_before, seed000_after):
    cmp_, _ = submission_create(title="block: place split bios at the head of current->bio_list",
                                baseline_files=[make_upload("before.txt", seed000_before)],
                                patched_files=[make_upload("after.txt", seed000_after)],
                                user=user)
    return cmp_


def _figures(html: str) -> dict:
    m = re.search(r'<script id="figures-data" type="application/json">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


def test_page_before_results_shows_progress(client, comparison):
    """While jobs are queued the page shows the status box and polls progress.json."""
    r = client.get(comparison.get_absolute_url())
    html = r.content.decode()
    assert r.status_code == 200
    assert f'data-progress-url="/comparisons/{comparison.pk}/progress.json"' in html
    assert 'data-done="0"' in html
    assert "Results appear here when the analysis has finished." in html
    p = client.get(reverse("comparison-progress", args=[comparison.pk])).json()
    assert (p["status"], p["progress"], p["done"]) == ("pending", 0, False)
    assert {j["side"] for j in p["jobs"]} == {"baseline", "patched"}


def test_page_with_results_side_by_side(client, comparison):
    """With results: both sides' seek and size charts and the key numbers with deltas."""
    for job in AnalysisJob.objects.all():
        assert run_analysis(job.pk) == "succeeded"
    html = client.get(comparison.get_absolute_url()).content.decode()
    figs = _figures(html)
    assert set(figs) == {"8,0|seek-baseline", "8,0|seek-patched", "8,0|sizes-baseline",
                         "8,0|sizes-patched"}
    base = figs["8,0|seek-baseline"]["data"][0]
    patched = figs["8,0|seek-patched"]["data"][0]
    assert base["x"] == patched["x"]  # shared categories
    assert dict(zip(base["x"], base["y"]))["[256, 512)"] == 2
    assert dict(zip(patched["x"], patched["y"]))["[64, 128)"] == 7
    assert figs["8,0|seek-baseline"]["layout"]["yaxis"]["range"] == \
        figs["8,0|seek-patched"]["layout"]["yaxis"]["range"]
    # Zero seeks 1 -> 0: delta -1, -100 %.
    row = re.search(r"<th>Zero seeks</th>\s*<td>(.*?)</td><td>(.*?)</td>\s*<td>(.*?)</td>"
                    r"<td>(.*?)</td>", html)
    assert row and row.groups() == ("1", "0", "-1", "-100.0%")
    p = client.get(reverse("comparison-progress", args=[comparison.pk])).json()
    assert (p["status"], p["progress"], p["done"]) == ("ready", 100, True)


def test_page_shows_failure_reason(client, user, make_upload, seed000_before):
    """A failed job's reason (file, line) is on the page."""
    cmp_, _ = submission_create(
        title="t", baseline_files=[make_upload("bad.txt", past_head(seed000_before) +
                                               b"8,0 0 1 1.0 1 G R zz + 8 [dd]\n")],
        patched_files=[make_upload("good.txt", seed000_before + b"\n")], user=user)
    for job in AnalysisJob.objects.all():
        run_analysis(job.pk)
    html = client.get(cmp_.get_absolute_url()).content.decode()
    assert "bad.txt, line 1008:" in html
    p = client.get(reverse("comparison-progress", args=[cmp_.pk])).json()
    assert p["status"] == "failed" and p["done"]
    assert any(j["error"].startswith("bad.txt, line 1008") for j in p["jobs"])


def test_private_comparison_hidden_from_others(client, other_user, user, make_upload,
                                               seed000_before, seed000_after):
    """A non-public comparison is 404 for anonymous users and other users."""
    cmp_, _ = submission_create(title="t", public=False, user=user,
                                baseline_files=[make_upload("b", seed000_before)],
                                patched_files=[make_upload("p", seed000_after)])
    assert client.get(cmp_.get_absolute_url()).status_code == 404
    client.force_login(other_user)
    assert client.get(cmp_.get_absolute_url()).status_code == 404
    client.force_login(user)
    assert client.get(cmp_.get_absolute_url()).status_code == 200


def test_comment_requires_login(client, comparison):
    """Reading needs no login; posting a comment does."""
    r = client.post(reverse("comparison-comment", args=[comparison.pk]), {"body": "hi"})
    assert r.status_code == 302 and reverse("login") in r["Location"]
    assert not Comment.objects.exists()
    assert "Log in</a> to comment" in client.get(comparison.get_absolute_url()).content.decode()


def test_comment_post_and_read_escaped(logged_in_client, client, comparison, user):
    """A logged-in user posts; everyone reads it, HTML escaped."""
    r = logged_in_client.post(reverse("comparison-comment", args=[comparison.pk]),
                              {"body": "zero-seek 45.5% -> 75.0% <script>x</script>"})
    assert r.status_code == 302
    c = Comment.objects.get()
    assert c.author == user and c.thread.comparison == comparison
    html = client.get(comparison.get_absolute_url()).content.decode()
    assert "zero-seek 45.5% -&gt; 75.0% &lt;script&gt;x&lt;/script&gt;" in html


def test_add_run_from_page(logged_in_client, comparison, make_upload, make_blkparse):
    """A logged-in user adds another run to one side from the page."""
    r = logged_in_client.post(reverse("comparison-add-runs", args=[comparison.pk]), {
        "side": "baseline", "files": make_upload("run2.txt", make_blkparse([0, 128, 512])),
        "kernel": "6.17.13"})
    assert r.status_code == 302
    assert comparison.baseline_bundles.count() == 2


def test_home_lists_public_comparisons(client, comparison):
    """The home page lists comparisons with their status."""
    html = client.get(reverse("home")).content.decode()
    assert comparison.patch.title.replace(">", "&gt;") in html


def test_healthz(client):
    """The health check answers ok when the database is reachable."""
    assert client.get("/healthz").json() == {"status": "ok", "database": "ok", "broker": "ok",
                                             "storage": "ok"}
