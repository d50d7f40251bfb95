"""Plain-text report of a comparison, in the style of the seed threads, ready for a mail reply.

Laid out like seed 000's cover letter: "Before this patch" then "After this patch", each with
1) an iostat -x-like table computed from the trace (one row per device plus the mean row of
member disks, ``sd*``) and 2) the seek histograms in the seed's layout; then the key deltas
with their verdicts (Welch's test and lkp's rule) and the CI check verdict with its reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workers.analyzers.seek import SeekHistogram
from workers.compare import num, scaled

READ_COLUMNS: tuple[str, ...] = ("r/s", "rMB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz")
WRITE_COLUMNS: tuple[str, ...] = ("w/s", "wMB/s", "wrqm/s", "%wrqm", "w_await", "wareq-sz")
TAIL_COLUMNS: tuple[str, ...] = ("aqu-sz", "%util")


def _fmt(v: Any) -> str:
    """A number with two decimals; "-" for one that could not be computed (None)."""
    if v is None:
        return "-"
    return f"{float(v):.2f}" if isinstance(v, (int, float)) else str(v)


def _columns(table: Sequence[Sequence[str]]) -> str:
    """iostat's layout: the name column left-aligned, the numbers right-aligned."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join(" ".join([row[0].ljust(widths[0])]
                               + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]).rstrip()
                      for row in table)


def iostat_table(iostat: Mapping[str, Any], names: Mapping[str, str]) -> str:
    """The iostat -x-like table: one row per device, then the mean rows of member groups."""
    rows: Mapping[str, Mapping[str, float]] = iostat.get("rows", {})
    groups: Sequence[Mapping[str, Any]] = iostat.get("groups", [])
    all_rows = list(rows.values()) + [g["row"] for g in groups]
    has_w = any((r.get("w/s") or r.get("wareq-sz") or 0) > 0 for r in all_rows)
    has_r = any((r.get("r/s") or r.get("rareq-sz") or 0) > 0 for r in all_rows) or not has_w
    cols = (READ_COLUMNS if has_r else ()) + (WRITE_COLUMNS if has_w else ()) + TAIL_COLUMNS
    table = [["Device", *cols]]
    for dev, r in rows.items():
        table.append([names.get(dev, dev), *(_fmt(r.get(c, 0.0)) for c in cols)])
    for g in groups:
        table.append([g["name"], *(_fmt(g["row"].get(c, 0.0)) for c in cols)])
    notes = [f"  (\"-\" for {names.get(dev, dev)}: {r['note']})" for dev, r in rows.items()
             if r.get("note") and any(r.get(c) is None for c in cols)]
    return _columns(table) + ("\n" + "\n".join(notes) if notes else "")


MEASURED_COLUMNS: tuple[str, ...] = (
    "r/s", "rkB/s", "rMB/s", "rrqm/s", "r_await", "rareq-sz",
    "w/s", "wkB/s", "wMB/s", "wrqm/s", "w_await", "wareq-sz", "aqu-sz", "util")


