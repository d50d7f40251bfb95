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
    """The address of what a thread is about: the comparison page with device, stage and
    section in the query (the page's URL state) and the section or row as the fragment, or
    the patch page at the diff line."""
    from urllib.parse import urlencode

    a = thread.anchor or {}
    if thread.patch_id and not thread.comparison_id:
        base = thread.patch.get_absolute_url()
        return f"{base}#L{a.get('line')}" if a.get("line") else f"{base}#thread-{thread.pk}"
    base = thread.comparison.get_absolute_url()
    query = {k: a[k] for k in ("dev", "stage", "section") if a.get(k)}
    if thread.anchor_kind == "comparison" or not query:
        return f"{base}#thread-{thread.pk}"
    frag = f"section-{a['section']}" if a.get("section") else f"thread-{thread.pk}"
    return f"{base}?{urlencode(query)}&anchor={thread.pk}#{frag}"


@register.filter
def anchor_json(thread: Any) -> str:
    import json

    return json.dumps({"kind": thread.anchor_kind, **(thread.anchor or {})}, sort_keys=True)


@register.filter
def anchor_numbers_text(thread: Any) -> str:
    from reviewapp.services.notifications import anchor_text

    return "\n".join(anchor_text(thread)[1:]).strip()
