"""Owners: which process, on which machine, holds an idempotency claim, waits for an approval,
runs a run, leads the scheduler or starts a firing; and whether that process still runs.

An owner token is ``host/pid:start-time`` (``pid:start-time``, a :func:`process_token`, from
before issue 29 still reads). Whether the owner runs is read two ways:

- on this machine (the token's host is ours, or it names none): from the pid and its start time
  in ``/proc``, at once and exactly;
- on another machine: only the stores several machines share can say. ``Owners`` asks its
  ``remote`` rule (the PostgreSQL stores give one: the owner's instance row and its heartbeat,
  store/pg/instances.py); without one, or when the rule does not know the owner, it is taken to
  run, and the timeouts decide (an approval's ``[approvals] timeout_s``, a claim's lease).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from functools import cache

__all__ = ["Owners", "owner_token", "split_owner", "local_owners", "this_host", "process_token", "is_process_alive"]

RemoteRule = Callable[[str], Awaitable["bool | None"]]  # token -> alive, dead, or None: unknown


def process_token(pid: int | None = None) -> str:
    """``pid:start-time`` of a process: unlike a bare pid, never the same for a later process."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid)}"


def is_process_alive(token: str | None) -> bool:
    """Whether the process a :func:`process_token` names still runs (True when unsure)."""
    if not token:
        return True
    pid_text, _, started = token.partition(":")
    try:
        pid = int(pid_text)
    except ValueError:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    state, current = _proc_stat(pid)
    if state in _EXITED_STATES:
        return False  # exited, not yet reaped by its parent: kill(pid, 0) still succeeds on it
    return not (started and current and current != started)


def _start_time(pid: int) -> str:
    return _proc_stat(pid)[1]


# A zombie (exited, waiting for its parent to collect it) and a process being torn down.
_EXITED_STATES = frozenset({"Z", "X"})


def _proc_stat(pid: int) -> tuple[str, str]:
    """(state, start time) of ``pid`` from /proc; empty strings when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return "", ""
    # Fields 3 (state) and 22 (starttime), counted after the parenthesised command name, which
    # may hold spaces.
    fields = stat.rpartition(")")[2].split()
    return (fields[0] if fields else ""), (fields[19] if len(fields) > 19 else "")


def this_host() -> str:
    """The machine's name as owner tokens carry it (``[store] host_id`` overrides it)."""
    return socket.gethostname() or "localhost"


def owner_token(host: str) -> str:
    return f"{host}/{process_token()}"


def split_owner(token: str) -> tuple[str | None, str]:
    """(host, ``pid:start``); host None for a token from before hosts were named."""
    host, separator, process = token.rpartition("/")
    return (host, process) if separator else (None, token)


class Owners:
    """This process's owner token (``token``) and the rule for another one's (``is_alive``)."""

    def __init__(self, host: str | None = None, *, remote: RemoteRule | None = None) -> None:
        self.host = host or this_host()
        self.token = owner_token(self.host)
        self._remote = remote

    def is_local(self, token: str) -> bool:
        host, _ = split_owner(token)
        return host is None or host == self.host

    async def is_alive(self, token: str | None) -> bool:
        """Whether the process ``token`` names still runs (True when nobody can tell: no token,
        or another machine's owner that the remote rule does not know)."""
        if not token:
            return True
        host, process = split_owner(token)
        if host is None or host == self.host:
            return is_process_alive(process)
        if self._remote is None:
            return True
        found = await self._remote(token)
        return True if found is None else found


@cache
def local_owners() -> Owners:
    """The owners rule of a process that shares no store with other machines (SQLite)."""
    return Owners()
