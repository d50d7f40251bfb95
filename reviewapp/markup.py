"""Comment and mail text to safe HTML: Markdown (markdown-it-py) sanitized with nh3.

* Raw HTML in a comment is never passed through (markdown-it ``html=False``), and the output is
  cleaned by nh3 with a short allow-list anyway: no script, no event handler, no ``style``, no
  ``javascript:`` / ``data:`` URL survives (tests/web/test_markup.py runs a payload list).
* Whitespace is kept: a newline is a line break; runs of trace lines (blkparse, ftrace,
  bpftrace) outside a code block are put in one, so they read in monospace.
* URLs become links; a Message-ID (``<...@...>`` after ``Message-ID:``/``In-Reply-To:``/
  ``References:``/``msgid:``, or a long one with digits) links to its archive through
  ``settings.BLKREVIEW_MSGID_URL`` (lore-style ``https://lore.kernel.org/r/{msgid}`` by default).
* ``@username`` mentions are linked-free bold text and returned by :func:`mentions`.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import nh3
from django.conf import settings
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token

ALLOWED_TAGS = {"p", "br", "pre", "code", "blockquote", "em", "strong", "a", "ul", "ol", "li",
                "h1", "h2", "h3", "h4", "h5", "h6", "hr", "del", "s", "span"}
ALLOWED_ATTRIBUTES: dict[str, set[str]] = {"a": {"href", "title"}, "span": {"class"},
                                           "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}

#: A blkparse line ("  8,0    3   1   0.000000000  1234  Q   R 2048 + 8 [dd]"), an ftrace
#: line ("dd-1234 [003] ..... 12.345678: block_bio_queue: ..."), a bpftrace/biosnoop row.
TRACE_LINE_RE = re.compile(
    r"^\s*(?:\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+[A-Z]{1,2}\s"
    r"|\S+-\d+\s+\[\d{3}\]\s.*\d+\.\d+:\s+block_"
    r"|\d+\.\d+\s+\S+\s+\d+\s+\S+\s+[RWDF]\w*\s+\d+\s+\d+)")
URL_RE = re.compile(r"https?://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]]")
MSGID_HINT_RE = re.compile(r"(?:message-id|in-reply-to|references|msgid)\s*:\s*$", re.I)
MENTION_RE = re.compile(r"(?<![\w@/])@([A-Za-z0-9_.+-]{1,150})\b")


def msgid_url(msgid: str) -> str:
    """The archive URL of a Message-ID (``settings.BLKREVIEW_MSGID_URL``, ``{msgid}``)."""
    template = getattr(settings, "BLKREVIEW_MSGID_URL", "https://lore.kernel.org/r/{msgid}")
    return template.replace("{msgid}", quote(msgid.strip("<>"), safe="@.+-_=$"))


def _looks_like_msgid(addr: str, before: str) -> bool:
    if MSGID_HINT_RE.search(before[-40:]):
        return True
    local = addr.split("@", 1)[0]
    return len(local) >= 16 and any(ch.isdigit() for ch in local) and any(
        ch in local for ch in ".-$_")


def fence_trace_lines(text: str) -> str:
    """Put runs of trace lines that are not already in a code block into ``` fences."""
    out: list[str] = []
    run: list[str] = []
    in_fence = False

    def flush() -> None:
        if run:
            out.extend(["```", *run, "```"])
            run.clear()

    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            flush()
            in_fence = not in_fence
            out.append(line)
        elif not in_fence and TRACE_LINE_RE.match(line):
            run.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)


def _link_text_token(tok: Token, state_md: Any) -> list[Token]:
    """Split a text token into text + link tokens for bare URLs."""
    text = tok.content
    pieces: list[Token] = []
    pos = 0
    for m in URL_RE.finditer(text):
        if m.start() > pos:
            t = Token("text", "", 0)
            t.content = text[pos:m.start()]
            pieces.append(t)
        url = m.group(0)
        if state_md.validateLink(url):
            op = Token("link_open", "a", 1)
            op.attrs = {"href": url}
            t = Token("text", "", 0)
            t.content = url
            pieces.extend([op, t, Token("link_close", "a", -1)])
        else:
            t = Token("text", "", 0)
            t.content = url
            pieces.append(t)
        pos = m.end()
    if not pieces:
        return [tok]
    if pos < len(text):
        t = Token("text", "", 0)
        t.content = text[pos:]
        pieces.append(t)
    return pieces


def _links_rule(state: Any) -> None:
    """Core rule: linkify bare URLs; turn Message-ID autolinks into archive links."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        in_link = 0
        prev_text = ""
        kids = block.children
        i = 0
        while i < len(kids):
            tok = kids[i]
            if tok.type == "link_open":
                href = str(tok.attrGet("href") or "")
                if tok.markup == "autolink" and href.startswith("mailto:") and \
                        _looks_like_msgid(href[7:], prev_text):
                    msgid = href[7:]
                    tok.attrSet("href", msgid_url(msgid))
                    tok.attrSet("title", f"Message-ID <{msgid}> in the archive")
                    if i + 1 < len(kids) and kids[i + 1].type == "text":
                        kids[i + 1].content = f"<{msgid}>"
                in_link += 1
                children.append(tok)
            elif tok.type == "link_close":
                in_link = max(0, in_link - 1)
                children.append(tok)
            elif tok.type == "text" and not in_link:
                children.extend(_link_text_token(tok, state.md))
            else:
                children.append(tok)
            if tok.type == "text":
                prev_text = tok.content
            elif tok.type in ("softbreak", "hardbreak"):
                prev_text = ""
            i += 1
        block.children = children


def _mentions_rule(state: Any) -> None:
    """Core rule: ``@name`` of an existing user rendered as a highlighted span."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        out: list[Token] = []
        in_link = 0
        for tok in block.children:
            if tok.type == "link_open":
                in_link += 1
            elif tok.type == "link_close":
                in_link = max(0, in_link - 1)
            if tok.type != "text" or in_link or "@" not in tok.content:
                out.append(tok)
                continue
            pos = 0
            for m in MENTION_RE.finditer(tok.content):
                if m.start() > pos:
                    t = Token("text", "", 0)
                    t.content = tok.content[pos:m.start()]
                    out.append(t)
                h = Token("html_inline", "", 0)
                h.content = f'<span class="mention">@{escape(m.group(1))}</span>'
                out.append(h)
                pos = m.end()
            if pos < len(tok.content):
                t = Token("text", "", 0)
                t.content = tok.content[pos:]
                out.append(t)
        block.children = out


def _md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True, "typographer": False})
    md.enable(["strikethrough"])
    md.core.ruler.push("blkreview_links", _links_rule)
    md.core.ruler.push("blkreview_mentions", _mentions_rule)
    return md


_MD = _md()


def sanitize(html: str) -> str:
    return nh3.clean(html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES,
                     url_schemes=URL_SCHEMES, link_rel="nofollow noopener noreferrer",
                     strip_comments=True)


def render_markdown(text: str) -> SafeString:
    """Comment Markdown -> sanitized HTML (safe to put in a page as is)."""
    html = _MD.render(fence_trace_lines(text or ""))
    return mark_safe(sanitize(html))  # noqa: S308 - nh3-cleaned just above


def render_plain(text: str) -> SafeString:
    """Plain text (a commit message, a cover letter): escaped, whitespace kept by the
    ``<pre>`` it goes in, URLs and Message-IDs linked."""
    out: list[str] = []
    pos = 0
    pattern = re.compile(URL_RE.pattern + r"|<([^<>\s@]+@[^<>\s@]+)>")
    for m in pattern.finditer(text or ""):
        out.append(escape(text[pos:m.start()]))
        if m.group(1):
            msgid = m.group(1)
            if _looks_like_msgid(msgid, text[max(0, m.start() - 40):m.start()]):
                out.append(f'<a href="{escape(msgid_url(msgid))}" rel="nofollow noopener '
                           f'noreferrer">&lt;{escape(msgid)}&gt;</a>')
            else:
                out.append(escape(m.group(0)))
        else:
            url = m.group(0)
            out.append(f'<a href="{escape(url)}" rel="nofollow noopener noreferrer">'
                       f'{escape(url)}</a>')
        pos = m.end()
    out.append(escape((text or "")[pos:]))
    return mark_safe(sanitize("".join(out)))  # noqa: S308 - escaped pieces, nh3-cleaned


def mentions(text: str) -> list[str]:
    """The user names ``@mentioned`` in ``text`` (outside code), in order, once each."""
    stripped = re.sub(r"```.*?```|`[^`\n]*`", " ", text or "", flags=re.S)
    return list(dict.fromkeys(m.group(1).rstrip(".") for m in MENTION_RE.finditer(stripped)))
