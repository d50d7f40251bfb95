"""Per-shard partial results of the analyzers that add up, and their exact merge.

A huge bundle is parsed in shards (one task per trace file, :mod:`workers.traces.shards`);
each shard also runs here the analyzers whose result over the whole bundle is a *sum* of their
results over its files, and the merge adds them instead of recomputing them on the merged
EventTable. Why each piece is mergeable:

* **Rows are a disjoint union.** The merged table holds exactly the rows of its files
  (``merge_raw`` concatenates and sorts, it drops none), so any count of rows by a key is the
  sum of the shards' counts: action counts per device, rows and zero-length rows per (device,
  stage letter).
* **The stage choice is an "any".** A device is analyzed at D, else I, G, Q
  (:func:`workers.analyzers.common.stage_rows`): whether it has a row of a letter anywhere is
  whether some shard counted one.
* **Size statistics are functions of a multiset.** Count, bytes, reads/writes, min, max, the
  power-of-two histogram, the exact-size table and the percentiles (``inverted_cdf``: an order
  statistic at an index numpy computes from the count alone) are all read off the value ->
  count map of request sizes, and the map of a union is the sum of the maps. Time order does
  not enter.
* **Binned throughput is a sum per bin on one grid.** The analyzers' bins are
  ``[t0 + i*w, t0 + (i+1)*w)`` with ``w = nice_bin_ns(span)`` (1, 2 or 5 x 10^k ns), unknown
  until the whole span is. Every shard bins on a *fine* grid anchored at the same ``t0`` (the
  bundle's genesis, given to every shard up front) whose width is the largest power of ten not
  above ``nice_bin_ns`` of its own span from ``t0``. The final width is at least that
  (``nice_bin_ns`` grows with the span, and the bundle's span contains the shard's), and a
  1/2/5 x 10^k not below a 10^j is a multiple of it, so every fine bin lies inside one final
  bin: re-binning adds whole fine bins, exactly. Sums are integers (bytes, requests) kept as
  int64, so the float64 the single path accumulates is reproduced bit for bit (far below 2^53).

Not mergeable, and run on the merged table: seek distances, ordering, the LBA scatter and
fragmentation (they need consecutive requests in the merged time order), latencies, occupancy,
the iostat row and lineage (they match a request's events across stages, and a request's events
can sit in different per-CPU files).

The merge is checked where it is used (:func:`workers.analyzers.analyze` with ``partials=``):
the rows per device and per stage must equal the merged table's, and the grid's anchor must be
the merged table's first timestamp, else that section is computed from the table as usual.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import (
    SECTOR_BYTES,
    percentiles_from_counts,  # noqa: F401 - re-exported (moved to common)
    rows_by_device,
)
from workers.analyzers.sizes import (
    DEFAULT_PERCENTILES,
    MAX_EXACT_SIZES,
    SizeStats,
    size_stats_from_counts,
)
from workers.analyzers.throughput import nice_bin_ns, series_from_sums
from workers.events import ACTION_CODES, ACTION_LETTERS, RWBS_WRITE, EventTable

#: Stage letters with partials: every stage a device can be analyzed at (common.SELECTABLE_STAGES).
STAGES: tuple[str, ...] = ("Q", "G", "I", "D", "C")
#: Rows of the throughput bins: read bytes, write bytes, read requests, write requests.
BIN_ROWS = 4
_MB = 1024 * 1024
I64 = npt.NDArray[np.int64]


def _i64(x: Any) -> I64:
    return np.asarray(x, dtype=np.int64)


@dataclass
class StagePartial:
    """One device's rows at one stage letter in one shard.

    Attributes:
        rows: rows with data (``nr_sectors > 0``), the rows the analyzers use.
        zero_length: rows of the letter without data (bare flushes).
        writes, write_bytes: rows with the write bit among ``rows``, and their bytes.
        values, counts: distinct request sizes (sectors, ascending) and how often each occurs.
        bins: ``(4, n)`` int64 sums per fine bin (read bytes, write bytes, read requests, write
            requests) on the partial's grid, or None without a grid.
    """

    rows: int = 0
    zero_length: int = 0
    writes: int = 0
    write_bytes: int = 0
    values: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    counts: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    bins: I64 | None = None

    @property
    def seen(self) -> int:
        """Rows of this letter at all (with or without data): the stage choice looks at these."""
        return self.rows + self.zero_length


@dataclass
class DevicePartial:
    """One device in one shard: its action counts (by code) and its stages."""

    actions: I64 = field(default_factory=lambda: np.zeros(256, np.int64))
    stages: dict[str, StagePartial] = field(default_factory=dict)

    @property
    def events(self) -> int:
        return int(self.actions.sum())


@dataclass(frozen=True)
class Grid:
    """Fine throughput bins ``[anchor + i*width, anchor + (i+1)*width)`` in the times of the
    table they were computed on; ``width`` is a power of ten (ns)."""

    anchor_ns: int
    width_ns: int


@dataclass
class Partials:
    """The mergeable partial results of one shard (or of several, merged).

    ``events`` counts every row, ``grid`` is None when the throughput bins are unavailable (no
    timestamps, or a row earlier than the anchor: the anchor was not the bundle's first time).
    """

    events: int = 0
    grid: Grid | None = None
    devices: dict[int, DevicePartial] = field(default_factory=dict)

    # --- serialization (stored beside the shard's part) -------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "grid": None if self.grid is None else [self.grid.anchor_ns, self.grid.width_ns],
            "devices": {str(d): {
                "actions": {str(int(c)): int(dp.actions[c]) for c in np.flatnonzero(dp.actions)},
                "stages": {s: {"rows": sp.rows, "zero_length": sp.zero_length,
                               "writes": sp.writes, "write_bytes": sp.write_bytes,
                               "values": sp.values.tolist(), "counts": sp.counts.tolist(),
                               "bins": None if sp.bins is None else sp.bins.tolist()}
                           for s, sp in dp.stages.items()}}
                for d, dp in self.devices.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Partials:
        grid = None if data.get("grid") is None else Grid(int(data["grid"][0]),
                                                          int(data["grid"][1]))
        devices: dict[int, DevicePartial] = {}
        for d, dj in data["devices"].items():
            acts = np.zeros(256, np.int64)
            for c, n in dj["actions"].items():
                acts[int(c)] = int(n)
            stages = {s: StagePartial(
                rows=int(sj["rows"]), zero_length=int(sj["zero_length"]),
                writes=int(sj["writes"]), write_bytes=int(sj["write_bytes"]),
                values=_i64(sj["values"]), counts=_i64(sj["counts"]),
                bins=None if sj["bins"] is None else _i64(sj["bins"]).reshape(BIN_ROWS, -1))
                for s, sj in dj["stages"].items()}
            devices[int(d)] = DevicePartial(actions=acts, stages=stages)
        return cls(events=int(data["events"]), grid=grid, devices=devices)

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Partials:
        return cls.from_json(json.loads(data.decode()))

    def shifted(self, offset_ns: int) -> Partials:
        """The same partials in another time base (``t + offset_ns``): the merge makes binary
        blktrace times relative to the bundle's genesis, so a shard's grid is moved with it."""
        grid = None if self.grid is None else Grid(self.grid.anchor_ns + int(offset_ns),
                                                   self.grid.width_ns)
        return Partials(events=self.events, grid=grid, devices=self.devices)


# --- one shard --------------------------------------------------------------------------------

def fine_width(span_ns: int, time_bins: int) -> int:
    """Largest power of ten (ns) not above ``nice_bin_ns(span_ns, time_bins)``: it divides the
    bin width of any span at least as long (see the module docstring)."""
    nice = nice_bin_ns(span_ns, time_bins)
    w = 1
    while w * 10 <= nice:
        w *= 10
    return w


def _sizes(n: I64) -> tuple[I64, I64]:
    if not len(n):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if int(n.max()) < (1 << 22):  # small integers: count without sorting (as sizes.py)
        bc = np.bincount(n)
        values = np.flatnonzero(bc).astype(np.int64)
        return values, bc[values].astype(np.int64)
    values, counts = np.unique(n, return_counts=True)
    return values.astype(np.int64), counts.astype(np.int64)


def partials_of(table: EventTable, *, anchor_ns: int | None,
                time_bins: int = 200) -> Partials:
    """The partial results of one shard's table.

    Args:
        table: the shard's events, in the time base ``anchor_ns`` is given in.
        anchor_ns: the bundle's first timestamp in that time base (its genesis for binary
            blktrace), or None: no throughput bins.
        time_bins: ``AnalyzeConfig.time_bins`` of the analysis the partials will serve.
    """
    n = len(table)
    grid: Grid | None = None
    t = table.time_ns
    if anchor_ns is not None and n and table.time_known and int(t.min()) >= anchor_ns:
        grid = Grid(int(anchor_ns), fine_width(int(t.max()) - int(anchor_ns), time_bins))
    nfine = 0 if grid is None else int((int(t.max()) - grid.anchor_ns) // grid.width_ns) + 1
    devs = [int(d) for d in np.unique(table.dev)] if n else []
    out = Partials(events=n, grid=grid)
    for dev, rows in rows_by_device(table, devs).items():
        act = table.action[rows]
        dp = DevicePartial(actions=np.bincount(act, minlength=256).astype(np.int64))
        for letter in STAGES:
            r = rows[act == ACTION_CODES[letter]]
            if not len(r):
                continue
            sec = table.nr_sectors[r].astype(np.int64)
            data = sec > 0
            r, sec = r[data], sec[data]
            w = (table.rwbs[r] & RWBS_WRITE) != 0
            nbytes = sec * SECTOR_BYTES
            values, counts = _sizes(sec)
            bins = None
            if grid is not None:
                b = (table.time_ns[r] - grid.anchor_ns) // grid.width_ns
                bins = np.stack([
                    np.bincount(b[~w], weights=nbytes[~w], minlength=nfine),
                    np.bincount(b[w], weights=nbytes[w], minlength=nfine),
                    np.bincount(b[~w], minlength=nfine),
                    np.bincount(b[w], minlength=nfine)]).astype(np.int64)
            dp.stages[letter] = StagePartial(
                rows=int(len(r)), zero_length=int((~data).sum()), writes=int(w.sum()),
                write_bytes=int(nbytes[w].sum()), values=values, counts=counts, bins=bins)
        out.devices[dev] = dp
    return out


# --- merging ----------------------------------------------------------------------------------

def _rebin(bins: I64, width: int, to_width: int) -> I64:
    """Fine bins of ``width`` added into bins of ``to_width`` (a multiple), same anchor."""
    if width == to_width:
        return bins
    idx = (np.arange(bins.shape[1], dtype=np.int64) * width) // to_width
    out = np.zeros((BIN_ROWS, int(idx[-1]) + 1 if len(idx) else 0), np.int64)
    for k in range(BIN_ROWS):
        np.add.at(out[k], idx, bins[k])
    return out


def _add_bins(a: I64 | None, b: I64 | None) -> I64 | None:
    if a is None or b is None:
        return None
    n = max(a.shape[1], b.shape[1])
    out = np.zeros((BIN_ROWS, n), np.int64)
    out[:, :a.shape[1]] += a
    out[:, :b.shape[1]] += b
    return out


def merge_partials(parts: Sequence[Partials]) -> Partials:
    """The partials of the union of the shards' rows (all in the same time base).

    Grids must share their anchor (else the merged partials have none); the merged width is
    the largest (a power of ten, so a multiple of every other).
    """
    out = Partials(events=sum(p.events for p in parts))
    grids = [p.grid for p in parts if p.events]
    if grids and all(g is not None for g in grids) and len({g.anchor_ns for g in grids
                                                            if g is not None}) == 1:
        width = max(g.width_ns for g in grids if g is not None)
        out.grid = Grid(next(g.anchor_ns for g in grids if g is not None), width)
    for p in parts:
        for dev, dp in p.devices.items():
            into = out.devices.setdefault(dev, DevicePartial())
            into.actions = into.actions + dp.actions
            for letter, sp in dp.stages.items():
                bins = None
                if out.grid is not None and sp.bins is not None and p.grid is not None:
                    bins = _rebin(sp.bins, p.grid.width_ns, out.grid.width_ns)
                cur = into.stages.get(letter)
                if cur is None:
                    into.stages[letter] = StagePartial(sp.rows, sp.zero_length, sp.writes,
                                                       sp.write_bytes, sp.values, sp.counts,
                                                       bins)
                    continue
                v = np.concatenate([cur.values, sp.values])
                c = np.concatenate([cur.counts, sp.counts])
                uv, inv = np.unique(v, return_inverse=True)
                uc = np.zeros(len(uv), np.int64)
                np.add.at(uc, inv, c)
                into.stages[letter] = StagePartial(
                    cur.rows + sp.rows, cur.zero_length + sp.zero_length, cur.writes + sp.writes,
                    cur.write_bytes + sp.write_bytes, uv.astype(np.int64), uc,
                    _add_bins(cur.bins, bins))
    if out.grid is None:
        for dp in out.devices.values():
            for sp in dp.stages.values():
                sp.bins = None
    return out


# --- the analyzers' sections from merged partials ----------------------------------------------

def action_counts(dp: DevicePartial | None) -> dict[str, int]:
    """``analyze``'s ``actions`` of one device (``_action_counts`` on its rows)."""
    if dp is None:
        return {}
    return {ACTION_LETTERS.get(int(c), str(int(c))): int(dp.actions[c])
            for c in np.flatnonzero(dp.actions)}


