"""Plain-text report of a comparison, in the style of the seed threads, ready for a mail reply.

Laid out like seed 000's cover letter. A header says what was compared (title, comparison
URL, both kernels, workload, stack, Message-ID), then the comparison in words
(:func:`workers.summary.summary_lines`, kept apart from this layout); then one block per side, headed "Before this
patch" / "After this patch" when there is a patch and by the kernel's name otherwise, each with
1) an iostat -x-like table computed from the trace (one row per device plus the mean row of
member disks, ``sd*``) and 2) the seek histograms in the seed's layout; then the key deltas
with their verdicts (Welch's test and lkp's rule), the model's fidelity and the CI check
verdict with every reason.

Every line fits in :data:`WIDTH` columns (a mail reply quotes with "> "): tables too wide are
split into column groups, long prose lines are wrapped with a hanging indent.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workers.analyzers.seek import BAR_WIDTH, SeekHistogram
from workers.compare import num, scaled
from workers.summary import summary_lines

#: Widest line of the report (RFC 5322 recommends 78; 72 leaves room for "> " quoting).
WIDTH = 72

READ_COLUMNS: tuple[str, ...] = ("r/s", "rMB/s", "rrqm/s", "%rrqm", "r_await", "rareq-sz")
WRITE_COLUMNS: tuple[str, ...] = ("w/s", "wMB/s", "wrqm/s", "%wrqm", "w_await", "wareq-sz")
TAIL_COLUMNS: tuple[str, ...] = ("aqu-sz", "%util")


@dataclass(frozen=True)
class ReportHeader:
    """What the report's first lines say about the comparison.

    Attributes:
        title: the patch subject, or a title built from the kernels and the workload.
        url: the comparison page.
        baseline_kernel, patched_kernel: ``uname -r`` of each side.
        workload: the command that made the I/O.
        stack: the block stack (md raid5 of 8 disks ...).
        message_id: the patch mail's Message-ID.
        has_patch: the comparison is about a patch: the sides are "Before/After this patch";
            otherwise they are named by their kernels.
    """

    title: str = ""
    url: str = ""
    baseline_kernel: str = ""
    patched_kernel: str = ""
    workload: str = ""
    stack: str = ""
    message_id: str = ""
    has_patch: bool = False

    def side_headings(self) -> tuple[str, str]:
        """``("Before this patch:", "After this patch:")`` or the kernels' names."""
        if self.has_patch:
            return "Before this patch:", "After this patch:"
        b = f"Baseline, kernel {self.baseline_kernel}:" if self.baseline_kernel else "Baseline:"
        p = f"Patched, kernel {self.patched_kernel}:" if self.patched_kernel else "Patched:"
        return b, p


def title_from(baseline_kernel: str, patched_kernel: str, workload: str) -> str:
    """``"6.1.0-57-amd64 vs 7.2.13+deb14-amd64: dd if=... bs=2M"`` (empty parts left out)."""
    kernels = " vs ".join(k or "?" for k in (baseline_kernel, patched_kernel)) \
        if baseline_kernel or patched_kernel else "baseline vs patched"
    return f"{kernels}: {workload}" if workload else kernels


def wrap(line: str, width: int = WIDTH) -> list[str]:
    """One line as lines of at most ``width`` columns, continuation indented by two more
    than the line's own indent (a token longer than the width is broken)."""
    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip(" ")))
    out = textwrap.wrap(line.strip(), width=width, initial_indent=indent,
                        subsequent_indent=indent + "  ", break_on_hyphens=False,
                        break_long_words=True)
    return out or [line[:width]]


def _fmt(v: Any) -> str:
    """A number with two decimals; "-" for one that could not be computed (None)."""
    if v is None:
        return "-"
    return f"{float(v):.2f}" if isinstance(v, (int, float)) else str(v)


def _columns(table: Sequence[Sequence[str]], width: int = WIDTH) -> str:
    """iostat's layout: the name column left-aligned, the numbers right-aligned.

    A table wider than ``width`` is printed as several tables of the same rows, each with the
    name column and as many of the other columns as fit.
    """
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    groups: list[list[int]] = [[]]
    used = widths[0]
    for i in range(1, len(widths)):
        if groups[-1] and used + 1 + widths[i] > width:
            groups.append([])
            used = widths[0]
        groups[-1].append(i)
        used += 1 + widths[i]
    blocks = []
    for cols in groups:
        blocks.append("\n".join(
            " ".join([row[0].ljust(widths[0])] + [row[i].rjust(widths[i]) for i in cols]).rstrip()
            for row in table))
    return "\n\n".join(blocks)


