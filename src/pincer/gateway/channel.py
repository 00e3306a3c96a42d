"""The way back to the MCP client during one ``tools/call``: progress, logs, elicitation,
sampling and roots, the same API in both protocol eras.

On the handshake protocols (up to 2025-11-25) ``elicit``/``sample``/``list_roots`` send a
request to the client and wait for its answer. On 2026-07-28 a server may not send requests:
the call ends with an ``InputRequiredResult`` naming what it needs, the client calls again
with ``inputResponses``, and the tool runs again from the start, this time finding the answer.
Answers from earlier rounds travel in ``requestState`` (sealed by the SDK's
``RequestStateBoundary``), so a tool asking several questions in turn sees them all.

A native tool reaches this object through ``HostContext.client`` (annotate a parameter with
``HostContext``). Only progress and log are part of the :class:`ClientChannel` seam; the rest is
offered by this implementation and checked for with ``isinstance``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn

import mcp_types as types
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from pincer.core.errors import ClientCapabilityMissing, InputRequired

logger = logging.getLogger(__name__)

__all__ = ["McpChannel", "InputRequired", "ClientCapabilityMissing", "CLIENT_REQUEST_TIMEOUT_S"]

# How long one elicitation/sampling/roots request may wait for the client (a person may be typing).
CLIENT_REQUEST_TIMEOUT_S = 600.0
_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LEVEL_ALIASES = {"warn": "warning", "fatal": "critical", "exception": "error"}
_STATE_VERSION = 1


class McpChannel:
    """Per-call channel to the MCP client; implements ``pincer.core.values.ClientChannel``."""

    def __init__(
        self,
        *,
        protocol_version: str,
        client_capabilities: types.ClientCapabilities | Mapping[str, Any] | None,
        session: ServerSession | None = None,
        request_id: Any = None,
        meta: Mapping[str, Any] | None = None,
        close_sse_stream: Callable[[], Awaitable[None]] | None = None,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        caller_gone: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``session`` is the SDK's per-request session, the way to send to the client; without
        one (a 2026-07-28 call answered directly as JSON) nothing is sent mid-call.
        ``caller_gone`` returns when the client has disconnected (where the transport can tell:
        the direct JSON path), so a call waiting for a person can end with its caller."""
        self.caller_gone = caller_gone
        self.protocol_version = protocol_version
        self.meta = meta  # the request's _meta (its trace context, when the client sent one)
        self.is_modern = protocol_version in MODERN_PROTOCOL_VERSIONS
        self._session = session
        self._request_id = request_id
        self._capabilities = client_capabilities
        self._close_sse_stream = close_sse_stream
        self._log_levels = allowed_log_levels(protocol_version, meta) if self.is_modern else None
        answers, user_state = _open_state(request_state)
        answers.update(dict(input_responses or {}))
        self._answers: dict[str, Any] = answers
        self.request_state = user_state
        self.pending: dict[str, Any] | None = None
        self.missing_capability: str | None = None
        # Set while the call runs as a task of a 2026-07-28 client (gateway/task_questions.py):
        # an upstream server's question goes to the task's inputRequests instead of mid-call.
        self.task_asker: Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]] | None = None

    @classmethod
    def from_context(
        cls,
        ctx: ServerRequestContext[Any, Any],
        *,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
    ) -> McpChannel:
        return cls(
            protocol_version=ctx.protocol_version,
            client_capabilities=ctx.session.client_capabilities,
            session=ctx.session,
            request_id=ctx.request_id,
            meta=ctx.meta,
            close_sse_stream=ctx.close_sse_stream,
            input_responses=input_responses,
            request_state=request_state,
        )

    # -- ClientChannel -----------------------------------------------------------------------

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._session is None:
            return
        try:
            await self._session.report_progress(progress, total, message)
        except Exception:  # a client that went away must not fail the tool
            logger.debug("progress notification dropped", exc_info=True)

    async def log(self, level: str, message: str) -> None:
        name = _LEVEL_ALIASES.get(level.lower(), level.lower())
        if name not in _LOG_LEVELS:
            name = "info"
        if self._session is None or (self._log_levels is not None and name not in self._log_levels):
            return  # 2026-07-28: logs only when this request opted in at that level
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=name, data=message, logger="pincer")  # type: ignore[arg-type]
        )
        try:
            await self._session.send_notification(notification, related_request_id=self._request_id)
        except Exception:
            logger.debug("log notification dropped", exc_info=True)

    # -- what the client offers --------------------------------------------------------------

    def has_capability(self, name: str) -> bool:
        caps = self._capabilities
        if isinstance(caps, Mapping):
            return caps.get(name) is not None
        return caps is not None and getattr(caps, name, None) is not None

    @property
    def can_ask(self) -> bool:
        """Whether a question can be put to the client right now, in the middle of the call."""
        return (
            not self.is_modern
            and self._session is not None
            and self.has_capability("elicitation")
            and self._session.can_send_request
        )

    async def elicit(
        self,
        message: str,
        requested_schema: Mapping[str, Any],
        *,
        key: str = "elicitation",
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Ask the user; returns the ElicitResult as a dict (``action``, ``content``). ``meta``:
        the request's ``_meta`` (a task's ``io.modelcontextprotocol/related-task``)."""
        params: dict[str, Any] = {"mode": "form", "message": message, "requestedSchema": dict(requested_schema)}
        if meta is not None:
            params["_meta"] = dict(meta)
        return await self._ask(
            "elicitation", "elicitation/create", params, key, types.ElicitRequest, types.ElicitResult
        )

    async def sample(
        self, messages: list[Mapping[str, Any]], *, max_tokens: int, key: str = "sampling", **extra: Any
    ) -> dict[str, Any]:
        """Ask the client's model; returns the CreateMessageResult as a dict."""
        params = {"messages": [dict(m) for m in messages], "maxTokens": max_tokens, **extra}
        return await self._ask(
            "sampling", "sampling/createMessage", params, key, types.CreateMessageRequest, types.CreateMessageResult
        )

    async def list_roots(self, *, key: str = "roots") -> dict[str, Any]:
        return await self._ask("roots", "roots/list", {}, key, types.ListRootsRequest, types.ListRootsResult)

    async def close_stream(self) -> None:
        """Close this call's SSE stream (the client reconnects and resumes; SEP-1699)."""
        if self._close_sse_stream is not None:
            await self._close_sse_stream()

    def answer(self, key: str) -> Any | None:
        """The client's answer to input request ``key`` in this or an earlier round, if any."""
        return self._answers.get(key)

    def input_required(self, requests: Mapping[str, Mapping[str, Any]], *, state: str | None = None) -> dict[str, Any]:
        """The InputRequiredResult asking the client for ``requests``; the answers so far and
        ``state`` travel in its requestState."""
        self.pending = {
            "inputRequests": {k: dict(v) for k, v in requests.items()},
            "requestState": _seal_state(self._answers, state if state is not None else self.request_state),
        }
        return {"resultType": "input_required", **self.pending}

    def require_input(self, requests: Mapping[str, Mapping[str, Any]], *, state: str | None = None) -> NoReturn:
        """End this round asking the client for ``requests`` (2026-07-28); raises InputRequired."""
        self.input_required(requests, state=state)
        raise InputRequired(f"waiting for the client to answer {', '.join(sorted(requests))}")

    async def _ask(
        self,
        capability: str,
        method: str,
        params: dict[str, Any],
        key: str,
        request_type: type[Any],
        result_type: type[BaseModel],
    ) -> dict[str, Any]:
        if self.is_modern:
            answer = self._answers.get(key)
            if answer is not None:
                return dict(answer) if isinstance(answer, Mapping) else {"value": answer}
        if not self.has_capability(capability):
            self.missing_capability = capability
            raise ClientCapabilityMissing(capability)
        if self.is_modern or self._session is None:
            self.require_input({key: {"method": method, "params": params}})
        request = request_type.model_validate({"method": method, "params": params})
        result = await self._session.send_request(
            request,
            result_type,
            request_read_timeout_seconds=CLIENT_REQUEST_TIMEOUT_S,
            metadata=ServerMessageMetadata(related_request_id=self._request_id),
        )
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _seal_state(answers: Mapping[str, Any], user_state: str | None) -> str:
    # Plain JSON here: the SDK's RequestStateBoundary encrypts and binds it before it leaves.
    return json.dumps({"v": _STATE_VERSION, "answers": dict(answers), "state": user_state}, separators=(",", ":"))


def _open_state(request_state: str | None) -> tuple[dict[str, Any], str | None]:
    if not request_state:
        return {}, None
    try:
        data = json.loads(request_state)
    except ValueError:
        return {}, request_state
    if isinstance(data, dict) and data.get("v") == _STATE_VERSION and isinstance(data.get("answers"), dict):
        state = data.get("state")
        return dict(data["answers"]), state if isinstance(state, str) else None
    return {}, request_state
