"""Chart data of the comparison page's lazy sections, computed once by the worker.

Pure functions (no ORM, no request), like :mod:`reviewapp.charts`: the comparison step
(``reviewapp.tasks.run_compare``) calls :func:`build_payloads` with the stored results of every
bundle, the seek histograms of every stage and the model panel, and stores one JSON text per
(section, device, stage) in ``ComparisonChart``. The page fetches a section's JSON when it
scrolls into view; the server only streams the stored text.

Payload layout (one section of one device)::

    {"section": "seek", "dev": "8,0", "stage": "D", "stages": ["Q", "D"],
     "charts": [{"id": "seek", "title": "...",
                 "panels": [{"side": "baseline", "label": "Baseline", "figure": {plotly}}, ...]}],
     "tables": [{"id": "...", "title": "...", "columns": [...], "rows": [[...], ...]}],
     "notes": ["..."], "text": {"baseline": "...", "patched": "..."}}

Every chart of a section shares its axes across panels (same categories, same y range, same
time range) and every side keeps one colour on every chart of the page (:data:`COLORS`).
Chart data is what the analyzers already decimated (LBA scatter points, time bins); nothing
is expanded here. With several runs on a side, histograms are summed, scalar numbers are the
mean per run, and series (time, LBA scatter) are given for every run (``"run"`` on the chart,
switched by the page's run selector).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reviewapp.charts import bucket_labels, devices_of, sum_histograms

#: Sides of a chart; the model panel adds the two predictions.
SIDES = ("baseline", "patched")
MODEL_SIDES = ("baseline", "patched", "predicted_old", "predicted_new")
COLORS = {"baseline": "#1f77b4", "patched": "#ff7f0e",
          "predicted_old": "#6baed6", "predicted_new": "#fdae6b"}
LABELS = {"baseline": "Baseline", "patched": "Patched",
          "predicted_old": "Predicted old policy", "predicted_new": "Predicted new policy"}
#: Sections in page order: (id, title).
SECTIONS: tuple[tuple[str, str], ...] = (
    ("verdicts", "Verdicts: mechanism and timing"),
    ("fragmentation", "Fragmentation"),
    ("seek", "Seek"),
    ("throughput", "Throughput"),
    ("latency", "Latency"),
    ("ordering", "Ordering"),
    ("model", "Model"),
)
SECTION_IDS = tuple(s for s, _ in SECTIONS)
STAGES = ("Q", "G", "I", "D", "C")
LATENCY_KINDS = ("Q2G", "G2I", "I2D", "D2C", "Q2C")


# --- small helpers -------------------------------------------------------------------------

def _get(d: Any, path: str) -> Any:
    """``_get(dev, "seek.cnt")``: nested lookup, None when any step is missing."""
    cur = d
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None  # NaN -> None


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def device_runs(runs: Sequence[Mapping[str, Any]], dev: str) -> list[dict[str, Any]]:
    """One device's results per run, plus the derived zero-seek share (as workers.compare)."""
    out = []
    for r in runs:
        d = (r.get("devices") or {}).get(dev)
        if d is None:
            continue
        seek = d.get("seek")
        if isinstance(seek, Mapping) and seek.get("cnt"):
            d = {**d, "seek": {**seek, "zero_share": 100.0 * seek.get("zero_cnt", 0) / seek["cnt"]}}
        out.append(d)
    return out


def _layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        # title on the left, legend (if any) on the right of the same line
        "title": {"text": title, "font": {"size": 13}, "x": 0, "xref": "paper",
                  "xanchor": "left"},
        # automargin: rotated bucket labels (1024..2048) push the axis title down instead of
        # running into it or off the panel
        "xaxis": {"title": {"text": x_title, "standoff": 6}, "automargin": True},
        "yaxis": {"title": {"text": y_title, "standoff": 6}, "automargin": True},
        "margin": {"l": 60, "r": 24, "t": 36, "b": 50},
        "height": 300,
        "showlegend": False,
    }
    for k, v in extra.items():
        if k in ("xaxis", "yaxis"):
            layout[k].update(v)
        else:
            layout[k] = v
    return layout


def histogram_chart(chart_id: str, title: str, x_title: str,
                    hists: Mapping[str, Mapping[str, Any]], *, unit: str = "KB",
                    sides: Sequence[str] = SIDES, empty_note: str = "") -> dict[str, Any] | None:
    """Side-by-side bar charts of power-of-two histograms with shared categories and y range.

    ``hists[side]`` is ``{"counts": [...]}`` (bucket 0 is ``0..1``, bucket k ``2**(k-1)..2**k``);
    a side without data is left out; a side whose counts are all zero gets a panel with
    ``figure`` None and ``empty`` (``empty_note``, e.g. "no backward dispatches") instead of
    empty axes; when every side is empty there is no chart.
    """
    present = [s for s in sides if s in hists]
    n = max((len(hists[s].get("counts") or []) for s in present), default=0)
    if n == 0 or not any(sum(hists[s].get("counts") or []) for s in present):
        return None
    labels = bucket_labels([0] + [1 << i for i in range(n)])
    y_max = max(max(list(hists[s].get("counts") or [0]) or [0]) for s in present)
    panels: list[dict[str, Any]] = []
    for s in present:
        counts = [int(c) for c in (hists[s].get("counts") or [])] + [0] * n
        counts = counts[:n]
        if not sum(counts):
            # no empty axes: say there is nothing to draw on this side
            panels.append({"side": s, "label": LABELS[s], "figure": None,
                           "title": f"{LABELS[s]}: {title}", "empty": empty_note or "no data"})
            continue
        total = sum(counts)
        fig = {
            "data": [{"type": "bar", "name": LABELS[s], "x": labels, "y": counts,
                      "marker": {"color": COLORS[s]},
                      "customdata": [round(100.0 * c / total, 1) for c in counts],
                      "hovertemplate": "%{x} " + unit + ": %{y} (%{customdata}%)<extra>"
                      + LABELS[s] + "</extra>"}],
            "layout": _layout(f"{LABELS[s]}: {title}", x_title, "count",
                              xaxis={"type": "category", "categoryorder": "array",
                                     "categoryarray": labels},
                              yaxis={"range": [0, max(1, y_max) * 1.08]}),
        }
        panels.append({"side": s, "label": LABELS[s], "figure": fig})
    return {"id": chart_id, "title": title, "panels": panels}


