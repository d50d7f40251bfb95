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
