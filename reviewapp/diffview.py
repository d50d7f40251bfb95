"""A patch's diff as highlighted lines (Pygments' DiffLexer; CSS served from static/).

Each line keeps its position in the diff (``n``, 1-based), the file it belongs to and its line
number in the new (or old, for a removed line) file, so a thread can be anchored on it
(``{"file": ..., "line": n}``) and the page can scroll back to ``#L<n>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_FILE_RE = re.compile(r"^diff --git a/(\S+) b/(\S+)")
MAX_DIFF_LINES = 20000


@dataclass(frozen=True)
class DiffLine:
    n: int
    html: str
    file: str
    kind: str  # "add", "del", "ctx", "hunk", "meta"
    new_line: int | None
    old_line: int | None

    @property
    def file_line(self) -> int | None:
        return self.new_line if self.new_line is not None else self.old_line


def formatter() -> HtmlFormatter:
    return HtmlFormatter(nowrap=True, cssclass="highlight")


def stylesheet() -> str:
    """The CSS of the highlighted diff (written to static/reviewapp/pygments.css)."""
    defs = HtmlFormatter(cssclass="highlight", style="default").get_style_defs(".highlight")
    return "\n".join(line for line in defs.splitlines() if line.startswith(".highlight"))


def diff_lines(diff: str) -> list[DiffLine]:
    text = "\n".join((diff or "").split("\n")[:MAX_DIFF_LINES])
    if not text.strip():
        return []
    html = highlight(text, DiffLexer(stripnl=False, ensurenl=False), formatter())
    raw_lines = text.split("\n")
    html_lines = html.split("\n")
    out = []
    file = ""
    old = new = 0
    for i, raw in enumerate(raw_lines):
        h = html_lines[i] if i < len(html_lines) else ""
        fm = _FILE_RE.match(raw)
        hm = _HUNK_RE.match(raw)
        new_line = old_line = None
        if fm:
            file, kind = fm.group(2), "meta"
        elif hm:
            old, new, kind = int(hm.group(1)), int(hm.group(2)), "hunk"
        elif raw.startswith(("+++", "---", "index ", "new file", "deleted file", "similarity",
                             "rename ")):
            kind = "meta"
        elif raw.startswith("+"):
            kind, new_line = "add", new
            new += 1
        elif raw.startswith("-"):
            kind, old_line = "del", old
            old += 1
        else:
            kind, new_line = "ctx", new
            old += 1
            new += 1
        out.append(DiffLine(n=i + 1, html=h, file=file, kind=kind, new_line=new_line,
                            old_line=old_line))
    return out
