"""Throughput over time and an iostat -x-like table computed from the trace.

The table follows how the kernel accounts a request (block/blk-mq.c, block/blk-core.c) and how
sysstat turns the counters into columns (iostat.c ``write_ext_stat``), so it can be laid beside
seed 000's ``iostat -x`` output:

* ``r/s``, ``rMB/s``, ``rareq-sz``: completed requests and sectors (``blk_account_io_done`` /
  ``blk_account_io_completion`` count at completion, i.e. C events) over the interval.
* ``rrqm/s``, ``%rrqm``: bios merged into an existing request (``blk_account_io_merge_bio``,
  M and F events); ``%rrqm = rrqm / (rrqm + r) * 100``.
* ``r_await``: mean of completion time minus ``rq->start_time_ns``, which is set when the
  request is allocated (``blk_mq_rq_ctx_init``: the G event); bio-based devices (md) have no G,
  so their Q is used.
* ``aqu-sz``: the sum of those per-request times (``part_stat nsecs``) over the interval,
  i.e. the time-weighted number of requests in flight.
* ``%util``: time with at least one request between issue (D) and completion (C)
  (``io_ticks`` via ``update_io_ticks``), or between Q and C on devices without D.

The interval is the whole trace's span, the same for every device, so member disks compare.
Reads are requests without the write or discard bit; discards get their own ``d`` columns.

A column that cannot be computed from the trace is ``None`` (null in JSON), never 0, and the
row's ``note`` says why: without C events (a trace of G-stage lines quoted in a mail) nothing
is accounted; without timestamps there are no rates; without a matched start there is no await.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import SECTOR_BYTES, StageMatcher, completion_rows, exact_sum
from workers.events import (
    ACT_BACKMERGE,
    ACT_FRONTMERGE,
    ACTION_CODES,
    RWBS_DISCARD,
    RWBS_WRITE,
    EventTable,
)

#: Columns of the iostat-like row, in print order (names as sysstat 12.x prints them with -m).
IOSTAT_COLUMNS: tuple[str, ...] = (
    "r/s", "rMB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz",
    "w/s", "wMB/s", "wrqm/s", "%wrqm", "w_await", "wareq-sz",
    "d/s", "dMB/s", "d_await", "dareq-sz",
    "aqu-sz", "%util",
)

_MB = 1024 * 1024


def nice_bin_ns(span_ns: int, target_bins: int) -> int:
    """A round bin width (1, 2 or 5 x 10^k ns) giving at most ``target_bins`` bins."""
    raw = max(1, -(-max(span_ns, 1) // max(target_bins, 1)))
    p = 1
    while True:
        for m in (1, 2, 5):
            if m * p >= raw:
                return m * p
        p *= 10


def _direction(rwbs: npt.NDArray[np.uint16]) -> npt.NDArray[np.int8]:
    """0 read, 1 write, 2 discard (kernel STAT_READ / STAT_WRITE / STAT_DISCARD)."""
    d = np.zeros(len(rwbs), dtype=np.int8)
    d[(rwbs & RWBS_WRITE) != 0] = 1
    d[(rwbs & RWBS_DISCARD) != 0] = 2
    return d


def union_length(starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]) -> int:
    """Total length covered by the union of intervals ``[start, end)`` (vectorized)."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = np.maximum(ends[order], s)
    prev_max = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]))
    covered = e - np.maximum(s, prev_max)
    return int(np.clip(covered, 0, None).sum())


