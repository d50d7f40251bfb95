"""Filters of the collaboration pages: Markdown, linked plain text, Message-ID links."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from reviewapp import markup

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return markup.render_markdown(text or "")


@register.filter
def plain_links(text: str) -> SafeString:
    return markup.render_plain(text or "")


@register.filter
def msgid_link(msgid: str) -> SafeString:
    """``<msgid>`` linked to its archive (settings.BLKREVIEW_MSGID_URL)."""
    if not msgid:
        return SafeString("")
    return format_html('<a class="msgid" href="{}" rel="nofollow noopener noreferrer">'
                       '<code>&lt;{}&gt;</code></a>', markup.msgid_url(msgid), msgid)


@register.filter
def check_class(state: Any) -> str:
    return f"check-state check-{state or 'none'}"


@register.filter
def anchor_href(thread: Any) -> str:
    """The address of what a thread is about, in the comparison page's own address format
    (``#dev=254,32&stage=Q&section=seek``, plus ``chart``, ``side`` and ``x=lo,hi`` for a chart
    region: a time window x0..x1 gives the view x0-w/2..x1+w/2, w its width, not below 0 when
    the window is not; docs/urls.md) with ``?anchor=<thread>`` so the page highlights the row or chart;
    or the patch page at the diff line (``#L<n>``)."""
    from urllib.parse import quote

    a = thread.anchor or {}
    if thread.patch_id and not thread.comparison_id:
        base = thread.patch.get_absolute_url()
        return f"{base}#L{a.get('line')}" if a.get("line") else f"{base}#thread-{thread.pk}"
    base = thread.comparison.get_absolute_url()
    state = {k: str(a[k]) for k in ("dev", "stage", "section", "chart", "side") if a.get(k)}
    if a.get("x0") is not None and a.get("x1") is not None:
        # the view around the window, half its width either side: the page zooms there and
        # threads.js shades x0..x1 itself, so the window is seen in its context
        x0, x1 = float(a["x0"]), float(a["x1"])
        pad = (x1 - x0) / 2 or max(abs(x0) * 0.05, 1e-6)
        lo = x0 - pad if x0 - pad >= 0 or x0 < 0 else 0.0
        state["x"] = f"{lo:g},{x1 + pad:g}"
    if thread.anchor_kind == "comparison" or not state:
        return f"{base}#thread-{thread.pk}"
    frag = "&".join(f"{k}={quote(v, safe=',:')}" for k, v in state.items())
    return f"{base}?anchor={thread.pk}#{frag}"


@register.filter
def anchor_json(thread: Any) -> str:
    import json

    return json.dumps({"kind": thread.anchor_kind, **(thread.anchor or {})}, sort_keys=True)


@register.filter
def anchor_numbers_text(thread: Any) -> str:
    from reviewapp.services.notifications import anchor_text

    return "\n".join(anchor_text(thread)[1:]).strip()
