"""Helpers shared by the analyzers: picking one stage of one device, in issue order.

Every analyzer looks at one stage per device (architecture.md): D by default, falling back to I,
G, then Q when a device has no D events, and it says which stage it used so a reviewer never
compares a D-stage histogram with a Q-stage one without knowing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.events import ACTION_CODES, STAGE_FALLBACK, EventTable

#: Stages a caller may ask for explicitly (C is allowed: a completion stream has sectors too).
SELECTABLE_STAGES: tuple[str, ...] = ("Q", "G", "I", "D", "C")

SECTOR_BYTES = 512


@dataclass(frozen=True)
class StageRows:
    """The rows of one device at one stage, ordered by time (stable), data-bearing only.

    Attributes:
        dev: the device number (kernel dev_t).
        stage: the stage letter used, or None when the device has none of the candidates.
        requested: the stage the caller asked for (None: default D with fallback).
        fallback: True when the default D was not available and another stage was used.
        rows: row indices into the table, in time order (ties keep table order).
        zero_length: events at that stage with nr_sectors == 0 (flushes), left out of ``rows``.
    """

    dev: int
    stage: str | None
    requested: str | None
    fallback: bool
    rows: npt.NDArray[np.intp]
    zero_length: int

    def describe(self) -> str:
        """Human note on the stage, e.g. ``"stage D"`` or ``"stage G (no D events)"``."""
        if self.stage is None:
            return "no Q/G/I/D events" if self.requested is None else f"no {self.requested} events"
        if self.fallback:
            return f"stage {self.stage} (no D events)"
        return f"stage {self.stage}"


def time_order(table: EventTable, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """``rows`` reordered by time, stable, so unsorted or merged input is still in issue order.

    Tables without timestamps (``time_known`` False) keep their row order: that order is the
    only issue order known.
    """
    if len(rows) < 2 or not table.time_known:
        return rows
    t = table.time_ns[rows]
    if bool(np.all(t[1:] >= t[:-1])):
        return rows
    return rows[np.argsort(t, kind="stable")]


def index_dtype(n: int) -> np.dtype[Any]:
    """Row indices of a table of ``n`` rows: int32 below 2**31 rows (half the memory of
    intp; numpy indexes with either), else intp."""
    return np.dtype(np.int32) if n < (1 << 31) else np.dtype(np.intp)


def device_rows(table: EventTable, dev: int) -> npt.NDArray[np.intp]:
    """Row indices of one device, in table order (32-bit below 2**31 rows, see
    :func:`index_dtype`)."""
    rows: npt.NDArray[np.intp] = np.flatnonzero(table.dev == dev).astype(
        index_dtype(len(table)), copy=False)
    return rows


def rows_by_device(table: EventTable, devs: list[int]) -> dict[int, npt.NDArray[np.intp]]:
    """Row indices of each device (table order), found in one pass per device or one sort.

    Every analyzer of a device works on these rows instead of scanning the whole table again.
    """
    if len(devs) <= 16:
        return {d: device_rows(table, d) for d in devs}
    order = np.argsort(table.dev, kind="stable")
    sdev = table.dev[order]
    out: dict[int, npt.NDArray[np.intp]] = {}
    for d in devs:
        lo, hi = np.searchsorted(sdev, [d, d + 1])
        out[d] = order[lo:hi]
    return out


def completion_rows(table: EventTable, base: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """The data-bearing C rows among ``base`` (one device's rows), in table order.

    The kernel accounts a request at completion (``blk_account_io_done``), so the iostat
    columns and the throughput series both count these rows; bare flushes (0 sectors) carry
    no data and are left out.
    """
    rows: npt.NDArray[np.intp] = base[(table.action[base] == ACTION_CODES["C"])
                                      & (table.nr_sectors[base] > 0)]
    return rows


def stage_rows(table: EventTable, dev: int, stage: str | None = None, *,
               keep_zero_length: bool = False,
               dev_rows: npt.NDArray[np.intp] | None = None) -> StageRows:
    """Rows of ``dev`` at ``stage`` (None: D, else I, G, Q), time-ordered.

    Args:
        table: the events.
        dev: kernel dev_t of the device.
        stage: one of :data:`SELECTABLE_STAGES`, or None for the default fallback.
        keep_zero_length: keep requests of 0 sectors (flushes); analyzers of positions and
            sizes drop them because a bare flush has no position (blkparse prints no sector).
        dev_rows: the device's rows if already known (saves a scan of the table).

    Raises:
        ValueError: for a stage letter that is not selectable.
    """
    if stage is not None and stage not in SELECTABLE_STAGES:
        raise ValueError(f"unknown stage {stage!r}; choose one of {', '.join(SELECTABLE_STAGES)}")
    base = device_rows(table, dev) if dev_rows is None else dev_rows
    act = table.action[base]
    codes = {letter: ACTION_CODES[letter] for letter in ((stage,) if stage else STAGE_FALLBACK)}
    used, fallback = choose_stage({k: int(np.count_nonzero(act == c)) for k, c in codes.items()},
                                  stage)
    rows = base[act == ACTION_CODES[used]] if used is not None else np.empty(0, dtype=np.intp)
    zero = 0
    if len(rows) and not keep_zero_length:
        nz = table.nr_sectors[rows] > 0
        zero = int(len(rows) - int(np.count_nonzero(nz)))
        rows = rows[nz]
    rows = time_order(table, rows)
    return StageRows(dev=dev, stage=used, requested=stage, fallback=fallback, rows=rows,
                     zero_length=zero)


def percentiles(values: npt.NDArray[Any], qs: tuple[float, ...]) -> dict[str, float]:
    """``{"p50": v, ...}`` using observed values (``inverted_cdf``), empty input -> {}."""
    if len(values) == 0:
        return {}
    res = np.percentile(np.asarray(values, dtype=np.float64), list(qs), method="inverted_cdf")
    return {_pkey(q): float(v) for q, v in zip(qs, np.atleast_1d(res))}


def _pkey(q: float) -> str:
    return f"p{q:g}".replace(".", "_")


def log2_bucket(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Bucket index of non-negative integers: 0 for 0, else bit length (1 -> 1, 2..3 -> 2, ...).

    Vectorized bit length without floating point, so values up to 2**63 bucket exactly.
    """
    v = np.asarray(values, dtype=np.int64)
    if len(v) == 0:
        return np.zeros(0, dtype=np.int64)
    if int(v.max()) < (1 << 53):
        # float64 holds these exactly, and frexp's exponent is the bit length.
        return np.frexp(v.astype(np.float64))[1].astype(np.int64)
    v = v.copy()
    k = np.zeros(len(v), dtype=np.int64)
    while True:
        nz = v > 0
        if not nz.any():
            break
        k += nz
        v >>= 1
    return k


# --- matching events of one request across stages ---------------------------------------------
MATCH_STAGES: tuple[str, ...] = ("Q", "G", "I", "D", "C")


class StageMatcher:
    """Pairs events of the same request across stages by (device, sector), btt-style.

    btt follows one request through Q, G, I, D and C by its device and start sector. Here all
    Q/G/I/D/C rows with data are put once in (device, sector) order, time order inside a key
    (a stable sort of a packed key over time-ordered rows), and for every event of stage B the
    nearest earlier event of stage A with the same key is found by a running maximum of
    positions; each A is paired with the first B after it only. Bios merged into a request
    (M/F) keep their own start sector and so pair with nothing later, as in btt where they are
    accounted through M2D instead.

    One instance serves all devices and all stage pairs of a table, so the sort is paid once.
    With ``rows`` (one device's rows, in table order) it serves that device only: its pairs
    are exactly the whole-table pairs of that device (the key holds the device, so no pair
    crosses devices), and ``analyze`` builds one device's matcher at a time to bound memory.
    Row indices are 32-bit when the table has fewer than 2**31 rows (half the memory of the
    per-row state, which is the largest part of an analysis of a big trace).
    """

    def __init__(self, table: EventTable,
                 rows: npt.NDArray[np.integer[Any]] | None = None) -> None:
        codes = np.array([ACTION_CODES[s] for s in MATCH_STAGES], dtype=np.uint8)
        idx_t = index_dtype(len(table))
        if rows is None:
            sel = np.flatnonzero(np.isin(table.action, codes) & (table.nr_sectors > 0))
        else:
            rows = np.asarray(rows)
            sel = rows[np.isin(table.action[rows], codes) & (table.nr_sectors[rows] > 0)]
        sel = time_order(table, sel.astype(idx_t, copy=False))
        self._table = table
        sel_dev = table.dev[sel]
        devs = np.unique(sel_dev)  # few values: hashed, no sort of the whole column
        self._devs = devs
        dev_idx = np.searchsorted(devs, sel_dev)
        del sel_dev
        key = match_key(dev_idx, table.sector[sel])
        del dev_idx
        order = np.argsort(key, kind="stable")
        self.rows = sel[order]  # table rows in (dev, sector, time) order
        self._group_start = group_starts(key[order], idx_t)
        del key, order, sel
        self._action = table.action[self.rows]
        self._last: dict[str, npt.NDArray[np.int64]] = {}
        self._pairs: dict[tuple[str, str], tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]] = {}
        self._by_dev: dict[tuple[str, str], dict[int, tuple[npt.NDArray[np.intp],
                                                             npt.NDArray[np.intp]]]] = {}

    @property
    def table(self) -> EventTable:
        """The table whose rows the pairs index."""
        return self._table

    def _last_pos(self, stage: str) -> npt.NDArray[np.int64]:
        if stage not in self._last:
            self._last[stage] = last_marked(self._action == ACTION_CODES[stage],
                                            self._group_start)
        return self._last[stage]

    def pairs(self, a: str, b: str) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """Table rows ``(rows_a, rows_b)`` of matched A -> B pairs (one B per A, the first)."""
        if (a, b) not in self._pairs:
            self._pairs[(a, b)] = self._match(a, b)
        return self._pairs[(a, b)]

    def pairs_for(self, a: str, b: str, dev: int
                  ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """:meth:`pairs` of one device (split once per stage pair, by the B event's device)."""
        if (a, b) not in self._by_dev and len(self._devs) == 1:
            # one device's matcher: its pairs are that device's, no split (and no copy)
            self._by_dev[(a, b)] = {int(self._devs[0]): self.pairs(a, b)}
        if (a, b) not in self._by_dev:
            ra, rb = self.pairs(a, b)
            dv = self._table.dev[rb]
            order = np.argsort(dv, kind="stable")
            sdv = dv[order]
            split: dict[int, tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]] = {}
            if len(sdv):
                starts = np.r_[0, np.flatnonzero(sdv[1:] != sdv[:-1]) + 1]
                ends = np.r_[starts[1:], len(sdv)]
                for s, e in zip(starts, ends):
                    idx = order[s:e]
                    split[int(sdv[s])] = (ra[idx], rb[idx])
            self._by_dev[(a, b)] = split
        empty = np.empty(0, dtype=np.intp)
        return self._by_dev[(a, b)].get(int(dev), (empty, empty))

    def _match(self, a: str, b: str) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        bpos = np.flatnonzero(self._action == ACTION_CODES[b])
        if a == b or len(bpos) == 0:
            empty = np.empty(0, dtype=np.intp)
            return empty, empty
        # the nearest earlier A: last A strictly before this B (ties in time keep table order)
        apos, bpos = first_pairs(self._last_pos(a), bpos)
        return self.rows[apos], self.rows[bpos]


