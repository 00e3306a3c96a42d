"""A running ``pincer serve`` follows its state (newcomer item 1), with real processes: the
gateway is a subprocess, and another process changes PINCER_HOME under it.

Failed on main before the fix: `pincer mcp add`, `pincer openapi add` and edits of config.toml
needed a restart of `pincer serve`, and nothing said so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from pincer.gateway.tokens import token_digest
from tests.gateway.conftest import PINCER_BIN, pincer_serve

TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")
# How long a change may take to show (the watcher polls every second; a busy machine is slow).
PICKUP_TIMEOUT_S = 30.0


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PINCER_BIN), *args],
        env={**os.environ, "PINCER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _eventually(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + PICKUP_TIMEOUT_S
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {PICKUP_TIMEOUT_S} s (last: {last!r})")


def test_an_mcp_server_added_by_another_process_is_served_without_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[[grants]]\ntool = "time_*"\ndefault = "allow"\n')
    with pincer_serve(home) as server:
        api = server.info["api_url"]
        headers = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=api, headers=headers, trust_env=False, timeout=60) as http:
            assert http.get("/tools/time_get_current_time").status_code == 404
            added = _cli(home, "mcp", "add", "time", "--command", str(TIME_SERVER))
            assert added.returncode == 0, added.stderr

            def listed() -> bool:
                return http.get("/tools/time_get_current_time").status_code == 200

            _eventually(listed, "the new MCP tool showing in REST")
            result = http.post("/tools/time_get_current_time/call", json={"args": {"timezone": "UTC"}})
            assert result.status_code == 200, result.text
            assert "UTC" in str(result.json()["output"])


def test_config_edits_apply_live_and_a_broken_edit_keeps_the_old_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text("[approvals]\ntimeout_s = 1\n")
    bot_token = "pcr_live_reload_token_for_the_ci_bot_0001"
    with pincer_serve(home) as server:
        api = server.info["api_url"]
        headers = {"Authorization": f"Bearer {server.token}"}
        with httpx.Client(base_url=api, headers=headers, trust_env=False, timeout=60) as http:
            # write_file asks by default; nobody answers within 1 s.
            asked = http.post("/tools/write_file/call", json={"args": {"path": "a.txt", "content": "x"}})
            assert asked.status_code == 408, asked.text
            assert http.get("/tools", headers={"Authorization": f"Bearer {bot_token}"}).status_code == 401

            # A grant and a token added to config.toml take effect without a restart.
            config.write_text(
                "[approvals]\ntimeout_s = 1\n"
                '[[grants]]\ntool = "write_file"\ndefault = "allow"\n'
                f'[[gateway.tokens]]\nsha256 = "{token_digest(bot_token)}"\nsession = "ci-bot"\n'
            )

            def granted() -> bool:
                call = http.post("/tools/write_file/call", json={"args": {"path": "a.txt", "content": "x"}})
                return call.status_code == 200

            _eventually(granted, "the new grant applying")
            bot = http.get("/tools", headers={"Authorization": f"Bearer {bot_token}"})
            assert bot.status_code == 200 and bot.json()["session"] == "ci-bot"

            # A broken edit: the old config keeps running, and the error names the key.
            config.write_text("[approvals]\ntimeout_s = -5\n")
            line = server.wait_for_log("the running config stays", PICKUP_TIMEOUT_S)
            assert "approvals.timeout_s" in line
            still = http.post("/tools/write_file/call", json={"args": {"path": "b.txt", "content": "y"}})
            assert still.status_code == 200, still.text


def test_what_cannot_change_live_is_named(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    config.write_text("")
    with pincer_serve(home) as server:
        time.sleep(1.5)  # a new mtime for the edit, whatever the filesystem's granularity
        config.write_text("[gateway]\nport = 9\n")
        line = server.wait_for_log("[gateway] port changed", PICKUP_TIMEOUT_S)
    assert "restarts" in line


def test_tools_that_depend_on_config_follow_it_and_a_restart_is_named_in_doctor(tmp_path: Path) -> None:
    """Issue 21 item 14. Before: after [llm] and [[hub.sources]] were added to config.toml under a
    running `pincer serve`, MCP tools/list had no run_skill, build_tool, skills_search or
    skills_install until a restart, and nothing said one was needed; `pincer doctor` never said
    that a running gateway waits for a restart."""
    import json
    import socket

    import anyio
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.toml"
    base = f"[gateway]\nport = {port}\n"
    config.write_text(base)
    wanted = {"run_skill", "build_tool", "skills_search", "skills_install"}
    with_model = base + '\n[llm]\nmodel = "gpt-4o-mini"\n\n[[hub.sources]]\nname = "team"\nurl = "http://127.0.0.1:9/"\n'

    async def scenario(url: str, token: str) -> None:
        changes = 0
        changed = anyio.Event()

        async def on_message(message: Any) -> None:
            nonlocal changes, changed
            if isinstance(message, types.ToolListChangedNotification):
                changes += 1
                changed.set()

        async def names(client: Client) -> set[str]:
            return {tool.name for tool in (await client.list_tools()).tools}

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", message_handler=on_message) as client:
                assert not wanted & await names(client)
                await anyio.sleep(1.5)  # a new mtime for the edit, whatever the filesystem's granularity
                config.write_text(with_model)
                with anyio.fail_after(PICKUP_TIMEOUT_S):
                    while not wanted <= await names(client):
                        await changed.wait()
                        changed = anyio.Event()
                assert changes >= 1  # told, not found by polling
                await anyio.sleep(1.5)
                config.write_text(base)
                with anyio.fail_after(PICKUP_TIMEOUT_S):
                    while wanted & await names(client):
                        await changed.wait()
                        changed = anyio.Event()

    with pincer_serve(home, "--port", str(port)) as server:
        anyio.run(scenario, server.info["mcp_url"], server.token)
        time.sleep(1.5)
        config.write_text(base + f'\n[skills]\nextra_dirs = ["{tmp_path / "more-skills"}"]\n')
        line = server.wait_for_log("[skills] extra_dirs changed", PICKUP_TIMEOUT_S)
        assert "takes effect when `pincer serve` restarts" in line
        doctor = _cli(home, "doctor", "--json")
        (gateway,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "gateway"]
        assert gateway["status"] == "warn" and "[skills] extra_dirs changed" in gateway["detail"], gateway
        assert "restart `pincer serve`" in gateway["hint"]
        config.write_text(base)  # put back: no restart needed any more
        _eventually(lambda: "restart" not in json.dumps(
            [c for c in json.loads(_cli(home, "doctor", "--json").stdout)["checks"] if c["name"] == "gateway"]), "doctor clearing")
