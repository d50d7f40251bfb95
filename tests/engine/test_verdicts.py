"""Mechanism vs timing verdicts, rules, roll-ups, member order and the summary in words
(issue 9), on the demos' real traces and on synthetic timing runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_timing import timing_runs  # noqa: E402

from workers.analyzers import analyze  # noqa: E402
from workers.compare import Thresholds, member_order, timing_reasons  # noqa: E402
from workers.compare import compare as _compare  # noqa: E402
from workers.report import render_report  # noqa: E402
from workers.summary import with_summary  # noqa: E402
from workers.traces import ingest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "reviewapp" / "demo"
MODEL = ROOT / "tests" / "data" / "model"


def _analyze(paths: list[Path]) -> dict:
    ing = ingest(paths)
    return analyze(ing.table, summaries=ing.summaries)


def _row(cmp: dict, key: str) -> dict:
    return next(m for m in cmp["metrics"] if m["key"] == key)


@pytest.fixture(scope="module")
def seed000() -> dict:
    return compare([_analyze([DEMO / "seed000_before.blkparse.txt"])],
                   [_analyze([DEMO / "seed000_after.blkparse.txt"])])


def test_seed000_demo_reads_improved_mechanism_and_timing_not_judged(seed000) -> None:
    """The patch that removes the backward seeks: mechanism improved, timing of seven G-stage
    lines not judged, check success (was "warn" on a 1 ms MB/s drop)."""
    assert seed000["words"]["headline"] == (
        "improved: backward dispatches 50% -> 0%, mean seek distance 181 -> 64 KB (mechanism); "
        "timing: not judged (G stage only)")
    assert seed000["check"]["state"] == "success" and seed000["check"]["reasons"] == []
    mb = _row(seed000, "8,0 MB/s")
    assert mb["kind"] == "timing" and mb["verdict"] == "not judged"
    assert mb["reason"] == "G stage only"
    back = _row(seed000, "8,0 backward dispatches")
    assert back["kind"] == "mechanism" and back["verdict"] == "improved"
    assert back["change"] == "50% -> 0%" and back["p_value"] is None
    # the regression of the zero-seek share is said, on the "also" line (no rule watches it)
    assert "regressed: zero-seek share 16.7% -> 0%" in seed000["words"]["also"]
    text = render_report(seed000)
    lines = text.splitlines()
    at = lines.index("Summary:")  # right after the header
    assert at <= 4 and " ".join(" ".join(lines[at + 1:at + 4]).split()).startswith(
        seed000["words"]["headline"])


def test_mean_backward_distance_is_null_without_backward_dispatch(seed000) -> None:
    """No backward dispatch: the mean backward distance is null, said in words."""
    after = _analyze([DEMO / "seed000_after.blkparse.txt"])
    assert after["devices"]["8,0"]["ordering"]["backward_distance_mean_bytes"] is None
    row = _row(seed000, "8,0 mean backward distance")
    assert row["patched"]["mean"] is None and row["patched"]["null"] == "no backward dispatch"
    assert row["change"] == "213 KB -> no backward dispatch"


def test_rule_marks_a_mechanism_regression_unwanted(seed000) -> None:
    """Seed 000 reversed: backward dispatches rise, which the default rule fails; with the
    rule at warning level the check warns; off, success. The zero-seek rule is opt-in."""
    before = _analyze([DEMO / "seed000_before.blkparse.txt"])
    after = _analyze([DEMO / "seed000_after.blkparse.txt"])
    rev = compare([after], [before])
    assert rev["check"]["state"] == "fail"
    assert any("backward dispatches must not rise" in r for r in rev["check"]["reasons"])
    # the headline names the regression a rule watches; the mean seek's is on "also"
    assert rev["words"]["headline"] == (
        "improved: zero-seek share 0% -> 16.7%; regressed: backward dispatches 0% -> 50% "
        "(mechanism); timing: not judged (G stage only)")
    assert "regressed: mean seek distance 64 -> 181 KB" in rev["words"]["also"]
    assert compare([after], [before], thresholds={"rule_backward_rise": 1})["check"][
        "state"] == "warning"
    assert compare([after], [before], thresholds={"rule_backward_rise": 0})["check"][
        "state"] == "success"
    zero = compare([before], [after], thresholds={"rule_zero_seek_drop": 1})
    assert zero["check"]["state"] == "warning"
    assert any("zero-seek share must not drop" in r for r in zero["check"]["reasons"])


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> dict:
    sides = []
    for name in ("6.1_W1b", "7.2_W1b"):
        d = tmp_path_factory.mktemp(name)
        for suffix in (".blkparse.txt.xz", ".blkreview.toml"):
            shutil.copy(MODEL / f"{name}{suffix}", d / f"{name}{suffix}")
        sides.append(_analyze(sorted(d.iterdir())))
    return {"61": sides[0], "72": sides[1], "cmp": compare([sides[0]], [sides[1]])}


def test_kernel_61_vs_72_reads_chunk_order_changed_and_timing_needs_runs(kernels) -> None:
    """The real raid5 captures: the one real difference is the order in which the chunks of
    a 2M read reach the members; timing of single VM runs needs more runs, never fails."""
    cmp = kernels["cmp"]
    head = cmp["words"]["headline"]
    assert head.startswith("changed: chunk order across members of 9,0 now ascending "
                           "(out-of-order pieces 25.1% -> 0%")
    assert "(mechanism); timing: needs more runs (2 more per side" in head
    assert cmp["check"]["state"] == "success" and cmp["check"]["reasons"] == []
    fact = next(f for f in cmp["facts"] if f["label"] == "order across members")
    assert fact["verdict"] == "changed (no direction)"
    # the member disks roll up: one row per metric with the spread across members
    mb = _row(cmp, "members of 9,0 MB/s")
    assert mb["verdict"] == "needs more runs" and len(mb["members"]) == 8
    assert mb["baseline"]["mean"] == pytest.approx(
        sum(_row(cmp, f"{m} MB/s")["baseline"]["mean"] for m in mb["members"]))
    lo, hi = mb["spread"]["baseline"]
    assert lo - 1e-9 <= mb["baseline"]["mean"] / 8 <= hi + 1e-9
    member = _row(cmp, "254,0 MB/s")
    assert member["member_of"] == "members of 9,0"
    assert member["verdict"] == "not judged" and member["reason"].startswith(
        "too few events: 50 requests in")
    assert _row(cmp, "9,0 MB/s")["reason"] == "Q stage only"


def test_cross_device_order_view_of_the_first_parent_bios(kernels) -> None:
    """6.1 issues a 2M raid5 read's chunks as 0, 1M, 1.5M, 512K; 7.2 ascends."""
    old = member_order(kernels["61"], "9,0")
    new = member_order(kernels["72"], "9,0")
    assert [p["offset_kb"] for p in old["parents"][0]["pieces"]] == [0, 1024, 1536, 512]
    assert not old["parents"][0]["ascending"]
    assert all(p["ascending"] for p in new["parents"])
    assert old["parents"][0]["nr_sectors"] == 4096 and len(old["parents"]) == 8
    assert old["out_of_order_share"] == pytest.approx(0.251, abs=1e-3)
    assert new["out_of_order_share"] == 0.0