class IostatAcc:
    """The counters of one device's iostat row, fed in pieces (see the module docstring).

    Everything the row needs adds up: per direction the completions, their sectors, the
    completions with a matched start and the sum of their waits; the merges per direction;
    the busy time (given at the end: it is the union of the D..C intervals, see
    :func:`union_length`) and how many intervals made it.
    """

    def __init__(self) -> None:
        self.n = np.zeros(3, np.int64)
        self.sectors = [0, 0, 0]
        self.waited = np.zeros(3, np.int64)
        self.wait_sum = [0, 0, 0]
        self.merges = np.zeros(3, np.int64)

    def add_completions(self, rwbs: npt.NDArray[Any], nr_sectors: npt.NDArray[Any],
                        end_ns: npt.NDArray[np.int64], start_ns: npt.NDArray[np.int64]) -> None:
        """Data-bearing completions: their RWBS, sectors, times and matched start times (-1:
        no start matched)."""
        direction = _direction(rwbs)
        sectors = np.asarray(nr_sectors).astype(np.int64)
        has_start = start_ns >= 0
        wait = np.where(has_start, end_ns - start_ns, 0)
        for code in range(3):
            sel = direction == code
            self.n[code] += int(np.count_nonzero(sel))
            self.sectors[code] += exact_sum(sectors[sel])
            w = sel & has_start
            self.waited[code] += int(np.count_nonzero(w))
            self.wait_sum[code] += exact_sum(wait[w])

    def add_merges(self, rwbs: npt.NDArray[Any]) -> None:
        """M and F events (bios merged into a request)."""
        self.merges += np.bincount(_direction(rwbs), minlength=3).astype(np.int64)

    def row(self, interval_ns: int, busy_ns: int, busy_pairs: int) -> dict[str, Any]:
        """The row; ``busy_ns`` is the union of the busy intervals, ``busy_pairs`` their
        number (None columns and ``note`` as the module docstring says)."""
        timed = interval_ns > 0
        secs = interval_ns / 1e9 if timed else math.inf
        n_c = int(self.n.sum())
        matched = int(self.waited.sum())

        def rate(x: float) -> float | None:
            return x / secs if timed else None

        row: dict[str, Any] = {}
        for letter, code in (("r", 0), ("w", 1), ("d", 2)):
            n = int(self.n[code])
            nsec = self.sectors[code]
            waited = int(self.waited[code])
            row[f"{letter}/s"] = rate(n)
            row[f"{letter}MB/s"] = rate(nsec * SECTOR_BYTES / _MB)
            # no requests: iostat prints 0.00; requests whose start is unknown: no await
            row[f"{letter}_await"] = ((self.wait_sum[code] / waited) / 1e6 if waited
                                      else (0.0 if n == 0 else None))
            row[f"{letter}areq-sz"] = nsec * SECTOR_BYTES / 1024 / n if n else 0.0
            if letter != "d":
                m = int(self.merges[code])
                row[f"{letter}rqm/s"] = rate(m)
                row[f"%{letter}rqm"] = 100.0 * m / (m + n) if (m + n) else 0.0
        row["aqu-sz"] = (float(sum(self.wait_sum) / interval_ns)
                         if timed and (matched or not n_c) else None)
        row["%util"] = (min(100.0, 100.0 * busy_ns / interval_ns)
                        if timed and (busy_pairs or not n_c) else None)
        note = None
        if not n_c:
            # the kernel accounts a request at completion: without C events nothing is known
            row.update(dict.fromkeys(IOSTAT_COLUMNS))
            note = "no C events"
        elif not timed:
            note = "no timestamps"
        elif any(row[k] is None for k in IOSTAT_COLUMNS):
            note = f"{matched} of {n_c} completions matched to a G/Q start"
        out = {k: row[k] for k in IOSTAT_COLUMNS}
        out.update(ios=float(n_c), matched_start=float(matched), note=note)
        return out


#: The stage pairs a completion's start comes from, later ones overriding: G, else Q
#: (bio-based devices have no G).
START_PAIRS: tuple[tuple[str, str], ...] = (("Q", "C"), ("G", "C"))


def iostat_row(table: EventTable, dev: int, matcher: StageMatcher, interval_ns: int, *,
               dev_rows: npt.NDArray[np.intp] | None = None) -> dict[str, Any]:
    """One device's iostat -x-like row (see the module docstring for each column).

    Columns that cannot be computed are None and ``note`` gives the reason (None when every
    column is known); ``ios`` and ``matched_start`` are always counts.
    """
    base = np.flatnonzero(table.dev == dev) if dev_rows is None else dev_rows
    act = table.action[base]
    c_rows = completion_rows(table, base)
    start = np.full(len(c_rows), -1, dtype=np.int64)
    for a, b in START_PAIRS:  # G overrides Q where both matched
        ra, rb = matcher.pairs_for(a, b, dev)
        idx = np.searchsorted(c_rows, rb)
        ok = (idx < len(c_rows))
        ok[ok] &= c_rows[idx[ok]] == rb[ok]
        start[idx[ok]] = table.time_ns[ra[ok]]
    acc = IostatAcc()
    acc.add_completions(table.rwbs[c_rows], table.nr_sectors[c_rows], table.time_ns[c_rows],
                        start)
    acc.add_merges(table.rwbs[base[(act == ACT_BACKMERGE) | (act == ACT_FRONTMERGE)]])
    # %util: union of [D, C) (or [Q, C) without D) intervals
    a = "D" if bool(np.any(act == ACTION_CODES["D"])) else "Q"
    ra, rb = matcher.pairs_for(a, "C", dev)
    busy = union_length(table.time_ns[ra], table.time_ns[rb])
    return acc.row(interval_ns, busy, len(ra))


