"""An MCP client that hangs up in the middle of a call, against a real ``pincer serve``: a
hang-up is normal, so the serve terminal shows no traceback for it (issue 21 item 8).

The report was two full tracebacks per hang-up (``anyio.ClosedResourceError`` and "Unexpected
ASGI message 'http.response.start' sent, after response already completed"). Each case here
kills a real client process (the official SDK's) while its call runs in a slow tool of a real
stdio MCP server, lets the tool finish, and reads the server's stderr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.conftest import PINCER_BIN, pincer_serve
from tests.runtimes.mcp.conftest import FAULTY_SERVER

CLI_TIMEOUT_S = 60.0
ARRIVAL_TIMEOUT_S = 30.0
POLL_S = 0.05
SLOW_TOOL_S = 1.5
CLIENT = """
import sys, anyio, httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

url, token, mode, marker, progress = sys.argv[1:6]

async def on_progress(*args, **kwargs):
    pass

async def main():
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            await client.call_tool("faulty_slow", {"seconds": SECONDS, "marker": marker},
                                   progress_callback=on_progress if progress == "yes" else None)

anyio.run(main)
""".replace("SECONDS", str(SLOW_TOOL_S))


def _add_faulty(home: Path) -> None:
    env = {**os.environ, "PINCER_HOME": str(home)}
    args = [str(PINCER_BIN), "mcp", "add", "faulty", "--command", sys.executable, "--arg", "-u", "--arg", str(FAULTY_SERVER),
            "--read-only"]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("mode", "progress"),
    [("legacy", "no"), ("legacy", "yes"), ("auto", "no")],
    ids=["2025-11-25-direct", "2025-11-25-sdk-path", "2026-07-28"],
)
def test_a_client_that_hangs_up_mid_call_leaves_no_traceback(pincer_home: Path, tmp_path: Path, mode: str, progress: str) -> None:
    _add_faulty(pincer_home)
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    with pincer_serve(pincer_home) as server:
        for attempt in range(2 if progress == "yes" else 1):  # the SDK's path: a second hang-up too
            marker = tmp_path / f"arrived-{attempt}"
            client = subprocess.Popen(
                [sys.executable, str(script), server.info["mcp_url"], server.token, mode, str(marker), progress],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            deadline = time.monotonic() + ARRIVAL_TIMEOUT_S
            while not marker.exists():
                assert client.poll() is None, "the client ended before its call reached the tool"
                assert time.monotonic() < deadline, "the call never reached the slow tool"
                time.sleep(POLL_S)
            client.send_signal(signal.SIGKILL)
            client.wait(timeout=CLI_TIMEOUT_S)

            async def after() -> str:
                # The stdio server answers in order: this returns once the slow call is over.
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as http:
                    async with Client(streamable_http_client(server.info["mcp_url"], http_client=http), mode=mode) as c:
                        with anyio.fail_after(CLI_TIMEOUT_S):
                            result = await c.call_tool("faulty_echo", {"text": "still here"})
                return str(result.content[0].text)

            assert anyio.run(after) == "still here"
    errors = "".join(server.stderr_lines.queue)
    assert "Traceback" not in errors and "Unexpected ASGI message" not in errors, errors
    assert "ClosedResourceError" not in errors, errors
