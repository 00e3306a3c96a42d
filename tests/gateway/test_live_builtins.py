"""Built-ins follow config.toml under a running ``pincer serve``; what needs a restart is named
(issue 35).

Before: ``pincer install tools/github`` (or ``[builtins.github] enabled = true`` written by
hand) under a running gateway did nothing until a restart, and nothing said one was needed; the
same for ``pincer remove tools/github``. Turning the canvas on was not named anywhere. A real
``pincer serve``, the real CLI and the official MCP SDK client, which must hear
``notifications/tools/list_changed``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import sign_in

PINCER = [sys.executable, "-m", "pincer.cli"]
PICKUP_TIMEOUT_S = 30.0  # the watcher polls every second; a busy machine is slow
CLI_TIMEOUT_S = 120


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    done = subprocess.run([*PINCER, *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return done


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_builtins_come_and_go_with_config_and_clients_hear_list_changed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    port = _free_port()
    base = f"[gateway]\nport = {port}\n"
    config.write_text(base)

    def edit(text: str) -> None:
        time.sleep(1.1)  # a new mtime for the edit, whatever the filesystem's granularity
        config.write_text(text)

    async def scenario(url: str, token: str) -> None:
        heard = 0
        changed = anyio.Event()

        async def on_message(message: object) -> None:
            nonlocal heard, changed
            if isinstance(message, types.ToolListChangedNotification):
                heard += 1
                changed.set()

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", message_handler=on_message) as client:

                async def offered() -> bool:
                    return "github" in {tool.name for tool in (await client.list_tools()).tools}

                async def until(present: bool, what: str) -> None:
                    nonlocal changed
                    before = heard
                    with anyio.fail_after(PICKUP_TIMEOUT_S):  # waits for: the watcher to apply `what`
                        while await offered() is not present:
                            await changed.wait()
                            changed = anyio.Event()
                    assert heard > before, f"{what}: no notifications/tools/list_changed"  # told, not polled

                assert not await offered()
                await anyio.to_thread.run_sync(lambda: _cli(home, "install", "tools/github"))
                await until(True, "pincer install tools/github")
                await anyio.to_thread.run_sync(lambda: edit(config.read_text().replace("enabled = true", "enabled = false")))
                await until(False, "[builtins.github] enabled = false by hand")
                await anyio.to_thread.run_sync(lambda: edit(config.read_text().replace("enabled = false", "enabled = true")))
                await until(True, "[builtins.github] enabled = true by hand")
                await anyio.to_thread.run_sync(lambda: _cli(home, "remove", "tools/github"))
                await until(False, "pincer remove tools/github")

    with pincer_serve(home, "--port", str(port)) as server:
        anyio.run(scenario, server.info["mcp_url"], server.token)

        # The canvas is assembled with the gateway: turning it on waits for a restart, and says so
        # in the log, in `pincer doctor` and on the dashboard.
        edit(config.read_text().replace("[gateway]\n", "[gateway]\ncanvas = true\n"))
        line = server.wait_for_log("[gateway] canvas changed", PICKUP_TIMEOUT_S)
        assert "takes effect when `pincer serve` restarts" in line
        doctor = json.loads(_cli_any(home, "doctor", "--json").stdout)
        (gateway,) = [c for c in doctor["checks"] if c["name"] == "gateway"]
        assert gateway["status"] == "warn" and "[gateway] canvas" in gateway["detail"], gateway
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=60) as http:
            assert sign_in(http, server.token).status_code in (200, 303)
            page = http.get("/ui/")
            assert page.status_code == 200
            assert 'id="restart-needed"' in page.text and "[gateway] canvas" in page.text


def _cli_any(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A CLI command whose exit code says something the test reads from its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    return subprocess.run([*PINCER, *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
