"""A scripted run end to end, over the official SDKs and the local model server, in both wire
formats, streaming and not: it reads a skill, calls two tools in parallel (one needing approval),
gets a denial on a third and finishes; transcript, audit records and token counts agree."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from pincer.core.effects import EffectKind as E
from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm import RunRequest
from pincer.store import Answer
from tests.funcruntime import FuncRuntime
from tests.llm.conftest import TRIAGE_SKILL, llm_config, open_pincer, write_skill

GRANTS = """
[[grants]]
tool = "send_email"
default = "deny"
"""


async def _sent(args, host):
    return "sent"


def _script() -> list[Turn]:
    return [
        Turn(text="Reading the skill.", calls=(ScriptedCall(name="skill", arguments={"name": "triage", "params": {"topic": "login"}}),), input_tokens=120, output_tokens=11),
        Turn(
            calls=(
                ScriptedCall(name="echo", arguments={"text": "login broken for 3 users"}),
                ScriptedCall(name="write_file", arguments={"path": "notes/triage.txt", "content": "login: 3 users"}),
            ),
            input_tokens=300, output_tokens=40, cached_tokens=100,
        ),
        Turn(calls=(ScriptedCall(name="send_email", arguments={"to": "reporter@example.com"}),), input_tokens=420, output_tokens=15),
        Turn(text="Triaged: noted in notes/triage.txt; the email was refused by policy.", input_tokens=500, output_tokens=20),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_a_scripted_run_reads_a_skill_calls_tools_in_parallel_is_denied_once_and_finishes(
    tmp_path: Path, provider: str, stream: bool
) -> None:
    home = tmp_path / "home"
    write_skill(home, "triage", TRIAGE_SKILL)
    with serve_models(_script()) as server:
        async with open_pincer(home, llm_config(server, provider=provider, stream=stream, extra=GRANTS)) as pincer:
            runtime = FuncRuntime()
            runtime.add("send_email", _sent, effects=[E.EXTERNAL_WRITE], side_effecting=True,
                        schema={"type": "object", "properties": {"to": {"type": "string"}}})  # fmt: skip
            await pincer.add_runtime(runtime)
            asked = []

            async def approve(approval):
                asked.append(approval)
                await pincer.dispatcher.answer(approval.id, Answer.ALLOW_ONCE, by="test")

            events = []
            with anyio.fail_after(60):
                run = await pincer.agent.run(
                    RunRequest(skill="triage", params={"topic": "login"}, message="A user says login fails."),
                    on_event=events.append,
                    on_approval=approve,
                )
            assert run.status == "done", run.error
            assert run.text == "Triaged: noted in notes/triage.txt; the email was refused by policy."
            assert [a.tool for a in asked] == ["write_file"]
            assert (home / "workspace" / "notes" / "triage.txt").read_text() == "login: 3 users"
            assert runtime.calls["send_email"] == 0
            by_tool = {c.tool: c for c in run.tool_calls}
            assert by_tool["echo"].ok and by_tool["write_file"].ok and by_tool["skill"].ok
            assert by_tool["send_email"].error_code == "denied"

            # Token counts: the scripted usage, the run, its row and its end record agree.
            assert (run.usage.input_tokens, run.usage.output_tokens, run.usage.cached_input_tokens) == (1340, 86, 100)
            row = await pincer.runs.get(run.id)
            assert row.status == "done" and row.usage["input_tokens"] == 1340 and row.usage["output_tokens"] == 86
            assert row.usage["turns"] == 4 and row.usage["tool_calls"] == 4
            records = await pincer.audit.records(run_id=run.id)
            kinds = [(r.kind, r.tool, r.outcome) for r in records]
            assert kinds[0] == ("run", "run:triage", "started") and kinds[-1] == ("run", "run:triage", "done")
            assert records[-1].usage["input_tokens"] == 1340 and records[-1].usage["output_tokens"] == 86
            calls = {r.tool: r for r in records if r.kind == "call"}
            assert set(calls) == {"skill", "echo", "write_file", "send_email"}
            assert all(r.caller == "agent" and r.idempotency_key.startswith(f"run:{run.id}:") for r in calls.values())
            assert calls["send_email"].outcome == "denied" and calls["write_file"].approval_id == asked[0].id
            assert await pincer.audit.verify() >= len(records)

            # The transcript: every message, each tool result linked to its audit record.
            messages = await pincer.runs.messages(run.id)
            roles = [m.role for m in messages]
            assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
            tool_audit = {m.body["name"]: m.audit_id for m in messages if m.role == "tool"}
            assert tool_audit == {name: calls[name].id for name in ("skill", "echo", "write_file", "send_email")}
            assert "Triage the report about login" in messages[0].body["content"]
            assert "<available_skills>" in messages[0].body["content"]

            # What the model was sent: only the skill's tools the session may call, plus skill;
            # results wrapped as data, the denial with its reason.
            first = server.requests[0]
            assert first.stream is stream
            assert sorted(first.tool_names) == ["echo", "http", "send_email", "skill", "write_file"]
            last = json.dumps(server.requests[-1].body)
            assert 'tool_output tool=\\"skill\\" trusted=\\"true\\"' in last
            assert 'tool_output tool=\\"echo\\" trusted=\\"true\\"' in last
            assert "denied (denied)" in last and "send_email" in last

            kinds_seen = [e.kind for e in events]
            assert kinds_seen[0] == "started" and kinds_seen[-1] == "ended"
            assert "approval" in kinds_seen and kinds_seen.count("tool_result") == 4
            if provider == "openai":
                assert server.requests[0].body.get("stream_options") == ({"include_usage": True} if stream else None)
