"""The lean path over an SDK transport's streams (streamable HTTP): a demultiplexer between the
transport and the SDK's client session.

On stdio the demultiplexer sits in pincer's own reader (:mod:`.stdio`). Streamable HTTP keeps the
SDK's transport, which does everything HTTP needs and pincer should not redo: the session id, the
POST per request, JSON and SSE answers, reconnecting an SSE stream with ``Last-Event-ID``, 202,
redirects and HTTP errors turned into JSON-RPC errors, and a cancellation that aborts the POST on
2026-07-28. What the lean path skips is the client session above it: a lean request is written
into the transport's write stream as the session would write it (the headers its stamp sets),
and one pump task between the transport's read stream and the session takes the answers to lean
ids (and their progress) out; everything else reaches the session unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import ClientMessageMetadata, SessionMessage

from pincer.runtimes.mcp.lean import LeanCalls

__all__ = ["LeanStreams"]


def _as_wire(message: Any) -> dict[str, Any] | None:
    """The parts of a parsed message the lean table reads, as their JSON shape (None: not one
    it can take)."""
    if isinstance(message, types.JSONRPCResponse):
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    if isinstance(message, types.JSONRPCError):
        return {"jsonrpc": "2.0", "id": message.id, "error": message.error.model_dump(exclude_none=True)}
    if isinstance(message, types.JSONRPCNotification) and message.method == "notifications/progress":
        return {"jsonrpc": "2.0", "method": message.method, "params": message.params}
    return None


class LeanStreams:
    """``async with LeanStreams(transport) as (read_stream, write_stream)``, where ``transport``
    is an SDK transport's async context manager (``streamable_http_client(...)``); ``lean`` is
    the table of lean requests on it."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._stack: AsyncExitStack | None = None
        self._write: Any = None
        self.lean = LeanCalls(self._send)

    async def __aenter__(
        self,
    ) -> tuple[MemoryObjectReceiveStream[SessionMessage | Exception], Any]:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport)
            self._write = write
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            group = await stack.enter_async_context(anyio.create_task_group())
            group.start_soon(self._pump, read, send)
            stack.callback(group.cancel_scope.cancel)  # first out: the pump, then the transport
            self._stack = stack.pop_all()
        return receive, write

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._stack is not None
        self.lean.close("closed the connection")
        return await self._stack.__aexit__(*exc_info)

    async def _pump(
        self, read: MemoryObjectReceiveStream[SessionMessage | Exception], sink: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        try:
            async with sink:
                async for item in read:
                    if self.lean.in_flight and isinstance(item, SessionMessage):
                        wire = _as_wire(item.message)
                        if wire is not None and self.lean.claim(wire):
                            continue
                    try:
                        await sink.send(item)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            pass
        finally:
            self.lean.close("closed the connection")

    async def _send(self, message: Mapping[str, Any], headers: Mapping[str, str] | None) -> None:
        if self._write is None:
            raise anyio.ClosedResourceError
        parsed = types.jsonrpc_message_adapter.validate_python(dict(message), by_name=False)
        metadata = ClientMessageMetadata(headers=dict(headers)) if headers else None
        await self._write.send(SessionMessage(parsed, metadata=metadata))
