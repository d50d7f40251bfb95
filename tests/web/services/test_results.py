"""The comparison step: compare + check + model panel + charts, stored atomically."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.db import transaction

from reviewapp.models import ComparisonChart, ComparisonResult
from reviewapp.services import UploadRejected
from reviewapp.services.results import (
    clean_thresholds,
    comparison_result_ensure,
    comparison_thresholds_set,
    effective_thresholds,
)
from tests.conftest import finish_comparison, model_capture
from workers.compare import Thresholds

pytestmark = pytest.mark.django_db


def payload_of(comparison, section: str, dev: str, stage: str = "") -> str:
    """A section's stored JSON text, read from storage as the section endpoint reads it."""
    from reviewapp.selectors import chart_payload

    text = chart_payload(comparison=comparison, section=section, dev=dev, stage=stage)
    assert text is not None, (section, dev, stage)
    return text


def test_finished_comparison_has_charts_for_every_section(finished_comparison):
    """Every section has a stored payload per device, and seek one per stage."""
    result = ComparisonResult.objects.get(comparison=finished_comparison)
    assert result.state == "succeeded", result.error
    sections = set(ComparisonChart.objects.filter(comparison=finished_comparison)
                   .values_list("section", flat=True))
    assert sections == {"index", "fragmentation", "seek", "throughput", "latency", "ordering",
                        "verdicts", "model"}
    data = json.loads(payload_of(finished_comparison, "seek", "254,0"))
    assert data["stage"] == "D"
    assert "Q" in data["stages"] and "D" in data["stages"]
    panels = data["charts"][0]["panels"]
    assert [p["side"] for p in panels] == ["baseline", "patched"]


def test_compare_check_and_report_are_stored(finished_comparison):
    """compare() output, the check verdict (pass/warn/fail + reasons) and the report text."""
    result = ComparisonResult.objects.get(comparison=finished_comparison)
    assert result.compare["runs"] == {"baseline": 1, "patched": 1}
    assert result.compare["runs_note"] == "single run"
    assert result.verdict["state"] in ("success", "warning", "fail")
    assert result.verdict["state"] == result.compare["check"]["verdict"]
    assert result.verdict["reasons"] == result.compare["check"]["reasons"]
    assert result.verdict["thresholds"]["throughput_drop_fail_pct"] == 10.0
    assert "Before this patch:" in result.report and "After this patch:" in result.report
    assert "Read|Write seek" in result.report


def test_model_panel_replays_baseline_with_old_and_new_policy(finished_comparison):
    """6.1 preset vs 7.2 preset + split_remainder=head, predictions analyzed, fidelity per disk."""
    model = ComparisonResult.objects.get(comparison=finished_comparison).model
    assert model["state"] == "ok", model.get("error")
    assert model["kernel_old"].startswith("6.1") and model["kernel_new"].startswith("7.2")
    assert "split_remainder=tail" in model["policy_old"]
    assert "split_remainder=head" in model["policy_new"]
    assert model["top"] == "9,0" and model["bios"] == 100
    pred = model["predicted_old"]["devices"]["254,0"]
    assert pred["sizes"]["count"] > 0 and "lba" not in pred
    fid = model["fidelity"]["254,0"]
    # the 6.1 capture is reproduced exactly by the model (docs/model.md): every D in order
    assert fid["matched_in_order"] == 1.0
    assert fid["size_l1"] == 0.0
    # fidelity also reaches the comparison (and its check)
    compare = ComparisonResult.objects.get(comparison=finished_comparison).compare
    assert compare["fidelity"]["254,0"]["matched_in_order"] == 1.0


def test_model_failure_does_not_fail_the_comparison(db, user):
    """A policy value the model rejects (stored before the upload check refused such values, or
    set through the admin): the model panel stores a readable error, the rest of the comparison
    step succeeds."""
    from reviewapp.models import Comparison, TraceBundle
    from reviewapp.services import UploadRejected
    from reviewapp.services.comparisons import submission_create

    with pytest.raises(UploadRejected, match="split_remainder='bogus'"):
        submission_create(title="t", baseline_files=model_capture("6.1_W1b"),
                          patched_files=model_capture("7.2_W1b"),
                          policy="split_remainder=bogus", user=user)
    comparison, bundles = submission_create(
        title="t", baseline_files=model_capture("6.1_W1b"), patched_files=model_capture("7.2_W1b"),
        policy="split_remainder=head", user=user)
    Comparison.objects.filter(pk=comparison.pk).update(policy="split_remainder=bogus")
    comparison.refresh_from_db()
    comparison = finish_comparison(comparison)
    result = ComparisonResult.objects.get(comparison=comparison)
    assert result.state == "succeeded", result.error
    assert result.model["state"] == "error"
    assert "split_remainder" in result.model["error"]
    assert result.verdict["state"] in ("success", "warning", "fail")
    assert TraceBundle.objects.filter(parse_status="parsed").count() == 2
    payload = json.loads(payload_of(comparison, "model", "254,0"))
    assert "split_remainder" in payload["error"]


