"""Baseline vs patched: mechanism facts, timing statistics, model fidelity and a CI check.

Two kinds of evidence (issue 9):

* **Mechanism** metrics (request sizes and their histogram, splits and pieces per bio, share
  below max_sectors, merges, backward dispatches, seek distances, the order of requests on a
  device and across the members of a stack) are deterministic for one workload on one kernel:
  one run shows them exactly, so they are compared exactly and a difference is a fact:
  **improved / regressed / changed (no direction) / unchanged**, with its size.
* **Timing** metrics (MB/s, IOPS, latencies, %util, queue depth) vary run to run. With fewer
  than ``min_runs`` (3, lkp's rule) runs on a side their verdict is **needs more runs** (never
  warn or fail), with how many more are needed: lkp's 3 per side and a power estimate from the
  variance seen (two-sample normal approximation, alpha and 80% power, to detect the family's
  fail threshold). With enough runs: Welch's t-test (``scipy.stats.ttest_ind(equal_var=False)``),
  lkp-tests' range rule (lib/stats.rb ``is_changed_stats``) and a bootstrap 95% confidence
  interval of the % change, side by side; a change is significant when Welch's p < alpha and
  the interval excludes 0.
* A timing metric that a trace cannot support is **not judged**, with the reason on the row:
  throughput and latency of a device seen at the G or Q stage only, fewer than
  ``min_requests`` requests *and* less than ``min_window_s`` of trace, or a window too short
  for a rate.

The member disks of a stack are rolled up into one row per metric ("members of md0": the sum
of rates and counts, the mean of the rest, with the spread across members); per-member rows
stay in ``metrics`` with ``member_of`` set. The check (success / warning / fail) comes from the
mechanism rules the user marks unwanted (``rule_*`` in :class:`Thresholds`: 0 off, 1 warning,
2 fail) and from significant timing regressions; it never looks at per-member rows, timing rows
that are not judged, or model fidelity (which is given as notes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numba
import numpy as np

COMPARISON_VERSION = 2
FIRST_LINES = 8  # issue-order lines per device kept for the report (the seed quotes 7-8)
ALPHA = 0.05

MECHANISM = "mechanism"
TIMING = "timing"

VERDICT_IMPROVED = "improved"
VERDICT_REGRESSED = "regressed"
VERDICT_CHANGED = "changed (no direction)"
VERDICT_UNCHANGED = "unchanged"
VERDICT_NO_CHANGE = "no significant change"
VERDICT_NEEDS_RUNS = "needs more runs"
VERDICT_NOT_JUDGED = "not judged"
#: Kept for the run-count note of the whole comparison.
VERDICT_SINGLE_RUN = "single run"
NOTE_NEEDS_MORE_RUNS = "needs more runs"

CHECK_SUCCESS = "success"
CHECK_WARNING = "warning"
CHECK_FAIL = "fail"


@dataclass(frozen=True)
class Metric:
    """One scalar metric read from a device's results.

    Attributes:
        path: keys into the device dict, e.g. ``("throughput", "iostat", "rMB/s")``.
        label: short name for tables and the summary.
        unit: unit as stored ("B", "ns", "share", "%", "MB/s", ...).
        better: +1 higher is better, -1 lower is better, 0 no direction.
        family: "throughput", "latency", "count" (timing) or "pattern" (mechanism); the timing
            thresholds apply per family.
        kind: :data:`MECHANISM` or :data:`TIMING` (from the family).
        agg: how members roll up into their array: "sum" (rates, counts) or "mean".
        headline: a mechanism metric the summary names when it changes.
        section: the page section (and chart) that shows it, for the summary's links.
    """

    path: tuple[str, ...]
    label: str
    unit: str
    better: int
    family: str
    agg: str = "mean"
    headline: bool = False
    section: str = ""
    chart: str = ""

    @property
    def kind(self) -> str:
        return MECHANISM if self.family == "pattern" else TIMING


def _m(path: tuple[str, ...], label: str, unit: str, better: int, family: str, **kw: Any
       ) -> Metric:
    return Metric(path, label, unit, better, family, **kw)


#: The scalar metrics compared per device, in report order.
METRICS: tuple[Metric, ...] = (
    _m(("ordering", "backward_share"), "backward dispatches", "share", -1, "pattern",
       headline=True, section="ordering", chart="backward"),
    _m(("seek", "mean_bytes"), "mean seek distance", "B", -1, "pattern", headline=True,
       section="seek", chart="seek"),
    _m(("seek", "zero_share"), "zero-seek share", "%", +1, "pattern", headline=True,
       section="seek", chart="seek"),
    _m(("sizes", "mean_bytes"), "mean request", "B", +1, "pattern", headline=True,
       section="fragmentation", chart="sizes"),
    _m(("fragmentation", "below_max_share"), "below max_sectors", "share", -1, "pattern",
       headline=True, section="fragmentation", chart="sizes"),
    _m(("fragmentation", "pieces_per_bio"), "pieces per bio", "", -1, "pattern", headline=True,
       section="fragmentation", chart="sizes"),
    _m(("fragmentation", "sandwiched"), "sandwiched fragments", "", -1, "pattern", agg="sum",
       headline=True, section="fragmentation", chart="sandwiched"),
    _m(("seek", "median_bytes"), "median seek", "B", -1, "pattern", section="seek",
       chart="seek"),
    _m(("sizes", "count"), "requests", "", 0, "pattern", agg="sum", section="fragmentation",
       chart="sizes"),
    _m(("sizes", "percentiles_bytes", "p50"), "p50 request", "B", +1, "pattern",
       section="fragmentation", chart="sizes"),
    _m(("ordering", "backward_distance_mean_bytes"), "mean backward distance", "B", -1,
       "pattern", section="ordering", chart="backward"),
    _m(("throughput", "iostat", "%rrqm"), "%rrqm", "%", 0, "pattern", section="throughput"),
    _m(("throughput", "iostat", "rareq-sz"), "rareq-sz", "KB", +1, "pattern",
       section="throughput"),
    _m(("throughput", "iostat", "wareq-sz"), "wareq-sz", "KB", +1, "pattern",
       section="throughput"),
    _m(("throughput", "mb_per_s"), "MB/s", "MB/s", +1, "throughput", agg="sum",
       section="throughput", chart="mbps"),
    _m(("throughput", "iops"), "IOPS", "1/s", +1, "throughput", agg="sum",
       section="throughput", chart="iops"),
    _m(("throughput", "iostat", "r/s"), "r/s", "1/s", 0, "count", agg="sum",
       section="throughput"),
    _m(("throughput", "iostat", "rMB/s"), "rMB/s", "MB/s", +1, "throughput", agg="sum",
       section="throughput"),
    _m(("throughput", "iostat", "rrqm/s"), "rrqm/s", "1/s", 0, "count", agg="sum",
       section="throughput"),
    _m(("throughput", "iostat", "r_await"), "r_await", "ms", -1, "latency",
       section="throughput"),
    _m(("throughput", "iostat", "w/s"), "w/s", "1/s", 0, "count", agg="sum",
       section="throughput"),
    _m(("throughput", "iostat", "wMB/s"), "wMB/s", "MB/s", +1, "throughput", agg="sum",
       section="throughput"),
    _m(("throughput", "iostat", "w_await"), "w_await", "ms", -1, "latency",
       section="throughput"),
    _m(("throughput", "iostat", "aqu-sz"), "aqu-sz", "", 0, "count", agg="sum",
       section="throughput"),
    _m(("throughput", "iostat", "%util"), "%util", "%", 0, "count", section="throughput"),
    _m(("latency", "Q2C", "percentiles_ns", "p50"), "Q2C p50", "ns", -1, "latency",
       section="latency", chart="q2c"),
    _m(("latency", "Q2C", "percentiles_ns", "p99"), "Q2C p99", "ns", -1, "latency",
       section="latency", chart="q2c"),
    _m(("latency", "D2C", "percentiles_ns", "p50"), "D2C p50", "ns", -1, "latency",
       section="latency", chart="d2c"),
    _m(("latency", "D2C", "percentiles_ns", "p99"), "D2C p99", "ns", -1, "latency",
       section="latency", chart="d2c"),
    # per-bio lineage of a stacked top device (workers.analyzers.lineage): pieces each of its
    # bios became on the members (mechanism) and the bio's Q to its last piece's C (timing)
    _m(("lineage", "pieces_per_bio"), "lineage pieces per bio", "", -1, "pattern",
       section="ordering"),
    _m(("lineage", "latency_ns", "percentiles_ns", "p50"), "per-bio latency p50", "ns", -1,
       "latency", section="ordering"),
    _m(("lineage", "latency_ns", "percentiles_ns", "p99"), "per-bio latency p99", "ns", -1,
       "latency", section="ordering"),
)

#: Metrics that may be null on one side for a reason (the row says it instead of a number).
NULL_TEXT: dict[tuple[str, ...], str] = {
    ("ordering", "backward_distance_mean_bytes"): "no backward dispatch",
}


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

#: Mechanism rules a user can mark unwanted: threshold name -> (metric path, direction that is
#: unwanted, the rule in words). Level 0 off, 1 warning, 2 fail.
MECHANISM_RULES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "rule_backward_rise": (("ordering", "backward_share"), "rise",
                           "backward dispatches must not rise"),
    "rule_below_max_rise": (("fragmentation", "below_max_share"), "rise",
                            "requests must not shrink below max_sectors"),
    "rule_pieces_per_bio_rise": (("fragmentation", "pieces_per_bio"), "rise",
                                 "pieces per bio must not rise"),
    "rule_sandwiched_rise": (("fragmentation", "sandwiched"), "rise",
                             "sandwiched fragments must not rise"),
    "rule_mean_request_drop": (("sizes", "mean_bytes"), "drop",
                               "mean request size must not drop"),
    "rule_zero_seek_drop": (("seek", "zero_share"), "drop", "zero-seek share must not drop"),
    "rule_mean_seek_rise": (("seek", "mean_bytes"), "rise",
                            "mean seek distance must not rise"),
}
#: Rules on sequences (not a scalar metric).
SEQUENCE_RULES: dict[str, str] = {
    "rule_member_order_change": "order across members must not change",
    "rule_environment": "the sides' environment must not differ beyond the patch",
}
RULE_OFF, RULE_WARNING, RULE_FAIL = 0, 1, 2


@dataclass(frozen=True)
class Thresholds:
    """Limits and rules of the CI check; override any field (``Thresholds().with_overrides``).

    Percentages are relative changes of the patched mean vs the baseline mean.

    Attributes:
        throughput_drop_warn_pct / throughput_drop_fail_pct: a significant drop of a
            throughput metric beyond this warns / fails.
        latency_rise_warn_pct / latency_rise_fail_pct: the same for a rise of a latency.
        pattern_worse_warn_pct: ignored since mechanism metrics are judged by rules (kept so
            stored overrides still load).
        warn_on_regression: a significant timing regression below the limits above warns.
        fidelity_l1_warn / fidelity_throughput_err_warn: model fidelity notes (never change
            the check state).
        min_value: ignore timing metrics whose two means are both below this (idle devices).
        min_runs: runs per side before timing is judged (lkp's rule: 3).
        min_requests / min_window_s: a device's timing is judged with at least this many
            requests at its stage *or* this long a trace.
        min_rate_window_s: a window shorter than this gives no rate.
        power: power of the runs-needed estimate.
        bootstrap: resamples of the bootstrap confidence interval of the % change.
        rule_*: mechanism rules (:data:`MECHANISM_RULES`, :data:`SEQUENCE_RULES`): 0 off,
            1 warning, 2 fail.
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
    min_runs: float = 3.0
    min_requests: float = 100.0
    min_window_s: float = 1.0
    min_rate_window_s: float = 0.01
    power: float = 0.8
    bootstrap: float = 2000.0
    rule_backward_rise: float = 2.0
    rule_below_max_rise: float = 2.0
    rule_pieces_per_bio_rise: float = 0.0
    rule_sandwiched_rise: float = 0.0
    rule_mean_request_drop: float = 0.0
    rule_zero_seek_drop: float = 0.0
    rule_mean_seek_rise: float = 0.0
    rule_member_order_change: float = 0.0
    rule_environment: float = 1.0

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
            if k.startswith("rule_") and vals[k] not in (0.0, 1.0, 2.0):
                raise ValueError(f"threshold {k}: {v!r} is not 0 (off), 1 (warning) or 2 (fail)")
        return replace(self, **vals)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def rules(self) -> list[dict[str, Any]]:
        """Every mechanism rule with its level, in words (for the page and the API)."""
        out = []
        for name, (_, _, text) in MECHANISM_RULES.items():
            out.append({"name": name, "rule": text, "level": int(getattr(self, name))})
        for name, text in SEQUENCE_RULES.items():
            out.append({"name": name, "rule": text, "level": int(getattr(self, name))})
        return out


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


def _has_null(d: Mapping[str, Any], path: Sequence[str]) -> bool:
    """True when the path exists and holds null (a metric with nothing to measure)."""
    cur: Any = d
    for p in path:
        if not isinstance(cur, Mapping) or p not in cur:
            return False
        cur = cur[p]
    return cur is None


def _with_derived(dev: Mapping[str, Any]) -> dict[str, Any]:
    """Device dict plus derived scalars (zero-seek share in %)."""
    out = dict(dev)
    seek = dict(dev.get("seek", {}))
    if seek.get("cnt"):
        seek["zero_share"] = 100.0 * seek.get("zero_cnt", 0) / seek["cnt"]
    out["seek"] = seek
    ordering = dev.get("ordering")
    if isinstance(ordering, Mapping) and not ordering.get("backward") \
            and ordering.get("backward_distance_mean_bytes") == 0:
        # results of version 1 said 0.0 for "no backward dispatch"
        out["ordering"] = {**ordering, "backward_distance_mean_bytes": None}
    return out


@dataclass(frozen=True)
class Observation:
    """One metric of one device (or member roll-up) in one run."""

    metric: Metric
    device: str
    value: float | None
    reason: str | None = None  # why a timing metric cannot be judged from this run
    member_of: str | None = None
    members: tuple[str, ...] = ()
    spread: tuple[float, float] | None = None


def stack_groups(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Member disks to roll up: ``[{"name": "members of md0", "top": "9,0", "members": [...]}]``.

    From the remaps of a stacked device (its A events name the members), else from the
    iostat groups of same-named disks (``sd*``).
    """
    devs = result.get("devices") or {}
    out: list[dict[str, Any]] = []
    covered: set[str] = set()
    for top, r in (result.get("remaps") or {}).items():
        members = sorted(m for m in (r.get("members") or {}) if m in devs)
        if members:
            name = str((devs.get(top) or {}).get("name") or top)
            out.append({"name": f"members of {name}", "top": top, "members": members})
            covered |= set(members)
    for g in (result.get("iostat") or {}).get("groups") or []:
        members = [m for m in g.get("members") or [] if m in devs and m not in covered]
        if len(members) >= 2:
            out.append({"name": f"members {g.get('name')}", "top": None, "members": members})
    return out


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def timing_reasons(result: Mapping[str, Any], devs: Sequence[Mapping[str, Any]],
                   th: Thresholds) -> tuple[str | None, str | None]:
    """Why rates / latencies of these devices (one device or a roll-up) cannot be judged.

    ``(rate reason, latency reason)``, None when they can. Results without the fields (old
    or hand-made) are judged.
    """
    stages = [d.get("stage") for d in devs if "stage" in d]
    if stages and all(s is None for s in stages):
        return "no events", "no events"
    early = sorted({str(s) for s in stages if s in ("Q", "G")})
    if early:
        why = f"{'/'.join(early)} stage only"
        return why, why
    if result.get("time_known") is False:
        return "no timestamps", "no timestamps"
    span = result.get("span_ns")
    window = float(span) / 1e9 if isinstance(span, (int, float)) else None
    rate: str | None = None
    if window is not None and window < th.min_rate_window_s:
        rate = f"trace window {_fmt_s(window)} too short for a rate"
    counts = [float(d["events"]) for d in devs if isinstance(d.get("events"), (int, float))]
    if counts and window is not None:
        n = int(sum(counts))
        if n < th.min_requests and window < th.min_window_s:
            few = (f"too few events: {n} requests in {_fmt_s(window)} (minimum "
                   f"{th.min_requests:g} requests or {th.min_window_s:g} s)")
            return rate or few, few
    return rate, None


def _reason_for(m: Metric, reasons: tuple[str | None, str | None]) -> str | None:
    if m.kind != TIMING:
        return None
    return reasons[1] if m.family == "latency" else reasons[0]


def _add_lineage(devices: dict[str, dict[str, Any]], result: Mapping[str, Any]) -> None:
    """A stacked top device's per-bio lineage (pieces per bio, per-bio latency) under its
    ``"lineage"`` key, where the metrics read it (the analyzer keeps it per run)."""
    for dev, bios in ((result.get("lineage") or {}).get("bios") or {}).items():
        if dev in devices and isinstance(bios, Mapping) and bios.get("bios"):
            devices[dev]["lineage"] = {"pieces_per_bio": bios.get("pieces_per_bio"),
                                       "latency_ns": bios.get("latency_ns") or {}}


def observations(result: Mapping[str, Any], th: Thresholds | None = None
                 ) -> dict[str, Observation]:
    """``{"8,0 MB/s": Observation, "members of md0 MB/s": ..., ...}`` for one analyze() result."""
    th = th or Thresholds()
    out: dict[str, Observation] = {}
    devices = {dev: _with_derived(data) for dev, data in (result.get("devices") or {}).items()}
    _add_lineage(devices, result)
    groups = stack_groups(result)
    member_of = {m: g["name"] for g in groups for m in g["members"]}
    members_of_top = {g["top"]: [devices[x] for x in g["members"] if x in devices]
                      for g in groups if g.get("top")}
    for dev, d in devices.items():
        reasons = timing_reasons(result, [d], th)
        # a bio's latency runs from the top device's Q to its last piece's C on the members:
        # judged on the members' stages (the top device of a stack only shows Q)
        lin_reasons = (timing_reasons(result, members_of_top[dev], th)
                       if members_of_top.get(dev) else reasons)
        for m in METRICS:
            v = _get(d, m.path)
            if v is None and not (m.path in NULL_TEXT and _has_null(d, m.path)):
                continue
            why = _reason_for(m, lin_reasons if m.path[0] == "lineage" else reasons)
            out[f"{dev} {m.label}"] = Observation(m, dev, v, why, member_of.get(dev))
    for g in groups:
        mdevs = [devices[x] for x in g["members"]]
        reasons = timing_reasons(result, mdevs, th)
        for m in METRICS:
            vals = [_get(d, m.path) for d in mdevs]
            known = [v for v in vals if v is not None]
            if not known:
                if m.path in NULL_TEXT and any(_has_null(d, m.path) for d in mdevs):
                    out[f"{g['name']} {m.label}"] = Observation(
                        m, g["name"], None, None, None, tuple(g["members"]))
                continue
            v = float(sum(known)) if m.agg == "sum" else float(sum(known) / len(known))
            out[f"{g['name']} {m.label}"] = Observation(
                m, g["name"], v, _reason_for(m, reasons), None, tuple(g["members"]),
                (min(known), max(known)))
    summaries = result.get("summaries") or {}
    for job in summaries.get("fio") or []:
        if not isinstance(job, Mapping):
            continue
        name = f"fio {job.get('jobname', '?')}"
        for m in FIO_METRICS:
            v = _get(job, m.path)
            if v is not None and (v != 0 or m.family != "latency"):
                out[f"{name} {m.label}"] = Observation(m, name, v)
    last: dict[str, Mapping[str, Any]] = {}
    for row in summaries.get("iostat") or []:
        if isinstance(row, Mapping) and row.get("device"):
            last[str(row["device"])] = row  # later samples win
    for devname, row in last.items():
        name = f"iostat {devname}"
        for m in IOSTAT_SUMMARY_METRICS:
            v = _get(row, m.path)
            if v is not None:
                out[f"{name} {m.label}"] = Observation(m, name, v)
    return out


def scalar_metrics(result: Mapping[str, Any]) -> dict[str, tuple[Metric, str, float]]:
    """``{"8,0 rMB/s": (metric, device, value), ...}`` for one analyze() result."""
    return {k: (o.metric, o.device, o.value) for k, o in observations(result).items()
            if o.value is not None}


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


def format_value(value: float | None, unit: str) -> str:
    """``12.5 KB`` style text of a metric value ("–" for none)."""
    if value is None:
        return "–"
    v, u = scaled(value, unit)
    return f"{num(v)} {u}".rstrip() if u not in ("", "1/s") else num(v)


def change_text(b: float | None, p: float | None, unit: str, *, digits: int = 3,
                null: str = "none") -> str:
    """``50% -> 0%``, ``181 -> 64 KB``: a change as the summary and the check say it."""
    def one(v: float | None) -> tuple[str, str]:
        if v is None:
            return null, ""
        x, u = scaled(v, unit)
        return num(x, digits), u

    (bt, u1), (pt, u2) = one(b), one(p)
    u = u1 or u2
    if u == "%":
        return f"{bt}{'%' if b is not None else ''} -> {pt}{'%' if p is not None else ''}"
    if u in ("", "1/s"):
        return f"{bt} -> {pt}"
    return f"{bt} -> {pt} {u}" if p is not None else f"{bt} {u} -> {pt}"


# --- statistics --------------------------------------------------------------------------------
def _side(values: Sequence[float]) -> dict[str, Any]:
    if not len(values):
        return {"values": [], "n": 0, "mean": None, "stddev": None, "min": None, "max": None}
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


def bootstrap_pct_ci(base: Sequence[float], patched: Sequence[float], *, resamples: int = 2000,
                     level: float = 0.95, seed: int = 0) -> list[float] | None:
    """Percentile bootstrap interval of the % change of the means (each side resampled).

    Deterministic (seeded); None with fewer than 2 runs on a side or a zero baseline mean.
    """
    a = np.asarray(base, dtype=np.float64)
    b = np.asarray(patched, dtype=np.float64)
    if len(a) < 2 or len(b) < 2 or resamples < 1:
        return None
    rng = np.random.default_rng(seed)
    mb = a[rng.integers(0, len(a), size=(resamples, len(a)))].mean(axis=1)
    mp = b[rng.integers(0, len(b), size=(resamples, len(b)))].mean(axis=1)
    ok = mb != 0
    if not ok.any():
        return None
    pct = 100.0 * (mp[ok] - mb[ok]) / np.abs(mb[ok])
    tail = 100.0 * (1 - level) / 2
    lo, hi = np.percentile(pct, [tail, 100.0 - tail])
    return [float(lo), float(hi)]


def effect_pct(metric: Metric, th: Thresholds) -> float:
    """The change the runs-needed estimate should detect: the family's fail threshold."""
    return th.latency_rise_fail_pct if metric.family == "latency" else th.throughput_drop_fail_pct


def runs_needed(metric: Metric, base: Sequence[float], patched: Sequence[float],
                th: Thresholds, alpha: float = ALPHA) -> dict[str, Any]:
    """How many runs per side: lkp's rule (``min_runs``) and a power estimate.

    The power estimate is the two-sample normal approximation
    ``n = 2 (z_{1-alpha/2} + z_power)^2 s^2 / delta^2`` with ``s`` the pooled standard
    deviation of the runs seen and ``delta`` the family's fail threshold of the baseline mean;
    it needs 2 runs on a side to see a variance.
    """
    from statistics import NormalDist

    lkp_n = int(th.min_runs)
    eff = effect_pct(metric, th)
    sds = [float(np.std(v, ddof=1)) for v in (base, patched) if len(v) >= 2]
    mean_b = float(np.mean(base)) if len(base) else 0.0
    power_n: int | None = None
    if sds and mean_b:
        sd = math.sqrt(sum(x * x for x in sds) / len(sds))
        delta = abs(mean_b) * eff / 100.0
        z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(th.power)
        power_n = max(2, math.ceil(2 * (z * sd / delta) ** 2)) if sd > 0 else 2
    need = max(lkp_n, power_n or 0)
    if power_n is None:
        basis = (f"lkp's rule needs {lkp_n} runs per side; the variance (and a power estimate) "
                 "needs 2 runs on a side")
    else:
        basis = (f"lkp's rule needs {lkp_n} per side; {power_n} per side give "
                 f"{100 * th.power:.0f}% power to detect a {eff:g}% change with the variance seen")
    return {"per_side": need, "more_baseline": max(0, need - len(base)),
            "more_patched": max(0, need - len(patched)), "lkp_rule": lkp_n,
            "power_estimate": power_n, "effect_pct": eff, "power": th.power, "basis": basis}


def _direction(metric: Metric, delta: float) -> str:
    if metric.better == 0:
        return VERDICT_CHANGED
    return VERDICT_IMPROVED if delta * metric.better > 0 else VERDICT_REGRESSED


def mechanism_row(metric: Metric, base: Sequence[float | None], patched: Sequence[float | None]
                  ) -> dict[str, Any]:
    """Exact comparison of a mechanism metric: improved / regressed / changed / unchanged."""
    bv = [float(v) for v in base if v is not None]
    pv = [float(v) for v in patched if v is not None]
    sb, sp = _side(bv), _side(pv)
    null = NULL_TEXT.get(metric.path, "none")
    for s, vals, side in ((sb, bv, base), (sp, pv, patched)):
        s["n"] = len(side)
        if not vals:
            s["null"] = null
    b, p = sb["mean"], sp["mean"]
    varies = [name for name, s in (("baseline", sb), ("patched", sp))
              if s["values"] and s["max"] - s["min"] > 1e-9 * max(1.0, abs(s["mean"]))]
    if b is None and p is None:
        verdict, delta, pct = VERDICT_UNCHANGED, None, None
    elif b is None or p is None:
        verdict, delta, pct = VERDICT_CHANGED, None, None
    else:
        delta = p - b
        pct = 100.0 * delta / abs(b) if b else None
        verdict = (VERDICT_UNCHANGED if math.isclose(b, p, rel_tol=1e-9, abs_tol=1e-12)
                   else _direction(metric, delta))
    return {"baseline": sb, "patched": sp, "delta": delta, "pct": pct, "verdict": verdict,
            "change": change_text(b, p, metric.unit, null=null), "varies": varies,
            "p_value": None, "ci_pct": None, "lkp": lkp_changed(bv, pv),
            "needs_more_runs": False, "needs": None, "reason": None}


def timing_row(metric: Metric, base: Sequence[float], patched: Sequence[float],
               reason: str | None, th: Thresholds, *, alpha: float = ALPHA) -> dict[str, Any]:
    """A timing metric: not judged (reason) / needs more runs (how many) / Welch + lkp + CI."""
    sb, sp = _side(base), _side(patched)
    b, p = sb["mean"], sp["mean"]
    delta = p - b
    pct = 100.0 * delta / abs(b) if b else None
    row: dict[str, Any] = {
        "baseline": sb, "patched": sp, "delta": delta, "pct": pct,
        "change": change_text(b, p, metric.unit), "varies": [], "p_value": None,
        "ci_pct": None, "lkp": lkp_changed(base, patched), "reason": reason, "needs": None,
        "needs_more_runs": min(sb["n"], sp["n"]) < th.min_runs,
    }
    if reason is None and max(abs(b), abs(p)) < th.min_value:
        reason = "idle (both means below min_value)"
        row["reason"] = reason
    if reason is not None:
        row["verdict"] = VERDICT_NOT_JUDGED
        return row
    if row["needs_more_runs"]:
        row["verdict"] = VERDICT_NEEDS_RUNS
        row["needs"] = runs_needed(metric, base, patched, th, alpha)
        return row
    pv = welch(base, patched)
    ci = bootstrap_pct_ci(base, patched, resamples=int(th.bootstrap))
    row["p_value"], row["ci_pct"] = pv, ci
    significant = (pv is not None and pv < alpha and delta != 0
                   and (ci is None or ci[0] > 0 or ci[1] < 0))
    row["verdict"] = _direction(metric, delta) if significant else VERDICT_NO_CHANGE
    return row


def compare_metric(metric: Metric, base: Sequence[float], patched: Sequence[float],
                   *, alpha: float = ALPHA, reason: str | None = None,
                   thresholds: Thresholds | None = None) -> dict[str, Any]:
    """The row of one metric: exact for mechanism metrics, statistics for timing ones."""
    if metric.kind == MECHANISM:
        return mechanism_row(metric, base, patched)
    return timing_row(metric, base, patched, reason, thresholds or Thresholds(), alpha=alpha)


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


# --- sequences and histograms (mechanism facts) ------------------------------------------------
FIRST_PARENTS = 8  # parent bios shown in the cross-device order view


def member_order(result: Mapping[str, Any], top: str, *, first: int = FIRST_PARENTS
                 ) -> dict[str, Any] | None:
    """Order in which the top device's bios reach its members, for the first parent bios.

    The parents are the top device's first issue-order lines (its Q stage for md); each remap
    (A event) of the top device is put under the parent whose range holds its original sector.
    ``{"parents": [{"sector", "nr_sectors", "pieces": [{"member", "dev", "offset_kb",
    "nr_kb"}], "ascending"}], "out_of_order_share", "sequence": [[orig - first orig, member]]}``.
    """
    r = (result.get("remaps") or {}).get(top)
    if not isinstance(r, Mapping):
        return None
    devs = result.get("devices") or {}
    names = {k: str(v.get("name") or k) for k, v in devs.items()}
    lines = ((devs.get(top) or {}).get("ordering") or {}).get("first") or []
    parents: list[dict[str, Any]] = [
        {"sector": int(x["sector"]), "nr_sectors": int(x["nr_sectors"]), "pieces": []}
        for x in lines if x.get("nr_sectors")]
    pieces = list(r.get("first") or [])
    for pc in pieces:
        orig = int(pc["orig_sector"])
        for par in parents:
            if par["sector"] <= orig < par["sector"] + par["nr_sectors"]:
                par["pieces"].append({"member": names.get(pc["member"], pc["member"]),
                                      "dev": pc["member"],
                                      "offset_kb": (orig - par["sector"]) // 2,
                                      "nr_kb": int(pc["nr_sectors"]) // 2})
                break
    shown = [par for par in parents if par["pieces"]][:first]
    for par in shown:
        offs = [x["offset_kb"] for x in par["pieces"]]
        par["ascending"] = all(x < y for x, y in zip(offs, offs[1:]))
    base = int(pieces[0]["orig_sector"]) if pieces else 0
    return {"top": top, "name": names.get(top, top), "parents": shown,
            "out_of_order_share": float(r.get("out_of_order_share") or 0.0),
            "remaps": int(r.get("remaps") or 0),
            "sequence": [[int(pc["orig_sector"]) - base, names.get(pc["member"], pc["member"])]
                         for pc in pieces]}


def _offsets_text(view: Mapping[str, Any] | None) -> str:
    if not view or not view.get("parents"):
        return "–"
    return ", ".join(str(x["offset_kb"]) for x in view["parents"][0]["pieces"]) + " KB"


def member_order_fact(top: str, b: Mapping[str, Any] | None, p: Mapping[str, Any] | None
                      ) -> dict[str, Any] | None:
    """"order across members changed" as a mechanism fact of one stacked device."""
    if not b or not p:
        return None
    n = min(len(b["sequence"]), len(p["sequence"]))
    same_seq = b["sequence"][:n] == p["sequence"][:n]
    ob, op = b["out_of_order_share"], p["out_of_order_share"]
    changed = not same_seq or not math.isclose(ob, op, abs_tol=1e-12)
    shares = change_text(ob, op, "share")
    first = f"first bio's chunks at {_offsets_text(b)} -> {_offsets_text(p)}"
    if not changed:
        text = f"chunk order across members of {b['name']} unchanged (out of order {shares})"
    elif ob > 0 and op == 0:
        text = (f"chunk order across members of {b['name']} now ascending "
                f"(out-of-order pieces {shares}; {first})")
    elif ob == 0 and op > 0:
        text = (f"chunk order across members of {b['name']} no longer ascending "
                f"(out-of-order pieces {shares}; {first})")
    else:
        text = (f"chunk order across members of {b['name']} changed "
                f"(out-of-order pieces {shares}; {first})")
    return {"key": f"{top} order across members", "device": top, "label": "order across members",
            "kind": MECHANISM, "verdict": VERDICT_CHANGED if changed else VERDICT_UNCHANGED,
            "text": text, "baseline": {"out_of_order_share": ob}, "patched":
            {"out_of_order_share": op}, "section": "ordering", "chart": "member-order",
            "rule": "rule_member_order_change"}


def _hist(dev: Mapping[str, Any], key: str) -> list[float]:
    return [float(x) for x in ((dev.get(key) or {}).get("counts") or [])]


def histogram_facts(baseline: Mapping[str, Any], patched: Mapping[str, Any]
                    ) -> list[dict[str, Any]]:
    """Seek and size histograms compared exactly per device (first run of each side)."""
    out = []
    bd, pd = baseline.get("devices") or {}, patched.get("devices") or {}
    for dev in bd:
        if dev not in pd:
            continue
        for key, label, chart, section in (("seek", "seek histogram", "seek", "seek"),
                                           ("sizes", "size histogram", "sizes",
                                            "fragmentation")):
            hb, hp = _hist(bd[dev], key), _hist(pd[dev], key)
            if not sum(hb) and not sum(hp):
                continue
            n = max(len(hb), len(hp))
            same = (hb + [0.0] * (n - len(hb))) == (hp + [0.0] * (n - len(hp)))
            l1 = l1_normalized(hb, hp)
            out.append({"key": f"{dev} {label}", "device": dev, "label": label,
                        "kind": MECHANISM, "verdict": VERDICT_UNCHANGED if same
                        else VERDICT_CHANGED, "l1": l1,
                        "text": f"{label} {'unchanged' if same else 'changed'}"
                        + ("" if same or l1 is None else f" (L1 {l1:.2f} of 2)"),
                        "section": section, "chart": chart})
        fb = [(int(x["sector"]), int(x["nr_sectors"]))
              for x in ((bd[dev].get("ordering") or {}).get("first") or [])]
        fp = [(int(x["sector"]), int(x["nr_sectors"]))
              for x in ((pd[dev].get("ordering") or {}).get("first") or [])]
        if fb and fp and bd[dev].get("stage") == "D" and pd[dev].get("stage") == "D":
            rel_b = [(s - fb[0][0], n) for s, n in fb]
            rel_p = [(s - fp[0][0], n) for s, n in fp]
            k = min(len(rel_b), len(rel_p))
            same = rel_b[:k] == rel_p[:k]
            out.append({"key": f"{dev} issue order", "device": dev, "label": "issue order",
                        "kind": MECHANISM,
                        "verdict": VERDICT_UNCHANGED if same else VERDICT_CHANGED,
                        "text": f"issue order of the first {k} requests "
                        f"{'unchanged' if same else 'changed'} (relative sectors and sizes)",
                        "section": "ordering", "chart": "lba"})
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
            alpha: float = ALPHA,
            environment: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compare runs of the baseline kernel with runs of the patched one.

    The summary in words is added by :func:`workers.summary.with_summary` (``words`` and the
    check's ``summary`` / ``timing``), which the CLI, the worker and the report call.

    Args:
        baseline, patched: analyze() results, one per run (at least one each).
        thresholds: a :class:`Thresholds` or a mapping of overrides of the defaults.
        fidelity_result: output of :func:`fidelity` to include (as notes of the check).
        alpha: significance level of Welch's test.
        environment: :func:`workers.analyzers.environment.consistency` of the two sides
            (kept in the result; its unexpected differences are a rule of the check).

    Raises:
        ValueError: when a side has no runs.
    """
    if not baseline or not patched:
        raise ValueError("compare needs at least one baseline and one patched result")
    th = thresholds if isinstance(thresholds, Thresholds) else Thresholds().with_overrides(
        thresholds)
    obs_b = [observations(r, th) for r in baseline]
    obs_p = [observations(r, th) for r in patched]
    keys: list[str] = []
    seen: set[str] = set()
    for d in obs_b:
        for k in d:
            if k not in seen and any(k in x for x in obs_p):
                keys.append(k)
                seen.add(k)
    metrics = []
    for k in keys:
        ob = [d[k] for d in obs_b if k in d]
        op = [d[k] for d in obs_p if k in d]
        first = ob[0]
        m = first.metric
        row: dict[str, Any] = {
            "key": k, "device": first.device, "label": m.label, "unit": m.unit,
            "kind": m.kind, "family": m.family,
            "better": {1: "higher", -1: "lower", 0: None}[m.better], "path": list(m.path),
            "member_of": first.member_of, "members": list(first.members),
            "section": m.section, "chart": m.chart, "headline": m.headline}
        if first.members:
            row["spread"] = {"baseline": _spread(ob), "patched": _spread(op)}
        if m.kind == MECHANISM:
            row.update(mechanism_row(m, [o.value for o in ob], [o.value for o in op]))
        else:
            bv = [o.value for o in ob if o.value is not None]
            pv = [o.value for o in op if o.value is not None]
            if not bv or not pv:
                continue
            reason = next((o.reason for o in ob + op if o.reason), None)
            row.update(timing_row(m, bv, pv, reason, th, alpha=alpha))
        metrics.append(row)
    groups = stack_groups(baseline[0])
    orders: dict[str, Any] = {}
    facts: list[dict[str, Any]] = []
    for top in (baseline[0].get("remaps") or {}):
        vb, vp = member_order(baseline[0], top), member_order(patched[0], top)
        orders[top] = {"baseline": vb, "patched": vp}
        f = member_order_fact(top, vb, vp)
        if f:
            facts.append(f)
    facts += histogram_facts(baseline[0], patched[0])
    nb, npt_ = len(baseline), len(patched)
    runs_note = VERDICT_SINGLE_RUN if min(nb, npt_) < 2 else (
        NOTE_NEEDS_MORE_RUNS if min(nb, npt_) < th.min_runs else None)
    result: dict[str, Any] = {
        "version": COMPARISON_VERSION,
        "runs": {"baseline": nb, "patched": npt_},
        "runs_note": runs_note,
        "alpha": alpha,
        "metrics": metrics,
        "facts": facts,
        "groups": groups,
        "member_order": orders,
        "summary": {
            "improved": [r["key"] for r in metrics if r["verdict"] == VERDICT_IMPROVED],
            "regressed": [r["key"] for r in metrics if r["verdict"] == VERDICT_REGRESSED],
            "changed": [r["key"] for r in metrics if r["verdict"] == VERDICT_CHANGED],
            "no_change": sum(1 for r in metrics
                             if r["verdict"] in (VERDICT_NO_CHANGE, VERDICT_UNCHANGED)),
        },
        "sides": {"baseline": _side_summary(baseline[0]), "patched": _side_summary(patched[0])},
        "fidelity": dict(fidelity_result) if fidelity_result else None,
        "environment": dict(environment) if environment else None,
    }
    result["check"] = check_verdict(result, th)
    return result


def _spread(obs: Sequence[Observation]) -> list[float] | None:
    """Range of the member values, over the runs of a side."""
    sp = [o.spread for o in obs if o.spread is not None]
    if not sp:
        return None
    return [min(x[0] for x in sp), max(x[1] for x in sp)]


def _level(value: float) -> str | None:
    return {RULE_WARNING: CHECK_WARNING, RULE_FAIL: CHECK_FAIL}.get(int(value))


def timing_statistics(r: Mapping[str, Any]) -> str:
    """``Welch p=0.001, 95% CI -17.1..-12.9%, lkp: ranges separated`` of a judged row."""
    parts = []
    if r.get("p_value") is not None:
        parts.append(f"Welch p={r['p_value']:.3g}")
    ci = r.get("ci_pct")
    if ci:
        parts.append(f"95% CI {ci[0]:+.1f}%..{ci[1]:+.1f}%")
    lkp = r.get("lkp") or {}
    if lkp.get("applicable"):
        parts.append("lkp: ranges separated" if lkp.get("changed") else "lkp: ranges overlap")
    n = (r.get("baseline") or {}).get("n"), (r.get("patched") or {}).get("n")
    parts.append(f"{n[0]} vs {n[1]} runs")
    return ", ".join(parts)


def check_verdict(comparison: Mapping[str, Any], thresholds: Thresholds | None = None
                  ) -> dict[str, Any]:
    """success / warning / fail with the reasons, from a comparison and its rules.

    Mechanism regressions count when a rule marks them unwanted; timing regressions when they
    are significant (Welch + bootstrap interval). Per-member rows (their roll-up counts),
    timing rows that are not judged or need more runs, and model fidelity (notes) never
    change the state.
    """
    th = thresholds or Thresholds()
    fails: list[str] = []
    warns: list[str] = []
    notes: list[str] = []
    by_path = {tuple(path): name for name, (path, _, _) in MECHANISM_RULES.items()}
    for r in comparison.get("metrics", []):
        if r.get("member_of"):
            continue
        if r["kind"] == MECHANISM:
            name = by_path.get(tuple(r.get("path") or ()))
            if not name or r["verdict"] != VERDICT_REGRESSED:
                continue
            level = _level(getattr(th, name))
            if level:
                text = MECHANISM_RULES[name][2]
                msg = f"{r['key']}: {r['change']} ({text}; mechanism, {name})"
                (fails if level == CHECK_FAIL else warns).append(msg)
            continue
        if r["verdict"] != VERDICT_REGRESSED:
            continue
        pct = r.get("pct")
        what = f"{r['key']}: {r['change']} ({'n/a' if pct is None else f'{pct:+.1f}%'}; " \
               f"{timing_statistics(r)})"
        if r["family"] == "throughput" and pct is not None and pct < 0:
            if -pct > th.throughput_drop_fail_pct:
                fails.append(f"{what} drops more than {th.throughput_drop_fail_pct:g}%")
                continue
            if -pct > th.throughput_drop_warn_pct:
                warns.append(f"{what} drops more than {th.throughput_drop_warn_pct:g}%")
                continue
        elif r["family"] == "latency" and pct is not None and pct > 0:
            if pct > th.latency_rise_fail_pct:
                fails.append(f"{what} rises more than {th.latency_rise_fail_pct:g}%")
                continue
            if pct > th.latency_rise_warn_pct:
                warns.append(f"{what} rises more than {th.latency_rise_warn_pct:g}%")
                continue
        if th.warn_on_regression:
            warns.append(f"{what} significant timing regression")
    for f in comparison.get("facts") or []:
        rule = f.get("rule")
        if rule and f.get("verdict") == VERDICT_CHANGED:
            level = _level(getattr(th, rule))
            if level:
                msg = f"{f['text']} ({SEQUENCE_RULES[rule]}; mechanism, {rule})"
                (fails if level == CHECK_FAIL else warns).append(msg)
    env = comparison.get("environment") or {}
    level = _level(th.rule_environment)
    if env.get("warn") and level:
        msg = ("environment differs beyond the patch: " + "; ".join(env.get("unexpected") or [])
               + f" ({SEQUENCE_RULES['rule_environment']}; rule_environment)")
        (fails if level == CHECK_FAIL else warns).append(msg)
    for dev, f in (comparison.get("fidelity") or {}).items():
        if not isinstance(f, Mapping):
            continue
        for k in ("seek_l1", "size_l1"):
            v = f.get(k)
            if v is not None and v > th.fidelity_l1_warn:
                notes.append(f"model fidelity {dev} {k} {v:.2f} above {th.fidelity_l1_warn:g}")
        e = f.get("throughput_rel_err")
        if e is not None and e > th.fidelity_throughput_err_warn:
            notes.append(f"model fidelity {dev} throughput error {100 * e:.0f}% above "
                         f"{100 * th.fidelity_throughput_err_warn:.0f}%")
    state = CHECK_FAIL if fails else CHECK_WARNING if warns else CHECK_SUCCESS
    return {"state": state, "verdict": state, "reasons": fails + warns, "notes": notes,
            "runs_note": comparison.get("runs_note"), "rules": th.rules(),
            "thresholds": th.to_json()}
