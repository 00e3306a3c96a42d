"""Server-sent events of the REST API (sse-starlette): each event with an id, a keep-alive
comment every ``SSE_PING_INTERVAL_S`` (proxies and clients drop a stream that says nothing),
and the stream's producer cancelled when the client hangs up."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

__all__ = ["SSE_PING_INTERVAL_S", "event_stream", "server_event"]

SSE_PING_INTERVAL_S = 15.0


def server_event(kind: str, data: Mapping[str, Any], event_id: str) -> ServerSentEvent:
    """One event: ``event: KIND``, ``id: ID`` and its data as one line of JSON."""
    return ServerSentEvent(data=json.dumps(data, ensure_ascii=False, default=str), event=kind, id=event_id, sep="\n")


def event_stream(events: AsyncIterator[ServerSentEvent]) -> EventSourceResponse:
    """The response that streams ``events``; when the client disconnects, ``events`` is
    cancelled (and whatever it drives with it)."""
    return EventSourceResponse(events, ping=SSE_PING_INTERVAL_S, sep="\n", headers={"Cache-Control": "no-cache"})
