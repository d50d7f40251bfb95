"""Results JSON -> what the comparison page draws: plotly figure dicts and key-number rows.

Pure functions (no ORM, no request): the page passes in the stored results of each side's
bundles. With several runs on one side the histograms are summed (the shape of all runs) and
the key numbers are the mean per run. Baseline and patched keep the same colours everywhere
and their charts share the x categories and the y range, so the eye compares like with like.

New sections (issue 5: fragmentation, throughput, latency, ordering, model) add a builder here
and a partial template; :func:`comparison_view_model` collects them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

SIDES = ("baseline", "patched")
COLORS = {"baseline": "#1f77b4", "patched": "#ff7f0e"}
LABELS = {"baseline": "Baseline", "patched": "Patched"}


def _pad(values: Sequence[int], n: int) -> list[int]:
    return list(values) + [0] * (n - len(values))


def sum_histograms(hists: Sequence[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Element-wise sum of ``{"edges_kb": [...], "counts": [...]}`` power-of-two histograms."""
    n = max((len(h.get("counts", [])) for h in hists), default=0)
    counts = [0] * n
    for h in hists:
        for i, v in enumerate(h.get("counts", [])):
            counts[i] += int(v)
    edges = [0] + [1 << i for i in range(n)]
    return edges, counts


def bucket_labels(edges_kb: Sequence[int]) -> list[str]:
    """``[0, 1, 2, 4]`` -> ``["[0, 1)", "[1, 2)", "[2, 4)"]`` (KB): half-open bins, the
    seed 000 rows' ``>=(KB) .. <(KB)`` written as intervals."""
    return [f"[{edges_kb[i]}, {edges_kb[i + 1]})" for i in range(len(edges_kb) - 1)]


