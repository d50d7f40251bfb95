"""Seek histogram: seed 000 definition and layout, btt's statistics beside it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from analyzer_helpers import (
    fold,
    sectors_from_gaps,
    seed_seek_blocks,
    seed_text,
    stream,
    two_cpu_reads,
)

from workers.analyzers.seek import (
    btt_median,
    btt_seek_distances,
    histogram_counts,
    seek_histogram,
)
from workers.events import ACTION_CODES, EventTable, make_dev

SEED000 = "000_bd92b2ca435366b4.txt"
SDA = make_dev(8, 0)


def _seed000_before_gaps(rng: np.random.Generator) -> list[int]:
    """Seek distances (sectors) with exactly seed 000's 'before' distribution, shuffled."""
    gaps = ([0] * 25079 + [64 + 0] * 6000 + [100] * 6540 + [128] * 2000 + [200] * 508
            + [512] * 5000 + [1000] * 5032 + [1024] * 2016 + [2047] * 3000)
    # 32..64 KB = 64..127 sectors, 64..128 KB = 128..255, 256..512 KB = 512..1023,
    # 512..1024 KB = 1024..2047; some negative (backward) seeks count by absolute value.
    signs = rng.choice([-1, 1], size=len(gaps))
    signs[:25079] = 1
    arr = np.asarray(gaps) * signs
    rng.shuffle(arr)
    return arr.tolist()


def _table_from_gaps(gaps: list[int]) -> EventTable:
    return stream(sectors_from_gaps(gaps, start=1 << 30), 128)


def test_seed000_before_histogram_matches_seed_text() -> None:
    """A D stream built with seed 000's 'before' distribution prints the seed's lines."""
    rng = np.random.default_rng(0)
    hist = seek_histogram(_table_from_gaps(_seed000_before_gaps(rng)), SDA)
    expected = seed_seek_blocks(seed_text(SEED000))[0]
    assert expected[1] == "cnt 55175, zero cnt 25079"
    assert fold(hist.text()) == expected
    assert hist.stage == "D" and not hist.fallback


def test_seed000_after_histogram_matches_seed_text() -> None:
    """A D stream with seed 000's 'after' distribution (21483 zero, 7161 at 64 sectors)."""
    gaps = [0] * 21483 + [64] * 7161
    rng = np.random.default_rng(1)
    rng.shuffle(gaps)
    hist = seek_histogram(_table_from_gaps(gaps), SDA)
    expected = seed_seek_blocks(seed_text(SEED000))[1]
    assert expected[1] == "cnt 28644, zero cnt 21483"
    assert fold(hist.text()) == expected


def test_seed000_g_stage_lines_before_by_hand() -> None:
    """Seed 000's 7 'before' G lines: seeks 192K, 0, 384K, 192K, 256K, 64K by hand."""
    sectors = [14071424, 14071168, 14071296, 14072192, 14071936, 14071552, 14071808]
    t = stream(sectors, 128, action="G")
    hist = seek_histogram(t, SDA)
    assert hist.stage == "G" and hist.fallback
    assert hist.cnt == 6 and hist.zero_cnt == 1
    # buckets 0..1, 1..2, 2..4, 4..8, 8..16, 16..32, 32..64, 64..128, 128..256, 256..512
    assert hist.counts == (1, 0, 0, 0, 0, 0, 0, 1, 2, 2)
    assert hist.backward == 3
    assert hist.median_bytes == 192 * 1024  # sorted: 0, 64, 192, 192, 256, 384 KB
    assert fold(hist.text())[-1] == "256 .. 512 : 2 33.3% |########################################|"


def test_seed000_g_stage_lines_after_by_hand() -> None:
    """Seed 000's 8 'after' G lines: 7 seeks of exactly 64 KB (128 sectors apart + 128)."""
    sectors = [7156992 + 256 * i for i in range(8)]
    hist = seek_histogram(stream(sectors, 128, action="G"), SDA)
    assert hist.cnt == 7 and hist.zero_cnt == 0
    assert hist.counts == (0,) * 7 + (7,)
    assert hist.mean_bytes == hist.median_bytes == 64 * 1024


