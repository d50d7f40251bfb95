"""Structured logs: one JSON object per line when ``LOG_FORMAT=json``, with the ids of what the
process is working on.

:func:`log_context` binds ids (``job_id``, ``bundle_id``, ``comparison_id``, ``result_id``,
``task_id``) for the duration of a block (contextvars: right per thread and per task);
:class:`ContextFilter` copies them onto every record, so plain ``log.info(...)`` calls inside a
task carry them in both formats. ``extra={"bundle_id": ...}`` on a single call works too.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

IDS = ("job_id", "bundle_id", "comparison_id", "result_id", "task_id")
_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "blkreview_log_context", default=None)


@contextlib.contextmanager
def log_context(**ids: Any) -> Iterator[None]:
    """Bind ids to every log record of this block (nested blocks add to the outer ones)."""
    token = _context.set({**(_context.get() or {}), **{k: v for k, v in ids.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_context.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", <ids>, "exc"}``, one line per record."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in IDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)
