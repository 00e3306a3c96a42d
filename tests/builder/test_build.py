"""A build end to end with the scripted model: parse failure, test failure, pass; registered,
signed, locked and callable through the call chain; its HTTP goes to its allowlisted host only,
with the credential injected host-side."""

from __future__ import annotations

import json

import pytest

from pincer.builder.build import BuildRequest
from pincer.core.values import CallRequest
from pincer.demo.model_server import serve_models
from tests.builder.helpers import code_turn, make_builder, not_json_turn, open_chain, plan_turn, weather_source

pytestmark = pytest.mark.anyio


async def test_a_build_parses_fails_then_passes_and_is_callable_through_the_chain(pincer_home, api, secret_store, runner_cache):
    secret_store.set("weather_key", "wk-live-7f3a9c21d4e8b6a05f")
    host = api.host
    fixtures = [{"method": "GET", "url": f"http://{host}/v1/now?city=Paris", "status": 200, "body": {"celsius": 21}}]
    tests = [{"args": {"city": "Paris"}, "expect": {"celsius": 21}}]
    script = [
        plan_turn("weather", [host, "evil.example.com"], secrets=[
            {"name": "weather_key", "host": host, "location": {"type": "bearer"}},
            {"name": "github_token", "host": host, "location": {"type": "bearer"}},
        ]),
        not_json_turn(),
        code_turn(weather_source(host, plus=1), tests, fixtures),
        code_turn(weather_source(host), tests, fixtures),
    ]
    with serve_models(script) as server:
        builder = make_builder(pincer_home, server, secret_store, runner_cache)
        try:
            report = await builder.build(BuildRequest(description="the weather now", hosts=(host,), secrets=("weather_key",)))
        finally:
            await builder.provider.aclose()
    assert report.ok and report.iterations == 3
    assert report.hosts == (host,)
    assert [s["name"] for s in report.secrets] == ["weather_key"]
    assert any("evil.example.com was dropped" in d for d in report.dropped)
    assert any("github_token was dropped" in d for d in report.dropped)
    assert report.key == "tools/weather" and report.signer == "builder"
    assert report.tests_passed == report.tests_total >= 1
    assert report.requests and report.requests[0]["credential_headers"] == ["authorization"]
    assert api.requests == []  # the tests went to the fixture server, never to the host
    record = json.loads((pincer_home / "builds" / "weather" / "build.json").read_text())
    assert record["iterations"] == 3 and len(record["failures"]) == 2
    assert "not valid JSON" in record["failures"][0] and "expected the output to contain" in record["failures"][1]
    lock = (pincer_home / "pincer.lock").read_text()
    assert 'key = "tools/weather"' in lock and 'signer = "builder"' in lock

    # callable through the chain, its credential injected host-side
    from pincer.hub.integrity import verify_home

    assert verify_home(pincer_home)[1] == []
    async with open_chain(pincer_home, allow=("weather",)) as pincer:
        result = await pincer.call(CallRequest(tool="weather", args={"city": "Lyon"}, session="main"))
    assert result.ok, result.error
    assert result.output["celsius"] == 21 and result.output["city"] == "Lyon"
    assert api.requests[-1]["path"] == "/v1/now?city=Lyon"
    assert api.requests[-1]["headers"]["authorization"] == "Bearer wk-live-7f3a9c21d4e8b6a05f"
    assert "wk-live" not in json.dumps(result.output)