def measured_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The bundle's own iostat rows, with the columns they carry (seed 000's layout)."""
    cols = [c for c in MEASURED_COLUMNS if any(c in r for r in rows)]
    table = [["Device", *["%util" if c == "util" else c for c in cols]]]
    for r in rows:
        table.append([str(r.get("device", "?")), *(_fmt(r.get(c, "")) for c in cols)])
    return _columns(table)


def _side_text(side: Mapping[str, Any], heading: str, devices: Sequence[str] | None) -> list[str]:
    devs: Mapping[str, Any] = side.get("devices", {})
    names = {k: v.get("name", k) for k, v in devs.items()}
    out = [heading, "1) iostat results (computed from the trace):",
           iostat_table(side.get("iostat", {}), names)]
    n = 2
    measured = side.get("measured_iostat") or []
    if measured:
        out.append(f"{n}) iostat -x as measured (from the bundle, last sample):")
        out.append(measured_table(measured))
        n += 1
    for top, r in side.get("remaps", {}).items():
        out.append(f"{n}) pieces of {top} across members: {r['remaps']} remaps, "
                   f"{r['out_of_order']} out of order ({100 * r['out_of_order_share']:.1f}%)")
        n += 1
    lines_dev = next((k for k, d in devs.items() if d.get("stage") == "D" and d.get("first")
                      and (not devices or k in devices or d.get("name") in devices)), None)
    if lines_dev:
        d = devs[lines_dev]
        out.append(f"{n}) first issue-order lines of {names.get(lines_dev, lines_dev)}, "
                   f"stage {d.get('stage')}:")
        for ln in d["first"]:
            out.append(f"{lines_dev} {ln['t_ns'] / 1e9:.9f} {ln['pid']} {ln['action']} "
                       f"{ln['rwbs']} {ln['sector']} + {ln['nr_sectors']} [{ln['comm']}]")
        n += 1
    # devices with the same histogram (the members of a striped array, typically) share a block
    blocks: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for dev, d in devs.items():
        if devices and dev not in devices and d.get("name") not in devices:
            continue
        seek = d.get("seek")
        if not seek or not seek.get("cnt"):
            continue
        text = SeekHistogram.from_json(seek).text().rstrip("\n")
        blocks.setdefault(f"{d.get('stage_note')}\n{text}", []).append((dev, d))
    for key, members in blocks.items():
        labels = []
        for dev, d in members:
            name = d.get("name", dev)
            labels.append(f"{dev} ({name})" if name != dev else dev)
        note, text = key.split("\n", 1)
        who = labels[0] if len(labels) == 1 else f"{', '.join(labels)} (identical)"
        out.append(f"{n}) io seek for {who}, {note}:")
        out.append(text)
        n += 1
    return out


def _metric_line(m: Mapping[str, Any]) -> str:
    b, p = m["baseline"], m["patched"]
    unit = m.get("unit") or ""
    bm, u = scaled(b["mean"], unit)
    pm, _ = scaled(p["mean"], unit)
    bs, _ = scaled(b["stddev"], unit)
    ps, _ = scaled(p["stddev"], unit)
    pct = "n/a" if m.get("pct") is None else f"{m['pct']:+.1f}%"
    u = "" if not u or u in m["label"] else f" {u}"
    if b["n"] > 1 or p["n"] > 1:
        vals = f"{num(bm)} ±{num(bs, 2)} -> {num(pm)} ±{num(ps, 2)}{u}"
    else:
        vals = f"{num(bm)} -> {num(pm)}{u}"
    why = []
    if m.get("p_value") is not None:
        why.append(f"Welch p={m['p_value']:.3g}")
    lkp = m.get("lkp", {})
    if lkp.get("applicable"):
        why.append("lkp: ranges separated" if lkp.get("changed") else "lkp: ranges overlap")
    if m.get("needs_more_runs") and m["verdict"] != "single run":
        why.append("needs more runs")
    extra = f" ({'; '.join(why)})" if why else ""
    return f"  {m['key']}: {vals} ({pct}) {m['verdict']}{extra}"


def key_deltas(comparison: Mapping[str, Any], limit: int = 25) -> list[str]:
    """Most telling metric lines: significant first, then by size of the change."""
    metrics = [m for m in comparison.get("metrics", []) if m.get("pct") is not None
               and (m["baseline"]["mean"] or m["patched"]["mean"])
               and (abs(m["pct"]) >= 0.05 or m["verdict"] not in ("no significant change",
                                                                  "single run"))]
    rank = {"regressed": 0, "improved": 0, "changed": 1}
    metrics.sort(key=lambda m: (rank.get(m["verdict"], 2), -abs(m["pct"])))
    return [_metric_line(m) for m in metrics[:limit]]


def render_report(comparison: Mapping[str, Any], *, title: str | None = None,
                  devices: Sequence[str] | None = None, limit: int = 25,
                  max_reasons: int = 12) -> str:
    """The plain-text report of a :func:`workers.compare.compare` result.

    Args:
        comparison: the comparison dict.
        title: first line (e.g. the patch subject).
        devices: restrict the seek histograms to these devices (``"8,0"`` or names).
        limit: number of key delta lines.
        max_reasons: check reasons printed (the rest counted).
    """
    runs = comparison.get("runs", {})
    nb, np_ = runs.get("baseline", 0), runs.get("patched", 0)
    lines = [title or "blkreview: baseline vs patched",
             f"runs: {nb} baseline, {np_} patched"
             + (f" ({comparison['runs_note']})" if comparison.get("runs_note") else ""), ""]
    sides = comparison.get("sides", {})
    lines += _side_text(sides.get("baseline", {}), "Before this patch:", devices)
    lines.append("")
    lines += _side_text(sides.get("patched", {}), "After this patch:", devices)
    lines.append("")
    lines.append("Key changes (patched vs baseline):")
    deltas = key_deltas(comparison, limit)
    lines += deltas or ["  (no metric present on both sides)"]
    fid = comparison.get("fidelity")
    if fid:
        lines.append("")
        lines.append("Model fidelity (predicted vs observed baseline):")
        for dev, f in fid.items():
            parts = []
            for k, label in (("matched_in_order", "D in order"), ("seek_l1", "seek L1"),
                             ("size_l1", "size L1"), ("throughput_rel_err", "MB/s error")):
                v = f.get(k)
                if v is not None:
                    parts.append(f"{label} {100 * v:.1f}%" if k in ("matched_in_order",
                                                                      "throughput_rel_err")
                                 else f"{label} {v:.3f}")
            lines.append(f"  {dev}: {', '.join(parts) if parts else 'n/a'}")
    check = comparison.get("check")
    if check:
        lines.append("")
        lines.append(f"Check: {check['verdict'].upper()}")
        reasons = list(check.get("reasons", []))
        lines += [f"  - {r}" for r in reasons[:max_reasons]]
        if len(reasons) > max_reasons:
            lines.append(f"  ... and {len(reasons) - max_reasons} more")
    return "\n".join(lines).rstrip() + "\n"
