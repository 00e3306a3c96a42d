"""Progress of long steps on stderr: a transient rich spinner on a terminal, a plain line per
stage when stderr is a pipe or a log (so a CI log shows what the 30 s went to), nothing with
``--json`` (stdout then carries one document, and stderr stays free of chatter).

    with Steps(enabled=not as_json) as steps:
        steps.stage("building hello.py (10-30 s)")
        ...

    with slow_wait(lambda: "starting MCP servers", enabled=not as_json):
        await something_that_may_take_long()
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from pincer.cli.console import stderr, stderr_console

__all__ = ["SLOW_WAIT_NOTICE_S", "Steps", "slow_wait"]

# A wait shorter than this shows nothing: a spinner that flashes for 0.2 s is noise.
SLOW_WAIT_NOTICE_S = 1.0


class Steps:
    """Stages of one long command. On a terminal: one transient spinner (with elapsed time) whose
    text is the current stage, and a bar when ``total`` is known; otherwise a line per stage."""

    def __init__(self, *, total: int | None = None, enabled: bool = True, lines: bool = True) -> None:
        """``lines=False``: no line per stage off a terminal (the command prints its own)."""
        self.enabled = enabled
        self.lines = lines
        self.total = total
        self._is_terminal = stderr.is_terminal
        self._progress: Any = None
        self._task: Any = None
        self._last: str | None = None

    def __enter__(self) -> Steps:
        if self.enabled and self._is_terminal:
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total is not None:
                columns.append(BarColumn())
            columns.append(TimeElapsedColumn())
            self._progress = Progress(*columns, console=stderr_console(), transient=True)
            self._progress.start()
            self._task = self._progress.add_task("", total=self.total)
        return self

    def stage(self, description: str, *, completed: int | None = None) -> None:
        """Enter a stage: the spinner's text on a terminal, a new line otherwise (once per stage)."""
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.update(self._task, description=description, completed=completed)
        elif self.lines and description != self._last:
            stderr.print(f"{description} ...", markup=False, highlight=False)
        self._last = description

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()


@contextmanager
def slow_wait(message: Callable[[], str], *, enabled: bool = True) -> Iterator[None]:
    """Say what the command waits for, but only once the body has taken SLOW_WAIT_NOTICE_S:
    a transient spinner on a terminal, one line otherwise. ``message`` is called only then.

    A timer thread, not a task: the body may enter cancel scopes that outlive it (a runtime's
    connections), which a task group around it would have to close in the wrong order."""
    if not enabled:
        yield
        return
    notice = _Notice(message)
    timer = threading.Timer(SLOW_WAIT_NOTICE_S, notice.show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        notice.close()


class _Notice:
    def __init__(self, message: Callable[[], str]) -> None:
        self._message = message
        self._lock = threading.Lock()
        self._status: Any = None
        self._closed = False

    def show(self) -> None:
        text = self._message()
        with self._lock:
            if self._closed:
                return
            if not stderr.is_terminal:
                stderr.print(f"{text} ...", markup=False, highlight=False)
                return
            from rich.text import Text

            self._status = stderr.status(Text(text), spinner="dots")
            self._status.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._status is not None:
                self._status.stop()
