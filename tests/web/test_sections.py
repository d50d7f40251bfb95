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
