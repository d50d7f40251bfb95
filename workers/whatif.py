"""What-if: replay a baseline trace's submitted bios under the old and the new policy.

The comparison page's model panel (architecture.md, "The one idea"): the baseline's Q events of the
top device are replayed through :func:`workers.model.replay` with the baseline kernel's preset
(the old policy) and with that preset plus the policy under test (the new one; without a policy
under test, the patched kernel's preset); both predictions go through the same analyzers as the
observed traces, and the model's *fidelity* is predicted-old vs observed-baseline and
predicted-new vs observed-patched. Pure engine code: the Celery task only loads the tables and
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
from workers.events import ACT_ISSUE, ACT_QUEUE, RWBS_DISCARD, EventTable, dev_str, parse_dev
from workers.model import (
    bios_from_table,
    kernel_version_warnings,
    preset_for_kernel,
    replay,
    stack_from_manifest,
    stack_from_spec,
)
from workers.model.policy import POLICY_FIELDS, Policy


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


#: Policy fields a replay of Q events cannot exercise, whatever the stack: the bios are
#: replayed as the trace submitted them, so how the kernel built them is already fixed.
BUILT_BEFORE_Q: dict[str, str] = {
    "bio_build": "the bios are replayed as submitted (Q events): how they were built is fixed",
    "dio_bio_limit": "the bios are replayed as submitted (Q events): their size is fixed",
}


#: Policy fields trace replay does not read at all: its threads wait for a free tag, but the
#: wake-up order and preemption of sbitmap's wait queues are only in the multi-thread
#: simulator (workers.model.simulate.simulate_jobs, the seed 003 view).
NOT_IN_REPLAY: dict[str, str] = {
    "sbitmap_wakeup": "not modelled in trace replay (only in the multi-thread tag simulator)",
    "tag_preempt": "not modelled in trace replay (only in the multi-thread tag simulator)",
}


def unexercised(field: str, stack: Any, bios: Any) -> str:
    """Why a replay of these bios on this stack cannot show ``field`` ("" when it can)."""
    if field in BUILT_BEFORE_Q:
        return BUILT_BEFORE_Q[field]
    if field in NOT_IN_REPLAY:
        return NOT_IN_REPLAY[field]
    kinds = {n.kind for n in stack.nodes()}
    if field == "md_read_balance" and "raid1" not in kinds:
        return "no md raid1 in the stack"
    if field == "raid10_chunk_limit" and "raid10" not in kinds:
        return "no md raid10 in the stack"
    if field == "raid0_split" and "raid0" not in kinds:
        return "no md raid0 in the stack"
    if field == "sched_wakeup" and bios.meta.get("md_meta") is None:
        return "no md superblock writes in the trace"
    if field == "dm_crypt_split" and not any(
            getattr(n, "approximates", "") == "dm-crypt" for n in stack.nodes()):
        return "no dm-crypt in the stack"
    if field == "raid0_discard":
        if "raid0" not in kinds:
            return "no raid0 in the stack"
        if not np.any(np.asarray(bios.rwbs) & RWBS_DISCARD):
            return "no discards in the input"
    if field == "flags_on_resubmit" and "cache" not in kinds:
        return "no bcache (cache) device in the stack"
    if field in ("split_nomerge", "md_io_opt_align") and not kinds & {
            "raid0", "raid1", "raid10", "raid5", "raid6", "linear"}:
        return "no md device in the stack"
    return ""


def policy_diff(old: Policy, new: Policy, stack: Any, bios: Any) -> list[dict[str, Any]]:
    """``[{"field", "old", "new", "exercised", "why"}]`` for every field the policies set
    differently, each marked with whether this replay can show it."""
    a, b = old.to_dict(), new.to_dict()
    out = []
    for k in POLICY_FIELDS:
        if a[k] != b[k]:
            why = unexercised(k, stack, bios)
            out.append({"field": k, "old": a[k], "new": b[k], "exercised": not why, "why": why})
    return out


def choose_policies(*, policy: str, baseline_kernel: str, patched_kernel: str
                    ) -> tuple[Policy, Policy, str, list[str]] | dict[str, Any]:
    """``(old, new, mode, knobs)``, or the panel's error dict.

    Old policy: the baseline kernel's preset. New policy: the baseline's preset plus the policy
    under test (``mode`` "policy"): only what the comparison names changes. Without a policy
    under test and with two kernels of different presets, the new policy is the patched
    kernel's preset (``mode`` "presets"): the panel then compares the two kernels' presets.
    """
    if not baseline_kernel:
        return {"state": "error", "error": "the baseline kernel is unknown: set it on the "
                "bundle (kernel field) or in the manifest (kernel = ...)"}
    overrides, knobs = policy_parts(policy)
    old = preset_for_kernel(baseline_kernel)
    if overrides:
        return old, old.with_overrides(overrides), "policy", knobs
    if patched_kernel:
        return old, preset_for_kernel(patched_kernel), "presets", knobs
    return {"state": "error", "error": "nothing to vary: give the policy under test as "
            "field=value, or the patched side's kernel"}


def model_panel(*, policy: str, baseline_kernel: str, patched_kernel: str,
                manifest: dict[str, Any] | None, stack_text: str, workload: str,
                table: EventTable, observed: dict[str, Any],
                patched_table: EventTable | None = None,
                patched_observed: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Replay the baseline's submitted bios under the old and the new policy.

    Returns None when there is nothing to model (no policy under test and no kernel on either
    side), else ``{"state": "ok", ...predictions, fidelity}`` or ``{"state": "error",
    "error": "..."}`` for the cases a maintainer must fix (no baseline kernel, nothing to vary, no
    Q events). Anything else raises; the Celery adapter (``reviewapp.tasks.model_panel``) reports
    it on the panel so the observed comparison stands on its own.

    The policies are chosen by :func:`choose_policies`. Fidelity is the old policy's
    prediction against the observed baseline (``fidelity``) and, when the patched side's
    events are given, the new policy's prediction against the observed patched side
    (``fidelity_new``): a model that predicts the baseline but not the patched side says so.
    ``policy_diff`` lists the fields the two policies set differently, each marked with
    whether this replay can exercise it.
    """
    if not policy and not (baseline_kernel or patched_kernel):
        return None
    chosen = choose_policies(policy=policy, baseline_kernel=baseline_kernel,
                             patched_kernel=patched_kernel)
    if isinstance(chosen, dict):
        return chosen
    old, new, mode, knobs = chosen
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
    bios = bios_from_table(table, top, workload=work, stack=stack)
    pred_old = replay(bios, stack, old)
    pred_new = replay(bios, stack, new)
    r_old = jsonable(analyze(pred_old))
    r_new = jsonable(analyze(pred_new))
    fidelity = model_fidelity(r_old, observed, pred_old, table, device_map)
    fidelity_new = None
    if patched_table is not None and patched_observed is not None:
        fidelity_new = model_fidelity(r_new, patched_observed, pred_new, patched_table,
                                      device_map)
    diff = policy_diff(old, new, stack, bios)
    if mode == "presets" and not diff:
        label = (f"no policy under test named, and {baseline_kernel} and {patched_kernel} "
                 f"share one preset: the two predictions are the same")
    elif mode == "presets":
        label = (f"no policy under test named: the panel compares the presets of "
                 f"{baseline_kernel} ({old.name}) and {patched_kernel} ({new.name})")
    else:
        label = (f"the baseline's preset ({old.name}) plus the policy under test "
                 f"{policy_parts(policy)[0]}")
    return {
        "state": "ok", "policy_old": f"{old.name}: {old.to_spec()}",
        "policy_new": f"{new.name}: {new.to_spec()}", "knobs": knobs,
        "mode": mode, "policy_new_label": label, "policy_old_label": f"{old.name}",
        "policy_diff": diff,
        "kernel_old": baseline_kernel, "kernel_new": patched_kernel or baseline_kernel,
        "stack": stack.describe(), "stack_note": stack_note, "top": dev_str(top),
        "bios": int(len(bios.sector)),
        "device_map": device_map,
        "predicted_old": slim(r_old), "predicted_new": slim(r_new),
        "fidelity": fidelity, "fidelity_new": fidelity_new,
        "warnings": [w for k in dict.fromkeys([baseline_kernel, patched_kernel]) if k
                     for w in kernel_version_warnings(k)] + list(stack.notes),
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
