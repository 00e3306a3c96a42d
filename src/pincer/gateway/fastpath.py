"""A direct path for the common 2026-07-28 ``tools/call``: one POST in, one JSON answer out.

The SDK's streamable-HTTP entry serves every request through a general machine: a task for the
handler and one watching for disconnects, a stream that might turn into SSE, the runner's
middleware chain, and pydantic validation of params and result. For a ``tools/call`` that
cannot stream anything back (no progress token, no log level asked for) the SDK itself ends up
answering plain JSON, so this path answers it directly: the same validation ladder (the SDK's
own ``classify_inbound_request``, duplicated-header and ``Mcp-Param-*`` checks), then the
dispatcher, then the JSON-RPC response.

Anything it is not sure about — another method, a continuation round carrying
``requestState``/``inputResponses``, a request the ladder rejects, odd shapes — it declines,
and the SDK serves the request unchanged, errors included.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    X_MCP_HEADER_KEY,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types import LOG_LEVEL_META_KEY, SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Receive, Scope, Send

from pincer.core.offload import off_loop
from pincer.gateway.channel import McpChannel
from pincer.gateway.guard import SESSION_SCOPE_KEY
from pincer.gateway.sdk_compat import seal_result
from pincer.gateway.tokens import GatewaySession

logger = logging.getLogger(__name__)

__all__ = ["ModernCallFastPath"]

_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()
_CONTINUATION_KEYS = ("requestState", "inputResponses")
_JSON_HEADERS = [(b"content-type", b"application/json")]
_MAX_CACHED_SCHEMAS = 4_096


def _disconnect_of(receive: Receive) -> Callable[[], Awaitable[None]]:
    async def gone() -> None:
        # The body was read whole already: the next message is the client hanging up.
        while (await receive())["type"] != "http.disconnect":
            pass

    return gone


def _accepts(accept: str) -> bool:
    """JSON and SSE both acceptable (what the SDK's SSE-mode entry requires of a POST)."""
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    json_ok = bool(types & {"application/json", "application/*", "*/*"})
    sse_ok = bool(types & {"text/event-stream", "text/*", "*/*"})
    return json_ok and sse_ok


class ModernCallFastPath:
    def __init__(self, gateway: Any, boundary: RequestStateBoundary) -> None:
        self._gateway = gateway
        self._boundary = boundary
        self._server_info: dict[str, Any] = gateway.server.server_info_stamp
        self._declares: dict[int, tuple[Any, bool]] = {}

    async def try_handle(self, scope: Scope, body: bytes, send: Send, receive: Receive | None = None) -> bool:
        """Answer the request and return True, or return False having sent nothing."""
        raw_headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = dict(raw_headers)
        if headers.get("mcp-protocol-version") not in MODERN_PROTOCOL_VERSIONS:
            return False
        if not headers.get("content-type", "").lower().startswith("application/json"):
            return False
        if not _accepts(headers.get("accept", "")):
            return False
        session = scope.get(SESSION_SCOPE_KEY)
        if not isinstance(session, GatewaySession):
            return False
        call = await off_loop(self._eligible_call, body, over=body)  # a large body is parsed off the loop
        if call is None:
            return False
        decoded, name, arguments, meta = call
        if find_duplicated_routing_header(raw_headers) is not None:
            return False
        verdict = classify_inbound_request(decoded, headers=headers)
        if isinstance(verdict, InboundLadderRejection):
            return False  # a rejection: the SDK answers it, in its words
        if not isinstance(verdict.client_capabilities, Mapping) or not isinstance(verdict.client_info, Mapping | None):
            return False
        if any(key.startswith(_PARAM_PREFIX) for key in headers) or (arguments and self._declares_headers(name)):
            schema = self._gateway.tool_input_schema(name)
            if schema is not None and validate_mcp_param_headers(schema, arguments, headers) is not None:
                return False

        channel = McpChannel(
            protocol_version=verdict.protocol_version,
            client_capabilities=verdict.client_capabilities,
            meta=meta,
            caller_gone=_disconnect_of(receive) if receive is not None else None,
        )
        request_id = decoded["id"]
        try:
            result = await self._gateway.run_call(
                session, name, arguments, channel, idempotency_key=self._gateway.idempotency_key(decoded["params"])
            )
        except MCPError as exc:
            error = exc.error.model_dump(mode="json", exclude_none=True)
            await _respond(
                send, ERROR_CODE_HTTP_STATUS.get(exc.code, 200), {"jsonrpc": "2.0", "id": request_id, "error": error}
            )
            return True
        if result.get("resultType") == "input_required":
            ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
                session=None,  # type: ignore[arg-type]  # sealing reads method and params only
                lifespan_context=None,
                protocol_version=verdict.protocol_version,
                method="tools/call",
                params=decoded["params"],
                request_id=request_id,
            )
            result = seal_result(self._boundary, ctx, result)
        elif any(block.get("type") != "text" for block in result.get("content", ())):
            # Content blocks a runtime produced are checked against the spec before they leave.
            result = serialize_server_result("tools/call", verdict.protocol_version, result)
        meta_out = dict(result.get("_meta") or {})
        meta_out[SERVER_INFO_META_KEY] = self._server_info
        result["_meta"] = meta_out
        await _respond(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": result})
        return True

    def _declares_headers(self, name: str) -> bool:
        """Whether the tool's schema mirrors any argument into an ``Mcp-Param-*`` header."""
        schema = self._gateway.tool_input_schema(name)
        if schema is None:
            return False
        key = id(schema)
        found = self._declares.get(key)
        if found is None or found[0] is not schema:
            if len(self._declares) >= _MAX_CACHED_SCHEMAS:
                self._declares.clear()
            found = (schema, X_MCP_HEADER_KEY in json.dumps(schema))
            self._declares[key] = found
        return found[1]

    @staticmethod
    def _eligible_call(body: bytes) -> tuple[dict[str, Any], str, dict[str, Any], dict[str, Any]] | None:
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or decoded.get("jsonrpc") != "2.0" or decoded.get("method") != "tools/call":
            return None
        request_id = decoded.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return None
        params = decoded.get("params")
        if not isinstance(params, dict) or any(params.get(key) is not None for key in _CONTINUATION_KEYS):
            return None
        name, arguments, meta = params.get("name"), params.get("arguments", {}), params.get("_meta")
        if not isinstance(name, str) or not name or not isinstance(arguments, dict) or not isinstance(meta, dict):
            return None
        if "progressToken" in meta or LOG_LEVEL_META_KEY in meta:
            return None  # the caller wants notifications: the SDK's streaming path serves it
        return decoded, name, arguments, meta


async def _respond(send: Send, status: int, message: dict[str, Any]) -> None:
    payload = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    headers = _JSON_HEADERS + [(b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
