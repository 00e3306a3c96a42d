"""Change notifications inside one process: the listeners of a channel, and what wakes them.

Both drivers hand notifications to listeners through a :class:`Channels`: the SQLite driver
when a transaction that notified has committed (one ``Channels`` per database file in this
process, so every database object of the same file hears it) and RESYNC when another process
committed (store/sql/sqlite.py), the PostgreSQL driver when its LISTEN connection receives one.
A listener keeps what it has not read yet; one that falls :data:`MAX_BACKLOG` behind is told
:data:`~pincer.store.sql.database.RESYNC` instead of the backlog, and reads again what it
follows. RESYNCs in a row are one: a listener that has not read the first reads everything
again anyway.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager

from pincer.store.sql.database import RESYNC

__all__ = ["Channels", "Listener", "channels_of_file", "MAX_BACKLOG"]

MAX_BACKLOG = 10_000


class Listener:
    """One ``listen`` block's notifications: an async iterator of payloads."""

    def __init__(self) -> None:
        self._backlog: collections.deque[str] = collections.deque()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()  # the loop's: a listener is made inside it
        self._waiter: asyncio.Future[None] | None = None

    def put(self, payload: str) -> None:
        """Called on any thread."""
        if threading.get_ident() == self._thread:
            self._put(payload)
            return
        try:
            self._loop.call_soon_threadsafe(self._put, payload)
        except RuntimeError:  # its loop is closed: nobody listens any more
            pass

    def _put(self, payload: str) -> None:
        if len(self._backlog) >= MAX_BACKLOG:
            self._backlog.clear()
            payload = RESYNC
        if payload == RESYNC and self._backlog and self._backlog[-1] == RESYNC:
            return  # one unread RESYNC already says it
        self._backlog.append(payload)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        while not self._backlog:
            self._waiter = self._loop.create_future()
            await self._waiter
        return self._backlog.popleft()


class Channels:
    """The listeners of each channel of one database, and the hand-over to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, set[Listener]] = {}
        # This process's commits on the file (SQLite): begun and not yet booked, and booked.
        # A database object that sees the file changed tells a change of another process from
        # one of another object of this process by them (SqliteDatabase's watch).
        self._committing = 0
        self._committed = 0

    @contextmanager
    def listening(self, channel: str, on_first: Callable[[str], None] | None = None) -> Iterator[Listener]:
        listener = Listener()
        with self._lock:
            first = channel not in self._listeners
            self._listeners.setdefault(channel, set()).add(listener)
        if first and on_first is not None:
            on_first(channel)
        try:
            yield listener
        finally:
            with self._lock:
                others = self._listeners.get(channel, set())
                others.discard(listener)
                if not others:
                    self._listeners.pop(channel, None)

    def channels(self) -> list[str]:
        with self._lock:
            return list(self._listeners)

    def deliver(self, channel: str, payload: str) -> None:
        with self._lock:
            listeners = list(self._listeners.get(channel, ()))
        for listener in listeners:
            listener.put(payload)

    def committing(self) -> None:
        """A commit of this process is about to be made (called before COMMIT, any thread)."""
        with self._lock:
            self._committing += 1

    def committed(self) -> None:
        """... and is made, or failed (called after it, in any case)."""
        with self._lock:
            self._committing -= 1
            self._committed += 1

    def local_commits(self) -> tuple[int, int]:
        """(commits under way, commits booked) of this process on the file."""
        with self._lock:
            return self._committing, self._committed

    def resync(self) -> None:
        """Every listener may have missed something (a LISTEN connection was made again)."""
        with self._lock:
            listeners = [listener for group in self._listeners.values() for listener in group]
        for listener in listeners:
            listener.put(RESYNC)


_FILES: dict[str, Channels] = {}
_FILES_LOCK = threading.Lock()


def channels_of_file(path: str) -> Channels:
    """The one :class:`Channels` of a database file in this process (``path`` resolved)."""
    with _FILES_LOCK:
        found = _FILES.get(path)
        if found is None:
            found = _FILES[path] = Channels()
        return found