def test_bucket_edges_are_exact_kb() -> None:
    """1 sector (512 B) is under 1 KB; 2 sectors is 1 KB; 4 sectors is 2 KB."""
    counts = histogram_counts(np.array([0, 1, 2, 3, 4, 7, 8], dtype=np.int64))
    assert counts == (2, 2, 2, 1)


def test_text_layout_bar_is_ceiled_and_padded() -> None:
    """Bars are ceil(40*c/max) '#' padded to 40 inside |...|, ratio has one decimal."""
    hist = seek_histogram(stream(sectors_from_gaps([0, 0, 0, 2]), 128), SDA)
    lines = hist.text().splitlines()
    assert lines[0] == "Read|Write seek"
    assert lines[1] == "cnt 4, zero cnt 3"
    bars = [ln[ln.index("|") + 1: ln.rindex("|")] for ln in lines[3:]]
    assert all(len(b) == 40 for b in bars)
    assert bars[0] == "#" * 40 and bars[1] == "#" * 14 + " " * 26  # ceil(40/3) = 14
    assert "75.0%" in lines[3] and "25.0%" in lines[4]


def test_empty_device_and_single_request() -> None:
    """No requests or one request: cnt 0, no bucket rows, btt still counts the single one."""
    empty = seek_histogram(EventTable.empty(), SDA)
    assert empty.cnt == 0 and empty.counts == () and empty.stage is None
    assert fold(empty.text()) == ["Read|Write seek", "cnt 0, zero cnt 0",
                                  ">=(KB) .. <(KB) : count ratio |distribution |"]
    one = seek_histogram(stream([4096], 8), SDA)
    assert one.cnt == 0 and one.btt.nseeks == 1 and one.btt.median == 4096


def test_unsorted_times_are_put_in_issue_order() -> None:
    """Rows out of time order are sorted by time before distances are taken."""
    t = stream([0, 16, 8], 8, times=[0, 2000, 1000])
    hist = seek_histogram(t, SDA)
    assert hist.cnt == 2 and hist.zero_cnt == 2


def test_overlapping_requests_seed_vs_btt() -> None:
    """Overlap: the seed definition gives |start - prev end|, btt gives 0."""
    sectors = np.array([100, 104])
    nr = np.array([8, 8])
    hist = seek_histogram(stream(sectors.tolist(), 8), SDA)
    assert hist.cnt == 1 and hist.counts == (0, 0, 1)  # |104 - 108| = 4 sectors = 2 KB
    assert btt_seek_distances(sectors, nr).tolist() == [100, 0]


def test_stage_selection_and_flushes_excluded() -> None:
    """An explicit stage is honoured; 0-sector requests are left out and counted."""
    d = stream([0, 8, 100], [8, 0, 8])
    hist = seek_histogram(d, SDA, stage="D")
    assert hist.zero_length == 1 and hist.cnt == 1 and hist.requested_stage == "D"
    q = seek_histogram(d, SDA, stage="Q")
    assert q.cnt == 0 and q.stage == "Q"
    with pytest.raises(ValueError):
        seek_histogram(d, SDA, stage="X")


def test_btt_distance_rules() -> None:
    """btt: first from 0, forward start-last_end, backward start-last_start, overlap 0."""
    s = np.array([100, 200, 150, 150, 160])
    n = np.array([10, 10, 10, 10, 10])
    assert btt_seek_distances(s, n).tolist() == [100, 90, -50, 0, 0]


def test_btt_median_quirk_differs_from_true_median() -> None:
    """btt's median is 0 when no distance holds half the seeks; else the majority value."""
    spread = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=np.int64)
    assert btt_median(spread) == 0  # true median 4.5
    majority = np.array([9, 9, 9, 9, 1, 2, 3], dtype=np.int64)  # 4 >= 7 // 2
    assert btt_median(majority) == 9  # true median 9 too, but by a different rule
    # two values each holding half: the tree root (first inserted of 2) wins
    assert btt_median(np.array([5, 3, 5, 3], dtype=np.int64)) == 5
    assert btt_median(np.array([3, 5, 5, 3], dtype=np.int64)) == 3
    # three distinct inserted 5, 3, 1 (a line): rotation makes 3 the root, n=3 -> target 1
    assert btt_median(np.array([5, 3, 1], dtype=np.int64)) == 3
    # 5, 1, 9: root stays 5
    assert btt_median(np.array([5, 1, 9], dtype=np.int64)) == 5


