"""Budgets: each limit stops a scripted run that would exceed it, with status budget_exceeded and
the budget's name; no tool call of the turn that spent it runs."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pincer.core.effects import EffectKind as E
from pincer.core.errors import ConfigError
from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm import RunRequest
from tests.funcruntime import FuncRuntime
from tests.llm.conftest import llm_config, open_pincer

# taint off: the scripted tool's output is untrusted and would make its next call ask.
GRANTS = """
[agent]
taint = "off"
[[grants]]
tool = "send_email"
default = "allow"
[agent.prices.scripted-model]
input_per_mtok = 1000
output_per_mtok = 1000
"""
EMAIL = ScriptedCall(name="send_email", arguments={"to": "a@example.com"})


async def _sent(args, host):
    return "sent"


async def _run(tmp_path: Path, script: list[Turn], budgets: dict):
    with serve_models(script) as server:
        async with open_pincer(tmp_path / "home", llm_config(server, extra=GRANTS)) as pincer:
            runtime = FuncRuntime()
            runtime.add("send_email", _sent, effects=[E.EXTERNAL_WRITE], side_effecting=True)
            await pincer.add_runtime(runtime)
            with anyio.fail_after(60):
                run = await pincer.agent.run(RunRequest(message="go", budgets=budgets))
            return run, runtime, await pincer.runs.get(run.id), await pincer.runs.messages(run.id), await pincer.audit.records(run_id=run.id)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("budgets", "script", "calls_run", "stop"),
    [
        ({"turns": 2}, [Turn(calls=(EMAIL,)), Turn(calls=(EMAIL,)), Turn(text="never asked")], 2, "turns"),
        ({"tool_calls": 1}, [Turn(calls=(EMAIL, EMAIL)), Turn(text="never asked")], 0, "tool_calls"),
        ({"tool_calls": 2}, [Turn(calls=(EMAIL,)), Turn(calls=(EMAIL, EMAIL)), Turn(text="no")], 1, "tool_calls"),
        ({"input_tokens": 100}, [Turn(calls=(EMAIL,), input_tokens=150), Turn(text="no")], 0, "input_tokens"),
        ({"output_tokens": 10}, [Turn(calls=(EMAIL,), output_tokens=20), Turn(text="no")], 0, "output_tokens"),
        ({"cost_usd": 0.5}, [Turn(calls=(EMAIL,), input_tokens=600, output_tokens=1), Turn(text="no")], 0, "cost_usd"),
        ({"deadline_s": 0.5}, [Turn(text="too late", delay_s=30)], 0, "deadline"),
    ],
    ids=["turns", "tool-calls-in-one-turn", "tool-calls-over-turns", "input-tokens", "output-tokens", "cost", "deadline"],
)
async def test_each_budget_stops_the_run_cleanly(tmp_path: Path, budgets: dict, script: list[Turn], calls_run: int, stop: str) -> None:
    run, runtime, row, messages, records = await _run(tmp_path, script, budgets)
    assert (run.status, run.stop) == ("budget_exceeded", stop)
    assert (row.status, row.stop) == ("budget_exceeded", stop)
    assert records[-1].kind == "run" and records[-1].outcome == "budget_exceeded" and f"({stop})" in records[-1].reason
    assert runtime.calls["send_email"] == calls_run
    # Every call the model asked for has an answer in the transcript (a provider refuses a
    # conversation with an unanswered call, e.g. the next message of a chat).
    asked = {c["id"] for m in messages if m.role == "assistant" for c in m.body.get("tool_calls", [])}
    answered = {m.body["tool_call_id"] for m in messages if m.role == "tool"}
    assert asked == answered


@pytest.mark.anyio
async def test_the_cost_of_a_run_comes_from_the_price_table(tmp_path: Path) -> None:
    run, *_ = await _run(tmp_path, [Turn(text="hi", input_tokens=1000, output_tokens=500)], {})
    assert run.status == "done" and run.cost_usd == pytest.approx(1.5)


@pytest.mark.anyio
async def test_a_cost_budget_for_a_model_without_a_price_refuses_to_start(tmp_path: Path) -> None:
    with serve_models([Turn(text="hi")]) as server:
        async with open_pincer(tmp_path / "home", llm_config(server)) as pincer:
            with pytest.raises(ConfigError) as info:
                await pincer.agent.run(RunRequest(message="go", budgets={"cost_usd": 1}))
            assert "[agent.prices]" in (info.value.hint or "")
            assert await pincer.runs.list() == [] and server.requests == []
            # Without a cost budget the same model runs, counting tokens only.
            run = await pincer.agent.run(RunRequest(message="go"))
            assert run.status == "done" and run.cost_usd is None and run.usage.output_tokens > 0


@pytest.mark.anyio
async def test_the_output_budget_caps_what_a_turn_may_ask_for(tmp_path: Path) -> None:
    with serve_models([Turn(text="hi")]) as server:
        async with open_pincer(tmp_path / "home", llm_config(server)) as pincer:
            await pincer.agent.run(RunRequest(message="go", budgets={"output_tokens": 123}))
            assert server.requests[0].body["max_tokens"] == 123
