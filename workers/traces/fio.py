"""fio ``--output-format=json`` (and ``json+``) -> one row per job.

Each row flattens what the comparison page shows per direction (``read``, ``write``, ``trim``):
bandwidth in bytes/s and KiB/s, IOPS, I/O volume, runtime, and completion-latency mean and
percentiles in nanoseconds (trace-formats.md 5.1). Old layouts are normalised: fio 3.1 has no
``bw_bytes`` (derived from ``bw`` KiB/s x 1024) and fio 2.x reports ``clat``/``lat`` in
microseconds without the ``_ns`` suffix (converted). Text that fio prints before the JSON
document (``fio: ...`` warnings) is skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workers.errors import ParseError
from workers.traces.iostat import _load_json

_DIRECTIONS = ("read", "write", "trim")


def _lat(d: dict[str, Any], base: str) -> tuple[dict[str, Any] | None, float]:
    """(latency object, factor to ns) for ``clat``/``lat``/``slat``."""
    if isinstance(d.get(f"{base}_ns"), dict):
        return d[f"{base}_ns"], 1.0
    if isinstance(d.get(base), dict):
        return d[base], 1000.0  # fio 2.x: microseconds
    return None, 1.0


def _direction(prefix: str, d: dict[str, Any], row: dict[str, Any]) -> None:
    bw_kib = float(d.get("bw", 0.0))
    bw_bytes = float(d["bw_bytes"]) if "bw_bytes" in d else bw_kib * 1024.0
    row[f"{prefix}_bw_bytes"] = bw_bytes
    row[f"{prefix}_bw_kib"] = bw_kib
    row[f"{prefix}_iops"] = float(d.get("iops", 0.0))
    row[f"{prefix}_io_bytes"] = int(d.get("io_bytes", int(d.get("io_kbytes", 0)) * 1024))
    row[f"{prefix}_runtime_ms"] = int(d.get("runtime", 0))
    row[f"{prefix}_total_ios"] = int(d.get("total_ios", 0))
    for base in ("clat", "lat", "slat"):
        obj, factor = _lat(d, base)
        if obj is None:
            continue
        row[f"{prefix}_{base}_mean_ns"] = float(obj.get("mean", 0.0)) * factor
        row[f"{prefix}_{base}_max_ns"] = float(obj.get("max", 0.0)) * factor
        pct = obj.get("percentile")
        if isinstance(pct, dict) and pct:
            clean = {f"{float(k):g}": float(v) * factor for k, v in pct.items()}
            row[f"{prefix}_{base}_percentiles_ns"] = clean
            for p in ("50", "95", "99", "99.9"):
                if p in clean:
                    row[f"{prefix}_{base}_p{p}_ns"] = clean[p]


def parse_fio_json(path: str | Path, *, name: str | None = None) -> list[dict[str, Any]]:
    """One row per job of a fio JSON report.

    Raises:
        ParseError: invalid JSON, or no ``jobs`` list.
    """
    label = name or str(path)
    data = _load_json(path, label)
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise ParseError(label, "not fio JSON output (no 'jobs' list)")
    version = str(data.get("fio version", ""))
    rows: list[dict[str, Any]] = []
    try:
        for job in data["jobs"]:
            opts = job.get("job options", {}) or {}
            row: dict[str, Any] = {
                "jobname": str(job.get("jobname", "")),
                "groupid": int(job.get("groupid", 0)),
                "error": int(job.get("error", 0)),
                "fio_version": version,
                "source": label,
                "options": {str(k): str(v) for k, v in opts.items()},
            }
            for direction in _DIRECTIONS:
                d = job.get(direction)
                if isinstance(d, dict):
                    _direction(direction, d, row)
            row["usr_cpu"] = float(job.get("usr_cpu", 0.0))
            row["sys_cpu"] = float(job.get("sys_cpu", 0.0))
            rows.append(row)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ParseError(label, f"unexpected fio JSON layout: {exc}") from None
    return rows
