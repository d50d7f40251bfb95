"""The fidelity matrix: kernels x cases, read from a TOML data file, captured into a directory.

File layout (``workers/lab/matrix.toml`` is the project's matrix)::

    kernels = ["6.1.0-57-amd64", "6.12.117+deb13-amd64", ...]
    [disk]                       # default virtio disks of every boot
    size = "1G"
    [[case]]
    name = "raid5_d8_c64_dd4480k"
    family = "raid5-read"        # what mechanism it exercises
    split = "calibration"        # or "evaluation" (held out from fitting the model)
    stack = "raid5:disks=8,chunk=64k"
    workload = "dd bs=4480k count=40 iflag=direct"
    set = ["max_sectors_kb=1024"]
    disk = "queues=1"            # optional: cases with other disks boot separately

One boot per (kernel, disk spec) runs all its cases. Output: ``OUT/<kernel>/<case>/`` and
``OUT/<kernel>/<case>.tar.zst`` (see :mod:`workers.lab.runner`), plus ``OUT/index.json``
listing every cell (kernel, case, family, split, ok, bundle) and ``OUT/matrix.toml``, the
definition that produced it. A cell already captured is skipped (delete it to redo it).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.lab.host import LabError
from workers.lab.qemu import DiskSpec, parse_disk_spec
from workers.lab.script import Case

SPLITS = ("calibration", "evaluation")


@dataclass
class MatrixCase:
    case: Case
    family: str
    split: str
    disk: str = ""


@dataclass
class Matrix:
    kernels: list[str]
    disk: str
    cases: list[MatrixCase] = field(default_factory=list)

    def groups(self) -> dict[str, list[MatrixCase]]:
        """Cases by their disk spec (one boot each)."""
        out: dict[str, list[MatrixCase]] = {}
        for c in self.cases:
            spec = ",".join(x for x in (self.disk, c.disk) if x)
            out.setdefault(spec, []).append(c)
        return out


def load_matrix(path: Path) -> Matrix:
    """Read and validate a matrix file.

    Raises:
        LabError: bad TOML, an unknown key, a bad stack/workload/setting, a duplicate name.
    """
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LabError(f"matrix {path}: {exc}") from None
    kernels = data.get("kernels", [])
    if not isinstance(kernels, list) or not all(isinstance(k, str) for k in kernels):
        raise LabError(f"matrix {path}: kernels must be a list of versions")
    disk = data.get("disk", {})
    disk_text = ",".join(f"{k}={v}" for k, v in disk.items()) if isinstance(disk, dict) else ""
    if disk_text:
        parse_disk_spec(disk_text)
    m = Matrix(kernels, disk_text)
    seen: set[str] = set()
    for i, raw in enumerate(data.get("case", []), 1):
        unknown = set(raw) - {"name", "family", "split", "stack", "workload", "set", "disk",
                              "note"}
        if unknown:
            raise LabError(f"matrix case {i}: unknown key(s) {', '.join(sorted(unknown))}")
        name = raw.get("name", "")
        if name in seen:
            raise LabError(f"matrix case {name!r} appears twice")
        seen.add(name)
        split = raw.get("split", "calibration")
        if split not in SPLITS:
            raise LabError(f"matrix case {name}: split must be one of {', '.join(SPLITS)}")
        try:
            case = Case.make(name, raw["stack"], raw["workload"], list(raw.get("set", [])))
        except KeyError as exc:
            raise LabError(f"matrix case {name or i}: {exc.args[0]} is missing") from None
        except LabError as exc:
            raise LabError(f"matrix case {name}: {exc}") from None
        dtext = str(raw.get("disk", ""))
        if dtext:
            parse_disk_spec(",".join(x for x in (disk_text, dtext) if x))
        m.cases.append(MatrixCase(case, str(raw.get("family", "")), split, dtext))
    if not m.cases:
        raise LabError(f"matrix {path}: no [[case]]")
    return m


def _merge_disk(spec: str) -> DiskSpec:
    # later keys win: "size=1G,queues=2,queues=1" -> queues=1
    merged: dict[str, str] = {}
    for part in filter(None, spec.split(",")):
        k, _, v = part.partition("=")
        merged[k] = v
    return parse_disk_spec(",".join(f"{k}={v}" for k, v in merged.items())) if merged \
        else DiskSpec()


def run_matrix(path: Path, out: Path, *, only: list[str] | None = None, accel: str = "auto",
               progress: Callable[[str], None] | None = None,
               kernels: list[str] | None = None,
               warn: Callable[[str], None] | None = None) -> int:
    """Capture every cell not yet captured. Returns 0 when every cell has a bundle.

    ``progress`` gets every stage's line, ``warn`` (default: ``progress``) the lines that
    must show even when progress is quiet: a failed boot, a skipped kernel.

    A kernel the lab cannot boot (:class:`~workers.lab.kernels.KernelUnbootable`, e.g. the
    archive lacks its modules package) is skipped before it boots, with one line
    ``[<kernel>] skipped: ...`` and an entry in index.json's ``skipped``; it is no failure
    (no case of it could ever run) and the other kernels are captured.
    """
    from workers.lab.kernels import KernelUnbootable, fetch_debian
    from workers.lab.runner import run_kernel

    say = progress or (lambda _t: None)
    alert = warn or say
    m = load_matrix(path)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, out / "matrix.toml")
    pats = [re.compile(p) for p in only or []]
    index_path = out / "index.json"
    index = _Index(index_path)
    cells, skipped = index.cells, index.skipped
    failures = 0
    for kspec in kernels or m.kernels:
        try:
            kernel = fetch_debian(kspec, progress=say)
        except KernelUnbootable as exc:
            alert(f"[{exc.version}] skipped: {exc}")
            skipped[exc.version] = str(exc)[:500]
            index.write()
            continue
        index.unskip(kspec, kernel.version)
        for gi, (dspec, group) in enumerate(m.groups().items()):
            todo = [c for c in group
                    if (not pats or any(p.search(c.case.name) or p.search(kernel.version)
                                        for p in pats))
                    and not (out / kernel.version / f"{c.case.name}.tar.zst").exists()]
            if not todo:
                continue
            t0 = time.monotonic()
            try:
                res = run_kernel(kernel, [c.case for c in todo], out, disk=_merge_disk(dspec),
                                 accel=accel, progress=say, label=f"boot{gi}")
            except LabError as exc:
                alert(f"[{kernel.version}] boot failed: {exc}")
                failures += len(todo)
                for c in todo:
                    cells[f"{kernel.version}/{c.case.name}"] = {
                        "kernel": kernel.version, "case": c.case.name, "family": c.family,
                        "split": c.split, "ok": False, "reason": str(exc)[:500]}
                continue
            by_name = {c.case.name: c for c in todo}
            for r in res.cases:
                mc = by_name[r.name]
                if not r.ok:
                    failures += 1
                cells[f"{kernel.version}/{r.name}"] = {
                    "kernel": kernel.version, "case": r.name, "family": mc.family,
                    "split": mc.split, "stack": mc.case.stack.spec,
                    "workload": mc.case.workload.spec,
                    "settings": [s.text for s in mc.case.settings], "disk": dspec,
                    "ok": r.ok, "reason": r.reason,
                    "bundle": str(r.bundle.relative_to(out)) if r.bundle else None}
            say(f"[{kernel.version}] {len(todo)} case(s) in {time.monotonic() - t0:.0f} s "
                f"({res.accel})")
            index.write()
    index.write()
    return 1 if failures else 0


class _Index:
    """This run's cells and skipped kernels, merged into ``index.json`` on every write.

    Two matrix runs may share one ``--out`` (one per kernel, the second waiting for the
    first's VM): each writes only the entries it captured or skipped, into the file as it is
    now (re-read under an ``flock``), so neither drops the other's cells. The file is
    replaced atomically: ``python -m workers fidelity`` may read it while a run is still
    capturing (its ``split`` marks the calibration cells).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cells: dict[str, Any] = {}
        self.skipped: dict[str, str] = {}
        self._unskipped: set[str] = set()

    def unskip(self, *versions: str) -> None:
        """These kernel names booted this time: drop them from ``skipped``."""
        for v in versions:
            self.skipped.pop(v, None)
            self._unskipped.add(v)

    def write(self) -> None:
        with open(self.path.with_name(f".{self.path.name}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            now: dict[str, Any] = (json.loads(self.path.read_text())
                                   if self.path.exists() else {})
            now.setdefault("cells", {}).update(self.cells)
            skipped = now.setdefault("skipped", {})
            for v in self._unskipped:
                skipped.pop(v, None)
            skipped.update(self.skipped)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(now, indent=1, sort_keys=True))
            tmp.replace(self.path)


def export_subset(src: Path, dest: Path, *, kernels: list[str] | None = None,
                  only: list[str] | None = None, max_bundle_bytes: int = 700_000) -> list[str]:
    """Unpack captured bundles into ``dest/<split>/<kernel>/<case>/`` (regression data).

    Capture directories (a ``blkreview.toml`` beside the traces) are what both the ingester
    and ``python -m workers fidelity`` read. Keeps cells whose kernel is in ``kernels`` (all
    when None), whose case matches one of ``only`` (all when None) and whose unpacked size is
    at most ``max_bundle_bytes``; writes ``dest/index.json`` with those cells (``bundle`` is
    the directory, relative to ``dest``). Returns the copied cell keys.

    Raises:
        LabError: ``src`` has no index.json (nothing captured there).
    """
    import tarfile

    import zstandard

    index_path = src / "index.json"
    if not index_path.exists():
        raise LabError(f"{src}: no index.json (capture the matrix first)")
    cells = json.loads(index_path.read_text()).get("cells", {})
    pats = [re.compile(p) for p in only or []]
    kept: dict[str, Any] = {}
    for key, cell in sorted(cells.items()):
        if not cell.get("ok") or not cell.get("bundle"):
            continue
        if kernels and cell["kernel"] not in kernels:
            continue
        if pats and not any(p.search(cell["case"]) for p in pats):
            continue
        archive = src / cell["bundle"]
        if not archive.exists():
            continue
        with archive.open("rb") as raw, \
                zstandard.ZstdDecompressor().stream_reader(raw) as zr, \
                tarfile.open(fileobj=zr, mode="r|") as tar:
            members = {}
            for m in tar:
                f = tar.extractfile(m) if m.isfile() else None
                if f is not None and "/" in m.name and ".." not in m.name:
                    members[m.name.split("/", 1)[1]] = f.read()
        if sum(len(v) for v in members.values()) > max_bundle_bytes:
            continue
        rel = Path(cell["split"]) / cell["kernel"] / cell["case"]
        out = dest / rel
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for name, data in members.items():
            (out / Path(name).name).write_bytes(data)
        kept[key] = dict(cell, bundle=str(rel))
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "index.json").write_text(json.dumps({"cells": kept}, indent=1, sort_keys=True))
    return sorted(kept)
