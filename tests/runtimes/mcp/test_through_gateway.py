"""An MCP client reaches an upstream MCP server through ``pincer serve``: the whole chain, for real.

SDK client --streamable HTTP + bearer token--> ``pincer serve`` (a subprocess) --stdio--> mcp-server-time,
set up the way a user does it: ``pincer mcp add``, a grant in config.toml, ``pincer token``; checked
afterwards with ``pincer audit list``. A tool no grant covers asks, and a person answers over REST
while the MCP call waits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.conftest import PINCER_BIN, pincer_serve
from tests.runtimes.mcp.conftest import CALL_TIMEOUT_S, pid_alive

CLI_TIMEOUT_S = 60.0  # a CLI command that starts the time server once (pincer mcp add) takes ~2 s
APPROVAL_APPEAR_TIMEOUT_S = 10.0
APPROVAL_POLL_S = 0.02
TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")

# The grant covers one of the server's two tools; the other falls to the default policy, which
# asks for anything with the network effect (given to both by per-tool overrides below).
GRANT = '[[grants]]\ntool = "time_get_current_time"\ndefault = "allow"\n'
CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PINCER_HOME": str(home)}
    return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def _json_text(result: Any) -> dict[str, Any]:
    """mcp-server-time answers with one text block holding JSON."""
    (block,) = result.content
    return json.loads(block.text)


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc), to check none outlives the gateway."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(child) for child in text)
    return found


def _command_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.parametrize("lean", [False, True], ids=["sdk", "lean"])
def test_an_sdk_client_calls_an_upstream_server_through_pincer_serve(lean: bool, pincer_home: Path) -> None:
    # Both tools are read-only and closed-world (no effect by the table); the per-tool overrides
    # give them network, so the default policy asks for the one the grant does not cover.
    added = _pincer(
        pincer_home, "mcp", "add", "time", "--command", str(TIME_SERVER),
        "--arg", "--local-timezone", "--arg", "UTC", "--json",
        "--tool-effects", "get_current_time=network", "--tool-effects", "convert_time=network",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert {t["name"] for t in json.loads(added.stdout)["tools"]} == {"get_current_time", "convert_time"}
    # lean: tools/call to the upstream past the SDK's client session (runtimes/mcp/lean.py)
    tools = "[tools]\nmcp_lean_calls = true\n\n" if lean else ""
    (pincer_home / "config.toml").write_text(tools + GRANT, encoding="utf-8")
    token = _pincer(pincer_home, "token").stdout.strip()

    with pincer_serve(pincer_home) as server:
        info = server.info
        assert token == server.token

        async def drive() -> dict[str, Any]:
            seen: dict[str, Any] = {}
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
                # The newest protocol era for the granted call ...
                async with Client(streamable_http_client(info["mcp_url"], http_client=http), mode="auto") as client:
                    listed = await client.list_tools()
                    seen["tools"] = {tool.name: tool for tool in listed.tools}
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        seen["now"] = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
                    seen["era"] = client.protocol_version
                # ... and the handshake era for the one that asks, answered over REST meanwhile.
                async with Client(streamable_http_client(info["mcp_url"], http_client=http), mode="legacy") as client:
                    seen["approval"], seen["converted"] = await _call_answered_over_rest(client, info, token)
            return seen

        seen = anyio.run(drive)
        upstream = [pid for pid in _children(server.process.pid) if str(TIME_SERVER) in _command_of(pid)]
        audit = _pincer(pincer_home, "audit", "list", "--json")

    # Listing: the upstream's tools under their namespaced names, schema passed through.
    assert {"time_get_current_time", "time_convert_time"} <= set(seen["tools"])
    schema = seen["tools"]["time_get_current_time"].input_schema
    assert schema["required"] == ["timezone"] and "timezone" in schema["properties"]

    # The granted call: the upstream's own answer, through gateway, call chain and stdio.
    now = seen["now"]
    assert seen["era"] == "2026-07-28" and not now.is_error
    answer = _json_text(now)
    assert answer["timezone"] == "UTC" and answer["datetime"].endswith("+00:00") and answer["is_dst"] is False

    # The asked call waited for the REST answer, then ran upstream.
    approval = seen["approval"]
    assert (approval["tool"], approval["args"], approval["effects"]) == ("time_convert_time", CONVERT, ["network"])
    converted = seen["converted"]
    assert not converted.is_error
    target = _json_text(converted)["target"]
    assert target["timezone"] == "Asia/Tokyo" and target["datetime"].endswith("T21:00:00+09:00")

    # The gateway ran the server as its child over stdio, and took it down when it stopped.
    assert len(upstream) == 1, upstream
    assert server.process.returncode == 0
    assert not pid_alive(upstream[0]), "mcp-server-time outlived pincer serve"

    # The audit log, read by another process while the gateway ran, holds both calls.
    assert audit.returncode == 0, audit.stderr
    records = {r["tool"]: r for r in json.loads(audit.stdout) if r["kind"] == "call"}
    granted = records["time_get_current_time"]
    assert (granted["decision"], granted["outcome"], granted["args"]) == ("allow", "ok", {"timezone": "UTC"})
    assert granted["grant_id"] is not None and granted["effects"] == ["network"]
    asked = records["time_convert_time"]
    assert (asked["outcome"], asked["approval_id"], asked["args"]) == ("ok", approval["id"], CONVERT)
    assert token not in audit.stdout


async def _call_answered_over_rest(client: Client, info: dict[str, Any], token: str) -> tuple[dict[str, Any], Any]:
    """Start a call no grant covers, find its approval over REST, allow it once, collect the result."""
    results: list[Any] = []

    async def call() -> None:
        results.append(await client.call_tool("time_convert_time", CONVERT))

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=info["api_url"], headers=headers, trust_env=False) as rest:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(APPROVAL_APPEAR_TIMEOUT_S):
                while not (pending := (await rest.get("/approvals")).json()["approvals"]):
                    await anyio.sleep(APPROVAL_POLL_S)
            assert not results, "the call must wait for the answer"
            (approval,) = pending
            answered = await rest.post(f"/approvals/{approval['id']}", json={"decision": "allow_once"})
            assert answered.status_code == 200 and answered.json()["answered_by"] == "rest:main"
            with anyio.fail_after(CALL_TIMEOUT_S):
                while not results:
                    await anyio.sleep(APPROVAL_POLL_S)
    return approval, results[0]

