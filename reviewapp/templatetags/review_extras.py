"""Number formatting for the key-numbers table."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    return f"{value:,.{int(digits)}f}"


@register.filter
def signed(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    return f"{value:+,.{int(digits)}f}"


@register.filter
def pct(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:+.1f}%"


@register.filter
def trend(row: object) -> str:
    """CSS class: 'better' / 'worse' when the metric has a direction, else ''."""
    delta = getattr(row, "delta", None)
    better = getattr(row, "better", "")
    if not delta or not better:
        return ""
    good = delta > 0 if better == "higher" else delta < 0
    return "better" if good else "worse"


@register.filter
def get_item(mapping: dict, key: str) -> object:
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def file_summary(files: Any) -> str:
    """One line for a bundle's files: per-CPU blktrace files folded per device.

    ``md0.blktrace.0, md0.blktrace.1, vda.blktrace.0, ...`` (18 names) reads as
    ``blktrace per CPU 0,1: md0, vda, ...``; other files keep their name and format.
    """
    import re

    # a QuerySet (``b.files.all`` in a template) is iterated as is: calling .all() on it again
    # would drop the prefetched rows and cost a query per bundle
    from django.db.models import QuerySet

    items = list(files if isinstance(files, QuerySet) or not hasattr(files, "all")
                 else files.all())
    per_dev: dict[str, set[str]] = {}
    others: list[str] = []
    empty: list[str] = []
    for f in items:
        name, fmt = str(getattr(f, "name", "")), str(getattr(f, "format", "") or "")
        m = re.fullmatch(r"(.+)\.blktrace\.(\d+)", name)
        if fmt == "empty":
            empty.append(name)
        if m and fmt in ("blktrace", "empty"):
            per_dev.setdefault(m.group(1), set()).add(m.group(2))
        else:
            others.append(f"{name} ({fmt})" if fmt else name)
    parts = list(others)
    if per_dev:
        cpus = sorted({c for v in per_dev.values() for c in v}, key=int)
        parts.append(f"blktrace per CPU {','.join(cpus)}: {', '.join(per_dev)}")
    if empty:
        parts.append(f"empty (idle CPU, skipped): {', '.join(empty)}")
    return f"{len(items)} file{'s' if len(items) != 1 else ''}: " + "; ".join(parts)
