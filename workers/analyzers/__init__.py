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

The work is done by :func:`workers.analyzers.stream.analyze_chunks`, which sees the table as
consecutive chunks (a huge merged trace is read that way from its column store, one chunk in
memory at a time); ``analyze`` hands it views of the table in memory, so both give the same
results by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from workers.analyzers.config import LINEAGE_LIMIT, RESULTS_VERSION, AnalyzeConfig
from workers.analyzers.partial import Partials
from workers.analyzers.seek import SeekHistogram, seek_histogram
from workers.analyzers.stream import analyze_chunks, table_chunks
from workers.events import EventTable

__all__ = ["AnalyzeConfig", "LINEAGE_LIMIT", "RESULTS_VERSION", "SeekHistogram", "analyze",
           "analyze_chunks", "seek_histogram"]


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
    t = table.time_ns
    if table.time_known and len(t) > 1 and not bool(np.all(t[1:] >= t[:-1])):
        # issue order is time order (ties keep table order): a stable sort of the whole
        # table orders every device's and every stage's rows as the analyzers read them
        table = table.take(np.argsort(t, kind="stable"))
    return analyze_chunks(lambda: table_chunks(table), config=config, summaries=summaries,
                          partials=partials)
