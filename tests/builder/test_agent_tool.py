"""``build_tool``: an agent's build asks a person first, the approval shows the hosts, secrets and
refused effects, and the tool is registered live in the same Pincer."""

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
    monkeypatch.setattr("pincer.builder.runner.default_cache_dir", lambda home: runner_cache)
    schema = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
    script = [plan_turn("shout", ["api.example.com"], schema=schema), code_turn(SHOUT, [{"args": {"word": "a"}, "expect": {"shout": "A!"}}])]
    with serve_models(script) as server:
        config = parse_config(f'[llm]\nprovider = "openai"\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n'
                              '[approvals]\ntimeout_s = 20\n', home=pincer_home)  # fmt: skip
        async with Pincer.open(pincer_home, config=config, secret_key=KEY, audit_key=KEY, external=False, skills=False) as pincer:
            shown: list[Any] = []

            async def approve(approval: Any) -> None:
                shown.append(approval)
                pincer.dispatcher.answer(approval.id, "allow_once", by="test")

            args = {"description": "shout a word", "hosts": ["api.example.com"], "secrets": ["weather_key"]}
            result = await pincer.call(CallRequest(tool="build_tool", args=args, caller="agent"), on_approval=approve)
            assert result.ok, result.error
            assert result.output["key"] == "tools/shout" and result.output["hosts"] == ["api.example.com"]
            approval = shown[0]
            assert approval.effects == ("modify_extension",)
            assert approval.detail["hosts"] == ["api.example.com"] and approval.detail["secrets"] == ["weather_key"]
            assert "financial" in approval.detail["refused"]
            called = await pincer.call(CallRequest(tool="shout", args={"word": "live"}, session="main"), on_approval=approve)
            assert called.ok and called.output == {"shout": "LIVE!"}  # registered live, no restart
            assert len(shown) == 2 and shown[1].tool == "shout"  # its network effect asks like any tool's
            assert any(r.kind == "hub" and r.tool == "tools/shout" and r.caller == "builder" for r in pincer.audit.records())
