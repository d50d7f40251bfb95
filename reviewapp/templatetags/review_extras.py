"""Number formatting for the key-numbers table."""

from __future__ import annotations

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
