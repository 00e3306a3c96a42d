"""A bounded in-memory event store: lets a client whose SSE stream dropped resume it with
``Last-Event-ID`` (SEP-1699) while this process lives. The oldest events fall off first."""

from __future__ import annotations

import itertools
from collections import deque

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage

__all__ = ["MemoryEventStore", "MAX_STORED_EVENTS"]

MAX_STORED_EVENTS = 10_000


class MemoryEventStore(EventStore):
    def __init__(self, *, max_events: int = MAX_STORED_EVENTS) -> None:
        self._events: deque[tuple[int, str, JSONRPCMessage | None]] = deque(maxlen=max_events)
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = next(self._ids)
        self._events.append((event_id, stream_id, message))
        return str(event_id)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        try:
            last = int(last_event_id)
        except ValueError:
            return None
        stream = next((s for i, s, _ in self._events if i == last), None)
        if stream is None:
            return None
        for event_id, stream_id, message in list(self._events):
            if event_id > last and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, str(event_id)))
        return stream
