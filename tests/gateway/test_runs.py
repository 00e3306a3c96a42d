"""Runs over the gateway: REST ``POST /api/v1/runs`` (202), ``GET`` its state, its server-sent
events, cancel; the ``run_skill`` MCP tool; and ``[idempotency] required`` over REST (428) and
MCP (a tool error naming the meta key). A real uvicorn server and the local model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm.delegate import run_skill_runtime
from tests.gateway.conftest import LiveGateway, live_gateway

pytestmark = pytest.mark.anyio
RUN_TIMEOUT_S = 60.0
POLL_S = 0.05


def _config(server: Any, extra: str = "") -> str:
    return f"""
[llm]
model = "scripted-model"
base_url = "{server.openai_url}"

[approvals]
timeout_s = 30

[[grants]]
tool = "run_skill"
default = "allow"
""" + extra


async def _events(gateway: LiveGateway, run_id: str) -> list[dict[str, Any]]:
    """Follow the run's SSE stream to its end."""
    events: list[dict[str, Any]] = []
    async with gateway.http(timeout=RUN_TIMEOUT_S) as http:
        async with http.stream("GET", f"/api/v1/runs/{run_id}/events", headers=gateway.headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            kind = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                    assert data["kind"] == kind
                    events.append(data)
    return events


async def test_a_rest_run_answers_202_streams_its_events_and_is_recorded(tmp_path: Path) -> None:
    script = [Turn(text="Saying it. ", calls=(ScriptedCall(name="say", arguments={"text": "hi"}),)), Turn(text="Said hi.")]
    with serve_models(script) as server:
        async with live_gateway(tmp_path / "home", config=_config(server)) as gateway:
            async with gateway.http() as http:
                started = await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "say hi"})
                assert started.status_code == 202, started.text
                run_id = started.json()["run_id"]
                assert started.json()["events_url"] == f"/api/v1/runs/{run_id}/events"
                with anyio.fail_after(RUN_TIMEOUT_S):
                    events = await _events(gateway, run_id)
                kinds = [e["kind"] for e in events]
                assert kinds[0] == "started" and kinds[-1] == "ended" and events[-1]["status"] == "done"
                assert "".join(e["text"] for e in events if e["kind"] == "text") == "Saying it. Said hi."
                assert [e["tool"] for e in events if e["kind"] == "tool_result"] == ["say"]
                got = (await http.get(f"/api/v1/runs/{run_id}", headers=gateway.headers)).json()
                assert got["status"] == "done" and got["trigger"] == "rest" and got["session"] == "main"
                assert [m["role"] for m in got["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
                audit_id = next(m["audit_id"] for m in got["messages"] if m["role"] == "tool")
                assert (await gateway.pincer.audit.records(run_id=run_id))[1].id == audit_id
                listed = (await http.get("/api/v1/runs", headers=gateway.headers)).json()["runs"]
                assert [r["id"] for r in listed] == [run_id]
                # A finished run's events are still there to read.
                again = await _events(gateway, run_id)
                assert again[-1]["kind"] == "ended"
                missing = await http.get("/api/v1/runs/nope", headers=gateway.headers)
                assert missing.status_code == 404 and missing.json()["error"]["code"] == "run_not_found"
                bad = await http.post("/api/v1/runs", headers=gateway.headers, json={"skill": "no-such-skill"})
                assert bad.status_code == 404 and bad.json()["error"]["code"] == "skill_not_found"
                params = await http.post("/api/v1/runs", headers=gateway.headers, json={"skill": "code-review", "params": {"focus": "loudly"}})
                assert params.status_code == 422 and params.json()["error"]["code"] == "invalid_arguments"
                budget = await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "x", "budgets": {"turn": 1}})
                assert budget.status_code == 400 and "unknown budget" in budget.json()["error"]["message"]
                assert len(await gateway.pincer.runs.list()) == 1  # refused requests started nothing


async def test_without_a_model_a_run_is_refused_with_503_naming_the_setting(tmp_path: Path) -> None:
    async with live_gateway(tmp_path / "home") as gateway:
        async with gateway.http() as http:
            refused = await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "hi"})
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "config_error" and "[llm] model" in refused.json()["error"]["hint"]


async def test_a_rest_run_waits_for_an_approval_answered_over_rest(tmp_path: Path) -> None:
    script = [Turn(calls=(ScriptedCall(name="write_note", arguments={"text": "x"}),)), Turn(text="noted")]
    with serve_models(script) as server:
        async with live_gateway(tmp_path / "home", config=_config(server)) as gateway:
            async with gateway.http() as http:
                run_id = (await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "note x"})).json()["run_id"]
                with anyio.fail_after(RUN_TIMEOUT_S):
                    while not (pending := (await http.get("/api/v1/approvals", headers=gateway.headers)).json()["approvals"]):
                        await anyio.sleep(POLL_S)
                assert pending[0]["tool"] == "write_note"
                answered = await http.post(f"/api/v1/approvals/{pending[0]['id']}", headers=gateway.headers, json={"decision": "allow_once"})
                assert answered.status_code == 200
                with anyio.fail_after(RUN_TIMEOUT_S):
                    events = await _events(gateway, run_id)
                approval = next(e for e in events if e["kind"] == "approval")
                assert approval["id"] == pending[0]["id"]
                assert events[-1]["status"] == "done"


