"""What a test file leaves behind fails that file, not whichever test happens to run next.

The suite runs with ``filterwarnings = ["error"]``: a ResourceWarning raised when the garbage
collector frees a leaked object (an unclosed pipe transport, a ``Popen`` still running, an
unclosed memory stream) fails the test that is running at that moment. Reference cycles are
freed whenever the collector's thresholds trip, so a leak in one file used to fail an innocent
test of a later file on the same xdist worker (one CI run failed a test of
tests/people/test_person_mcp_instances.py that passes alone, on seven warnings about another
file's subprocess). At the end of each file :func:`settle` collects its garbage, so those
warnings fail the file's last test, and fails the file if it left a child process of the test
process running: the tests must kill and wait for what they start. The session-wide servers
tests/backends.py starts on purpose (PostgreSQL, Redis) are not the file's.
"""

from __future__ import annotations

import gc
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["child_processes", "file_leaves_nothing_behind", "settle", "LeftRunning"]

# A child the test killed may take a moment to become a zombie (which no longer counts).
EXIT_GRACE_S = 2.0
EXIT_POLL_S = 0.02
REAP_TIMEOUT_S = 5.0


class LeftRunning(AssertionError):
    """A test file ended with a child process of the test process still running."""


def _stat(pid: str) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid`` from /proc, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces or parentheses.
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[1])


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:300]


def child_processes(parent: int | None = None) -> dict[int, str]:
    """The running (not zombie) children of ``parent`` (this process): pid -> command line.
    /proc/PID/task/*/children needs a kernel option CI's may lack, so every /proc/PID/stat is read."""
    parent = os.getpid() if parent is None else parent
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(entry)
        if stat is not None and stat[1] == parent and stat[0] != "Z":
            found[int(entry)] = _command(int(entry))
    return found


def _still_running(pids: set[int]) -> dict[int, str]:
    deadline = time.monotonic() + EXIT_GRACE_S
    while True:
        running = {pid: cmd for pid, cmd in child_processes().items() if pid in pids}
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(EXIT_POLL_S)


def _kill(pids: set[int]) -> None:
    """SIGKILL what a file left, so the next file starts clean (its Popen objects then reap it)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + REAP_TIMEOUT_S
    while time.monotonic() < deadline and set(child_processes()) & pids:
        time.sleep(EXIT_POLL_S)


def settle(before: set[int], allowed: set[int], where: str) -> None:
    """Collect the garbage of the file ``where`` (its ResourceWarnings fail its last test), then
    raise :class:`LeftRunning` naming each child started since ``before`` that is still running
    (``allowed``: the session's own servers), after killing it."""
    gc.collect()
    new = set(child_processes()) - before - allowed
    left = _still_running(new) if new else {}
    if not left:
        return
    _kill(set(left))
    listing = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in sorted(left.items()))
    raise LeftRunning(
        f"{where} left {len(left)} child process(es) of the test process running (killed now); "
        f"a test or fixture must kill and wait for what it starts, in a finally:\n{listing}"
    )


@pytest.fixture(scope="module", autouse=True)
def file_leaves_nothing_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """Autouse in every test file (tests/conftest.py imports it): the file's garbage collected at
    its end, and no child process it started still running."""
    from tests.backends import session_server_pids

    before = set(child_processes())
    yield
    settle(before, session_server_pids(), request.node.nodeid)