def test_seed000_g_lines_without_policy_or_kernel_have_no_model_run(db, user, make_upload, seed000_before,
                                               seed000_after):
    """Without a policy under test and kernels, the model panel is absent (None), not an error."""
    from reviewapp.services.comparisons import submission_create

    comparison, _ = submission_create(title="t", user=user,
                                      baseline_files=[make_upload("b.txt", seed000_before)],
                                      patched_files=[make_upload("a.txt", seed000_after)])
    comparison = finish_comparison(comparison)
    result = ComparisonResult.objects.get(comparison=comparison)
    assert result.state == "succeeded" and result.model is None
    seek = json.loads(payload_of(comparison, "seek", "8,0"))
    base = dict(zip(seek["charts"][0]["panels"][0]["figure"]["data"][0]["x"],
                    seek["charts"][0]["panels"][0]["figure"]["data"][0]["y"]))
    assert base["[256, 512)"] == 2 and sum(base.values()) == 6  # the hand-computed seed 000 lines
    latency = json.loads(payload_of(comparison, "latency", "8,0"))
    assert latency["tables"] == [] and "No latency pairs" in latency["notes"][0]


def test_settings_thresholds_are_the_engines_fields():
    """settings.BLKREVIEW_CHECK_THRESHOLDS has exactly workers.compare.Thresholds' fields and
    defaults, so every override is accepted by the engine."""
    engine = Thresholds().to_json()
    assert set(settings.BLKREVIEW_CHECK_THRESHOLDS) == set(engine)
    for k, v in engine.items():
        assert float(settings.BLKREVIEW_CHECK_THRESHOLDS[k]) == float(v), k


def test_clean_thresholds_accepts_dict_and_text_rejects_unknown():
    """Overrides as a dict or name=value text; unknown names and non-numbers are rejected."""
    assert clean_thresholds("throughput_drop_fail_pct=5, min_value=0.5") == {
        "throughput_drop_fail_pct": 5.0, "min_value": 0.5}
    assert clean_thresholds({"latency_rise_warn_pct": "20"}) == {"latency_rise_warn_pct": 20.0}
    with pytest.raises(UploadRejected, match="unknown name"):
        clean_thresholds({"nope": 1})
    with pytest.raises(UploadRejected, match="must be a number"):
        clean_thresholds({"min_value": "x"})


def test_thresholds_override_requeues_and_changes_the_verdict(finished_comparison):
    """A per-comparison threshold override queues the step again and is used by the check."""
    first = ComparisonResult.objects.get(comparison=finished_comparison)
    with transaction.atomic():
        comparison_thresholds_set(comparison=finished_comparison,
                                  thresholds={"throughput_drop_warn_pct": 0.0,
                                              "throughput_drop_fail_pct": 0.0,
                                              "rule_member_order_change": 2.0,
                                              "rule_mean_request_drop": 1.0})
    assert effective_thresholds(finished_comparison)["throughput_drop_fail_pct"] == 0.0
    again = ComparisonResult.objects.get(comparison=finished_comparison)
    assert again.state == "queued" and again.celery_task_id != first.celery_task_id
    finish_comparison(finished_comparison)
    again.refresh_from_db()
    assert again.verdict["thresholds"]["throughput_drop_fail_pct"] == 0.0
    # one run per side: timing never fails (needs more runs); the mechanism rules marked
    # unwanted for this comparison do: the chunk order across md0's members changed (fail),
    # md0's mean request 2048 -> 1024 KB (warning)
    assert again.verdict["state"] == "fail"
    assert not any("drops more than" in r for r in again.verdict["reasons"])
    assert any("order across members must not change" in r for r in again.verdict["reasons"])
    assert any("mean request size must not drop" in r for r in again.verdict["reasons"])
    assert again.verdict["timing"].startswith("timing: needs more runs")
    # up to date: ensuring again queues nothing
    assert comparison_result_ensure(comparison=finished_comparison) is None


def test_three_runs_per_side_give_significance_verdicts(db, user, make_upload, make_blkparse):
    """3 baseline runs seeking far vs 3 patched runs nearly sequential: the seek table says
    improved, exactly (a mechanism metric: no Welch, no lkp), and that the runs of a side
    differ; no "needs more runs" with 3 per side."""
    from reviewapp.models import Patch
    from reviewapp.services.bundles import bundle_create
    from reviewapp.services.comparisons import comparison_create

    def run(i: int, far: bool) -> object:
        step = 4096 * (5 + i) if far else 128 + 8 * i  # sectors between request starts
        sectors = [1000 + k * step for k in range(40)]
        bundle, _ = bundle_create(files=[make_upload(f"run{i}{far}.txt", make_blkparse(
            sectors, action="D"))], user=user)
        return bundle

    comparison = comparison_create(patch=Patch.objects.create(title="t"),
                                   baseline=[run(i, True) for i in range(3)],
                                   patched=[run(i, False) for i in range(3)], user=user)
    comparison = finish_comparison(comparison)
    data = json.loads(payload_of(comparison, "seek", "8,0"))
    rows = {r[0]: r for r in data["tables"][0]["rows"]}
    mean = rows["Mean seek distance (KB)"]
    assert mean[5] == "improved (varies between runs)"
    assert mean[6] == "n/a (mechanism: exact)"
    compare = ComparisonResult.objects.get(comparison=comparison).compare
    assert compare["runs"] == {"baseline": 3, "patched": 3} and compare["runs_note"] is None


