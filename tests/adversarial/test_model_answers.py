"""Issue 20 item 13: a hostile (or broken) model server against the agent loop.

On main a 200 answer that is not a JSON object (an HTML page, ``null``, a list) crashed the
loop with ``AttributeError`` in ``openai_provider._whole`` (the Anthropic provider likewise), so
``pincer run`` died with a traceback and the run's row stayed ``running`` forever; a streamed
chunk that is a list or not JSON did the same or was retried as a dropped connection. And a
2 MB assistant message with a claimed usage of 5 tokens was accepted and stored in the
transcript, whatever ``max_output_tokens`` said.

The local model server (``pincer.demo.model_server``) serves these answers for real over HTTP;
the official SDKs read them. Now the run ends ``failed`` with ``provider_answer_invalid`` or
``model_output_too_large``, its row says so, and nothing of the oversized turn is stored.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm import RunRequest
from pincer.llm.answers import turn_output_limit
from tests.gateway.conftest import PINCER_BIN
from tests.llm.conftest import llm_config, open_pincer

pytestmark = pytest.mark.anyio

RUN_LIMIT_S = 60
CLI_TIMEOUT_S = 120
HTML = b"<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>"
NOT_ANSWERS = [
    pytest.param(HTML, "text/html", id="html"),
    pytest.param(b"null", "application/json", id="null"),
    pytest.param(b"[1, 2, 3]", "application/json", id="list"),
    pytest.param(b'"just a string"', "application/json", id="string"),
    pytest.param(b'{"choices": "nope", "content": "nope"}', "application/json", id="wrong-fields"),
    pytest.param(b'{"choices": [{"message": {"content": 42}}], "content": [{"type": "text", "text": 42}]}', "application/json", id="text-not-a-string"),
]
OPENAI_CHUNKS = [
    pytest.param((b"data: [1, 2]",), id="chunk-is-a-list"),
    pytest.param((b"data: null",), id="chunk-is-null"),
    pytest.param((b"data: {not json",), id="chunk-not-json"),
    pytest.param((b'data: {"choices": [{"index": 0, "delta": {"content": 42}, "finish_reason": null}]}',), id="content-not-text"),
    pytest.param((b'data: {"choices": "x"}', b"data: [DONE]"), id="choices-not-a-list"),
]
ANTHROPIC_EVENTS = [
    pytest.param((b"event: message_start\ndata: [1]",), id="event-is-a-list"),
    pytest.param((b"event: message_start\ndata: null",), id="event-is-null"),
    pytest.param((b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 42}}',), id="text-not-a-string"),
]
EXTRA = """
[llm]
max_output_tokens = 1000
"""


def _config(server, provider: str, stream: bool) -> str:
    return llm_config(server, provider=provider, stream=stream).replace("max_retries = 3", "max_retries = 1\nmax_output_tokens = 1000")


async def _run(tmp_path: Path, script: list[Turn], *, provider: str, stream: bool):
    with serve_models(script) as server:
        async with open_pincer(tmp_path / "home", _config(server, provider, stream)) as pincer:
            with anyio.fail_after(RUN_LIMIT_S):
                run = await pincer.agent.run(RunRequest(message="hello"))
            row = await pincer.runs.get(run.id)
            stored = await pincer.runs.messages(run.id)
    return run, row, stored


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(("body", "content_type"), NOT_ANSWERS)
async def test_a_200_that_is_not_an_answer_fails_the_run(tmp_path: Path, provider: str, body: bytes, content_type: str) -> None:
    run, row, _ = await _run(tmp_path, [Turn(raw_body=body, raw_content_type=content_type)], provider=provider, stream=False)
    assert run.status == "failed" and row.status == "failed"
    assert run.error is not None and run.error["code"] == "provider_answer_invalid", run.error
    assert "[llm] base_url" in run.error["hint"]


@pytest.mark.parametrize("events", OPENAI_CHUNKS)
async def test_a_malformed_openai_stream_chunk_fails_the_run(tmp_path: Path, events: tuple[bytes, ...]) -> None:
    run, row, _ = await _run(tmp_path, [Turn(raw_events=events)] * 2, provider="openai", stream=True)
    assert run.status == "failed" and row.status == "failed"
    assert run.error is not None and run.error["code"] == "provider_answer_invalid", run.error


@pytest.mark.parametrize("events", ANTHROPIC_EVENTS)
async def test_a_malformed_anthropic_stream_event_fails_the_run(tmp_path: Path, events: tuple[bytes, ...]) -> None:
    run, row, _ = await _run(tmp_path, [Turn(raw_events=events)] * 2, provider="anthropic", stream=True)
    assert run.status == "failed" and row.status == "failed"
    assert run.error is not None and run.error["code"] == "provider_answer_invalid", run.error


def test_pincer_run_reports_an_html_answer_and_the_run_is_failed(tmp_path: Path) -> None:
    """On main: a traceback (AttributeError: 'str' object has no attribute 'choices') and a run
    row left ``running``."""
    home = tmp_path / "home"
    folder = home / "workspace" / "skills" / "hello"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: hello\ndescription: Say hello.\n---\nSay hello.\n")
    with serve_models([Turn(raw_body=HTML, raw_content_type="text/html")]) as server:
        (home / "config.toml").write_text(llm_config(server, stream=False))
        env = {**os.environ, "PINCER_HOME": str(home), "HOME": str(tmp_path / "nohome")}
        done = subprocess.run([str(PINCER_BIN), "run", "hello", "--json"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
        listed = subprocess.run([str(PINCER_BIN), "runs", "list", "--json"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "AttributeError" not in done.stdout + done.stderr
    assert "provider_answer_invalid" in done.stdout
    runs = json.loads(listed.stdout)
    assert [r["status"] for r in runs] == ["failed"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_huge_answer_with_a_tiny_claimed_usage_is_refused(tmp_path: Path, provider: str, stream: bool) -> None:
    """2 MB of text claiming 5 output tokens, with max_output_tokens = 1000: on main it was
    accepted and stored in the transcript."""
    text = "A" * 2_000_000
    run, row, stored = await _run(tmp_path, [Turn(text=text, output_tokens=5)], provider=provider, stream=stream)
    assert run.status == "failed" and row.status == "failed"
    assert run.error is not None and run.error["code"] == "model_output_too_large", run.error
    assert "max_output_tokens = 1,000" in run.error["message"] and "[llm] max_output_tokens" in run.error["hint"]
    assert sum(len(json.dumps(m.body)) for m in stored) < 100_000


async def test_huge_tool_call_arguments_are_refused_too(tmp_path: Path) -> None:
    call = ScriptedCall(name="echo", arguments={"text": "B" * 500_000})
    run, _, stored = await _run(tmp_path, [Turn(calls=(call,), output_tokens=5)], provider="openai", stream=True)
    assert run.error is not None and run.error["code"] == "model_output_too_large", run.error
    assert sum(len(json.dumps(m.body)) for m in stored) < 100_000


async def test_an_answer_within_the_bound_is_kept_whole(tmp_path: Path) -> None:
    """The bound is 16 bytes a token: 1,000 tokens of ordinary text (~4 KB) pass untouched."""
    text = "word " * 2_000  # 10 KB, under 16 KB
    assert len(text) < turn_output_limit(1000)
    run, _, _ = await _run(tmp_path, [Turn(text=text)], provider="openai", stream=True)
    assert run.status == "done" and run.text == text


def _loose(value: object) -> object:
    """JSON as the SDKs build an unvalidated answer: objects read by attribute, any field any type."""
    from types import SimpleNamespace

    if isinstance(value, dict):
        return SimpleNamespace(**{str(k): _loose(v) for k, v in value.items() if str(k).isidentifier()})
    if isinstance(value, list):
        return [_loose(v) for v in value]
    return value


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["choices", "message", "content", "tool_calls", "function", "name", "arguments", "id", "usage",
                         "finish_reason", "delta", "index", "type", "text", "input", "stop_reason", "prompt_tokens"]),
        inner, max_size=6),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_JSON)
@example({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": float("inf")}})
def test_any_answer_shape_only_raises_provider_errors(data: object) -> None:
    """Whatever the fields hold, reading a whole answer or a stream chunk gives events or raises
    a ProviderError or one of SHAPE_ERRORS (which both providers turn into
    ProviderAnswerInvalid): nothing else escapes (an infinite token count raised OverflowError)."""
    from pincer.core.errors import ProviderError
    from pincer.llm import anthropic_provider, openai_provider
    from pincer.llm.answers import SHAPE_ERRORS

    loose = _loose(data)
    for read in (
        openai_provider._whole_events,
        anthropic_provider._whole_events,
        lambda chunk: openai_provider._read_chunk(chunk, {}, None),
    ):
        try:
            read(loose)
        except ProviderError:
            pass
        except SHAPE_ERRORS:
            pass  # the providers turn these into ProviderAnswerInvalid (they wrap the readers)
