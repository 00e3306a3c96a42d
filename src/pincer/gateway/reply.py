"""The answer to one handshake-era POST served past the SDK's per-session transport.

A call that sends nothing to the client before its result is answered as one JSON body (the
spec lets a server answer a POST with ``application/json`` or ``text/event-stream``). A call
that does send something first — a log line, an elicitation or sampling request — turns the
answer into an SSE stream at that moment, with ``event: message`` frames the way the SDK's
transport writes them, and the result as the last frame.

:class:`DirectReply` is the SDK's ``DispatchContext`` for that request, so the SDK's own
``ServerSession`` (and pincer's :class:`~pincer.gateway.channel.McpChannel` over it) sends
through it unchanged. A request it sends to the client (``elicitation/create``) gets an id no
SDK dispatcher mints (``pincer-N``); the client POSTs the answer to the session as usual and
:class:`PendingRequests` hands it back, after checking it came from the session that was asked.

These streams are not resumable (no event ids): a client that loses one loses the call's
result, as with a JSON answer.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Mapping
from typing import Any

import anyio
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.transport_context import TransportContext
from mcp_types import INTERNAL_ERROR, REQUEST_TIMEOUT, ErrorData
from starlette.types import Send

logger = logging.getLogger(__name__)

__all__ = ["DirectReply", "PendingRequests", "REQUEST_ID_PREFIX", "SSE_PING_INTERVAL_S"]

# Ids of requests sent to a client on a direct reply: strings that never parse as integers, so
# they cannot collide with the ids the SDK's dispatcher mints for the same session.
REQUEST_ID_PREFIX = "pincer-"
# How often an open SSE answer carries a comment so that proxies keep it open (sse-starlette's
# default, which the SDK's transport uses).
SSE_PING_INTERVAL_S = 15.0
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=True)
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


def _dumps(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


class _Waiter:
    __slots__ = ("session_id", "done", "message")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.done = anyio.Event()
        self.message: Mapping[str, Any] | None = None


class PendingRequests:
    """Requests sent to clients on direct replies, waiting for their answers."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiter] = {}
        self._ids = itertools.count(1)

    def expect(self, session_id: str) -> tuple[str, _Waiter]:
        request_id = f"{REQUEST_ID_PREFIX}{next(self._ids)}"
        waiter = self._waiting[request_id] = _Waiter(session_id)
        return request_id, waiter

    def forget(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)

    def answer(self, session_id: str, message: Mapping[str, Any]) -> bool:
        """Hand ``message`` (a JSON-RPC response) to the request it answers; False when it answers
        none of ours in this session (the SDK's dispatcher may know it)."""
        request_id = message.get("id")
        waiter = self._waiting.get(request_id) if isinstance(request_id, str) else None
        if waiter is None or waiter.session_id != session_id or waiter.done.is_set():
            return False
        waiter.message = message
        waiter.done.set()
        return True


class DirectReply:
    """The SDK ``DispatchContext`` of one POST answered directly (JSON, or SSE once needed)."""

    transport = _TRANSPORT
    message_metadata = None

    def __init__(
        self,
        send: Send,
        *,
        session_id: str,
        request_id: Any,
        pending: PendingRequests,
        task_group: Any = None,
    ) -> None:
        self.request_id = request_id
        self._send = send
        self._session_id = session_id
        self._session_header = (b"mcp-session-id", session_id.encode("latin-1"))
        self._pending = pending
        self._task_group = task_group
        self._streaming = False
        self._finished = False
        self._lock: anyio.Lock | None = None
        self._pinger: anyio.CancelScope | None = None
        self._cancel_requested: anyio.Event | None = None

    # -- DispatchContext ---------------------------------------------------------------------

    @property
    def can_send_request(self) -> bool:
        return not self._finished

    @property
    def cancel_requested(self) -> anyio.Event:
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """No progress token was sent (the direct path serves no call that has one): nothing to do."""

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        if not self._finished:
            await self._event(message)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        if self._finished:
            raise NoBackChannelError(method)
        request_id, waiter = self._pending.expect(self._session_id)
        try:
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
            if params is not None:
                message["params"] = dict(params)
            await self._event(message)
            timeout_s = (opts or {}).get("timeout")
            with anyio.move_on_after(timeout_s if timeout_s is not None else float("inf")) as waited:
                await waiter.done.wait()
            if waited.cancelled_caught:
                # As the SDK's dispatcher does: tell the client to stop, then fail the request.
                await self.notify("notifications/cancelled", {"requestId": request_id, "reason": "timed out"})
                raise MCPError(code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out")
        finally:
            self._pending.forget(request_id)
        answer = waiter.message or {}
        error = answer.get("error")
        if isinstance(error, Mapping):
            try:
                data = ErrorData.model_validate(error)
            except ValueError:
                data = ErrorData(code=INTERNAL_ERROR, message="the client answered with a malformed error")
            raise MCPError.from_error_data(data)
        result = answer.get("result")
        return dict(result) if isinstance(result, Mapping) else {}

    # -- the answer --------------------------------------------------------------------------

    async def finish(self, message: Mapping[str, Any], *, stream: bool = False) -> None:
        """Send the JSON-RPC response: as the JSON body, or as the stream's last frame (also
        when ``stream``: the SDK's client reads an answer to a request it has given up on
        quietly from a stream, not from a JSON body)."""
        if self._lock is None:
            await self._finish(message, stream)
            return
        async with self._lock:
            await self._finish(message, stream)

    async def abandon(self) -> None:
        """End the answer without a response, as the SDK's transport ends a POST's stream when
        its session is terminated under it (an SSE stream that closes with nothing more)."""
        if self._lock is None:
            await self._abandon()
            return
        async with self._lock:
            await self._abandon()

    async def _abandon(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._pinger is not None:
            self._pinger.cancel()
        if not self._streaming:
            await self._send(
                {"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, self._session_header]}
            )
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _finish(self, message: Mapping[str, Any], stream: bool) -> None:
        if self._finished:
            return
        self._finished = True
        if self._pinger is not None:
            self._pinger.cancel()
        payload = _dumps(message)
        if stream and not self._streaming:
            self._streaming = True
            await self._send(
                {"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, self._session_header]}
            )
        if self._streaming:
            await self._send({"type": "http.response.body", "body": _frame(payload), "more_body": False})
            return
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            self._session_header,
        ]
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        await self._send({"type": "http.response.body", "body": payload})

    async def _event(self, message: Mapping[str, Any]) -> None:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._finished:
                return
            if not self._streaming:
                self._streaming = True
                await self._send(
                    {"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, self._session_header]}
                )
                self._start_pings()
            await self._send({"type": "http.response.body", "body": _frame(_dumps(message)), "more_body": True})

    def _start_pings(self) -> None:
        if self._task_group is None:
            return
        self._pinger = anyio.CancelScope()
        self._task_group.start_soon(self._ping, self._pinger)

    async def _ping(self, scope: anyio.CancelScope) -> None:
        lock = self._lock
        with scope:
            while lock is not None:
                await anyio.sleep(SSE_PING_INTERVAL_S)
                async with lock:
                    if self._finished:
                        return
                    try:
                        await self._send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
                    except Exception:  # the server's task group must not die with one client
                        logger.debug("SSE keep-alive to a gone client dropped", exc_info=True)
                        return


def _frame(payload: bytes) -> bytes:
    return b"event: message\r\ndata: " + payload + b"\r\n\r\n"
