"""Every use of the MCP SDK's private internals, in one place.

The gateway needs two things the SDK (``mcp`` 2.3) does not offer publicly:

- ``seal_result``: sealing a 2026-07-28 ``InputRequiredResult``'s ``requestState`` the way the
  ``RequestStateBoundary`` middleware does, for results the direct JSON path answers without
  going through that middleware (``RequestStateBoundary._seal_result``);
- ``session_connection``: the per-connection object behind a handshake-era ``ServerSession``
  (``ServerSession._connection``), which is what can send ``notifications/*/list_changed``
  outside any request.

``tests/gateway/test_sdk_compat.py`` checks that each of these still exists with the shape used
here, so an SDK upgrade that moves them fails that test by name instead of failing calls at run
time. When it fails: find the new home of the internal, change it here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary

__all__ = ["seal_result", "session_connection", "SDK_INTERNALS"]

# (object, attribute) pairs this module reaches into; the contract test walks them.
SDK_INTERNALS: tuple[tuple[type, str], ...] = (
    (RequestStateBoundary, "_seal_result"),
)


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
