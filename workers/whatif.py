"""What-if: replay a baseline trace's submitted bios under the old and the new policy.

The comparison page's model panel (architecture.md, "The one idea"): the baseline's Q events of the
top device are replayed through :func:`workers.model.replay` with the baseline kernel's preset
(the old policy) and with the patched kernel's preset or the policy under test (the new one); both
predictions go through the same analyzers as the observed traces, and the model's *fidelity* is
predicted-old vs observed-baseline. Pure engine code: the Celery task only loads the tables and
stores what this returns.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from workers.analyzers import analyze
from workers.analyzers.seek import seek_histogram
from workers.compare import fidelity, matched_in_order
from workers.events import ACT_ISSUE, ACT_QUEUE, EventTable, dev_str, parse_dev
from workers.model import (
    bios_from_table,
    kernel_version_warnings,
    preset_for_kernel,
    replay,
    stack_from_manifest,
    stack_from_spec,
)


def jsonable(value: Any) -> Any:
    """Ingest reports (dataclasses, paths, tuples) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if hasattr(value, "to_json") and callable(value.to_json):
        value = value.to_json()
    return json.loads(json.dumps(value, default=str))




def seek_by_stage(tables: dict[str, list[tuple[EventTable, dict[str, Any]]]]) -> dict[str, Any]:
    """``{dev: {stage: {side: [seek json per run]}}}`` for every stage with events.

    ``tables[side]`` is a list of ``(EventTable, results)`` per run; a stage is computed only
    where the results' action counts show events of it.
    """
    out: dict[str, Any] = {}
    for side, runs in tables.items():
        for table, results in runs:
            for dev, d in (results.get("devices") or {}).items():
                actions = d.get("actions") or {}
                for stage in ("Q", "G", "I", "D", "C"):
                    if not actions.get(stage):
                        continue
                    j = seek_histogram(table, dev, stage).to_json()
                    out.setdefault(dev, {}).setdefault(stage, {}).setdefault(side, []).append(
                        jsonable(j))
    return out


def policy_parts(policy: str) -> tuple[str, list[str]]:
    """``"split_remainder=head,tag_preempt"`` -> (``"split_remainder=head"``, ``["tag_preempt"]``)."""
    sets: list[str] = []
    knobs: list[str] = []
    for item in (p.strip() for p in (policy or "").split(",")):
        if not item:
            continue
        (sets if "=" in item else knobs).append(item)
    return ",".join(sets), knobs


def slim(results: dict[str, Any]) -> dict[str, Any]:
    """Predicted results without the per-event lists the model panel never draws."""
    out = dict(results)
    devs = {}
    for dev, d in (results.get("devices") or {}).items():
        d = dict(d)
        d.pop("lba", None)
        if isinstance(d.get("ordering"), dict):
            d["ordering"] = {k: v for k, v in d["ordering"].items() if k != "first"}
        devs[dev] = d
    out["devices"] = devs
    return out


