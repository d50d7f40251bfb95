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

from workers.analyzers.common import (
    SECTOR_BYTES,
    StageRows,
    ValueCounts,
    exact_sum,
    log2_counts,
    median_from_counts,
    stage_rows,
)
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


def histogram_counts(abs_sectors: npt.NDArray[np.int64],
                     counts: npt.NDArray[np.int64] | None = None) -> tuple[int, ...]:
    """Bucket counts of absolute distances (sectors) in the KB power-of-two buckets (of the
    multiset ``abs_sectors`` x ``counts`` when counts are given).

    A distance of d sectors is d/2 KB; bucket 0 is ``[0, 1) KB`` (d < 2), bucket k >= 1 is
    ``[2**(k-1), 2**k) KB``, i.e. the bit length of ``d >> 1`` (integer KB, exact because every
    edge is a whole number of KB). Trailing empty buckets are dropped.
    """
    if len(abs_sectors) == 0:
        return ()
    c = np.ones(len(abs_sectors), np.int64) if counts is None else counts
    hist = np.asarray(log2_counts(np.asarray(abs_sectors, dtype=np.int64) >> 1, c))
    nz = np.flatnonzero(hist)
    return tuple(int(x) for x in hist[: int(nz[-1]) + 1])


def btt_seek_distances(sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any],
                       last: tuple[int, int] = (0, 0)) -> npt.NDArray[np.int64]:
    """btt's signed ``seek_dist`` for every request, the first measured from ``last`` (the
    previous request's start and end: sector 0 for the first request of a stream).

    Follows btt/seek.c ``seek_dist`` (non ``-a`` mode): overlap with the previous request
    (its start or its end inside ``[last_start, last_end]``) is 0; forward is
    ``start - last_end``; backward is ``start - last_start``. BIT_END is ``sector + nr``.
    """
    start = np.asarray(sectors).astype(np.int64)
    end = start + np.asarray(nr_sectors).astype(np.int64)
    if len(start) == 0:
        return np.zeros(0, dtype=np.int64)
    last_start = np.concatenate(([last[0]], start[:-1]))
    last_end = np.concatenate(([last[1]], end[:-1]))
    overlap = ((last_start <= start) & (start <= last_end)) | (
        (last_start <= end) & (end <= last_end))
    return np.where(overlap, 0, np.where(start > last_end, start - last_end, start - last_start))


def _first_distinct(values: npt.NDArray[np.int64], into: list[int], k: int = 3) -> None:
    """Append to ``into`` the values of ``values`` not in it yet, in order of first
    appearance, until it holds ``k`` (the insertion order btt's rb-tree is shaped by)."""
    if len(into) >= k or not len(values):
        return
    vals, first = np.unique(values, return_index=True)
    for v in vals[np.argsort(first, kind="stable")]:
        if int(v) not in into:
            into.append(int(v))
            if len(into) >= k:
                return


def btt_median(abs_dist: npt.NDArray[np.int64]) -> int:
    """btt's ``seeki_median`` of one array of distances (see :func:`btt_median_of`)."""
    first: list[int] = []
    _first_distinct(np.asarray(abs_dist, dtype=np.int64), first)
    return btt_median_of(*ValueCounts.of(abs_dist), first)


def btt_median_of(values: npt.NDArray[np.int64], counts: npt.NDArray[np.int64],
                  inserted: list[int]) -> int:
    """btt's ``seeki_median``, quirk included, from the distances' value -> count map and
    the first (up to 3) distinct distances in order of appearance.

    ``__median`` visits the rb-tree of distinct distances in pre-order with ``sofar`` stuck at
    0, so it returns the first node in pre-order whose own count is ``>= nseeks // 2``, else 0.
    At most one value qualifies unless at most three distinct values exist (two values each
    holding about half, or nseeks <= 3), and then the tree shape decides: it is rebuilt here
    from the insertion order (first appearance) the way ``rb_insert_color`` shapes <= 3 nodes.
    """
    n = int(counts.sum())
    if n == 0:
        return 0
    target = n // 2
    qualifying = values[counts >= target]
    if len(qualifying) == 0:
        return 0
    if len(qualifying) == 1:
        return int(qualifying[0])
    # Two or more qualify: then there are at most 3 distinct values; rebuild the tree.
    ok = {int(v) for v in qualifying}
    for v in _rb_preorder(list(inserted)):
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


