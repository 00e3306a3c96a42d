"""Every use of the MCP SDK's private internals, in one place.

The gateway needs two things the SDK (``mcp`` 2.3) does not offer publicly:

- ``seal_result``: sealing a 2026-07-28 ``InputRequiredResult``'s ``requestState`` the way the
  ``RequestStateBoundary`` middleware does, for results the direct JSON path answers without
  going through that middleware (``RequestStateBoundary._seal_result``);
- ``session_connection``: the per-connection object behind a handshake-era ``ServerSession``
  (``ServerSession._connection``), which is what can send ``notifications/*/list_changed``
  outside any request;
- ``open_transport`` and ``session_in_flight``: for the direct handshake-era path
  (``gateway/handshake.py``), the session's transport if the session manager still serves it
  (``StreamableHTTPSessionManager._server_instances``, ``is_terminated``), and the transport's
  idle bookkeeping (``_requests_in_flight``, ``_idle_timeout``, the public ``idle_scope``) held
  the way ``StreamableHTTPServerTransport.handle_request`` holds it, so that a session only
  ever called on the direct path does not expire as idle while it is in use.

``tests/gateway/test_sdk_compat.py`` checks that each of these still exists with the shape used
here, so an SDK upgrade that moves them fails that test by name instead of failing calls at run
time. When it fails: find the new home of the internal, change it here, and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = [
    "seal_result",
    "session_connection",
    "open_transport",
    "session_in_flight",
    "SDK_INTERNALS",
    "SessionScopedManager",
    "SDK_INSTANCE_INTERNALS",
]

# (object, attribute) pairs this module reaches into; the contract test walks them.
SDK_INTERNALS: tuple[tuple[type, str], ...] = (
    (RequestStateBoundary, "_seal_result"),
    (StreamableHTTPServerTransport, "is_terminated"),
    (StreamableHTTPSessionManager, "_admit_session"),
)
# Attributes set in ``__init__`` (so only an instance has them): the contract test builds one.
SDK_INSTANCE_INTERNALS: tuple[tuple[type, str], ...] = (
    (StreamableHTTPSessionManager, "_server_instances"),
    (StreamableHTTPServerTransport, "_requests_in_flight"),
    (StreamableHTTPServerTransport, "_idle_timeout"),
    (StreamableHTTPServerTransport, "idle_scope"),
    (StreamableHTTPServerTransport, "_event_store"),
)


class SessionScopedManager(StreamableHTTPSessionManager):
    """The SDK's session manager, with each new session's transport given its own view of the
    event store (``MemoryEventStore.for_session``): the SDK shares one store across sessions,
    and resuming by ``Last-Event-ID`` must never reach another session's events."""

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        for_session = getattr(self.event_store, "for_session", None)
        if transport is not None and callable(for_session) and hasattr(transport, "_event_store"):
            transport._event_store = for_session(transport.mcp_session_id or "")
        return transport


def seal_result(
    boundary: RequestStateBoundary, ctx: ServerRequestContext[Any, Any], result: Mapping[str, Any]
) -> dict[str, Any]:
    """``result`` with its ``requestState`` sealed by ``boundary`` (no round binding)."""
    return dict(boundary._seal_result(ctx, dict(result), None))  # type: ignore[arg-type]


def session_connection(session: Any) -> Connection | None:
    """The Connection of a handshake-era ServerSession, or None when it has none (or the SDK
    moved it: the contract test says so)."""
    connection = getattr(session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def open_transport(manager: StreamableHTTPSessionManager, session_id: str) -> StreamableHTTPServerTransport | None:
    """The transport of session ``session_id`` while the manager serves it (not terminated, not
    expiring as idle), else None."""
    instances = getattr(manager, "_server_instances", None)
    transport = instances.get(session_id) if isinstance(instances, dict) else None
    if not isinstance(transport, StreamableHTTPServerTransport) or transport.is_terminated:
        return None
    idle = transport.idle_scope
    if idle is not None and idle.cancel_called:
        return None
    if not isinstance(getattr(transport, "_requests_in_flight", None), int):
        return None
    return transport


@contextmanager
def session_in_flight(transport: StreamableHTTPServerTransport) -> Iterator[None]:
    """Count one request in flight on ``transport`` while the block runs, as its own
    ``handle_request`` does: the idle countdown stops, and restarts when the last one ends."""
    idle, timeout_s = transport.idle_scope, getattr(transport, "_idle_timeout", None)
    if idle is None or timeout_s is None:
        yield
        return
    transport._requests_in_flight += 1
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + timeout_s
