"""What an analysis computes (:class:`AnalyzeConfig`) and the constants of its results."""

from __future__ import annotations

from dataclasses import dataclass

from workers.analyzers.common import SELECTABLE_STAGES
from workers.analyzers.sizes import DEFAULT_PERCENTILES

RESULTS_VERSION = 1
#: Requests followed by the lineage records (``lineage``'s default).
LINEAGE_LIMIT = 20000


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
