"""``pincer serve`` and ``pincer token`` as the user runs them: real subprocesses."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.conftest import PINCER_BIN, pincer_serve

CLI_TIMEOUT_S = 60.0


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PINCER_HOME": str(home)}
    return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def test_serve_announces_where_it_listens_and_serves_both_eras(pincer_home: Path) -> None:
    with pincer_serve(pincer_home, fixtures=True) as server:
        info = server.info
        assert info["mcp_url"] == info["url"] + "/mcp" and info["openapi_url"] == info["url"] + "/api/v1/openapi.json"
        assert info["host"] == "127.0.0.1" and info["port"] > 0

        async def drive() -> list[str]:
            seen = []
            for mode in ("legacy", "auto"):
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as http:
                    async with Client(streamable_http_client(info["mcp_url"], http_client=http), mode=mode) as client:
                        result = await client.call_tool("test_simple_text", {})
                        seen.append(f"{client.protocol_version}:{result.content[0].text}")
            return seen

        text = "This is a simple text response for testing."
        assert anyio.run(drive) == [f"2025-11-25:{text}", f"2026-07-28:{text}"]
        health = httpx.get(info["url"] + "/healthz", trust_env=False)
        assert health.json()["status"] == "ok"
    assert server.process.returncode == 0  # Ctrl-C is the way to stop a server


def test_token_file_is_private_and_printed_by_pincer_token(pincer_home: Path) -> None:
    printed = _pincer(pincer_home, "token")
    assert printed.returncode == 0
    token_file = pincer_home / "gateway.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert printed.stdout.strip() == token_file.read_text().strip()
    again = _pincer(pincer_home, "token", "--json")
    assert json.loads(again.stdout) == {"token": printed.stdout.strip(), "token_file": str(token_file),
                                        "home": str(pincer_home), "created": False, "gateway_url": None}  # fmt: skip


def test_token_says_which_home_it_read_and_whether_a_gateway_serves_it(pincer_home: Path) -> None:
    """Failed on main before this test: ``pincer token`` never said which home it read or
    created the token in, so a token from the wrong PINCER_HOME was a silent 401 later."""
    made = _pincer(pincer_home, "token")
    assert f"created {pincer_home / 'gateway.token'} (home {pincer_home})" in made.stderr
    assert "no `pincer serve` runs on this home now" in made.stderr and f"PINCER_HOME={pincer_home}" in made.stderr
    with pincer_serve(pincer_home) as server:
        served = _pincer(pincer_home, "token", "--json")
        assert json.loads(served.stdout)["gateway_url"] == server.info["url"]
        assert f"read {pincer_home / 'gateway.token'}" in served.stderr and "no `pincer serve`" not in served.stderr


def test_a_widened_token_file_is_narrowed_again(pincer_home: Path) -> None:
    _pincer(pincer_home, "token")
    token_file = pincer_home / "gateway.token"
    token_file.chmod(0o644)
    assert _pincer(pincer_home, "token").returncode == 0
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


def test_token_new_maps_a_token_to_a_session(pincer_home: Path) -> None:
    made = _pincer(pincer_home, "token", "new", "--session", "ci", "--json")
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)["token"]
    config = (pincer_home / "config.toml").read_text()
    assert token not in config and "[[gateway.tokens]]" in config and 'session = "ci"' in config
    with pincer_serve(pincer_home) as server:
        listing = httpx.get(
            server.info["api_url"] + "/tools", headers={"Authorization": f"Bearer {token}"}, trust_env=False
        ).json()
    assert listing["session"] == "ci"


def test_token_new_refuses_a_bad_session_name_and_leaves_config_alone(pincer_home: Path) -> None:
    made = _pincer(pincer_home, "token", "new", "--session", 'x"\n[oops]')
    assert made.returncode == 2 and "invalid session name" in made.stderr
    assert not (pincer_home / "config.toml").exists()


def test_serve_refuses_a_non_loopback_address(pincer_home: Path) -> None:
    refused = _pincer(pincer_home, "serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2
    assert "loopback-only" in refused.stderr and "allow_remote" in refused.stderr


def test_serve_says_when_the_port_is_taken(pincer_home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = _pincer(pincer_home, "serve", "--port", str(port))
    assert refused.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in refused.stderr and "--port" in refused.stderr
