"""The MCP SDK client internals the lean path reuses (runtimes/mcp/sdk_compat.py) are still where
it reaches, with the shape it uses. This fails by name on an SDK upgrade that moves one."""

from __future__ import annotations

import inspect

import anyio
import pytest
from mcp import Client
from mcp.client import session as client_session
from mcp.client.session import ClientSession
from mcp_types import methods as wire_methods

from pincer.runtimes.mcp import ServerConnection
from pincer.runtimes.mcp.sdk_compat import call_request, negotiated_version
from pincer.runtimes.mcp.upstream_tasks import CreatedTask
from tests.runtimes.mcp.conftest import WAIT_S, faulty_config, time_server_config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("owner", "name", "params"),
    [
        (client_session, "_clamp_inbound_ttl", ["raw"]),
        (client_session, "_later_revision_fields", ["method", "version"]),
        (wire_methods, "validate_server_result", ["method", "version", "data", "surface"]),
        (Client, "_drive_input_required", ["self", "first", "retry"]),
        (ClientSession, "validate_tool_result", ["self", "name", "result"]),
        (Client, "_build_session", ["self", "exit_stack"]),
        (ClientSession, "_build_capabilities", ["self", "version"]),
    ],
)
def test_each_function_still_exists_with_its_parameters(owner: object, name: str, params: list[str]) -> None:
    function = getattr(owner, name, None)
    assert function is not None, f"the MCP SDK no longer has {name}: update runtimes/mcp/sdk_compat.py"
    assert list(inspect.signature(function).parameters) == params, f"{name} changed: update runtimes/mcp/sdk_compat.py"


def test_send_request_still_stamps_and_reads_results_the_way_the_lean_path_copies() -> None:
    source = inspect.getsource(ClientSession.send_request)
    for step in ("self._stamp(data, opts)", "(key := type(request).name_param) is not None and MCP_NAME_HEADER not in headers", "_clamp_inbound_ttl(raw)", "_methods.validate_server_result(method, version, raw)",
                 "_later_revision_fields(method, version)", 'self._negotiated_version or "2025-11-25"'):  # fmt: skip
        assert step in source, f"ClientSession.send_request no longer does {step}: update runtimes/mcp/sdk_compat.py"
    assert "self._call_tool_adapter" in inspect.getsource(ClientSession.call_tool)


@pytest.mark.parametrize(
    ("config", "version", "meta_keys"),
    [
        (faulty_config(), "2025-11-25", set()),
        (time_server_config(), "2026-07-28", {"io.modelcontextprotocol/protocolVersion"}),
    ],
    ids=["handshake", "2026-07-28"],
)
async def test_a_live_session_still_has_what_the_lean_path_reads(config, version: str, meta_keys: set[str]) -> None:
    conn = ServerConnection(config, lean=True)
    try:
        with anyio.fail_after(WAIT_S * 3):
            await conn.start()
        session = conn._session  # the one place a test reaches into the connection: the live SDK client
        assert session is not None and session.client is not None
        client = session.client
        assert negotiated_version(client) == version
        assert hasattr(client.session, "_call_tool_adapter")
        # finish_call resolves an upstream task through the claim the Client folded in.
        assert set(client._folded_extensions.by_model) == {CreatedTask}
        params, headers = call_request(client, "echo", {"text": "x"})
        assert params["name"] == "echo" and params["arguments"] == {"text": "x"}
        assert headers["mcp-protocol-version"] == version, headers
        assert headers.get("mcp-name") == ("echo" if meta_keys else None), headers
        assert meta_keys <= set(params.get("_meta", {})), params
    finally:
        await conn.aclose()
