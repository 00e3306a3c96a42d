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

            # A terminal gives its own width; piped or logged output gets room for the wide tables.
            self._console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console(), name)


stderr: Console = cast("Console", _StderrConsole())


def stderr_console() -> Console:
    """The real Console behind ``stderr``, for rich objects that take a ``console=``."""
    return cast("_StderrConsole", stderr).console()
