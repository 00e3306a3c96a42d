"""Commands at the gateway: ``POST /api/v1/commands`` fires a skill run; each ``/NAME`` is an MCP
prompt named NAME (both protocol eras).

Failed on main before the triggers: there was no /api/v1/commands (404) and no command prompts.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .conftest import live_gateway

pytestmark = pytest.mark.anyio


async def test_post_commands_starts_the_skill_run(pincer_home: Path) -> None:
    async with live_gateway(pincer_home) as live, live.http() as http:
        listed = await http.get("/api/v1/commands", headers=live.headers)
        assert {"/review", "/summarize", "/release-notes"} <= {c["command"] for c in listed.json()["commands"]}
        answer = await http.post(
            "/api/v1/commands", json={"text": "/review src/app.py security"}, headers=live.headers
        )
        assert answer.status_code == 202, answer.text
        data = answer.json()
        assert data["skill"] == "code-review" and data["params"] == {"path": "src/app.py", "focus": "security"}
        await live.pincer.triggers.settle()
        [request] = live.starter.requests
        assert request.run_id == data["run_id"] and request.session == "main" and request.message == "/review src/app.py security"
        assert str(request.trigger) == "command:/review" and request.trigger.fired_by == "rest:main"
        [record] = [r for r in await live.pincer.audit.records() if r.kind == "trigger"]
        assert record.tool == "command:/review" and record.caller == "trigger" and record.args["run_id"] == data["run_id"]

        unknown = await http.post("/api/v1/commands", json={"text": "/deploy prod"}, headers=live.headers)
        assert unknown.status_code == 404 and "/review" in unknown.json()["error"]["message"]
        bad = await http.post("/api/v1/commands", json={"text": "/review a.py loudly"}, headers=live.headers)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_arguments"
        no_token = await http.post("/api/v1/commands", json={"text": "/review a.py"})
        assert no_token.status_code == 401
        await live.pincer.triggers.settle()
        assert len(live.starter.requests) == 1


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_commands_are_mcp_prompts(pincer_home: Path, mode: str) -> None:
    async with live_gateway(pincer_home) as live:
        async with httpx2.AsyncClient(headers=live.headers, trust_env=False) as http:
            async with Client(streamable_http_client(live.info.mcp_url, http_client=http), mode=mode) as client:
                prompts = {p.name: p for p in (await client.list_prompts()).prompts}
                assert {"code-review", "review", "summarize", "release-notes"} <= set(prompts)
                review = prompts["review"]
                assert review.description.startswith("/review: ")
                assert [a.name for a in review.arguments or []] == ["path", "focus", "pr_url"]
                got = await client.get_prompt("review", {"path": "src", "focus": "security"})
                text = got.messages[0].content.text  # type: ignore[union-attr]
                assert "You are reviewing `src` with a focus on **security**" in text
                with pytest.raises(MCPError, match="must be one of"):
                    await client.get_prompt("review", {"focus": "loudly"})
                # the skill's own prompt is still there
                assert "Code review: src" in (await client.get_prompt("code-review", {"path": "src"})).messages[0].content.text  # type: ignore[union-attr]


async def test_a_command_fired_here_is_started_here_not_by_the_server(pincer_home: Path) -> None:
    """What ``pincer chat`` does: fire ``here`` and run it in its own process, while a running
    server's queue worker leaves it alone."""
    from pincer.triggers.engine import TriggerEngine
    from tests.triggers.recording import RecordingStarter

    async with live_gateway(pincer_home) as live:
        mine = RecordingStarter()
        chat = TriggerEngine.for_services(live.pincer.trigger_services(), starter=mine)
        firing = await chat.fire_command("/summarize https://example.com", session="main", fired_by="pincer chat", here=True)
        await live.pincer.triggers.settle()
        assert live.starter.requests == [], "the server did not take it"
        outcome = await chat.run_here(firing.id)
        assert outcome is not None and outcome.status == "done"
        assert [r.run_id for r in mine.requests] == [firing.run_id] and dict(mine.requests[0].params)["url"] == "https://example.com"
