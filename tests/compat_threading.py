"""The one place the tests touch a private part of the standard library: ``threading._sys``.

Why: on CPython 3.11 the guard in ``_PyEval_SetTrace`` is process-global
(python/cpython#98257). While one thread is inside ``sys.settrace`` (coverage installs its
tracer in every thread, and dropping the old tracer can release the GIL), a thread that starts
calls ``sys.settrace(threading._trace_hook)`` in ``Thread._bootstrap_inner``, gets
``RuntimeError: Cannot install a trace function while another trace function is being
installed`` and dies before its target runs. Under ``make test``'s coverage that killed a store
reader thread (a REST test's setup failed) and a stand-in server's request thread (a Telegram
call waited out its 30 s deadline) in one CI run on a busy machine.

The fix, for the test processes only (pincer itself never installs a tracer): ``threading``'s own
reference to ``sys`` is replaced by a view of ``sys`` whose ``settrace`` tries again, for at most
``PATIENCE_S``, while the guard is held. tests/test_compat_threading.py checks that threading
still reads ``_sys`` where this assumes it does, and reproduces the race.
"""

from __future__ import annotations

import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

__all__ = ["install", "PatientSys", "SETTRACE_BUSY", "PATIENCE_S"]

SETTRACE_BUSY = "Cannot install a trace function while another trace function is being installed"
PATIENCE_S = 5.0  # the guard is held for as long as an old tracer takes to be dropped


class PatientSys(types.ModuleType):
    """``sys``, but ``settrace`` waits out another thread's install instead of failing."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sys, name)

    @staticmethod
    def settrace(function: Callable[..., Any] | None) -> None:
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                sys.settrace(function)
                return
            except RuntimeError as exc:
                if str(exc) != SETTRACE_BUSY or time.monotonic() > deadline:
                    raise
            time.sleep(0.001)


def install() -> None:
    """Give ``threading`` the patient view of ``sys`` (3.11 only: 3.12 has no such guard)."""
    if sys.version_info >= (3, 12) or isinstance(threading._sys, PatientSys):  # type: ignore[attr-defined]
        return
    threading._sys = PatientSys("sys")  # type: ignore[attr-defined]