def devices_of(side_results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Every device seen on either side, in major,minor order."""
    devs: set[str] = set()
    for runs in side_results.values():
        for r in runs:
            devs.update((r.get("devices") or {}).keys())

    def key(d: str) -> tuple[int, ...]:
        try:
            return tuple(int(x) for x in d.split(","))
        except ValueError:
            return (1 << 30,)

    return sorted(devs, key=key)


def _device_runs(runs: Sequence[dict[str, Any]], dev: str) -> list[dict[str, Any]]:
    return [r["devices"][dev] for r in runs if dev in (r.get("devices") or {})]


def histogram_figure(*, side: str, title: str, labels: list[str], counts: list[int],
                     y_max: int, x_title: str) -> dict[str, Any]:
    """A plotly bar chart (figure dict, rendered by plotly.js from the app's static files)."""
    total = sum(counts) or 1
    return {
        "data": [{
            "type": "bar", "name": LABELS[side], "x": labels, "y": counts,
            "marker": {"color": COLORS[side]},
            "customdata": [round(100.0 * c / total, 1) for c in counts],
            "hovertemplate": "%{x} KB: %{y} (%{customdata}%)<extra>" + LABELS[side] + "</extra>",
        }],
        "layout": {
            "title": {"text": title, "font": {"size": 14}},
            "xaxis": {"title": {"text": x_title}, "type": "category", "categoryorder": "array",
                      "categoryarray": labels},
            "yaxis": {"title": {"text": "count"}, "range": [0, max(1, y_max) * 1.08]},
            "margin": {"l": 55, "r": 10, "t": 40, "b": 60},
            "height": 300,
            "showlegend": False,
        },
    }


@dataclass
class Row:
    """One line of the key-numbers table: absolute values, delta and % change."""

    label: str
    unit: str
    baseline: float | None
    patched: float | None
    digits: int = 1
    better: str = ""  # "higher", "lower" or "" (no judgement)

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.patched is None:
            return None
        return self.patched - self.baseline

    @property
    def pct(self) -> float | None:
        d = self.delta
        if d is None or not self.baseline:
            return None
        return 100.0 * d / abs(self.baseline)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "unit": self.unit, "baseline": self.baseline,
                "patched": self.patched, "delta": self.delta, "pct": self.pct}


def _mean(values: Sequence[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _metric(devs: Sequence[dict[str, Any]], fn: Callable[[dict[str, Any]], float | None]
            ) -> float | None:
    out = []
    for d in devs:
        try:
            out.append(fn(d))
        except (KeyError, TypeError, ZeroDivisionError, ValueError):
            out.append(None)
    return _mean(out)


#: (label, unit, extractor over one device's results, digits, better)
KEY_METRICS: list[tuple[str, str, Callable[[dict[str, Any]], float | None], int, str]] = [
    ("Requests", "", lambda d: d["sizes"]["count"], 0, ""),
    ("Seeks", "", lambda d: d["seek"]["cnt"], 0, ""),
    ("Zero seeks", "", lambda d: d["seek"]["zero_cnt"], 0, "higher"),
    ("Zero-seek share", "%", lambda d: 100.0 * d["seek"]["zero_cnt"] / d["seek"]["cnt"], 1, "higher"),
    ("Mean seek distance", "KB", lambda d: d["seek"]["mean_bytes"] / 1024.0, 1, "lower"),
    ("Median seek distance", "KB", lambda d: d["seek"]["median_bytes"] / 1024.0, 1, "lower"),
    ("Backward seeks", "", lambda d: d["seek"]["backward"], 0, "lower"),
    ("Mean request size", "KB", lambda d: d["sizes"]["mean_bytes"] / 1024.0, 1, "higher"),
    ("Median request size", "KB", lambda d: d["sizes"]["percentiles_bytes"]["p50"] / 1024.0, 1,
     "higher"),
    ("Data", "MB", lambda d: d["sizes"]["bytes"] / 2**20, 2, ""),
]


@dataclass
class Section:
    """One block of the page per device: a title, a partial template, and its figure kinds.

    The template gets ``device`` (the DeviceView) and ``section``; side-by-side charts use the
    figure keys ``"<kind>-baseline"`` / ``"<kind>-patched"``.
    """

    id: str
    title: str
    template: str
    kinds: tuple[str, ...] = ()


@dataclass
class DeviceView:
    dev: str
    name: str
    stages: dict[str, str] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)  # "seek-baseline" -> fig
    rows: list[Row] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    #: the seed 000 text layout of the seek histogram per side (first run), for mail replies
    seek_text: dict[str, str] = field(default_factory=dict)

    def figure(self, kind: str, side: str) -> dict[str, Any] | None:
        return self.figures.get(f"{kind}-{side}")


#: The page's sections, in order. Issue 5 adds fragmentation, throughput, latency, ordering and
#: model sections here (a builder filling ``DeviceView`` plus a partial template).
SECTIONS: tuple[Section, ...] = (
    Section("numbers", "Key numbers", "reviewapp/partials/section_numbers.html"),
    Section("seek", "Seek distance", "reviewapp/partials/section_charts.html", ("seek",)),
    Section("sizes", "Request size", "reviewapp/partials/section_charts.html", ("sizes",)),
)


def device_view(side_results: dict[str, list[dict[str, Any]]], dev: str) -> DeviceView:
    """Charts and key numbers of one device, both sides."""
    per_side = {s: _device_runs(side_results.get(s, []), dev) for s in SIDES}
    name = next((d.get("name") for s in SIDES for d in per_side[s] if d.get("name")), dev)
    view = DeviceView(dev=dev, name=str(name))
    for kind, key, x_title in (("seek", "seek", "seek distance (KB)"),
                               ("sizes", "sizes", "request size (KB)")):
        hists = {s: sum_histograms([d.get(key) or {} for d in per_side[s]]) for s in SIDES}
        n = max(len(h[1]) for h in hists.values())
        if n == 0:
            continue
        edges = [0] + [1 << i for i in range(n)]
        labels = bucket_labels(edges)
        y_max = max(max(_pad(h[1], n), default=0) for h in hists.values())
        for s in SIDES:
            if not per_side[s]:
                continue
            stage = per_side[s][0].get("stage") or "?"
            what = "Seek distance" if kind == "seek" else "Request size"
            view.figures[f"{kind}-{s}"] = histogram_figure(
                side=s, title=f"{LABELS[s]}: {what} ({stage} stage)", labels=labels,
                counts=_pad(hists[s][1], n), y_max=y_max, x_title=x_title,
            )
    for s in SIDES:
        view.runs[s] = len(per_side[s])
        notes = sorted({str(d.get("stage_note") or (f"stage {d['stage']}" if d.get("stage") else ""))
                        for d in per_side[s]} - {""})
        view.stages[s] = "; ".join(notes)
    for label, unit, fn, digits, better in KEY_METRICS:
        view.rows.append(Row(label=label, unit=unit, baseline=_metric(per_side["baseline"], fn),
                             patched=_metric(per_side["patched"], fn), digits=digits,
                             better=better))
    for s in SIDES:
        if per_side[s] and per_side[s][0].get("seek"):
            view.seek_text[s] = seek_text(per_side[s][0]["seek"])
    view.sections = [sec for sec in SECTIONS
                     if not sec.kinds or any(view.figure(k, s) for k in sec.kinds for s in SIDES)]
    return view


def seek_text(seek_json: dict[str, Any]) -> str:
    """The seed 000 layout (``Read|Write seek`` ... buckets) of stored seek results."""
    from workers.analyzers.seek import SeekHistogram

    try:
        return SeekHistogram.from_json(seek_json).text()
    except (KeyError, TypeError, ValueError):
        return ""


def comparison_view_model(side_results: dict[str, list[dict[str, Any]]]) -> list[DeviceView]:
    """Everything the comparison page draws, per device."""
    return [device_view(side_results, dev) for dev in devices_of(side_results)]