def _series_chart(chart_id: str, title: str, y_title: str,
                  series: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Line charts over time: ``series[side] = {"x": [...], "lines": {name: [...]}}``."""
    present = [s for s in SIDES if s in series and series[s].get("x")]
    if not present:
        return None
    x_max = max(max(series[s]["x"]) for s in present)
    y_max = max((max(v) if v else 0) for s in present for v in series[s]["lines"].values())
    panels = []
    for s in present:
        data = []
        for i, (name, ys) in enumerate(series[s]["lines"].items()):
            data.append({"type": "scatter", "mode": "lines", "name": name, "x": series[s]["x"],
                         "y": ys, "line": {"color": COLORS[s], "width": 1.5, "shape": "hv",
                                           "dash": "solid" if i == 0 else "dot"}})
        fig = {"data": data,
               "layout": _layout(f"{LABELS[s]}: {title}", "time (s)", y_title,
                                 xaxis={"range": [0, x_max or 1]},
                                 yaxis={"range": [0, max(y_max, 1e-9) * 1.08]},
                                 showlegend=True,
                                 legend={"orientation": "h", "x": 1, "xanchor": "right",
                                         "y": 1.0, "yanchor": "bottom"})}
        panels.append({"side": s, "label": LABELS[s], "figure": fig})
    return {"id": chart_id, "title": title, "panels": panels}


def _rows_table(table_id: str, title: str, rows: list[list[Any]]) -> dict[str, Any]:
    return {"id": table_id, "title": title,
            "columns": ["", "Baseline", "Patched", "Δ", "Δ %", "Verdict", "lkp range rule"],
            "rows": rows}


# --- the key-numbers rows with significance -------------------------------------------------

#: One metric of a section: (key in the device results, label, unit, scale, digits).
Metric = tuple[str, str, str, float, int]


def metric_row(metric: Metric, per_side: Mapping[str, Sequence[Mapping[str, Any]]],
               verdicts: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """``[label, baseline, patched, delta, pct, verdict, lkp]`` for one metric (mean per run).

    ``verdicts`` maps the metric key to what ``workers.compare`` said about it (verdict,
    lkp rule, run-count note); absent, the verdict cell says why.
    """
    key, label, unit, scale, digits = metric
    vals = {}
    for s in SIDES:
        raw = [_num(_get(d, key)) for d in per_side.get(s, [])]
        vals[s] = _mean([None if v is None else v * scale for v in raw])
    b, p = vals["baseline"], vals["patched"]
    delta = p - b if b is not None and p is not None else None
    pct = 100.0 * delta / abs(b) if delta is not None and b else None
    v = verdicts.get(key) or {}
    verdict = str(v.get("verdict") or "")
    note = str(v.get("note") or "")
    if note and note not in verdict:
        verdict = f"{verdict} ({note})" if verdict else note
    lkp = str(v.get("lkp") or "")

    def fmt(x: float | None, signed: bool = False) -> str | None:
        if x is None:
            return None
        return f"{x:+,.{digits}f}" if signed else f"{x:,.{digits}f}"

    return [f"{label} ({unit})" if unit else label, fmt(b), fmt(p), fmt(delta, True),
            None if pct is None else f"{pct:+.1f}%", verdict or None, lkp or None]


def _metric_rows(metrics: Sequence[Metric], per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                 verdicts: Mapping[str, Mapping[str, Any]]) -> list[list[Any]]:
    return [metric_row(m, per_side, verdicts) for m in metrics]


FRAG_METRICS: tuple[Metric, ...] = (
    ("sizes.count", "Requests", "", 1, 0),
    ("sizes.mean_bytes", "Mean request size", "KB", 1 / 1024, 1),
    ("sizes.percentiles_bytes.p50", "Median request size", "KB", 1 / 1024, 1),
    ("fragmentation.below_max_share", "Below max_sectors", "%", 100, 1),
    ("fragmentation.sandwiched", "Sandwiched fragments", "", 1, 0),
    ("fragmentation.sandwiched_share", "Sandwiched share", "%", 100, 2),
    ("fragmentation.align_max.start_share", "Starts aligned to max_sectors", "%", 100, 1),
    ("fragmentation.splits_per_bio", "Splits per bio", "", 1, 2),
    ("fragmentation.pieces_per_bio", "Pieces per bio", "", 1, 2),
    ("fragmentation.merged_share", "Merged share", "%", 100, 1),
)
SEEK_METRICS: tuple[Metric, ...] = (
    ("seek.cnt", "Seeks", "", 1, 0),
    ("seek.zero_cnt", "Zero seeks", "", 1, 0),
    ("seek.zero_share", "Zero-seek share", "%", 1, 1),
    ("seek.mean_bytes", "Mean seek distance", "KB", 1 / 1024, 1),
    ("seek.median_bytes", "Median seek distance", "KB", 1 / 1024, 1),
    ("seek.btt.median_sectors", "btt \"median\" (quirk)", "sectors", 1, 0),
    ("seek.backward", "Backward seeks", "", 1, 0),
)
THROUGHPUT_METRICS: tuple[Metric, ...] = (
    ("throughput.mb_per_s", "Throughput", "MB/s", 1, 2),
    ("throughput.iops", "IOPS", "", 1, 1),
    ("throughput.total_mb", "Data", "MB", 1, 2),
)
ORDERING_METRICS: tuple[Metric, ...] = (
    ("ordering.requests", "Requests", "", 1, 0),
    ("ordering.backward", "Backward dispatches", "", 1, 0),
    ("ordering.backward_share", "Backward share", "%", 100, 2),
    ("ordering.backward_distance_mean_bytes", "Mean backward distance", "KB", 1 / 1024, 1),
)


def verdict_index(compare: Mapping[str, Any] | None, dev: str) -> dict[str, dict[str, Any]]:
    """Per-metric verdicts of ``workers.compare.compare`` output for one device.

    Keyed by the metric's path in the device results joined with dots
    (``"throughput.mb_per_s"``): ``verdict`` (mechanism: improved / regressed / changed (no
    direction) / unchanged; timing: the same with Welch's p and the bootstrap interval, or
    "not judged" with the reason, or "needs more runs" with how many), ``lkp`` (lkp-tests'
    range rule: "changed", "unchanged" or "n/a (< 3 runs)"), ``note`` and ``kind``.
    """
    out: dict[str, dict[str, Any]] = {}
    if not compare:
        return out
    for m in compare.get("metrics") or []:
        if not isinstance(m, Mapping) or str(m.get("device")) != dev or not m.get("path"):
            continue
        lkp = m.get("lkp") or {}
        if m.get("kind") == "mechanism":
            lkp_text = "n/a (mechanism: exact)"
        elif isinstance(lkp, Mapping):
            lkp_text = (("changed" if lkp.get("changed") else "unchanged")
                        if lkp.get("applicable") else "n/a (< 3 runs)")
        else:
            lkp_text = str(lkp)
        verdict = str(m.get("verdict") or "")
        note = ""
        if m.get("reason"):
            note = str(m["reason"])
        if m.get("varies"):
            note = "varies between runs"
        needs = m.get("needs")
        if isinstance(needs, Mapping):
            note = (f"{max(needs.get('more_baseline', 0), needs.get('more_patched', 0))} more "
                    "per side")
        p = m.get("p_value")
        if p is not None:
            ci = m.get("ci_pct")
            verdict = f"{verdict} (p={float(p):.2g}" + (
                f", CI {ci[0]:+.1f}%..{ci[1]:+.1f}%)" if ci else ")")
        out[".".join(str(x) for x in m["path"])] = {"verdict": verdict, "lkp": lkp_text,
                                                    "note": note, "kind": m.get("kind")}
    return out


# --- sections ------------------------------------------------------------------------------

def _summed(devs: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any]:
    _, counts = sum_histograms([_get(d, key) or {} for d in devs])
    return {"counts": counts}


def fragmentation_section(per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                          verdicts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    charts = []
    hists = {s: _summed(per_side[s], "sizes") for s in SIDES if per_side.get(s)}
    c = histogram_chart("sizes", "request size", "request size (KB)", hists)
    if c:
        charts.append(c)
    sand: dict[str, dict[str, Any]] = {}
    for s in SIDES:
        for d in per_side.get(s, []):
            ss = _get(d, "fragmentation.sandwiched_sizes") or {}
            for sec, cnt in zip(ss.get("sectors") or [], ss.get("counts") or []):
                sand.setdefault(s, {}).setdefault(str(int(sec) // 2), 0)
                sand[s][str(int(sec) // 2)] += int(cnt)
    if any(sand.values()):
        cats = sorted({k for v in sand.values() for k in v}, key=int)
        y_max = max(max(v.values()) for v in sand.values() if v)
        panels = []
        for s in SIDES:
            if s not in sand and not per_side.get(s):
                continue
            ys = [sand.get(s, {}).get(k, 0) for k in cats]
            panels.append({"side": s, "label": LABELS[s], "figure": {
                "data": [{"type": "bar", "name": LABELS[s], "x": cats, "y": ys,
                          "marker": {"color": COLORS[s]}}],
                "layout": _layout(f"{LABELS[s]}: sandwiched fragment sizes", "size (KB)",
                                  "count", xaxis={"type": "category", "categoryorder": "array",
                                                  "categoryarray": cats},
                                  yaxis={"range": [0, y_max * 1.08]})}})
        charts.append({"id": "sandwiched", "title": "sandwiched fragments", "panels": panels})
    notes = _per_side_notes(
        {s: "no Q events (submitted bios) in the trace of this device" for s in SIDES
         if per_side.get(s) and all(_get(d, "fragmentation.pieces_per_bio") is None
                                    for d in per_side[s])},
        lambda who, why: f"– in splits per bio, pieces per bio and merged share, {who}: {why}.")
    return {"charts": charts, "notes": notes,
            "tables": [_rows_table("fragmentation", "Fragmentation",
                                   _metric_rows(FRAG_METRICS, per_side, verdicts))]}


def seek_section(per_side_stage: Mapping[str, Sequence[Mapping[str, Any]]],
                 verdicts: Mapping[str, Mapping[str, Any]], stage: str,
                 texts: Mapping[str, str]) -> dict[str, Any]:
    """Seek at one stage; ``per_side_stage[side]`` are ``{"seek": ...}`` dicts of that stage."""
    hists = {s: _summed(per_side_stage[s], "seek") for s in SIDES if per_side_stage.get(s)}
    charts = []
    c = histogram_chart("seek", f"seek distance ({stage} stage)", "seek distance (KB)", hists)
    if c:
        charts.append(c)
    return {"charts": charts,
            "tables": [_rows_table("seek", f"Seek ({stage} stage)",
                                   _metric_rows(SEEK_METRICS, per_side_stage, verdicts))],
            "text": dict(texts)}


def throughput_section(per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                       verdicts: Mapping[str, Mapping[str, Any]],
                       bin_s: Mapping[str, float]) -> dict[str, Any]:
    mbps: dict[str, dict[str, Any]] = {}
    iops: dict[str, dict[str, Any]] = {}
    series = {s: per_side[s][0].get("throughput") or {} for s in SIDES if per_side.get(s)}
    series = {s: tp for s, tp in series.items()
              if max(len(tp.get("read_mbps") or []), len(tp.get("write_mbps") or []))}
    # The analyzers' ~200 bins are sized to the span, not to the I/O rate: a sparse trace
    # (a few hundred I/Os) draws a comb of 0 / peak. Bins are merged until each holds
    # MIN_IOS_PER_BIN I/Os on average, the same width on both sides so they compare.
    width = 0.0
    for s, tp in series.items():
        n = max(len(tp.get("read_mbps") or []), len(tp.get("write_mbps") or []))
        ios = float(tp.get("total_ios") or 0)
        k = max(1, min(n, math.ceil(MIN_IOS_PER_BIN * n / ios))) if ios else 1
        width = max(width, k * (bin_s.get(s) or 1.0))
    for s, tp in series.items():
        step = bin_s.get(s) or 1.0
        k = max(1, round(width / step))
        r = rebin(tp.get("read_mbps") or [], k)
        w = rebin(tp.get("write_mbps") or [], k)
        # drawn as steps (one flat segment per bin): x is each bin's start plus the end of
        # the last bin, which repeats the last value
        nb = max(len(r), len(w))
        x = [round(i * k * step, 6) for i in range(nb + 1)]
        mbps[s] = {"x": x, "lines": {"read MB/s": _close(r), "write MB/s": _close(w)}}
        iops[s] = {"x": x, "lines": {
            "read IOPS": _close(rebin(tp.get("read_iops") or [], k)),
            "write IOPS": _close(rebin(tp.get("write_iops") or [], k))}}
    bins = f" ({duration_text(width)} bins)" if width else ""
    charts = [c for c in (_series_chart("mbps", f"MB/s over time{bins}", "MB/s", mbps),
                          _series_chart("iops", f"IOPS over time{bins}", "IOPS", iops)) if c]
    # the iostat -x-like table: one row per column, baseline vs patched
    cols = ("r/s", "rMB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz", "w/s", "wMB/s",
            "wrqm/s", "%wrqm", "w_await", "wareq-sz", "aqu-sz", "%util")
    units = {"r_await": "ms", "w_await": "ms", "rareq-sz": "KB", "wareq-sz": "KB",
             "aqu-sz": "requests"}
    iostat_metrics: list[Metric] = [(f"throughput.iostat.{k}", k, units.get(k, ""), 1, 2)
                                    for k in cols]
    tables = [_rows_table("throughput", "Throughput",
                          _metric_rows(THROUGHPUT_METRICS, per_side, verdicts))]
    # rows unknown on both sides add nothing (the note below says why they are unknown)
    iostat_rows = [r for r in _iostat_rows(iostat_metrics, per_side, verdicts)
                   if r[1] is not None or r[2] is not None]
    if iostat_rows:
        tables.append(_rows_table("iostat", "iostat -x (from the trace)", iostat_rows))
    notes = unavailable_notes(per_side, "throughput.iostat.note", "iostat -x")
    if not iostat_rows:
        notes = [n.replace("– in iostat -x, ", "No iostat -x table, ", 1) for n in notes]
    notes += _per_side_notes(
        {s: str(_get(per_side[s][0], "stage") or "stage") for s in SIDES
         if per_side.get(s) and _get(per_side[s][0], "throughput.source") == "stage"},
        lambda who, st: f"MB/s and IOPS over time, {who}: counted from the {st} events "
                        f"(no C events).")
    if any(len(per_side.get(s, [])) > 1 for s in SIDES):
        notes.append("time series: one run at a time (pick one with Run); numbers are the "
                     "mean per run")
    return {"charts": charts, "tables": tables, "notes": notes}


#: Merge throughput bins until each holds this many I/Os on average (see throughput_section).
MIN_IOS_PER_BIN = 4


def rebin(values: Sequence[float], k: int) -> list[float]:
    """Rates per bin averaged over groups of ``k`` bins (the last group may be shorter)."""
    vals = [float(v) for v in values]
    if k <= 1:
        return vals
    return [round(sum(vals[i:i + k]) / len(vals[i:i + k]), 3) for i in range(0, len(vals), k)]


def _close(values: list[float]) -> list[float]:
    """A step series' values with the last one repeated at the end of the last bin."""
    return values + values[-1:]


def duration_text(seconds: float) -> str:
    """``0.005`` -> ``"5 ms"``, ``5e-05`` -> ``"50 µs"``, ``2.0`` -> ``"2 s"``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def unavailable_notes(per_side: Mapping[str, Sequence[Mapping[str, Any]]], key: str,
                      what: str) -> list[str]:
    """"– in <what> on <side>: <reason>" for every side whose results carry a reason at ``key``.

    The analyzers give None (shown as –) for a number they cannot compute and say why; the
    page repeats the why so a – never looks like a zero.
    """
    by_side = {s: "; ".join(dict.fromkeys(str(r) for d in per_side.get(s, [])
                                          if (r := _get(d, key)))) for s in SIDES}
    return _per_side_notes(by_side, lambda who, why: f"– in {what}, {who}: {why}.")


def _per_side_notes(by_side: Mapping[str, str], fmt: Callable[[str, str], str]) -> list[str]:
    """One note per distinct reason, naming the sides it applies to ("baseline and patched")."""
    sides_of: dict[str, list[str]] = {}
    for s in SIDES:
        if by_side.get(s):
            sides_of.setdefault(by_side[s], []).append(LABELS[s].lower())
    return [fmt(" and ".join(who), why) for why, who in sides_of.items()]


def _iostat_rows(metrics: Sequence[Metric], per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                 verdicts: Mapping[str, Mapping[str, Any]]) -> list[list[Any]]:
    # iostat keys contain "/" and "%" but never ".", so the dotted lookup still works
    return _metric_rows(metrics, per_side, verdicts)


def latency_section(per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                    verdicts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    charts = []
    for kind in ("Q2C", "D2C"):
        hists = {s: _summed(per_side[s], f"latency.{kind}") for s in SIDES if per_side.get(s)}
        c = histogram_chart(kind.lower(), f"{kind} latency", f"{kind} (us)", hists, unit="us")
        if c:
            charts.append(c)
    metrics: list[Metric] = []
    present = [k for k in LATENCY_KINDS
               if any(_num(_get(d, f"latency.{k}.count")) for s in SIDES for d in per_side.get(s, []))]
    if not present:
        return {"charts": charts, "tables": [], "notes": [
            "No latency pairs: btt-style latencies need matching Q/G/I/D/C events of one "
            "request on this device."]}
    for kind in present:
        for q in ("p50", "p90", "p99"):
            metrics.append((f"latency.{kind}.percentiles_ns.{q}", f"{kind} {q}", "us", 1e-3, 1))
        metrics.append((f"latency.{kind}.max_ns", f"{kind} max", "us", 1e-3, 1))
    rows = [r for r in _metric_rows(metrics, per_side, verdicts)
            if r[1] is not None or r[2] is not None]
    return {"charts": charts, "tables": [_rows_table("latency", "Latency (btt-style)", rows)]}


#: LBA series drawn per side: the first run's, or each member's in the all-members view.
LBA_SERIES = 16
BACKWARD_COLOR = "#d62728"


def backward_steps(sectors: Sequence[int]) -> list[int]:
    """Indices of points whose sector is below the previous point's (a backward dispatch)."""
    return [i for i in range(1, len(sectors)) if sectors[i] < sectors[i - 1]]


def lba_chart(series: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any] | None:
    """LBA over time per side, each side zoomed to its own sectors.

    ``series[side]`` is a list of the analyzers' ``lba`` dicts (issue order; one per run, or one
    per member disk in the all-members view). Each panel's y axis spans its own data (two sides
    on different regions of the disk would otherwise be two flat lines); the chart's
    ``shared_y`` is the range spanning both, which the page's "same LBA range on both sides"
    toggle applies. Backward steps (a point below the previous one of its series) are drawn as
    red triangles so seed 000's backward jumps are visible.
    """
    present = {s: v for s, v in series.items() if v}
    if not present:
        return None
    t_max = max(max(x["t_s"]) for v in present.values() for x in v) or 1

    def span(values: list[int]) -> list[float]:
        lo, hi = min(values), max(values)
        pad = max(8.0, (hi - lo) * 0.08)
        return [lo - pad, hi + pad]

    all_sectors = [sec for v in present.values() for x in v for sec in x["sector"]]
    shared = span(all_sectors)
    panels = []
    for s, runs in present.items():
        data: list[dict[str, Any]] = []
        bt: list[float] = []
        bs: list[int] = []
        notes = []
        for x in runs:
            w = x.get("write") or [0] * len(x["t_s"])
            for name, sym, keep in (("read", "circle", 0), ("write", "x", 1)):
                idx = [i for i, v in enumerate(w) if bool(v) == bool(keep)]
                if idx:
                    data.append({"type": "scattergl", "mode": "markers", "name": name,
                                 "x": [x["t_s"][i] for i in idx],
                                 "y": [x["sector"][i] for i in idx], "showlegend": False,
                                 "marker": {"color": COLORS[s], "size": 4, "symbol": sym}})
            back = backward_steps(x["sector"])
            bt += [x["t_s"][i] for i in back]
            bs += [x["sector"][i] for i in back]
            if x.get("decimated"):
                notes.append(f"{x.get('points')} of {x.get('total')} points")
        if bt:
            data.append({"type": "scattergl", "mode": "markers", "name": "backward step",
                         "x": bt, "y": bs, "marker": {"color": BACKWARD_COLOR, "size": 8,
                                                      "symbol": "triangle-down"}})
        title = f"{LABELS[s]}: LBA over time, {len(bt)} backward step{'s' * (len(bt) != 1)}"
        if notes:
            title += f" ({'; '.join(notes)})"
        own = span([sec for x in runs for sec in x["sector"]])
        panels.append({"side": s, "label": LABELS[s], "figure": {
            "data": data,
            "layout": _layout(title, "time (s)", "sector", xaxis={"range": [0, t_max * 1.03]},
                              yaxis={"range": own}, showlegend=bool(bt),
                              legend={"orientation": "h", "x": 1, "xanchor": "right",
                                      "y": 1.0, "yanchor": "bottom"})}})
    return {"id": "lba", "title": "LBA over time", "panels": panels, "shared_y": shared,
            "toggle": "same LBA range on both sides"}


def ordering_section(per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                     verdicts: Mapping[str, Mapping[str, Any]], *,
                     lba_series: int = 1) -> dict[str, Any]:
    """Ordering of one device: LBA over time (the first ``lba_series`` entries of each side:
    the first run, or every member in the all-members view), backward distances, tables."""
    charts = []
    lba = lba_chart({s: [d["lba"] for d in per_side.get(s, [])[:lba_series]
                         if _get(d, "lba.t_s")] for s in SIDES})
    if lba:
        charts.append(lba)
    hists = {s: _summed(per_side[s], "ordering.backward_distance") for s in SIDES
             if per_side.get(s)}
    c = histogram_chart("backward", "backward distance", "distance (KB)", hists,
                        empty_note="no backward dispatches")
    if c:
        charts.append(c)
    first = {s: (_get(per_side[s][0], "ordering.first") or []) for s in SIDES if per_side.get(s)}
    text = {s: "\n".join(f"{x.get('t_ns', 0) / 1e9:12.9f} {x.get('action', '')} "
                         f"{x.get('rwbs', '')} {x.get('sector', '')} + {x.get('nr_sectors', '')} "
                         f"[{x.get('comm', '')}]" for x in lines) for s, lines in first.items()}
    procs = []
    for s in SIDES:
        for d in per_side.get(s, [])[:1]:
            for p in (_get(d, "ordering.per_process") or [])[:10]:
                procs.append([LABELS[s], f"{p.get('comm', '')} ({p.get('pid', '')})",
                              p.get("requests"), p.get("backward"), p.get("backward_own")])
    tables = [_rows_table("ordering", "Ordering",
                          _metric_rows(ORDERING_METRICS, per_side, verdicts))]
    if procs:
        tables.append({"id": "processes", "title": "Backward dispatches per process",
                       "columns": ["side", "process", "requests", "backward (device)",
                                   "backward (own stream)"], "rows": procs})
    return {"charts": charts, "tables": tables, "text": text}


def model_section(model: Mapping[str, Any] | None, dev: str,
                  observed: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Observed baseline / observed patched / predicted old / predicted new, and fidelity."""
    if not model:
        return {"charts": [], "tables": [], "notes": [
            "No model run: the comparison names no policy under test and no kernel on "
            "either side."]}
    if model.get("state") != "ok" and "no Q events" in str(model.get("error") or ""):
        return {"charts": [], "tables": [], "notes": [
            f"No model panel: {model.get('error')}. The model replays the submitted bios "
            "(Q events) through the old and the new policy; a trace quoted at a later stage "
            "(G, D) has none.", "The observed comparison above is unaffected."]}
    if model.get("state") != "ok":
        return {"charts": [], "tables": [],
                "error": f"The model panel failed: {model.get('error') or 'unknown error'}",
                "notes": ["The observed comparison above is unaffected."]}
    pdev = (model.get("device_map") or {}).get(dev, dev)
    sides: dict[str, list[Mapping[str, Any]]] = {s: list(observed.get(s, [])) for s in SIDES}
    for s in ("predicted_old", "predicted_new"):
        d = _get(model, f"{s}.devices")
        sides[s] = [d[pdev]] if isinstance(d, Mapping) and pdev in d else []
    charts = []
    for key, title, x in (("seek", "seek distance", "seek distance (KB)"),
                          ("sizes", "request size", "request size (KB)")):
        hists = {s: _summed(v, key) for s, v in sides.items() if v}
        c = histogram_chart(f"model-{key}", title, x, hists, sides=MODEL_SIDES)
        if c:
            charts.append(c)
    metrics = (("sizes.count", "Requests", 1, 0), ("seek.zero_cnt", "Zero seeks", 1, 0),
               ("seek.mean_bytes", "Mean seek distance (KB)", 1 / 1024, 1),
               ("sizes.mean_bytes", "Mean request size (KB)", 1 / 1024, 1),
               ("ordering.backward", "Backward dispatches", 1, 0),
               ("throughput.mb_per_s", "Throughput (MB/s)", 1, 2))
    rows = []
    for key, label, scale, digits in metrics:
        row: list[Any] = [label]
        for s in MODEL_SIDES:
            v = _mean([(_num(_get(d, key)) or 0.0) * scale for d in sides[s]
                       if _num(_get(d, key)) is not None])
            row.append(None if v is None else f"{v:,.{digits}f}")
        rows.append(row)
    tables = [{"id": "model", "title": "Observed and predicted",
               "columns": ["", *(LABELS[s] for s in MODEL_SIDES)], "rows": rows}]
    tables += fidelity_tables(model, dev)
    notes = model_notes(model) + fidelity_warnings(model, dev)
    if pdev != dev:
        notes.append(f"predicted device {pdev} stands for observed {dev}")
    fid = model.get("fidelity") or {}
    if fid.get("error"):
        notes.append(f"fidelity: {fid['error']}")
    notes.extend(f"kernel preset: {w}" for w in model.get("warnings") or [])
    return {"charts": charts, "tables": tables, "notes": notes}


FIDELITY_LABELS = {"matched_in_order": "D requests matched in order",
                   "seek_l1": "seek histogram L1 (0 same, 2 disjoint)",
                   "size_l1": "size histogram L1 (0 same, 2 disjoint)",
                   "throughput_rel_err": "relative throughput error"}


def fidelity_tables(model: Mapping[str, Any], dev: str) -> list[dict[str, Any]]:
    """One table: each fidelity measure of the old policy vs the observed baseline and of the
    new policy vs the observed patched side (when the panel computed it)."""
    old = (model.get("fidelity") or {}).get(dev)
    new = (model.get("fidelity_new") or {}).get(dev)
    old = old if isinstance(old, Mapping) else {}
    new = new if isinstance(new, Mapping) else {}
    keys = [k for k in dict.fromkeys([*old, *new]) if not isinstance(old.get(k, new.get(k)),
                                                                     (Mapping, list))]
    if not keys:
        return []
    cols = ["measure", "old policy vs observed baseline"]
    if model.get("fidelity_new") is not None:
        cols.append("new policy vs observed patched")
    rows = []
    for k in keys:
        row = [FIDELITY_LABELS.get(k, k.replace("_", " ")),
               "–" if old.get(k) is None else _fmt_any(old[k])]
        if len(cols) == 3:
            row.append("–" if new.get(k) is None else _fmt_any(new[k]))
        rows.append(row)
    return [{"id": "fidelity", "title": "Fidelity (does the model reproduce what was observed?)",
             "columns": cols, "rows": rows}]


#: A histogram L1 above this says the prediction does not reproduce what was observed
#: (the check's default ``fidelity_l1_warn``).
FIDELITY_L1_WARN = 0.3


def fidelity_warnings(model: Mapping[str, Any], dev: str) -> list[str]:
    """Words for a fidelity that says the model misses: which prediction, which histogram."""
    out = []
    for key, what in (("fidelity", "The old policy does not reproduce the observed baseline"),
                      ("fidelity_new", "The new policy does not reproduce the observed patched "
                                       "side")):
        f = (model.get(key) or {}).get(dev)
        if not isinstance(f, Mapping):
            continue
        bad = [f"{k.split('_')[0]} histogram L1 {float(f[k]):.2f}" for k in ("size_l1", "seek_l1")
               if f.get(k) is not None and float(f[k]) > FIDELITY_L1_WARN]
        if bad:
            extra = (": the patched kernel differs from the baseline in more than what the "
                     "new policy changes" if key == "fidelity_new" else "")
            out.append(f"{what} on this device ({', '.join(bad)}){extra}.")
    return out


def model_notes(model: Mapping[str, Any]) -> list[str]:
    """What the panel replayed: the policies in words, each differing field (marked when the
    replayed input cannot exercise it), the stack."""
    notes = []
    label = model.get("policy_new_label")
    if label:
        notes.append(f"Old policy: the baseline kernel's preset ({model.get('policy_old_label')})."
                     f" New policy: {label}.")
    diff = model.get("policy_diff")
    if isinstance(diff, list):
        parts = []
        for d in diff:
            text = f"{d.get('field')} {d.get('old')} → {d.get('new')}"
            if not d.get("exercised", True):
                text += f" (not exercised: {d.get('why')})"
            parts.append(text)
        if parts:
            notes.append("Fields that differ: " + "; ".join(parts) + ".")
    else:  # a panel stored before policy_diff existed
        legacy = policy_diff(str(model.get("policy_old") or ""), str(model.get("policy_new") or ""))
        if legacy:
            notes.append("new policy vs old: " + ", ".join(legacy))
    if model.get("stack"):
        note = f" ({model['stack_note']})" if model.get("stack_note") else ""
        notes.append(f"stack: {model['stack']}{note}")
    for key in ("window", "patched_window"):  # a huge run: the model replayed its first rows
        w = model.get(key)
        if isinstance(w, Mapping) and w.get("note"):
            notes.append(str(w["note"])[:1].upper() + str(w["note"])[1:] + ".")
    return notes


def policy_diff(old: str, new: str) -> list[str]:
    """``["split_remainder tail → head", ...]``: the knobs two policy strings set differently.

    A policy string is ``"<name>: k=v,k=v,..."`` (``Policy.describe()``); the full strings
    are long, the difference is what a reviewer reads first.
    """
    def knobs(text: str) -> dict[str, str]:
        body = text.split(": ", 1)[1] if ": " in text else text
        return dict(kv.split("=", 1) for kv in body.split(",") if "=" in kv)

    a, b = knobs(old), knobs(new)
    return [f"{k} {a.get(k, '?')} → {b.get(k, '?')}" for k in dict.fromkeys([*a, *b])
            if a.get(k) != b.get(k)]


def _fmt_any(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# --- verdicts: the summary's facts, roll-ups with their members, order across members --------

def summary_facts(words: Mapping[str, Any]) -> dict[str, Any]:
    """What the page's summary box shows (stored with the check): the headline, the timing
    verdict and every fact with the section, chart and device that show it."""
    def facts(key: str, limit: int = 50) -> list[dict[str, Any]]:
        return [{k: f.get(k) for k in ("text", "kind", "verdict", "dev", "section", "chart")}
                for f in (words.get(key) or [])[:limit] if isinstance(f, Mapping)]

    timing = words.get("timing") or {}
    return {"headline": str(words.get("headline") or ""), "also": str(words.get("also") or ""),
            "mechanism": facts("improved") + facts("regressed") + facts("changed"),
            "also_facts": facts("also_facts", 12),
            "timing": {"text": str(timing.get("text") or ""),
                       "state": str(timing.get("state") or ""),
                       "facts": [{k: f.get(k) for k in ("text", "kind", "verdict", "dev",
                                                        "section", "chart")}
                                 for f in (timing.get("facts") or [])[:6]]},
            "predictions": [{k: p.get(k) for k in ("text", "dev", "label", "predicted",
                                                   "observed", "mismatch", "section", "chart")}
                            for p in (words.get("predictions") or [])]}


VERDICT_COLUMNS = ["", "kind", "Baseline", "Patched", "Δ %", "spread across members",
                   "Verdict", "why / statistics"]


def _verdict_row(m: Mapping[str, Any]) -> list[Any]:
    from workers.compare import change_text, timing_statistics

    unit = str(m.get("unit") or "")
    b, p = (m.get("baseline") or {}), (m.get("patched") or {})
    null = NULL_NOTE
    bt = change_text(b.get("mean"), None, unit, null=b.get("null") or null).split(" -> ")[0]
    pt = change_text(p.get("mean"), None, unit, null=p.get("null") or null).split(" -> ")[0]
    spread = ""
    sp = m.get("spread") or {}
    if sp.get("baseline") and sp.get("patched"):
        from workers.compare import format_value

        spread = (f"{format_value(sp['baseline'][0], unit)}..{format_value(sp['baseline'][1], unit)}"
                  f" → {format_value(sp['patched'][0], unit)}.."
                  f"{format_value(sp['patched'][1], unit)}")
    why = ""
    if m.get("reason"):
        why = str(m["reason"])
    elif m.get("needs"):
        why = str(m["needs"].get("basis") or "")
    elif m.get("p_value") is not None:
        why = timing_statistics(m)
    elif m.get("varies"):
        why = "runs of " + " and ".join(m["varies"]) + " differ"
    pct = m.get("pct")
    return [m.get("label"), m.get("kind"), bt, pt, None if pct is None else f"{pct:+.1f}%",
            spread or None, m.get("verdict"), why or None]


NULL_NOTE = "–"


def verdicts_section(compare: Mapping[str, Any] | None, dev: str,
                     names: Mapping[str, str]) -> dict[str, Any]:
    """The device's verdict rows; for a member disk, its array's roll-up first and the member's
    own rows one click below; the order of the stack's pieces across members, both sides."""
    if not compare:
        return {"charts": [], "tables": [], "notes": ["No comparison computed."]}
    rows = [m for m in compare.get("metrics") or [] if isinstance(m, Mapping)]
    group = next((g for g in compare.get("groups") or [] if dev in (g.get("members") or [])),
                 None)
    tables: list[dict[str, Any]] = []
    notes: list[str] = []
    if group:
        gname = str(group["name"])
        tables.append({"id": "rollup", "title": f"{gname} (sum of rates and counts, mean of "
                       "the rest; spread across the members)", "columns": VERDICT_COLUMNS,
                       "rows": [_verdict_row(m) for m in rows if m.get("device") == gname]})
        tables.append({"id": "member", "collapsed": True,
                       "title": f"{names.get(dev, dev)} alone (one of {len(group['members'])} "
                       "members; the check uses the roll-up)", "columns": VERDICT_COLUMNS,
                       "rows": [_verdict_row(m) for m in rows if m.get("device") == dev]})
    else:
        tables.append({"id": "device", "title": f"{names.get(dev, dev)}",
                       "columns": VERDICT_COLUMNS,
                       "rows": [_verdict_row(m) for m in rows if m.get("device") == dev]})
    facts = [f for f in compare.get("facts") or [] if f.get("device") == dev
             or (group and f.get("device") == group.get("top"))]
    if facts:
        tables.append({"id": "facts", "title": "Mechanism facts (histograms and sequences, "
                       "compared exactly)", "columns": ["fact", "Verdict"],
                       "rows": [[f.get("text"), f.get("verdict")] for f in facts]})
    top = group.get("top") if group else dev
    order = (compare.get("member_order") or {}).get(top) if top else None
    if order:
        tables.append(member_order_table(order))
    if not tables[0]["rows"]:
        notes.append("No metric of this device is present on both sides.")
    return {"charts": [], "tables": tables, "notes": notes}


def member_order_table(order: Mapping[str, Any]) -> dict[str, Any]:
    """Cross-device order: the first parent bios of the top device, both sides side by side,
    each with its pieces as ``member@offset`` in issue order."""
    def cell(par: Mapping[str, Any] | None) -> str | None:
        if not par:
            return None
        pieces = ", ".join(f"{x['member']}@{x['offset_kb']}K" for x in par.get("pieces") or [])
        mark = "" if par.get("ascending") else "  ← not ascending"
        return f"{par['sector']} + {par['nr_sectors']}: {pieces}{mark}"

    sides = {s: (order.get(s) or {}) for s in SIDES}
    parents = {s: list(sides[s].get("parents") or []) for s in SIDES}
    n = max((len(v) for v in parents.values()), default=0)
    rows = [[str(i + 1), *(cell(parents[s][i] if i < len(parents[s]) else None)
                           for s in SIDES)] for i in range(n)]
    share = {s: sides[s].get("out_of_order_share") for s in SIDES}
    name = next((str(v.get("name")) for v in sides.values() if v.get("name")), "")
    title = (f"Order across the members of {name}: the first parent bios in issue order, "
             f"member@offset within the bio (out of order: "
             + " → ".join("–" if share[s] is None else f"{100 * share[s]:.1f}%" for s in SIDES)
             + ")")
    return {"id": "member-order", "title": title,
            "columns": ["bio", "Baseline", "Patched"], "rows": rows}


def run_charts(per_side: Mapping[str, Sequence[Mapping[str, Any]]],
               build: Callable[[Mapping[str, Sequence[Mapping[str, Any]]]], Mapping[str, Any]],
               ids: Sequence[str]) -> list[dict[str, Any]]:
    """The charts ``ids`` of a section for every run after the first (run index 1..), each
    tagged ``run`` so the page's run selector can switch between them; run 0 is the section's
    own chart."""
    n = max((len(v) for v in per_side.values()), default=0)
    out: list[dict[str, Any]] = []
    for i in range(1, n):
        one = {s: [v[min(i, len(v) - 1)]] for s, v in per_side.items() if v}
        for c in build(one).get("charts") or []:
            if c.get("id") in ids:
                out.append({**c, "run": i})
    return out


def add_run_charts(per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                   verdicts: Mapping[str, Mapping[str, Any]], bin_s: Mapping[str, float],
                   ordering: dict[str, Any], throughput: dict[str, Any]) -> None:
    """With several runs on a side, the LBA scatter and the time series of every run (the
    page's run selector shows one run at a time; distributions stay pooled)."""
    if max((len(v) for v in per_side.values()), default=0) < 2:
        return
    for payload, ids, build in (
            (ordering, ("lba",), lambda one: ordering_section(one, verdicts)),
            (throughput, ("mbps", "iops"),
             lambda one: throughput_section(one, verdicts, bin_s))):
        for c in payload.get("charts") or []:
            if c.get("id") in ids:
                c["run"] = 0
        payload["charts"] = list(payload.get("charts") or []) + run_charts(per_side, build, ids)
    runs = {s: len(v) for s, v in per_side.items()}
    ordering.setdefault("notes", []).append(
        f"LBA over time: one run at a time (runs: {runs['baseline']} baseline, "
        f"{runs['patched']} patched; pick one with Run); histograms pool every run.")


def occupancy_chart(occ: Mapping[str, Mapping[str, Any] | None],
                    sides: Sequence[str] = SIDES) -> dict[str, Any] | None:
    """Requests in flight (D..C, the driver's tags) and in the scheduler (G..D) over time, one
    panel per side (observed, or predicted by the model's replay), time-weighted mean per bin."""
    present = [s for s in sides if occ.get(s) and (occ[s] or {}).get("t_s")
               and any(((occ[s] or {}).get(k) or {}).get("requests")
                       for k in ("inflight", "scheduler"))]
    if not present:
        return None
    x_max = max(max(occ[s]["t_s"]) for s in present) or 1  # type: ignore[index]
    y_max = max(max((occ[s] or {}).get(k, {}).get("max") or [0])
                for s in present for k in ("inflight", "scheduler"))
    panels = []
    for s in present:
        o = occ[s] or {}
        data = []
        for i, (k, name) in enumerate((("inflight", "D..C in flight"),
                                       ("scheduler", "G..D in scheduler"))):
            d = o.get(k) or {}
            if not d.get("requests"):
                continue
            data.append({"type": "scatter", "mode": "lines", "name": name, "x": o["t_s"],
                         "y": [round(v, 3) for v in d["mean"]],
                         "line": {"color": COLORS[s], "width": 1.5, "shape": "hv",
                                  "dash": "solid" if i == 0 else "dot"}})
        fig = {"data": data,
               "layout": _layout(f"{LABELS[s]}: requests in flight and in the scheduler",
                                 "time (s)", "requests (mean per bin)",
                                 xaxis={"range": [0, x_max]},
                                 yaxis={"range": [0, max(y_max, 1) * 1.08]}, showlegend=True,
                                 legend={"orientation": "h", "x": 1, "xanchor": "right",
                                         "y": 1.0, "yanchor": "bottom"})}
        panels.append({"side": s, "label": LABELS[s], "figure": fig})
    return {"id": "occupancy", "title": "In flight (D..C) and in the scheduler (G..D)",
            "panels": panels}


def add_occupancy(per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                  throughput: dict[str, Any], model_payload: dict[str, Any],
                  model: Mapping[str, Any] | None, dev: str) -> None:
    """The occupancy chart in the throughput section, one per run (tagged ``run`` for the page's
    run selector, as the LBA and time-series views, when a side has several runs), its mean and
    max per run, and, beside the observed baseline, the model's predictions for the old and the
    new policy."""
    occ = {s: (per_side[s][0].get("occupancy") if per_side.get(s) else None) for s in SIDES}
    n = max((len(v) for v in per_side.values()), default=0)
    rows: list[list[Any]] = []
    for i in range(n):
        occ_i = {s: (per_side[s][min(i, len(per_side[s]) - 1)].get("occupancy")
                     if per_side.get(s) else None) for s in SIDES}
        c = occupancy_chart(occ_i)
        if not c:
            continue
        if n > 1:
            c["run"] = i
        throughput.setdefault("charts", []).append(c)
        run = f", run {i + 1}" if n > 1 else ""
        mx = {s: ((o or {}).get("inflight") or {}).get("overall_max") for s, o in occ_i.items()}
        mean = {s: ((o or {}).get("inflight") or {}).get("overall_mean")
                for s, o in occ_i.items()}
        rows += [[f"mean in flight{run}", *(None if mean[s] is None else f"{mean[s]:.3f}"
                                            for s in SIDES)],
                 [f"max in flight{run}", *(mx[s] for s in SIDES)]]
    if rows:
        throughput.setdefault("tables", []).append({
            "id": "occupancy", "title": "Requests in flight (D..C"
            + (", every run)" if n > 1 else ")"),
            "columns": ["", "Baseline", "Patched"], "rows": rows})
    if not model or model.get("state") != "ok":
        return
    pdev = (model.get("device_map") or {}).get(dev, dev)
    pred: dict[str, Mapping[str, Any] | None] = {"baseline": occ.get("baseline"),
                                                   "patched": occ.get("patched")}
    for s in ("predicted_old", "predicted_new"):
        d = _get(model, f"{s}.devices")
        pred[s] = (d.get(pdev) or {}).get("occupancy") if isinstance(d, Mapping) else None
    c = occupancy_chart(pred, sides=MODEL_SIDES)
    if c and len(c["panels"]) > 1:
        model_payload.setdefault("charts", []).append({**c, "id": "model-occupancy"})
    runs = model.get("runs") or []
    if len(runs) > 1:
        rows = []
        for r in runs:
            fid = ((r.get("fidelity") or {}).get(dev) or {}) if not r.get("error") else {}
            pred = (r.get("predicted") or {}).get(pdev) or {}

            def pct(side: str, pred: Mapping[str, Any] = pred) -> str | None:
                v = (pred.get(side) or {}).get("backward_share")
                return None if v is None else f"{100 * v:.1f}%"

            rows.append([f"baseline run {int(r.get('run', 0)) + 1}",
                         r.get("error") or pct("predicted_old"), pct("predicted_new"),
                         None if fid.get("matched_in_order") is None
                         else f"{100 * fid['matched_in_order']:.1f}%",
                         None if fid.get("seek_l1") is None else f"{fid['seek_l1']:.3f}"])
        model_payload.setdefault("tables", []).append({
            "id": "model-runs", "title": "Every baseline run replayed (charts: run 1)",
            "columns": ["run", "predicted backward, old policy",
                        "predicted backward, new policy", "D requests matched in order",
                        "seek histogram L1"], "rows": rows})


KEEP_STORIES = 100  # workers.analyzers.lineage.KEEP_RECORDS (all devices of a run)


def story_timeline(rec: Mapping[str, Any]) -> dict[str, Any]:
    """One request's story as timeline points (the page draws them with plotly when a chart
    point is picked): the parent bio's Q on the top device, the request's own events (A, Q, G,
    I, D, C) and the bios merged into it (M, F), each at its time from the first point (us)."""
    name = str(rec.get("name") or rec.get("dev") or "")
    pts = [{"a": str(e["a"]), "dev": name, "t_ns": int(e["t_ns"]), "what": "request"}
           for e in rec.get("events") or []]
    pts += [{"a": str(m["a"]), "dev": name, "t_ns": int(m["t_ns"]),
             "what": f"merged bio {m.get('sector')} + {m.get('nr_sectors')}"}
            for m in rec.get("merged") or []]
    p = rec.get("parent")
    if p:
        pts.append({"a": "Q", "dev": str(p.get("name") or p.get("dev")), "t_ns": int(p["t_ns"]),
                    "what": f"parent bio {p.get('sector')} + {p.get('nr_sectors')}"
                    f" (this piece at {p.get('offset_kb')} KB)"})
    pts.sort(key=lambda x: x["t_ns"])
    t0 = pts[0]["t_ns"] if pts else 0
    d = next((e["t_ns"] for e in rec.get("events") or [] if e["a"] == "D"), t0)
    return {"request": f"{rec.get('sector')} + {rec.get('nr_sectors')} {rec.get('rwbs', '')}",
            "sector": rec.get("sector"), "d_s": d / 1e9,
            "points": [{"a": x["a"], "dev": x["dev"], "what": x["what"],
                        "us": round((x["t_ns"] - t0) / 1000, 1)} for x in pts]}


def story_timelines(side_results: Mapping[str, Sequence[Mapping[str, Any]]],
                    dev: str) -> dict[str, list[list[dict[str, Any]]]]:
    """``{side: [[timeline of each stored request of dev] per run]}`` for the page's request
    picker (a click on a point of the LBA chart of a run opens that request's story)."""
    out: dict[str, list[list[dict[str, Any]]]] = {}
    for s in SIDES:
        runs = []
        for res in side_results.get(s) or []:
            recs = [r for r in ((res.get("lineage") or {}).get("requests") or [])
                    if r.get("dev") == dev]
            tls = [story_timeline(r) for r in recs]
            # the seek histogram's bucket of each stored request (seed 000's distance from the
            # previous request's end, in issue order: the records are the device's first D's)
            for prev, rec, tl in zip(recs, recs[1:], tls[1:]):
                d = abs(int(rec["sector"]) - (int(prev["sector"]) + int(prev["nr_sectors"])))
                tl["seek_bucket"] = (d >> 1).bit_length()
            runs.append(tls)
        if any(runs):
            out[s] = runs
    return out


def add_lineage(side_results: Mapping[str, Sequence[Mapping[str, Any]]], dev: str,
                ordering: dict[str, Any], limit: int = 12) -> None:
    """Request stories (workers.analyzers.lineage) of the device in the ordering section: each
    request's events across tracepoints and devices on one line, with the parent bio it came
    from; for a stacked device, pieces per bio and per-bio latency (first run of each side)."""
    from workers.analyzers.lineage import story

    rows: list[list[Any]] = []
    bios: list[list[Any]] = []
    for s in SIDES:
        runs = side_results.get(s) or []
        lin = (runs[0].get("lineage") or {}) if runs else {}
        for rec in [r for r in lin.get("requests") or [] if r.get("dev") == dev][:limit]:
            rows.append([LABELS[s], f"{rec['sector']} + {rec['nr_sectors']} {rec['rwbs']}",
                         story(rec)])
        b = (lin.get("bios") or {}).get(dev)
        if b:
            lat = (b.get("latency_ns") or {}).get("percentiles_ns") or {}
            first = (b.get("first") or [{}])[0]
            bios.append([LABELS[s], b.get("bios"), f"{b.get('pieces_per_bio', 0):.2f}",
                         None if "p50" not in lat else f"{lat['p50'] / 1000:,.0f}",
                         None if "p99" not in lat else f"{lat['p99'] / 1000:,.0f}",
                         ", ".join(first.get("members") or [])])
    stories = story_timelines(side_results, dev)
    if stories:
        ordering["stories"] = stories
        ordering.setdefault("notes", []).append(
            "Click a point of the LBA chart to see that request's story as a timeline "
            f"(stories are kept for the first {KEEP_STORIES} requests of each run).")
    if rows:
        ordering.setdefault("tables", []).append({
            "id": "stories", "title": "Request stories: each request's events across "
            "tracepoints and devices (time from its first event), and the bio it came from",
            "columns": ["side", "request", "story"], "rows": rows})
    if bios:
        ordering.setdefault("tables", []).append({
            "id": "bios", "title": "Bios of this stacked device: pieces per bio and per-bio "
            "latency (Q of the bio to the last piece's C)",
            "columns": ["side", "bios", "pieces per bio", "latency p50 (us)",
                        "latency p99 (us)", "first bio's pieces, in issue order"],
            "rows": bios})


# --- everything ----------------------------------------------------------------------------

def build_payloads(side_results: Mapping[str, Sequence[Mapping[str, Any]]], *,
                   seek_by_stage: Mapping[str, Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]]]
                   | None = None,
                   compare: Mapping[str, Any] | None = None,
                   model: Mapping[str, Any] | None = None,
                   seek_text: Callable[[dict[str, Any]], str] | None = None,
                   ) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every section payload, keyed by ``(section, dev, stage)`` (stage "" except for seek).

    Args:
        side_results: ``{"baseline": [results...], "patched": [...]}`` (analyze() output).
        seek_by_stage: ``{dev: {stage: {side: [seek json per run]}}}`` for the stage selector;
            the default stage's histograms come from the results themselves.
        compare: ``workers.compare.compare`` output, for the verdict columns.
        model: the model panel (see ``workers.whatif.model_panel``).
        seek_text: renders one run's seek JSON in the seed 000 layout.
    """
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    index: list[dict[str, Any]] = []
    out[("index", "", "")] = {"section": "index", "devices": index,
                              "sections": [{"id": i, "title": t} for i, t in SECTIONS]}
    bin_s = {s: (float(side_results[s][0].get("bin_ns") or 0) / 1e9 if side_results.get(s)
                 else 0.0) for s in SIDES}
    all_names = {str(k): str(v.get("name") or k) for runs in side_results.values()
                 for r in runs for k, v in (r.get("devices") or {}).items()}
    for dev in devices_of({s: [dict(r) for r in v] for s, v in side_results.items()}):
        per_side = {s: device_runs(side_results.get(s, []), dev) for s in SIDES}
        name = next((str(d.get("name")) for s in SIDES for d in per_side[s] if d.get("name")),
                    dev)
        stage_seeks = {st: {s: list(v.get(s, [])) for s in SIDES}
                       for st, v in ((seek_by_stage or {}).get(dev) or {}).items()}
        index.append(_device_payloads(out, dev, name, per_side, verdict_index(compare, dev),
                                      stage_seeks, bin_s, seek_text=seek_text,
                                      model=model_section(model, dev, per_side),
                                      verdicts=verdicts_section(compare, dev, all_names)))
        add_occupancy(per_side, out[("throughput", dev, "")], out[("model", dev, "")], model,
                      dev)
        add_lineage(side_results, dev, out[("ordering", dev, "")])
        seek = out.get(("seek", dev, ""))
        if seek is not None and out[("ordering", dev, "")].get("stories") \
                and seek.get("default_stage") == "D":
            # a bar of the D-stage seek histogram opens a stored request of that bucket
            seek["stories"] = out[("ordering", dev, "")]["stories"]
    for top, members in member_groups(side_results).items():
        dev = f"{MEMBERS_PREFIX}{top}"
        per_side = {s: [d for m in members for d in device_runs(side_results.get(s, []), m)]
                    for s in SIDES}
        top_name = next((str(_get(r, f"devices.{top}.name")) for s in SIDES
                         for r in side_results.get(s, []) if _get(r, f"devices.{top}.name")), top)
        stage_seeks = {}
        for m in members:
            for st, v in ((seek_by_stage or {}).get(m) or {}).items():
                for s in SIDES:
                    stage_seeks.setdefault(st, {x: [] for x in SIDES})[s] += list(v.get(s, []))
        note = (f"All {len(members)} members of {top_name} together: histograms summed over the "
                f"members, numbers are the mean per member, LBA over time shows every member "
                f"(sectors are each member's own).")
        model_note = {"charts": [], "tables": [], "notes": [
            "The model panel is drawn per device: pick the array or one member."]}
        verdicts_note = {"charts": [], "tables": [], "notes": [
            f"The verdicts of the members are on {top_name}'s and each member's view "
            "(the roll-up of the members is there)."]}
        entry = _device_payloads(out, dev, f"all members of {top_name}", per_side, {},
                                 stage_seeks, bin_s, seek_text=None, model=model_note,
                                 verdicts=verdicts_note, note=note, lba_series=LBA_SERIES)
        entry = {**entry, "members": members}
        # listed right after the array itself
        at = next((i + 1 for i, e in enumerate(index) if e.get("dev") == top), len(index))
        index.insert(at, entry)
    return out


#: Device key of the all-members view of a stacked device: ``members:9,0``.
MEMBERS_PREFIX = "members:"


def member_groups(side_results: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[str]]:
    """``{top: [member, ...]}`` of every stacked device whose pieces the analyzers followed
    (``results["remaps"][top]["members"]``), members in major,minor order."""
    out: dict[str, list[str]] = {}
    for s in SIDES:
        for r in side_results.get(s, []):
            for top, rm in (r.get("remaps") or {}).items():
                members = rm.get("members") if isinstance(rm, Mapping) else None
                if isinstance(members, Mapping) and len(members) > 1:
                    out.setdefault(str(top), [])
                    out[str(top)] += [m for m in members if m not in out[str(top)]]
    return {t: sorted(ms, key=lambda d: tuple(int(x) for x in d.split(",")))
            for t, ms in out.items()}


def _with_zero_share(seek: Mapping[str, Any]) -> dict[str, Any]:
    """A seek histogram with its zero-seek share (%), as :func:`device_runs` adds it."""
    out = dict(seek)
    if seek.get("cnt"):
        out["zero_share"] = 100.0 * seek.get("zero_cnt", 0) / seek["cnt"]
    return out


def _device_payloads(out: dict[tuple[str, str, str], dict[str, Any]], dev: str, name: str,
                     per_side: Mapping[str, Sequence[Mapping[str, Any]]],
                     metric_verdicts: Mapping[str, Mapping[str, Any]],
                     stage_seeks: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]],
                     bin_s: Mapping[str, float], *, model: Mapping[str, Any],
                     verdicts: Mapping[str, Any] | None = None,
                     seek_text: Callable[[dict[str, Any]], str] | None = None,
                     note: str = "", lba_series: int = 1) -> dict[str, Any]:
    """Every section of one device (or of the all-members view) into ``out``; returns the
    device's index entry."""
    stage_note = {s: "; ".join(sorted({str(d.get("stage_note") or "") for d in per_side[s]}
                                      - {""})) for s in SIDES}
    base: dict[str, Any] = {"dev": dev, "name": name, "stage_note": stage_note,
                            "runs": {s: len(per_side[s]) for s in SIDES}}

    def put(section: str, body: Mapping[str, Any], stage: str = "") -> dict[str, Any]:
        payload = {**base, "section": section, **body}
        if note:
            payload["notes"] = [note, *payload.get("notes", [])]
        out[(section, dev, stage)] = payload
        return payload

    rows = metric_verdicts
    put("fragmentation", fragmentation_section(per_side, rows))
    throughput = put("throughput", throughput_section(per_side, rows, bin_s))
    put("latency", latency_section(per_side, rows))
    ordering = dict(ordering_section(per_side, rows, lba_series=lba_series))
    if lba_series == 1:  # several entries per side are runs (not the members of a view)
        add_run_charts(per_side, rows, bin_s, ordering, throughput)
    put("ordering", ordering)
    if verdicts is not None:
        put("verdicts", verdicts)
    put("model", model)
    # seek: the default stage (what the results used) plus every stage of the selector
    default_stage = next((str(d.get("stage")) for s in SIDES for d in per_side[s]
                          if d.get("stage")), "D")
    stages: dict[str, dict[str, list[Mapping[str, Any]]]] = {
        default_stage: {s: [{"seek": d["seek"]} for d in per_side[s] if d.get("seek")]
                        for s in SIDES}}
    for st, sides in stage_seeks.items():
        if st != default_stage:
            stages[st] = {s: [{"seek": _with_zero_share(j)} for j in sides.get(s, [])]
                          for s in SIDES}
    stage_list = [st for st in STAGES if st in stages and
                  any(_get(r, "seek.cnt") for side in stages[st].values() for r in side)]
    if default_stage not in stage_list:
        stage_list.insert(0, default_stage)
    for st in stages:
        texts = {}
        if seek_text is not None:
            for s in SIDES:
                if stages[st].get(s):
                    texts[s] = seek_text(dict(stages[st][s][0]["seek"]))
        body: dict[str, Any] = {
            "stage": st, "stages": stage_list, "default_stage": default_stage,
            **seek_section(stages[st], rows if st == default_stage else {}, st, texts)}
        if st != default_stage:
            # the note says what is drawn: the selected stage, not the device's default one
            body["stage_note"] = {s: (f"stage {st} (selected; the device's default is "
                                      f"{default_stage})" if stages[st].get(s) else "")
                                  for s in SIDES}
        payload = put("seek", body, st)
        if st == default_stage:
            out[("seek", dev, "")] = payload
    return {**base, "stage": {s: sorted({str(d.get("stage") or "") for d in per_side[s]} - {""})
                              for s in SIDES}}


def encode(payload: Mapping[str, Any]) -> str:
    """Compact JSON text (what the section endpoint serves)."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False, default=_default)


def _default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")
