"""Ordering: backward dispatches overall and per process, remap order, first lines."""

from __future__ import annotations

import numpy as np
from analyzer_helpers import stream

from workers.analyzers.common import stage_rows
from workers.analyzers.ordering import ordering, remap_order
from workers.events import ACT_REMAP, EventTable, make_dev

SDA = make_dev(8, 0)
MD0 = make_dev(9, 0)


def test_seed000_issue_order_has_one_backward() -> None:
    """Pieces 0, 1M, 512k, 1536k (seed 000, before): one backward dispatch of 1 MB."""
    kb = 2  # sectors per KB
    t = stream([0, 1024 * kb, 512 * kb, 1536 * kb], 512 * kb)
    o = ordering(t, stage_rows(t, SDA))
    assert o["backward"] == 1 and o["backward_share"] == 1 / 3
    assert o["backward_distance_mean_bytes"] == 1024 * 1024
    # 1024 KB -> bucket [1024, 2048) KB, index 11
    assert o["backward_distance"]["counts"][11] == 1


def test_per_process_backward_vs_own_stream() -> None:
    """Two interleaved sequential processes: the disk sees backward seeks, each own stream none."""
    sectors = [1000, 0, 1008, 8, 1016, 16]
    t = stream(sectors, 8, pids=[1, 2, 1, 2, 1, 2])
    o = ordering(t, stage_rows(t, SDA))
    per = {p["pid"]: p for p in o["per_process"]}
    assert o["backward"] == 3
    assert per[2]["backward"] == 3 and per[1]["backward"] == 0
    assert per[1]["backward_own"] == 0 and per[2]["backward_own"] == 0


def test_overlap_counts_as_backward_and_first_lines() -> None:
    """A request starting inside the previous one is backward; first N lines kept."""
    t = stream([0, 4, 100], 8)
    o = ordering(t, stage_rows(t, SDA), first_n=2)
    assert o["backward"] == 1
    assert [ln["sector"] for ln in o["first"]] == [0, 4] and o["first"][0]["action"] == "D"


def test_empty_and_single() -> None:
    """No requests or one request: no backward dispatches, no error."""
    e = EventTable.empty()
    assert ordering(e, stage_rows(e, SDA))["backward"] == 0
    one = stream([5], 8)
    assert ordering(one, stage_rows(one, SDA))["backward_share"] == 0.0


def test_remap_order_across_members() -> None:
    """A events onto two members: the original-sector order and out-of-order count."""
    orig = [0, 2048, 1024, 3072]
    members = [make_dev(8, 0), make_dev(8, 16), make_dev(8, 0), make_dev(8, 16)]
    n = len(orig)
    t = EventTable.from_columns(time_ns=np.arange(n), dev=members, action=np.full(n, ACT_REMAP),
                                sector=[100, 100, 612, 612], nr_sectors=np.full(n, 1024),
                                aux=orig, aux2=np.full(n, MD0))
    r = remap_order(t)["9,0"]
    assert r["remaps"] == 4 and r["out_of_order"] == 1
    assert r["members"] == {"8,0": 2, "8,16": 2}
    assert [x["orig_sector"] for x in r["first"]] == orig
