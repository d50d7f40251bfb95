"""Bundle manifest: ``blkreview.toml``, or raw ``/sys/block/*/queue/*`` values and /proc/mdstat.

The replay model needs the kernel version, the device stack and each device's queue limits; the
bpftrace/biosnoop parsers need disk name -> ``major,minor``. A bundle states them in
``blkreview.toml`` (layout in architecture.md, "Bundle manifest"; an optional ``[devices]``
table maps names such as ``ublkb0 = "259,0"``), or carries what the machine printed:

* ``queue_limits.txt`` style: ``## /sys/block/vda/queue`` headers then ``vda attr value`` lines;
* ``grep . /sys/block/*/queue/*`` style: ``/sys/block/vda/queue/max_sectors_kb:1280``;
* archive members ``.../block/<name>/queue/<attr>`` (one value per file) and
  ``.../block/<name>/dev`` (``254:0``);
* ``/proc/mdstat`` (md arrays: level, members in raid-disk order, chunk size, algorithm).

Without any of them, nothing is invented: limits stay empty and devices keep their numbers.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.errors import ParseError
from workers.events import DeviceInfo, dev_str, parse_dev
from workers.traces._textio import open_lines

_DEV_TEXT_RE = re.compile(r"^\s*(\d+)\s*[,:]\s*(\d+)\s*$")
_SYSFS_HDR_RE = re.compile(r"^## /sys/block/([^/\s]+)/queue\s*$")
_SYSFS_GREP_RE = re.compile(r"^/sys/block/([^/\s]+)/queue/([\w.-]+):(.*)$")
#: a blk-mq hardware queue line some dumps add (``vda 0 nr_tags 256 nr_reserved_tags 0 ...``,
#: from /sys/block/<dev>/mq/<n>/): the driver tags per hardware queue
_SYSFS_HCTX_RE = re.compile(r"^(\S+)\s+(\d+)\s+nr_tags\s+(\d+)\b")
_MD_LINE_RE = re.compile(r"^(md\w+)\s*:\s*(\w+)\s+(?:\(\w+\)\s+)?(\w+)\s+(.*)$")
_MD_MEMBER_RE = re.compile(r"([\w-]+)\[(\d+)\](?:\((\w)\))?")
_MAX_MANIFEST_BYTES = 1 << 20


def _value(text: str) -> int | str:
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


@dataclass
class Manifest:
    """What a bundle says about its machine. All fields optional."""

    kernel: str | None = None
    role: str | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    stack: dict[str, Any] = field(default_factory=dict)
    #: queue limits keyed by ``"maj,min"`` (or by device name until the number is known)
    limits: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: device name -> ``"maj,min"``
    devices: dict[str, str] = field(default_factory=dict)
    #: md arrays from /proc/mdstat
    md: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    #: ``strict = true``: a damaged binary record fails the bundle instead of being skipped
    strict: bool | None = None

    def dev_for_name(self, name: str) -> int | None:
        """The dev_t of a disk name (``ublkb0``), if the manifest maps it."""
        text = self.devices.get(name)
        if not text:
            return None
        try:
            return parse_dev(text)
        except ValueError:
            return None  # mapped to another name, or out of dev_t range: not a number

    def limits_for(self, dev: int, name: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        if name and name in self.limits:
            out.update(self.limits[name])
        out.update(self.limits.get(dev_str(dev), {}))
        return out

    def device_infos(self, dev_ids: Iterable[int],
                     known: Mapping[int, DeviceInfo]) -> dict[int, DeviceInfo]:
        """DeviceInfo for the given devices (those with events), names and limits merged in.

        Devices the manifest names but the traces never show are not added: analyzers report
        every device of the table, and an untraced member has nothing to report. They stay
        available in the manifest itself (``limits``, ``stack``) for the replay model.
        """
        names_by_dev = {v: k for k, v in self.devices.items()}
        out: dict[int, DeviceInfo] = {}
        for dev in sorted(set(dev_ids)):
            old = known.get(dev)
            name = (old.name if old and old.name else "") or names_by_dev.get(dev_str(dev), "")
            limits = dict(old.limits) if old else {}
            limits.update(self.limits_for(dev, name))
            out[dev] = DeviceInfo(dev=dev, name=name, limits=limits)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "role": self.role, "workload": self.workload,
                "stack": self.stack, "limits": self.limits, "devices": self.devices,
                "md": self.md, "sources": self.sources, "strict": self.strict}


def _read_text(path: Path, name: str) -> str:
    size = path.stat().st_size
    if size > _MAX_MANIFEST_BYTES:
        raise ParseError(name, f"manifest file too large ({size} bytes)")
    return path.read_bytes().decode("utf-8", errors="replace")


def _plain_json(data: Any) -> Any:
    """TOML dates and times become strings: manifests are stored as JSON with the results.

    Raises:
        ValueError: a float is nan or inf (JSON, and PostgreSQL's jsonb, have no such value).
    """
    return json.loads(json.dumps(data, default=str, allow_nan=False))


def _toml_error(name: str, text: str, exc: tomllib.TOMLDecodeError) -> ParseError:
    mo = re.search(r"line (\d+)", str(exc))
    # tomllib says "(at end of document)" for errors on the last line
    line = int(mo.group(1)) if mo else max(1, len(text.splitlines()))
    return ParseError(name, f"invalid TOML: {exc}", line=line)


def load_toml_manifest(path: Path, name: str, into: Manifest | None = None) -> Manifest:
    """Read ``blkreview.toml``.

    Raises:
        ParseError: invalid TOML (with the line tomllib reports) or wrong value types.
    """
    m = into or Manifest()
    text = _read_text(path, name)
    try:
        data = _plain_json(tomllib.loads(text))
    except ValueError as exc:  # nan/inf: valid TOML, but the manifest is stored as JSON
        if isinstance(exc, tomllib.TOMLDecodeError):
            raise _toml_error(name, text, exc) from None
        mo = re.search(r"=\s*[+-]?(?:nan|inf)\b", text)
        line = text.count("\n", 0, mo.start()) + 1 if mo else None
        raise ParseError(name, "a value is nan or inf (not a number a manifest can hold)",
                         line=line) from None
    if "kernel" in data:

        m.kernel = str(data["kernel"])
    if "role" in data:
        role = str(data["role"])
        if role not in ("baseline", "patched"):
            raise ParseError(name, f"role must be 'baseline' or 'patched', not {role!r}")
        m.role = role
    if "strict" in data:
        if not isinstance(data["strict"], bool):
            raise ParseError(name, f"strict must be true or false, not {data['strict']!r}")
        m.strict = data["strict"]
    for key in ("workload", "stack"):
        if key in data:
            if not isinstance(data[key], dict):
                raise ParseError(name, f"[{key}] must be a table")
            getattr(m, key).update(data[key])
    limits = data.get("limits", {})
    if not isinstance(limits, dict):
        raise ParseError(name, "[limits] must be a table of tables")
    for dev, values in limits.items():
        if not isinstance(values, dict):
            raise ParseError(name, f"[limits.\"{dev}\"] must be a table")
        key = _dev_key(dev, name)
        m.limits.setdefault(key, {}).update(values)
    devices = data.get("devices", {})
    if not isinstance(devices, dict):
        raise ParseError(name, "[devices] must map names to \"major,minor\"")
    for dname, dev in devices.items():
        m.devices[str(dname)] = _dev_key(str(dev), name)
    m.sources.append(name)
    return m


def _dev_key(text: str, name: str) -> str:
    mo = _DEV_TEXT_RE.match(text)
    if mo:
        return f"{int(mo.group(1))},{int(mo.group(2))}"
    if re.fullmatch(r"[\w.-]+", text):
        return text  # a device name; resolved through [devices] or sysfs dev files
    raise ParseError(name, f"bad device {text!r} (expected \"major,minor\" or a name)")


def load_sysfs(path: Path, name: str, into: Manifest) -> Manifest:
    """Read queue limits from one of the sysfs dump layouts (see the module docstring)."""
    parts = path.parts
    if len(parts) >= 3 and parts[-2] == "queue" and "block" in parts:
        dname = parts[-3]
        into.limits.setdefault(dname, {})[parts[-1]] = _value(_read_text(path, name))
        into.sources.append(name)
        return into
    if len(parts) >= 2 and parts[-1] == "dev" and "block" in parts:
        mo = _DEV_TEXT_RE.match(_read_text(path, name))
        if not mo:
            raise ParseError(name, "sysfs dev file must hold major:minor", line=1)
        into.devices[parts[-2]] = f"{int(mo.group(1))},{int(mo.group(2))}"
        return into
    current: str | None = None
    for lineno, line in open_lines(path, name):
        if not line.strip():
            continue
        mo = _SYSFS_HDR_RE.match(line)
        if mo:
            current = mo.group(1)
            continue
        mo = _SYSFS_GREP_RE.match(line)
        if mo:
            into.limits.setdefault(mo.group(1), {})[mo.group(2)] = _value(mo.group(3))
            continue
        mo = _SYSFS_HCTX_RE.match(line)
        if mo:
            into.limits.setdefault(mo.group(1), {})["queue_depth"] = int(mo.group(3))
            continue
        if current is not None:
            bits = line.split(None, 2)
            if len(bits) >= 2 and bits[0] == current:
                into.limits.setdefault(current, {})[bits[1]] = _value(
                    bits[2] if len(bits) > 2 else "")
                continue
        raise ParseError(name, f"unexpected line in queue limits dump: {line[:80]!r}",
                         line=lineno)
    into.sources.append(name)
    return into


def load_mdstat(path: Path, name: str, into: Manifest) -> Manifest:
    """Read md arrays from /proc/mdstat (``md_seq_show`` in drivers/md/md.c)."""
    arrays: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for _lineno, line in open_lines(path, name):
        mo = _MD_LINE_RE.match(line)
        if mo:
            members = sorted(((int(r), d, f or "") for d, r, f in _MD_MEMBER_RE.findall(
                mo.group(4))), key=lambda t: t[0])
            current = {"name": mo.group(1), "state": mo.group(2), "level": mo.group(3),
                       "members": [d for _, d, f in members if f not in ("S", "F")],
                       "spares": [d for _, d, f in members if f == "S"],
                       "failed": [d for _, d, f in members if f == "F"]}
            arrays.append(current)
            continue
        if current is not None:
            ck = re.search(r"(\d+)k chunks?", line)
            if ck:
                current["chunk_kb"] = int(ck.group(1))
            al = re.search(r"algorithm (\d+)", line)
            if al:
                current["algorithm"] = int(al.group(1))
    into.md.extend(arrays)
    into.sources.append(name)
    return into


def build_manifest(files: Iterable[tuple[Path, str, str]]) -> Manifest:
    """Combine every manifest-like file of a bundle; names are resolved to devices last."""
    m = Manifest()
    for path, name, fmt in files:
        if fmt == "manifest":
            load_toml_manifest(path, name, m)
        elif fmt == "sysfs-queue":
            load_sysfs(path, name, m)
        elif fmt == "mdstat":
            load_mdstat(path, name, m)
    # limits recorded by name move to "maj,min" when the name is mapped
    for dname in list(m.limits):
        if dname in m.devices:
            m.limits.setdefault(m.devices[dname], {}).update(m.limits.pop(dname))
    return m