def test_order_rule_fails_when_marked_unwanted(kernels) -> None:
    cmp = compare([kernels["61"]], [kernels["72"]],
                  thresholds={"rule_member_order_change": 2})
    assert cmp["check"]["state"] == "fail"
    assert "order across members must not change" in cmp["check"]["reasons"][0]


@pytest.fixture(scope="module")
def timing(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("timing")
    base = [_analyze([p]) for p in timing_runs(tmp, "b", range(5))]
    slow = [_analyze([p]) for p in timing_runs(tmp, "s", range(10, 15), slowdown=1 / 0.85)]
    same = [_analyze([p]) for p in timing_runs(tmp, "n", range(20, 25))]
    return {"base": base, "slow": slow, "same": same}


def test_five_runs_with_a_15pct_throughput_drop_fail_with_statistics(timing) -> None:
    cmp = compare(timing["base"], timing["slow"])
    mb = _row(cmp, "8,0 MB/s")
    assert mb["verdict"] == "regressed" and mb["pct"] == pytest.approx(-15, abs=4)
    assert mb["p_value"] < 0.01 and mb["lkp"]["changed"]
    lo, hi = mb["ci_pct"]
    assert lo < mb["pct"] < hi < 0
    assert cmp["check"]["state"] == "fail"
    reason = next(r for r in cmp["check"]["reasons"] if r.startswith("8,0 MB/s"))
    assert "Welch p=" in reason and "95% CI" in reason and "lkp: ranges separated" in reason
    assert "5 vs 5 runs" in reason and "drops more than 10%" in reason
    assert "timing: regressed: 8,0 MB/s" in cmp["words"]["headline"] or \
        "timing: regressed: MB/s" in cmp["words"]["headline"]


def test_five_runs_without_a_change_succeed(timing) -> None:
    cmp = compare(timing["base"], timing["same"])
    assert _row(cmp, "8,0 MB/s")["verdict"] == "no significant change"
    assert cmp["check"]["state"] == "success", cmp["check"]["reasons"]
    assert "timing: no significant change" in cmp["words"]["headline"]


def test_one_run_per_side_needs_more_runs(timing) -> None:
    cmp = compare(timing["base"][:1], timing["slow"][:1])
    mb = _row(cmp, "8,0 MB/s")
    assert mb["verdict"] == "needs more runs" and mb["needs"]["more_patched"] == 2
    assert cmp["check"]["state"] == "success"
    assert "timing: needs more runs (2 more per side, 3 in all" in cmp["words"]["headline"]
    two = compare(timing["base"][:2], timing["slow"][:2])
    needs = _row(two, "8,0 MB/s")["needs"]
    assert needs["power_estimate"] is not None and needs["per_side"] >= 3


def test_timing_reasons_minimum_events_and_window() -> None:
    """Too few requests in too short a trace, a window too short for a rate, G/Q stages,
    and a configurable minimum."""
    th = Thresholds()
    dev = {"stage": "D", "events": 50}
    assert timing_reasons({"span_ns": 250_000_000}, [dev], th)[0].startswith(
        "too few events: 50 requests in 250 ms (minimum 100 requests or 1 s)")
    assert timing_reasons({"span_ns": 2_000_000_000}, [dev], th) == (None, None)
    assert timing_reasons({"span_ns": 250_000_000}, [dev, dev], th) == (None, None)
    assert timing_reasons({"span_ns": 1_000_000}, [{"stage": "D", "events": 500}], th)[0] == \
        "trace window 1 ms too short for a rate"
    assert timing_reasons({"span_ns": 5}, [{"stage": "G", "events": 5}], th) == (
        "G stage only", "G stage only")
    loose = th.with_overrides({"min_requests": 10})
    assert timing_reasons({"span_ns": 250_000_000}, [dev], loose) == (None, None)


def compare(*args, **kwargs):  # type: ignore[no-redef]
    """compare() with the summary in words, as the CLI and the worker produce it."""
    return with_summary(_compare(*args, **kwargs))


def test_prediction_beside_observed_flags_a_mismatch(seed000) -> None:
    """The model predicted the backward dispatches to vanish (as observed) but the mean seek to
    stay: the first is as predicted, the second a mismatch the summary names."""
    from workers.summary import prediction_check, with_summary

    def dev(back: float, seek: float) -> dict:
        return {"devices": {"8,0": {"ordering": {"backward_share": back, "backward": 1},
                                    "seek": {"mean_bytes": seek, "cnt": 6, "zero_cnt": 1}}}}

    model = {"state": "ok", "predicted_old": dev(0.5, 185685.0),
             "predicted_new": dev(0.0, 185685.0)}
    preds = {p["label"]: p for p in prediction_check(seed000, model)}
    assert preds["backward dispatches"]["predicted"] == "50% -> 0%"
    assert not preds["backward dispatches"]["mismatch"]
    seek = preds["mean seek distance"]
    assert seek["mismatch"] and seek["observed"] == "181 -> 64 KB"
    assert seek["predicted"] == "181 -> 181 KB"
    out = with_summary(dict(seed000), model)
    assert "model mismatch: 8,0 mean seek distance: predicted 181 -> 181 KB, observed " \
           "181 -> 64 KB" in out["words"]["lines"]
    assert prediction_check(seed000, {"state": "error"}) == []


def test_lineage_pieces_per_bio_is_mechanism_and_per_bio_latency_is_timing(kernels) -> None:
    """The lineage's pieces per bio of md0 (each 2M read becomes 4 member pieces on 6.1 and 2
    on 7.2) is compared exactly as a mechanism fact; its per-bio latency (md0's Q to the last
    piece's C) is a timing metric: one run per side needs more runs, never a warning."""
    cmp = kernels["cmp"]
    pieces = _row(cmp, "9,0 lineage pieces per bio")
    assert pieces["kind"] == "mechanism" and pieces["better"] == "lower"
    assert pieces["baseline"]["values"] == [4.0] and pieces["patched"]["values"] == [2.0]
    assert pieces["verdict"] == "improved" and pieces["change"] == "4 -> 2"
    for q in ("p50", "p99"):
        lat = _row(cmp, f"9,0 per-bio latency {q}")
        assert lat["kind"] == "timing" and lat["family"] == "latency"
        assert lat["baseline"]["values"][0] > 0 and lat["patched"]["values"][0] > 0
        # judged on the members' stages (md0 itself shows Q only): needs runs, not "Q only"
        assert lat["verdict"] == "needs more runs" and lat["needs_more_runs"], lat
        assert lat["reason"] != "Q stage only"
    assert cmp["check"]["state"] == "success"