def iostat_table(iostat: Mapping[str, Any], names: Mapping[str, str], *,
                 drop_empty: bool = False) -> str:
    """The iostat -x-like table: one row per device, then the mean rows of member groups.

    A column the analyzers could not compute prints "-" with the reason under the table; with
    ``drop_empty`` a device whose every column is unknown gets no row, only its reason.
    """
    rows: Mapping[str, Mapping[str, float]] = iostat.get("rows", {})
    groups: Sequence[Mapping[str, Any]] = iostat.get("groups", [])
    all_rows = list(rows.values()) + [g["row"] for g in groups]
    has_w = any((r.get("w/s") or r.get("wareq-sz") or 0) > 0 for r in all_rows)
    has_r = any((r.get("r/s") or r.get("rareq-sz") or 0) > 0 for r in all_rows) or not has_w
    cols = (READ_COLUMNS if has_r else ()) + (WRITE_COLUMNS if has_w else ()) + TAIL_COLUMNS
    table = [["Device", *cols]]
    notes = []
    for dev, r in rows.items():
        empty = all(r.get(c) is None for c in cols)
        if not (drop_empty and empty):
            table.append([names.get(dev, dev), *(_fmt(r.get(c, 0.0)) for c in cols)])
        if r.get("note") and any(r.get(c) is None for c in cols):
            what = "no row" if drop_empty and empty else '"-"'
            notes.append(f"  ({what} for {names.get(dev, dev)}: {r['note']})")
    for g in groups:
        table.append([g["name"], *(_fmt(g["row"].get(c, 0.0)) for c in cols)])
    text = _columns(table) if len(table) > 1 else ""
    lines = [ln for n in notes for ln in wrap(n)]
    return "\n".join(([text] if text else []) + lines)


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


def seek_text(seek: Mapping[str, Any], width: int = WIDTH) -> str:
    """Seed 000's seek block (``Read|Write seek``, ``cnt``, the bucket lines) in ``width``.

    The columns are as wide as this histogram's numbers need instead of seed 000's fixed 10,
    so the seed's 40-character bar fits; a histogram with very large numbers gets a shorter bar.
    """
    h = SeekHistogram.from_json(dict(seek))
    rows = h.rows()
    w_lo = max([len(">=(KB)")] + [len(str(r[0])) for r in rows])
    w_hi = max([len("<(KB)")] + [len(str(r[1])) for r in rows])
    w_c = max([len("count")] + [len(str(r[2])) for r in rows])
    prefix = w_lo + 4 + w_hi + 3 + w_c + 1 + 6 + 1
    bar_w = max(10, min(BAR_WIDTH, width - prefix - 2))
    top = max(h.counts) if h.counts else 0
    lines = ["Read|Write seek", f"cnt {h.cnt}, zero cnt {h.zero_cnt}",
             f"{'>=(KB)':>{w_lo}} .. {'<(KB)':<{w_hi}} : {'count':<{w_c}} {'ratio':>6} "
             f"|{'distribution':<{bar_w}}|"]
    for lo, hi, c, ratio, _ in rows:
        bar = "#" * math.ceil(bar_w * c / top) if top else ""
        lines.append(f"{lo:>{w_lo}} .. {hi:<{w_hi}} : {c:<{w_c}} {ratio:>5.1f}% |{bar:<{bar_w}}|")
    return "\n".join(lines)


def first_lines(dev: str, lines: Sequence[Mapping[str, Any]], time_known: bool) -> list[str]:
    """The first issue-order requests of a device, as the source gave them.

    With timestamps: ``dev time pid action rwbs sector + n [comm]`` (blkparse's fields without
    the CPU and sequence columns, which the results do not keep). Without (ftrace lines with
    no ``TASK-PID [CPU] TIME:`` prefix): no time and no pid are made up, only file order.
    """
    out = []
    for ln in lines:
        comm = f" [{ln['comm']}]" if ln.get("comm") else ""
        what = f"{ln['action']} {ln['rwbs']} {ln['sector']} + {ln['nr_sectors']}{comm}"
        if time_known:
            out.append(f"  {dev} {ln['t_ns'] / 1e9:.9f} {ln['pid']} {what}")
        else:
            out.append(f"  {dev} {what}")
    return out


