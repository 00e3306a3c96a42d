"""The reference server @modelcontextprotocol/server-everything (npm) over stdio, streamable HTTP
and the legacy SSE transport, through the MCP runtime."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from pincer.core.values import HostContext
from pincer.runtimes.mcp import McpRuntime, PinStore, ServerConfig
from tests.runtimes.mcp.conftest import CALL_TIMEOUT_S, NODE22, WAIT_S, npm_ready

pytestmark = pytest.mark.anyio

START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server-everything exited with {process.returncode}")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"server-everything did not listen on {port} within {START_TIMEOUT_S} s")


@pytest.fixture
def everything_http(request: pytest.FixtureRequest) -> Iterator[str]:
    """server-everything serving ``request.param`` (streamableHttp or sse) on a local port; its URL."""
    script = npm_ready()
    mode = request.param
    port = free_port()
    process = subprocess.Popen(
        [str(NODE22), str(script), mode],
        env={"PORT": str(port), "PATH": str(NODE22.parent)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp" if mode == "streamableHttp" else f"http://127.0.0.1:{port}/sse"
    finally:
        process.terminate()
        try:
            process.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=WAIT_S)


@dataclass
class Channel:
    """A ClientChannel that records what the runtime forwards to the caller."""

    progress_events: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        self.progress_events.append((progress, total, message))

    async def log(self, level: str, message: str) -> None:
        pass


async def exercise(config: ServerConfig, home: Path) -> None:
    runtime = McpRuntime([config], pins=PinStore(home))
    try:
        with anyio.fail_after(START_TIMEOUT_S):
            await runtime.start()
        specs = {s.name: s for s in runtime.tools()}
        assert {"everything_echo", "everything_get_sum", "everything_get_tiny_image"} <= set(specs)

        async def call(name: str, args: dict, channel: Channel | None = None):
            host = HostContext(session="main", tool=name, timeout_s=CALL_TIMEOUT_S, client=channel)
            with anyio.fail_after(WAIT_S):
                return await runtime.invoke(specs[name], args, host)

        assert (await call("everything_echo", {"message": "hi"})).value == "Echo: hi"
        assert (await call("everything_get_sum", {"a": 2, "b": 3})).value == "The sum of 2 and 3 is 5."
        image = await call("everything_get_tiny_image", {})
        assert [b["type"] for b in image.content] == ["text", "image", "text"]
        assert image.content[1]["mimeType"] == "image/png" and len(image.content[1]["data"]) > 100
        structured = await call("everything_get_structured_content", {"location": "New York"})
        assert set(structured.value) == {"temperature", "conditions", "humidity"}
        channel = Channel()
        done = await call("everything_trigger_long_running_operation", {"duration": 0.2, "steps": 2}, channel)
        assert "completed" in done.value.lower()
        assert [event[:2] for event in channel.progress_events] == [(1, 2), (2, 2)]
        # Two calls share one connection: no handshake per call.
        assert runtime.statuses()[0].state == "running"
    finally:
        await runtime.aclose()


async def test_everything_over_stdio(tmp_path: Path) -> None:
    script = npm_ready()
    config = ServerConfig(
        name="everything", transport="stdio", command=str(NODE22), args=(str(script), "stdio"), connect_timeout_s=20.0
    )
    await exercise(config, tmp_path)


@pytest.mark.parametrize("everything_http", ["streamableHttp"], indirect=True)
async def test_everything_over_streamable_http(everything_http: str, tmp_path: Path) -> None:
    await exercise(ServerConfig(name="everything", transport="http", url=everything_http), tmp_path)


@pytest.mark.parametrize("everything_http", ["sse"], indirect=True)
async def test_everything_over_legacy_sse(everything_http: str, tmp_path: Path) -> None:
    await exercise(ServerConfig(name="everything", transport="sse", url=everything_http), tmp_path)
