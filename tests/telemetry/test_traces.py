"""Traces, end to end: a real ``pincer serve`` exports over OTLP/HTTP with the official exporter to a
local receiver that decodes the protobuf payloads with the official definitions.

One gateway serves three callers, each with a W3C trace context of its own: a REST call
(``traceparent`` header), an MCP call that reaches an upstream MCP server (``_meta.traceparent``;
the upstream is a real subprocess that traces itself), and an agent run against the local model
server. Each trace is checked whole: names, kinds, parents, attributes, the caller's trace id
carried through to the upstream, and no argument value in any span.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from tests.gateway.conftest import PINCER_BIN, ServerProcess, pincer_serve
from tests.telemetry.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver

UPSTREAM = Path(__file__).with_name("upstream_server.py")
CLI_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 60.0
POLL_S = 0.05


def _trace_context() -> tuple[str, str, str]:
    """(traceparent, trace id, the caller's span id): a context as a traced client sends it."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PINCER_HOME": str(home)}
    return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


@contextmanager
def _traced_serve(home: Path, receiver: OtlpReceiver) -> Iterator[ServerProcess]:
    """``pincer serve`` exporting to ``receiver``; the OTEL_* variables as an operator sets them."""
    env = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # export within 50 ms of a span's end
        "OTEL_SERVICE_NAME": "pincer-under-test",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)  # pincer_serve passes the test's environment on
    try:
        with pincer_serve(home) as server:
            yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _in_trace(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == trace_id]


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"{len(found)} spans named {name!r} in {sorted(s.name for s in spans)}"
    return found[0]


def _children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


def _wait_for_names(receiver: OtlpReceiver, trace_id: str, names: set[str]) -> list[ReceivedSpan]:
    return _in_trace(
        receiver.wait_for(
            lambda spans: names <= {s.name for s in _in_trace(spans, trace_id)}, what=f"spans {sorted(names)} of trace {trace_id}"
        ),
        trace_id,
    )


def _config(model_url: str) -> str:
    return f"""
[telemetry]
traces = true

[llm]
model = "scripted-model"
base_url = "{model_url}"

[[grants]]
tool = "*"
default = "allow"
"""


