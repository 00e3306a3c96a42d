"""pincer's MCP client as the conformance suite drives it: ``conformance_client.py URL``.

The suite starts a scenario server, runs this with its URL appended and the scenario name in
``MCP_CONFORMANCE_SCENARIO``, then checks what the server saw. Everything goes through pincer's
own runtime (ServerConfig -> McpRuntime -> invoke), not the SDK client directly; with
``PINCER_CONFORMANCE_LEAN=1`` its ``tools/call`` takes the lean path ([tools] mcp_lean_calls).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import anyio

from pincer.core.values import HostContext
from pincer.runtimes.mcp import McpRuntime, PinStore, ServerConfig

CALL_TIMEOUT_S = 20.0
SCENARIO_CALLS = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


async def main(url: str, scenario: str) -> int:
    with tempfile.TemporaryDirectory() as home:
        runtime = McpRuntime(
            [ServerConfig(name="conformance", transport="http", url=url, connect_timeout_s=CALL_TIMEOUT_S)],
            pins=PinStore(Path(home)),
            lean_calls=os.environ.get("PINCER_CONFORMANCE_LEAN") == "1",
        )
        try:
            await runtime.start()
            status = runtime.statuses()[0]
            if status.state != "running":
                print(f"could not connect: {status.last_error}", file=sys.stderr)
                return 1
            print(f"connected: {status.server_info} protocol {status.protocol_version}", file=sys.stderr)
            tools = {spec.annotations["upstream_name"]: spec for spec in runtime.tools()}
            print(f"tools: {sorted(tools)}", file=sys.stderr)
            if scenario in SCENARIO_CALLS:
                name, args = SCENARIO_CALLS[scenario]
                spec = tools[name]
                host = HostContext(session="main", tool=spec.name, timeout_s=CALL_TIMEOUT_S)
                output = await runtime.invoke(spec, args, host)
                print(f"{name}: {output.value!r} error={output.is_error}")
            return 0
        finally:
            await runtime.aclose()


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")))
