"""A case's output directory -> a bundle: ``blkreview.toml`` + traces + records, and ``.tar.zst``.

Reads what the guest script wrote (``devices.txt``, ``queue_limits.txt``, ``md_members.txt``,
``md_examine.txt``, a loop file's ``loop_extents.txt``, ...), states the stack and every device's limits in the manifest layout the
ingester reads (architecture.md, "Bundle manifest"), and packs the files the ingester should see
into a ``.tar.zst`` that uploads as is. Logs (workload output, blktrace's own report) stay in
the directory beside the archive.
"""

from __future__ import annotations

import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import zstandard

from workers.errors import ParseError
from workers.lab.host import LabError
from workers.traces.filefrag import parse_filefrag

#: files of a case directory that go into the archive (besides ``*.blktrace.N``)
#: (queue_limits.txt stays out: the manifest holds the same values, parsed, and the raw
#: ``scheduler`` line "[none] mq-deadline" would override its "none")
ARCHIVED = ("blkreview.toml", "md_params.txt", "commands.txt", "uname.txt", "fio.json",
            "loop_extents.txt", "loop_extents_after.txt", "fs_layout.txt", "fs_journal.txt")
_INT_RE = re.compile(r"^-?\d+$")
#: queue attributes that are not limits (noise in the manifest)
_SKIP_ATTRS = {"size_sectors"}


def parse_queue_limits(text: str) -> dict[str, dict[str, Any]]:
    """``queue_limits.txt`` -> {name: {attr: value}} (ints where numeric, the active scheduler)."""
    out: dict[str, dict[str, Any]] = {}
    current = None
    for line in text.splitlines():
        mo = re.match(r"^## /sys/block/([^/\s]+)/queue$", line)
        if mo:
            current = mo.group(1)
            out.setdefault(current, {})
            continue
        bits = line.split(None, 2)
        if current is None or len(bits) < 2 or bits[0] != current:
            continue
        attr, value = bits[1], bits[2].strip() if len(bits) > 2 else ""
        if attr.isdigit():
            continue  # per-hctx tag lines: "vda 0 nr_tags 256 ..."
        if attr == "scheduler":
            sel = re.search(r"\[([^\]]+)\]", value)
            value = sel.group(1) if sel else value
        out[current][attr] = int(value) if _INT_RE.match(value) else value
    return out


def parse_devices(text: str) -> list[tuple[str, str, str]]:
    """``devices.txt`` -> [(role, name, "maj,min")]."""
    out = []
    for line in text.splitlines():
        bits = line.split()
        if len(bits) == 3 and ":" in bits[2]:
            out.append((bits[0], bits[1], bits[2].replace(":", ",")))
    return out


def md_data_offset(examine: str) -> int | None:
    """``Data Offset : 4096 sectors`` from ``mdadm --examine``."""
    mo = re.search(r"Data Offset\s*:\s*(\d+)\s*sectors", examine)
    return int(mo.group(1)) if mo else None


#: md personalities whose mapping needs every member's data size (``sizes_sectors``)
SIZED_MD_KINDS = ("linear", "raid10")


def md_member_sizes_of(case_dir: Path, kind: str) -> tuple[int, ...]:
    """Member data sizes (sectors, raid-disk order) of an md linear or raid10 array captured
    in ``case_dir``; ``()`` for other kinds or where the files do not say.

    md-linear moves to the next member where each member's ``rdev->sectors`` ends
    (``which_dev`` over ``end_sector``; ``linear_conf`` rounds each down to whole chunks), and
    raid10's far copies lie ``geo.stride`` sectors into every member, which ``calc_sectors``
    derives from the array's one ``mddev->dev_sectors``: every member has the examined
    member's size, not a share of the array. Read from ``md_examine.txt`` (``mdadm
    --examine``'s ``Avail Dev Size``, :func:`workers.model.stack.md_member_sizes`),
    ``md_members.txt`` (raid-disk order), ``mdstat`` (a linear array's size, for members not
    examined) and ``md_params.txt`` (chunk size).
    """
    from workers.model.stack import md_member_sizes

    exam = case_dir / "md_examine.txt"
    mem = case_dir / "md_members.txt"
    if kind not in SIZED_MD_KINDS or not exam.is_file() or not mem.is_file():
        return ()
    names = [b[1] for b in (ln.split() for ln in mem.read_text(errors="replace").splitlines())
             if len(b) == 3]
    if not names:
        return ()
    array = 0
    mdstat = case_dir / "mdstat"
    if mdstat.is_file() and kind == "linear":
        mo = re.search(r"^\s+(\d+) blocks", mdstat.read_text(errors="replace"), re.M)
        array = int(mo.group(1)) * 2 if mo else 0
    chunk = 0
    params = case_dir / "md_params.txt"
    if params.is_file():
        mo = re.search(r"^chunk_size (\d+)", params.read_text(errors="replace"), re.M)
        chunk = int(mo.group(1)) >> 9 if mo else 0
    return md_member_sizes(exam.read_text(errors="replace"), names, array_sectors=array,
                           chunk_sectors=chunk)


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    s = str(v)
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{s}"'


