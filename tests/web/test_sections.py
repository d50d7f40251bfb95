"""reviewapp.sections: pure chart-payload helpers (no database)."""

from __future__ import annotations

from reviewapp.sections import histogram_chart, policy_diff, unavailable_notes


def test_policy_diff_names_only_the_knobs_that_differ():
    """Two Policy.describe() strings: only differing knobs, old → new, in first-seen order."""
    old = "linux-6.1.192: split_remainder=tail,plug_order=lifo,max_plug_count=32"
    new = "linux-7.2.13+overrides: split_remainder=head,plug_order=fifo,max_plug_count=32"
    assert policy_diff(old, new) == ["split_remainder tail → head", "plug_order lifo → fifo"]
    assert policy_diff(old, old) == []


def test_histogram_side_without_counts_is_an_empty_panel_and_all_empty_is_no_chart():
    """A side whose counts are all zero gets a note panel; every side empty gives no chart."""
    c = histogram_chart("b", "backward distance", "KB",
                        {"baseline": {"counts": [0, 2, 1]}, "patched": {"counts": [0, 0]}},
                        empty_note="no backward dispatches")
    assert c is not None
    base, patched = c["panels"]
    assert base["figure"]["data"][0]["y"] == [0, 2, 1]
    assert patched["figure"] is None and patched["empty"] == "no backward dispatches"
    assert histogram_chart("b", "t", "KB", {"baseline": {"counts": [0, 0]},
                                            "patched": {"counts": []}}) is None


def test_unavailable_notes_merge_sides_with_the_same_reason():
    """One note per distinct reason, naming every side it applies to."""
    same = {s: [{"throughput": {"iostat": {"note": "no D/C events: stage G"}}}]
            for s in ("baseline", "patched")}
    assert unavailable_notes(same, "throughput.iostat.note", "iostat -x") == [
        "– in iostat -x, baseline and patched: no D/C events: stage G."]
    one = {"baseline": [{"throughput": {"iostat": {"note": None}}}],
           "patched": [{"throughput": {"iostat": {"note": "no timestamps"}}}]}
    assert unavailable_notes(one, "throughput.iostat.note", "iostat -x") == [
        "– in iostat -x, patched: no timestamps."]


def test_sparse_throughput_series_are_rebinned_to_a_shared_width():
    """A few I/Os over 200 bins are merged to >= 4 I/Os per bin, the same width on both sides."""
    from reviewapp.sections import MIN_IOS_PER_BIN, rebin, throughput_section

    assert rebin([1, 3, 5, 7, 9], 2) == [2.0, 6.0, 9.0] and rebin([1, 2], 1) == [1.0, 2.0]
    sparse = [0.0] * 200
    for i in (10, 30, 50, 70, 110, 130, 150, 190):  # 8 I/Os in 1 ms bins
        sparse[i] = 100.0
    dense = [50.0] * 100  # 2 ms bins, plenty of I/Os
    per_side = {
        "baseline": [{"throughput": {"read_mbps": sparse, "write_mbps": [0.0] * 200,
                                     "read_iops": sparse, "write_iops": [0.0] * 200,
                                     "total_ios": 8}}],
        "patched": [{"throughput": {"read_mbps": dense, "write_mbps": [0.0] * 100,
                                    "read_iops": dense, "write_iops": [0.0] * 100,
                                    "total_ios": 1000}}]}
    out = throughput_section(per_side, {}, {"baseline": 0.001, "patched": 0.002})
    mbps = next(c for c in out["charts"] if c["id"] == "mbps")
    assert mbps["title"] == "MB/s over time (100 ms bins)"  # 4 * 200 / 8 = 100 bins of 1 ms
    xs = {p["side"]: p["figure"]["data"][0]["x"] for p in mbps["panels"]}
    assert xs["baseline"] == [0.0, 0.1, 0.2] and xs["patched"] == [0.0, 0.1, 0.2]  # steps
    line = mbps["panels"][0]["figure"]["data"][0]
    assert line["y"] == [4.0, 4.0, 4.0] and line["line"]["shape"] == "hv"  # 4 x 100 / 100
    assert MIN_IOS_PER_BIN == 4