class SeekAcc:
    """The seek statistics of one request stream fed in consecutive pieces (issue order).

    Carried across pieces: the previous request (the seed-000 distance of a piece's first
    request is measured from it; btt's from its start and end, sector 0 before the first), the
    value -> count maps of the absolute distances (median, modes, histogram) and the first
    distinct btt distances (the rb-tree's shape). :func:`seek_from_arrays` is one piece.
    """

    def __init__(self) -> None:
        self.requests = 0
        self.backward = 0
        self._prev: tuple[int, int] | None = None
        self._absd = ValueCounts()
        self._btt = ValueCounts()
        self._btt_first: list[int] = []

    def add(self, sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any]) -> None:
        s = np.asarray(sectors).astype(np.int64)
        n = np.asarray(nr_sectors).astype(np.int64)
        if not len(s):
            return
        last = (0, 0)
        if self._prev is None:
            signed = seek_distances(s, n)
        else:
            ps, pn = self._prev
            last = (ps, ps + pn)
            signed = seek_distances(np.concatenate(([ps], s)), np.concatenate(([pn], n)))
        self._absd.add(np.abs(signed))
        self.backward += int(np.count_nonzero(signed < 0))
        del signed
        bd = np.abs(btt_seek_distances(s, n, last))
        _first_distinct(bd, self._btt_first)
        self._btt.add(bd)
        self._prev = (int(s[-1]), int(n[-1]))
        self.requests += len(s)

    def btt_stats(self) -> BttSeekStats:
        """btt's nseeks, mean, median (quirky) and modes over the stream."""
        values, counts = self._btt.finish()
        nseeks = int(counts.sum())
        if nseeks == 0:
            return BttSeekStats(0, 0.0, 0, (), 0)
        top = int(counts.max())
        modes = tuple(int(v) for v in values[counts == top])
        return BttSeekStats(nseeks=nseeks, mean=exact_sum(values, counts) / nseeks,
                            median=btt_median_of(values, counts, self._btt_first),
                            modes=modes, mode_count=top)

    def result(self, *, dev: str = "", name: str = "", stage: str | None = "D",
               requested_stage: str | None = None, fallback: bool = False,
               zero_length: int = 0) -> SeekHistogram:
        values, counts = self._absd.finish()
        cnt = int(counts.sum())
        zero = counts[values == 0]
        return SeekHistogram(
            dev=dev, name=name or dev, stage=stage, requested_stage=requested_stage,
            fallback=fallback, cnt=cnt, zero_cnt=int(zero.sum()),
            counts=histogram_counts(values, counts),
            mean_bytes=(exact_sum(values, counts) / cnt) * SECTOR_BYTES if cnt else 0.0,
            median_bytes=float(median_from_counts(values, counts) * SECTOR_BYTES) if cnt
            else 0.0,
            max_bytes=int(values[-1]) * SECTOR_BYTES if cnt else 0,
            backward=self.backward, zero_length=zero_length, btt=self.btt_stats())


def btt_stats(sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any]) -> BttSeekStats:
    """btt's nseeks, mean, median (quirky) and modes over one request stream."""
    acc = SeekAcc()
    acc.add(sectors, nr_sectors)
    return acc.btt_stats()


def seek_from_arrays(sectors: npt.NDArray[Any], nr_sectors: npt.NDArray[Any], *,
                     dev: str = "", name: str = "", stage: str | None = "D",
                     requested_stage: str | None = None, fallback: bool = False,
                     zero_length: int = 0) -> SeekHistogram:
    """The histogram of a request stream already in issue order (sectors, lengths)."""
    acc = SeekAcc()
    acc.add(sectors, nr_sectors)
    return acc.result(dev=dev, name=name, stage=stage, requested_stage=requested_stage,
                      fallback=fallback, zero_length=zero_length)


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
