"""reviewapp.charts: histograms summed across runs, shared axes, key numbers with deltas."""

from __future__ import annotations

import pytest

from reviewapp.charts import Row, bucket_labels, comparison_view_model, sum_histograms


def dev_result(seek_counts, size_counts, *, cnt, zero, mean_seek=0.0, count=1, mean_size=65536.0):
    return {"devices": {"8,0": {
        "name": "sda", "stage": "D",
        "seek": {"edges_kb": [0] + [1 << i for i in range(len(seek_counts))],
                 "counts": seek_counts, "cnt": cnt, "zero_cnt": zero, "mean_bytes": mean_seek,
                 "median_bytes": 0.0, "backward": 0},
        "sizes": {"edges_kb": [0] + [1 << i for i in range(len(size_counts))],
                  "counts": size_counts, "count": count, "mean_bytes": mean_size,
                  "percentiles_bytes": {"p50": mean_size}, "bytes": count * mean_size},
    }}}


def test_sum_histograms_pads_shorter_runs():
    """Runs with different bucket counts add element-wise."""
    edges, counts = sum_histograms([{"counts": [1, 0, 2]}, {"counts": [3]}])
    assert counts == [4, 0, 2] and edges == [0, 1, 2, 4]


def test_bucket_labels_follow_seed000_rows():
    """Labels read like the seed 000 rows, '0..1', '1..2', '2..4'."""
    assert bucket_labels([0, 1, 2, 4]) == ["[0, 1)", "[1, 2)", "[2, 4)"]


def test_view_model_shared_categories_and_range():
    """Both sides get the same x categories and y range; colours differ per side."""
    base = dev_result([25079, 0, 0, 0, 0, 0, 12540, 2508, 0, 10032, 5016], [0] * 7 + [4],
                      cnt=55175, zero=25079)
    patched = dev_result([21483, 0, 0, 0, 0, 0, 7161], [0] * 7 + [4], cnt=28644, zero=21483)
    [dev] = comparison_view_model({"baseline": [base], "patched": [patched]})
    b, p = dev.figure("seek", "baseline"), dev.figure("seek", "patched")
    assert b["data"][0]["x"] == p["data"][0]["x"] and len(p["data"][0]["y"]) == 11
    assert p["data"][0]["y"][7:] == [0, 0, 0, 0]
    assert b["layout"]["yaxis"]["range"] == p["layout"]["yaxis"]["range"]
    assert b["data"][0]["marker"]["color"] != p["data"][0]["marker"]["color"]
    share = next(r for r in dev.rows if r.label == "Zero-seek share")
    assert share.baseline == pytest.approx(45.45, abs=0.01)
    assert share.patched == pytest.approx(75.0, abs=0.01)
    assert share.pct == pytest.approx(100 * (75.0 - 45.45) / 45.45, abs=0.05)


def test_several_runs_are_summed_and_averaged():
    """Two runs on a side: histogram counts add up, key numbers are the mean per run."""
    r1 = dev_result([1, 1], [0, 2], cnt=2, zero=1, mean_size=4096.0, count=2)
    r2 = dev_result([3, 1], [0, 4], cnt=4, zero=3, mean_size=8192.0, count=4)
    [dev] = comparison_view_model({"baseline": [r1, r2], "patched": [r1]})
    assert dev.figure("seek", "baseline")["data"][0]["y"] == [4, 2]
    assert dev.runs == {"baseline": 2, "patched": 1}
    size = next(r for r in dev.rows if r.label == "Mean request size")
    assert size.baseline == pytest.approx(6.0) and size.patched == pytest.approx(4.0)


def test_row_delta_and_pct_handle_missing_and_zero():
    """No value on a side or a zero baseline gives no delta/percentage instead of an error."""
    assert Row("x", "", None, 3.0).delta is None
    assert Row("x", "", 0.0, 3.0).pct is None
    assert Row("x", "", 4.0, 3.0).pct == pytest.approx(-25.0)


def test_device_only_on_one_side():
    """A device missing on one side still gets the other side's charts."""
    only = dev_result([1], [1], cnt=1, zero=1)
    [dev] = comparison_view_model({"baseline": [only], "patched": []})
    assert dev.figure("seek", "baseline") is not None
    assert dev.figure("seek", "patched") is None


def test_seek_text_in_seed000_layout():
    """Each side's seek histogram is also given in the seed 000 text layout."""
    base = dev_result([25079, 0, 0, 0, 0, 0, 12540, 2508, 0, 10032, 5016], [1], cnt=55175,
                      zero=25079)
    base["devices"]["8,0"]["seek"].update({"dev": "8,0"})
    [dev] = comparison_view_model({"baseline": [base], "patched": []})
    lines = [" ".join(ln.split()) for ln in dev.seek_text["baseline"].splitlines()]
    assert lines[:2] == ["Read|Write seek", "cnt 55175, zero cnt 25079"]
    assert lines[3] == "0 .. 1 : 25079 45.5% |########################################|"
    assert lines[-1] == "512 .. 1024 : 5016 9.1% |######### |"  # as in the seed, folded
