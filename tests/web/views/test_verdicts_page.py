"""The comparison page says what changed (issue 9): the summary in words with links, the check's
rules (editable by the creator), roll-up rows with the member one click below, the order across
members, and one chart per run for the run selector."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from reviewapp.models import ComparisonResult
from reviewapp.selectors import chart_payload
from tests.conftest import finish_comparison

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "engine"))
from synthetic_timing import timing_run_text  # noqa: E402

pytestmark = pytest.mark.django_db


def _payload(comparison, section: str, dev: str) -> dict:
    return json.loads(chart_payload(comparison=comparison, section=section, dev=dev))


def test_seed000_submission_reads_improved_and_succeeds(user, make_upload, seed000_before,
                                                         seed000_after, client):
    """Seed 000's demo through the worker's own steps: the page's summary and the check."""
    from reviewapp.services.comparisons import submission_create

    comparison, _ = submission_create(
        title="block: place split bios at the head", baseline_files=[
            make_upload("before.txt", seed000_before)],
        patched_files=[make_upload("after.txt", seed000_after)], policy="split_remainder=head",
        user=user)
    comparison = finish_comparison(comparison)
    verdict = ComparisonResult.objects.get(comparison=comparison).verdict
    assert verdict["state"] == "success"
    assert verdict["summary"] == (
        "improved: backward dispatches 50% -> 0%, mean seek distance 181 -> 64 KB (mechanism); "
        "timing: not judged (G stage only)")
    html = client.get(comparison.get_absolute_url()).content.decode()
    assert 'id="summary-headline"' in html
    assert "improved: backward dispatches 50% -&gt; 0%, mean seek distance 181 -&gt; 64 KB" in html
    # each fact links to its chart: the backward-distance histogram of the ordering section
    assert ('href="#section-ordering" data-dev="8,0" data-section="ordering" '
            'data-chart="backward">backward dispatches 50% -&gt; 0%</a>') in html
    assert 'id="check-state">success<' in html


def test_kernel_comparison_page_rollup_member_detail_and_order(finished_comparison, client):
    """6.1 vs 7.2: a member's verdict section shows the array's roll-up, the member one click
    below (collapsed), and the order of md0's pieces across members, both sides."""
    html = client.get(finished_comparison.get_absolute_url()).content.decode()
    assert "changed: chunk order across members of 9,0 now ascending" in html
    assert "timing: needs more runs (2 more per side" in html
    data = _payload(finished_comparison, "verdicts", "254,0")
    ids = [t["id"] for t in data["tables"]]
    assert ids[:2] == ["rollup", "member"] and "member-order" in ids
    rollup, member = data["tables"][0], data["tables"][1]
    assert rollup["title"].startswith("members of 9,0") and not rollup.get("collapsed")
    assert member["collapsed"] is True
    mb = next(r for r in rollup["rows"] if r[0] == "MB/s")
    assert mb[6] == "needs more runs" and "lkp's rule needs 3" in mb[7]
    assert mb[5] and "→" in mb[5]  # the spread across the members, both sides
    order = next(t for t in data["tables"] if t["id"] == "member-order")
    assert order["columns"] == ["bio", "Baseline", "Patched"]
    assert order["rows"][0][1].startswith("0 + 4096: ") and "not ascending" in order["rows"][0][1]
    assert "@0K" in order["rows"][0][2] and "not ascending" not in order["rows"][0][2]


def test_rules_form_by_the_creator_changes_the_check(finished_comparison, client, user,
                                                     password, other_user):
    """The creator marks 'order across members must not change' as fail: the step runs again
    and the check fails; someone else may not change the rules."""
    client.force_login(other_user)
    r = client.post(f"/comparisons/{finished_comparison.pk}/rules/",
                    {"rule_member_order_change": "2"})
    assert r.status_code == 403  # readable (public) but not theirs: reviewapp.access
    finished_comparison.refresh_from_db()
    assert "rule_member_order_change" not in (finished_comparison.thresholds or {})
    client.force_login(user)
    page = client.get(finished_comparison.get_absolute_url()).content.decode()
    assert 'id="rules-form"' in page and 'name="rule_member_order_change"' in page
    form = {"rule_backward_rise": "2", "rule_below_max_rise": "2",
            "rule_pieces_per_bio_rise": "0", "rule_sandwiched_rise": "0",
            "rule_mean_request_drop": "0", "rule_zero_seek_drop": "0",
            "rule_mean_seek_rise": "0", "rule_member_order_change": "2",
            "rule_environment": "1"}
    r = client.post(f"/comparisons/{finished_comparison.pk}/rules/", form)
    assert r.status_code == 302
    finished_comparison.refresh_from_db()
    assert finished_comparison.thresholds["rule_member_order_change"] == 2.0
    finish_comparison(finished_comparison)
    verdict = ComparisonResult.objects.get(comparison=finished_comparison).verdict
    assert verdict["state"] == "fail"
    assert any("order across members must not change" in x for x in verdict["reasons"])
    bad = client.post(f"/comparisons/{finished_comparison.pk}/rules/",
                      {**form, "rule_backward_rise": "7"})
    assert bad.status_code == 302
    finished_comparison.refresh_from_db()
    assert finished_comparison.thresholds["rule_backward_rise"] == 2.0


