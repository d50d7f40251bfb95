"""Progress on stderr for commands that can take more than a second (parse, replay, upload).

A spinner with what is happening and the elapsed time (rich), shown only when stderr is a
terminal and ``--quiet`` was not given, and erased when the command ends, so pipes and CI logs
(``--json | jq``) stay clean. stdout is never touched: the results there
are the same with and without progress.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any


def wanted(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


class Progress:
    """``with Progress(enabled=..., what="parsing"): ...``; ``update(text)`` changes the text."""

    def __init__(self, *, enabled: bool, what: str) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.text = what
        self._live: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            try:
                from rich.console import Console
                from rich.progress import Progress as RichProgress
                from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn
            except ImportError:  # rich is a dependency; a stripped install just shows nothing
                self.enabled = False
                return self
            self._live = RichProgress(SpinnerColumn(), TextColumn("{task.description}"),
                                      TimeElapsedColumn(), console=Console(stderr=True),
                                      transient=True, redirect_stdout=False,
                                      redirect_stderr=False)
            self._task = self._live.add_task(self.text, total=None, start=True)
            self._live.start()
        return self

    def update(self, text: str) -> None:
        self.text = text
        if self._live is not None:
            self._live.update(self._task, description=text)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.stop()
        self._live = None