def test_rest_mcp_and_agent_traces_cross_every_hop_and_hold_no_argument(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    rest_arg, mcp_arg, agent_arg = (f"arg-value-{secrets.token_hex(8)}" for _ in range(3))
    script = [Turn(text="Echoing. ", calls=(ScriptedCall(name="echo", arguments={"text": agent_arg}, id="call_7"),)), Turn(text="Done.")]
    with otlp_receiver() as receiver, serve_models(script) as model:
        (home / "config.toml").write_text(_config(model.openai_url))
        added = _pincer(
            home, "mcp", "add", "up", "--command", sys.executable, "--arg", str(UPSTREAM),
            "--env", f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={receiver.endpoint}", "--json",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        with _traced_serve(home, receiver) as server:
            info, headers = server.info, {"Authorization": f"Bearer {server.token}"}

            # REST: the traceparent header is continued.
            rest_parent, rest_trace, rest_caller = _trace_context()
            called = httpx.post(
                f"{info['api_url']}/tools/echo/call", json={"args": {"text": rest_arg}},
                headers={**headers, "traceparent": rest_parent}, trust_env=False, timeout=CALL_TIMEOUT_S,
            )  # fmt: skip
            assert called.status_code == 200, called.text
            # A name no tool has: the span says execute_tool, the name stays an attribute.
            unknown_parent, unknown_trace, _ = _trace_context()
            missing = httpx.post(
                f"{info['api_url']}/tools/no_such_tool/call", json={"args": {}},
                headers={**headers, "traceparent": unknown_parent}, trust_env=False, timeout=CALL_TIMEOUT_S,
            )  # fmt: skip
            assert missing.status_code == 404
            # A malformed trace context is no error: the call starts a trace of its own.
            garbled = httpx.post(
                f"{info['api_url']}/tools/echo/call", json={"args": {"text": "x"}},
                headers={**headers, "traceparent": "00-not-a-trace-context"}, trust_env=False, timeout=CALL_TIMEOUT_S,
            )  # fmt: skip
            assert garbled.status_code == 200

            # MCP: _meta.traceparent is continued, and passed on to the upstream in its _meta.
            mcp_parent, mcp_trace, mcp_caller = _trace_context()
            legacy_parent, legacy_trace, legacy_caller = _trace_context()
            sdk_parent, sdk_trace, sdk_caller = _trace_context()

            async def progress(value: float, total: float | None, message: str | None) -> None:
                pass

            async def mcp_call(mode: str, parent: str, *, streamed: bool = False) -> Any:
                async with httpx2.AsyncClient(headers=headers, trust_env=False) as http:
                    async with Client(streamable_http_client(info["mcp_url"], http_client=http), mode=mode) as client:
                        with anyio.fail_after(CALL_TIMEOUT_S):
                            return await client.call_tool(
                                "up_trace_context", {"text": mcp_arg}, meta={"traceparent": parent},
                                progress_callback=progress if streamed else None,
                            )  # fmt: skip

            upstream_answer = anyio.run(mcp_call, "auto", mcp_parent)  # 2026-07-28: the direct JSON path
            assert not upstream_answer.is_error, upstream_answer
            legacy_answer = anyio.run(mcp_call, "legacy", legacy_parent)  # the handshake era's direct path
            assert not legacy_answer.is_error, legacy_answer
            # A progress token sends the call the SDK's own way (its handler, its middleware).
            sdk_answer = anyio.run(lambda: mcp_call("legacy", sdk_parent, streamed=True))
            assert not sdk_answer.is_error, sdk_answer

            # An agent run started over REST: its model requests and tool calls are one trace.
            run_parent, run_trace, run_caller = _trace_context()
            started = httpx.post(
                f"{info['api_url']}/runs", json={"message": "echo it"}, headers={**headers, "traceparent": run_parent},
                trust_env=False, timeout=CALL_TIMEOUT_S,
            )  # fmt: skip
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while (run := httpx.get(f"{info['api_url']}/runs/{run_id}", headers=headers, trust_env=False).json())["status"] == "running":
                assert time.monotonic() < deadline, f"run {run_id} still running after {RUN_TIMEOUT_S} s"
                time.sleep(POLL_S)
            assert run["status"] == "done", run

            rest = _wait_for_names(receiver, rest_trace, {"POST /api/v1/tools/{name}/call", "execute_tool echo"})
            unknown = _wait_for_names(receiver, unknown_trace, {"execute_tool"})
            mcp = _wait_for_names(
                receiver, mcp_trace,
                {"tools/call up_trace_context", "execute_tool up_trace_context", "MCP send tools/call trace_context",
                 "tools/call trace_context"},
            )  # fmt: skip
            legacy, through_sdk = (
                _wait_for_names(receiver, trace, {"tools/call up_trace_context", "execute_tool up_trace_context", "tools/call trace_context"})
                for trace in (legacy_trace, sdk_trace)
            )
            agent = _wait_for_names(
                receiver, run_trace, {"POST /api/v1/runs", "invoke_agent chat", "chat scripted-model", "execute_tool echo"}
            )

    # -- REST: client -> the gateway's server span -> the governed call ----------------------------
    server_span = _one(rest, "POST /api/v1/tools/{name}/call")
    assert (server_span.kind, server_span.parent_span_id, server_span.service) == ("server", rest_caller, "pincer-under-test")
    assert server_span.attributes["http.route"] == "/api/v1/tools/{name}/call"
    assert server_span.attributes["http.response.status_code"] == 200
    call = _one(rest, "execute_tool echo")
    assert (call.kind, call.parent_span_id) == ("internal", server_span.span_id)
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["gen_ai.tool.name"] == "echo" and call.attributes["gen_ai.tool.type"] == "function"
    assert call.attributes["pincer.session"] == "main" and call.attributes["pincer.caller"] == "rest"
    assert (call.attributes["pincer.decision"], call.attributes["pincer.outcome"]) == ("allow", "ok")
    assert call.attributes["pincer.runtime"] == "native" and call.attributes["pincer.effects"] == []
    assert call.attributes["pincer.audit_id"] == called.json()["audit_id"]

    refused = _one(unknown, "execute_tool")
    assert refused.attributes["gen_ai.tool.name"] == "no_such_tool" and refused.attributes["error.type"] == "tool_not_found"
    assert "pincer.runtime" not in refused.attributes and refused.status_code == 2  # STATUS_CODE_ERROR

    # -- MCP: client -> MCP server span (from _meta) -> call -> SDK client span -> the upstream's span
    served = _one(mcp, "tools/call up_trace_context")
    assert (served.kind, served.parent_span_id) == ("server", mcp_caller)
    assert served.attributes["mcp.method.name"] == "tools/call" and served.attributes["mcp.protocol.version"]
    upstream_call = _one(mcp, "execute_tool up_trace_context")
    assert upstream_call.parent_span_id == served.span_id
    assert upstream_call.attributes["pincer.runtime"] == "mcp" and upstream_call.attributes["gen_ai.tool.type"] == "extension"
    sent = _one(mcp, "MCP send tools/call trace_context")
    assert (sent.kind, sent.parent_span_id) == ("client", upstream_call.span_id)
    received = _one(mcp, "tools/call trace_context")
    assert (received.service, received.kind, received.parent_span_id) == ("upstream", "server", sent.span_id)
    # What the upstream itself read from its request's _meta: the caller's trace, pincer's span.
    carried = json.loads(upstream_answer.content[0].text)["meta"]["traceparent"]
    assert carried.split("-")[1:3] == [mcp_trace, sent.span_id]
    for spans, caller, answer, trace in ((legacy, legacy_caller, legacy_answer, legacy_trace), (through_sdk, sdk_caller, sdk_answer, sdk_trace)):
        served_here = _one(spans, "tools/call up_trace_context")
        assert served_here.parent_span_id == caller
        assert _one(spans, "execute_tool up_trace_context").parent_span_id == served_here.span_id
        assert json.loads(answer.content[0].text)["meta"]["traceparent"].split("-")[1] == trace
    # The POST that carried it has its own span (its headers named no trace): _meta decides.
    assert not [s for s in mcp if s.name == "POST /mcp"]

    # -- agent run: POST /runs -> invoke_agent -> chat, execute_tool (the model's call id) ----------
    posted = _one(agent, "POST /api/v1/runs")
    assert posted.parent_span_id == run_caller
    invoked = _one(agent, "invoke_agent chat")
    assert invoked.parent_span_id == posted.span_id
    assert invoked.attributes["gen_ai.operation.name"] == "invoke_agent" and invoked.attributes["pincer.run_id"] == run_id
    assert invoked.attributes["gen_ai.provider.name"] == "openai" and invoked.attributes["pincer.run.status"] == "done"
    chats = [s for s in agent if s.name == "chat scripted-model"]
    assert len(chats) == 2 and all(c.parent_span_id == invoked.span_id and c.kind == "client" for c in chats)
    assert all(c.attributes["gen_ai.usage.input_tokens"] > 0 and c.attributes["gen_ai.usage.output_tokens"] > 0 for c in chats)
    assert invoked.attributes["gen_ai.usage.input_tokens"] == sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats)
    assert chats[0].attributes["server.address"] == "127.0.0.1"
    tool_call = _one(agent, "execute_tool echo")
    assert tool_call.parent_span_id == invoked.span_id
    assert tool_call.attributes["gen_ai.tool.call.id"] == "call_7" and tool_call.attributes["pincer.caller"] == "agent"
    # The model server got each request with the trace context of its chat span.
    sent_to_model = [r.headers.get("traceparent", "").split("-") for r in model.requests]
    assert [parts[1] for parts in sent_to_model] == [run_trace, run_trace], sent_to_model
    assert {parts[2] for parts in sent_to_model} == {c.span_id for c in chats}

    # -- no span anywhere holds an argument value (nor the token) ----------------------------------
    everything = receiver.snapshot()
    for value in (rest_arg, mcp_arg, agent_arg, server.token):
        leaking = [s.name for s in everything if value in s.raw]
        assert not leaking, f"{value!r} appears in spans {leaking}"
    assert not any(k.startswith("gen_ai.tool.call.arguments") or k == "gen_ai.tool.call.result" for s in everything for k in s.attributes)


def _answer_first_approval(api_url: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while not (pending := httpx.get(f"{api_url}/approvals", headers=headers, trust_env=False).json()["approvals"]):
        assert time.monotonic() < deadline, f"no approval appeared within {CALL_TIMEOUT_S} s"
        time.sleep(POLL_S)
    answered = httpx.post(f"{api_url}/approvals/{pending[0]['id']}", json={"decision": "allow_once"}, headers=headers, trust_env=False)
    assert answered.status_code == 200, answered.text
    return pending[0]


def test_upstream_http_approval_webhook_spans_and_recorded_content_scanned_and_cut(tmp_path: Path) -> None:
    """The http tool's request carries the caller's trace to the upstream (a local stand-in) under
    a client span that names the server, never the path or query; an approval wait is a span of its
    own; a webhook delivery is a span whose run is its child. With record_content, the arguments and
    results are on the call's span leak-scanned (a stored secret masked) and cut short."""
    from tests.localservers import serve as serve_http

    home = tmp_path / "home"
    home.mkdir()
    secret = f"sk-live-{secrets.token_hex(12)}"
    hook_token = secrets.token_hex(16)
    query_value = f"q-{secrets.token_hex(8)}"
    baggage_value = f"b-{secrets.token_hex(8)}"
    with otlp_receiver() as receiver, serve_models([Turn(text="Pong.")]) as model, serve_http() as upstream:
        (home / "config.toml").write_text(f"""
[telemetry]
traces = true
record_content = true
content_max_chars = 64

[network]
allow_private = true

[llm]
model = "scripted-model"
base_url = "{model.openai_url}"

[[grants]]
tool = "echo"
default = "allow"

[[grants]]
tool = "http"
default = "ask"

[[hooks]]
name = "ping"
auth = "bearer"
secret = "ping_token"
message = "ping"
""")
        for name, value in (("api_key", secret), ("ping_token", hook_token)):
            stored = subprocess.run(
                [str(PINCER_BIN), "secrets", "set", name], input=value, capture_output=True, text=True,
                env={**os.environ, "PINCER_HOME": str(home)}, timeout=CLI_TIMEOUT_S,
            )  # fmt: skip
            assert stored.returncode == 0, stored.stderr
        with _traced_serve(home, receiver) as server:
            info, headers = server.info, {"Authorization": f"Bearer {server.token}"}

            echo_parent, echo_trace, _ = _trace_context()
            long_text = f"the key is {secret} " + "x" * 200
            echoed = httpx.post(
                f"{info['api_url']}/tools/echo/call", json={"args": {"text": long_text}},
                headers={**headers, "traceparent": echo_parent}, trust_env=False, timeout=CALL_TIMEOUT_S,
            )  # fmt: skip
            assert echoed.status_code == 200 and secret not in echoed.text

            http_parent, http_trace, _ = _trace_context()
            url = upstream.url(f"/echo/private/path?token={query_value}")
            outcome: dict[str, Any] = {}

            async def call_http() -> None:
                async with httpx.AsyncClient(trust_env=False, timeout=CALL_TIMEOUT_S) as client:
                    outcome["response"] = await client.post(
                        f"{info['api_url']}/tools/http/call", json={"args": {"url": url, "method": "GET"}},
                        headers={**headers, "traceparent": http_parent, "baggage": f"tenant={baggage_value}"},
                    )  # fmt: skip

            async def call_and_answer() -> None:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call_http)
                    outcome["approval"] = await anyio.to_thread.run_sync(_answer_first_approval, info["api_url"], headers)

            anyio.run(call_and_answer)
            assert outcome["response"].status_code == 200, outcome["response"].text

            hook_parent, hook_trace, hook_caller = _trace_context()
            delivered = httpx.post(
                f"{info['url']}/hooks/ping", json={"event": "ping"},
                headers={"Authorization": f"Bearer {hook_token}", "traceparent": hook_parent}, trust_env=False,
            )  # fmt: skip
            assert delivered.status_code == 202, delivered.text

            echo = _wait_for_names(receiver, echo_trace, {"execute_tool echo"})
            http = _wait_for_names(receiver, http_trace, {"execute_tool http", "approval http", "GET"})
            hook = _wait_for_names(receiver, hook_trace, {"POST /hooks/{name}", "webhook ping", "invoke_agent chat", "chat scripted-model"})

    # record_content: the arguments and the result as the audit log keeps them, scanned and cut.
    call = _one(echo, "execute_tool echo")
    arguments, result = call.attributes["gen_ai.tool.call.arguments"], call.attributes["gen_ai.tool.call.result"]
    assert arguments.startswith('{"text": "the key is [REDACTED') and arguments.endswith("…[truncated]"), arguments
    assert result.endswith("…[truncated]") and "[REDACTED" in result, result
    assert len(arguments) == 64 + len("…[truncated]")

    # The upstream request: a client span under the call, its trace context sent in the headers.
    call = _one(http, "execute_tool http")
    approval = _one(http, "approval http")
    assert approval.parent_span_id == call.span_id and approval.attributes["gen_ai.tool.name"] == "http"
    assert call.attributes["pincer.approval_id"] == outcome["approval"]["id"]
    assert call.attributes["pincer.decision"] == "allow" and call.attributes["pincer.outcome"] == "ok"
    request_span = _one(http, "GET")
    assert (request_span.kind, request_span.parent_span_id) == ("client", call.span_id)
    assert request_span.attributes == {
        "http.request.method": "GET", "server.address": "127.0.0.1", "server.port": upstream.port, "url.scheme": "http",
        "http.response.status_code": 200,
    }  # fmt: skip
    (recorded,) = upstream.requests
    assert recorded.headers["traceparent"].split("-")[1:3] == [http_trace, request_span.span_id]
    # The caller's baggage stays with pincer: only the trace context travels on.
    assert "baggage" not in {name.lower() for name in recorded.headers} and baggage_value not in str(recorded.headers)

    # The webhook delivery: its span under the request's, the run it started under it.
    posted = _one(hook, "POST /hooks/{name}")
    assert posted.parent_span_id == hook_caller and posted.attributes["http.response.status_code"] == 202
    delivery = _one(hook, "webhook ping")
    assert delivery.parent_span_id == posted.span_id and delivery.attributes["pincer.hook"] == "ping"
    assert _one(hook, "invoke_agent chat").parent_span_id == delivery.span_id

    everything = receiver.snapshot()
    for value in (secret, hook_token, server.token, baggage_value):
        leaking = [s.name for s in everything if value in s.raw]
        assert not leaking, f"{value!r} appears in spans {leaking}"
    # The URL's path and query are the call's arguments: only record_content's attributes hold them.
    for value in (query_value, "/private/path"):
        leaking = [s.name for s in everything if value in s.raw and not s.name.startswith("execute_tool")]
        assert not leaking, f"{value!r} appears in spans {leaking}"
