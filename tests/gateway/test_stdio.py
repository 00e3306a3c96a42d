"""``pincer mcp stdio`` as a real subprocess, driven by the official SDK client in both eras."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.gateway.conftest import pincer_command

pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
STDIO_TIMEOUT_S = 60.0


def _server(home: Path, *args: str) -> StdioServerParameters:
    env = {"PINCER_HOME": str(home), "PATH": os.environ.get("PATH", "")}
    # The fixture bundle gives these tests tools of their own, whatever the built-ins are.
    command, *argv = pincer_command("mcp", "stdio", *args, fixtures=True)
    return StdioServerParameters(command=command, args=argv, env=env)


def _text(result: Any) -> str:
    return " ".join(block.text for block in result.content if getattr(block, "type", None) == "text")


@ERAS
async def test_stdio_serves_the_registry_through_the_dispatcher(pincer_home: Path, mode: str) -> None:
    with anyio.fail_after(STDIO_TIMEOUT_S):
        async with Client(_server(pincer_home), mode=mode) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("test_simple_text", {})
            failed = await client.call_tool("test_sampling", {})
    assert "test_simple_text" in names
    assert _text(result) == "This is a simple text response for testing." and not result.is_error
    assert failed.is_error and failed.meta["pincer/error"]["code"] == "invalid_arguments"
    # The audit log is the same SQLite file any other entry point writes.
    from pincer.secrets.keys import AUDIT_KEY, load_or_create_key
    from pincer.store.audit import AuditLog
    from pincer.store.sql import open_sqlite

    db = await open_sqlite(pincer_home)
    try:
        records = await (await AuditLog.open(db, key=load_or_create_key(pincer_home, None, place=AUDIT_KEY))).records()
    finally:
        await db.aclose()
    assert [(r.caller, r.session, r.tool, r.outcome) for r in records] == [
        ("mcp", "main", "test_simple_text", "ok"),
        ("mcp", "main", "test_sampling", "error"),
    ]


async def test_stdio_session_flag_applies_that_sessions_policy(pincer_home: Path) -> None:
    (pincer_home / "config.toml").write_text('[sessions.agent]\nkind = "non-main"\ndeny = ["test_simple_text"]\n')
    with anyio.fail_after(STDIO_TIMEOUT_S):
        async with Client(_server(pincer_home, "--session", "agent"), mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("test_simple_text", {})
    assert "test_simple_text" not in names
    # A tool the session may not see reads as a missing one (issue 21 item 7); the session step
    # still refused it, and the audit says so.
    assert result.is_error and result.meta["pincer/error"]["code"] == "tool_not_found"


async def test_stdio_elicitation_and_progress_with_the_fixture_bundle(pincer_home: Path) -> None:
    progress: list[float] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with anyio.fail_after(STDIO_TIMEOUT_S):
        async with Client(
            _server(pincer_home), mode="legacy", elicitation_callback=elicit
        ) as client:
            asked = await client.call_tool("test_elicitation", {"message": "who are you?"})
            reported = await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            prompts = await client.list_prompts()
    assert "action=accept" in _text(asked) and "ada@example.com" in _text(asked)
    assert progress == [0, 50, 100] and not reported.is_error
    assert "test_simple_prompt" in {p.name for p in prompts.prompts}