def toml_dump(data: dict[str, Any]) -> str:
    """A small TOML writer: top-level scalars, then tables (one level, keys quoted if needed)."""
    lines = [f"{k} = {toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for k, v in data.items():
        if not isinstance(v, dict):
            continue
        sub = {kk: vv for kk, vv in v.items() if isinstance(vv, dict)}
        if len(sub) == len(v) and sub:
            for kk, vv in sub.items():
                lines.append(f'[{k}."{kk}"]')
                lines += [f"{a} = {toml_value(b)}" for a, b in vv.items()]
            continue
        lines.append(f"[{k}]")
        for kk, vv in v.items():
            key = kk if re.fullmatch(r"[A-Za-z0-9_-]+", kk) else toml_value(kk)
            lines.append(f"{key} = {toml_value(vv)}")
    return "\n".join(lines) + "\n"


def build_manifest(case_dir: Path, *, stack_fields: dict[str, Any], workload: dict[str, Any],
                   lab: dict[str, Any], role: str | None = None) -> dict[str, Any]:
    """The manifest of one case from the guest's records.

    Raises:
        LabError: the guest wrote no device list (the case never got to tracing).
    """
    dev_file = case_dir / "devices.txt"
    if not dev_file.exists():
        raise LabError(f"{case_dir.name}: no devices.txt (the stack was never built)")
    devices = parse_devices(dev_file.read_text())
    if not devices:
        raise LabError(f"{case_dir.name}: devices.txt is empty")
    names = {name: dev for _, name, dev in devices}
    top = next(dev for role_, _, dev in devices if role_ == "top")
    members = [dev for role_, _, dev in devices if role_ == "member"]
    mdm = case_dir / "md_members.txt"
    if mdm.exists():  # raid-disk order (missing slots left out; see missing_slots)
        order = []
        for line in mdm.read_text().splitlines():
            bits = line.split()
            if len(bits) == 3:
                order.append(bits[2].replace(":", ","))
        members = order or members
    stack: dict[str, Any] = {"top": top}
    stack.update(stack_fields)
    if members:
        stack["members"] = members
    exam = case_dir / "md_examine.txt"
    if exam.exists():
        off = md_data_offset(exam.read_text(errors="replace"))
        if off is not None:
            stack["data_offset_sectors"] = off
    sizes = md_member_sizes_of(case_dir, str(stack.get("kind") or ""))
    if sizes and len(sizes) == len(members):
        stack["sizes_sectors"] = list(sizes)
    mdp = case_dir / "md_params.txt"
    if mdp.exists():  # raid4/5/6: how many stripe_heads the stripe cache keeps
        mo = re.search(r"^stripe_cache_size\s+(\d+)", mdp.read_text(errors="replace"), re.M)
        if mo:
            stack["stripe_cache_size"] = int(mo.group(1))
    limits: dict[str, dict[str, Any]] = {}
    ql = case_dir / "queue_limits.txt"
    if ql.exists():
        for name, values in parse_queue_limits(ql.read_text(errors="replace")).items():
            if name in names:
                limits[names[name]] = {k: v for k, v in values.items() if k not in _SKIP_ATTRS}
    uname = case_dir.parent.parent / "uname.txt"
    kernel = uname.read_text().strip() if uname.exists() else lab.get("kernel", "")
    data: dict[str, Any] = {"kernel": kernel}
    if role:
        data["role"] = role
    data["workload"] = workload
    data["stack"] = stack
    data["limits"] = limits
    data["devices"] = dict(names)
    cmds = case_dir / "commands.txt"
    lab = dict(lab)
    if cmds.exists():
        lab["commands"] = [ln[2:] for ln in cmds.read_text(errors="replace").splitlines()
                           if ln.startswith("+ ")]
    dm = case_dir / "dm_table.txt"
    if dm.exists():
        stack["dm_table"] = [ln for ln in dm.read_text(errors="replace").splitlines()
                             if ":" in ln]
    ext = case_dir / "loop_extents.txt"
    if ext.exists():  # a loop file's extent map (filefrag -v) when the workload started
        try:
            stack.update(parse_filefrag(ext.read_text(errors="replace"),
                                        ext.name).manifest_fields())
        except ParseError as exc:  # filefrag missing or failed: the manifest says nothing
            lab["notes"] = [*lab.get("notes", []), f"loop_extents.txt: {exc.reason}"]
    data["lab"] = lab
    return data


def write_bundle(case_dir: Path, dest_dir: Path, manifest: dict[str, Any]) -> Path:
    """Copy the case's files to ``dest_dir/<case>/``, write the manifest, pack ``.tar.zst``.

    Returns the archive path (``dest_dir/<case>.tar.zst``).
    """
    name = case_dir.name
    out = dest_dir / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for f in sorted(case_dir.iterdir()):
        if f.is_file() and (f.stat().st_size > 0 or ".blktrace." not in f.name):
            shutil.copy2(f, out / f.name)
    uname = case_dir.parent.parent / "uname.txt"
    if uname.exists():
        shutil.copy2(uname, out / "uname.txt")
    (out / "blkreview.toml").write_text(toml_dump(manifest))
    members = [f for f in sorted(out.iterdir())
               if f.name in ARCHIVED or (re.search(r"\.blktrace\.\d+$", f.name)
                                         and f.stat().st_size > 0)
               ]
    archive = dest_dir / f"{name}.tar.zst"
    tmp = archive.with_name(archive.name + ".tmp")
    with tmp.open("wb") as raw, \
            zstandard.ZstdCompressor(level=10).stream_writer(raw, closefd=False) as zw, \
            tarfile.open(fileobj=zw, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for f in members:
            info = tar.gettarinfo(str(f), arcname=f"{name}/{f.name}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with f.open("rb") as fh:
                tar.addfile(info, fh)
    tmp.rename(archive)
    return archive
