"""The comparison in words: what changed in the mechanism, what the timing says.

:func:`summarize` turns a :func:`workers.compare.compare` result into the sentence that heads the
comparison page and the plain-text report::

    improved: backward dispatches 50% -> 0%, mean seek distance 181 -> 64 KB (mechanism);
    timing: not judged (G stage only)

The headline names the mechanism metrics a reviewer reads first (``Metric.headline``) that
improved, the ones that regressed against a rule the user marks unwanted, and the mechanism
facts that changed (order across the members of a stack); then the timing verdict (not judged
and why / needs N more runs per side / the significant changes with their statistics). Other
mechanism changes follow on an "also" line. Each fact carries the page section and chart that
show it, so the page can link it. :func:`prediction_check` sets the model's predicted change
beside the observed one and flags a mismatch.

:func:`summary_lines` is what the report prints at its top (kept apart from the report's layout).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from workers.compare import (
    MECHANISM,
    MECHANISM_RULES,
    METRICS,
    TIMING,
    VERDICT_CHANGED,
    VERDICT_IMPROVED,
    VERDICT_NEEDS_RUNS,
    VERDICT_NO_CHANGE,
    VERDICT_NOT_JUDGED,
    VERDICT_REGRESSED,
    Thresholds,
    change_text,
    timing_statistics,
)

#: Mechanism metrics whose predicted and observed change the model panel sets side by side.
PREDICTED: tuple[tuple[tuple[str, ...], str], ...] = tuple(
    (m.path, m.label) for m in METRICS if m.headline and m.path[0] in ("ordering", "seek",
                                                                         "sizes"))


def _names(comparison: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for side in ("baseline", "patched"):
        for dev, d in ((comparison.get("sides") or {}).get(side) or {}).get("devices", {}).items():
            out.setdefault(dev, str(d.get("name") or dev))
    return out


def _link_dev(row: Mapping[str, Any]) -> str:
    """The device the page selector should show for a row (a roll-up: its first member)."""
    members = row.get("members") or []
    return str(members[0]) if members else str(row.get("device") or "")


def _fact(row: Mapping[str, Any], text: str) -> dict[str, Any]:
    return {"text": text, "key": row.get("key"), "verdict": row.get("verdict"),
            "kind": row.get("kind", MECHANISM), "dev": _link_dev(row),
            "section": row.get("section") or "", "chart": row.get("chart") or ""}


def timing_words(rows: Sequence[Mapping[str, Any]], names: Mapping[str, str] | None = None
                 ) -> dict[str, Any]:
    """The timing verdict of the comparison: state, text and the facts it names."""
    names = names or {}
    if not rows:
        return {"state": "none", "text": "timing: no timing metrics", "facts": []}
    needs = [r for r in rows if r["verdict"] == VERDICT_NEEDS_RUNS]
    judged = [r for r in rows if r["verdict"] not in (VERDICT_NEEDS_RUNS, VERDICT_NOT_JUDGED)]
    if needs:
        worst = max(needs, key=lambda r: max(r["needs"]["more_baseline"],
                                             r["needs"]["more_patched"]))
        nd = worst["needs"]
        more = max(nd["more_baseline"], nd["more_patched"])
        text = (f"timing: needs more runs ({more} more per side, {nd['per_side']} in all; "
                f"{nd['basis']})")
        return {"state": "needs more runs", "text": text, "more_per_side": more,
                "per_side": nd["per_side"],
                "facts": [_fact(worst, f"{_label(worst, names)} {worst['change']}")]}
    if judged:
        bad = [r for r in judged if r["verdict"] == VERDICT_REGRESSED]
        good = [r for r in judged if r["verdict"] == VERDICT_IMPROVED]
        moved = [r for r in judged if r["verdict"] == VERDICT_CHANGED]
        facts, parts = [], []
        shown = 0
        for verdict, group in (("regressed", bad), ("improved", good),
                               ("changed (no direction)", moved)):
            if not group:
                continue
            items = []
            for r in group:
                pct = "" if r.get("pct") is None else f"{r['pct']:+.1f}%; "
                t = f"{_label(r, names)} {r['change']} ({pct}{timing_statistics(r)})"
                facts.append(_fact(r, t))
                if shown < 2:  # the headline names two; the facts and the rows hold all
                    items.append(t)
                    shown += 1
            if items:
                parts.append(f"{verdict}: " + ", ".join(items))
        rest = len(facts) - shown
        if rest > 0:
            parts.append(f"and {rest} more timing change{'s' if rest > 1 else ''}")
        if parts:
            return {"state": "regressed" if bad else "changed", "facts": facts,
                    "text": "timing: " + "; ".join(parts)}
        n = judged[0]["baseline"]["n"], judged[0]["patched"]["n"]
        return {"state": VERDICT_NO_CHANGE, "facts": [],
                "text": f"timing: no significant change ({len(judged)} metrics, "
                        f"{n[0]} vs {n[1]} runs)"}
    reasons = Counter(str(r.get("reason") or "") for r in rows)
    reason = reasons.most_common(1)[0][0]
    return {"state": VERDICT_NOT_JUDGED, "text": f"timing: not judged ({reason})", "facts": []}


def _label(row: Mapping[str, Any], names: Mapping[str, str], multi: bool = True) -> str:
    if not multi:
        return str(row["label"])
    dev = str(row.get("device") or "")
    return f"{names.get(dev, dev)} {row['label']}"


def summarize(comparison: Mapping[str, Any], thresholds: Thresholds | None = None
              ) -> dict[str, Any]:
    """``{"headline": "...", "also": "...", "facts": [...], "timing": {...}, "lines": [...]}``."""
    th = thresholds
    if th is None:
        th = Thresholds().with_overrides(
            {k: v for k, v in ((comparison.get("check") or {}).get("thresholds") or {}).items()
             if k in Thresholds.__dataclass_fields__})
    names = _names(comparison)
    rows = [r for r in comparison.get("metrics") or [] if not r.get("member_of")]
    devices = {r["device"] for r in rows
               if not str(r["device"]).startswith(("fio ", "iostat "))}
    multi = len(devices) > 1
    rule_of = {tuple(path): name for name, (path, _, _) in MECHANISM_RULES.items()}
    improved, regressed, changed, also = [], [], [], []
    for r in rows:
        if r["kind"] != MECHANISM or r["verdict"] not in (VERDICT_IMPROVED, VERDICT_REGRESSED,
                                                         VERDICT_CHANGED):
            continue
        text = f"{_label(r, names, multi)} {r['change']}"
        rule = rule_of.get(tuple(r.get("path") or ()))
        watched = bool(rule and getattr(th, rule))
        if r["verdict"] == VERDICT_IMPROVED and r.get("headline"):
            improved.append(_fact(r, text))
        elif r["verdict"] == VERDICT_REGRESSED and watched:
            regressed.append(_fact(r, text))
        else:
            also.append(_fact(r, f"{r['verdict'].split(' ')[0]}: {text}"))
    for f in comparison.get("facts") or []:
        if f.get("verdict") != VERDICT_CHANGED:
            continue
        if f.get("rule"):
            changed.append({"text": f["text"], "key": f["key"], "verdict": f["verdict"],
                            "kind": MECHANISM, "dev": _first_member(comparison, f["device"]),
                            "section": f.get("section", ""), "chart": f.get("chart", "")})
    parts = []
    for word, facts in (("improved", improved), ("regressed", regressed),
                        ("changed", changed)):
        if facts:
            parts.append(f"{word}: " + ", ".join(f["text"] for f in facts))
    mech = "; ".join(parts) + " (mechanism)" if parts else "mechanism: no watched change"
    timing = timing_words([r for r in rows if r["kind"] == TIMING], names)
    headline = f"{mech}; {timing['text']}"
    also_text = ""
    if also:
        shown = also[:8]
        also_text = ("also changed (no rule watches these): "
                     + "; ".join(f["text"] for f in shown)
                     + (f"; and {len(also) - len(shown)} more" if len(also) > len(shown) else ""))
    lines = [headline] + ([also_text] if also_text else [])
    return {"headline": headline, "mechanism": mech, "also": also_text,
            "improved": improved, "regressed": regressed, "changed": changed,
            "also_facts": also, "timing": timing, "lines": lines}


def with_summary(comparison: dict[str, Any], model: Mapping[str, Any] | None = None
                 ) -> dict[str, Any]:
    """Add the summary in words to a :func:`workers.compare.compare` result, in place:
    ``words`` (with the model's predictions beside the observed changes when a model panel
    is given) and the check's ``summary`` and ``timing``. Returns the comparison."""
    words = summarize(comparison)
    if model is not None:
        words["predictions"] = prediction_check(comparison, model)
        words["lines"] = words["lines"] + [
            f"model mismatch: {p['text']}" for p in words["predictions"] if p["mismatch"]]
    comparison["words"] = words
    check = comparison.get("check")
    if isinstance(check, dict):
        check["summary"] = words["headline"]
        check["timing"] = words["timing"]["text"]
    return comparison


