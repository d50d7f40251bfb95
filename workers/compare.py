"""Baseline vs patched: deltas, significance, model fidelity and a CI check verdict.

``compare(baseline, patched)`` takes lists of :func:`workers.analyzers.analyze` results (one per
run / bundle) and, for every scalar metric of every device present on both sides, gives the
absolute values, the delta and the % change. With several runs per side it adds mean, stddev
and Welch's t-test (alpha 0.05, ``scipy.stats.ttest_ind(equal_var=False)``) and turns the
result into **improved / regressed / no significant change** using the metric's direction
(higher throughput is better, lower latency is better; metrics without a direction say
"changed"). lkp-tests' range-separation rule (lib/stats.rb ``is_changed_stats``: the sides are
changed when one side's minimum is above the other's middle value *and* its middle value is
above the other's maximum) is given beside it so the verdict explains itself. With fewer than
2 runs on a side the verdict is "single run"; with fewer than 3, "needs more runs" is flagged.

The check verdict for CI (pass / warn / fail with reasons) comes from :class:`Thresholds`.
Fidelity helpers compare a predicted (model) result with an observed one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numba
import numpy as np

COMPARISON_VERSION = 1
FIRST_LINES = 8  # issue-order lines per device kept for the report (the seed quotes 7-8)
ALPHA = 0.05

VERDICT_IMPROVED = "improved"
VERDICT_REGRESSED = "regressed"
VERDICT_NO_CHANGE = "no significant change"
VERDICT_CHANGED = "changed"
VERDICT_SINGLE_RUN = "single run"
NOTE_NEEDS_MORE_RUNS = "needs more runs"


@dataclass(frozen=True)
class Metric:
    """One scalar metric read from a device's results.

    Attributes:
        path: keys into the device dict, e.g. ``("throughput", "iostat", "rMB/s")``.
        label: short name for tables.
        unit: unit as printed.
        better: +1 higher is better, -1 lower is better, 0 no direction.
        kind: "throughput", "latency", "pattern" or "count" (thresholds apply per kind).
    """

    path: tuple[str, ...]
    label: str
    unit: str
    better: int
    kind: str


#: The scalar metrics compared per device, in report order.
METRICS: tuple[Metric, ...] = (
    Metric(("throughput", "mb_per_s"), "MB/s", "MB/s", +1, "throughput"),
    Metric(("throughput", "iops"), "IOPS", "1/s", +1, "throughput"),
    Metric(("throughput", "iostat", "r/s"), "r/s", "1/s", 0, "count"),
    Metric(("throughput", "iostat", "rMB/s"), "rMB/s", "MB/s", +1, "throughput"),
    Metric(("throughput", "iostat", "rrqm/s"), "rrqm/s", "1/s", 0, "count"),
    Metric(("throughput", "iostat", "%rrqm"), "%rrqm", "%", 0, "pattern"),
    Metric(("throughput", "iostat", "r_await"), "r_await", "ms", -1, "latency"),
    Metric(("throughput", "iostat", "rareq-sz"), "rareq-sz", "KB", +1, "pattern"),
    Metric(("throughput", "iostat", "w/s"), "w/s", "1/s", 0, "count"),
    Metric(("throughput", "iostat", "wMB/s"), "wMB/s", "MB/s", +1, "throughput"),
    Metric(("throughput", "iostat", "w_await"), "w_await", "ms", -1, "latency"),
    Metric(("throughput", "iostat", "wareq-sz"), "wareq-sz", "KB", +1, "pattern"),
    Metric(("throughput", "iostat", "aqu-sz"), "aqu-sz", "", 0, "count"),
    Metric(("throughput", "iostat", "%util"), "%util", "%", 0, "count"),
    Metric(("seek", "zero_share"), "zero-seek share", "%", +1, "pattern"),
    Metric(("seek", "mean_bytes"), "mean seek", "B", -1, "pattern"),
    Metric(("seek", "median_bytes"), "median seek", "B", -1, "pattern"),
    Metric(("sizes", "mean_bytes"), "mean request", "B", +1, "pattern"),
    Metric(("sizes", "percentiles_bytes", "p50"), "p50 request", "B", +1, "pattern"),
    Metric(("fragmentation", "below_max_share"), "below max_sectors", "share", -1, "pattern"),
    Metric(("fragmentation", "sandwiched"), "sandwiched fragments", "", -1, "pattern"),
    Metric(("fragmentation", "pieces_per_bio"), "pieces per bio", "", -1, "pattern"),
    Metric(("ordering", "backward_share"), "backward dispatches", "share", -1, "pattern"),
    Metric(("latency", "Q2C", "percentiles_ns", "p50"), "Q2C p50", "ns", -1, "latency"),
    Metric(("latency", "Q2C", "percentiles_ns", "p99"), "Q2C p99", "ns", -1, "latency"),
    Metric(("latency", "D2C", "percentiles_ns", "p50"), "D2C p50", "ns", -1, "latency"),
    Metric(("latency", "D2C", "percentiles_ns", "p99"), "D2C p99", "ns", -1, "latency"),
)

#: Metrics of the iostat mean row of member-disk groups (``sd*``).
GROUP_METRICS: tuple[Metric, ...] = tuple(
    Metric(("row", m.path[-1]), m.label, m.unit, m.better, m.kind)
    for m in METRICS if m.path[:2] == ("throughput", "iostat"))


#: Metrics of fio jobs passed through in ``results["summaries"]["fio"]`` (key: job name).
FIO_METRICS: tuple[Metric, ...] = tuple(
    m for d in ("read", "write") for m in (
        Metric((f"{d}_bw_bytes",), f"{d} bw", "B/s", +1, "throughput"),
        Metric((f"{d}_iops",), f"{d} IOPS", "1/s", +1, "throughput"),
        Metric((f"{d}_clat_mean_ns",), f"{d} clat mean", "ns", -1, "latency"),
        Metric((f"{d}_clat_percentiles_ns", "99"), f"{d} clat p99", "ns", -1, "latency"),
    ))

#: Metrics of measured ``iostat -x`` rows passed through in ``results["summaries"]["iostat"]``
#: (the last sample per device: the first one of a report is the since-boot average).
IOSTAT_SUMMARY_METRICS: tuple[Metric, ...] = (
    Metric(("r/s",), "r/s", "1/s", 0, "count"),
    Metric(("rkB/s",), "rkB/s", "kB/s", +1, "throughput"),
    Metric(("rMB/s",), "rMB/s", "MB/s", +1, "throughput"),
    Metric(("r_await",), "r_await", "ms", -1, "latency"),
    Metric(("rareq-sz",), "rareq-sz", "KB", +1, "pattern"),
    Metric(("w/s",), "w/s", "1/s", 0, "count"),
    Metric(("wkB/s",), "wkB/s", "kB/s", +1, "throughput"),
    Metric(("wMB/s",), "wMB/s", "MB/s", +1, "throughput"),
    Metric(("w_await",), "w_await", "ms", -1, "latency"),
    Metric(("wareq-sz",), "wareq-sz", "KB", +1, "pattern"),
    Metric(("aqu-sz",), "aqu-sz", "", 0, "count"),
    Metric(("util",), "%util", "%", 0, "count"),
)


@dataclass(frozen=True)
class Thresholds:
    """Limits of the CI check verdict; override any field (``Thresholds().with_overrides``).

    Percentages are relative changes of the patched mean vs the baseline mean.

    Attributes:
        throughput_drop_warn_pct / throughput_drop_fail_pct: a throughput metric may not drop
            more than this.
        latency_rise_warn_pct / latency_rise_fail_pct: a latency metric may not rise more.
        pattern_worse_warn_pct: an I/O-pattern metric (seek, sizes, fragmentation, ordering)
            getting worse by more than this warns.
        warn_on_regression: any statistically significant regression warns.
        fidelity_l1_warn: model fidelity: L1 distance of normalized histograms above this warns.
        fidelity_throughput_err_warn: relative predicted-vs-observed throughput error that warns.
        min_value: ignore metrics whose baseline and patched means are both below this (noise
            on idle devices).
    """

    throughput_drop_warn_pct: float = 3.0
    throughput_drop_fail_pct: float = 10.0
    latency_rise_warn_pct: float = 10.0
    latency_rise_fail_pct: float = 25.0
    pattern_worse_warn_pct: float = 20.0
    warn_on_regression: bool = True
    fidelity_l1_warn: float = 0.3
    fidelity_throughput_err_warn: float = 0.25
    min_value: float = 1e-9

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> Thresholds:
        """A copy with some fields replaced; unknown names raise ValueError."""
        if not overrides:
            return self
        names = {f.name: f.type for f in fields(self)}
        unknown = set(overrides) - set(names)
        if unknown:
            raise ValueError(f"unknown threshold(s): {', '.join(sorted(unknown))}")
        vals: dict[str, Any] = {}
        for k, v in overrides.items():
            vals[k] = _threshold_value(k, v, boolean=names[k] in (bool, "bool"))
        return replace(self, **vals)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _threshold_value(name: str, value: Any, *, boolean: bool) -> float | bool:
    """A threshold override from JSON (numbers, booleans) or the command line (strings).

    ``bool("false")`` is True, so strings are read by their words; a value that is not a
    finite number is refused (NaN would silently disable every comparison).
    """
    if boolean:
        if isinstance(value, str):
            word = value.strip().lower()
            if word in ("1", "true", "yes", "on"):
                return True
            if word in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"threshold {name}: {value!r} is not true/false")
        return bool(value)
    try:
        num = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"threshold {name}: {value!r} is not a number") from None
    if not math.isfinite(num):
        raise ValueError(f"threshold {name}: {value!r} is not a finite number")
    return num


# --- metric extraction -------------------------------------------------------------------------
def _get(d: Mapping[str, Any], path: Sequence[str]) -> float | None:
    cur: Any = d
    for p in path:
        if not isinstance(cur, Mapping) or p not in cur:
            return None
        cur = cur[p]
    if isinstance(cur, bool) or not isinstance(cur, (int, float)):
        return None
    v = float(cur)
    return v if math.isfinite(v) else None


def _with_derived(dev: Mapping[str, Any]) -> dict[str, Any]:
    """Device dict plus derived scalars (zero-seek share in %)."""
    out = dict(dev)
    seek = dict(dev.get("seek", {}))
    if seek.get("cnt"):
        seek["zero_share"] = 100.0 * seek.get("zero_cnt", 0) / seek["cnt"]
    out["seek"] = seek
    return out


def scalar_metrics(result: Mapping[str, Any]) -> dict[str, tuple[Metric, str, float]]:
    """``{"8,0 rMB/s": (metric, device, value), ...}`` for one analyze() result."""
    out: dict[str, tuple[Metric, str, float]] = {}
    for dev, data in result.get("devices", {}).items():
        d = _with_derived(data)
        for m in METRICS:
            v = _get(d, m.path)
            if v is not None:
                out[f"{dev} {m.label}"] = (m, dev, v)
    for g in result.get("iostat", {}).get("groups", []):
        for m in GROUP_METRICS:
            v = _get(g, m.path)
            if v is not None:
                out[f"{g['name']} {m.label}"] = (m, g["name"], v)
    summaries = result.get("summaries") or {}
    for job in summaries.get("fio") or []:
        if not isinstance(job, Mapping):
            continue
        name = f"fio {job.get('jobname', '?')}"
        for m in FIO_METRICS:
            v = _get(job, m.path)
            if v is not None and (v != 0 or m.kind != "latency"):
                out[f"{name} {m.label}"] = (m, name, v)
    last: dict[str, Mapping[str, Any]] = {}
    for row in summaries.get("iostat") or []:
        if isinstance(row, Mapping) and row.get("device"):
            last[str(row["device"])] = row  # later samples win
    for devname, row in last.items():
        name = f"iostat {devname}"
        for m in IOSTAT_SUMMARY_METRICS:
            v = _get(row, m.path)
            if v is not None:
                out[f"{name} {m.label}"] = (m, name, v)
    return out


def scaled(value: float, unit: str) -> tuple[float, str]:
    """Bytes as KB, nanoseconds as microseconds and shares as %, the units the seed threads use."""
    if unit == "B":
        return value / 1024, "KB"
    if unit == "B/s":
        return value / (1024 * 1024), "MiB/s"
    if unit == "ns":
        return value / 1000, "us"
    if unit == "share":
        return 100 * value, "%"
    return value, unit


def num(value: float, digits: int = 4) -> str:
    """``digits`` significant digits, but whole numbers instead of ``1.469e+04`` for large
    values: a latency of 14692 us reads better in a mail than an exponent."""
    if 10 ** digits <= abs(value) < 1e15:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def format_value(value: float, unit: str) -> str:
    """``12.5 KB`` style text of a metric value."""
    v, u = scaled(value, unit)
    return f"{num(v)} {u}".rstrip() if u not in ("", "1/s") else num(v)


# --- statistics --------------------------------------------------------------------------------
def _side(values: Sequence[float]) -> dict[str, Any]:
    a = np.asarray(values, dtype=np.float64)
    return {"values": [float(x) for x in a], "n": len(a), "mean": float(a.mean()),
            "stddev": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
            "min": float(a.min()), "max": float(a.max())}


def lkp_changed(base: Sequence[float], patched: Sequence[float]) -> dict[str, Any]:
    """lkp-tests' default rule (lib/stats.rb ``is_changed_stats``), with its 1% floor.

    lkp takes the middle sorted sample as "mean" (``get_min_mean_max``); sides are changed when
    ``min_b > mid_a and mid_b > max_a`` (or the reverse), and the ratio of middles exceeds 1.01.
    lkp compares only when at least one side has 3 samples (``applicable``).
    """
    a = sorted(base)
    b = sorted(patched)
    if not a or not b:
        return {"applicable": False, "changed": False}
    min_a, mid_a, max_a = a[0], a[len(a) // 2], a[-1]
    min_b, mid_b, max_b = b[0], b[len(b) // 2], b[-1]
    separated = (min_b > mid_a and mid_b > max_a) or (min_a > mid_b and mid_a > max_b)
    lo, hi = sorted((abs(mid_a), abs(mid_b)))
    ratio = hi / lo if lo > 0 else math.inf if hi > 0 else 1.0
    return {"applicable": len(a) >= 3 or len(b) >= 3, "changed": bool(separated and ratio > 1.01),
            "interval_baseline": [min_a, max_a], "interval_patched": [min_b, max_b]}


def welch(base: Sequence[float], patched: Sequence[float]) -> float | None:
    """Two-sided p-value of Welch's t-test; handles zero-variance sides exactly."""
    a = np.asarray(base, dtype=np.float64)
    b = np.asarray(patched, dtype=np.float64)
    if len(a) < 2 or len(b) < 2:
        return None
    if a.std() == 0 and b.std() == 0:
        return 1.0 if a.mean() == b.mean() else 0.0
    from scipy import stats

    p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return p if math.isfinite(p) else None


