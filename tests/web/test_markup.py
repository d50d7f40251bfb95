"""reviewapp.markup: Markdown + nh3. Whitespace, code blocks, trace lines, links, Message-ID
archive links, mentions; and the XSS payload list (tests/data/xss/payloads.txt) inert."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.test import override_settings

from reviewapp.markup import mentions, render_markdown, render_plain

PAYLOADS = [line for line in (Path(__file__).resolve().parents[1] / "data" / "xss" /
                              "payloads.txt").read_text().splitlines() if line.strip()]


class Elements(HTMLParser):
    """The real elements and attributes of an HTML fragment (escaped text is not one)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


SAFE_TAGS = {"p", "br", "pre", "code", "blockquote", "em", "strong", "a", "ul", "ol", "li",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "del", "s", "span"}


@pytest.mark.parametrize("payload", PAYLOADS)
def test_xss_payload_is_inert(payload):
    """No script element, event handler, style, javascript:/vbscript:/data: URL survives."""
    html = render_markdown(payload)
    parser = Elements()
    parser.feed(html)
    for tag, attrs in parser.found:
        assert tag in SAFE_TAGS, html
        assert set(attrs) <= {"href", "title", "rel", "class", "start"}, html
        href = (attrs.get("href") or "").strip().lower()
        if href:
            assert href.startswith(("http://", "https://", "mailto:")), html


def test_whitespace_code_blocks_quotes_kept():
    """Line breaks stay, fenced code and quotes render, indentation inside code is kept."""
    html = render_markdown("line one\nline two\n\n```\n  indented\n\tTab\n```\n\n> quoted")
    assert "line one<br" in html
    assert "<pre><code>  indented\n\tTab\n</code></pre>" in html
    assert "<blockquote>" in html


def test_trace_lines_become_a_code_block():
    """blkparse and ftrace lines outside a code block are shown in monospace."""
    text = ("See:\n  8,0    3        1     0.000000000  1234  Q   R 2048 + 8 [dd]\n"
            "  8,0    3        2     0.000001000  1234  G   R 2048 + 8 [dd]\n"
            "dd-1234 [003] ..... 12.345678: block_bio_queue: 8,0 R 2048 + 8 [dd]\nthanks")
    html = render_markdown(text)
    assert html.count("<pre><code>") == 1
    assert "0.000001000  1234  G   R 2048 + 8 [dd]" in html
    assert "block_bio_queue" in html.split("<pre><code>")[1].split("</code></pre>")[0]


@override_settings(BLKREVIEW_MSGID_URL="https://mail.example/r/{msgid}")
def test_urls_and_message_ids_link_archive_template():
    """Bare URLs link; a Message-ID links through the configured template; a mail address
    stays a mailto link."""
    html = render_markdown("see https://lore.kernel.org/linux-block/ and "
                           "Message-ID: <20251104-split-v2-0-abc@kernel.org>, ask <hch@lst.de>")
    assert '<a href="https://lore.kernel.org/linux-block/"' in html
    assert 'href="https://mail.example/r/20251104-split-v2-0-abc@kernel.org"' in html
    assert 'href="mailto:hch@lst.de"' in html
    plain = render_plain("In-Reply-To: <abc@def.org>\nhttps://x.org/a?b=1&c=2 <script>")
    assert 'href="https://mail.example/r/abc@def.org"' in plain
    assert 'href="https://x.org/a?b=1&amp;c=2"' in plain and "&lt;script&gt;" in plain


def test_default_archive_is_lore():
    """Without configuration Message-IDs go to lore.kernel.org/r/."""
    assert 'href="https://lore.kernel.org/r/x1234567890abcdef.a@b.c"' in render_markdown(
        "msgid: <x1234567890abcdef.a@b.c>")


def test_mentions_outside_code():
    """@names are found once each, not inside code; they render highlighted."""
    assert mentions("@alice and @bob, again @alice `@carol` ```\n@dave\n```") == ["alice", "bob"]
    assert '<span class="mention">@alice</span>' in render_markdown("hi @alice")