def _first_member(comparison: Mapping[str, Any], top: str) -> str:
    for g in comparison.get("groups") or []:
        if g.get("top") == top and g.get("members"):
            return str(g["members"][0])
    return top


def summary_lines(comparison: Mapping[str, Any]) -> list[str]:
    """The summary block of the plain-text report (its first lines after the title)."""
    words = comparison.get("words") or summarize(comparison)
    check = comparison.get("check") or {}
    out = ["Summary:"] + [f"  {x}" for x in words.get("lines") or []]
    if check.get("state"):
        out.append(f"  check: {check['state']}"
                   + (f" ({len(check.get('reasons') or [])} reasons below)"
                      if check.get("reasons") else ""))
    return out


def _dev_value(results: Mapping[str, Any] | None, dev: str, path: Sequence[str]) -> float | None:
    from workers.compare import _get, _with_derived

    if not isinstance(results, Mapping):
        return None
    d = (results.get("devices") or {}).get(dev)
    if not isinstance(d, Mapping):
        return None
    return _get(_with_derived(d), path)


def prediction_check(comparison: Mapping[str, Any], model: Mapping[str, Any] | None
                     ) -> list[dict[str, Any]]:
    """The model's predicted change beside the observed one, per device and headline metric.

    Predicted: the model's new-policy replay vs its old-policy replay of the baseline's bios;
    observed: patched vs baseline. A mismatch is a direction that differs (one says up, the
    other down or no change): where the patch does something the model did not expect.
    """
    if not model or model.get("state") != "ok":
        return []
    dmap = model.get("device_map") or {}
    out = []
    rows = {(r["device"], tuple(r["path"])): r for r in comparison.get("metrics") or []
            if r.get("kind") == MECHANISM}
    names = _names(comparison)
    for dev in sorted({d for d, _ in rows}):
        pdev = dmap.get(dev, dev)
        for path, label in PREDICTED:
            r = rows.get((dev, path))
            if r is None:
                continue
            old = _dev_value(model.get("predicted_old"), pdev, path)
            new = _dev_value(model.get("predicted_new"), pdev, path)
            if old is None or new is None:
                continue
            pred = _sign(new - old, old)
            b, p = r["baseline"].get("mean"), r["patched"].get("mean")
            if b is None or p is None:
                continue
            obs = _sign(p - b, b)
            out.append({"dev": dev, "label": label, "key": r["key"],
                        "predicted": change_text(old, new, r["unit"]),
                        "observed": r["change"], "predicted_sign": pred, "observed_sign": obs,
                        "mismatch": pred != obs,
                        "text": f"{names.get(dev, dev)} {label}: predicted "
                                f"{change_text(old, new, r['unit'])}, observed {r['change']}",
                        "section": r.get("section") or "model", "chart": r.get("chart") or ""})
    return out


def _sign(delta: float, ref: float) -> int:
    if abs(delta) <= 1e-9 * max(1.0, abs(ref)):
        return 0
    return 1 if delta > 0 else -1
