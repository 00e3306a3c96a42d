"""tests/compat_threading.py holds: threading still installs a new thread's tracer through its
``_sys`` (so the patient view is what it calls), and a thread started while another thread is
inside ``sys.settrace`` now runs its target (on the plain ``sys`` it died, see the second test)."""

from __future__ import annotations

import inspect
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat_threading import SETTRACE_BUSY, PatientSys

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ has no process-global settrace guard")


def test_threading_installs_a_new_threads_tracer_through_its_own_sys() -> None:
    # Fails loudly on a Python whose threading no longer calls `_sys.settrace(_trace_hook)` at a
    # thread's start: then tests/compat_threading.py protects nothing and must be looked at again.
    assert "_sys.settrace(_trace_hook)" in inspect.getsource(threading.Thread._bootstrap_inner)
    assert isinstance(threading._sys, PatientSys)  # type: ignore[attr-defined]  # tests/conftest.py installed it


class _SlowToDrop:
    """A tracer whose release takes a while: ``sys.settrace`` holds its guard meanwhile."""

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        return None

    def __del__(self) -> None:
        time.sleep(0.3)  # releases the GIL inside the guarded section


def _start_while_another_thread_installs() -> tuple[list[int], list[BaseException]]:
    ran: list[int] = []
    died: list[BaseException] = []
    installing = threading.Event()

    def installer() -> None:
        sys.settrace(_SlowToDrop())
        installing.set()
        sys.settrace(None)  # drops _SlowToDrop while the guard is held

    before_hook, before_unraisable = threading.gettrace(), sys.unraisablehook
    threading.settrace(lambda *args: None)
    # A thread that dies in its bootstrap is reported as unraisable, not to threading.excepthook.
    sys.unraisablehook = lambda unraisable: died.append(unraisable.exc_value)  # type: ignore[arg-type]
    try:
        first = threading.Thread(target=installer)
        first.start()
        assert installing.wait(10), "the installing thread never began"
        time.sleep(0.05)
        second = threading.Thread(target=lambda: ran.append(1))
        second.start()
        first.join(10)
        second.join(10)
    finally:
        threading.settrace(before_hook)  # type: ignore[arg-type]
        sys.unraisablehook = before_unraisable
    return ran, died


@pytest.fixture
def plain_sys() -> Iterator[None]:
    patient = threading._sys  # type: ignore[attr-defined]
    threading._sys = sys  # type: ignore[attr-defined]
    try:
        yield
    finally:
        threading._sys = patient  # type: ignore[attr-defined]


def test_a_thread_started_during_another_threads_settrace_runs_its_target() -> None:
    ran, died = _start_while_another_thread_installs()
    assert (ran, died) == ([1], [])


def test_on_the_plain_sys_that_thread_dies(plain_sys: None) -> None:
    # The race the compat module exists for, reproduced: the thread never runs its target.
    ran, died = _start_while_another_thread_installs()
    assert ran == []
    assert [str(exc) for exc in died] == [SETTRACE_BUSY]
