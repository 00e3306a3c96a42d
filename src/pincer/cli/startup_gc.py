"""The cyclic garbage collector while a ``pincer`` command starts.

Starting a command imports the modules it needs (pydantic's models of config.toml, typer, the
runtimes): some 80,000 container objects, nearly none of them garbage. With the default
thresholds the collector walks them in ~120 passes, about a tenth of ``pincer tools list
--json``'s CPU time (``bench/cli.py``; bench/RESULTS.md has the figures). So a command starts with
a first-generation threshold high enough that start-up triggers no pass, and the thresholds it
had come back once its ``Pincer`` is open (:func:`startup_done`). A command that never opens one
still collects, only later, so no command runs without the collector.
"""

from __future__ import annotations

import gc

__all__ = ["STARTUP_THRESHOLDS", "begin_startup", "startup_done"]

STARTUP_THRESHOLDS = (100_000, 50, 100)

_saved: tuple[int, ...] | None = None


def begin_startup() -> None:
    """Raise the thresholds for the start-up (the process's own are kept to restore)."""
    global _saved
    if _saved is None:
        _saved = gc.get_threshold()
        gc.set_threshold(*STARTUP_THRESHOLDS)


def startup_done() -> None:
    """Restore the thresholds :func:`begin_startup` found; nothing when it did not run."""
    global _saved
    if _saved is not None:
        # Without the freeze the first pass after the restore walks every object start-up made
        # (and the next older-generation passes again): frozen, they are out of every later pass.
        gc.freeze()
        gc.set_threshold(*_saved)
        _saved = None
