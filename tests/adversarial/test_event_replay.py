"""A hostile session against the gateway's SSE resumption (SEP-1699 ``Last-Event-ID``).

Failed on main before the fix: one in-memory event store served every MCP session with
event ids 1, 2, 3...; another principal's session could GET its own stream with
``Last-Event-ID: <a guessed id>`` and be sent the first session's tool results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from pincer.gateway.events import MemoryEventStore
from pincer.gateway.tokens import token_digest
from tests.gateway.conftest import live_gateway

pytestmark = pytest.mark.anyio

BOT_TOKEN = "pcr_event_replay_bot_token_for_the_tests_01"
CONFIG = f"""
[sessions.ci-bot]
kind = "non-main"
allow = ["say"]
[[gateway.tokens]]
sha256 = "{token_digest(BOT_TOKEN)}"
session = "ci-bot"
"""
VERSION = "2025-11-25"
SECRET_TEXT = "secret-of-main-0451"


def _headers(token: str, session_id: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": VERSION,
    }
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    return headers


def _events(text: str) -> list[tuple[str | None, str]]:
    found, event_id, data = [], None, []
    for line in text.splitlines() + [""]:
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and (event_id or data):
            found.append((event_id, "\n".join(data)))
            event_id, data = None, []
    return found


async def _open_session(http: httpx.AsyncClient, token: str) -> str:
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    opened = await http.post("/mcp", json=init, headers=_headers(token))
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    done = await http.post(
        "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=_headers(token, session_id)
    )
    assert done.status_code == 202
    return session_id


async def test_another_session_cannot_replay_a_sessions_events(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config=CONFIG) as live:
        async with live.http(timeout=30) as http:
            main = await _open_session(http, live.token)
            call: dict[str, Any] = {
                "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "say", "arguments": {"text": SECRET_TEXT}, "_meta": {"progressToken": "p1"}},
            }  # fmt: skip
            answered = await http.post("/mcp", json=call, headers=_headers(live.token, main))
            events = _events(answered.text)
            assert any(SECRET_TEXT in data for _, data in events), answered.text
            ids = [event_id for event_id, _ in events if event_id]
            assert ids, "the SDK path stores its events for resumption"

            bot = await _open_session(http, BOT_TOKEN)
            guesses = [*ids, *(str(n) for n in range(40))]
            for guess in guesses:
                headers = {**_headers(BOT_TOKEN, bot), "Last-Event-ID": guess}
                async with http.stream("GET", "/mcp", headers=headers, timeout=5) as replay:
                    body = b""
                    try:
                        async for chunk in replay.aiter_bytes():
                            body += chunk
                            if SECRET_TEXT.encode() in body or len(body) > 4096:
                                break
                    except httpx.ReadTimeout:
                        pass
                assert SECRET_TEXT.encode() not in body, f"replayed main's events for Last-Event-ID {guess}"


async def test_a_session_view_replays_only_its_own_stream() -> None:
    shared = MemoryEventStore()
    mine, theirs = shared.for_session("a"), shared.for_session("b")
    first = await mine.store_event("1", None)
    await theirs.store_event("1", _message("theirs"))  # the same stream name in another session
    await mine.store_event("1", _message("mine"))
    sent: list[Any] = []

    async def collect(event: Any) -> None:
        sent.append(json.loads(event.message.model_dump_json())["params"]["data"])

    assert await mine.replay_events_after(first, collect) == "1"
    assert sent == ["mine"]
    assert await theirs.replay_events_after(first, collect) is None  # not its event
    assert not first.isdigit() and len(first) >= 16  # not a number anyone can count to


def _message(text: str) -> Any:
    from mcp_types import JSONRPCNotification

    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"level": "info", "data": text})
