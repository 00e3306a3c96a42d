"""The rich Console on stderr, made on first use. Apart from ``common`` so that ``progress``
(which ``common`` uses) can import it without an import circle; ``common`` re-exports both names.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["stderr", "stderr_console"]


class _StderrConsole:
    """The rich Console on stderr, made on first use: a command that writes only JSON to stdout
    never imports rich (~25 ms). Attribute access goes to the real Console; ``console()`` is it."""

    def __init__(self) -> None:
        self._console: Console | None = None

    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            # A terminal gives its own width. Piped or logged output gets room for the wide tables,
            # and a message is never folded there: a long path would break a line that a script
            # (or a test) looks for whole.
            tty = sys.stderr.isatty()
            self._console = Console(stderr=True, highlight=False, width=None if tty else 160, soft_wrap=not tty)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console(), name)


stderr: Console = cast("Console", _StderrConsole())


def stderr_console() -> Console:
    """The real Console behind ``stderr``, for rich objects that take a ``console=``."""
    return cast("_StderrConsole", stderr).console()
