"""Analyzers over an EventTable: one results dict per trace (real or predicted alike).

``analyze(table)`` returns JSON-serializable, chart-ready results with stable keys (the layout is
documented in docs/analyzers.md)::

    {"version": 1,
     "span_ns": ..., "time_known": true, "events": n,
     "devices": {"8,0": {"name": "sda", "stage": "D", "stage_note": "stage D",
                         "events": n, "actions": {"Q": .., "D": ..},
                         "seek": {...}, "sizes": {...}, ...}, ...},
     "summaries": {...}}

Every per-device section is computed from the rows of one stage (D, else I, G, Q, or the stage
in ``AnalyzeConfig.stage``), in time order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from workers.analyzers.common import (
    SELECTABLE_STAGES,
    StageMatcher,
    device_rows,
    rows_by_device,
    stage_rows,
)
from workers.analyzers.fragmentation import fragmentation
from workers.analyzers.latency import LATENCY_PAIRS, distribution, latencies
from workers.analyzers.lba import lba_scatter
from workers.analyzers.lineage import RECORD_PAIRS, issue_rows, lineage, record_pairs
from workers.analyzers.occupancy import occupancy
from workers.analyzers.ordering import ordering, remap_order
from workers.analyzers.partial import (
    Partials,
    action_counts,
    size_stats_of,
    stage_partial,
    time_series_of,
)
from workers.analyzers.seek import SeekHistogram, seek_for_rows, seek_histogram
from workers.analyzers.sizes import DEFAULT_PERCENTILES, size_stats
from workers.analyzers.throughput import (
    IOSTAT_COLUMNS,
    iostat_row,
    mean_rows,
    nice_bin_ns,
    time_series,
)
from workers.events import ACTION_LETTERS, EventTable, dev_str, parse_dev

RESULTS_VERSION = 1
#: Requests followed by the lineage records (``lineage``'s default).
LINEAGE_LIMIT = 20000

__all__ = ["AnalyzeConfig", "SeekHistogram", "analyze", "seek_histogram", "RESULTS_VERSION"]


@dataclass(frozen=True)
class AnalyzeConfig:
    """What to analyze and how finely.

    Attributes:
        stage: Q/G/I/D/C for every device, or None for D with fallback to I, G, Q.
        devices: ``"8,0"`` strings to restrict to; None analyzes every device in the table.
        percentiles: percentiles reported for sizes and latencies.
        time_bins: target number of bins of the throughput time series.
        lba_max_points: cap on points of the LBA-vs-time scatter per device.
        first_n: issue-order lines kept by the ordering analyzer.
        chunk_sectors: RAID chunk for alignment checks (None: from device limits if known).
        max_sectors: max request size in sectors (None: from limits, else largest seen).
    """

    stage: str | None = None
    devices: tuple[str, ...] | None = None
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    time_bins: int = 200
    lba_max_points: int = 20000
    first_n: int = 50
    chunk_sectors: int | None = None
    max_sectors: int | None = None

    def __post_init__(self) -> None:
        if self.stage is not None and self.stage not in SELECTABLE_STAGES:
            raise ValueError(f"unknown stage {self.stage!r}")
        if self.time_bins < 1 or self.lba_max_points < 1 or self.first_n < 0:
            raise ValueError("time_bins and lba_max_points must be >= 1, first_n >= 0")


def _action_counts(table: EventTable, rows: np.ndarray[Any, Any]) -> dict[str, int]:
    counts = np.bincount(table.action[rows], minlength=256)
    return {ACTION_LETTERS.get(int(c), str(int(c))): int(counts[c])
            for c in np.flatnonzero(counts)}


@dataclass(frozen=True)
class _Context:
    """What every device's analysis shares: the matcher, the interval and the time bins."""

    matcher: StageMatcher
    t0: int
    interval_ns: int
    bin_ns: int
    nbins: int
    timed: bool = True


def analyze_device(table: EventTable, dev: int, config: AnalyzeConfig,
                   ctx: _Context, dev_rows: np.ndarray[Any, Any],
                   partials: Partials | None = None) -> dict[str, Any]:
    """All sections for one device (``dev_rows``: its rows in the table).

    With ``partials`` (merged per-shard results, :mod:`workers.analyzers.partial`) the action
    counts, the size statistics and the throughput series are taken from them when their row
    counts are the table's (a cheap check that they describe these very rows); every other
    section needs the merged time order and is computed here.
    """
    sr = stage_rows(table, dev, config.stage, dev_rows=dev_rows)
    dp = partials.devices.get(dev) if partials is not None else None
    sp = stage_partial(dp, sr.stage)
    usable = (partials is not None and (dp.events if dp is not None else 0) == len(dev_rows)
              and sp.rows == len(sr.rows) and sp.zero_length == sr.zero_length)
    series = (time_series_of(partials, dev, sr.stage, ctx.t0, ctx.bin_ns, ctx.nbins)
              if usable and partials is not None and ctx.timed else None)
    if series is None:
        series = time_series(table, dev, sr.rows, ctx.t0, ctx.bin_ns, ctx.nbins,
                             dev_rows=dev_rows)
    if not ctx.timed:
        for k in ("read_mbps", "write_mbps", "read_iops", "write_iops"):
            series[k] = []
    row = iostat_row(table, dev, ctx.matcher, ctx.interval_ns, dev_rows=dev_rows)
    if row["note"] == "no C events" and sr.stage != "D":
        # a device with none of the stages (named by the manifest only, or only P/U events)
        # says so instead of "stage None"
        row["note"] = (f"no D/C events: stage {sr.stage}" if sr.stage is not None
                       else "no events" if not len(dev_rows) else "no Q/G/I/D/C events")
    series["iostat"] = row
    # no interval (no timestamps, or one instant): no rate, rather than a rate of 0
    series["mb_per_s"] = series["total_mb"] / (ctx.interval_ns / 1e9) if ctx.interval_ns else None
    series["iops"] = series["total_ios"] / (ctx.interval_ns / 1e9) if ctx.interval_ns else None
    return {
        "name": table.device_name(dev),
        "stage": sr.stage,
        "stage_note": sr.describe(),
        "fallback": sr.fallback,
        "events": int(len(sr.rows)),
        "zero_length": sr.zero_length,
        "actions": action_counts(dp) if usable else _action_counts(table, dev_rows),
        "seek": seek_for_rows(table, sr).to_json(),
        "sizes": (size_stats_of(sp, qs=config.percentiles) if usable
                  else size_stats(table, sr, qs=config.percentiles)).to_json(),
        "fragmentation": fragmentation(table, sr, max_sectors=config.max_sectors,
                                       chunk_sectors=config.chunk_sectors, dev_rows=dev_rows),
        "throughput": series,
        "latency": (latencies(table, dev, ctx.matcher, config.percentiles) if ctx.timed
                    else {f"{a}2{b}": distribution(np.zeros(0, dtype=np.int64), ())
                          for a, b in LATENCY_PAIRS}),
        "ordering": ordering(table, sr, first_n=config.first_n),
        "lba": lba_scatter(table, sr, ctx.t0, max_points=config.lba_max_points,
                           timed=ctx.timed),
        "occupancy": (occupancy(table, dev, ctx.matcher, ctx.t0, ctx.bin_ns, ctx.nbins)
                      if ctx.timed else None),
    }


