"""The parent of every stdio MCP server: nothing a server starts outlives the pincer that started it.

Run as ``python -I -S supervisor.py LIFELINE_FD -- COMMAND [ARG]...`` in a new session (so this
process leads a process group). On Linux it first makes itself a child subreaper
(``PR_SET_CHILD_SUBREAPER``): every process below it whose parent exits is re-parented here
instead of to init, also one that called ``setsid()`` and double-forked to leave the group and
the session. It forks COMMAND with the inherited stdin/stdout/stderr and then only waits, on:

* COMMAND exits: whatever it left behind is ended and the supervisor exits with COMMAND's status;
* the lifeline pipe reaches EOF: the kernel closes pincer's write end when pincer dies, even by
  SIGKILL, so the supervisor ends everything below it and exits;
* a ``k`` byte on the lifeline: pincer wants it all gone now (a hung server), without a grace period;
* SIGUSR1, the parent-death signal (``PR_SET_PDEATHSIG``): a second way to learn that pincer died.

"Ends everything below it" means: SIGTERM to every descendant, ``GRACE_S`` to exit, then SIGKILL
rounds until none is left. Descendants are found by walking ``/proc`` for processes whose parent
is the supervisor or one of its descendants, again in every round, because a process being killed
may still fork and an orphan moves up to the subreaper while the walk runs. A process group
signal alone would miss exactly the ones that called ``setsid()``. Without ``/proc`` (not Linux)
the process group is all there is.

Left open: a server that kills its supervisor (same user, so it may) orphans its descendants to
init; only a cgroup per server would hold those.

It imports nothing from pincer (``-I -S``: no site, no PYTHON* variables) and writes nothing to
stdout, which belongs to the MCP protocol.
"""

import os
import select
import signal
import sys
import time

GRACE_S = 1.0  # after SIGTERM, before SIGKILL
KILL_ROUNDS_S = 5.0  # SIGKILL rounds keep going this long at most (a fork bomb cannot hold us forever)
KILL_ROUND_PAUSE_S = 0.01
POLL_S = 1.0  # a fallback only: SIGCHLD and SIGUSR1 wake the wait at once
KILL_NOW = b"k"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_IS_LINUX = sys.platform.startswith("linux")
_parent_died = False


def _prctl(option: int, value: int) -> bool:
    if not _IS_LINUX:
        return False
    try:
        import ctypes

        status: int = ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)  # a C int
        return status == 0
    except (OSError, AttributeError):
        return False


def _on_parent_death(*_: object) -> None:
    global _parent_died
    _parent_died = True


def descendants(root: int) -> list[int]:
    """Every live process below ``root``, read from /proc (empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 2 or fields[0] in (b"Z", b"X"):
            continue  # a zombie is dead already; it has no children of its own left
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _reap() -> bool:
    """Reap finished children; True when none is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _signal_group(signum: int) -> None:
    try:
        os.killpg(os.getpgrp(), signum)
    except (ProcessLookupError, PermissionError):
        pass


def end_everything(*, grace_s: float = GRACE_S) -> None:
    """SIGTERM every descendant, give them ``grace_s``, then SIGKILL them until none is left.
    The supervisor itself survives this (it ignores SIGTERM and never signals itself)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me = os.getpid()
    if grace_s > 0:
        _signal_all(descendants(me), signal.SIGTERM)
        if not _IS_LINUX:
            _signal_group(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            _reap()
            if not descendants(me) and (_IS_LINUX or _reap()):
                return
            time.sleep(0.02)
    if not _IS_LINUX:
        _reap()
        os.killpg(os.getpgrp(), signal.SIGKILL)  # ends this process too: all there is without /proc
    deadline = time.monotonic() + KILL_ROUNDS_S
    while time.monotonic() < deadline:
        left = descendants(me)
        if not left:
            break
        _signal_all(left, signal.SIGKILL)
        _reap()
        time.sleep(KILL_ROUND_PAUSE_S)
    _reap()


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
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.signal(signal.SIGUSR1, _on_parent_death)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGUSR1)
    child = os.fork()
    if child == 0:
        os.close(lifeline)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            # a bare name: say which PATH was searched (the server's, which may not be the shell's)
            where = f" (not on PATH {os.environ.get('PATH', '')})" if "/" not in command[0] else ""
            sys.stderr.write(f"pincer-supervisor: cannot run {command[0]!r}: {exc.strerror}{where}\n")
            os._exit(127)
    # The server owns the protocol pipes; holding copies would hide its exit from pincer.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    # A SIGTERM to the whole group is for the server; we leave when it does.
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
            end_everything()
            return _exit_code(status)
        if _parent_died:
            end_everything()
            return 137
        readable, _, _ = select.select([lifeline, wake_r], [], [], POLL_S)
        if wake_r in readable:
            os.read(wake_r, 512)
        if lifeline in readable:
            data = os.read(lifeline, 1)
            if not data:
                end_everything()
                return 137
            if data == KILL_NOW:
                end_everything(grace_s=0)
                return 137


if __name__ == "__main__":
    sys.exit(main(sys.argv))