def test_three_runs_per_side_give_one_chart_per_run_and_a_run_selector(db, user, make_upload,
                                                                        client):
    """Several runs per side: LBA and time series for every run (the selector switches), the
    timing judged with statistics (a 15% slower patched side fails)."""
    from reviewapp.models import Patch
    from reviewapp.services.bundles import bundle_create
    from reviewapp.services.comparisons import comparison_create

    def run(seed: int, slowdown: float) -> object:
        text = timing_run_text(seed, slowdown=slowdown, n=600).encode()
        bundle, _ = bundle_create(files=[make_upload(f"run{seed}.txt", text)], user=user)
        return bundle

    comparison = comparison_create(patch=Patch.objects.create(title="t"),
                                   baseline=[run(i, 1.0) for i in range(3)],
                                   patched=[run(10 + i, 1 / 0.85) for i in range(3)], user=user)
    comparison = finish_comparison(comparison)
    verdict = ComparisonResult.objects.get(comparison=comparison).verdict
    assert verdict["state"] == "fail" and "Welch p=" in verdict["reasons"][0]
    ordering = _payload(comparison, "ordering", "8,0")
    lba = [c for c in ordering["charts"] if c["id"] == "lba"]
    assert [c["run"] for c in lba] == [0, 1, 2]
    assert lba[0]["panels"][0]["figure"] != lba[1]["panels"][0]["figure"]
    throughput = _payload(comparison, "throughput", "8,0")
    assert sorted(c["run"] for c in throughput["charts"] if c["id"] == "mbps") == [0, 1, 2]
    # occupancy (D..C in flight, G..D in the scheduler): one chart per run, the same selector
    occ = [c for c in throughput["charts"] if c["id"] == "occupancy"]
    assert [c["run"] for c in occ] == [0, 1, 2]
    assert occ[0]["panels"][1]["figure"] != occ[2]["panels"][1]["figure"]
    table = next(t for t in throughput["tables"] if t["id"] == "occupancy")
    assert [r[0] for r in table["rows"]][-2:] == ["mean in flight, run 3", "max in flight, run 3"]
    html = client.get(comparison.get_absolute_url()).content.decode()
    assert '<select id="run-select"' in html and '<option value="2">run 3</option>' in html


def test_environment_diff_at_the_top_of_the_page(finished_comparison, client):
    """6.1 vs 7.2 with their manifests: the kernels and the limits their presets change differ,
    which the page shows as expected; no warning, the check unaffected."""
    verdict = ComparisonResult.objects.get(comparison=finished_comparison).verdict
    env = verdict["environment"]
    assert env["warn"] is False
    items = {d["item"]: d for d in env["diffs"]}
    assert items["kernel"]["expected"] and items["max_sectors_kb of 254,0"]["expected"]
    html = client.get(finished_comparison.get_absolute_url()).content.decode()
    assert 'id="environment-diff"' in html and 'id="environment-ok"' in html
    assert "expected: changed by max_sectors_cap_kb" in html


def test_occupancy_charts_observed_and_predicted(finished_comparison):
    """The throughput section of a member shows requests in flight (D..C) and in the scheduler
    (G..D) for both sides; the model section adds the replay's prediction for both policies."""
    data = _payload(finished_comparison, "throughput", "254,0")
    chart = next(c for c in data["charts"] if c["id"] == "occupancy")
    assert [p["side"] for p in chart["panels"]] == ["baseline", "patched"]
    names = [t["name"] for t in chart["panels"][0]["figure"]["data"]]
    assert names == ["D..C in flight", "G..D in scheduler"]
    table = next(t for t in data["tables"] if t["id"] == "occupancy")
    assert table["rows"][1][0] == "max in flight" and table["rows"][1][1] >= 1
    model = _payload(finished_comparison, "model", "254,0")
    pred = next(c for c in model["charts"] if c["id"] == "model-occupancy")
    assert {p["side"] for p in pred["panels"]} >= {"baseline", "predicted_new"}