async def test_a_rest_run_can_be_cancelled(tmp_path: Path) -> None:
    with serve_models([Turn(text="slow", delay_s=30)]) as server:
        async with live_gateway(tmp_path / "home", config=_config(server)) as gateway:
            async with gateway.http() as http:
                run_id = (await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "wait"})).json()["run_id"]
                with anyio.fail_after(RUN_TIMEOUT_S):
                    while not server.requests:
                        await anyio.sleep(POLL_S)
                cancelled = await http.post(f"/api/v1/runs/{run_id}/cancel", headers=gateway.headers)
                assert cancelled.status_code == 202
                with anyio.fail_after(RUN_TIMEOUT_S):
                    events = await _events(gateway, run_id)
                assert events[-1]["status"] == "cancelled"
                assert (await gateway.pincer.runs.get(run_id)).status == "cancelled"


async def test_another_session_cannot_see_a_run(tmp_path: Path) -> None:
    import hashlib

    other = "other-session-token-0123456789"
    extra = f'\n[[gateway.tokens]]\nsha256 = "{hashlib.sha256(other.encode()).hexdigest()}"\nsession = "bot"\n'
    with serve_models([Turn(text="hi")]) as server:
        async with live_gateway(tmp_path / "home", config=_config(server, extra)) as gateway:
            async with gateway.http() as http:
                run_id = (await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "hi"})).json()["run_id"]
                foreign = {"Authorization": f"Bearer {other}"}
                assert (await http.get(f"/api/v1/runs/{run_id}", headers=foreign)).status_code == 404
                assert (await http.get("/api/v1/runs", headers=foreign)).json()["runs"] == []
                assert (await http.post(f"/api/v1/runs/{run_id}/cancel", headers=foreign)).status_code == 404


async def test_run_skill_over_mcp_delegates_a_skill_to_the_loop(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "workspace" / "skills" / "greet"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: greet\ndescription: Greet someone.\ntools: [say]\n---\nGreet the user with say.\n")
    script = [Turn(calls=(ScriptedCall(name="say", arguments={"text": "hello"}),)), Turn(text="Greeted.")]
    with serve_models(script) as server:
        async with live_gateway(home, config=_config(server)) as gateway:
            await gateway.pincer.add_runtime(run_skill_runtime(gateway.pincer.delegate_services()))
            async with gateway.mcp(mode="legacy") as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert "run_skill" in tools
                with anyio.fail_after(RUN_TIMEOUT_S):
                    result = await client.call_tool("run_skill", {"skill": "greet", "message": "greet me"})
            assert not result.is_error, result
            answer = json.loads(result.content[0].text)
            assert answer["status"] == "done" and answer["text"] == "Greeted."
            row = await gateway.pincer.runs.get(answer["run_id"])
            assert row.trigger == "run_skill" and row.skill == "greet"
            inner = [r for r in await gateway.pincer.audit.records(run_id=answer["run_id"]) if r.kind == "call"]
            assert [(r.tool, r.caller) for r in inner] == [("say", "agent")]
            # The model of a run is never offered run_skill itself.
            assert "run_skill" not in server.requests[0].tool_names


async def test_run_skill_puts_the_runs_approvals_to_the_mcp_client(tmp_path: Path) -> None:
    import mcp_types as types

    home = tmp_path / "home"
    folder = home / "skills" / "noter"  # the operator's own (the workspace's skills are installed-level)
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: noter\ndescription: Take a note.\ntools: [write_note]\n---\nWrite the note.\n")
    script = [Turn(calls=(ScriptedCall(name="write_note", arguments={"text": "remember"}),)), Turn(text="Noted.")]
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    with serve_models(script) as server:
        async with live_gateway(home, config=_config(server)) as gateway:
            await gateway.pincer.add_runtime(run_skill_runtime(gateway.pincer.delegate_services()))
            async with gateway.mcp(mode="legacy", elicitation_callback=elicit) as client:
                with anyio.fail_after(RUN_TIMEOUT_S):
                    result = await client.call_tool("run_skill", {"skill": "noter"})
            answer = json.loads(result.content[0].text)
            assert answer["status"] == "done" and answer["text"] == "Noted."
            assert len(asked) == 1 and "write_note" in asked[0]
            answers = [r for r in await gateway.pincer.audit.records() if r.kind == "approval"]
            assert answers and answers[0].caller.startswith("mcp-elicitation:")


async def test_idempotency_required_answers_428_over_rest_and_a_tool_error_over_mcp(tmp_path: Path) -> None:
    config = '[idempotency]\nrequired = true\n[[grants]]\ntool = "write_note"\ndefault = "allow"\n'
    async with live_gateway(tmp_path / "home", config=config) as gateway:
        async with gateway.http() as http:
            refused = await http.post("/api/v1/tools/write_note/call", headers=gateway.headers, json={"args": {"text": "x"}})
            assert refused.status_code == 428
            error = refused.json()["error"]
            assert error["code"] == "idempotency_key_required" and "Idempotency-Key" in error["message"]
            keyed = await http.post(
                "/api/v1/tools/write_note/call", headers={**gateway.headers, "Idempotency-Key": "k1"}, json={"args": {"text": "x"}}
            )
            assert keyed.status_code == 200
            free = await http.post("/api/v1/tools/say/call", headers=gateway.headers, json={"args": {"text": "x"}})
            assert free.status_code == 200  # not side-effecting: no key needed
        async with gateway.mcp(mode="legacy") as client:
            result = await client.call_tool("write_note", {"text": "y"})
            assert result.is_error
            text = " ".join(b.text for b in result.content if b.type == "text")
            assert '_meta["pincer/idempotencyKey"]' in text
            ok = await client.call_tool("write_note", {"text": "y"}, meta={"pincer/idempotencyKey": "k2"})
            assert not ok.is_error
