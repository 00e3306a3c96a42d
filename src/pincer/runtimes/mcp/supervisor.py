"""The parent of every stdio MCP server: no server outlives the pincer that started it.

Run as ``python -I -S supervisor.py LIFELINE_FD -- COMMAND [ARG]...`` in a new session (so this
process leads a process group). It forks COMMAND with the inherited stdin/stdout/stderr and
then only waits, on two things:

* COMMAND exits: whatever it left in the group is killed and the supervisor exits with
  COMMAND's status;
* the lifeline pipe reaches EOF: the kernel closes pincer's write end when pincer dies, even by
  SIGKILL, so the supervisor SIGTERMs the group, waits briefly and SIGKILLs it.

On Linux it is also a child subreaper, so grandchildren whose parent exits are re-parented here
and reaped rather than left to init. It imports nothing from pincer (``-I -S``: no site, no
PYTHON* variables) and writes nothing to stdout, which belongs to the MCP protocol.
"""

import os
import select
import signal
import sys
import time

GRACE_S = 1.0  # after SIGTERM, before SIGKILL
POLL_S = 1.0  # a fallback only: SIGCHLD wakes the wait at once
_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # best effort: the process group still reaches every descendant


def _reap_all() -> bool:
    """Reap finished children; True when none is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _end_group() -> None:
    """SIGTERM every other member of our group, give them GRACE_S, then SIGKILL the group
    (which ends this process too)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.killpg(os.getpgrp(), signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        if _reap_all():
            return
        time.sleep(0.02)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _exit_code(status: int) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("pincer-supervisor: usage: supervisor.py LIFELINE_FD -- COMMAND [ARG]...\n")
        return 2
    lifeline = int(argv[1])
    command = argv[3:]
    _become_subreaper()
    child = os.fork()
    if child == 0:
        os.close(lifeline)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"pincer-supervisor: cannot run {command[0]!r}: {exc.strerror}\n")
            os._exit(127)
    # The server owns the protocol pipes; holding copies would hide its exit from pincer.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    # pincer's shutdown SIGTERMs the whole group: that is for the server; we leave when it does.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        try:
            pid, status = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            return 1
        if pid == child:
            if not _reap_all():
                _end_group()
            return _exit_code(status)
        readable, _, _ = select.select([lifeline, wake_r], [], [], POLL_S)
        if wake_r in readable:
            os.read(wake_r, 512)
        if lifeline in readable and not os.read(lifeline, 1):
            _end_group()
            return 137


if __name__ == "__main__":
    sys.exit(main(sys.argv))
