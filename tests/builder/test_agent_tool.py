"""``build_tool``: an agent's build asks a person first, the approval shows the model's plan (the
hosts, secrets and effects it will have) made before anyone is asked, the approved call builds
from exactly that plan, and the tool is registered live in the same Pincer."""

from __future__ import annotations

from typing import Any

import pytest

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.demo.model_server import serve_models
from pincer.service import Pincer
from tests.builder.helpers import KEY, code_turn, plan_turn
from tests.builder.test_refusals import SHOUT

pytestmark = pytest.mark.anyio


async def test_build_tool_asks_shows_the_plan_bounds_and_registers_the_tool_live(pincer_home, runner_cache, monkeypatch):
    monkeypatch.setattr("pincer.builder.runner.default_cache_dir", lambda environ, home: runner_cache)
    schema = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
    planned = plan_turn("shout", ["api.example.com", "evil.example"], schema=schema,
                        secrets=[{"name": "weather_key", "host": "api.example.com", "location": {"type": "bearer"}}])
    script = [planned, code_turn(SHOUT, [{"args": {"word": "a"}, "expect": {"shout": "A!"}}])]
    with serve_models(script) as server:
        config = parse_config(f'[llm]\nprovider = "openai"\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n'
                              '[approvals]\ntimeout_s = 20\n', home=pincer_home)  # fmt: skip
        async with Pincer.open(pincer_home, config=config, secret_key=KEY, audit_key=KEY, external=False, skills=False) as pincer:
            shown: list[Any] = []

            async def approve(approval: Any) -> None:
                shown.append(approval)
                await pincer.dispatcher.answer(approval.id, "allow_once", by="test")

            args = {"description": "shout a word", "hosts": ["api.example.com"], "secrets": ["weather_key"]}
            result = await pincer.call(CallRequest(tool="build_tool", args=args, caller="agent"), on_approval=approve)
            assert result.ok, result.error
            assert result.output["key"] == "tools/shout" and result.output["hosts"] == ["api.example.com"]
            approval = shown[0]
            assert approval.effects == ("modify_extension",)
            # The plan was made before the approval, and the approval shows it: the host the
            # agent did not list is dropped, the secret says where it goes.
            detail = approval.detail
            assert detail["name"] == "shout" and detail["hosts"] == ["api.example.com"]
            assert detail["secrets"] == ["weather_key (sent to api.example.com in bearer)"] and detail["effects"] == ["network"]
            assert any("evil.example" in line for line in detail["dropped"]) and "financial" in detail["refused"]
            assert "'shout'" in approval.reason and "api.example.com" in approval.reason
            assert len(server.requests) == 2  # the plan once (before the approval), the code once: no second plan
            # It declared a credential: until that is set, a call is refused before anyone is asked.
            unset = await pincer.call(CallRequest(tool="shout", args={"word": "live"}, session="main"), on_approval=approve)
            assert not unset.ok and unset.error["code"] == "secret_error" and len(shown) == 1, unset.error
            assert "pincer secrets set weather_key" in unset.error["hint"], unset.error
            pincer.secrets.set("weather_key", "weather-key-value-1234")
            called = await pincer.call(CallRequest(tool="shout", args={"word": "live"}, session="main"), on_approval=approve)
            assert called.ok and called.output == {"shout": "LIVE!"}  # registered live, no restart
            assert len(shown) == 2 and shown[1].tool == "shout"  # its network effect asks like any tool's
            built = [r for r in await pincer.audit.records() if r.kind == "hub"]
            assert [(r.tool, r.caller, r.approval_id) for r in built] == [("tools/shout", "agent:main", approval.id)], built


async def test_a_refused_plan_is_refused_before_anyone_is_asked(pincer_home, runner_cache, monkeypatch):
    """The plan is made in the preflight, so a plan asking for a financial effect never reaches
    a person: nobody is asked, nothing is written."""
    monkeypatch.setattr("pincer.builder.runner.default_cache_dir", lambda environ, home: runner_cache)
    with serve_models([plan_turn("pay", ["api.example.com"], effects=["financial"])]) as server:
        config = parse_config(f'[llm]\nprovider = "openai"\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n'
                              '[approvals]\ntimeout_s = 20\n', home=pincer_home)  # fmt: skip
        async with Pincer.open(pincer_home, config=config, secret_key=KEY, audit_key=KEY, external=False, skills=False) as pincer:
            shown: list[Any] = []

            async def approve(approval: Any) -> None:
                shown.append(approval)
                await pincer.dispatcher.answer(approval.id, "allow_once", by="test")

            args = {"description": "pay an invoice", "hosts": ["api.example.com"]}
            result = await pincer.call(CallRequest(tool="build_tool", args=args, caller="agent"), on_approval=approve)
            assert not result.ok and result.error["code"] == "build_refused" and "financial" in result.error["message"]
            assert shown == [] and not (pincer_home / "builds" / "pay").exists()