def compare_metric(metric: Metric, base: Sequence[float], patched: Sequence[float],
                   *, alpha: float = ALPHA) -> dict[str, Any]:
    """Values, delta, % change, Welch p-value, verdict and lkp's rule for one metric."""
    sb, sp = _side(base), _side(patched)
    delta = sp["mean"] - sb["mean"]
    pct = 100.0 * delta / abs(sb["mean"]) if sb["mean"] else None
    p = welch(base, patched)
    if p is None:
        verdict = VERDICT_SINGLE_RUN
    elif p < alpha and delta != 0:
        if metric.better == 0:
            verdict = VERDICT_CHANGED
        else:
            verdict = VERDICT_IMPROVED if delta * metric.better > 0 else VERDICT_REGRESSED
    else:
        verdict = VERDICT_NO_CHANGE
    return {
        "baseline": sb, "patched": sp, "delta": delta, "pct": pct, "p_value": p,
        "verdict": verdict,
        "needs_more_runs": min(sb["n"], sp["n"]) < 3,
        "lkp": lkp_changed(base, patched),
    }


# --- fidelity ----------------------------------------------------------------------------------
def l1_normalized(a: Sequence[float], b: Sequence[float]) -> float | None:
    """L1 distance of two histograms after normalizing each to sum 1 (0 same, 2 disjoint)."""
    n = max(len(a), len(b))
    x = np.zeros(n)
    y = np.zeros(n)
    x[: len(a)] = a
    y[: len(b)] = b
    if x.sum() == 0 or y.sum() == 0:
        return None
    return float(np.abs(x / x.sum() - y / y.sum()).sum())


