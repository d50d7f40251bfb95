"""compare(): deltas, Welch verdicts, lkp's rule, single run, fidelity and the check verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "analyzers"))
from analyzer_helpers import requests, sectors_from_gaps, stream  # noqa: E402

from workers.analyzers import analyze  # noqa: E402
from workers.compare import (  # noqa: E402
    Thresholds,
    fidelity,
    l1_normalized,
    lkp_changed,
    matched_in_order,
)
from workers.compare import compare as _compare  # noqa: E402
from workers.summary import with_summary  # noqa: E402


def _result(mbps: float, await_ms: float = 1.0, dev: str = "8,0") -> dict:
    return {"devices": {dev: {"throughput": {"mb_per_s": mbps,
                                             "iostat": {"r_await": await_ms, "r/s": 10.0}}}},
            "iostat": {"groups": []}}


def _by_key(cmp: dict, key: str) -> dict:
    return next(m for m in cmp["metrics"] if m["key"] == key)


def test_three_vs_three_clearly_different_improved_and_regressed() -> None:
    """Throughput up and await up, 3 runs each with small noise: improved and regressed."""
    base = [_result(100 + d, 1.0 + d / 100) for d in (-1, 0, 1)]
    patched = [_result(150 + d, 2.0 + d / 100) for d in (-1, 0, 1)]
    cmp = compare(base, patched)
    mb = _by_key(cmp, "8,0 MB/s")
    assert mb["verdict"] == "improved" and mb["p_value"] < 0.05
    assert mb["delta"] == pytest.approx(50) and mb["pct"] == pytest.approx(50)
    assert mb["lkp"]["changed"] and mb["lkp"]["applicable"]
    assert not mb["needs_more_runs"]
    aw = _by_key(cmp, "8,0 r_await")
    assert aw["verdict"] == "regressed"
    assert cmp["runs_note"] is None
    assert cmp["check"]["state"] == "fail"  # await +100% > 25%, significant
    json.dumps(cmp)


def test_three_vs_three_same_distribution_no_change() -> None:
    """Same-distribution runs: no significant change, lkp not separated."""
    base = [_result(v) for v in (97.0, 100.0, 103.0)]
    patched = [_result(v) for v in (98.0, 101.0, 102.5)]
    mb = _by_key(compare(base, patched), "8,0 MB/s")
    assert mb["verdict"] == "no significant change" and mb["p_value"] >= 0.05
    assert not mb["lkp"]["changed"]


def test_same_distribution_false_positive_rate_is_near_alpha() -> None:
    """Over 300 random 3-vs-3 draws from one normal, 'regressed/improved' is rare (~alpha)."""
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(300):
        v = rng.normal(100, 5, size=6)
        mb = _by_key(compare([_result(x) for x in v[:3]], [_result(x) for x in v[3:]]),
                     "8,0 MB/s")
        hits += mb["verdict"] != "no significant change"
    assert hits / 300 < 0.1


def test_one_vs_one_needs_more_runs_and_never_fails() -> None:
    """One run per side: timing 'needs more runs' (lkp: 2 more per side), never warn/fail."""
    cmp = compare([_result(100)], [_result(80)])
    mb = _by_key(cmp, "8,0 MB/s")
    assert mb["verdict"] == "needs more runs" and mb["p_value"] is None
    assert mb["pct"] == pytest.approx(-20) and mb["needs_more_runs"]
    assert mb["needs"]["more_baseline"] == 2 and mb["needs"]["power_estimate"] is None
    assert cmp["runs_note"] == "single run"
    assert cmp["check"]["state"] == "success" and cmp["check"]["reasons"] == []
    assert "timing: needs more runs (2 more per side" in cmp["words"]["headline"]


def test_two_runs_needs_more_runs_with_a_power_estimate() -> None:
    """Two runs per side: still 'needs more runs', now with a power estimate from the variance."""
    cmp = compare([_result(100), _result(110)], [_result(90), _result(99)])
    mb = _by_key(cmp, "8,0 MB/s")
    assert cmp["runs_note"] == "needs more runs"
    assert mb["verdict"] == "needs more runs" and mb["needs_more_runs"]
    # pooled sd 6.73 (7.07 and 6.36); a 10% change of 105 is 10.5:
    # 2 (1.96 + 0.84)^2 6.73^2 / 10.5^2 = 6.4 -> 7 runs per side
    assert mb["needs"]["power_estimate"] == 7 and mb["needs"]["per_side"] == 7
    assert mb["needs"]["more_patched"] == 5
    assert cmp["check"]["state"] == "success"


def test_thresholds_override_and_success() -> None:
    """A significant 5% drop warns; with warn_on_regression off and a looser limit it is
    success; unknown names and rule levels other than 0/1/2 raise."""
    base = [_result(v) for v in (99.5, 100.0, 100.5)]
    patched = [_result(v) for v in (94.5, 95.0, 95.5)]
    cmp = compare(base, patched)
    assert cmp["check"]["state"] == "warning"
    loose = compare(base, patched, thresholds={"throughput_drop_warn_pct": 6,
                                               "warn_on_regression": 0})
    assert loose["check"]["state"] == "success" and loose["check"]["reasons"] == []
    with pytest.raises(ValueError):
        Thresholds().with_overrides({"nope": 1})
    with pytest.raises(ValueError, match="0 \\(off\\)"):
        Thresholds().with_overrides({"rule_backward_rise": 3})


def test_threshold_strings_from_the_command_line() -> None:
    """'false' turns a flag off (bool('false') would not); non-numbers and NaN are refused."""
    t = Thresholds().with_overrides({"warn_on_regression": "false",
                                     "throughput_drop_fail_pct": "5"})
    assert t.warn_on_regression is False and t.throughput_drop_fail_pct == 5.0
    assert Thresholds().with_overrides({"warn_on_regression": "yes"}).warn_on_regression is True
    for bad in ({"throughput_drop_fail_pct": "abc"}, {"throughput_drop_fail_pct": "nan"},
                {"warn_on_regression": "maybe"}):
        with pytest.raises(ValueError, match="threshold"):
            Thresholds().with_overrides(bad)
    with pytest.raises(ValueError):
        compare([], [_result(1)])


def test_compare_real_analyze_results_seek_pattern() -> None:
    """analyze() of sequential vs fragmented D streams: zero-seek share improves."""
    def run(gaps: list[int]) -> dict:
        return analyze(stream(sectors_from_gaps(gaps), 128))

    rng = np.random.default_rng(0)
    base = [run(list(rng.choice([0, 64, 512], size=200))) for _ in range(3)]
    patched = [run(list(rng.choice([0, 0, 0, 64], size=200))) for _ in range(3)]
    cmp = compare(base, patched)
    z = _by_key(cmp, "8,0 zero-seek share")
    assert z["verdict"] == "improved"
    assert cmp["sides"]["baseline"]["devices"]["8,0"]["seek"]["cnt"] == 200


def test_lkp_rule() -> None:
    """lkp: separated when min above the other's middle and middle above its max."""
    assert lkp_changed([1, 2, 3], [10, 11, 12])["changed"]
    assert not lkp_changed([1, 5, 9], [4, 6, 8])["changed"]
    assert not lkp_changed([1], [2])["applicable"]


