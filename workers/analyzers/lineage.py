"""Per-bio lineage: every event of a request across tracepoints and devices in one record.

A request is followed from its issue (D) on a device back to what made it and forward to its
completion: the bio's queueing (Q), request allocation (G), insertion (I), issue (D) and
completion (C) on that device (paired by device and sector as btt does,
:class:`~workers.analyzers.common.StageMatcher`), the bios merged into it (M back, F front),
and for a member of a stack the remap (A) that sent it there, which names the top device and
the original sector, and so the **parent** bio: the top device's Q whose range holds that sector,
with the splits (X) it went through. From the parents follow pieces per bio and per-bio latency
(parent Q to the last piece's C), what no per-device view shows.

Records are built for the first ``limit`` requests in issue order (columnar pairing, a Python
walk over the merges, remaps and parents of those requests only).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.common import StageMatcher, percentiles, time_order
from workers.events import (
    ACT_BACKMERGE,
    ACT_FRONTMERGE,
    ACT_REMAP,
    ACT_SPLIT,
    ACTION_CODES,
    EventTable,
    dev_str,
    rwbs_to_text,
)

STAGES_BEFORE_D = ("Q", "G", "I")
KEEP_RECORDS = 100  # request records stored in the results (the page's request stories)
KEEP_BIOS = 50
MAX_OPEN_MERGES = 4096  # merges waiting for their request's issue, per device
MAX_PARENT_WALK = 4096  # top-device Q events looked back from a remap for its parent
MAX_SPLITS = 64  # X events looked at after a parent's Q


def _pair_index(matcher: StageMatcher, a: str, b: str) -> dict[int, int]:
    """Every pair as ``{B row: A row}`` (the readable twin of :func:`_pairs_of`)."""
    ra, rb = matcher.pairs(a, b)
    return {int(y): int(x) for x, y in zip(ra, rb)}


def _pairs_of(matcher: StageMatcher, a: str, b: str, keys: npt.NDArray[np.intp],
              by_a: bool = False) -> dict[int, int]:
    """The pairs of ``a -> b`` whose B row (A row with ``by_a``) is in ``keys``, as
    ``{key row: other row}``.

    Equal to the matching entries of :func:`_pair_index` (B rows are unique among the pairs,
    and so are A rows: one B per A), but only ``len(keys)`` dict entries are built: a record is
    kept for the first ``limit`` issues, and a dict of every pair of a 100M-event trace cost
    more than the rest of the analysis.
    """
    ra, rb = matcher.pairs(a, b)
    key, other = (ra, rb) if by_a else (rb, ra)
    if len(key) == 0 or len(keys) == 0:
        return {}
    order = np.argsort(key, kind="stable")
    skey = key[order]
    pos = np.minimum(np.searchsorted(skey, keys), len(skey) - 1)
    hit = skey[pos] == keys
    return {int(k): int(v) for k, v in zip(keys[hit], other[order[pos[hit]]])}


#: The stage pairs a record follows, ``(a, b, by_a)`` as :func:`_pairs_of` takes them.
RECORD_PAIRS: tuple[tuple[str, str, bool], ...] = (
    ("Q", "D", False), ("G", "D", False), ("I", "D", False), ("D", "C", True))


def issue_rows(table: EventTable, limit: int) -> npt.NDArray[np.intp]:
    """The D rows (with data) that get a record: the first ``limit`` in issue order."""
    d_code = ACTION_CODES["D"]
    return time_order(table, np.flatnonzero((table.action == d_code)
                                            & (table.nr_sectors > 0)))[:limit]


def record_pairs(matcher: StageMatcher, d_rows: npt.NDArray[np.intp]
                 ) -> dict[tuple[str, str], dict[int, int]]:
    """The pairs the records of ``d_rows`` need, from one matcher, as ``{D row: time of the
    other event}`` (a device's matcher gives that device's share; shares merge with
    ``dict.update``)."""
    t = matcher.table.time_ns
    return {(a, b): {k: int(t[v]) for k, v in _pairs_of(matcher, a, b, d_rows,
                                                         by_a=by_a).items()}
            for a, b, by_a in RECORD_PAIRS}


def lineage(table: EventTable, matcher: StageMatcher | None, *, limit: int = 20000,
            qs: tuple[float, ...] = (50.0, 90.0, 99.0),
            pairs: dict[tuple[str, str], dict[int, int]] | None = None) -> dict[str, Any]:
    """``{"requests": [...first records], "count", "bios": {top: {...}}}``.

    A record: ``{"dev", "name", "sector", "nr_sectors", "rwbs", "events": [{"a", "t_ns"}],
    "merged": [{"a", "sector", "nr_sectors", "t_ns"}], "parent": {"dev", "name", "sector",
    "nr_sectors", "t_ns", "offset_kb", "splits"} | None}``.

    ``pairs``: :func:`record_pairs` of ``issue_rows(table, limit)`` already collected
    (``{D row: time}``, from per-device matchers or a chunked pass); then ``matcher`` is not
    used. Only rows up to the last kept issue are read, so ``table`` may be just those rows
    (the chunked analysis passes the rows a record can use, with the pairs).
    """
    d_rows = issue_rows(table, limit)
    if pairs is None:
        assert matcher is not None
        pairs = record_pairs(matcher, d_rows)
    to_d = {st: pairs[(st, "D")] for st in STAGES_BEFORE_D}
    d_to_c = pairs[("D", "C")]
    t = table.time_ns
    sec = table.sector
    nr = table.nr_sectors

    # Only events up to the last kept issue can join a record (merges are taken up to the
    # issue's time, remaps, parents and splits up to it too), so the per-event Python
    # structures below are built for those only: the same records, in memory and time
    # bounded by ``limit`` instead of the trace's length.
    horizon = (t <= t[d_rows].max()) if len(d_rows) else np.zeros(len(t), dtype=bool)

    # merges (M/F) per device, time ordered
    merge_rows = time_order(table, np.flatnonzero(np.isin(table.action,
                                                          (ACT_BACKMERGE, ACT_FRONTMERGE))
                                                  & horizon))
    merges_by_dev: dict[int, list[int]] = defaultdict(list)
    for r in merge_rows:
        merges_by_dev[int(table.dev[r])].append(int(r))
    # remaps (A) by (member dev, member sector), time ordered
    remap_rows = time_order(table, np.flatnonzero((table.action == ACT_REMAP) & horizon))
    remaps: dict[tuple[int, int], list[int]] = defaultdict(list)
    for r in remap_rows:
        remaps[(int(table.dev[r]), int(sec[r]))].append(int(r))
    # Q and X of the top devices, time ordered
    tops = {int(table.aux2[r]) for r in remap_rows}
    q_code = ACTION_CODES["Q"]
    top_q: dict[int, npt.NDArray[np.intp]] = {}
    top_x: dict[int, npt.NDArray[np.intp]] = {}
    for top in tops:
        on_top = (table.dev == top) & horizon
        top_q[top] = time_order(table, np.flatnonzero(on_top & (table.action == q_code)))
        top_x[top] = time_order(table, np.flatnonzero(on_top & (table.action == ACT_SPLIT)))

    records: list[dict[str, Any]] = []  # the first KEEP_RECORDS (the rest are counted)
    count = 0
    bios: dict[tuple[int, int], dict[str, Any]] = {}
    open_merges: dict[int, list[int]] = defaultdict(list)
    next_merge: dict[int, int] = {}
    q_times = {top: [int(x) for x in t[rows]] for top, rows in top_q.items()}
    x_times = {top: [int(x) for x in t[rows]] for top, rows in top_x.items()}
    for d in (int(x) for x in d_rows):
        dev = int(table.dev[d])
        s, n = int(sec[d]), int(nr[d])
        events = [{"a": st, "t_ns": to_d[st][d]} for st in STAGES_BEFORE_D if d in to_d[st]]
        events.append({"a": "D", "t_ns": int(t[d])})
        c = d_to_c.get(d)  # the completion's time
        if c is not None:
            events.append({"a": "C", "t_ns": c})
        merged = []
        # merges of this device up to this issue join the open ones (bounded), in time order
        pending = merges_by_dev.get(dev, [])
        at = next_merge.get(dev, 0)
        while at < len(pending) and int(t[pending[at]]) <= int(t[d]):
            open_merges[dev].append(pending[at])
            at += 1
        next_merge[dev] = at
        if len(open_merges[dev]) > MAX_OPEN_MERGES:
            del open_merges[dev][:len(open_merges[dev]) - MAX_OPEN_MERGES]
        keep = []
        for m in open_merges[dev]:
            if s <= int(sec[m]) < s + n:
                merged.append({"a": "M" if table.action[m] == ACT_BACKMERGE else "F",
                               "sector": int(sec[m]), "nr_sectors": int(nr[m]),
                               "t_ns": int(t[m])})
            else:
                keep.append(m)
        open_merges[dev] = keep
        parent = None
        cand = remaps.get((dev, s))
        if cand:
            times = [int(t[r]) for r in cand]
            i = bisect_right(times, int(t[d])) - 1
            if i >= 0:
                a = cand[i]
                top, orig = int(table.aux2[a]), int(table.aux[a])
                events.insert(0, {"a": "A", "t_ns": int(t[a])})
                qrows = top_q.get(top)
                q = -1
                if qrows is not None and len(qrows):
                    # the latest Q of the top device up to the remap whose range holds the
                    # original sector (a bounded walk back: parents are recent)
                    j = bisect_right(q_times[top], int(t[a])) - 1
                    for k in range(j, max(-1, j - MAX_PARENT_WALK), -1):
                        r = int(qrows[k])
                        if int(sec[r]) <= orig < int(sec[r]) + int(nr[r]):
                            q = r
                            break
                if q >= 0:
                    xrows = top_x.get(top, np.zeros(0, dtype=np.intp))
                    xt = x_times.get(top, [])
                    splits = []
                    for k in range(bisect_left(xt, int(t[q])),
                                   min(len(xt), bisect_left(xt, int(t[q])) + MAX_SPLITS)):
                        x = int(xrows[k])
                        if xt[k] > int(t[d]):
                            break
                        if int(sec[q]) <= int(sec[x]) < int(sec[q]) + int(nr[q]):
                            splits.append(int(table.aux[x]))
                    parent = {"dev": dev_str(top), "name": table.device_name(top),
                              "sector": int(sec[q]), "nr_sectors": int(nr[q]),
                              "t_ns": int(t[q]), "offset_kb": (orig - int(sec[q])) // 2,
                              "splits": sorted(set(splits))}
                    bio = bios.setdefault((top, q), {
                        "dev": dev_str(top), "sector": int(sec[q]),
                        "nr_sectors": int(nr[q]), "t_ns": int(t[q]), "pieces": 0,
                        "members": [], "last_c_ns": None})
                    bio["pieces"] += 1
                    bio["members"].append(table.device_name(dev))
                    if c is not None:
                        bio["last_c_ns"] = max(bio["last_c_ns"] or 0, c)
        count += 1
        if len(records) < KEEP_RECORDS:
            records.append({"dev": dev_str(dev), "name": table.device_name(dev), "sector": s,
                            "nr_sectors": n, "rwbs": rwbs_to_text(int(table.rwbs[d])),
                            "events": sorted(events, key=lambda e: e["t_ns"]), "merged": merged,
                            "parent": parent})
    per_top: dict[str, list[dict[str, Any]]] = {}
    for (top_dev, _q), bio in sorted(bios.items(), key=lambda kv: kv[1]["t_ns"]):
        per_top.setdefault(dev_str(top_dev), []).append(bio)
    summary: dict[str, Any] = {}
    for top_name, lst in per_top.items():
        pieces = np.array([b["pieces"] for b in lst], dtype=np.float64)
        lat = np.array([b["last_c_ns"] - b["t_ns"] for b in lst if b["last_c_ns"] is not None],
                       dtype=np.int64)
        summary[top_name] = {"bios": len(lst), "pieces_per_bio": float(pieces.mean()),
                        "latency_ns": {"count": int(len(lat)),
                                       "percentiles_ns": percentiles(lat, qs) if len(lat)
                                       else {}},
                        "first": lst[:KEEP_BIOS]}
    return {"count": count, "limit": limit, "requests": records,
            "bios": summary}


def story(record: dict[str, Any]) -> str:
    """One request's story in a line: ``Q +0 us, G +70 us, D +243 us, C +1166 us; parent ...``."""
    ev = record.get("events") or []
    if not ev:
        return ""
    t0 = ev[0]["t_ns"]
    parts = [f"{e['a']} +{(e['t_ns'] - t0) / 1000:.0f} us" for e in ev]
    text = ", ".join(parts)
    if record.get("merged"):
        text += f"; {len(record['merged'])} bio(s) merged"
    p = record.get("parent")
    if p:
        text += (f"; from {p['name']} {p['sector']} + {p['nr_sectors']} at "
                 f"{p['offset_kb']} KB")
    return text
