"""Built-ins follow config.toml under a running ``pincer serve``; what needs a restart is named
(issue 35).

Before: ``pincer install tools/github`` (or ``[builtins.github] enabled = true`` written by
hand) under a running gateway did nothing until a restart, and nothing said one was needed; the
same for ``pincer remove tools/github`` and for ``[gateway] canvas``. ``[triggers] enabled``
waited for a restart without a word, and the dashboard never said that anything did. A real
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
from functools import partial
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


async def _follow(url: str, token: str, steps: list[tuple[str, set[str], bool, object]], *, canvas: bool = False) -> None:
    """Connected with the MCP SDK client, run each step (what, tools, present, action): do the
    action, then wait until ``tools`` are all offered (or all gone), told by list_changed; with
    ``canvas``, also until the canvas's resource is listed (or gone), told by resources'
    list_changed."""
    heard = heard_resources = 0
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        nonlocal heard, heard_resources, changed
        if isinstance(message, types.ToolListChangedNotification):
            heard += 1
            changed.set()
        if isinstance(message, types.ResourceListChangedNotification):
            heard_resources += 1
            changed.set()

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy", message_handler=on_message) as client:

            async def state(tools: set[str]) -> bool | None:
                names = {tool.name for tool in (await client.list_tools()).tools}
                return True if tools <= names else False if not tools & names else None

            async def listed() -> bool:
                uris = [str(r.uri) for r in (await client.list_resources()).resources]
                return any(uri.startswith("ui://pincer/canvas/") for uri in uris)

            async def applied(tools: set[str], present: bool, before: int, before_resources: int) -> bool:
                if await state(tools) is not present or heard == before:
                    return False
                return not canvas or (await listed() is present and heard_resources > before_resources)

            for what, tools, present, action in steps:
                assert await state(tools) is (not present), what
                before, before_resources = heard, heard_resources
                await anyio.to_thread.run_sync(action)  # type: ignore[arg-type]
                # The list and the notification travel on different streams (the POST's answer, the
                # standalone GET stream), so either may arrive first: wait for both.
                # waits for: the watcher to apply `what`, and its list_changed
                with anyio.move_on_after(PICKUP_TIMEOUT_S):
                    while not await applied(tools, present, before, before_resources):
                        await changed.wait()
                        changed = anyio.Event()
                assert await state(tools) is present, f"{what}: not applied within {PICKUP_TIMEOUT_S} s"
                assert heard > before, f"{what}: no notifications/tools/list_changed"  # told, not polled
                if canvas:
                    assert await listed() is present, f"{what}: resources/list does not follow"
                    assert heard_resources > before_resources, f"{what}: no notifications/resources/list_changed"


def test_builtins_and_the_canvas_follow_config_and_clients_hear_list_changed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    port = _free_port()
    config.write_text(f"[gateway]\nport = {port}\n")

    def edit(old: str, new: str) -> None:
        time.sleep(1.1)  # a new mtime for the edit, whatever the filesystem's granularity
        text = config.read_text()
        assert old in text
        config.write_text(text.replace(old, new, 1))

    github, canvas = {"github"}, {"canvas", "a2ui_push", "a2ui_reset"}
    steps: list[tuple[str, set[str], bool, object]] = [
        ("pincer install tools/github", github, True, lambda: _cli(home, "install", "tools/github")),
        ("[builtins.github] enabled = false", github, False, lambda: edit("enabled = true", "enabled = false")),
        ("[builtins.github] enabled = true", github, True, lambda: edit("enabled = false", "enabled = true")),
        ("pincer remove tools/github", github, False, lambda: _cli(home, "remove", "tools/github")),
    ]
    canvas_on = [("[gateway] canvas = true", canvas, True, lambda: edit("[gateway]\n", "[gateway]\ncanvas = true\n"))]
    with pincer_serve(home, "--port", str(port)) as server:
        anyio.run(_follow, server.info["mcp_url"], server.token, steps)
        anyio.run(partial(_follow, server.info["mcp_url"], server.token, canvas_on, canvas=True))
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=60) as http:
            assert sign_in(http, server.token).status_code in (200, 303)
            page = http.get("/ui/canvas/main")
            assert page.status_code == 200 and "canvas" in page.text.lower()
            assert 'href="/ui/canvas/main"' in http.get("/ui/").text  # in the dashboard's menu
            off = [("[gateway] canvas = false", canvas, False, lambda: edit("canvas = true", "canvas = false"))]
            anyio.run(partial(_follow, server.info["mcp_url"], server.token, off, canvas=True))
            assert http.get("/ui/canvas/main").status_code == 404
            assert 'href="/ui/canvas/main"' not in http.get("/ui/").text
            assert 'id="restart-needed"' not in http.get("/ui/").text

            # What truly waits for a restart is named: in the log, in `pincer doctor`, on the dashboard.
            edit("[gateway]\n", "[triggers]\nenabled = false\n\n[gateway]\n")
            line = server.wait_for_log("[triggers] enabled changed", PICKUP_TIMEOUT_S)
            assert "takes effect when `pincer serve` restarts" in line
            doctor = json.loads(_cli_any(home, "doctor", "--json").stdout)
            (gateway,) = [c for c in doctor["checks"] if c["name"] == "gateway"]
            assert gateway["status"] == "warn" and "[triggers] enabled" in gateway["detail"], gateway
            overview = http.get("/ui/")
            assert overview.status_code == 200
            assert 'id="restart-needed"' in overview.text and "[triggers] enabled" in overview.text


def _cli_any(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A CLI command whose exit code says something the test reads from its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    return subprocess.run([*PINCER, *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