def test_request_stories_and_bios_in_the_ordering_section(finished_comparison):
    """A member's requests with their whole story (A, Q, G, D, C and the md0 bio they came
    from), both sides; md0's bios with pieces per bio and per-bio latency."""
    member = _payload(finished_comparison, "ordering", "254,0")
    stories = next(t for t in member["tables"] if t["id"] == "stories")
    first = stories["rows"][0]
    assert first[0] == "Baseline" and first[1] == "4096 + 1024 R"
    assert first[2].startswith("A +0 us, Q +7 us, G +76 us, D +243 us, C +1166 us; from ")
    assert any(r[0] == "Patched" for r in stories["rows"])
    # the same stories as timelines for the page's point picker (per side, per run)
    tl = member["stories"]["baseline"][0][0]
    assert tl["request"] == "4096 + 1024 R" and tl["sector"] == 4096
    pts = tl["points"]
    assert [p["us"] for p in pts] == sorted(p["us"] for p in pts) and pts[0]["us"] == 0
    assert {p["a"] for p in pts} >= {"A", "Q", "G", "D", "C"}
    parent = next(p for p in pts if p["what"].startswith("parent bio"))
    assert parent["dev"] in ("md0", "9,0") and parent["a"] == "Q"  # the top device
    assert member["stories"]["patched"][0]
    # the D-stage seek histogram carries them too, each with its histogram bucket
    seek = _payload(finished_comparison, "seek", "254,0")
    assert seek["stories"] == member["stories"]
    runs = seek["stories"]["baseline"][0]
    assert "seek_bucket" not in runs[0] and all("seek_bucket" in t for t in runs[1:])
    hist = next(c for c in seek["charts"] if c["id"] == "seek")
    counts = next(p for p in hist["panels"] if p["side"] == "baseline")["figure"]["data"][0]["y"]
    assert all(counts[t["seek_bucket"]] > 0 for t in runs[1:])
    md0 = _payload(finished_comparison, "ordering", "9,0")
    bios = next(t for t in md0["tables"] if t["id"] == "bios")
    assert [r[:3] for r in bios["rows"]] == [["Baseline", 100, "4.00"], ["Patched", 200, "2.00"]]


def test_model_prediction_beside_the_observed_change(finished_comparison, client):
    """The model panel's predicted change (new policy vs old, on the baseline's bios) is set
    beside the observed one; a direction that differs is flagged as a mismatch."""
    words = ComparisonResult.objects.get(comparison=finished_comparison).verdict["words"]
    preds = words["predictions"]
    assert preds, words
    for p in preds:
        assert p["predicted"] and p["observed"] and isinstance(p["mismatch"], bool)
    html = client.get(finished_comparison.get_absolute_url()).content.decode()
    assert 'id="summary-predictions"' in html
    if any(p["mismatch"] for p in preds):
        assert "<strong>mismatch</strong>" in html
    else:
        assert "as predicted" in html


def test_model_panel_replays_every_baseline_run(user, make_upload):
    """Two baseline runs (the 6.1 raid5 capture and the 6.1 vda capture): the model replays
    both; the panel lists each run's prediction and fidelity."""
    from reviewapp.models import Patch
    from reviewapp.services.bundles import bundle_create
    from reviewapp.services.comparisons import comparison_create
    from tests.conftest import model_capture

    runs = [bundle_create(files=model_capture(n), user=user)[0] for n in ("6.1_W1b", "6.1_W2a")]
    patched = bundle_create(files=model_capture("7.2_W1b"), user=user)[0]
    comparison = comparison_create(patch=Patch.objects.create(title="t"), baseline=runs,
                                   patched=[patched], policy="split_remainder=head", user=user)
    comparison = finish_comparison(comparison)
    model = ComparisonResult.objects.get(comparison=comparison).model
    assert model["state"] == "ok"
    assert [r["run"] for r in model["runs"]] == [0, 1]
    assert all("fidelity" in r and r["predicted"] for r in model["runs"]), model["runs"]
    payload = _payload(comparison, "model", "254,0")
    table = next(t for t in payload["tables"] if t["id"] == "model-runs")
    assert [r[0] for r in table["rows"]] == ["baseline run 1", "baseline run 2"]
