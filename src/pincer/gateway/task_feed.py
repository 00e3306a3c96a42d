"""One gateway's subscription to the store's task changes, handed on to each of its followers.

Three parts of an MCP gateway follow :data:`~pincer.store.tasks.TASK_CHANNEL`: the tasks' own
sweep (``TaskReceiver.follow``: a waiting task moves on, a cancel reaches the call), the
handshake era's status notifications and ``tasks/result`` waits (``TaskChanges``) and the
``subscriptions/listen`` streams (``ListenStreams``). They share one listener on the store (one
LISTEN'd channel on PostgreSQL, one in-process listener on SQLite) through a :class:`TaskFeed`.

Each follower reads a :class:`Feed` of its own: the ids of the changed tasks, each once, in the
order they first changed since the follower last read (a follower reads the row, so a task that
changed twice before it looked needs one read), bounded at :data:`MAX_PENDING` ids. Handing a
note on never waits: a follower that falls behind by more than that, or that the store told to
read again, gets :data:`~pincer.store.sql.RESYNC` instead of its backlog and reads again
everything it follows. So a slow follower (a stream whose client reads slowly, a sweep held up
by a slow store) costs only itself; the feed and the others go on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager

import anyio

from pincer.store.sql import RESYNC
from pincer.store.tasks import TaskStore

__all__ = ["TaskFeed", "Feed", "MAX_PENDING"]

# Changed task ids one follower may have unread before it is told RESYNC instead: far above what
# one gateway's tasks change between two reads of a follower that keeps up.
MAX_PENDING = 4096


class Feed:
    """One follower's changed task ids (or RESYNC), an async iterator; bounded, never blocking."""

    def __init__(self, bound: int = MAX_PENDING) -> None:
        self._bound = bound
        self._pending: dict[str, None] = {}  # an ordered set
        self._resync = False
        self._ready = anyio.Event()

    def put(self, note: str) -> None:
        if note == RESYNC or (note not in self._pending and len(self._pending) >= self._bound):
            self._pending.clear()  # everything is read again: no id needs a read of its own
            self._resync = True
        elif not self._resync:  # an unread RESYNC covers this change too: read after it
            self._pending[note] = None
        self._ready.set()

    @property
    def backlog(self) -> int:
        """What is unread: the ids, and one for a RESYNC."""
        return len(self._pending) + self._resync

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        while True:
            if self._resync:
                self._resync = False
                return RESYNC
            if self._pending:
                first = next(iter(self._pending))
                del self._pending[first]
                return first
            self._ready = anyio.Event()
            await self._ready.wait()


class TaskFeed:
    """The gateway's one listener on the store's task changes, fanned out to :class:`Feed`\\ s."""

    def __init__(self, store: Callable[[], TaskStore], *, bound: int = MAX_PENDING) -> None:
        self._store = store
        self._bound = bound
        self._feeds: set[Feed] = set()
        # Set once run() listens: a follower reads what it follows after this, and then misses
        # no change (see Database.listen).
        self.listening = anyio.Event()

    @contextmanager
    def subscribe(self) -> Iterator[Feed]:
        """A follower's :class:`Feed`, from now until the block ends."""
        feed = Feed(self._bound)
        self._feeds.add(feed)
        try:
            yield feed
        finally:
            self._feeds.discard(feed)

    def followers(self) -> int:
        return len(self._feeds)

    async def run(self) -> None:
        """Listen to the store and hand each note to every follower, until cancelled."""
        async with self._store().listen() as notes:
            self.listening.set()
            async for note in notes:
                for feed in list(self._feeds):
                    feed.put(note)