# --- pieces shared by the whole-table and the chunked (streaming) analysis -----------------------

def choose_stage(seen: dict[str, int], stage: str | None) -> tuple[str | None, bool]:
    """The stage a device is analyzed at, from how many rows of each letter it has (with or
    without data), and whether that is a fallback from the default D.

    The rule of :func:`stage_rows` on counts, so a chunked analysis that counted the rows in a
    first pass picks the same stage the whole table would.
    """
    candidates = (stage,) if stage else STAGE_FALLBACK
    used: str | None = None
    for letter in candidates:
        if seen.get(letter, 0):
            used = letter
            break
    if used is None and stage is not None:
        used = stage
    return used, (stage is None and used is not None and used != "D")


def exact_sum(values: npt.NDArray[Any], counts: npt.NDArray[Any] | None = None) -> int:
    """The exact integer sum of ``values`` (times ``counts``), as a Python int.

    Means are taken as this sum over the count (a correctly rounded quotient), which equals
    numpy's float mean whenever the sum is below 2**53 and stays exact above it, and which a
    chunked analysis can add up chunk by chunk in any order.
    """
    v = np.asarray(values, dtype=np.int64)
    if not len(v):
        return 0
    c = None if counts is None else np.asarray(counts, dtype=np.int64)
    total = len(v) if c is None else int(c.sum())
    big = max(abs(int(v.max())), abs(int(v.min())))
    if big * max(total, 1) < (1 << 63):  # no int64 overflow on the way
        return int(v.sum()) if c is None else int(np.dot(v, c))
    if c is None:
        return sum(int(x) for x in v)
    return sum(int(x) * int(y) for x, y in zip(v, c))