def _requests_array(reqs: Sequence[tuple[int, int]] | np.ndarray[Any, Any]
                    ) -> np.ndarray[Any, Any]:
    """``(n, 2)`` uint64 array of ``(sector, nr_sectors)`` from tuples or an array."""
    arr = np.asarray(reqs, dtype=np.uint64)
    return arr.reshape(-1, 2) if arr.size else np.zeros((0, 2), dtype=np.uint64)


def _occurrence(ids: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """For each position, how many earlier positions hold the same id (0 for the first)."""
    order = np.argsort(ids, kind="stable")
    sid = ids[order]
    pos = np.arange(len(sid), dtype=np.int64)
    start = np.r_[True, sid[1:] != sid[:-1]] if len(sid) else np.zeros(0, dtype=bool)
    first = np.maximum.accumulate(np.where(start, pos, 0)) if len(sid) else pos
    occ = np.empty(len(ids), dtype=np.int64)
    occ[order] = pos - first
    return occ


@numba.njit(cache=True)
def _lis_length(seq: np.ndarray[Any, Any]) -> int:  # pragma: no cover - compiled
    """Length of the longest strictly increasing subsequence (patience sorting, n log n)."""
    tails = np.empty(len(seq), dtype=np.int64)
    n = 0
    for v in seq:
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if tails[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        tails[lo] = v
        if lo == n:
            n += 1
    return n


def matched_in_order(observed: Sequence[tuple[int, int]] | np.ndarray[Any, Any],
                     predicted: Sequence[tuple[int, int]] | np.ndarray[Any, Any]) -> float:
    """Share of observed requests the prediction issues too, in the same relative order.

    Requests are ``(sector, nr_sectors)`` (tuples or an ``(n, 2)`` array). The j-th observed
    copy of a request is matched with its j-th predicted copy; the longest run of observed
    requests that appear in the predicted stream in increasing predicted position (a longest
    increasing subsequence, O(n log n)) over the number of observed requests. Columnar: a D
    stream of millions of requests costs a sort, not a Python loop per request.
    """
    obs = _requests_array(observed)
    pred = _requests_array(predicted)
    if len(obs) == 0:
        return 1.0 if len(pred) == 0 else 0.0
    if len(pred) == 0:
        return 0.0
    both = np.concatenate([obs, pred])
    order = np.lexsort((both[:, 1], both[:, 0]))  # by sector, then size
    sb = both[order]
    new_key = np.r_[True, (sb[1:] != sb[:-1]).any(axis=1)]
    ids = np.empty(len(both), dtype=np.int64)
    ids[order] = np.cumsum(new_key) - 1
    oid, pid = ids[: len(obs)], ids[len(obs):]
    width = np.int64(max(len(obs), len(pred)) + 1)
    okey = oid * width + _occurrence(oid)
    pkey = pid * width + _occurrence(pid)
    porder = np.argsort(pkey, kind="stable")
    spkey = pkey[porder]
    at = np.searchsorted(spkey, okey)
    found = at < len(spkey)
    found[found] = spkey[at[found]] == okey[found]
    seq = porder[at[found]].astype(np.int64)  # predicted positions, in observed order
    return _lis_length(seq) / len(obs)


def fidelity(predicted: Mapping[str, Any], observed: Mapping[str, Any], *,
             order: Mapping[str, float] | None = None) -> dict[str, Any]:
    """How close a predicted result is to an observed one, per device present in both.

    Args:
        predicted, observed: analyze() results (model output and real trace).
        order: optional per-device share of D requests matched in order (from
            :func:`matched_in_order` over the two tables' D streams).
    """
    out: dict[str, Any] = {}
    for dev, obs in observed.get("devices", {}).items():
        pred = predicted.get("devices", {}).get(dev)
        if pred is None:
            continue
        o_mb = _get(obs, ("throughput", "mb_per_s"))
        p_mb = _get(pred, ("throughput", "mb_per_s"))
        out[dev] = {
            "seek_l1": l1_normalized(pred["seek"]["counts"], obs["seek"]["counts"]),
            "size_l1": l1_normalized(pred["sizes"]["counts"], obs["sizes"]["counts"]),
            "throughput_rel_err": (abs(p_mb - o_mb) / o_mb) if o_mb and p_mb is not None
            else None,
            "matched_in_order": (order or {}).get(dev),
        }
    return out


# --- the comparison ----------------------------------------------------------------------------
def _last_iostat_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The bundle's own ``iostat -x`` rows, last sample per device (numbers only)."""
    last: dict[str, dict[str, Any]] = {}
    for row in (result.get("summaries") or {}).get("iostat") or []:
        if isinstance(row, Mapping) and row.get("device"):
            last[str(row["device"])] = {k: v for k, v in row.items()
                                        if k == "device" or (isinstance(v, (int, float))
                                                             and not isinstance(v, bool)
                                                             and k != "sample")}
    return list(last.values())


def _side_summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the report prints per side: seek histograms, iostat rows and groups, stages."""
    return {
        "devices": {dev: {"name": d.get("name", dev), "stage": d.get("stage"),
                          "stage_note": d.get("stage_note", ""), "seek": d.get("seek"),
                          "events": d.get("events", 0),
                          "first": (d.get("ordering") or {}).get("first", [])[:FIRST_LINES]}
                    for dev, d in result.get("devices", {}).items()},
        "iostat": result.get("iostat", {}),
        "time_known": result.get("time_known", True),
        "measured_iostat": _last_iostat_rows(result),
        "remaps": {k: {kk: v[kk] for kk in ("remaps", "out_of_order", "out_of_order_share")}
                   for k, v in result.get("remaps", {}).items()},
    }


def compare(baseline: Sequence[Mapping[str, Any]], patched: Sequence[Mapping[str, Any]], *,
            thresholds: Thresholds | Mapping[str, Any] | None = None,
            fidelity_result: Mapping[str, Any] | None = None,
            alpha: float = ALPHA) -> dict[str, Any]:
    """Compare runs of the baseline kernel with runs of the patched one.

    Args:
        baseline, patched: analyze() results, one per run (at least one each).
        thresholds: a :class:`Thresholds` or a mapping of overrides of the defaults.
        fidelity_result: output of :func:`fidelity` to include and check.
        alpha: significance level of Welch's test.

    Raises:
        ValueError: when a side has no runs.
    """
    if not baseline or not patched:
        raise ValueError("compare needs at least one baseline and one patched result")
    th = thresholds if isinstance(thresholds, Thresholds) else Thresholds().with_overrides(
        thresholds)
    per_b = [scalar_metrics(r) for r in baseline]
    per_p = [scalar_metrics(r) for r in patched]
    keys: list[str] = []
    seen: set[str] = set()
    for d in per_b:
        for k in d:
            if k not in seen and any(k in x for x in per_p):
                keys.append(k)
                seen.add(k)
    metrics = []
    for k in keys:
        b_vals = [d[k][2] for d in per_b if k in d]
        p_vals = [d[k][2] for d in per_p if k in d]
        m, dev, _ = next(d[k] for d in per_b if k in d)
        row = {"key": k, "device": dev, "label": m.label, "unit": m.unit, "kind": m.kind,
               "better": {1: "higher", -1: "lower", 0: None}[m.better], "path": list(m.path)}
        row.update(compare_metric(m, b_vals, p_vals, alpha=alpha))
        metrics.append(row)
    nb, npt_ = len(baseline), len(patched)
    runs_note = VERDICT_SINGLE_RUN if min(nb, npt_) < 2 else (
        NOTE_NEEDS_MORE_RUNS if min(nb, npt_) < 3 else None)
    result: dict[str, Any] = {
        "version": COMPARISON_VERSION,
        "runs": {"baseline": nb, "patched": npt_},
        "runs_note": runs_note,
        "alpha": alpha,
        "metrics": metrics,
        "summary": {
            "improved": [r["key"] for r in metrics if r["verdict"] == VERDICT_IMPROVED],
            "regressed": [r["key"] for r in metrics if r["verdict"] == VERDICT_REGRESSED],
            "changed": [r["key"] for r in metrics if r["verdict"] == VERDICT_CHANGED],
            "no_change": sum(1 for r in metrics if r["verdict"] == VERDICT_NO_CHANGE),
        },
        "sides": {"baseline": _side_summary(baseline[0]), "patched": _side_summary(patched[0])},
        "fidelity": dict(fidelity_result) if fidelity_result else None,
    }
    result["check"] = check_verdict(result, th)
    return result


def check_verdict(comparison: Mapping[str, Any], thresholds: Thresholds | None = None
                  ) -> dict[str, Any]:
    """pass / warn / fail with the reasons, from a comparison and thresholds."""
    th = thresholds or Thresholds()
    fails: list[str] = []
    warns: list[str] = []
    for r in comparison.get("metrics", []):
        pct = r.get("pct")
        b, p = r["baseline"]["mean"], r["patched"]["mean"]
        if pct is None or max(abs(b), abs(p)) < th.min_value:
            continue
        unit = r.get("unit") or ""
        what = (f"{r['key']}: {format_value(b, unit)} -> {format_value(p, unit)} "
                f"({pct:+.1f}%)")
        if r["kind"] == "throughput" and r.get("better") == "higher":
            if pct < -th.throughput_drop_fail_pct:
                fails.append(f"{what} drops more than {th.throughput_drop_fail_pct:g}%")
            elif pct < -th.throughput_drop_warn_pct:
                warns.append(f"{what} drops more than {th.throughput_drop_warn_pct:g}%")
        elif r["kind"] == "latency" and r.get("better") == "lower":
            if pct > th.latency_rise_fail_pct:
                fails.append(f"{what} rises more than {th.latency_rise_fail_pct:g}%")
            elif pct > th.latency_rise_warn_pct:
                warns.append(f"{what} rises more than {th.latency_rise_warn_pct:g}%")
        elif r["kind"] == "pattern" and r.get("better"):
            worse = -pct if r["better"] == "higher" else pct
            if worse > th.pattern_worse_warn_pct:
                warns.append(f"{what} worse by more than {th.pattern_worse_warn_pct:g}%")
        if th.warn_on_regression and r["verdict"] == VERDICT_REGRESSED:
            msg = f"{r['key']}: significant regression (Welch p={r['p_value']:.3g})"
            if msg not in warns:
                warns.append(msg)
    for dev, f in (comparison.get("fidelity") or {}).items():
        for k in ("seek_l1", "size_l1"):
            v = f.get(k)
            if v is not None and v > th.fidelity_l1_warn:
                warns.append(f"model fidelity {dev} {k} {v:.2f} above {th.fidelity_l1_warn:g}")
        e = f.get("throughput_rel_err")
        if e is not None and e > th.fidelity_throughput_err_warn:
            warns.append(f"model fidelity {dev} throughput error {100 * e:.0f}% above "
                         f"{100 * th.fidelity_throughput_err_warn:.0f}%")
    verdict = "fail" if fails else "warn" if warns else "pass"
    note = comparison.get("runs_note")
    return {"verdict": verdict, "reasons": fails + warns, "runs_note": note,
            "thresholds": th.to_json()}