def analyze(table: EventTable, *, config: AnalyzeConfig | None = None,
            summaries: Mapping[str, Any] | None = None,
            partials: Partials | None = None) -> dict[str, Any]:
    """Run every analyzer on every device of ``table``.

    Args:
        table: parsed or predicted events.
        config: what to analyze; defaults to :class:`AnalyzeConfig()`.
        summaries: summary-format rows from ingest (``{"iostat": [...], "fio": [...]}``), passed
            through unchanged so the page can show them beside the computed numbers.
        partials: the merged per-shard partial results of these rows (parallel ingest,
            :func:`workers.analyzers.partial.merge_partials`, in the table's time base): the
            sections that add up are taken from them instead of recomputed; the results are
            identical either way.

    Returns:
        The results dict (see the module docstring and docs/analyzers.md).
    """
    config = config or AnalyzeConfig()
    devs = table.device_ids()
    if config.devices is not None:
        wanted = {parse_dev(d) for d in config.devices}
        devs = [d for d in devs if d in wanted]
    t = table.time_ns
    if len(t) and table.time_known:
        t0, t1 = int(t.min()), int(t.max())
    else:
        t0, t1 = 0, max(len(t) - 1, 0)
    span = t1 - t0
    bin_ns = nice_bin_ns(span, config.time_bins)
    nbins = max(1, -(-span // bin_ns) if span else 1)
    if span and span % bin_ns == 0:
        nbins += 1  # the last event sits exactly on the end edge
    # without timestamps (ftrace lines quoted in a mail) order is known but time is not:
    # no rates, no latencies, and the LBA scatter is drawn against issue order
    # One device at a time: its rows, its matcher (the whole-table matcher's pairs of that
    # device, see StageMatcher) and its sections, then they are dropped, so the per-row
    # state of the pairing is held for one device, not for the table (memory at 100M events).
    # The lineage records need pairs of their issues on every device: collected on the way.
    if partials is not None and partials.events != len(table):
        partials = None  # not these rows: compute everything from the table
    d_rows = issue_rows(table, LINEAGE_LIMIT)
    lin_pairs: dict[tuple[str, str], dict[int, int]] = {(a, b): {} for a, b, _ in RECORD_PAIRS}
    lin_devs = {int(d) for d in np.unique(table.dev[d_rows])}
    todo = sorted(set(devs) | lin_devs)
    # a few devices: one scan each when its turn comes (the rows of one device held at a
    # time); many: one sort (rows_by_device)
    by_dev = rows_by_device(table, todo) if len(todo) > 16 else {}
    devices: dict[str, Any] = {}
    for d in todo:
        dev_rows = by_dev.pop(d) if by_dev else device_rows(table, d)
        matcher = StageMatcher(table, rows=dev_rows)
        if d in devs:
            ctx = _Context(matcher, t0, span if table.time_known else 0, bin_ns, nbins,
                           table.time_known)
            devices[dev_str(d)] = analyze_device(table, d, config, ctx, dev_rows,
                                                 partials)
        if d in lin_devs:
            on_dev = d_rows[table.dev[d_rows] == d]
            for key, found in record_pairs(matcher, on_dev).items():
                lin_pairs[key].update(found)
        del matcher, dev_rows
    devices = {dev_str(d): devices[dev_str(d)] for d in devs}
    remaps = remap_order(table, first_n=config.first_n)
    rows = {k: v["throughput"]["iostat"] for k, v in devices.items()}
    names = {k: v["name"] for k, v in devices.items()}
    return {
        "version": RESULTS_VERSION,
        "events": len(table),
        "time_known": table.time_known,
        "t0_ns": t0,
        "span_ns": span,
        "bin_ns": bin_ns,
        "nbins": nbins,
        "stage_requested": config.stage,
        "devices": devices,
        "iostat": {"columns": list(IOSTAT_COLUMNS), "rows": rows,
                   "groups": mean_rows(rows, names, exclude=tuple(remaps))},
        "remaps": remaps,
        "lineage": lineage(table, None, limit=LINEAGE_LIMIT, qs=config.percentiles,
                           pairs=lin_pairs),
        "summaries": dict(summaries or {}),
    }
