"""Per-shard partial results merged exactly (workers/analyzers/partial.py): for every mergeable
analyzer, partials of the shards + merge == the analyzer on the whole table, and the full results
JSON with partials == without."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workers.analyzers import AnalyzeConfig, analyze
from workers.analyzers.common import percentiles, rows_by_device, stage_rows
from workers.analyzers.partial import (
    STAGES,
    Partials,
    action_counts,
    fine_width,
    merge_partials,
    partials_of,
    percentiles_from_counts,
    size_stats_of,
    stage_partial,
    time_series_of,
)
from workers.analyzers.sizes import size_stats
from workers.analyzers.throughput import SeriesAcc, nice_bin_ns, time_series
from workers.events import ACTION_LETTERS
from workers.traces import ingest
from workers.traces.shards import bundle_manifest, first_event_time, parse_shard
from workers.traces.synth import realistic_table

DEMO = Path(__file__).resolve().parents[3] / "reviewapp" / "demo"


def _action_counts(table, rows) -> dict[str, int]:
    """The table's action counts of ``rows``, by letter."""
    counts = np.bincount(table.action[rows], minlength=256)
    return {ACTION_LETTERS.get(int(c), str(int(c))): int(counts[c])
            for c in np.flatnonzero(counts)}


def _grid(table):
    t0, t1 = int(table.time_ns.min()), int(table.time_ns.max())
    span = t1 - t0
    bin_ns = nice_bin_ns(span, 200)
    nbins = max(1, -(-span // bin_ns) if span else 1) + (1 if span and span % bin_ns == 0 else 0)
    return t0, bin_ns, nbins


def check_every_section(table, merged: Partials) -> int:
    """Each mergeable section from the partials equals the analyzer on the table; returns
    the number of (device, stage) sections compared."""
    t0, bin_ns, nbins = _grid(table)
    devs = table.device_ids()
    compared = 0
    for dev, rows in rows_by_device(table, devs).items():
        dp = merged.devices.get(dev)
        assert action_counts(dp) == _action_counts(table, rows)
        for stage in (None, *STAGES):
            sr = stage_rows(table, dev, stage, dev_rows=rows)
            sp = stage_partial(dp, sr.stage)
            assert (sp.rows, sp.zero_length) == (len(sr.rows), sr.zero_length)
            assert size_stats_of(sp).to_json() == size_stats(table, sr).to_json()
            assert time_series_of(merged, dev, sr.stage, t0, bin_ns, nbins) == time_series(
                table, dev, sr.rows, t0, bin_ns, nbins, dev_rows=rows)
            compared += 1
    return compared


def test_partials_of_per_cpu_shards_merge_to_the_whole_table(monkeypatch):
    """A synthetic 4-CPU stream of 2 devices split by CPU (as blktrace writes it): every
    mergeable section of the merged partials equals the analyzer on the whole table, and
    analyze(partials=...) takes those sections from them (not from the table)."""
    table = realistic_table(60_000, seed=7, cpus=4, devices=2)
    table = table.sorted_by_time()
    anchor = int(table.time_ns.min())
    shards = [table.take(np.flatnonzero(table.cpu == c)) for c in range(4)]
    parts = [Partials.from_bytes(partials_of(s, anchor_ns=anchor).to_bytes()) for s in shards]
    widths = {p.grid.width_ns for p in parts if p.grid is not None}
    assert len(parts) == 4 and widths  # the shards binned on their own fine grids
    merged = merge_partials(parts)
    assert merged.events == len(table)
    assert check_every_section(table, merged) == 2 * 6
    plain = json.dumps(analyze(table), sort_keys=True)

    def never(*a, **k):
        raise AssertionError("computed from the table although partials were given")
    from workers.analyzers.sizes import SizeAcc

    # the sizes and the series are not accumulated from the rows at all
    monkeypatch.setattr(SizeAcc, "add", never)
    monkeypatch.setattr(SeriesAcc, "add", never)
    assert json.dumps(analyze(table, partials=merged), sort_keys=True) == plain


def test_fine_width_divides_every_longer_spans_bin():
    """The fine grid of a shard divides the bin width of any span at least as long."""
    rng = np.random.default_rng(3)
    for span in rng.integers(1, 10**13, 2000):
        w = fine_width(int(span), 200)
        for longer in (int(span), int(span) * 3 + 17, int(span) * 1000):
            assert nice_bin_ns(longer, 200) % w == 0


def test_percentiles_from_counts_equal_numpy_inverted_cdf():
    rng = np.random.default_rng(5)
    qs = (0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0)
    for n in (1, 2, 3, 7, 100, 1001, 99_999):
        values = rng.choice([1, 8, 9, 128, 256, 1024, 2048, 65535], size=n)
        u, c = np.unique(values, return_counts=True)
        assert percentiles_from_counts(u, c, qs) == percentiles(values, qs), n


def test_a_wrong_anchor_falls_back_to_the_table():
    """An anchor later than a shard's first row gives no grid; one that is not the table's
    first time is refused by the merge check: the results stay the single path's."""
    table = realistic_table(8_000, seed=2).sorted_by_time()
    t0 = int(table.time_ns.min())
    assert partials_of(table, anchor_ns=t0 + 1).grid is None
    p = partials_of(table, anchor_ns=t0 - 1000)
    _, bin_ns, nbins = _grid(table)
    dev = table.device_ids()[0]
    assert time_series_of(p, dev, "D", t0, bin_ns, nbins) is None
    assert json.dumps(analyze(table, partials=p), sort_keys=True) == json.dumps(
        analyze(table), sort_keys=True)


@pytest.mark.parametrize("capture", ["k61_W1b", "k72_W1b"])
def test_partials_of_blktrace_shards_equal_the_single_ingest(capture):
    """18 per-CPU blktrace files: each parsed as a shard, partials on its raw times anchored at
    the first event of the files' heads, moved to the merge's time base: every mergeable
    section and the full results JSON equal the single-task ingest + analyze."""
    paths = sorted((DEMO / capture).iterdir())
    names = [p.name for p in paths]
    single = ingest(paths, names=names)
    manifest, strict, shardable = bundle_manifest(paths, names)
    anchor = min(t for i in shardable
                 if (t := first_event_time(paths[i].read_bytes()[:4096])) is not None)
    parts = [parse_shard(paths[i], names[i], manifest=manifest, strict=strict) for i in shardable]
    partials = [partials_of(p.table, anchor_ns=anchor) for p in parts]
    genesis = single.table.meta["genesis_ns"]
    assert anchor == genesis  # the heads' first events hold the bundle's genesis
    merged = merge_partials([p.shifted(-genesis) for p in partials])
    assert merged.grid is not None and merged.grid.anchor_ns == 0
    assert check_every_section(single.table, merged) > 0
    config = AnalyzeConfig()
    a = analyze(single.table, config=config, summaries=single.summaries)
    b = analyze(single.table, config=config, summaries=single.summaries, partials=merged)
    assert json.dumps(b, sort_keys=True) == json.dumps(a, sort_keys=True)
