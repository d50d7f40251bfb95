"""Environment fingerprint of a run and the consistency gate of a comparison.

A review of a patch compares two kernels on *the same* machine, stack, limits and workload. The
fingerprint records per side what the bundle says about its environment: the kernel, the stack
(manifest ``[stack]`` or the form's text), the workload command, and per device the queue limits
of the sysfs dump (scheduler, nr_requests, rotational, write cache, max_sectors_kb, ...), plus
the devices the trace shows. :func:`consistency` diffs two fingerprints and says which
differences the patch explains: the kernels themselves, and the queue limits that a policy under
test (or a policy the two kernels' presets set differently) changes, such as max_sectors_kb under
``max_sectors_cap_kb``. Any other difference in a gated item (workload, stack, scheduler,
nr_requests, rotational, write cache, the split limits, the traced devices) is *unexpected*: a
baseline on mq-deadline against a patched run on none is not a review of the patch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Queue limits whose difference between the sides is gated (others are only shown).
GATED_LIMITS: tuple[str, ...] = (
    "scheduler", "nr_requests", "rotational", "write_cache", "max_sectors_kb", "max_segments",
    "max_segment_size", "chunk_sectors", "logical_block_size", "physical_block_size",
    "nomerges", "queue_depth",
)
#: Queue limits a policy field changes (kernel-model.md section 7, docs/model.md).
POLICY_LIMITS: dict[str, tuple[str, ...]] = {
    "max_sectors_cap_kb": ("max_sectors_kb", "max_hw_sectors_kb"),
    "md_io_opt_align": ("chunk_sectors", "max_hw_sectors_kb", "optimal_io_size",
                        "max_sectors_kb"),
    "raid10_chunk_limit": ("chunk_sectors",),
}


def fingerprint(manifest: Mapping[str, Any] | None, *, kernel: str = "", stack: str = "",
                limits: str = "", workload: str = "",
                results: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What one run says about its environment (manifest first, the form's fields otherwise).

    Args:
        manifest: the bundle's manifest as stored (``workers.traces.manifest.Manifest`` as
            JSON: ``kernel``, ``workload``, ``stack``, ``limits``, ``devices``).
        kernel, stack, limits, workload: what the uploader typed.
        results: the run's analyze() results (device names, devices traced).
    """
    m = manifest or {}
    devs = (results or {}).get("devices") or {}
    names = {str(k): str(v.get("name") or k) for k, v in devs.items()}
    devices: dict[str, dict[str, Any]] = {}
    for dev, lim in (m.get("limits") or {}).items():
        if isinstance(lim, Mapping):
            devices[str(dev)] = {str(k): lim[k] for k in sorted(lim)}
    st = m.get("stack") or {}
    return {
        "kernel": str(m.get("kernel") or kernel or ""),
        "workload": str((m.get("workload") or {}).get("command") or workload or "").strip(),
        "stack": {str(k): st[k] for k in sorted(st)} if st else ({"text": stack.strip()}
                                                                 if stack.strip() else {}),
        "limits_text": limits.strip(),
        "devices": devices,
        "names": names,
        "traced": sorted(names),
    }


def _fmt(v: Any) -> str:
    return "–" if v is None else str(v)


def consistency(baseline: Mapping[str, Any], patched: Mapping[str, Any], *,
                policy_fields: Iterable[str] = ()) -> dict[str, Any]:
    """The two sides' environment diff and whether it is more than the patch.

    Args:
        baseline, patched: :func:`fingerprint` of each side (first run).
        policy_fields: policy fields under test and those the two kernels' presets set
            differently: the queue limits they change are expected to differ.

    Returns:
        ``{"diffs": [{"item", "baseline", "patched", "gated", "expected", "why"}],
        "warn": bool, "unexpected": ["scheduler of 8,0: mq-deadline -> none", ...]}``.
    """
    fields = set(policy_fields)
    explained = {lim for f in fields for lim in POLICY_LIMITS.get(f, ())}
    names = {**(baseline.get("names") or {}), **(patched.get("names") or {})}
    diffs: list[dict[str, Any]] = []

    def add(item: str, b: Any, p: Any, *, gated: bool, expected: bool, why: str = "") -> None:
        diffs.append({"item": item, "baseline": _fmt(b), "patched": _fmt(p), "gated": gated,
                      "expected": expected, "why": why})

    if baseline.get("kernel") != patched.get("kernel"):
        add("kernel", baseline.get("kernel"), patched.get("kernel"), gated=False, expected=True,
            why="the kernels under comparison")
    for key in ("workload", "limits_text"):
        b, p = baseline.get(key) or "", patched.get(key) or ""
        if b and p and b != p:
            add(key.replace("_text", " (as typed)"), b, p, gated=True, expected=False)
    bs, ps = baseline.get("stack") or {}, patched.get("stack") or {}
    if bs and ps and bs != ps:
        for k in sorted(set(bs) | set(ps)):
            if bs.get(k) != ps.get(k):
                add(f"stack {k}", bs.get(k), ps.get(k), gated=True, expected=False)
    bt, pt = baseline.get("traced") or [], patched.get("traced") or []
    if bt and pt and bt != pt:
        add("traced devices", ", ".join(bt), ", ".join(pt), gated=True, expected=False)
    bd, pd = baseline.get("devices") or {}, patched.get("devices") or {}
    for dev in sorted(set(bd) & set(pd)):
        a, b = bd[dev], pd[dev]
        label = names.get(dev, dev)
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                if k in GATED_LIMITS:
                    add(f"{k} of {label}", a.get(k), b.get(k), gated=False, expected=False,
                        why="not recorded on one side")
                continue
            if a[k] == b[k]:
                continue
            exp = k in explained
            add(f"{k} of {label}", a[k], b[k], gated=k in GATED_LIMITS, expected=exp,
                why=("changed by " + ", ".join(sorted(f for f in fields
                                                     if k in POLICY_LIMITS.get(f, ()))))
                if exp else "")
    unexpected = [f"{d['item']}: {d['baseline']} -> {d['patched']}" for d in diffs
                  if d["gated"] and not d["expected"]]
    return {"diffs": diffs, "warn": bool(unexpected), "unexpected": unexpected}
