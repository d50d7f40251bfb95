"""Seek histogram, the seed 000 definition, plus btt's seek statistics beside it.

Seed 000 (Yu Kuai, "block: place split bios at the head of current->bio_list") judges the patch
by the seek distances the member disks see at the D stage::

    ABS((offset of next IO) - (offset + len of previous IO))

over reads and writes together, in issue order, printed as a power-of-two histogram in KB::

    Read|Write seek
    cnt 55175, zero cnt 25079
    >=(KB) .. <(KB) : count ratio |distribution |
    0 .. 1 : 25079 45.5% |########################################|

``0 .. 1`` counts seeks under 1 KB, ``zero cnt`` the exact zeros; rows run from ``0 .. 1`` to
the last non-empty bucket; the ratio has one decimal; the bar is ceil(40 * count / largest count)
'#' characters padded to 40 (so the largest bucket has 40).

btt (blktrace's btt/seek.c) measures differently and is reported beside it, not instead of it:
``seek_dist`` is 0 when the request overlaps the previous one, ``start - last_end`` going
forward and ``start - last_start`` going backward, and the first request is measured from
sector 0, in sectors. Its "median" (``seeki_median`` -> ``__median``) walks the rb-tree of
distinct distances in pre-order and never accumulates the counts it passes (``sofar`` is always
0), so it returns the first node in pre-order whose own count reaches ``nseeks / 2``, or 0 when
no distance is that frequent. That quirk is reproduced in :func:`btt_median` and shown next to
the true median.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import SECTOR_BYTES, StageRows, log2_bucket, stage_rows
from workers.events import EventTable, dev_str

BAR_WIDTH = 40


@dataclass(frozen=True)
class BttSeekStats:
    """btt's per-device seek numbers (btt/seek.c), in sectors.

    Attributes:
        nseeks: number of requests measured (btt counts the first one, from sector 0).
        mean: ``total_sectors / tot_seeks`` (``seeki_mean``).
        median: btt's quirky median (see the module docstring).
        modes: the most frequent distances (``seeki_mode``), ascending.
        mode_count: how often each mode occurs.
    """

    nseeks: int
    mean: float
    median: int
    modes: tuple[int, ...]
    mode_count: int

    def to_json(self) -> dict[str, Any]:
        return {"nseeks": self.nseeks, "mean_sectors": self.mean, "median_sectors": self.median,
                "modes_sectors": list(self.modes), "mode_count": self.mode_count}


@dataclass(frozen=True)
class SeekHistogram:
    """One device's seek histogram at one stage (seed 000 layout).

    Attributes:
        dev: ``"8,0"``.
        name: device name if known (else the same as ``dev``).
        stage: stage letter used, None when the device had no usable events.
        requested_stage: what the caller asked for (None: default D with fallback).
        fallback: True when D was missing and I/G/Q was used instead.
        cnt: number of seeks (requests - 1).
        zero_cnt: seeks of exactly 0 bytes.
        counts: bucket counts from ``0 .. 1`` to the last non-empty bucket.
        mean_bytes, median_bytes, max_bytes: of the absolute distances (true median).
        backward: seeks whose signed distance is negative (next starts below the previous end).
        zero_length: 0-sector requests (flushes) left out.
        btt: btt's statistics over the same requests.
    """

    dev: str
    name: str
    stage: str | None
    requested_stage: str | None
    fallback: bool
    cnt: int
    zero_cnt: int
    counts: tuple[int, ...]
    mean_bytes: float
    median_bytes: float
    max_bytes: int
    backward: int
    zero_length: int
    btt: BttSeekStats = field(default_factory=lambda: BttSeekStats(0, 0.0, 0, (), 0))

    @property
    def edges_kb(self) -> tuple[int, ...]:
        """Bucket edges in KB: 0, 1, 2, 4, ... (one more than ``counts``)."""
        return tuple([0] + [1 << i for i in range(len(self.counts))])

    def rows(self) -> list[tuple[int, int, int, float, str]]:
        """``(lo_kb, hi_kb, count, ratio_percent, bar)`` per bucket."""
        edges = self.edges_kb
        top = max(self.counts) if self.counts else 0
        out = []
        for i, c in enumerate(self.counts):
            ratio = 100.0 * c / self.cnt if self.cnt else 0.0
            bar = "#" * math.ceil(BAR_WIDTH * c / top) if top else ""
            out.append((edges[i], edges[i + 1], c, ratio, bar))
        return out

    def text(self) -> str:
        """The seed 000 layout, from ``Read|Write seek`` to the last non-empty bucket."""
        lines = [
            "Read|Write seek",
            f"cnt {self.cnt}, zero cnt {self.zero_cnt}",
            f"{'>=(KB)':>10} .. {'<(KB)':<10} : {'count':<10} {'ratio':>6} "
            f"|{'distribution':<{BAR_WIDTH}}|",
        ]
        for lo, hi, c, ratio, bar in self.rows():
            lines.append(f"{lo:>10} .. {hi:<10} : {c:<10} {ratio:>5.1f}% |{bar:<{BAR_WIDTH}}|")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        """Compact chart-ready form: edges and counts as parallel lists."""
        return {
            "dev": self.dev,
            "name": self.name,
            "stage": self.stage,
            "requested_stage": self.requested_stage,
            "fallback": self.fallback,
            "cnt": self.cnt,
            "zero_cnt": self.zero_cnt,
            "edges_kb": list(self.edges_kb),
            "counts": list(self.counts),
            "ratios": [round(r[3], 1) for r in self.rows()],
            # no seek at all (fewer than two requests): no distance, not a distance of 0
            "mean_bytes": self.mean_bytes if self.cnt else None,
            "median_bytes": self.median_bytes if self.cnt else None,
            "max_bytes": self.max_bytes if self.cnt else None,
            "backward": self.backward,
            "zero_length": self.zero_length,
            "btt": self.btt.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SeekHistogram:
        """Rebuild from :meth:`to_json` output (the report prints stored results)."""
        b = data.get("btt", {})
        return cls(
            dev=data["dev"], name=data.get("name", data["dev"]), stage=data.get("stage"),
            requested_stage=data.get("requested_stage"), fallback=bool(data.get("fallback")),
            cnt=int(data["cnt"]), zero_cnt=int(data["zero_cnt"]),
            counts=tuple(int(c) for c in data["counts"]),
            mean_bytes=float(data.get("mean_bytes") or 0.0),
            median_bytes=float(data.get("median_bytes") or 0.0),
            max_bytes=int(data.get("max_bytes") or 0), backward=int(data.get("backward", 0)),
            zero_length=int(data.get("zero_length", 0)),
            btt=BttSeekStats(int(b.get("nseeks", 0)), float(b.get("mean_sectors", 0.0)),
                             int(b.get("median_sectors", 0)),
                             tuple(int(m) for m in b.get("modes_sectors", [])),
                             int(b.get("mode_count", 0))),
        )


def seek_distances(sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any]
                   ) -> npt.NDArray[np.int64]:
    """Signed seed-000 distances in sectors: ``next.sector - (prev.sector + prev.nr_sectors)``."""
    s = np.asarray(sectors).astype(np.int64)
    n = np.asarray(nr_sectors).astype(np.int64)
    if len(s) < 2:
        return np.zeros(0, dtype=np.int64)
    return s[1:] - (s[:-1] + n[:-1])


def histogram_counts(abs_sectors: npt.NDArray[np.int64]) -> tuple[int, ...]:
    """Bucket counts of absolute distances (sectors) in the KB power-of-two buckets.

    A distance of d sectors is d/2 KB; bucket 0 is ``[0, 1) KB`` (d < 2), bucket k >= 1 is
    ``[2**(k-1), 2**k) KB``, i.e. the bit length of ``d >> 1`` (integer KB, exact because every
    edge is a whole number of KB). Trailing empty buckets are dropped.
    """
    if len(abs_sectors) == 0:
        return ()
    k = log2_bucket(abs_sectors >> 1)
    counts = np.bincount(k)
    nz = np.flatnonzero(counts)
    return tuple(int(c) for c in counts[: int(nz[-1]) + 1])


def btt_seek_distances(sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any]
                       ) -> npt.NDArray[np.int64]:
    """btt's signed ``seek_dist`` for every request, the first measured from sector 0.

    Follows btt/seek.c ``seek_dist`` (non ``-a`` mode): overlap with the previous request
    (its start or its end inside ``[last_start, last_end]``) is 0; forward is
    ``start - last_end``; backward is ``start - last_start``. BIT_END is ``sector + nr``.
    """
    start = np.asarray(sectors).astype(np.int64)
    end = start + np.asarray(nr_sectors).astype(np.int64)
    if len(start) == 0:
        return np.zeros(0, dtype=np.int64)
    last_start = np.concatenate(([0], start[:-1]))
    last_end = np.concatenate(([0], end[:-1]))
    overlap = ((last_start <= start) & (start <= last_end)) | (
        (last_start <= end) & (end <= last_end))
    return np.where(overlap, 0, np.where(start > last_end, start - last_end, start - last_start))


def btt_median(abs_dist: npt.NDArray[np.int64]) -> int:
    """btt's ``seeki_median``, quirk included.

    ``__median`` visits the rb-tree of distinct distances in pre-order with ``sofar`` stuck at
    0, so it returns the first node in pre-order whose own count is ``>= nseeks // 2``, else 0.
    At most one value qualifies unless at most three distinct values exist (two values each
    holding about half, or nseeks <= 3), and then the tree shape decides: it is rebuilt here
    from the insertion order (first appearance) the way ``rb_insert_color`` shapes <= 3 nodes.
    """
    n = len(abs_dist)
    if n == 0:
        return 0
    target = n // 2
    values, first, counts = np.unique(abs_dist, return_index=True, return_counts=True)
    qualifying = values[counts >= target]
    if len(qualifying) == 0:
        return 0
    if len(qualifying) == 1:
        return int(qualifying[0])
    # Two or more qualify: then there are at most 3 distinct values; rebuild the tree.
    order = np.argsort(first, kind="stable")
    inserted = [int(v) for v in values[order]]
    ok = {int(v) for v in qualifying}
    for v in _rb_preorder(inserted):
        if v in ok:
            return v
    return 0  # pragma: no cover - one of them always qualifies


def _rb_preorder(inserted: list[int]) -> list[int]:
    """Pre-order of a red-black tree after inserting <= 3 distinct keys in this order."""
    if len(inserted) <= 2:
        if len(inserted) < 2:
            return list(inserted)
        root, child = inserted
        return [root, child]
    a, b, c = inserted[:3]
    if (b < a) != (c < a):  # children on both sides of the root: no rotation
        return [a, min(b, c), max(b, c)]
    lo, mid, hi = sorted((a, b, c))  # a line or a zig-zag: rotations make the middle the root
    return [mid, lo, hi]


def btt_stats(sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any]) -> BttSeekStats:
    """btt's nseeks, mean, median (quirky) and modes over one request stream."""
    d = np.abs(btt_seek_distances(sectors, nr_sectors))
    if len(d) == 0:
        return BttSeekStats(0, 0.0, 0, (), 0)
    values, counts = np.unique(d, return_counts=True)
    top = int(counts.max())
    modes = tuple(int(v) for v in values[counts == top])
    return BttSeekStats(nseeks=len(d), mean=float(d.sum(dtype=np.float64) / len(d)),
                        median=btt_median(d), modes=modes, mode_count=top)


