"""Fidelity: replay real captures and score the predicted D streams against the real ones.

The replay model is only worth trusting where it was measured against real kernels
(issue 13, "The fidelity matrix"). For each capture (a bundle with a ``blkreview.toml``
manifest: kernel, stack, limits) this replays the top device's Q events with the kernel's
preset and compares what every device was really sent (its D events) with what the model says
it is sent:

* **order** mode, for workloads with one submitting thread (dd, one fio job): the D stream per
  device as a sequence of ``(sector, size, direction)`` and, for a stack, the sequence across
  its devices in issue order. A score is the longest run of observed requests the prediction
  issues in the same relative order, over the larger of the two counts
  (:func:`workers.compare.matched_in_order`), so a missing request and an invented one cost
  alike.
* **distribution** mode, for racing threads (several pids submit Q on the top device), whose
  interleaving no model can predict request by request: per device, one minus the mean of
  the halved L1 distances of the request-size and seek-distance histograms and of the
  difference in backward-dispatch share.

A capture's score is the mean over its devices, averaged with the cross-device order score
where there is one. Nothing here is fitted: the scores say how close the model is, and which
captures were used to calibrate it is the caller's split (``--calibration``), reported apart.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from workers.analyzers.seek import seek_from_arrays
from workers.analyzers.sizes import size_stats_from_arrays
from workers.compare import l1_normalized, matched_in_order
from workers.errors import BlkreviewError
from workers.events import ACT_ISSUE, ACT_QUEUE, RWBS_WRITE, EventTable, dev_str

MANIFEST = "blkreview.toml"
MODES = ("auto", "order", "distribution")


@dataclass(frozen=True)
class DeviceScore:
    """One device of one capture: observed vs predicted D requests."""

    dev: str
    observed: int
    predicted: int
    score: float
    #: order mode: share in order over max(observed, predicted); None in distribution mode
    in_order: float | None = None
    size_l1: float | None = None
    seek_l1: float | None = None
    backward_diff: float | None = None


@dataclass(frozen=True)
class CaptureScore:
    """The score of one capture (one kernel x one workload)."""

    name: str
    kernel: str
    workload: str
    mode: str
    score: float | None
    devices: list[DeviceScore] = field(default_factory=list)
    cross_device: float | None = None
    calibration: bool = False
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    #: the kernel whose preset was replayed (the capture's own unless overridden)
    preset: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def find_captures(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Capture directories under ``paths``: each directory holding a ``blkreview.toml``
    (a path that is itself one is taken as is), sorted for a stable table."""
    found: list[Path] = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise BlkreviewError(f"{path}: no such file or directory")
        if path.is_file():
            found.append(path)
        elif (path / MANIFEST).is_file():
            found.append(path)
        else:
            found.extend(sorted(m.parent for m in path.rglob(MANIFEST)))
    return sorted(dict.fromkeys(found))


def _requests(table: EventTable, rows: npt.NDArray[np.intp], dev_index: npt.NDArray[np.int64]
              | None = None) -> npt.NDArray[np.int64]:
    """``(key, size)`` pairs of D rows: key = sector*2 + write (+ device index above bit 48)."""
    key = table.sector[rows].astype(np.int64) * 2 + (
        (table.rwbs[rows].astype(np.int64) & RWBS_WRITE) != 0).astype(np.int64)
    if dev_index is not None:
        key = key + (dev_index << 48)
    return np.stack([key, table.nr_sectors[rows].astype(np.int64)], axis=1)


def _in_order(obs: npt.NDArray[np.int64], pred: npt.NDArray[np.int64]) -> float:
    if len(obs) == 0 and len(pred) == 0:
        return 1.0
    share = matched_in_order(obs, pred)  # over len(obs)
    return float(share * len(obs) / max(len(obs), len(pred)))


def _issue_rows(table: EventTable, dev: int) -> npt.NDArray[np.intp]:
    rows = np.flatnonzero((table.action == ACT_ISSUE) & (table.dev == dev))
    return rows[np.argsort(table.time_ns[rows], kind="stable")]


def _backward_share(table: EventTable, dev: int) -> float | None:
    rows = _issue_rows(table, dev)
    if len(rows) < 2:
        return None
    start = table.sector[rows].astype(np.int64)
    end = start + table.nr_sectors[rows].astype(np.int64)
    return float(np.mean(start[1:] < end[:-1]))


def _l1(a: list[int], b: list[int]) -> float:
    d = l1_normalized(a, b)
    if d is None:
        return 0.0 if sum(a) == sum(b) == 0 else 2.0
    return d


