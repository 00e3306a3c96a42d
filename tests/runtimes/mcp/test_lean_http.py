"""The lean path over streamable HTTP (runtimes/mcp/lean_streams.py): the same answers as the SDK
path, byte for byte, and the faults that end a call give the same clear errors and leave no
pending id behind.

Servers: modern_server.py (the SDK's MCPServer) answering with SSE streams and with JSON, in the
2026-07-28 era and the handshake era (a session id), and @modelcontextprotocol/server-everything
over streamable HTTP. Each path gets a server process of its own, so no call of one changes
what the other sees."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from pincer.core.errors import ToolError, ToolTimeout
from pincer.runtimes.mcp import ServerConfig, ServerConnection
from pincer.runtimes.mcp import connection as connection_module
from pincer.runtimes.mcp.lean import FIRST_ID
from tests.runtimes.mcp.conftest import NODE22, WAIT_S, npm_ready
from tests.runtimes.mcp.test_everything import free_port, wait_for_port
from tests.runtimes.mcp.test_lean_equivalence import EVERYTHING_CALLS, MODERN_CALLS, MODERN_SERVER, compare, outcome

pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("protocol", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
ANSWERS = pytest.mark.parametrize("flags", [(), ("--json",)], ids=["sse", "json"])
STOP_TIMEOUT_S = 10.0


@contextmanager
def running(command: list[str], env: dict[str, str] | None = None) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A server listening on a free local port (``{port}`` in ``command`` or ``env``); the port
    and the process."""
    port = free_port()
    process = subprocess.Popen(
        [part.replace("{port}", str(port)) for part in command],
        env={name: value.replace("{port}", str(port)) for name, value in env.items()} if env is not None else None,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield port, process
    finally:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)


def modern(*flags: str) -> list[str]:
    return [sys.executable, str(MODERN_SERVER), "--http", "{port}", *flags]


def http_config(name: str, port: int, protocol: str = "auto") -> ServerConfig:
    return ServerConfig(name=name, transport="http", url=f"http://127.0.0.1:{port}/mcp", protocol=protocol)


@ERAS
@ANSWERS
async def test_an_sdk_mcpserver_over_http_answers_alike_on_both_paths(protocol: str, flags: tuple[str, ...]) -> None:
    with running(modern(*flags)) as (sdk_port, _), running(modern(*flags)) as (lean_port, _):
        await compare(http_config("modern", sdk_port, protocol), MODERN_CALLS,
                      lean_config=http_config("modern", lean_port, protocol))  # fmt: skip


async def test_server_everything_over_http_answers_alike_on_both_paths() -> None:
    script = npm_ready()
    command = [str(NODE22), str(script), "streamableHttp"]
    env = {"PORT": "{port}", "PATH": str(NODE22.parent)}
    with running(command, env) as (sdk_port, _), running(command, env) as (lean_port, _):
        # get-env shows each server its own PORT
        calls = [(tool, args) for tool, args in EVERYTHING_CALLS if tool != "get-env"]
        await compare(http_config("everything", sdk_port), calls, lean_config=http_config("everything", lean_port))


@ERAS
async def test_lean_http_calls_carry_their_own_ids(protocol: str) -> None:
    with running(modern()) as (port, _):
        conn = ServerConnection(http_config("modern", port, protocol), lean=True)
        try:
            result = await outcome(conn, "request_id", {})
            assert result[0] == "result" and int(result[2].value["result"]) >= FIRST_ID
            assert conn.lean_in_flight == 0
        finally:
            await conn.aclose()


async def killed_mid_call(protocol: str, marker: Path, *, lean: bool) -> ToolError:
    """The error of a call whose server is killed while it runs; no lean id left behind."""
    with running(modern()) as (port, process):
        conn = ServerConnection(http_config("modern", port, protocol), lean=lean)
        errors: list[ToolError] = []

        async def call() -> None:
            try:
                await conn.call_tool("sleep", {"seconds": 60, "marker": str(marker)}, timeout_s=WAIT_S * 3)
            except ToolError as exc:
                errors.append(exc)

        try:
            await conn.start()
            with anyio.fail_after(WAIT_S * 2):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    while not marker.exists():
                        await anyio.sleep(0.01)
                    process.kill()
            assert conn.lean_in_flight in (None, 0)
        finally:
            await conn.aclose()
    (error,) = errors
    return error


@ERAS
async def test_a_server_killed_mid_call_fails_the_call_alike_and_leaves_no_pending_id(
    protocol: str, tmp_path: Path
) -> None:
    sdk = await killed_mid_call(protocol, tmp_path / "sdk", lean=False)
    lean = await killed_mid_call(protocol, tmp_path / "lean", lean=True)
    assert not isinstance(lean, ToolTimeout)
    assert str(lean) == str(sdk), "the two paths said different things"


@ERAS
async def test_a_timed_out_http_call_is_abandoned_and_the_server_kept(protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_module, "PROBE_TIMEOUT_S", 2.0)
    with running(modern()) as (port, _):
        conn = ServerConnection(http_config("modern", port, protocol), lean=True)
        try:
            await conn.start()
            with anyio.fail_after(WAIT_S), pytest.raises(ToolTimeout, match="sleep did not answer within 0.5 s"):
                await conn.call_tool("sleep", {"seconds": 30}, timeout_s=0.5)
            assert conn.lean_in_flight == 0
            with anyio.fail_after(WAIT_S):
                assert (await outcome(conn, "count", {"steps": 1}))[0] == "result"
        finally:
            await conn.aclose()