def group_name(name: str) -> str | None:
    """Member-disk group of a device name: ``sda`` -> ``sd*``, ``254,16`` -> ``254,*``."""
    m = re.fullmatch(r"(sd|vd|hd|xvd)[a-z]+", name)
    if m:
        return m.group(1) + "*"
    if re.fullmatch(r"nvme\d+n\d+", name):
        return "nvme*"
    m = re.fullmatch(r"(\d+),\d+", name)
    if m:
        return f"{m.group(1)},*"
    return None


def _mean_known(values: Sequence[float | None]) -> float | None:
    """Mean of the members that have the column; None when none has it."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def mean_rows(rows: Mapping[str, Mapping[str, float | None]], names: Mapping[str, str],
              exclude: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Mean row per group of >= 2 member disks (seed 000's ``sd*``).

    Args:
        rows: device key -> iostat row.
        names: device key -> device name (the grouping uses the name).
        exclude: device keys never grouped (e.g. the md device on top of its members).
    """
    groups: dict[str, list[str]] = {}
    for key in rows:
        if key in exclude:
            continue
        g = group_name(names.get(key, key))
        if g:
            groups.setdefault(g, []).append(key)
    out = []
    for g, members in sorted(groups.items()):
        if len(members) < 2:
            continue
        mean = {c: _mean_known([rows[m].get(c) for m in members]) for c in IOSTAT_COLUMNS}
        out.append({"name": g, "members": sorted(members), "row": mean})
    return out


class SeriesAcc:
    """Bytes and requests per time bin by direction (int64 sums), fed in pieces."""

    def __init__(self, t0: int, bin_ns: int, nbins: int) -> None:
        self.t0, self.bin_ns, self.nbins = t0, bin_ns, nbins
        self.sums = np.zeros((4, nbins), np.int64)  # read bytes, write bytes, reads, writes
        self.rows = 0

    def add(self, time_ns: npt.NDArray[np.int64], nr_sectors: npt.NDArray[Any],
            rwbs: npt.NDArray[Any]) -> None:
        b = np.clip((time_ns - self.t0) // self.bin_ns, 0, self.nbins - 1).astype(np.int64)
        w = (rwbs & RWBS_WRITE) != 0
        nbytes = np.asarray(nr_sectors).astype(np.int64) * SECTOR_BYTES
        for k, (sel, weights) in enumerate(((~w, nbytes), (w, nbytes), (~w, None), (w, None))):
            if weights is None:
                self.sums[k] += np.bincount(b[sel], minlength=self.nbins)
            elif len(weights) and int(weights.max()) * len(weights) >= (1 << 53):
                np.add.at(self.sums[k], b[sel], weights[sel])  # float sums would round
            else:  # float sums of integers below 2**53: exact
                self.sums[k] += np.bincount(b[sel], weights=weights[sel],
                                            minlength=self.nbins).astype(np.int64)
        self.rows += len(b)

    def result(self, source: str) -> dict[str, Any]:
        return series_from_sums(self.sums, self.bin_ns, source, self.rows)


def series_from_sums(sums: npt.NDArray[np.int64], bin_ns: int, source: str,
                     total_ios: int) -> dict[str, Any]:
    """The throughput series from integer sums per bin (rows: read bytes, write bytes, read
    requests, write requests): the whole table, a chunked pass and merged shard partials
    all come here."""
    scale = 1e9 / bin_ns
    rb = sums[0].astype(np.float64) * scale / _MB
    wb = sums[1].astype(np.float64) * scale / _MB
    return {
        "source": source,
        "read_mbps": np.round(rb, 3).tolist(),
        "write_mbps": np.round(wb, 3).tolist(),
        "read_iops": np.round(sums[2] * scale, 1).tolist(),
        "write_iops": np.round(sums[3] * scale, 1).tolist(),
        "total_mb": float(float(sums[0].sum() + sums[1].sum()) / _MB),
        "total_ios": int(total_ios),
    }


def time_series(table: EventTable, dev: int, stage_rows: npt.NDArray[np.intp], t0: int,
                bin_ns: int, nbins: int, *, dev_rows: npt.NDArray[np.intp] | None = None
                ) -> dict[str, Any]:
    """MB/s and IOPS per bin for one device: completions (C) if any, else the stage rows."""
    base = np.flatnonzero(table.dev == dev) if dev_rows is None else dev_rows
    c_rows = completion_rows(table, base)
    rows, source = (c_rows, "C") if len(c_rows) else (stage_rows, "stage")
    acc = SeriesAcc(t0, bin_ns, nbins)
    acc.add(table.time_ns[rows], table.nr_sectors[rows], table.rwbs[rows])
    return acc.result(source)
