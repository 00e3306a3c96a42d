"""A direct path for handshake-era (``initialize``, ``Mcp-Session-Id``) ``tools/call`` and
``tools/list``: one POST in, the answer out, past the SDK's per-session transport.

The SDK serves every POST of a session through a general machine: the transport validates it
with pydantic, pushes it through memory streams to the session's dispatcher task, which runs
the handler in a task of its own behind the middleware chain, and the result travels back
through a router task and an SSE writer task, stored in the event store on the way. For the
common call this path answers directly, with the same checks:

- the session: its id is one the session manager still serves (not terminated, not expiring),
  it completed the handshake, and it belongs to the principal of this request (the session of
  its bearer token, as ``scope["user"]`` tells the SDK);
- the ``MCP-Protocol-Version`` header names the version the session negotiated; Content-Type
  is JSON; Accept takes both JSON and SSE (what the SDK's SSE-mode transport requires);
- the JSON-RPC message is a request of exactly the expected shape: a ``tools/call`` whose
  name is a string and whose arguments are an object (anything else, malformed calls
  included, goes to the SDK path, where ``_audit_malformed_call`` audits it), with no
  ``progressToken`` (a caller that wants progress gets the SDK's stream), or a plain
  ``tools/list``.

The call runs through ``McpGateway.run_call`` with a channel on the SDK's own
``ServerSession`` over a :class:`~pincer.gateway.reply.DirectReply`: logs, elicitation
(approvals for main sessions included) and sampling reach the client on this POST's answer,
which becomes an SSE stream when they do. ``notifications/cancelled`` for a call on this path
cancels it (answered ``-32800``, as the SDK does); the session ending cancels it too. A session
only ever called here is kept from idling out like one served by the SDK.

Anything else — another method, a header or shape it is not sure of, a session it does not
know — it declines, having sent nothing, and the SDK serves the request unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import INTERNAL_ERROR, ErrorData
from mcp_types.methods import serialize_server_result
from starlette.types import Receive, Scope, Send

from pincer.gateway.channel import McpChannel
from pincer.gateway.guard import SESSION_SCOPE_KEY
from pincer.gateway.reply import DirectReply, PendingRequests
from pincer.gateway.sdk_compat import open_transport, session_in_flight
from pincer.gateway.tokens import GatewaySession

logger = logging.getLogger(__name__)

__all__ = ["HandshakeFastPath", "REQUEST_CANCELLED"]

# What the SDK's 2025-era transport answers a request cancelled before its response.
REQUEST_CANCELLED = -32800
_CALL_PARAMS = frozenset({"name", "arguments", "_meta"})
_LIST_PARAMS = frozenset({"_meta"})
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_RESPONSE_KEYS = frozenset({"jsonrpc", "id", "result", "error"})
_RESERVED_META_PREFIX = "io.modelcontextprotocol/"
_ACCEPTED = 202


def _accepts_json_and_sse(accept: str) -> bool:
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    if "*/*" in types:
        return True
    return bool(types & {"application/json", "application/*"}) and bool(types & {"text/event-stream", "text/*"})


def _plain_meta(meta: Any) -> bool:
    """No progress token and no 2026-07-28 envelope keys: nothing the SDK path would treat specially."""
    if meta is None:
        return True
    if not isinstance(meta, dict) or "progressToken" in meta:
        return False
    return not any(isinstance(key, str) and key.startswith(_RESERVED_META_PREFIX) for key in meta)


def _disconnect_of(receive: Receive) -> Callable[[], Awaitable[None]]:
    async def gone() -> None:
        # The body was read whole already: the next message is the client hanging up.
        while (await receive())["type"] != "http.disconnect":
            pass

    return gone


class HandshakeFastPath:
    def __init__(self, gateway: Any, manager: Any) -> None:
        self._gateway = gateway
        self._manager = manager
        self.pending = PendingRequests()
        # (session id, JSON-RPC id) of each call in flight here -> its cancel scope.
        self._calls: dict[tuple[str, Any], anyio.CancelScope] = {}
        self._ended: set[anyio.CancelScope] = set()

    async def try_handle(self, scope: Scope, body: bytes, send: Send, receive: Receive, version: str) -> bool:
        """Answer the request and return True, or return False having sent nothing."""
        session_id = content_type = accept = None
        for key, value in scope["headers"]:
            if key == b"mcp-session-id":
                if session_id is not None:
                    return False
                session_id = value.decode("latin-1")
            elif key == b"content-type":
                if content_type is not None:
                    return False
                content_type = value.decode("latin-1")
            elif key == b"accept":
                if accept is not None:
                    return False
                accept = value.decode("latin-1")
            elif key == b"mcp-protocol-version" and value.decode("latin-1") != version:
                return False  # a second, different version header
        if session_id is None or content_type is None or accept is None:
            return False
        if not content_type.lower().startswith("application/json") or not _accepts_json_and_sse(accept):
            return False
        session = scope.get(SESSION_SCOPE_KEY)
        if not isinstance(session, GatewaySession):
            return False
        known = self._gateway.handshake_session(session_id)
        if known is None:
            return False
        connection, owner = known
        if owner != session.name or not connection.initialize_accepted or connection.protocol_version != version:
            return False
        transport = open_transport(self._manager, session_id)
        if transport is None:
            return False
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return False
        if not isinstance(decoded, dict) or decoded.get("jsonrpc") != "2.0":
            return False
        method = decoded.get("method")
        if method is None:
            return await self._answer_to_us(decoded, session_id, send)
        if method == "notifications/cancelled":
            self._cancel_requested(decoded, session_id)
            return False  # the SDK acknowledges it (and cancels a call of its own with that id)
        if decoded.keys() - _REQUEST_KEYS:
            return False
        request_id = decoded.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return False
        params = decoded.get("params")
        if method == "tools/call":
            if not isinstance(params, dict) or params.keys() - _CALL_PARAMS:
                return False
            name, arguments = params.get("name"), params.get("arguments")
            if not isinstance(name, str) or not name or not isinstance(arguments, dict | None):
                return False
            if not _plain_meta(params.get("_meta")) or (session_id, request_id) in self._calls:
                return False
            with session_in_flight(transport):
                await self._call(session, session_id, connection, version, request_id, params, send, receive)
            return True
        if method == "tools/list":
            if params is not None and (not isinstance(params, dict) or params.keys() - _LIST_PARAMS):
                return False
            if params is not None and not _plain_meta(params.get("_meta")):
                return False
            with session_in_flight(transport):
                result = self._gateway.tools_list_result(session, version)
                reply = DirectReply(send, session_id=session_id, request_id=request_id, pending=self.pending)
                await reply.finish({"jsonrpc": "2.0", "id": request_id, "result": result})
            return True
        return False

    async def _call(
        self,
        session: GatewaySession,
        session_id: str,
        connection: Any,
        version: str,
        request_id: Any,
        params: Mapping[str, Any],
        send: Send,
        receive: Receive,
    ) -> None:
        reply = DirectReply(
            send,
            session_id=session_id,
            request_id=request_id,
            pending=self.pending,
            task_group=self._gateway.task_group,
        )
        channel = McpChannel(
            protocol_version=version,
            client_capabilities=connection.client_capabilities,
            session=ServerSession(reply, connection),
            request_id=request_id,
            meta=meta if isinstance(meta := params.get("_meta"), Mapping) else None,  # its trace context
            caller_gone=_disconnect_of(receive),
        )
        key = (session_id, request_id)
        call_scope = self._calls[key] = anyio.CancelScope()
        message: dict[str, Any]
        try:
            with call_scope:
                result = await self._gateway.run_call(
                    session,
                    params["name"],
                    params.get("arguments") or {},
                    channel,
                    idempotency_key=self._gateway.idempotency_key(params),
                )
                if any(block.get("type") != "text" for block in result.get("content", ())):
                    # Content blocks a runtime produced are checked against the spec before they leave.
                    result = serialize_server_result("tools/call", version, result)
                message = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except MCPError as exc:
            message = {"jsonrpc": "2.0", "id": request_id, "error": _error_data(exc)}
        except Exception as exc:  # the SDK's dispatcher answers a handler's crash the same way  # noqa: BLE001
            message = {"jsonrpc": "2.0", "id": request_id, "error": _error_data(exc)}
        finally:
            if self._calls.get(key) is call_scope:
                del self._calls[key]
            ended = call_scope in self._ended
            self._ended.discard(call_scope)
        if call_scope.cancelled_caught:
            if ended:
                await reply.abandon()
                return
            error = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
            await reply.finish({"jsonrpc": "2.0", "id": request_id, "error": error}, stream=True)
            return
        await reply.finish(message)

    def end_session(self, session_id: str) -> None:
        """The session is gone (DELETE, idle timeout, shutdown): its calls here end with it."""
        for (sid, _), scope in list(self._calls.items()):
            if sid == session_id:
                self._ended.add(scope)
                scope.cancel()

    def _cancel_requested(self, decoded: Mapping[str, Any], session_id: str) -> None:
        params = decoded.get("params")
        request_id = params.get("requestId") if isinstance(params, Mapping) else None
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return
        scope = self._calls.get((session_id, request_id))
        if scope is not None:
            scope.cancel()

    async def _answer_to_us(self, decoded: dict[str, Any], session_id: str, send: Send) -> bool:
        """A client's answer to a request sent on a direct reply: 202, as the SDK answers one."""
        if decoded.keys() - _RESPONSE_KEYS or ("result" in decoded) == ("error" in decoded):
            return False
        if not self.pending.answer(session_id, decoded):
            return False
        headers = [(b"content-type", b"application/json"), (b"mcp-session-id", session_id.encode("latin-1"))]
        await send({"type": "http.response.start", "status": _ACCEPTED, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
        return True


def _error_data(exc: Exception) -> dict[str, Any]:
    error = handler_exception_to_error_data(exc)
    if error is None:
        logger.exception("tools/call on the direct handshake path raised")
        error = ErrorData(code=INTERNAL_ERROR, message="Internal server error")
    return error.model_dump(mode="json", exclude_none=True)
