"""Provider faults: 429 with Retry-After, 500, a stream dropped mid-tool-call, malformed tool-call
JSON, a refused key, an unknown model, a context too long. The run retries or fails with a clear
status, never hangs (every wait bounded), and never runs a tool twice."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pincer.core.effects import EffectKind as E
from pincer.demo.model_server import ScriptedCall, ScriptedError, Turn, serve_models
from pincer.llm import RunRequest
from tests.funcruntime import FuncRuntime
from tests.llm.conftest import llm_config, open_pincer

RUN_LIMIT_S = 60
GRANTS = """
[[grants]]
tool = "send_email"
default = "allow"
"""


async def _sent(args, host):
    return "sent"


async def _run(tmp_path: Path, script: list[Turn], provider: str = "openai", stream: bool = True, extra: str = ""):
    """Run a chat-style request (no skill) and return (run, events, runtime, server)."""
    with serve_models(script) as server:
        async with open_pincer(tmp_path / "home", llm_config(server, provider=provider, stream=stream, extra=GRANTS + extra)) as pincer:
            runtime = FuncRuntime()
            runtime.add("send_email", _sent, effects=[E.EXTERNAL_WRITE], side_effecting=True,
                        schema={"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]})  # fmt: skip
            await pincer.add_runtime(runtime)
            events = []
            with anyio.fail_after(RUN_LIMIT_S):
                run = await pincer.agent.run(RunRequest(message="send the email"), on_event=events.append)
            records = await pincer.audit.records(run_id=run.id)
            return run, events, runtime, server, records


EMAIL = ScriptedCall(name="send_email", arguments={"to": "a@example.com"})


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_429_with_retry_after_is_waited_for_then_the_turn_is_asked_again(tmp_path: Path, provider: str) -> None:
    script = [
        Turn(error=ScriptedError(status=429, kind="rate_limit", message="slow down", retry_after="1")),
        Turn(calls=(EMAIL,)),
        Turn(text="done"),
    ]
    run, events, runtime, server, _ = await _run(tmp_path, script, provider)
    assert run.status == "done" and run.text == "done"
    retries = [e for e in events if e.kind == "retrying"]
    assert len(retries) == 1 and retries[0].data["after_s"] == 1.0 and retries[0].data["code"] == "provider_rate_limited"
    assert runtime.calls["send_email"] == 1 and len(server.requests) == 3


@pytest.mark.anyio
async def test_a_500_is_retried_with_backoff(tmp_path: Path) -> None:
    script = [Turn(error=ScriptedError(status=500, kind="server")), Turn(text="fine now")]
    run, events, _, _server, _ = await _run(tmp_path, script)
    assert run.status == "done" and run.text == "fine now"
    assert [e.data["code"] for e in events if e.kind == "retrying"] == ["provider_unavailable"]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_stream_dropped_mid_tool_call_is_retried_and_the_tool_runs_once(tmp_path: Path, provider: str) -> None:
    script = [
        Turn(text="Sending", calls=(EMAIL,), drop_mid_call=True),
        Turn(text="Sending", calls=(EMAIL,)),
        Turn(text="sent it"),
    ]
    run, events, runtime, server, records = await _run(tmp_path, script, provider)
    assert run.status == "done"
    assert runtime.calls["send_email"] == 1
    assert [r.tool for r in records if r.kind == "call"] == ["send_email"]
    assert any(e.kind == "retrying" for e in events)
    # The text of the broken attempt was announced as dropped, not kept in the transcript.
    assert run.tool_calls[0].ok and len(server.requests) == 3


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_malformed_tool_call_json_is_a_tool_error_the_model_can_fix(tmp_path: Path, provider: str) -> None:
    script = [
        Turn(calls=(ScriptedCall(name="send_email", arguments='{"to": "a@example.com"'),)),
        Turn(calls=(EMAIL,)),
        Turn(text="sent on the second try"),
    ]
    run, _, runtime, server, records = await _run(tmp_path, script, provider, stream=True)
    assert run.status == "done"
    assert runtime.calls["send_email"] == 1
    refused = [r for r in records if r.kind == "call" and r.outcome == "error"]
    assert len(refused) == 1 and refused[0].error_code == "invalid_arguments"
    second = str(server.requests[1].body)
    assert "not a JSON object" in second and "send the arguments again as one JSON object" in second


@pytest.mark.anyio
async def test_a_server_that_keeps_failing_ends_the_run_failed_after_max_retries(tmp_path: Path) -> None:
    script = [Turn(error=ScriptedError(status=503, kind="overloaded"))] * 5
    run, _events, _, server, records = await _run(tmp_path, script, extra="")
    assert run.status == "failed" and run.error["code"] == "provider_unavailable"
    assert len(server.requests) == 4  # the first try and [llm] max_retries = 3
    assert "max_retries" in run.error["hint"]
    assert records[-1].outcome == "failed" and records[-1].error_code == "provider_unavailable"


@pytest.mark.anyio
async def test_a_retry_after_too_long_to_wait_fails_at_once(tmp_path: Path) -> None:
    script = [Turn(error=ScriptedError(status=429, kind="rate_limit", retry_after="3600"))]
    run, _events, _, server, _ = await _run(tmp_path, script)
    assert run.status == "failed" and run.error["code"] == "provider_rate_limited"
    assert run.error["retry_after_s"] == 3600 and len(server.requests) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("error", "code", "hint_word"),
    [
        (ScriptedError(status=404, kind="not_found", message="no such model"), "model_not_found", "[llm] model"),
        (ScriptedError(status=400, kind="context_length", message="prompt is too long: maximum context length is 8192 tokens"), "context_too_long", "[output] max_bytes"),
        (ScriptedError(status=401, kind="auth", message="bad key"), "provider_auth_failed", "pincer secrets set"),
    ],
    ids=["unknown-model", "context-too-long", "bad-key"],
)
async def test_provider_errors_are_translated_with_a_hint_and_not_retried(
    tmp_path: Path, provider: str, error: ScriptedError, code: str, hint_word: str
) -> None:
    run, events, _, server, _ = await _run(tmp_path, [Turn(error=error)], provider)
    assert run.status == "failed" and run.error["code"] == code
    assert hint_word in run.error["hint"]
    assert len(server.requests) == 1 and not any(e.kind == "retrying" for e in events)
