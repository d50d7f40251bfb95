"""Per-bio lineage on the real 6.1 / 7.2 raid5 captures (tests/data/model, from
../shared/samples/kernel): one record per request with every event and its parent bio."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workers.analyzers import analyze
from workers.analyzers.lineage import story
from workers.traces import ingest

MODEL = Path(__file__).resolve().parents[2] / "data" / "model"


def _lineage(tmp_path_factory, name: str) -> dict:
    d = tmp_path_factory.mktemp(name)
    for suffix in (".blkparse.txt.xz", ".blkreview.toml"):
        shutil.copy(MODEL / f"{name}{suffix}", d / f"{name}{suffix}")
    return analyze(ingest(sorted(d.iterdir())).table)["lineage"]


@pytest.fixture(scope="module")
def k61(tmp_path_factory) -> dict:
    return _lineage(tmp_path_factory, "6.1_W1b")


@pytest.fixture(scope="module")
def k72(tmp_path_factory) -> dict:
    return _lineage(tmp_path_factory, "7.2_W1b")


def test_first_request_story_matches_the_blkparse_lines(k61) -> None:
    """254,0 4096 + 1024: A at 0.000168190, Q .174890, G .244370, D .410850, C 1.334390 ms;
    remapped from md0's bio 0 + 4096 (2M, split at 2048 by max_sectors)."""
    rec = k61["requests"][0]
    assert (rec["dev"], rec["sector"], rec["nr_sectors"]) == ("254,0", 4096, 1024)
    assert [(e["a"], e["t_ns"]) for e in rec["events"]] == [
        ("A", 168190), ("Q", 174890), ("G", 244370), ("D", 410850), ("C", 1334390)]
    p = rec["parent"]
    assert (p["dev"], p["sector"], p["nr_sectors"], p["offset_kb"]) == ("9,0", 0, 4096, 0)
    assert p["splits"] == [2048]
    assert story(rec) == ("A +0 us, Q +7 us, G +76 us, D +243 us, C +1166 us; "
                          "from 9,0 0 + 4096 at 0 KB")
    # the 6.1 order of the first bio's pieces: 0, 1M, 1.5M, 512K
    assert [r["parent"]["offset_kb"] for r in k61["requests"][:4]] == [0, 1024, 1536, 512]


def test_pieces_per_bio_and_per_bio_latency(k61, k72) -> None:
    """6.1 queues 100 bios of 2M on md0, 4 pieces each; 7.2 queues 200 of 1M, 2 pieces each."""
    b61, b72 = k61["bios"]["9,0"], k72["bios"]["9,0"]
    assert (b61["bios"], b61["pieces_per_bio"]) == (100, 4.0)
    assert (b72["bios"], b72["pieces_per_bio"]) == (200, 2.0)
    assert k61["count"] == k72["count"] == 400  # every member request has a record
    first = b61["first"][0]
    assert first["members"] == ["254,0", "254,32", "254,48", "254,16"]
    assert first["last_c_ns"] == 2304940  # the last piece's C (254,16)
    assert b61["latency_ns"]["count"] == 100
    assert b61["latency_ns"]["percentiles_ns"]["p50"] > 0


def test_merged_bios_join_their_request(tmp_path) -> None:
    """A back-merged bio (M) is part of the request it merged into; its Q is not a request."""
    text = "\n".join([
        "8,0 0 1 0.000001000 100 Q R 0 + 8 [dd]",
        "8,0 0 2 0.000002000 100 G R 0 + 8 [dd]",
        "8,0 0 3 0.000003000 100 Q R 8 + 8 [dd]",
        "8,0 0 4 0.000004000 100 M R 8 + 8 [dd]",
        "8,0 0 5 0.000010000 100 D R 0 + 16 [dd]",
        "8,0 0 6 0.000020000 0 C R 0 + 16 [0]",
        "8,0 0 7 0.000030000 100 Q R 64 + 8 [dd]",
        "8,0 0 8 0.000031000 100 G R 64 + 8 [dd]",
        "8,0 0 9 0.000032000 100 D R 64 + 8 [dd]",
        "8,0 0 10 0.000040000 0 C R 64 + 8 [0]", ""])
    f = tmp_path / "m.blkparse.txt"
    f.write_text(text)
    lin = analyze(ingest([f]).table)["lineage"]
    assert lin["count"] == 2 and lin["bios"] == {}
    first, second = lin["requests"]
    assert [e["a"] for e in first["events"]] == ["Q", "G", "D", "C"]
    assert first["merged"] == [{"a": "M", "sector": 8, "nr_sectors": 8, "t_ns": 4000}]
    assert first["parent"] is None and second["merged"] == []
    assert story(first) == "Q +0 us, G +1 us, D +9 us, C +19 us; 1 bio(s) merged"


def test_records_of_the_first_issues_do_not_depend_on_the_limit(tmp_path) -> None:
    """The first ``limit`` records are built from the events up to the last kept issue only
    (a bound on memory at 100M events): they equal the first records of a run over every
    issue, parents and splits included."""
    import numpy as np

    from workers.analyzers.common import StageMatcher
    from workers.analyzers.lineage import _pair_index, _pairs_of, lineage

    for suffix in (".blkparse.txt.xz", ".blkreview.toml"):
        shutil.copy(MODEL / f"6.1_W1b{suffix}", tmp_path / f"6.1_W1b{suffix}")
    table = ingest(sorted(tmp_path.iterdir())).table
    matcher = StageMatcher(table)
    whole = lineage(table, matcher, limit=len(table))
    assert whole["count"] > 100
    for limit in (1, 7, 60, 100):
        part = lineage(table, matcher, limit=limit)
        assert part["count"] == limit
        assert part["requests"] == whole["requests"][:limit]
    assert any(r["parent"] and r["parent"]["splits"] for r in whole["requests"])
    # the lookup of the kept issues' pairs equals the readable dict of every pair
    d_rows = np.flatnonzero(table.action == 7)[::3]
    for a, b in (("Q", "D"), ("G", "D"), ("I", "D")):
        full = _pair_index(matcher, a, b)
        assert _pairs_of(matcher, a, b, d_rows) == {
            int(d): full[int(d)] for d in d_rows if int(d) in full}
    full = {v: k for k, v in _pair_index(matcher, "D", "C").items()}
    assert _pairs_of(matcher, "D", "C", d_rows, by_a=True) == {
        int(d): full[int(d)] for d in d_rows if int(d) in full}
