"""What the loop parses from a provider: tool-call arguments, Retry-After, provider messages.
Arbitrary input only ever gives a value or None, never an exception."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm import RunRequest
from pincer.llm.messages import parse_arguments
from pincer.llm.prompt import wrap_output
from pincer.llm.provider import parse_retry_after, shorten
from tests.funcruntime import FuncRuntime
from tests.llm.conftest import llm_config, open_pincer

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(st.text())
def test_arguments_of_any_text_are_an_object_or_none(raw: str) -> None:
    parsed = parse_arguments(raw)
    assert parsed is None or isinstance(parsed, dict)


@given(JSONISH)
def test_arguments_that_are_json_objects_come_back_whole(value: object) -> None:
    parsed = parse_arguments(json.dumps(value))
    assert parsed == value if isinstance(value, dict) else parsed is None


@given(st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms", "other"]), st.text(max_size=30)))
def test_retry_after_of_any_header_is_a_non_negative_number_or_none(headers: dict[str, str]) -> None:
    value = parse_retry_after(headers)
    assert value is None or value >= 0


def test_retry_after_reads_seconds_and_milliseconds() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None


@given(st.text())
def test_a_provider_message_is_repeated_on_one_bounded_line(text: str) -> None:
    line = shorten(text)
    assert "\n" not in line and len(line) <= 303


def test_key_like_strings_in_a_provider_message_are_cut_out() -> None:
    assert "sk-proj-abcdef123456" not in shorten("Incorrect API key provided: sk-proj-abcdef123456. See docs.")


@given(st.text())
def test_no_output_can_close_its_own_wrapper(text: str) -> None:
    wrapped = wrap_output("http", text, trusted=False)
    body = wrapped.split("\n", 1)[1].rsplit("\n", 1)[0]
    assert "</tool_output" not in body.lower() and "<tool_output" not in body.lower()


async def _wait_for(event: anyio.Event) -> None:
    with anyio.fail_after(20):
        await event.wait()


@pytest.mark.anyio
async def test_a_turns_tool_calls_run_concurrently(tmp_path: Path) -> None:
    """Each tool waits for the other to start: only concurrent calls can both finish."""
    started = {"a": anyio.Event(), "b": anyio.Event()}

    async def a(args, host):
        started["a"].set()
        await _wait_for(started["b"])
        return "a"

    async def b(args, host):
        started["b"].set()
        await _wait_for(started["a"])
        return "b"

    script = [Turn(calls=(ScriptedCall(name="a"), ScriptedCall(name="b"))), Turn(text="both")]
    with serve_models(script) as server:
        async with open_pincer(tmp_path / "home", llm_config(server)) as pincer:
            runtime = FuncRuntime()
            runtime.add("a", a)
            runtime.add("b", b)
            await pincer.add_runtime(runtime)
            with anyio.fail_after(60):
                run = await pincer.agent.run(RunRequest(message="go"))
    assert run.status == "done" and [c.ok for c in run.tool_calls] == [True, True]
    # The results go back in the order the model asked for them.
    results = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["content"].split("\n")[1] for m in results] == ["a", "b"]
