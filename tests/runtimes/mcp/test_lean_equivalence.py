"""The lean path gives what the SDK path gives, byte for byte, against the servers pincer is tested
with: the same calls go to two processes of each server, one connection on each path, and every
result (its JSON as the SDK models it, and the ToolOutput the gateway hands on), every progress
update and every error must be equal.

Servers and eras: faulty_server.py (stdlib, 2025-11-25), modern_server.py (the SDK's MCPServer:
structured content checked against an output schema, progress, elicitation refused since no
person can be asked on a call no MCP client made; in both eras), mcp-server-time (the Python SDK, in
the 2026-07-28 era and in the handshake era), @modelcontextprotocol/server-everything (Node,
2025-11-25), @playwright/mcp (Node, a headless Chromium, on a local page). Calls whose answer depends on the clock (get_current_time, the apps server's
get-time) are left out: two processes cannot agree on them; Playwright's file names hold the time
of day, which is compared as such (``PLAYWRIGHT_STAMP``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.errors import PincerError
from pincer.runtimes.mcp import ServerConfig, ServerConnection
from pincer.runtimes.mcp.results import to_tool_output
from tests.localservers import serve
from tests.runtimes.mcp.conftest import CALL_TIMEOUT_S, NODE22, faulty_config, npm_ready, time_server_config
from tests.runtimes.mcp.test_passthrough import _playwright, published_ready

pytestmark = pytest.mark.anyio

START_TIMEOUT_S = 120.0
MODERN_SERVER = Path(__file__).with_name("modern_server.py")

Call = tuple[str, dict[str, Any]]

FAULTY_CALLS: list[Call] = [
    ("echo", {"text": "plain"}),
    ("echo", {"text": "é ü 中文 🦀 \u2028 \"quoted\" \\ back"}),
    ("echo", {"text": "x" * 200_000}),
    ("mixed", {}),
    ("fail", {}),
    ("progress", {}),
    ("elicit", {}),
    ("input_required", {}),  # not a valid result in the handshake era: the same error on both paths
    ("no_such_tool", {}),
    ("echo", {}),
]
TIME_CALLS: list[Call] = [
    ("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}),
    ("convert_time", {"source_timezone": "America/New_York", "time": "23:59", "target_timezone": "Asia/Tokyo"}),
    ("convert_time", {"source_timezone": "Nowhere/Atlantis", "time": "12:00", "target_timezone": "UTC"}),
    ("convert_time", {"source_timezone": "UTC", "time": "25:99", "target_timezone": "UTC"}),
    ("no_such_tool", {}),
]
MODERN_CALLS: list[Call] = [
    ("count", {"steps": 3}),
    ("count", {"steps": 0}),
    ("count", {"steps": "many"}),
    ("greet", {}),
    ("greet_resolved", {}),
    ("no_such_tool", {}),
]
EVERYTHING_CALLS: list[Call] = [
    ("echo", {"message": "hi ✓"}),
    ("get-sum", {"a": 2, "b": 3.5}),
    ("get-tiny-image", {}),
    ("get-structured-content", {"location": "New York"}),
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-resource-links", {"count": 3}),
    ("get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
    ("get-env", {}),
    ("trigger-long-running-operation", {"duration": 0.2, "steps": 4}),
    ("simulate-research-query", {"topic": "lobsters", "ambiguous": True}),
    ("get-sum", {"a": "not a number"}),
    ("no_such_tool", {}),
]


def everything_config() -> ServerConfig:
    script = npm_ready()
    return ServerConfig(
        name="everything", transport="stdio", command=str(NODE22), args=(str(script), "stdio"), connect_timeout_s=60.0
    )


async def outcome(conn: ServerConnection, tool: str, args: dict[str, Any]) -> tuple[Any, ...]:
    """Everything a caller of the connection sees of one call."""
    updates: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        updates.append((value, total, message))

    try:
        with anyio.fail_after(CALL_TIMEOUT_S * 2):
            result = await conn.call_tool(tool, args, timeout_s=CALL_TIMEOUT_S, progress=progress)
    except PincerError as exc:
        return ("error", type(exc).__name__, str(exc), exc.hint, updates)
    output = to_tool_output(result, server=conn.name)
    return ("result", result.model_dump_json(by_alias=True, exclude_unset=True), output, updates)


# @playwright/mcp names the files it writes by the time of day to the millisecond.
PLAYWRIGHT_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z")


async def compare(
    config: ServerConfig,
    calls: list[Call],
    *,
    stamp: re.Pattern[str] | None = None,
    lean_config: ServerConfig | None = None,
) -> None:
    """``stamp``: a clock reading the server writes into its answers, the one part compared as
    "a time stands here" instead of byte for byte. ``lean_config``: the lean path's server, when
    it is not started from ``config`` (an HTTP server of its own)."""
    sdk, lean = ServerConnection(config), ServerConnection(lean_config or config, lean=True)
    try:
        with anyio.fail_after(START_TIMEOUT_S):
            assert await sdk.start() == await lean.start(), "the two processes list different tools"
        assert sdk.status().protocol_version == lean.status().protocol_version
        for tool, args in calls:
            expected, got = await outcome(sdk, tool, args), await outcome(lean, tool, args)
            if stamp is not None:
                expected, got = (stamp.sub("<time>", repr(expected)),), (stamp.sub("<time>", repr(got)),)
            assert got == expected, f"{config.name} {tool}({args}) differs on the lean path"
            assert lean.lean_in_flight == 0
        assert sdk.lean_in_flight is None
    finally:
        await sdk.aclose()
        await lean.aclose()


async def test_the_faulty_server_answers_alike_on_both_paths() -> None:
    await compare(faulty_config(), FAULTY_CALLS)


@pytest.mark.parametrize("protocol", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_an_sdk_mcpserver_answers_alike_on_both_paths(protocol: str) -> None:
    config = ServerConfig(
        name="modern", transport="stdio", command=sys.executable, args=(str(MODERN_SERVER),), protocol=protocol
    )
    await compare(config, MODERN_CALLS)


@pytest.mark.parametrize("protocol", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_mcp_server_time_answers_alike_on_both_paths(protocol: str) -> None:
    config = time_server_config().with_changes(protocol=protocol)
    await compare(config, TIME_CALLS)


async def test_server_everything_answers_alike_on_both_paths() -> None:
    await compare(everything_config(), EVERYTHING_CALLS)


def test_playwright_mcp_answers_alike_on_both_paths(tmp_path: Path) -> None:
    published_ready()
    with serve() as site:
        calls: list[Call] = [
            ("browser_navigate", {"url": site.url("/page")}),
            ("browser_snapshot", {}),
            ("browser_console_messages", {"level": "info"}),
            ("browser_navigate", {"url": "notascheme://nowhere"}),
            ("browser_close", {}),
        ]
        config = _playwright(tmp_path).with_changes(connect_timeout_s=START_TIMEOUT_S)
        anyio.run(lambda: compare(config, calls, stamp=PLAYWRIGHT_STAMP))


async def test_the_suite_compares_real_answers(tmp_path: Path) -> None:
    """Not a comparison of two errors: the calls above mostly succeed, with content."""
    conn = ServerConnection(faulty_config(), lean=True)
    try:
        kinds = [(await outcome(conn, tool, args))[0] for tool, args in FAULTY_CALLS]
        assert kinds.count("result") >= 6
    finally:
        await conn.aclose()
