"""Fragmentation: seed 001's sandwiched fragments, below-max share, alignment, splits."""

from __future__ import annotations

import numpy as np
from analyzer_helpers import stream

from workers.analyzers.common import stage_rows
from workers.analyzers.fragmentation import fragmentation
from workers.events import ACTION_CODES, DeviceInfo, EventTable, make_dev

SDC = make_dev(8, 32)

# seed 001's block_rq_issue lines (sector, nr), in issue order
SEED001_ISSUES = [
    (86925864, 1024), (86926888, 1024),
    (86928008, 1024), (86927912, 96), (86929032, 1024),
    (86930152, 1024), (86930056, 96), (86931176, 1024),
    (86932264, 1024), (86932200, 64), (86933288, 1024),
]


def _seed001_table(limits: dict[str, int] | None = None) -> EventTable:
    t = stream([s for s, _ in SEED001_ISSUES], [n for _, n in SEED001_ISSUES], dev=SDC)
    if limits is not None:
        t.devices[SDC] = DeviceInfo(SDC, "sdc", limits)
    return t


def test_seed001_sandwiched_fragments() -> None:
    """Seed 001's issue lines hold 3 fragments sandwiched between 512 KB requests."""
    t = _seed001_table()
    f = fragmentation(t, stage_rows(t, SDC))
    assert f["max_sectors"] == 1024 and f["max_sectors_source"] == "largest seen"
    assert f["sandwiched"] == 3
    assert f["sandwiched_sizes"] == {"sectors": [64, 96], "counts": [1, 2]}
    assert [e["sector"] for e in f["sandwiched_examples"]] == [86927912, 86930056, 86932200]
    assert f["below_max"] == 3 and f["below_max_share"] == 3 / 11


def test_tail_in_place_is_not_sandwiched() -> None:
    """A remainder issued right after its own piece, then a full request, is in place."""
    t = stream([0, 1024, 2048, 2144], [1024, 1024, 96, 1024])
    f = fragmentation(t, stage_rows(t, make_dev(8, 0)))
    assert f["sandwiched"] == 0 and f["below_max"] == 1


def test_limits_and_alignment() -> None:
    """max_sectors from limits (max_sectors_kb) and chunk alignment of starts and ends."""
    t = _seed001_table({"max_sectors_kb": 512, "chunk_kb": 64})
    f = fragmentation(t, stage_rows(t, SDC))
    assert f["max_sectors_source"] == "limits" and f["max_sectors"] == 1024
    assert f["chunk_sectors"] == 128 and f["chunk_source"] == "limits"
    starts = sum(1 for s, _ in SEED001_ISSUES if s % 128 == 0)
    ends = sum(1 for s, n in SEED001_ISSUES if (s + n) % 128 == 0)
    assert f["align_chunk"]["start_aligned"] == starts
    assert f["align_chunk"]["end_aligned"] == ends


def test_splits_per_bio_from_x_events_and_from_counts() -> None:
    """Seed 001: 4 Q and 8 X events -> 3 pieces per bio; without X, D/Q counts are used."""
    q = stream([86925864, 86928008, 86930152, 86932264], 2144, action="Q", dev=SDC)
    x = stream([86925864, 86926888] * 4, 0, action="X", dev=SDC)
    d = _seed001_table()
    t = EventTable.concat([q, x, d])
    f = fragmentation(t, stage_rows(t, SDC))
    assert f["pieces_per_bio"] == 3.0 and f["splits_per_bio"] == 2.0
    assert f["splits_source"] == "X events"
    t2 = EventTable.concat([q, d])
    f2 = fragmentation(t2, stage_rows(t2, SDC))
    assert f2["splits_source"] == "Q vs D counts" and f2["pieces_per_bio"] == 11 / 4
    assert f2["q_per_d"] == 4 / 11


def test_merge_share_and_empty() -> None:
    """merged_share is (M+F)/Q; an empty device gives zeros."""
    q = stream([0, 8, 16, 24], 8, action="Q")
    q.action[1:3] = ACTION_CODES["M"]
    f = fragmentation(q, stage_rows(q, make_dev(8, 0)))
    assert f["merges"] == 2 and f["merged_share"] == 1.0  # 2 M over 2 Q
    e = EventTable.empty()
    fe = fragmentation(e, stage_rows(e, make_dev(8, 0)))
    assert fe["requests"] == 0 and fe["sandwiched"] == 0 and np.isfinite(fe["below_max_share"])


def test_seed001_ftrace_lines_parsed_and_analyzed(tmp_path) -> None:
    """Seed 001's quoted ftrace lines, parsed by the traces package: 3 sandwiched, 3 pieces/bio."""
    from pathlib import Path

    from analyzer_helpers import SEED_COPY_DIR, SEED_DIR

    from workers.analyzers import analyze
    from workers.traces import ingest

    seed = SEED_DIR / "001_09b45f5988e8096b.txt"
    if seed.exists():
        lines = seed.read_text(encoding="utf-8").splitlines()
        start = next(i for i, ln in enumerate(lines) if ln.startswith("block_bio_queue: 8,32"))
        excerpt = [ln for ln in lines[start:start + 23] if ln.startswith("block_")]
    else:
        excerpt = Path(SEED_COPY_DIR / "001_ftrace_excerpt.txt").read_text().splitlines()
    f = tmp_path / "seed001.txt"
    f.write_text("\n".join(excerpt) + "\n")
    res = analyze(ingest([f]).table)
    frag = res["devices"]["8,32"]["fragmentation"]
    assert frag["sandwiched"] == 3 and frag["sandwiched_sizes"]["sectors"] == [64, 96]
    assert frag["pieces_per_bio"] == 3.0 and frag["splits_source"] == "X events"
    assert res["devices"]["8,32"]["stage"] == "D"
