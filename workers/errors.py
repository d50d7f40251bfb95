"""Typed errors of the engine.

A parser never lets another exception escape: bad input raises :class:`ParseError` carrying the
file, where in it (byte offset for binary formats, line number for text) and why, so the web
can show "vda.blktrace.0, byte 4096: bad magic 0x00000000" and a CI bot can act on it.
"""

from __future__ import annotations


class BlkreviewError(Exception):
    """Base of every error the engine raises on purpose."""


class ParseError(BlkreviewError):
    """A trace, summary or manifest file could not be read.

    Args:
        path: the file's name as the user knows it (the archive member name, not a temp path).
        reason: what is wrong, in words a maintainer can act on.
        line: 1-based line number for text formats.
        offset: byte offset for binary formats.
    """

    def __init__(self, path: str, reason: str, *, line: int | None = None,
                 offset: int | None = None) -> None:
        self.path = str(path)
        self.reason = reason
        self.line = line
        self.offset = offset
        super().__init__(self.message)

    @property
    def where(self) -> str:
        if self.line is not None:
            return f"line {self.line}"
        if self.offset is not None:
            return f"byte {self.offset}"
        return ""

    @property
    def message(self) -> str:
        where = self.where
        return f"{self.path}, {where}: {self.reason}" if where else f"{self.path}: {self.reason}"

    def to_json(self) -> dict[str, object]:
        return {"file": self.path, "line": self.line, "offset": self.offset,
                "reason": self.reason, "message": self.message}


class UnpackError(ParseError):
    """An archive is unsafe (path traversal, links, device files) or over a limit."""


class UnknownFormatError(ParseError):
    """Content matched no known trace or summary format."""


class ModelConfigError(BlkreviewError):
    """A stack, workload or policy description is invalid (unknown field, bad value)."""
