"""Request sizes at one stage of one device: histogram, exact-size table, percentiles.

Seed 000's ``rareq-sz`` (93 -> 112 KB on the member disks) and seed 001's 4 KB..96 KB fragments
between 512 KB requests are both statements about this distribution, so it is kept in two
forms: power-of-two KB buckets for the chart and the exact sizes (most frequent first, capped)
so a fragment size such as 4 KB or 96 KB shows up by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import (
    SECTOR_BYTES,
    StageRows,
    ValueCounts,
    exact_sum,
    log2_counts,
    percentiles_from_counts,
)
from workers.events import RWBS_WRITE, EventTable

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)
MAX_EXACT_SIZES = 64


@dataclass(frozen=True)
class SizeStats:
    """Sizes of the requests of one device at one stage (all in bytes unless named KB).

    Attributes:
        count: requests with data (0-sector flushes excluded).
        reads, writes: requests by direction (blkparse: everything not a write is a read).
        bytes_total, read_bytes, write_bytes: sums.
        mean, min, max: request size in bytes.
        pct: percentiles of the size in bytes (observed values).
        edges_kb, counts: power-of-two histogram ``[0,1) [1,2) [2,4) ...`` KB.
        exact_sectors, exact_counts: the most frequent exact sizes (sectors), by count desc.
        exact_other: requests whose size is not among the listed exact sizes.
        distinct: number of distinct sizes seen.
    """

    count: int
    reads: int
    writes: int
    bytes_total: int
    read_bytes: int
    write_bytes: int
    mean: float
    min: int
    max: int
    pct: dict[str, float]
    edges_kb: tuple[int, ...]
    counts: tuple[int, ...]
    exact_sectors: tuple[int, ...]
    exact_counts: tuple[int, ...]
    exact_other: int
    distinct: int

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count, "reads": self.reads, "writes": self.writes,
            "bytes": self.bytes_total, "read_bytes": self.read_bytes,
            "write_bytes": self.write_bytes, "mean_bytes": self.mean, "min_bytes": self.min,
            "max_bytes": self.max, "percentiles_bytes": dict(self.pct),
            "edges_kb": list(self.edges_kb), "counts": list(self.counts),
            "exact": {"sectors": list(self.exact_sectors), "counts": list(self.exact_counts),
                      "other": self.exact_other, "distinct": self.distinct},
        }


def size_stats_from_counts(values: npt.NDArray[np.int64], vc: npt.NDArray[np.int64], *,
                           writes: int, write_bytes: int,
                           qs: tuple[float, ...] = DEFAULT_PERCENTILES,
                           max_exact: int = MAX_EXACT_SIZES) -> SizeStats:
    """Size statistics from the value -> count map of request sizes (sectors, ascending) and
    the write count and bytes: every number is a function of that multiset, so the whole
    table, a chunked pass and merged shard partials (:mod:`workers.analyzers.partial`) all
    come here."""
    count = int(vc.sum())
    if count == 0:
        return SizeStats(0, 0, 0, 0, 0, 0, 0.0, 0, 0, {}, (0,), (), (), (), 0, 0)
    b = values * SECTOR_BYTES
    total = exact_sum(b, vc)
    hist = log2_counts(values >> 1, vc)  # whole KB, bucket edges as in the seek histogram
    edges = tuple([0] + [1 << i for i in range(len(hist))])
    order = np.lexsort((values, -vc))[:max_exact]
    exact_c = tuple(int(c) for c in vc[order])
    return SizeStats(
        count=count, reads=count - writes, writes=writes, bytes_total=total,
        read_bytes=total - write_bytes, write_bytes=write_bytes,
        mean=float(total / count), min=int(b[0]), max=int(b[-1]),
        pct=percentiles_from_counts(b, vc, qs), edges_kb=edges,
        counts=tuple(hist), exact_sectors=tuple(int(v) for v in values[order]),
        exact_counts=exact_c, exact_other=int(count - sum(exact_c)), distinct=len(values))


class SizeAcc:
    """Sizes of a request stream fed in pieces: the size multiset and the write totals."""

    def __init__(self) -> None:
        self.sizes = ValueCounts()
        self.writes = 0
        self.write_bytes = 0

    def add(self, nr_sectors: npt.NDArray[Any], rwbs: npt.NDArray[Any]) -> None:
        n = np.asarray(nr_sectors).astype(np.int64)
        w = (np.asarray(rwbs) & RWBS_WRITE) != 0
        self.sizes.add(n)
        self.writes += int(np.count_nonzero(w))
        self.write_bytes += exact_sum(n[w]) * SECTOR_BYTES

    def result(self, qs: tuple[float, ...] = DEFAULT_PERCENTILES,
               max_exact: int = MAX_EXACT_SIZES) -> SizeStats:
        values, counts = self.sizes.finish()
        return size_stats_from_counts(values, counts, writes=self.writes,
                                      write_bytes=self.write_bytes, qs=qs, max_exact=max_exact)


def size_stats_from_arrays(nr_sectors: npt.NDArray[Any], rwbs: npt.NDArray[Any], *,
                           qs: tuple[float, ...] = DEFAULT_PERCENTILES,
                           max_exact: int = MAX_EXACT_SIZES) -> SizeStats:
    """Size statistics of a request stream given its lengths (sectors) and RWBS bits."""
    acc = SizeAcc()
    acc.add(nr_sectors, rwbs)
    return acc.result(qs=qs, max_exact=max_exact)


def size_stats(table: EventTable, sr: StageRows, *,
               qs: tuple[float, ...] = DEFAULT_PERCENTILES) -> SizeStats:
    """Size statistics of already-selected stage rows."""
    return size_stats_from_arrays(table.nr_sectors[sr.rows], table.rwbs[sr.rows], qs=qs)