def test_to_json_roundtrip_and_serializable() -> None:
    """to_json is plain JSON and from_json rebuilds the same text."""
    hist = seek_histogram(stream(sectors_from_gaps([0, 64, 512, 0]), 128), SDA)
    data = json.loads(json.dumps(hist.to_json()))
    assert data["edges_kb"][: len(data["counts"]) + 1] == data["edges_kb"]
    from workers.analyzers.seek import SeekHistogram

    assert SeekHistogram.from_json(data).text() == hist.text()


def test_other_devices_ignored() -> None:
    """Only the asked device's rows count."""
    a = stream([0, 8, 16], 8)
    b = stream([5000, 0], 8, dev=make_dev(8, 16))
    t = EventTable.concat([a, b]).sorted_by_time()
    assert seek_histogram(t, "8,0").zero_cnt == 2
    assert seek_histogram(t, "8,16").cnt == 1
    assert int((t.action == ACTION_CODES["D"]).sum()) == 5


def test_seed000_g_lines_parsed_from_the_seed(tmp_path) -> None:
    """The seed's G lines (blkparse text) through ingest give the hand-computed histograms."""
    from workers.traces import ingest

    lines = [ln.lstrip("> ").strip() for ln in seed_text(SEED000).splitlines()]
    g = [ln for ln in lines if ln.startswith("8,0 0 ") and " G R " in ln]
    before, after = g[:7], g[7:]
    assert len(before) == 7 and len(after) == 8
    expected = {"before": (6, 1, (1, 0, 0, 0, 0, 0, 0, 1, 2, 2)),
                "after": (7, 0, (0,) * 7 + (7,))}
    for name, block in (("before", before), ("after", after)):
        f = tmp_path / f"{name}.txt"
        f.write_text("\n".join(block) + "\n")
        hist = seek_histogram(ingest([f]).table, SDA)
        assert hist.stage == "G"
        assert (hist.cnt, hist.zero_cnt, hist.counts) == expected[name]


def test_per_cpu_rows_not_monotone_seek_in_time_order() -> None:
    """Per-CPU blocks of rows (times not monotone across CPUs): the seeks are taken in time
    order, so 8 back-to-back reads give cnt 7, zero cnt 7, like the time-sorted table; the
    same rows without timestamps (file order is then the only order) seek back and forth."""
    t = two_cpu_reads()
    assert np.any(np.diff(t.time_ns) < 0)
    h = seek_histogram(t, SDA)
    assert (h.to_json()["cnt"], h.to_json()["zero_cnt"], h.to_json()["counts"]) == (7, 7, [7])
    assert h.text() == seek_histogram(t.sorted_by_time(), SDA).text()
    assert fold(h.text())[1] == "cnt 7, zero cnt 7"
    t.time_known = False
    file_order = seek_histogram(t, SDA).to_json()
    assert file_order["cnt"] == 7 and file_order["zero_cnt"] == 0


def test_sequence_wrap_does_not_reorder_seeks() -> None:
    """Per-CPU sequence numbers wrapping past 2**32 - 1 change nothing: seeks follow time."""
    wrapped = two_cpu_reads(seq_start=2**32 - 3)
    assert wrapped.seq.min() == 0 and wrapped.seq.max() == 2**32 - 1
    assert (seek_histogram(wrapped, SDA).to_json()
            == seek_histogram(two_cpu_reads(), SDA).to_json())


def test_no_seek_has_no_distance_rather_than_zero():
    """One request makes no seek: mean/median/max are null in the JSON (compare skips them),
    not 0 (which would read as perfectly sequential)."""
    from workers.analyzers.seek import SeekHistogram, seek_histogram
    from workers.events import ACT_ISSUE, EventTable, make_dev

    t = EventTable.from_columns(dev=[make_dev(8, 0)], action=[ACT_ISSUE], sector=[0],
                                nr_sectors=[8])
    j = seek_histogram(t, make_dev(8, 0)).to_json()
    assert j["cnt"] == 0
    assert j["mean_bytes"] is None and j["median_bytes"] is None and j["max_bytes"] is None
    assert SeekHistogram.from_json(j).cnt == 0