def test_missing_event_table_degrades_to_a_model_error(db, user):
    """A baseline whose stored EventTable is gone still compares; the model panel says why."""
    from django.core.files.storage import default_storage

    from reviewapp.models import BundleResult
    from reviewapp.services.comparisons import submission_create
    from reviewapp.services.jobs import comparison_refresh_status
    from reviewapp.tasks import run_analysis, run_compare

    comparison, bundles = submission_create(
        title="t", baseline_files=model_capture("6.1_W1b"), patched_files=model_capture("7.2_W1b"),
        policy="split_remainder=head", user=user)
    from reviewapp.models import AnalysisJob

    for job in AnalysisJob.objects.all():
        run_analysis(job.pk)
    base = BundleResult.objects.get(bundle=bundles["baseline"][0])
    default_storage.delete(base.events_name)
    with transaction.atomic():
        comparison_refresh_status(comparison=comparison)
    result = ComparisonResult.objects.get(comparison=comparison)
    assert run_compare(result.pk, task_id=result.celery_task_id) == "succeeded"
    result.refresh_from_db()
    assert result.model["state"] == "error" and "missing from storage" in result.model["error"]
    assert result.verdict["state"] in ("success", "warning", "fail") and result.report


def test_unexpected_error_in_the_comparison_step_reaches_on_failure(finished_comparison):
    """A crash in the comparison step is recorded readably on a running result (the exception
    itself in the log only); a succeeded result is never turned into a failed one."""
    from reviewapp import constants as c
    from reviewapp.tasks import compare_comparison

    result = ComparisonResult.objects.get(comparison=finished_comparison)
    compare_comparison.on_failure(RuntimeError("boom"), "tid", [result.pk], {}, None)
    result.refresh_from_db()
    assert result.state == c.JOB_STATE_SUCCEEDED
    ComparisonResult.objects.filter(pk=result.pk).update(state=c.JOB_STATE_RUNNING)
    compare_comparison.on_failure(RuntimeError("boom"), "tid", [], {"result_id": result.pk}, None)
    result.refresh_from_db()
    assert result.state == c.JOB_STATE_FAILED
    assert result.error == "an internal error stopped this step; the details are in the worker's log"


def test_a_run_over_the_model_bounds_is_replayed_on_its_first_rows_only(db, user, settings):
    """The comparison step reads the stored tables in chunks: with the model's bounds below
    the runs (BLKREVIEW_MODEL_MAX_BIOS 200 of the 500 Q events with data), the seek of every
    stage and the observed comparison are exactly those of the same runs compared within the
    bounds; the model panel replays the first rows, says how many of how many bios, and
    scores both fidelities on those rows (the old policy still reproduces the baseline's
    members it replayed)."""
    from reviewapp.services.comparisons import submission_create

    def compared() -> object:
        comparison, _ = submission_create(
            title="md: split remainder to the head of bio_list", version="v2",
            baseline_files=model_capture("6.1_W1b"), patched_files=model_capture("7.2_W1b"),
            policy="split_remainder=head", user=user)
        return finish_comparison(comparison)

    whole = compared()
    settings.BLKREVIEW_MODEL_MAX_BIOS = 200
    windowed = compared()
    a = ComparisonResult.objects.get(comparison=whole)
    b = ComparisonResult.objects.get(comparison=windowed)
    assert a.state == b.state == "succeeded", (a.error, b.error)
    assert "window" not in a.model and a.model["bios"] == 100
    win = b.model["window"]
    assert 0 < b.model["bios"] == win["bios"] < 100 and win["total_bios"] == 100
    assert win["events"] < win["total_events"] == 3000
    assert f"the model replayed the first {win['bios']} of 100 bios of 9,0" in win["note"]
    assert "patched run's first" in b.model["patched_window"]["note"]
    assert b.model["fidelity"]["254,0"]["matched_in_order"] == 1.0
    assert b.model["fidelity"]["254,0"]["size_l1"] == 0.0
    from reviewapp.selectors import chart_payload

    stages = 0
    for stage in ("Q", "G", "I", "D", "C"):
        got = chart_payload(comparison=windowed, section="seek", dev="254,0", stage=stage)
        assert got == chart_payload(comparison=whole, section="seek", dev="254,0", stage=stage)
        stages += got is not None
    assert stages >= 3
    assert a.compare["metrics"] and a.compare["metrics"] == b.compare["metrics"]
    notes = json.loads(payload_of(windowed, "model", "254,0"))["notes"]
    assert any(n.startswith("The model replayed the first") for n in notes), notes
    assert "the model replayed the first" in b.report
