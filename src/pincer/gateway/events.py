"""A bounded in-memory event store: lets a client whose SSE stream dropped resume it with
``Last-Event-ID`` (SEP-1699) while this process lives. The oldest events fall off first.

Every MCP session gets its own *view* of the one store (:meth:`MemoryEventStore.for_session`,
given to each session's transport by ``sdk_compat.SessionScopedManager``): a session replays only
events it stored itself, so two sessions that both have a stream called "1" never see each
other's, and no session can be sent another's tool results by naming an event id. Event ids are
unguessable besides (a sequence number and 96 random bits), so even the shared view (when the
per-session one cannot be installed) gives nothing to a client that counts 1, 2, 3.
"""

from __future__ import annotations

import itertools
import secrets
from collections import deque
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage

__all__ = ["MemoryEventStore", "SessionEvents", "MAX_STORED_EVENTS"]

MAX_STORED_EVENTS = 10_000
_SHARED = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Event:
    seq: int
    event_id: str
    owner: str
    stream: str
    message: JSONRPCMessage | None


class MemoryEventStore(EventStore):
    """The store itself; used directly it is one shared view (owner ``""``)."""

    def __init__(self, *, max_events: int = MAX_STORED_EVENTS) -> None:
        self._events: deque[_Event] = deque()
        self._by_id: dict[str, _Event] = {}
        self._max = max_events
        self._seq = itertools.count(1)

    def for_session(self, owner: str) -> SessionEvents:
        """The view of one MCP session (its session id)."""
        return SessionEvents(self, owner)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        return self._store(_SHARED, stream_id, message)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        return await self._replay(_SHARED, last_event_id, send_callback)

    def _store(self, owner: str, stream: str, message: JSONRPCMessage | None) -> str:
        seq = next(self._seq)
        event = _Event(seq=seq, event_id=f"{seq}-{secrets.token_hex(12)}", owner=owner, stream=stream, message=message)
        if len(self._events) >= self._max:
            dropped = self._events.popleft()
            self._by_id.pop(dropped.event_id, None)
        self._events.append(event)
        self._by_id[event.event_id] = event
        return event.event_id

    async def _replay(self, owner: str, last_event_id: str, send_callback: EventCallback) -> str | None:
        last = self._by_id.get(last_event_id)
        if last is None or last.owner != owner:
            return None  # unknown, dropped, or another session's: nothing to resume
        for event in list(self._events):
            if event.seq > last.seq and event.owner == owner and event.stream == last.stream and event.message:
                await send_callback(EventMessage(event.message, event.event_id))
        return last.stream


class SessionEvents(EventStore):
    """One session's view of a :class:`MemoryEventStore`."""

    def __init__(self, store: MemoryEventStore, owner: str) -> None:
        self._store = store
        self._owner = owner or "?"

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        return self._store._store(self._owner, stream_id, message)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        return await self._store._replay(self._owner, last_event_id, send_callback)