def racing_threads(table: EventTable, top: int) -> bool:
    """Several threads submit to the top device: the interleaving is not deterministic."""
    q = (table.action == ACT_QUEUE) & (table.dev == top) & (table.nr_sectors > 0)
    return len(np.unique(table.pid[q])) > 1


def score_tables(observed: EventTable, predicted: EventTable, devices: Sequence[int], *,
                 mode: str) -> tuple[list[DeviceScore], float | None]:
    """Per-device scores and the cross-device order score (order mode, >1 device)."""
    scores: list[DeviceScore] = []
    for dev in devices:
        o_rows, p_rows = _issue_rows(observed, dev), _issue_rows(predicted, dev)
        if mode == "order":
            s = _in_order(_requests(observed, o_rows), _requests(predicted, p_rows))
            scores.append(DeviceScore(dev_str(dev), len(o_rows), len(p_rows), s, in_order=s))
            continue
        def hists(t: EventTable, rows: npt.NDArray[np.intp]) -> tuple[list[int], list[int]]:
            sz = size_stats_from_arrays(t.nr_sectors[rows], t.rwbs[rows]).counts
            sk = seek_from_arrays(t.sector[rows], t.nr_sectors[rows]).counts
            return list(sz), list(sk)

        (o_sz, o_sk), (p_sz, p_sk) = hists(observed, o_rows), hists(predicted, p_rows)
        # one side empty: as far apart as two histograms can be
        size_l1 = _l1(p_sz, o_sz)
        seek_l1 = _l1(p_sk, o_sk)
        ob, pb = _backward_share(observed, dev), _backward_share(predicted, dev)
        back = abs(ob - pb) if ob is not None and pb is not None else 0.0
        s = 1.0 - (size_l1 / 2 + seek_l1 / 2 + back) / 3
        scores.append(DeviceScore(dev_str(dev), len(o_rows), len(p_rows), s, size_l1=size_l1,
                                  seek_l1=seek_l1, backward_diff=back))
    cross = None
    if mode == "order" and len(devices) > 1:
        index = {d: i for i, d in enumerate(devices)}

        def across(table: EventTable) -> npt.NDArray[np.int64]:
            rows = np.flatnonzero((table.action == ACT_ISSUE) & np.isin(table.dev, devices))
            rows = rows[np.argsort(table.time_ns[rows], kind="stable")]
            idx = np.array([index[int(d)] for d in table.dev[rows]], dtype=np.int64)
            return _requests(table, rows, idx)

        cross = _in_order(across(observed), across(predicted))
    return scores, cross


def score_capture(path: str | os.PathLike[str], *, mode: str = "auto",
                  kernel: str | None = None, against: str | os.PathLike[str] | None = None,
                  real: bool = False) -> CaptureScore:
    """Replay one capture and score it; a capture the model cannot take is a scored error.

    ``against``: score against the D events of another capture of the same kernel and
    workload (another run) instead of the capture's own: how well a replay of one run predicts
    a run it has not seen. ``real`` (with ``against``): score the capture's own D events, not
    the replay, against the other run's: the kernel's run-to-run agreement, the most any
    prediction of "the next run" can be expected to reach on a workload whose threads race.
    """
    from workers.model import (
        bios_from_table,
        kernel_version_warnings,
        preset_for_kernel,
        replay,
        stack_from_manifest,
    )
    from workers.traces import ingest

    path = Path(path)
    from workers.traces.directory import directory_files

    name = path.name
    skipped: list[str] = []
    files = [str(path)] if path.is_file() else directory_files(path, skipped)
    try:
        ing = ingest(files, names=[Path(f).name for f in files])
    except BlkreviewError as exc:
        return CaptureScore(name, kernel or "", "", mode, None, error=str(exc))
    manifest: dict[str, Any] = {}
    if ing.manifest is not None:
        manifest = {k: getattr(ing.manifest, k) for k in ("kernel", "stack", "limits",
                                                         "devices", "workload")}
    if (path / MANIFEST).is_file():  # keep the raw TOML's extra tables (e.g. [fidelity])
        raw = tomllib.loads((path / MANIFEST).read_text())
    else:
        raw = {}
    own = str(manifest.get("kernel") or "")
    kern = kernel or own
    work = str(((manifest.get("workload") or {}) or {}).get("command") or "")
    label = str((raw.get("fidelity") or {}).get("name") or name)
    if not kern:
        return CaptureScore(label, "", work, mode, None, error="the manifest names no kernel")
    own = own or kern
    if path.is_dir():
        manifest = _with_stripe_cache(path, _with_md_sizes(path, manifest))
    try:
        stack = stack_from_manifest(manifest)
        table = ing.table
        top = stack.top.dev
        want = mode if mode != "auto" else (
            str((raw.get("fidelity") or {}).get("mode") or "")
            or ("distribution" if racing_threads(table, top) else "order"))
        if real and against is not None:
            predicted = table
        else:
            bios = bios_from_table(table, top, workload=work or None, stack=stack)
            predicted = replay(bios, stack, preset_for_kernel(kern))
        if against is not None:
            table = _other_run(Path(against), own)
    except BlkreviewError as exc:
        return CaptureScore(label, own, work, mode, None, error=str(exc), preset=kern)
    devices = [int(d) for d in np.unique(table.dev[table.action == ACT_ISSUE])]
    dev_scores, cross = score_tables(table, predicted, devices, mode=want)
    if not dev_scores:
        return CaptureScore(label, own, work, want, None, error="no D events to score",
                            preset=kern)
    mean_dev = float(np.mean([d.score for d in dev_scores]))
    score = mean_dev if cross is None else (mean_dev + cross) / 2
    return CaptureScore(label, own, work, want, score, dev_scores, cross,
                        warnings=kernel_version_warnings(kern) + list(stack.notes), preset=kern)


