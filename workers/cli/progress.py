"""Progress on stderr for commands that can take more than a second (parse, replay, lab, upload).

A rich progress line: what is happening, a bar with done/total when the work has a size (bytes
of the files being parsed, bios replayed, kernels of a lab run; a pulsing bar otherwise) and
the elapsed time. Shown only when stderr is a terminal and ``--quiet`` was not given, and erased
when the command ends, so pipes and CI logs (``--json | jq``) stay clean. stdout is never
touched: the results there are the same with and without progress.

The command's ``main`` opens one :class:`Progress` around the whole command; code below it
reaches it through :func:`current` (a disabled one when none is open), so the engine needs no
terminal code: it only calls the plain ``(done, total)`` callbacks it is given
(``workers.traces.ingest(progress=...)``, ``workers.model.replay(progress=...)``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

_current: Progress | None = None


def wanted(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def current() -> Progress:
    """The Progress the running command opened, or a disabled one (every call a no-op)."""
    return _current if _current is not None else Progress(enabled=False, what="")


def _size(n: int) -> str:
    """``0 B``, ``999 B``, ``1.5 kB``, ``12.3 MB`` (rich's decimal units, bytes as ``B``)."""
    from rich.filesize import decimal

    return f"{n} B" if n < 1000 else decimal(n)


def _count_column() -> Any:
    from rich.progress import ProgressColumn
    from rich.text import Text

    class CountColumn(ProgressColumn):
        """``12.3 MB/45.6 MB`` for bytes, ``1,200/5,000 bios`` for counted things."""

        def render(self, task: Any) -> Any:
            unit = task.fields.get("unit", "")
            if task.total is None:
                return Text("")
            done, total = int(task.completed), int(task.total)
            if unit == "bytes":
                return Text(f"{_size(done)}/{_size(total)}", style="progress.download")
            return Text(f"{done:,}/{total:,} {unit}".rstrip(), style="progress.download")

    return CountColumn()


class Progress:
    """``with Progress(enabled=..., what="parsing") as p: ...``

    ``update(text)`` changes the text; ``stage(text, total=N, unit="bytes")`` starts a
    measured step (a bar with done/total); ``advance(done, total)`` moves it; ``log(line)``
    prints a line above the bar (or plainly to stderr when the bar is off). ``console`` is for
    tests (rich's ``Console(force_terminal=True, file=...)``); otherwise stderr, and only when
    it is a terminal.
    """

    def __init__(self, *, enabled: bool, what: str, console: Any = None) -> None:
        self.enabled = enabled and (console is not None or sys.stderr.isatty())
        self.text = what
        self.console = console
        self._live: Any = None
        self._task: Any = None
        self._outer: Progress | None = None

    def __enter__(self) -> Progress:
        global _current
        self._outer, _current = _current, self
        if self.enabled:
            try:
                from rich.console import Console
                from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
                from rich.progress import Progress as RichProgress
            except ImportError:  # rich is a dependency; a stripped install just shows nothing
                self.enabled = False
                return self
            self._live = RichProgress(SpinnerColumn(), TextColumn("{task.description}"),
                                      BarColumn(), _count_column(), TimeElapsedColumn(),
                                      console=self.console or Console(stderr=True),
                                      transient=True, redirect_stdout=False,
                                      redirect_stderr=False)
            self._task = self._live.add_task(self.text, total=None, start=True, unit="")
            self._live.start()
        return self

    def update(self, text: str) -> None:
        """New text; the measured step (if any) goes on."""
        self.text = text
        if self._live is not None:
            self._live.update(self._task, description=text)

    def stage(self, text: str, *, total: int | None = None, unit: str = "") -> None:
        """A new step: its text, and its size when known (else a pulsing bar)."""
        self.text = text
        if self._live is not None:
            self._live.reset(self._task, total=total, completed=0, description=text, unit=unit)
            self._live.refresh()  # drawn now, even when the step ends before the next tick

    def advance(self, done: int, total: int | None = None) -> None:
        """``done`` of the step's ``total`` (a new total replaces the old one)."""
        if self._live is not None:
            if total is not None:
                self._live.update(self._task, total=total, completed=done)
            else:
                self._live.update(self._task, completed=done)
            task = self._live.tasks[0]
            if task.total is not None and done >= task.total:
                self._live.refresh()  # the finished step is drawn once, whatever its speed

    def callback(self) -> Callable[[int, int], None]:
        """``(done, total)`` for an engine function's ``progress=``."""
        return self.advance

    def log(self, line: str) -> None:
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        global _current
        if self._live is not None:
            self._live.stop()
        self._live = None
        _current = self._outer


def parse_bundle(paths: Sequence[Path], names: Sequence[str], **kwargs: Any) -> Any:
    """``workers.traces.ingest`` with a "parsing" bar of bytes done/total (the open progress)."""
    from workers.traces import ingest

    p = current()
    total = 0
    for path in paths:
        try:
            total += Path(path).stat().st_size
        except OSError:
            pass
    p.stage(f"parsing {len(paths)} file{'s' if len(paths) != 1 else ''}", total=total,
            unit="bytes")
    try:
        return ingest(paths, names=names, progress=p.callback(), **kwargs)
    finally:
        p.stage("analyzing")
