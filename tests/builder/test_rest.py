"""``POST /api/v1/builds`` on a real gateway: the stages stream as server-sent events, the last
one the report; the tool is then callable over the same gateway."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from pincer.demo.model_server import serve_models
from tests.builder.helpers import code_turn, plan_turn
from tests.builder.test_refusals import SHOUT
from tests.gateway.conftest import live_gateway

pytestmark = pytest.mark.anyio
BUILD_TIMEOUT_S = 120.0


async def test_post_builds_streams_stages_then_the_report_and_the_tool_is_served(tmp_path, runner_cache, monkeypatch):
    monkeypatch.setattr("pincer.builder.runner.default_cache_dir", lambda environ, home: runner_cache)
    schema = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
    script = [plan_turn("shout", [], schema=schema), code_turn(SHOUT, [{"args": {"word": "a"}, "expect": {"shout": "A!"}}])]
    with serve_models(script) as server:
        config = f'[llm]\nprovider = "openai"\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n'
        async with live_gateway(tmp_path / "home", config=config) as gateway:
            events: list[tuple[str, Any]] = []
            async with gateway.http(timeout=BUILD_TIMEOUT_S) as http:
                with anyio.fail_after(BUILD_TIMEOUT_S):
                    async with http.stream("POST", "/api/v1/builds", headers=gateway.headers,
                                           json={"description": "shout a word"}) as response:  # fmt: skip
                        assert response.status_code == 200
                        assert response.headers["content-type"].startswith("text/event-stream")
                        kind = None
                        async for line in response.aiter_lines():
                            if line.startswith("event: "):
                                kind = line[7:]
                            elif line.startswith("data: "):
                                events.append((kind, json.loads(line[6:])))
                stages = [data["stage"] for kind, data in events if kind == "stage"]
                assert stages[0] == "runner" and "test" in stages and stages[-1] == "register"
                kind, report = events[-1]
                assert kind == "done" and report["key"] == "tools/shout" and report["iterations"] == 1
                called = await http.post("/api/v1/tools/shout/call", headers=gateway.headers, json={"args": {"word": "rest"}})
                assert called.status_code == 200, called.text
                assert called.json()["output"] == {"shout": "REST!"}
            # The build's install is one act, by the REST caller's session (docs/acts.md: tool-build).
            built = [r for r in await gateway.pincer.audit.records() if r.kind == "hub"]
            assert [(r.tool, r.caller) for r in built] == [("tools/shout", "rest:main")], built