def seek_from_arrays(sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any], *,
                     dev: str = "", name: str = "", stage: str | None = "D",
                     requested_stage: str | None = None, fallback: bool = False,
                     zero_length: int = 0) -> SeekHistogram:
    """The histogram of a request stream already in issue order (sectors, lengths)."""
    signed = seek_distances(sectors, nr_sectors)
    absd = np.abs(signed)
    cnt = len(absd)
    return SeekHistogram(
        dev=dev, name=name or dev, stage=stage, requested_stage=requested_stage,
        fallback=fallback, cnt=cnt, zero_cnt=int(np.count_nonzero(absd == 0)),
        counts=histogram_counts(absd),
        mean_bytes=float(absd.mean() * SECTOR_BYTES) if cnt else 0.0,
        median_bytes=float(np.median(absd) * SECTOR_BYTES) if cnt else 0.0,
        max_bytes=int(absd.max()) * SECTOR_BYTES if cnt else 0,
        backward=int(np.count_nonzero(signed < 0)),
        zero_length=zero_length,
        btt=btt_stats(sectors, nr_sectors),
    )


def seek_for_rows(table: EventTable, sr: StageRows) -> SeekHistogram:
    """The histogram of already-selected stage rows (used by :func:`analyze`)."""
    return seek_from_arrays(
        table.sector[sr.rows], table.nr_sectors[sr.rows], dev=dev_str(sr.dev),
        name=table.device_name(sr.dev), stage=sr.stage, requested_stage=sr.requested,
        fallback=sr.fallback, zero_length=sr.zero_length)


def seek_histogram(table: EventTable, dev: int | str, stage: str | None = None) -> SeekHistogram:
    """Seek histogram of one device (seed 000 definition).

    Args:
        table: events of one trace (real or predicted).
        dev: dev_t or ``"8,0"``.
        stage: Q, G, I, D or C; None means D with fallback to I, G, Q (named in the result).
    """
    from workers.events import parse_dev

    d = parse_dev(dev) if isinstance(dev, str) else int(dev)
    return seek_for_rows(table, stage_rows(table, d, stage))
