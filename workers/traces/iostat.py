"""iostat -x (text, any sysstat column set, -k or -m) and iostat -o JSON -> per-device rows.

Column sets changed across sysstat releases (11.x ``rrqm/s ... avgrq-sz avgqu-sz await svctm``,
12.0 ``r/s w/s rkB/s ... rareq-sz wareq-sz``, 12.1+ with discard and flush columns) and with
flags (``-m`` MB, ``-p`` partitions), so text is parsed **by header names**, never by position
(trace-formats.md 4.1). Mail-quoted tables (seed 000: ``Device r/s rMB/s ...`` then
``md0 52430.00 3276.87 ...``) parse the same way.

Every row is a dict with ``device``, ``sample`` (0 = the first report, which sysstat computes
since boot unless ``-y``), ``source`` (file name) and the metrics under the JSON key names
(``%util`` -> ``util``, ``%rrqm`` -> ``rrqm``). Megabyte columns (``-m``) are converted to the
kB keys (``rMB/s`` -> ``rkB/s`` x 1024) so text and JSON, -k and -m compare directly; the
original unit is kept in ``units``. ``avgqu-sz`` is renamed ``aqu-sz`` (same quantity).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from workers.errors import ParseError
from workers.traces._textio import open_lines

_HEADER_RE = re.compile(r"^Device:?\s+(?P<cols>.*\S)\s*$")
_BANNER_RE = re.compile(r"^Linux\s+(?P<release>\S+)\s+\((?P<host>[^)]*)\)")
_TIMESTAMP_RE = re.compile(r"^\d{2}/\d{2}/\d{2,4}\s+\d{2}:\d{2}:\d{2}(?:\s*[AP]M)?\s*$|"
                           r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
_NUMBER_RE = re.compile(r"^-?\d+(?:[.,]\d+)?$")
_MAX_JSON_BYTES = 256 << 20


def _key(column: str) -> str:
    key = column.lstrip("%")
    if key == "avgqu-sz":
        return "aqu-sz"
    return key


def _normalise(row: dict[str, Any], columns: list[str], values: list[float]) -> None:
    mb = False
    for col, val in zip(columns, values, strict=True):
        key = _key(col)
        if "MB/s" in key:
            key = key.replace("MB/s", "kB/s")
            val = val * 1024.0
            mb = True
        row[key] = val
    row["units"] = "MB" if mb else "kB"


def parse_iostat_text(path: str | Path, *, name: str | None = None) -> list[dict[str, Any]]:
    """Rows of every Device block in an ``iostat -x`` text file.

    Raises:
        ParseError: no Device table with data rows was found.
    """
    label = name or str(path)
    rows: list[dict[str, Any]] = []
    columns: list[str] | None = None
    sample = -1
    host: dict[str, str] = {}
    timestamp: str | None = None
    for lineno, line in open_lines(path, label):
        stripped = line.strip()
        b = _BANNER_RE.match(stripped)
        if b:
            host = {"release": b.group("release"), "host": b.group("host")}
            continue
        if _TIMESTAMP_RE.match(stripped):
            timestamp = stripped
            continue
        h = _HEADER_RE.match(stripped)
        if h:
            columns = h.group("cols").split()
            sample += 1
            continue
        if columns is None:
            continue
        parts = stripped.split()
        if len(parts) != len(columns) + 1 or not all(_NUMBER_RE.match(p) for p in parts[1:]):
            columns = None  # a blank line, avg-cpu block or prose ends the table
            continue
        values = [float(p.replace(",", ".")) for p in parts[1:]]
        if not all(math.isfinite(v) for v in values):
            raise ParseError(label, "number out of range", line=lineno)
        row: dict[str, Any] = {"device": parts[0], "sample": sample, "source": label}
        if timestamp:
            row["timestamp"] = timestamp
        row.update(host)
        _normalise(row, columns, values)
        rows.append(row)
    if not rows:
        raise ParseError(label, "no iostat -x device rows found under a 'Device' header")
    return rows


def _load_json(path: str | Path, label: str) -> Any:
    p = Path(path)
    size = p.stat().st_size
    if size > _MAX_JSON_BYTES:
        raise ParseError(label, f"JSON file too large ({size} bytes, limit {_MAX_JSON_BYTES})")
    text = p.read_bytes().decode("utf-8", errors="replace")
    start = text.find("{")
    if start < 0:
        raise ParseError(label, "no JSON object found", line=1)
    try:
        data, _end = json.JSONDecoder(parse_constant=_refuse_constant,
                                      parse_float=_finite_float).raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise ParseError(label, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
    except _NonFinite as exc:
        at = text.find(exc.token, start)
        raise ParseError(label, f"{exc.token} is not a finite number (summary rows are stored "
                                "as JSON, which has no NaN or infinity)",
                         line=text.count("\n", 0, at) + 1 if at >= 0 else None) from None
    except RecursionError:
        raise ParseError(label, "invalid JSON: nested too deeply") from None
    return data


class _NonFinite(Exception):
    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _refuse_constant(token: str) -> float:
    """``NaN`` / ``Infinity``: Python's json reads them, strict JSON (and jsonb) does not."""
    raise _NonFinite(token)


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):  # 1e400
        raise _NonFinite(token)
    return value


def parse_iostat_json(path: str | Path, *, name: str | None = None) -> list[dict[str, Any]]:
    """Rows of ``iostat -x -o JSON`` (``sysstat.hosts[].statistics[].disk[]``).

    Raises:
        ParseError: invalid JSON or not the sysstat layout.
    """
    label = name or str(path)
    data = _load_json(path, label)
    try:
        hosts = data["sysstat"]["hosts"]
        rows: list[dict[str, Any]] = []
        for host in hosts:
            for sample, stat in enumerate(host.get("statistics", [])):
                for disk in stat.get("disk", []):
                    row: dict[str, Any] = {"device": str(disk["disk_device"]), "sample": sample,
                                           "source": label, "release": host.get("release", ""),
                                           "host": host.get("nodename", "")}
                    if "timestamp" in stat:
                        row["timestamp"] = stat["timestamp"]
                    cols = [k for k in disk if k != "disk_device"]
                    vals = [float(disk[k]) for k in cols]
                    _normalise(row, cols, vals)
                    rows.append(row)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ParseError(label, f"not iostat JSON (sysstat.hosts[].statistics[].disk[]): "
                                f"{type(exc).__name__} {exc}") from None
    if not rows:
        raise ParseError(label, "iostat JSON holds no disk statistics")
    return rows