def model_panel(*, policy: str, baseline_kernel: str, patched_kernel: str,
                manifest: dict[str, Any] | None, stack_text: str, workload: str,
                table: EventTable, observed: dict[str, Any]) -> dict[str, Any] | None:
    """Replay the baseline's submitted bios under the old and the new policy.

    Returns None when there is nothing to model (no policy under test and no kernel on either
    side), else ``{"state": "ok", ...predictions, fidelity}`` or ``{"state": "error",
    "error": "..."}`` for the cases a maintainer must fix (no baseline kernel, nothing to vary, no
    Q events). Anything else raises; the Celery adapter (``reviewapp.tasks.model_panel``) reports
    it on the panel so the observed comparison stands on its own.

    Old policy: the baseline kernel's preset. New policy: the patched kernel's preset (or the
    baseline's when the patched kernel is unknown) with the comparison's ``field=value``
    overrides.
    """
    if not policy and not (baseline_kernel or patched_kernel):
        return None
    if not baseline_kernel:
        return {"state": "error", "error": "the baseline kernel is unknown: set it on the "
                "bundle (kernel field) or in the manifest (kernel = ...)"}
    overrides, knobs = policy_parts(policy)
    old = preset_for_kernel(baseline_kernel)
    if patched_kernel:
        new = preset_for_kernel(patched_kernel).with_overrides(overrides)
    elif overrides:
        new = old.with_overrides(overrides)
    else:
        return {"state": "error", "error": "nothing to vary: give the policy under test as "
                "field=value or the patched side's kernel"}
    device_map: dict[str, str] = {}
    stack_note = ""
    if manifest and manifest.get("stack"):
        stack = stack_from_manifest(manifest)
        top = stack.top.dev
        stack_note = "from the bundle's blkreview.toml manifest"
    else:
        q = np.flatnonzero(table.action == ACT_QUEUE)
        if len(q) == 0:
            return {"state": "error", "error": "the baseline trace has no Q events to replay"}
        devs, counts = np.unique(table.dev[q], return_counts=True)
        top = int(devs[int(np.argmax(counts))])
        spec = (stack_text or "").strip()
        if ":" in spec:
            stack = stack_from_spec(spec)  # a bad spec raises: the panel shows why
            stack_note = f"from the bundle's stack spec {spec!r}"
        else:
            stack = stack_from_spec("disk")
            stack_note = ("a single disk: the run has no blkreview.toml manifest"
                          + (f" and its stack text {spec!r} is not a stack spec "
                             "(e.g. raid5:disks=8,chunk=64k,device=hdd)" if spec else ""))
        device_map[dev_str(top)] = dev_str(stack.top.dev)
    work = ((manifest or {}).get("workload") or {}).get("command") or workload or None
    bios = bios_from_table(table, top, workload=work)
    pred_old = replay(bios, stack, old)
    pred_new = replay(bios, stack, new)
    r_old = jsonable(analyze(pred_old))
    r_new = jsonable(analyze(pred_new))
    fidelity = model_fidelity(r_old, observed, pred_old, table, device_map)
    return {
        "state": "ok", "policy_old": f"{old.name}: {old.to_spec()}",
        "policy_new": f"{new.name}: {new.to_spec()}", "knobs": knobs,
        "kernel_old": baseline_kernel, "kernel_new": patched_kernel or baseline_kernel,
        "stack": stack.describe(), "stack_note": stack_note, "top": dev_str(top),
        "bios": int(len(bios.sector)),
        "device_map": device_map,
        "predicted_old": slim(r_old), "predicted_new": slim(r_new),
        "fidelity": fidelity,
        "warnings": [w for k in dict.fromkeys([baseline_kernel, patched_kernel]) if k
                     for w in kernel_version_warnings(k)],
    }


def d_stream(table: EventTable, dev: int) -> list[tuple[int, int]]:
    """(sector, nr_sectors) of the D events of ``dev`` in issue order."""
    rows = np.flatnonzero((table.action == ACT_ISSUE) & (table.dev == dev))
    return list(zip(table.sector[rows].tolist(), table.nr_sectors[rows].tolist()))


def model_fidelity(predicted_old: dict[str, Any], observed: dict[str, Any],
                   pred_table: EventTable, obs_table: EventTable,
                   device_map: dict[str, str]) -> dict[str, Any]:
    """``workers.compare.fidelity`` of predicted-old vs observed baseline, per device, with the
    share of observed D requests the prediction issues in the same order."""
    back = {v: k for k, v in device_map.items()}
    if back:
        # the prediction names its own devices: call them by the observed names
        predicted_old = {**predicted_old, "devices": {
            back.get(k, k): v for k, v in (predicted_old.get("devices") or {}).items()}}
    order: dict[str, float] = {}
    for dev in observed.get("devices") or {}:
        if dev not in (predicted_old.get("devices") or {}):
            continue
        obs = d_stream(obs_table, parse_dev(dev))
        if not obs:
            continue
        order[dev] = matched_in_order(obs, d_stream(pred_table, parse_dev(device_map.get(dev, dev))))
    out: dict[str, Any] = jsonable(fidelity(predicted_old, observed, order=order))
    return out
