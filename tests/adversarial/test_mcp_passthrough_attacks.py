"""What an upstream MCP server hands the gateway's clients besides tools, attacked (issue 36).

A real ``pincer serve`` runs ``tests/runtimes/mcp/notes_server.py`` (the official SDK's server
side) over stdio; an SDK client calls it over streamable HTTP with the bearer token of the main
session or of a non-main one. Each test failed before the gateway served upstream resources and
prompts through the chain, or before upstream ``_meta`` was passed on, as its docstring says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from pincer.core.effects import EffectKind
from pincer.gateway.tokens import token_digest
from pincer.runtimes.mcp import ServerConfig, ServerStore
from tests.gateway.conftest import PINCER_BIN, pincer_serve

T = TypeVar("T")
NOTES_SERVER = Path(__file__).resolve().parents[1] / "runtimes" / "mcp" / "notes_server.py"
# Matches no credential shape: only the secret store makes it a secret.
NOTES_TOKEN = "plain-words-the-notes-server-holds-3c9e"
AGENT_TOKEN = "pcr_agent_token_for_the_passthrough_suite"
ERAS = ("auto", "legacy")
CALL_TIMEOUT_S = 30.0
CLI_TIMEOUT_S = 60.0
CONFIG = f"""
[[grants]]
tool = "notes_*"
default = "allow"
[sessions.agent]
kind = "non-main"
allow = ["*"]
deny = ["notes_*"]
[[gateway.tokens]]
sha256 = "{token_digest(AGENT_TOKEN)}"
session = "agent"
"""


def _pincer(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PINCER_HOME": str(home)}
    result = subprocess.run(
        [str(PINCER_BIN), *args], input=stdin, capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S
    )
    assert result.returncode == 0, result.stderr
    return result


def _setup(home: Path) -> None:
    _pincer(home, "secrets", "set", "notes_token", stdin=NOTES_TOKEN + "\n")
    ServerStore(home).add(
        ServerConfig(
            name="notes",
            transport="stdio",
            command=sys.executable,
            args=(str(NOTES_SERVER),),
            env={"NOTES_TOKEN": "${secret:notes_token}"},
            # The user says lookup writes, whatever its hints claim.
            tool_effects={"lookup": frozenset({EffectKind.EXTERNAL_WRITE})},
        )
    )
    (home / "config.toml").write_text(CONFIG, encoding="utf-8")


@asynccontextmanager
async def _client(url: str, token: str, mode: str, **kwargs: Any) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client:
            yield client


def _in_each_era(home: Path, drive: Callable[[Client], Awaitable[T]]) -> dict[str, T]:
    """``drive(client)`` with the main session's token, once per protocol era, behind one
    ``pincer serve``."""
    with pincer_serve(home) as gateway:
        token = _pincer(home, "token").stdout.strip()

        async def run(mode: str) -> T:
            async with _client(gateway.info["mcp_url"], token, mode) as client:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    return await drive(client)

        return {mode: anyio.run(run, mode) for mode in ERAS}


def _audit(home: Path, tool: str) -> list[dict[str, Any]]:
    return json.loads(_pincer(home, "audit", "list", "--json", "--tool", tool, "--limit", "1000").stdout)


def test_a_stored_secret_in_an_upstream_resource_or_prompt_is_redacted(pincer_home: Path) -> None:
    """Before: resources/read and prompts/get were not served at all; a server that puts the
    token it was given into what it serves must not hand it to the client through pincer."""
    _setup(pincer_home)

    async def drive(client: Client) -> dict[str, Any]:
        read = await client.read_resource("notes://notes/token")
        prompt = await client.get_prompt("notes_with_token", {"topic": "pages"})
        return {"read": read.model_dump(mode="json"), "prompt": prompt.model_dump(mode="json")}

    seen = _in_each_era(pincer_home, drive)
    records = _audit(pincer_home, "notes_resources/read")
    for mode in ERAS:
        text = json.dumps(seen[mode])
        assert NOTES_TOKEN not in text
        (content,) = seen[mode]["read"]["contents"]
        assert content["text"].startswith("token: [REDACTED") and content["uri"] == "notes://notes/token"
        assert "[REDACTED" in seen[mode]["prompt"]["messages"][0]["content"]["text"]
    assert len(records) == len(ERAS) and all(r["usage"]["redactions"] >= 1 for r in records)
    assert NOTES_TOKEN not in json.dumps(records)


def test_a_session_denied_a_servers_tools_is_denied_its_resources_and_prompts(pincer_home: Path) -> None:
    """The ``agent`` session's policy denies ``notes_*``: it must not list or read the notes
    server's resources, templates or prompts either (main may); its read is refused by the chain,
    recorded once, and answered as for a resource that does not exist."""
    _setup(pincer_home)
    with pincer_serve(pincer_home) as gateway:
        main_token = _pincer(pincer_home, "token").stdout.strip()
        url = gateway.info["mcp_url"]

        async def drive(mode: str, token: str) -> dict[str, Any]:
            seen: dict[str, Any] = {}
            async with _client(url, token, mode) as client:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    seen["tools"] = [t.name for t in (await client.list_tools()).tools]
                    seen["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
                    seen["templates"] = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
                    seen["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
                    for key, read in (
                        ("read", lambda: client.read_resource("notes://notes/page/1")),
                        ("prompt", lambda: client.get_prompt("notes_with_token", {"topic": "x"})),
                    ):
                        try:
                            seen[key] = (await read()).model_dump(mode="json")
                        except MCPError as exc:
                            seen[key] = f"refused: {exc.error.message}"
            return seen

        agent = {mode: anyio.run(drive, mode, AGENT_TOKEN) for mode in ERAS}
        main = anyio.run(drive, "auto", main_token)
    records = _audit(pincer_home, "notes_resources/read")

    assert "notes://notes/page/1" in main["resources"] and "notes://notes/page/{number}" in main["templates"]
    assert "notes_with_token" in main["prompts"] and main["read"]["contents"][0]["text"] == "the first page"
    for mode in ERAS:
        seen = agent[mode]
        assert not [name for name in seen["tools"] if name.startswith("notes_")]
        assert not [uri for uri in seen["resources"] + seen["templates"] if uri.startswith("notes://")]
        assert "notes_with_token" not in seen["prompts"]
        assert seen["read"] == "refused: Resource not found"
        assert seen["prompt"] == "refused: Unknown prompt: notes_with_token"
    denied = [r for r in records if r["session"] == "agent"]
    assert len(denied) == len(ERAS) and all(r["outcome"] == "denied" for r in denied)
    assert [r["session"] for r in records if r["outcome"] == "ok"] == ["main"]  # one read, one record
    prompts = _audit(pincer_home, "notes_prompts/get")
    assert sorted((r["session"], r["outcome"]) for r in prompts) == [*[("agent", "denied")] * len(ERAS), ("main", "ok")]


def test_an_upstream_cannot_pass_its_own_meta_off_as_pincers(pincer_home: Path) -> None:
    """notes' ``lookup`` claims ``_meta["pincer/effects"] = []`` and ``pincer/runtime``: before,
    upstream ``_meta`` was dropped whole; passed on now, pincer's keys must stay pincer's. Its
    hints (read-only, closed world) reach the client as sent, while the entry makes it a writer."""
    _setup(pincer_home)

    async def drive(client: Client) -> dict[str, Any]:
        tools = (await client.list_tools()).tools
        return next(t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools if t.name == "notes_lookup")

    seen = _in_each_era(pincer_home, drive)
    for mode in ERAS:
        lookup = seen[mode]
        assert lookup["_meta"] == {"notes/kind": "lookup", "pincer/effects": ["external_write"], "pincer/runtime": "mcp"}
        assert lookup["annotations"] == {"title": "Look up", "readOnlyHint": True, "openWorldHint": False}


@pytest.mark.parametrize("mode", ERAS)
def test_an_upstream_resource_list_change_reaches_the_client(pincer_home: Path, mode: str) -> None:
    """notes' ``add_page`` adds a resource and says so; the gateway's client hears
    ``resources/list_changed`` (2025-11-25) or a listen event (2026-07-28), and lists the page."""
    _setup(pincer_home)
    with pincer_serve(pincer_home) as gateway:
        token = _pincer(pincer_home, "token").stdout.strip()

        async def drive() -> list[str]:
            heard = anyio.Event()

            async def on_message(message: Any) -> None:
                if getattr(message, "method", None) == "notifications/resources/list_changed":
                    heard.set()

            async with _client(gateway.info["mcp_url"], token, mode, message_handler=on_message) as client:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    if mode == "auto":
                        async with client.listen(resources_list_changed=True) as subscription:
                            await client.call_tool("notes_add_page", {"number": "7"})
                            async for _event in subscription:
                                break
                    else:
                        await client.list_resources()
                        await client.call_tool("notes_add_page", {"number": "7"})
                        await heard.wait()
                    return [str(r.uri) for r in (await client.list_resources()).resources]

        listed = anyio.run(drive)
    assert "notes://notes/page/7" in listed
