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

from workers.analyzers.common import SECTOR_BYTES, StageMatcher, completion_rows
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


def iostat_row(table: EventTable, dev: int, matcher: StageMatcher, interval_ns: int, *,
               dev_rows: npt.NDArray[np.intp] | None = None) -> dict[str, Any]:
    """One device's iostat -x-like row (see the module docstring for each column).

    Columns that cannot be computed are None and ``note`` gives the reason (None when every
    column is known); ``ios`` and ``matched_start`` are always counts.
    """
    base = np.flatnonzero(table.dev == dev) if dev_rows is None else dev_rows
    act = table.action[base]
    c_rows = completion_rows(table, base)
    timed = interval_ns > 0
    secs = interval_ns / 1e9 if timed else math.inf
    direction = _direction(table.rwbs[c_rows])
    sectors = table.nr_sectors[c_rows].astype(np.int64)

    # start of each completed request: G, else Q (bio-based devices)
    start = np.full(len(c_rows), -1, dtype=np.int64)
    for a in ("Q", "G"):  # G overrides Q where both matched
        ra, rb = matcher.pairs_for(a, "C", dev)
        idx = np.searchsorted(c_rows, rb)
        ok = (idx < len(c_rows))
        ok[ok] &= c_rows[idx[ok]] == rb[ok]
        start[idx[ok]] = table.time_ns[ra[ok]]
    has_start = start >= 0
    wait_ns = np.where(has_start, table.time_ns[c_rows] - start, 0)

    merges = base[(act == ACT_BACKMERGE) | (act == ACT_FRONTMERGE)]
    mdir = _direction(table.rwbs[merges])

    def rate(x: float) -> float | None:
        return x / secs if timed else None

    row: dict[str, Any] = {}
    for letter, code in (("r", 0), ("w", 1), ("d", 2)):
        sel = direction == code
        n = int(sel.sum())
        nsec = int(sectors[sel].sum())
        waited = sel & has_start
        row[f"{letter}/s"] = rate(n)
        row[f"{letter}MB/s"] = rate(nsec * SECTOR_BYTES / _MB)
        # no requests: iostat prints 0.00; requests whose start is unknown: no await
        row[f"{letter}_await"] = (float(wait_ns[waited].mean() / 1e6) if waited.any()
                                  else (0.0 if n == 0 else None))
        row[f"{letter}areq-sz"] = nsec * SECTOR_BYTES / 1024 / n if n else 0.0
        if letter != "d":
            m = int((mdir == code).sum())
            row[f"{letter}rqm/s"] = rate(m)
            row[f"%{letter}rqm"] = 100.0 * m / (m + n) if (m + n) else 0.0
    row["aqu-sz"] = (float(wait_ns[has_start].sum() / interval_ns)
                     if timed and (has_start.any() or not len(c_rows)) else None)

    # %util: union of [D, C) (or [Q, C) without D) intervals
    a = "D" if bool(np.any(act == ACTION_CODES["D"])) else "Q"
    ra, rb = matcher.pairs_for(a, "C", dev)
    busy = union_length(table.time_ns[ra], table.time_ns[rb])
    row["%util"] = (min(100.0, 100.0 * busy / interval_ns)
                    if timed and (len(ra) or not len(c_rows)) else None)
    note = None
    if not len(c_rows):
        # the kernel accounts a request at completion: without C events nothing is known
        row.update(dict.fromkeys(IOSTAT_COLUMNS))
        note = "no C events"
    elif not timed:
        note = "no timestamps"
    elif any(row[k] is None for k in IOSTAT_COLUMNS):
        note = f"{int(has_start.sum())} of {len(c_rows)} completions matched to a G/Q start"
    out = {k: row[k] for k in IOSTAT_COLUMNS}
    out.update(ios=float(len(c_rows)), matched_start=float(int(has_start.sum())), note=note)
    return out


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


def time_series(table: EventTable, dev: int, stage_rows: npt.NDArray[np.intp], t0: int,
                bin_ns: int, nbins: int, *, dev_rows: npt.NDArray[np.intp] | None = None
                ) -> dict[str, Any]:
    """MB/s and IOPS per bin for one device: completions (C) if any, else the stage rows."""
    base = np.flatnonzero(table.dev == dev) if dev_rows is None else dev_rows
    c_rows = completion_rows(table, base)
    rows, source = (c_rows, "C") if len(c_rows) else (stage_rows, "stage")
    b = np.clip((table.time_ns[rows] - t0) // bin_ns, 0, nbins - 1).astype(np.int64)
    w = (table.rwbs[rows] & RWBS_WRITE) != 0
    nbytes = table.nr_sectors[rows].astype(np.float64) * SECTOR_BYTES
    scale = 1e9 / bin_ns
    rb = np.bincount(b[~w], weights=nbytes[~w], minlength=nbins) * scale / _MB
    wb = np.bincount(b[w], weights=nbytes[w], minlength=nbins) * scale / _MB
    ri = np.bincount(b[~w], minlength=nbins) * scale
    wi = np.bincount(b[w], minlength=nbins) * scale
    return {
        "source": source,
        "read_mbps": np.round(rb, 3).tolist(),
        "write_mbps": np.round(wb, 3).tolist(),
        "read_iops": np.round(ri, 1).tolist(),
        "write_iops": np.round(wi, 1).tolist(),
        "total_mb": float(nbytes.sum() / _MB),
        "total_ios": int(len(rows)),
    }
