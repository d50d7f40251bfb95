"""End to end: REST upload -> real Celery worker process (Redis, PostgreSQL) -> results + page.

The worker is ``celery -A workers.celery worker`` started by the ``celery_worker`` fixture
(tests/conftest.py) against the test database. Data must be committed for it to see them, so
these tests use transactional database access and pytest-django's live server.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from tests.conftest import past_head

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Excerpt of seed 000_bd92b2ca435366b4.txt (copied from the shared folder's seeds/).
SEED000 = Path(__file__).resolve().parents[1] / "data" / "seeds" / "seed000_g_stage.txt"


def seed000_g_lines(which: str) -> list[str]:
    """The G-stage lines quoted in seed 000 under "Before this patch" / "After this patch"."""
    section = None
    lines = []
    for raw in SEED000.read_text().splitlines():
        if "Before this patch" in raw:
            section = "before"
        elif "After this patch" in raw:
            section = "after"
        m = re.match(r"^> (8,0 .* G R \d+ \+ \d+ \[dd\])$", raw)
        if m and section == which:
            lines.append(m.group(1))
    return lines


def hand_seek_histogram(lines: list[str]) -> tuple[int, int, dict[tuple[int, int], int]]:
    """|next - (prev + len)| per consecutive pair, in KB buckets [0,1) [1,2) [2,4) ..."""
    reqs = []
    for line in lines:
        m = re.search(r" G R (\d+) \+ (\d+) ", line)
        assert m
        reqs.append((int(m.group(1)), int(m.group(2))))
    buckets: dict[tuple[int, int], int] = {}
    zero = 0
    for (s0, n0), (s1, _) in zip(reqs, reqs[1:]):
        dist_bytes = abs(s1 - (s0 + n0)) * 512
        if dist_bytes == 0:
            zero += 1
        kb = dist_bytes // 1024
        lo, hi = 0, 1
        while kb >= hi:
            lo, hi = hi, hi * 2
        buckets[(lo, hi)] = buckets.get((lo, hi), 0) + 1
    return len(reqs) - 1, zero, buckets


def poll_job(session: requests.Session, url: str, waiter) -> dict:
    def done():
        job = session.get(url, timeout=10).json()
        return job if job["state"] in ("succeeded", "failed") else None
    return waiter(done, timeout=120, what=f"job {url}")


@pytest.fixture
def token_session(live_server, user) -> requests.Session:
    from reviewapp.services.tokens import token_create

    _, key = token_create(user=user, name="e2e")
    s = requests.Session()
    s.headers["Authorization"] = f"Token {key}"
    return s


def test_seed000_upload_worker_results_and_page(celery_worker, live_server, token_session,
                                                waiter, tmp_path):
    """Seed 000 G lines uploaded over REST are analyzed by the worker; numbers match by hand."""
    before, after = seed000_g_lines("before"), seed000_g_lines("after")
    assert (len(before), len(after)) == (7, 8)
    (tmp_path / "before.txt").write_text("\n".join(before) + "\n")
    (tmp_path / "after.txt").write_text("\n".join(after) + "\n")
    with open(tmp_path / "before.txt", "rb") as b, open(tmp_path / "after.txt", "rb") as a:
        resp = token_session.post(
            f"{live_server.url}/api/v1/submissions/",
            data={"title": "block: place split bios at the head of current->bio_list",
                  "version": "v2", "baseline_kernel": "6.17.13", "patched_kernel": "6.18.15",
                  "policy": "split_remainder=head"},
            files=[("baseline_files", ("before.txt", b)), ("patched_files", ("after.txt", a))],
            timeout=30,
        )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["url"] == f"{live_server.url}/comparisons/{body['id']}/"
    assert len(body["jobs"]) == 2
    for job in body["jobs"]:
        final = poll_job(token_session, job["url"], waiter)
        assert final["state"] == "succeeded", final["error"]
        assert final["progress"] == 100

    results = token_session.get(body["results_url"], timeout=10).json()
    assert results["status"] == "ready"
    for side, lines in (("baseline", before), ("patched", after)):
        seek = results[side][0]["results"]["devices"]["8,0"]["seek"]
        cnt, zero, buckets = hand_seek_histogram(lines)
        assert seek["stage"] == "G"
        assert (seek["cnt"], seek["zero_cnt"]) == (cnt, zero)
        got = {(lo, hi): c for lo, hi, c in zip(seek["edges_kb"], seek["edges_kb"][1:],
                                                seek["counts"]) if c}
        assert got == buckets
        sizes = results[side][0]["results"]["devices"]["8,0"]["sizes"]
        assert sizes["count"] == len(lines)
        assert sizes["mean_bytes"] == 128 * 512
    # The hand computation of the 7 "before" lines, written out: 192, 0, 384, 192, 256, 64 KB.
    assert hand_seek_histogram(before) == (6, 1, {(0, 1): 1, (64, 128): 1, (128, 256): 2,
                                                  (256, 512): 2})

    # The worker then runs the comparison step (compare + check + model panel + charts).
    check = poll_check(token_session, body["check_url"], waiter)
    assert check["state"] in ("success", "warning", "fail"), check
    assert check["step"]["state"] == "succeeded"
    analysis = token_session.get(body["analysis_url"], timeout=10).json()
    assert analysis["compare"]["runs_note"] == "single run"
    assert analysis["check"]["state"] == check["state"]
    # G lines only: nothing to replay, and the model panel says so instead of failing
    assert analysis["model"]["state"] == "error"
    assert "no Q events" in analysis["model"]["error"]

    page = requests.get(body["url"], timeout=10)  # anonymous: a public comparison
    assert page.status_code == 200
    html = page.text
    assert "block: place split bios at the head of current-&gt;bio_list" in html
    for name in ("fragmentation", "seek", "throughput", "latency", "ordering", "model"):
        assert f'data-section="{name}"' in html
    assert f'id="check-state">{check["state"]}<' in html
    seek = requests.get(f"{body['url']}sections/seek.json?dev=8,0", timeout=10).json()
    panels = {p["side"]: p["figure"]["data"][0] for p in seek["charts"][0]["panels"]}
    base = dict(zip(panels["baseline"]["x"], panels["baseline"]["y"]))
    assert base == {"[0, 1)": 1, "[1, 2)": 0, "[2, 4)": 0, "[4, 8)": 0, "[8, 16)": 0,
                    "[16, 32)": 0, "[32, 64)": 0, "[64, 128)": 1, "[128, 256)": 2,
                    "[256, 512)": 2}
    assert seek["stages"] == ["G"]
    report = requests.get(body["report_url"], timeout=10)
    assert report.headers["Content-Type"].startswith("text/plain")
    assert "Before this patch:" in report.text and "Read|Write seek" in report.text
    assert "/static/reviewapp/plotly.min.js" in html
    assert requests.get(f"{live_server.url}/static/reviewapp/plotly.min.js",
                        timeout=10).status_code == 200
    log = celery_worker["log"].read_text()
    assert "reviewapp.tasks.analyze_bundle" in log and "succeeded" in log
    assert "reviewapp.tasks.compare_comparison" in log


def poll_check(session: requests.Session, url: str, waiter) -> dict:
    def done():
        check = session.get(url, timeout=10).json()
        return check if check["state"] != "pending" else None
    return waiter(done, timeout=180, what=f"check {url}")


def test_kernel_captures_compare_check_and_model(celery_worker, live_server, token_session,
                                                 waiter):
    """6.1 vs 7.2 raid5 captures (with manifests) through the worker: the comparison step
    replays the baseline's md0 bios under both policies, and every section has charts."""
    data = Path(__file__).resolve().parents[1] / "data" / "model"
    files = []
    for field, name in (("baseline_files", "6.1_W1b"), ("patched_files", "7.2_W1b")):
        for suffix in (".blkparse.txt.xz", ".blkreview.toml"):
            path = data / f"{name}{suffix}"
            files.append((field, (path.name, path.read_bytes())))
    resp = token_session.post(f"{live_server.url}/api/v1/submissions/",
                              data={"title": "md: split remainder", "policy": "split_remainder=head"},
                              files=files, timeout=30)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    check = poll_check(token_session, body["check_url"], waiter)
    assert check["state"] in ("success", "warning", "fail"), check
    analysis = token_session.get(body["analysis_url"], timeout=10).json()
    model = analysis["model"]
    assert model["state"] == "ok", model
    assert model["kernel_old"].startswith("6.1") and "split_remainder=head" in model["policy_new"]
    assert model["fidelity"]["254,0"]["matched_in_order"] == 1.0
    assert analysis["compare"]["fidelity"]["254,0"]["size_l1"] == 0.0
    for name in ("fragmentation", "seek", "throughput", "latency", "ordering", "model"):
        r = requests.get(f"{body['url']}sections/{name}.json?dev=254,0", timeout=10)
        assert r.status_code == 200 and r.json()["charts"], name


def test_malformed_line_fails_job_with_file_line_reason(celery_worker, live_server,
                                                        token_session, waiter, seed000_before):
    """A malformed line past the upload check fails the job with file, line and reason; no
    results are stored."""
    from reviewapp.models import BundleResult

    bad = past_head(seed000_before) + b"8,0 0 486500 11.36 843 G R 1407x + 128 [dd]\n"
    resp = token_session.post(
        f"{live_server.url}/api/v1/bundles/", data={"role": "baseline"},
        files=[("files", ("broken-before.txt", bad))], timeout=30)
    assert resp.status_code == 201, resp.text
    bundle = resp.json()
    final = poll_job(token_session, bundle["job"]["url"], waiter)
    assert final["state"] == "failed"
    assert final["error"].startswith("broken-before.txt, line 1008:")
    assert final["error_detail"]["file"] == "broken-before.txt"
    assert final["error_detail"]["line"] == 1008
    assert final["error_detail"]["reason"]
    assert not BundleResult.objects.filter(bundle_id=bundle["id"]).exists()
    res = token_session.get(bundle["results_url"], timeout=10).json()
    assert res["state"] == "failed" and res["results"] is None
    assert "line 1008" in res["error"]