def _side_text(side: Mapping[str, Any], heading: str, devices: Sequence[str] | None) -> list[str]:
    devs: Mapping[str, Any] = side.get("devices", {})
    names = {k: v.get("name", k) for k, v in devs.items()}
    out = [heading, "1) iostat results (computed from the trace):",
           iostat_table(side.get("iostat", {}), names, drop_empty=True)]
    n = 2
    measured = side.get("measured_iostat") or []
    if measured:
        out.append(f"{n}) iostat -x as measured (from the bundle, last sample):")
        out.append(measured_table(measured))
        n += 1
    for top, r in side.get("remaps", {}).items():
        out.append(f"{n}) pieces of {names.get(top, top)} across members: {r['remaps']} "
                   f"remaps, {r['out_of_order']} out of order "
                   f"({100 * r['out_of_order_share']:.1f}%)")
        n += 1
    lines_dev = next((k for k, d in devs.items() if d.get("stage") == "D" and d.get("first")
                      and (not devices or k in devices or d.get("name") in devices)), None)
    if lines_dev:
        d = devs[lines_dev]
        time_known = side.get("time_known", True) is not False
        fields = ("device time pid action rwbs sector + sectors [comm]" if time_known else
                  "device action rwbs sector + sectors [comm]; the trace has no time or pid")
        out.append(f"{n}) first issue-order lines of {names.get(lines_dev, lines_dev)}, "
                   f"stage {d.get('stage')} ({fields}):")
        out += first_lines(lines_dev, d["first"], time_known)
        n += 1
    # devices with the same histogram (the members of a striped array, typically) share a block
    blocks: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for dev, d in devs.items():
        if devices and dev not in devices and d.get("name") not in devices:
            continue
        seek = d.get("seek")
        if not seek or not seek.get("cnt"):
            continue
        blocks.setdefault(f"{d.get('stage_note')}\n{seek_text(seek)}", []).append((dev, d))
    for key, members in blocks.items():
        note, text = key.split("\n", 1)
        who = _who([(dev, d.get("name", dev)) for dev, d in members])
        out.append(f"{n}) io seek for {who}, {note}:")
        out.append(text)
        n += 1
    return out


def _who(members: Sequence[tuple[str, str]]) -> str:
    """``"md0 (9,0)"``, or for several devices ``"vda..vdh (8 identical)"`` style lists."""
    labels = [f"{name} ({dev})" if name != dev else dev for dev, name in members]
    if len(labels) == 1:
        return labels[0]
    names = [name for _, name in members]
    if len(labels) > 3:
        return f"{names[0]} .. {names[-1]} ({len(labels)} devices, identical)"
    return f"{', '.join(labels)} (identical)"


#: How a metric's unit reads in a mail: the label says it (IOPS, r/s) or a symbol follows.
def human(value: float, unit: str) -> str:
    """``0.5, "share"`` -> ``"50%"``; ``14687900, "ns"`` -> ``"14688 us"``; ``1605, "1/s"``
    -> ``"1605"`` (the metric's label, IOPS or r/s, already says per second)."""
    v, u = scaled(value, unit)
    if u == "%":
        return f"{num(v, 3)}%"
    if u in ("", "1/s", "share"):
        return num(v)
    return f"{num(v)} {u}"


def _metric_line(m: Mapping[str, Any], names: Mapping[str, str]) -> str:
    b, p = m["baseline"], m["patched"]
    unit = m.get("unit") or ""
    if b.get("mean") is None or p.get("mean") is None:
        vals = str(m.get("change") or "")  # e.g. "213 KB -> no backward dispatch"
    elif b["n"] > 1 or p["n"] > 1:
        vals = (f"{human(b['mean'], unit)} ±{human(b['stddev'], unit)} -> "
                f"{human(p['mean'], unit)} ±{human(p['stddev'], unit)}")
    else:
        vals = f"{human(b['mean'], unit)} -> {human(p['mean'], unit)}"
    pct = "" if m.get("pct") is None or unit == "share" else f" ({m['pct']:+.1f}%)"
    why = []
    if m.get("kind") == "mechanism":
        why.append("mechanism")
    if m.get("reason"):
        why.append(str(m["reason"]))
    needs = m.get("needs")
    if needs:
        why.append(f"{max(needs['more_baseline'], needs['more_patched'])} more runs per side")
    if m.get("p_value") is not None:
        why.append(f"Welch p={m['p_value']:.3g}")
    if m.get("ci_pct"):
        why.append(f"95% CI {m['ci_pct'][0]:+.1f}%..{m['ci_pct'][1]:+.1f}%")
    lkp = m.get("lkp", {})
    if m.get("kind") != "mechanism" and lkp.get("applicable"):
        why.append("lkp: ranges separated" if lkp.get("changed") else "lkp: ranges overlap")
    extra = f" ({'; '.join(why)})" if why else ""
    dev = str(m.get("device") or "")
    label = m.get("label") or m["key"]
    name = f"{names.get(dev, dev)} {label}" if dev else m["key"]
    return f"  {name}: {vals}{pct} {m['verdict']}{extra}"