def _runs(sorted_values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                         npt.NDArray[np.int64]]:
    """Distinct values and their counts of a sorted array."""
    n = len(sorted_values)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(sorted_values[1:] != sorted_values[:-1]) + 1
    starts = np.concatenate(([0], starts))
    counts = np.diff(np.concatenate((starts, [n]))).astype(np.int64)
    return sorted_values[starts].astype(np.int64, copy=True), counts


def merge_counts(v1: npt.NDArray[np.int64], c1: npt.NDArray[np.int64],
                 v2: npt.NDArray[np.int64], c2: npt.NDArray[np.int64]
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Value -> count maps (sorted distinct values) of the union of two multisets."""
    if not len(v1):
        return v2, c2
    if not len(v2):
        return v1, c1
    v = np.concatenate((v1, v2))
    c = np.concatenate((c1, c2))
    order = np.argsort(v, kind="stable")
    v, c = v[order], c[order]
    del order
    starts = np.concatenate(([0], np.flatnonzero(v[1:] != v[:-1]) + 1))
    return v[starts], np.add.reduceat(c, starts).astype(np.int64)


#: Values a :class:`ValueCounts` gathers before it first squashes them.
SQUASH_MIN = 1 << 16


class ValueCounts:
    """A multiset of int64 values (latencies, seek distances, sizes) kept compactly.

    Exact order statistics need every value, but most of these streams repeat values (a
    sequential stream's seeks are a handful of distances), so batches are squashed into sorted
    distinct values and counts (16 bytes per distinct value) as they come. When squashing stops
    paying (more than half the values distinct), raw batches are kept instead (4 bytes a value
    when it fits 32 bits unsigned, else 8) and squashed once at the end. Every statistic is then read off ``(values, counts)``:
    the whole-table and the chunked analysis use the same code.
    """

    def __init__(self) -> None:
        self._raw: list[npt.NDArray[Any]] = []
        self._nraw = 0
        self._squash_ok = True
        self.total = 0
        self.values: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self.counts: npt.NDArray[np.int64] = np.zeros(0, np.int64)

    def add(self, values: npt.NDArray[Any]) -> None:
        """Add a batch (copied: a batch may be a view of a chunk that is about to go).

        A raw batch whose values fit 32 bits unsigned (latencies under 4.3 s, seeks under
        2 TiB) is kept as uint32: half the memory while it waits to be squashed.
        """
        v = np.array(values, dtype=np.int64)
        if not len(v):
            return
        if int(v.min()) >= 0 and int(v.max()) < (1 << 32):
            v = v.astype(np.uint32)
        self._raw.append(v)
        self._nraw += len(v)
        self.total += len(v)
        if self._squash_ok and self._nraw >= max(SQUASH_MIN, len(self.values)):
            self._squash()
            if 2 * len(self.values) > self.total:
                self._squash_ok = False

    def _squash(self) -> None:
        if not self._raw:
            return
        parts, self._raw, self._nraw = self._raw, [], 0
        raw = np.concatenate(parts, dtype=np.int64)
        del parts
        raw.sort()
        v, c = _runs(raw)
        del raw
        self.values, self.counts = merge_counts(self.values, self.counts, v, c)

    def finish(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(values, counts)``: sorted distinct values and how often each occurs."""
        self._squash()
        return self.values, self.counts

    @classmethod
    def of(cls, values: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int64],
                                                   npt.NDArray[np.int64]]:
        """``(values, counts)`` of one array."""
        vc = cls()
        vc.add(values)
        return vc.finish()


def percentiles_from_counts(values: npt.NDArray[Any], counts: npt.NDArray[np.int64],
                            qs: tuple[float, ...] | list[float]) -> dict[str, float]:
    """:func:`percentiles` (numpy ``inverted_cdf``) of the multiset ``values`` x ``counts``.

    numpy takes the sorted value at index ``n*q - 1`` when that is whole, else the next one up
    (``_inverted_cdf``, clipped at 0); the index depends on ``n`` alone, so the value is found
    in the cumulative counts without expanding the multiset.
    """
    n = int(counts.sum())
    qs = tuple(qs)
    if n == 0:
        return {}
    q = np.true_divide(np.asarray(list(qs), dtype=np.float64), 100)
    index = n * q - 1
    prev = np.floor(index)
    k = np.where(index - prev == 0, prev, prev + 1).astype(np.intp)
    k[k < 0] = 0
    k = np.minimum(k, n - 1)
    pos = np.searchsorted(np.cumsum(counts), k, side="right")
    vals = np.asarray(values).astype(np.float64)[pos]
    return {_pkey(qq): float(v) for qq, v in zip(qs, vals)}


def median_from_counts(values: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> float:
    """``np.median`` of the multiset: the middle value, or numpy's mean of the middle two."""
    n = int(counts.sum())
    cum = np.cumsum(counts)
    mid = [n // 2 - 1, n // 2] if n % 2 == 0 else [n // 2]
    pick = values[np.searchsorted(cum, mid, side="right")]
    return float(np.median(pick.astype(np.int64)))


def log2_counts(keys: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> list[int]:
    """``np.bincount(log2_bucket(x))`` of the multiset whose values bucket as ``keys``."""
    if not len(keys):
        return []
    k = log2_bucket(keys)
    hist = np.zeros(int(k.max()) + 1, np.int64)
    np.add.at(hist, k, counts)
    return [int(c) for c in hist]


def last_marked(mark: npt.NDArray[np.bool_], group_start: npt.NDArray[Any]
                ) -> npt.NDArray[Any]:
    """For every position, the last marked position at or before it in its key group, else
    -1 (a running maximum of marked positions, cut at the group's start)."""
    idx_t = group_start.dtype if len(group_start) else np.dtype(np.intp)
    pos = np.arange(len(mark), dtype=idx_t)
    m = np.where(mark, pos, idx_t.type(-1))
    del pos
    last = np.maximum.accumulate(m) if len(m) else m
    return np.where(last >= group_start, last, idx_t.type(-1)).astype(idx_t, copy=False)


def first_pairs(last_a: npt.NDArray[Any], bpos: npt.NDArray[Any]
                ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Positions ``(apos, bpos)`` of matched pairs: each B takes the nearest earlier A of its
    group (``last_a``), and each A keeps its first B only (btt's pairing)."""
    apos = last_a[bpos]
    ok = apos >= 0
    bpos, apos = bpos[ok], apos[ok]
    if len(apos):
        # apos never decreases (positions run through key groups in order and, inside a
        # group, the last A before a later B is at least the last A before an earlier B),
        # so the first B of each A is where apos changes
        first = np.r_[True, apos[1:] != apos[:-1]]
        bpos, apos = bpos[first], apos[first]
    return apos, bpos


def group_starts(skey: npt.NDArray[Any], idx_t: np.dtype[Any]) -> npt.NDArray[Any]:
    """For every position of sorted keys, the first position of its key group."""
    pos = np.arange(len(skey), dtype=idx_t)
    new = np.ones(len(skey), dtype=bool)
    if len(skey) > 1:
        new[1:] = skey[1:] != skey[:-1]
    return (np.maximum.accumulate(np.where(new, pos, 0).astype(idx_t)) if len(pos) else pos)


#: Sector bits of the matcher's key; the device's index sits above them.
KEY_SECTOR_BITS = 56


def match_key(dev_idx: npt.NDArray[Any], sector: npt.NDArray[Any]) -> npt.NDArray[np.uint64]:
    """The matcher's (device, sector) key: device index in the top byte, 56 sector bits."""
    return (np.asarray(dev_idx).astype(np.uint64) << np.uint64(KEY_SECTOR_BITS)) | (
        np.asarray(sector, dtype=np.uint64) & np.uint64((1 << KEY_SECTOR_BITS) - 1))
