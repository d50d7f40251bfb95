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
    candidates = (stage,) if stage else STAGE_FALLBACK
    used: str | None = None
    rows = np.empty(0, dtype=np.intp)
    for letter in candidates:
        r = base[act == ACTION_CODES[letter]]
        if len(r):
            used, rows = letter, r
            break
    if used is None and stage is not None:
        used = stage
    zero = 0
    if len(rows) and not keep_zero_length:
        nz = table.nr_sectors[rows] > 0
        zero = int(len(rows) - int(np.count_nonzero(nz)))
        rows = rows[nz]
    rows = time_order(table, rows)
    fallback = stage is None and used is not None and used != "D"
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
        key = (dev_idx.astype(np.uint64) << np.uint64(56)) | (
            table.sector[sel] & np.uint64((1 << 56) - 1))
        del dev_idx
        order = np.argsort(key, kind="stable")
        self.rows = sel[order]  # table rows in (dev, sector, time) order
        skey = key[order]
        del key, order, sel
        pos = np.arange(len(skey), dtype=idx_t)
        new = np.ones(len(skey), dtype=bool)
        if len(skey) > 1:
            new[1:] = skey[1:] != skey[:-1]
        self._group_start = (np.maximum.accumulate(np.where(new, pos, 0).astype(idx_t))
                             if len(pos) else pos)
        del skey, new, pos
        self._action = table.action[self.rows]
        self._last: dict[str, npt.NDArray[np.int64]] = {}
        self._pairs: dict[tuple[str, str], tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]] = {}
        self._by_dev: dict[tuple[str, str], dict[int, tuple[npt.NDArray[np.intp],
                                                             npt.NDArray[np.intp]]]] = {}

    def _last_pos(self, stage: str) -> npt.NDArray[np.int64]:
        if stage not in self._last:
            idx_t = self.rows.dtype
            pos = np.arange(len(self.rows), dtype=idx_t)
            mark = np.where(self._action == ACTION_CODES[stage], pos, idx_t.type(-1))
            del pos
            last = np.maximum.accumulate(mark) if len(mark) else mark
            self._last[stage] = np.where(last >= self._group_start, last,
                                         idx_t.type(-1)).astype(idx_t, copy=False)
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
        last = self._last_pos(a)
        apos = last[bpos]
        ok = apos >= 0
        bpos, apos = bpos[ok], apos[ok]
        if len(apos):
            # apos never decreases (positions run through key groups in order and, inside a
            # group, the last A before a later B is at least the last A before an earlier B),
            # so the first B of each A is where apos changes
            first = np.r_[True, apos[1:] != apos[:-1]]
            bpos, apos = bpos[first], apos[first]
        return self.rows[apos], self.rows[bpos]