def key_deltas(comparison: Mapping[str, Any], limit: int = 25,
               names: Mapping[str, str] | None = None) -> list[str]:
    """Most telling metric lines: mechanism changes and significant timing first, then by size
    of the change. Per-member rows are left out (their roll-up stands for them)."""
    quiet = ("no significant change", "unchanged", "not judged", "needs more runs")
    metrics = [m for m in comparison.get("metrics", []) if not m.get("member_of")
               and (m.get("pct") is not None or m.get("verdict") not in quiet)
               and (abs(m.get("pct") or 0.0) >= 0.05 or m["verdict"] not in quiet)]
    rank = {"regressed": 0, "improved": 0, "changed (no direction)": 1}
    metrics.sort(key=lambda m: (m.get("kind") != "mechanism", rank.get(m["verdict"], 2),
                                -abs(m.get("pct") or 0.0)))
    return [_metric_line(m, names or {}) for m in metrics[:limit]]


_DEV_RE = re.compile(r"^(\d+,\d+) ")


def check_reasons(reasons: Sequence[str], names: Mapping[str, str]) -> list[str]:
    """Every check reason once: devices named, the same reason of several devices on one line,
    and a read-only (or write-only) rMB/s reason dropped when its MB/s twin says the same."""
    grouped: dict[str, list[str]] = {}
    for r in reasons:
        m = _DEV_RE.match(r)
        dev, rest = (m.group(1), r[m.end():]) if m else ("", r)
        grouped.setdefault(rest, []).append(dev)
    out = []
    for rest, devs in grouped.items():
        twin = re.sub(r"^[rw]MB/s:", "MB/s:", rest)
        if twin != rest and grouped.get(twin) == devs:
            continue
        who = ", ".join(names.get(d, d) for d in devs if d)
        out.append(f"  - {who} {rest}" if who else f"  - {rest}")
    return out


def fidelity_lines(fid: Mapping[str, Any], names: Mapping[str, str]) -> list[str]:
    """One line per distinct fidelity, the devices that share it named together."""
    by_text: dict[str, list[str]] = {}
    for dev, f in fid.items():
        if not isinstance(f, Mapping):
            continue
        parts = []
        for k, label in (("matched_in_order", "D in order"), ("seek_l1", "seek L1"),
                         ("size_l1", "size L1"), ("throughput_rel_err", "MB/s error")):
            v = f.get(k)
            if v is not None:
                parts.append(f"{label} {100 * v:.1f}%" if k in ("matched_in_order",
                                                                  "throughput_rel_err")
                             else f"{label} {v:.3f}")
        by_text.setdefault(", ".join(parts) if parts else "n/a", []).append(dev)
    out = []
    for text, devs in by_text.items():
        who = _who([(d, names.get(d, d)) for d in devs])
        out.append(f"  {who}: {text}")
    return out


def header_lines(header: ReportHeader, runs: Mapping[str, Any], runs_note: str | None
                 ) -> list[str]:
    """Title, URL, kernels, workload, stack, Message-ID, runs."""
    out = [header.title or title_from(header.baseline_kernel, header.patched_kernel,
                                      header.workload)]
    if header.url:
        out.append(header.url)
    out.append("")
    if header.baseline_kernel or header.patched_kernel:
        out.append(f"Kernels:    baseline {header.baseline_kernel or '?'}, "
                   f"patched {header.patched_kernel or '?'}")
    if header.workload:
        out.append(f"Workload:   {header.workload}")
    if header.stack:
        out.append(f"Stack:      {header.stack}")
    if header.message_id:
        out.append(f"Message-ID: <{header.message_id.strip('<>')}>")
    nb, np_ = runs.get("baseline", 0), runs.get("patched", 0)
    out.append(f"Runs:       {nb} baseline, {np_} patched"
               + (f" ({runs_note})" if runs_note else ""))
    return out


