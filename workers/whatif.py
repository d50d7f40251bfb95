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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers import analyze
from workers.analyzers.common import choose_stage, rows_by_device
from workers.analyzers.seek import SeekAcc, seek_histogram
from workers.compare import fidelity, matched_in_order
from workers.events import (
    ACT_ISSUE,
    ACT_QUEUE,
    ACTION_CODES,
    RWBS_DISCARD,
    RWBS_FLUSH,
    RWBS_WRITE_ZEROES,
    EventTable,
    dev_str,
    parse_dev,
)
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


#: The columns :func:`scan_run` reads (every other column of a stored table stays packed).
SCAN_COLUMNS: tuple[str, ...] = ("time_ns", "dev", "action", "sector", "nr_sectors")


@dataclass(frozen=True)
class RunScan:
    """What one pass over a run's table in chunks gives the comparison step.

    Attributes:
        seek: ``{dev: {stage: seek json}}``, as :func:`seek_by_stage` gives for the run.
        rows: events in the table.
        bios: ``{dev: Q events with data}``, the bios :func:`bios_from_table` would replay
            with that device as the top.
        bios_total: Q events with data on any device.
        bio_limit_row: the row of the ``bio_limit``-th Q event with data (any device), None
            when the table has fewer.
    """

    seek: dict[str, dict[str, Any]]
    rows: int
    bios: dict[str, int]
    bios_total: int
    bio_limit_row: int | None


class OutOfTimeOrder(ValueError):
    """A chunked pass met time going back: the whole-table analyzers read every stage in time
    order (``common.time_order``), which a single pass over unsorted chunks cannot give."""


def scan_run(chunks: Iterable[EventTable], results: dict[str, Any], *,
             bio_limit: int | None = None) -> RunScan:
    """The seek histogram of every stage the run's results count events of, per device, from
    consecutive chunks of its table in table order: exactly :func:`seek_by_stage`'s
    ``seek_histogram(table, dev, stage)`` of the whole table, one chunk in memory at a time.

    Each (device, stage) stream feeds a :class:`SeekAcc` (the class the whole-table function
    runs once) with the rows of that device and action that carry data, in table order; the
    stage is chosen by :func:`common.choose_stage` on the counted rows as ``stage_rows`` does.
    Issue order is time order: with timestamps the chunks must not go back in time (a stored
    table is sorted: ``EventTable.sorted_by_time``, the merges), else
    :class:`OutOfTimeOrder` is raised and the caller takes the whole table.

    Also counted: the Q events with data per device (the bios a replay of that top device
    reads) and where the ``bio_limit``-th of them is (the model panel's window).
    """
    wanted: dict[int, tuple[str, list[str]]] = {}
    for dev, d in (results.get("devices") or {}).items():
        actions = d.get("actions") or {}
        stages = [st for st in ("Q", "G", "I", "D", "C") if actions.get(st)]
        if stages:
            wanted[parse_dev(dev)] = (dev, stages)
    accs = {(d, st): SeekAcc() for d, (_, stages) in wanted.items() for st in stages}
    seen = {key: 0 for key in accs}
    zero = {key: 0 for key in accs}
    bios: dict[int, int] = {}
    rows = bios_total = 0
    limit_row: int | None = None
    last_t: int | None = None
    names: dict[int, str] = {}
    for chunk in chunks:
        n = len(chunk)
        if not n:
            names = {d: chunk.device_name(d) for d in wanted}
            continue
        if chunk.time_known:
            t = chunk.time_ns
            if (last_t is not None and int(t[0]) < last_t) or not bool(np.all(t[1:] >= t[:-1])):
                raise OutOfTimeOrder("the table is not in time order")
            last_t = int(t[-1])
        names = {d: chunk.device_name(d) for d in wanted}
        q = (chunk.action == ACT_QUEUE) & (chunk.nr_sectors > 0)
        qrows = np.flatnonzero(q)
        if bio_limit is not None and limit_row is None and bios_total + len(qrows) >= bio_limit:
            limit_row = rows + int(qrows[bio_limit - bios_total - 1])
        bios_total += len(qrows)
        if len(qrows):
            devs, counts = np.unique(chunk.dev[qrows], return_counts=True)
            for d, c in zip(devs.tolist(), counts.tolist()):
                bios[int(d)] = bios.get(int(d), 0) + int(c)
        del q, qrows
        for d, by_dev in rows_by_device(chunk, list(wanted)).items():
            if not len(by_dev):
                continue
            act = chunk.action[by_dev]
            for st in wanted[d][1]:
                sel = by_dev[act == ACTION_CODES[st]]
                if not len(sel):
                    continue
                seen[(d, st)] += len(sel)
                nr = chunk.nr_sectors[sel]
                data = nr > 0
                zero[(d, st)] += len(sel) - int(np.count_nonzero(data))
                sel = sel[data]
                accs[(d, st)].add(chunk.sector[sel], nr[data])
        rows += n
    seek: dict[str, dict[str, Any]] = {}
    for (d, st), acc in accs.items():
        used, fallback = choose_stage({st: seen[(d, st)]}, st)
        dev = wanted[d][0]
        j = acc.result(dev=dev_str(d), name=names.get(d) or dev_str(d), stage=used,
                       requested_stage=st, fallback=fallback, zero_length=zero[(d, st)])
        seek.setdefault(dev, {})[st] = jsonable(j.to_json())
    return RunScan(seek=seek, rows=rows, bios={dev_str(d): c for d, c in sorted(bios.items())},
                   bios_total=bios_total, bio_limit_row=limit_row)