def test_fidelity_helpers() -> None:
    """L1 of normalized histograms, in-order share, throughput error."""
    assert l1_normalized([1, 1], [1, 1]) == 0.0
    assert l1_normalized([1, 0], [0, 1]) == 2.0
    assert l1_normalized([0], [1]) is None
    obs = [(0, 8), (8, 8), (16, 8), (24, 8)]
    assert matched_in_order(obs, obs) == 1.0
    assert matched_in_order(obs, [(0, 8), (16, 8), (8, 8), (24, 8)]) == 0.75
    assert matched_in_order(obs, []) == 0.0
    t = requests([(0, 8, "R", {"D": 0, "C": 1000}), (8, 8, "R", {"D": 10, "C": 2000})])
    r = analyze(t)
    f = fidelity(r, r, order={"8,0": 1.0})
    assert f["8,0"]["seek_l1"] == 0.0 and f["8,0"]["throughput_rel_err"] == 0.0
    cmp = compare([r], [r], fidelity_result={"8,0": {"seek_l1": 0.9}})
    # model fidelity is a note: it never changes the check state
    assert cmp["check"]["state"] == "success"
    assert any("fidelity" in x for x in cmp["check"]["notes"])


def _fio(bw_mib: float, p99_us: float) -> dict:
    return {"devices": {}, "summaries": {
        "fio": [{"jobname": "randwrite", "write_bw_bytes": bw_mib * 2**20, "write_iops": bw_mib,
                 "write_clat_mean_ns": p99_us * 500.0,
                 "write_clat_percentiles_ns": {"99": p99_us * 1000.0},
                 "read_bw_bytes": 0.0, "read_clat_mean_ns": 0.0}],
        "iostat": [{"device": "sda", "sample": 0, "w/s": 1.0, "util": 1.0},
                   {"device": "sda", "sample": 1, "w/s": bw_mib, "util": 50.0}]}}


def test_fio_and_measured_iostat_summaries_are_compared() -> None:
    """Seed 003-style fio bw 67.7 -> 31.8 MiB/s regresses and fails; iostat's last sample counts."""
    cmp = compare([_fio(67.7 + d, 100) for d in (-0.5, 0, 0.5)],
                  [_fio(31.8 + d, 300) for d in (-0.5, 0, 0.5)])
    bw = _by_key(cmp, "fio randwrite write bw")
    assert bw["verdict"] == "regressed" and bw["pct"] == pytest.approx(-53.0, abs=0.1)
    assert _by_key(cmp, "fio randwrite write clat p99")["verdict"] == "regressed"
    ws = _by_key(cmp, "iostat sda w/s")
    assert ws["baseline"]["mean"] == pytest.approx(67.7)  # sample 1, not the since-boot one
    assert not any(m["key"] == "fio randwrite read clat mean" for m in cmp["metrics"])
    assert cmp["check"]["state"] == "fail"
    assert any("MiB/s" in r and "fio randwrite write bw" in r for r in cmp["check"]["reasons"])


def compare(*args, **kwargs):  # type: ignore[no-redef]
    """compare() with the summary in words, as the CLI and the worker produce it."""
    return with_summary(_compare(*args, **kwargs))