def environment_lines(comparison: Mapping[str, Any]) -> list[str]:
    """The environment consistency gate's warnings, first in the report (nothing when the two
    sides differ only in what the patch is about)."""
    env = comparison.get("environment") or {}
    if not env.get("warn"):
        return []
    out = ["WARNING: the environment differs beyond the patch:"]
    for item in env.get("unexpected") or []:
        out += textwrap.wrap(str(item), WIDTH, initial_indent="  - ",
                             subsequent_indent="    ")
    return out + [""]


def render_report(comparison: Mapping[str, Any], *, title: str | None = None,
                  header: ReportHeader | None = None,
                  model: Mapping[str, Any] | None = None,
                  devices: Sequence[str] | None = None, limit: int = 25) -> str:
    """The plain-text report of a :func:`workers.compare.compare` result.

    Args:
        comparison: the comparison dict.
        title: the patch's subject, as the first line (without ``header``: the sides are then
            "Before/After this patch"); ``header.title`` when a header is given.
        header: what was compared (kernels, workload, stack, URL, Message-ID).
        model: the model panel (:func:`workers.whatif.model_panel`): its fidelity against
            both sides is printed.
        devices: restrict the seek histograms to these devices (``"8,0"`` or names).
        limit: number of key delta lines.

    Every line is at most :data:`WIDTH` columns.
    """
    # a bare title is a patch's subject (the seed threads' "Before/After this patch")
    header = header or ReportHeader(title=title or "", has_patch=bool(title))
    if title and not header.title:
        header = ReportHeader(**{**header.__dict__, "title": title})
    lines = header_lines(header, comparison.get("runs", {}), comparison.get("runs_note"))
    lines.append("")
    lines += environment_lines(comparison)
    lines += summary_lines(comparison) + [""]
    sides = comparison.get("sides", {})
    names = {k: v.get("name", k) for s in sides.values()
             for k, v in (s.get("devices") or {}).items()}
    before, after = header.side_headings()
    lines += _side_text(sides.get("baseline", {}), before, devices)
    lines.append("")
    lines += _side_text(sides.get("patched", {}), after, devices)
    lines.append("")
    lines.append("Key changes (patched vs baseline):")
    deltas = key_deltas(comparison, limit, names)
    lines += deltas or ["  (no metric present on both sides)"]
    lines += _model_lines(comparison, model, names)
    check = comparison.get("check")
    if check:
        lines.append("")
        lines.append(f"Check: {str(check.get('state') or check.get('verdict')).upper()}")
        lines += check_reasons(list(check.get("reasons", [])), names)
        lines += [f"  note: {n}" for n in check.get("notes") or []]
    out = [w for ln in "\n".join(lines).split("\n") for w in wrap(ln.rstrip())]
    return "\n".join(out).rstrip() + "\n"


def _model_lines(comparison: Mapping[str, Any], model: Mapping[str, Any] | None,
                 names: Mapping[str, str]) -> list[str]:
    """The model's fidelity: old policy vs the baseline, new policy vs the patched side."""
    out: list[str] = []
    fid_old = (model or {}).get("fidelity") or comparison.get("fidelity")
    fid_new = (model or {}).get("fidelity_new")
    if model and model.get("state") == "ok":
        out += ["", "Model (the baseline's bios replayed):"]
        out.append(f"  old policy: {model.get('policy_old_label') or model.get('policy_old')}")
        out.append(f"  new policy: {model.get('policy_new_label') or model.get('policy_new')}")
        for d in model.get("policy_diff") or []:
            mark = "" if d.get("exercised", True) else " (not exercised by this input)"
            out.append(f"    {d['field']}: {d['old']} -> {d['new']}{mark}")
        for key in ("window", "patched_window"):  # a huge run: its first rows only
            if isinstance(model.get(key), Mapping) and model[key].get("note"):
                out.append(f"  {model[key]['note']}")
    if fid_old:
        out += ["", "Model fidelity, old policy vs observed baseline:"]
        out += fidelity_lines(fid_old, names)
    if fid_new:
        out += ["", "Model fidelity, new policy vs observed patched side:"]
        out += fidelity_lines(fid_new, names)
    return out