def _other_run(path: Path, kernel: str) -> EventTable:
    """The events of another run of a capture (``--against``): same kernel, else refused."""
    from workers.traces import ingest
    from workers.traces.directory import directory_files

    files = [str(path)] if path.is_file() else directory_files(path, [])
    ing = ingest(files, names=[Path(f).name for f in files])
    other = str(getattr(ing.manifest, "kernel", "") or "") if ing.manifest is not None else ""
    if other and kernel and other != kernel:
        raise BlkreviewError(f"{path}: another kernel ({other}, not {kernel}): not another run "
                             "of the same capture")
    return ing.table


def _with_md_sizes(path: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Member data sizes of an md linear or raid10 array from the capture's files, for bundles
    whose manifest does not carry ``sizes_sectors`` (the lab writes it since session 7):
    without them md-linear would put the whole array on its first member and raid10 the far
    copy of every write at the wrong sector (:func:`workers.lab.bundle.md_member_sizes_of`).
    """
    from workers.lab.bundle import md_member_sizes_of

    st = dict(manifest.get("stack") or {})
    if st.get("sizes_sectors"):
        return manifest
    sizes = md_member_sizes_of(path, str(st.get("kind") or ""))
    if not sizes or len(sizes) != len(st.get("members") or ()):
        return manifest
    st["sizes_sectors"] = list(sizes)
    return {**manifest, "stack": st}


def _with_stripe_cache(path: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """``stripe_cache_size`` of a raid4/5/6 capture from its ``md_params.txt`` when the manifest
    (bundles made before the lab wrote it) does not say: the stripe cache keeps that many
    4 KiB rows, and what it holds decides which blocks a write reads."""
    st = dict(manifest.get("stack") or {})
    params = path / "md_params.txt"
    if st.get("stripe_cache_size") or not params.is_file():
        return manifest
    mo = re.search(r"^stripe_cache_size\s+(\d+)", params.read_text(errors="replace"), re.M)
    if not mo:
        return manifest
    st["stripe_cache_size"] = int(mo.group(1))
    return {**manifest, "stack": st}


def is_calibration(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def lab_index(paths: Iterable[str | os.PathLike[str]]) -> dict[str, dict[str, Any]]:
    """Cells of the lab's ``index.json`` files found under ``paths`` (``kernel/case`` ->
    cell): their ``split`` (calibration | evaluation) and whether the capture succeeded.

    A path inside a lab ``--out`` (one kernel's folder, or one capture) finds the index one
    or two levels up: scoring one kernel's captures keeps their split."""
    import json

    cells: dict[str, dict[str, Any]] = {}
    for p in paths:
        path = Path(p)
        found = ([path / "index.json"] if (path / "index.json").is_file() else
                 sorted(path.rglob("index.json")) if path.is_dir() else [])
        if not found:
            found = [up / "index.json" for up in (path.parent, path.parent.parent)
                     if (up / "index.json").is_file()][:1]
        for idx in found:
            try:
                data = json.loads(idx.read_text())
            except (OSError, ValueError):
                continue
            for key, cell in (data.get("cells") or {}).items():
                if isinstance(cell, dict):
                    cells[str(key)] = cell
    return cells


def score_all(paths: Iterable[str | os.PathLike[str]], *, mode: str = "auto",
              calibration: Sequence[str] = (), kernel: str | None = None,
              progress: Callable[[int, int], None] | None = None,
              against: Sequence[str | os.PathLike[str]] = (), real: bool = False
              ) -> list[CaptureScore]:
    """Every capture under ``paths``; ``calibration`` globs (over ``kernel/workload`` names)
    mark the captures the model was calibrated on, reported apart from the held-out rest.
    A lab matrix's ``index.json`` marks them too (``split = "calibration"``), and its failed
    cells (the capture itself went wrong) are left out. ``progress`` is called with
    ``(captures done, captures)`` before the first and after each.

    ``against``: folders holding other runs of the same captures (a second lab ``--out``):
    each capture is scored against the D events of its namesake there (``kernel/workload``),
    and captures without one are left out; ``real`` scores the capture's own D events instead
    of its replay (see :func:`score_capture`)."""
    paths = list(paths)
    cells = lab_index(paths)
    out = []
    captures = find_captures(paths)
    others = {f"{c.parent.name}/{c.name}": c for c in find_captures(against)} if against \
        else {}
    if real and not against:
        raise BlkreviewError("--real needs --against: the runs to score a capture's own D "
                             "events against")
    for i, cap in enumerate(captures):
        if progress is not None:
            progress(i, len(captures))
        full = f"{cap.parent.name}/{cap.name}"
        cell = cells.get(full, {})
        if cell and not cell.get("ok", True):
            continue
        if against and (full not in others or others[full].resolve() == cap.resolve()):
            continue
        s = score_capture(cap, mode=mode, kernel=kernel, against=others.get(full), real=real)
        if (is_calibration(full, calibration) or is_calibration(cap.name, calibration)
                or cell.get("split") == "calibration"):
            s = CaptureScore(**{**asdict(s), "devices": s.devices, "calibration": True})
        out.append(s)
    if progress is not None:
        progress(len(captures), len(captures))
    return out


@dataclass(frozen=True)
class Summary:
    """Mean and worst score of a set of captures."""

    count: int
    mean: float | None
    worst: float | None
    worst_name: str | None
    errors: int


def summarize(scores: Sequence[CaptureScore]) -> Summary:
    ok = [s for s in scores if s.score is not None]
    errors = len(scores) - len(ok)
    if not ok:
        return Summary(len(scores), None, None, None, errors)
    worst = min(ok, key=lambda s: s.score if s.score is not None else 0.0)
    return Summary(len(scores), float(np.mean([s.score for s in ok])), worst.score, worst.name,
                   errors)


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def markdown_table(scores: Sequence[CaptureScore]) -> str:
    """Kernel x workload table (rows: workloads; columns: kernels) with mean and worst, and
    the calibration and held-out sets summarized apart."""
    kernels = sorted({s.kernel for s in scores})
    workloads = sorted({s.name for s in scores})
    cell = {(s.name, s.kernel): s for s in scores}
    presets = sorted({s.preset for s in scores if s.preset and s.preset != s.kernel})
    lines = [f"Replayed with the preset of {', '.join(presets)} instead of each capture's own "
             "kernel.\n"] if presets else []
    lines += ["| workload | " + " | ".join(kernels) + " |",
             "|---|" + "---|" * len(kernels)]
    for w in workloads:
        row = []
        for k in kernels:
            s = cell.get((w, k))
            if s is None:
                row.append("")
            elif s.score is None:
                row.append("error")
            else:
                row.append(_pct(s.score) + (" (cal)" if s.calibration else ""))
        lines.append(f"| {w} | " + " | ".join(row) + " |")
    lines.append("")
    for title, subset in (("all", list(scores)),
                          ("calibration", [s for s in scores if s.calibration]),
                          ("held out", [s for s in scores if not s.calibration])):
        if not subset:
            continue
        sm = summarize(subset)
        lines.append(f"- {title}: {sm.count} captures, mean {_pct(sm.mean)}, worst "
                     f"{_pct(sm.worst)}" + (f" ({sm.worst_name})" if sm.worst_name else "")
                     + (f", {sm.errors} not scored" if sm.errors else ""))
    errors = [s for s in scores if s.error]
    if errors:
        lines.append("")
        lines.append("Not scored:")
        lines.extend(f"- {s.kernel or '?'} / {s.name}: {s.error}" for s in errors)
    return "\n".join(lines) + "\n"