def scan_table(table: EventTable, results: dict[str, Any], *,
               bio_limit: int | None = None) -> RunScan:
    """:func:`scan_run` of a table in memory, in any row order: sorted by time first (stable,
    as :func:`workers.analyzers.analyze` does), which orders every stage's rows as
    ``common.time_order`` does (``bio_limit_row`` is then a row of the sorted table)."""
    from workers.analyzers.stream import table_chunks

    t = table.time_ns
    if table.time_known and len(t) > 1 and not bool(np.all(t[1:] >= t[:-1])):
        table = table.take(np.argsort(t, kind="stable"))
    return scan_run(table_chunks(table), results, bio_limit=bio_limit)


def add_run_seek(out: dict[str, Any], side: str, seek: dict[str, dict[str, Any]]) -> None:
    """Put one run's ``{dev: {stage: json}}`` into :func:`seek_by_stage`'s
    ``{dev: {stage: {side: [json per run]}}}``."""
    for dev, stages in seek.items():
        for stage, j in stages.items():
            out.setdefault(dev, {}).setdefault(stage, {}).setdefault(side, []).append(j)


@dataclass(frozen=True)
class ModelWindow:
    """The leading rows of a run the model panel replays when the whole run is over a bound.

    Why: the replay holds the bios, both policies' predicted tables and their analyses in
    memory (growing with the bios and the stack's fan-out: a bio of an 8-disk raid5 becomes
    tens of predicted events), and the fidelity's in-order match holds both D streams; a
    100M-event trace has millions of bios (docs/deploy.md, "Huge traces"). So a run over ``max_events`` events or
    ``max_bios`` bios (Q events with data) is replayed on its first rows only: up to
    ``max_events`` rows, cut after the ``max_bios``-th bio; the observed results the
    prediction is scored against are those of the same rows (``analyze`` of the window), not
    the whole run's. The predicted events of a bio are about the trace's own events of it (the
    model emits what the kernel traced), so the rows bound the predicted tables too.

    Attributes:
        events: rows replayed (the first ``events`` rows of the table).
        total_events: rows of the whole table.
        total_bios: ``{dev: bios of the whole table}`` (:attr:`RunScan.bios`).
    """

    events: int
    total_events: int
    total_bios: dict[str, int]

    @classmethod
    def of(cls, scan: RunScan, *, max_events: int, max_bios: int) -> ModelWindow | None:
        """The window of a scanned run (:func:`scan_run` with ``bio_limit=max_bios``), None
        when the whole run is within both bounds (the panel is then exactly the whole run's).
        """
        if scan.rows <= max_events and scan.bios_total <= max_bios:
            return None
        events = min(scan.rows, max_events)
        if scan.bio_limit_row is not None:
            events = min(events, scan.bio_limit_row + 1)
        return cls(events=events, total_events=scan.rows, total_bios=dict(scan.bios))

    def to_json(self, bios: int, top: str) -> dict[str, Any]:
        total = int(self.total_bios.get(top, bios))
        return {"events": self.events, "total_events": self.total_events, "bios": bios,
                "total_bios": total,
                "note": f"the model replayed the first {bios:,} of {total:,} bios of {top} "
                        f"(the first {self.events:,} of {self.total_events:,} events) and its "
                        f"fidelity is scored on the same events"}


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
    if field == "raid1_barrier":
        if "raid1" not in kinds:
            return "no md raid1 in the stack"
        unit = 1 << 17  # BARRIER_UNIT_SECTOR_SIZE
        if not np.any(np.asarray(bios.sector) % unit + np.asarray(bios.nr_sectors) > unit):
            return "no bio crosses one of raid1's 64 MiB barrier units in the input"
    if field == "raid10_chunk_limit" and "raid10" not in kinds:
        return "no md raid10 in the stack"
    if field == "raid0_split" and "raid0" not in kinds:
        return "no md raid0 in the stack"
    if field == "sched_wakeup" and bios.meta.get("md_meta") is None:
        return "no md superblock writes in the trace"
    if field == "dm_crypt_split" and not any(
            getattr(n, "approximates", "") == "dm-crypt" for n in stack.nodes()):
        return "no dm-crypt in the stack"
    if field == "md_flush":
        if not kinds & {"raid0", "raid1", "raid10", "raid4", "raid5", "raid6", "linear"}:
            return "no md device in the stack"
        if not np.any(((np.asarray(bios.rwbs) & RWBS_FLUSH) != 0)
                      & (np.asarray(bios.nr_sectors) > 0)):
            return "no REQ_PREFLUSH write with data in the input"
    if field == "raid0_discard":
        if "raid0" not in kinds:
            return "no raid0 in the stack"
        if not np.any(np.asarray(bios.rwbs) & RWBS_DISCARD):
            return "no discards in the input"
    if field == "raid10_discard":
        if "raid10" not in kinds:
            return "no md raid10 in the stack"
        if not np.any(np.asarray(bios.rwbs) & RWBS_DISCARD):
            return "no discards in the input"
    if field == "dm_stripe_chunk_limit" and not any(
            getattr(n, "approximates", "") == "dm-stripe" for n in stack.nodes()):
        return "no dm-stripe in the stack"
    if field in ("write_zeroes_chunk", "dm_stripe_chunk_limit"):
        zeroes = (np.asarray(bios.rwbs) & RWBS_WRITE_ZEROES) != 0
        traced = bios.meta.get("write_zeroes")
        if not np.any(zeroes) and not (traced is not None and np.any(traced)):
            return "no write-zeroes bio in the input"
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
                patched_observed: dict[str, Any] | None = None,
                window: ModelWindow | None = None,
                patched_window: ModelWindow | None = None) -> dict[str, Any] | None:
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

    ``window`` (``patched_window``): ``table`` (``patched_table``) holds only the first rows of
    a run over the bounds of :class:`ModelWindow`, and ``observed`` (``patched_observed``) is the
    analysis of those rows; the panel then says so (``window``: "the model replayed the first
    N of M bios ..."). Without them nothing of the panel changes.
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
    out: dict[str, Any] = {
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
    if window is not None:
        out["window"] = window.to_json(int(len(bios.sector)), dev_str(top))
    if patched_window is not None and fidelity_new is not None:
        pw = {"events": patched_window.events, "total_events": patched_window.total_events}
        out["patched_window"] = {**pw, "note": (
            f"the new policy's fidelity is scored on the patched run's first "
            f"{pw['events']:,} of {pw['total_events']:,} events")}
    return out


def d_stream(table: EventTable, dev: int) -> npt.NDArray[np.uint64]:
    """(sector, nr_sectors) of the D events of ``dev`` in issue order, as an ``(n, 2)`` array
    (what :func:`workers.compare.matched_in_order` reads; a list of tuples was ~120 bytes a
    request)."""
    rows = np.flatnonzero((table.action == ACT_ISSUE) & (table.dev == dev))
    return np.stack([table.sector[rows], table.nr_sectors[rows].astype(np.uint64)], axis=1)


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
        if not len(obs):
            continue
        order[dev] = matched_in_order(obs, d_stream(pred_table, parse_dev(device_map.get(dev, dev))))
    out: dict[str, Any] = jsonable(fidelity(predicted_old, observed, order=order))
    return out
