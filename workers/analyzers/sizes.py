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

from workers.analyzers.common import SECTOR_BYTES, StageRows, log2_bucket, percentiles
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


def size_stats_from_arrays(nr_sectors: npt.NDArray[Any], rwbs: npt.NDArray[Any], *,
                           qs: tuple[float, ...] = DEFAULT_PERCENTILES,
                           max_exact: int = MAX_EXACT_SIZES) -> SizeStats:
    """Size statistics of a request stream given its lengths (sectors) and RWBS bits."""
    n = np.asarray(nr_sectors).astype(np.int64)
    w = (np.asarray(rwbs) & RWBS_WRITE) != 0
    count = len(n)
    if count == 0:
        return SizeStats(0, 0, 0, 0, 0, 0, 0.0, 0, 0, {}, (0,), (), (), (), 0, 0)
    b = n * SECTOR_BYTES
    total = int(b.sum())
    wb = int(b[w].sum())
    k = log2_bucket(n >> 1)  # whole KB, bucket edges as in the seek histogram
    counts = np.bincount(k)
    edges = tuple([0] + [1 << i for i in range(len(counts))])
    if int(n.max()) < (1 << 22):  # sizes are small integers: count them without sorting
        bc = np.bincount(n)
        values = np.flatnonzero(bc)
        vc = bc[values]
    else:
        values, vc = np.unique(n, return_counts=True)
    order = np.lexsort((values, -vc))[:max_exact]
    exact_s = tuple(int(v) for v in values[order])
    exact_c = tuple(int(c) for c in vc[order])
    return SizeStats(
        count=count, reads=int(count - int(w.sum())), writes=int(w.sum()), bytes_total=total,
        read_bytes=total - wb, write_bytes=wb, mean=float(total / count), min=int(b.min()),
        max=int(b.max()), pct=percentiles(b, qs), edges_kb=edges,
        counts=tuple(int(c) for c in counts), exact_sectors=exact_s, exact_counts=exact_c,
        exact_other=int(count - sum(exact_c)), distinct=len(values))


def size_stats(table: EventTable, sr: StageRows, *,
               qs: tuple[float, ...] = DEFAULT_PERCENTILES) -> SizeStats:
    """Size statistics of already-selected stage rows."""
    return size_stats_from_arrays(table.nr_sectors[sr.rows], table.rwbs[sr.rows], qs=qs)