def stage_partial(dp: DevicePartial | None, letter: str | None) -> StagePartial:
    if dp is None or letter is None:
        return StagePartial()
    return dp.stages.get(letter) or StagePartial()


def size_stats_of(sp: StagePartial, *, qs: tuple[float, ...] = DEFAULT_PERCENTILES,
                  max_exact: int = MAX_EXACT_SIZES) -> SizeStats:
    """:func:`workers.analyzers.sizes.size_stats_from_arrays` of the stage's rows, from the
    value -> count map (the same numbers, see the module docstring)."""
    if sp.rows == 0:
        return size_stats_from_counts(np.zeros(0, np.int64), np.zeros(0, np.int64), writes=0,
                                      write_bytes=0, qs=qs, max_exact=max_exact)
    return size_stats_from_counts(sp.values, sp.counts, writes=sp.writes,
                                  write_bytes=sp.write_bytes, qs=qs, max_exact=max_exact)


def time_series_of(partials: Partials, dev: int, stage: str | None, t0: int, bin_ns: int,
                   nbins: int) -> dict[str, Any] | None:
    """:func:`workers.analyzers.throughput.time_series` of one device from the bins, or None
    when the grid does not fit the analysis' (another anchor, a width that does not divide)."""
    g = partials.grid
    if g is None or g.anchor_ns != t0 or bin_ns % g.width_ns:
        return None
    dp = partials.devices.get(dev)
    c = stage_partial(dp, "C")
    sp, source = (c, "C") if c.rows else (stage_partial(dp, stage), "stage")
    if sp.rows and sp.bins is None:
        return None
    sums = np.zeros((BIN_ROWS, nbins), np.int64)
    if sp.bins is not None and sp.bins.shape[1]:
        idx = np.clip((np.arange(sp.bins.shape[1], dtype=np.int64) * g.width_ns) // bin_ns,
                      0, nbins - 1)
        for k in range(BIN_ROWS):
            np.add.at(sums[k], idx, sp.bins[k])
    return series_from_sums(sums, bin_ns, source, sp.rows)
