"""The MCP SDK internals pincer relies on (gateway/sdk_compat.py) are still where it reaches.

This fails loudly, by name, on an SDK upgrade that moves or reshapes one of them.
"""

from __future__ import annotations

import inspect
import math

import anyio
import pytest
from mcp.server.connection import Connection
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.session import ServerSession
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from pincer.gateway.sdk_compat import (
    SDK_INSTANCE_INTERNALS,
    SDK_INTERNALS,
    open_transport,
    seal_result,
    session_connection,
    session_in_flight,
)


@pytest.mark.parametrize(("owner", "name"), SDK_INTERNALS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_each_internal_still_exists(owner: type, name: str) -> None:
    assert hasattr(owner, name), f"the MCP SDK no longer has {owner.__name__}.{name}: update gateway/sdk_compat.py"


def test_seal_result_keeps_its_signature_and_seals_state() -> None:
    params = list(inspect.signature(RequestStateBoundary._seal_result).parameters)
    assert params == ["self", "ctx", "result", "binding"], params
    boundary = RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience="pincer")
    from mcp.server.context import ServerRequestContext

    ctx = ServerRequestContext(
        session=None,  # type: ignore[arg-type]
        lifespan_context=None,
        protocol_version="2026-07-28",
        method="tools/call",
        params={"name": "t", "arguments": {}},
        request_id=1,
    )
    result = {"resultType": "input_required", "inputRequests": {}, "requestState": "plain-state"}
    sealed = seal_result(boundary, ctx, result)
    assert sealed["requestState"] != "plain-state" and isinstance(sealed["requestState"], str)


def test_server_session_still_keeps_its_connection_privately() -> None:
    source = inspect.getsource(ServerSession.__init__)
    assert "self._connection = connection" in source, "ServerSession._connection moved: update gateway/sdk_compat.py"
    assert session_connection(object()) is None
    assert hasattr(Connection, "has_standalone_channel") and hasattr(Connection, "send_tool_list_changed")


@pytest.mark.parametrize(("owner", "name"), SDK_INSTANCE_INTERNALS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_each_instance_internal_still_exists(owner: type, name: str) -> None:
    from mcp.server.lowlevel import Server

    manager = StreamableHTTPSessionManager(app=Server("contract"))
    transport = StreamableHTTPServerTransport(mcp_session_id="s1", idle_timeout=60.0)
    instance = {StreamableHTTPSessionManager: manager, StreamableHTTPServerTransport: transport}[owner]
    assert hasattr(instance, name), f"the MCP SDK no longer sets {owner.__name__}.{name}: update gateway/sdk_compat.py"


@pytest.mark.anyio
async def test_a_request_held_in_flight_stops_the_idle_countdown_like_the_transports_own() -> None:
    from mcp.server.lowlevel import Server

    transport = StreamableHTTPServerTransport(mcp_session_id="s1", idle_timeout=60.0)
    manager = StreamableHTTPSessionManager(app=Server("contract"))
    assert open_transport(manager, "s1") is None  # not served by the manager
    manager._server_instances["s1"] = transport
    async with transport.connect():
        assert open_transport(manager, "s1") is transport
        idle = transport.idle_scope
        assert idle is not None
        with session_in_flight(transport):
            assert idle.deadline == math.inf and transport._requests_in_flight == 1
        assert transport._requests_in_flight == 0
        assert anyio.current_time() < idle.deadline <= anyio.current_time() + 60.0
        await transport.terminate()
        assert open_transport(manager, "s1") is None
