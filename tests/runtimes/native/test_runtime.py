"""NativeRuntime: sync/async/inline execution, HostContext injection, errors, hot add/remove."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import anyio
import pydantic
import pytest

from pincer.core.errors import ArgumentsInvalid, Denied, ToolError, ToolNotFound, UsageError
from pincer.core.values import HostContext, ToolOutput
from pincer.registry import Registry
from pincer.runtimes.base import Runtime
from pincer.runtimes.native import NativeRuntime, tool

pytestmark = pytest.mark.anyio

HOST = HostContext(session="main", tool="t")


@tool
def thread_of_sync(x: int) -> dict[str, Any]:
    """Runs in a worker thread."""
    return {"x": x, "thread": threading.get_ident()}


@tool(inline=True)
def thread_of_inline() -> int:
    """Runs on the event loop thread."""
    return threading.get_ident()


@tool
async def thread_of_async(host: HostContext) -> dict[str, Any]:
    """Awaited on the event loop, with the host context."""
    await anyio.sleep(0)
    return {"thread": threading.get_ident(), "session": host.session}


@tool
def sync_with_host(ctx: HostContext, name: str) -> str:
    """A sync tool receiving the host context."""
    return f"{ctx.tool}:{name}"


@tool
def raises_value_error(x: int) -> None:
    """Fails."""
    raise ValueError(f"bad x {x}")


@tool
async def raises_pincer_error() -> None:
    """Fails our way."""
    raise Denied("nope", hint="ask")


@tool
def returns_model() -> Any:
    """A pydantic model and a set come back as JSON."""

    class Out(pydantic.BaseModel):
        a: int

    return {"model": Out(a=1), "items": (1, 2)}


@tool
def returns_object() -> Any:
    """Not JSON."""
    return object()


@tool
async def returns_output() -> ToolOutput:
    """Content blocks pass through."""
    return ToolOutput(value={"v": 1}, content=({"type": "text", "text": "hi"},))


def _runtime() -> NativeRuntime:
    return NativeRuntime(
        [
            thread_of_sync, thread_of_inline, thread_of_async, sync_with_host, raises_value_error,
            raises_pincer_error, returns_model, returns_object, returns_output,
        ]
    )  # fmt: skip


async def _call(runtime: NativeRuntime, name: str, args: dict[str, Any] | None = None) -> Any:
    spec = next(s for s in runtime.tools() if s.name == name)
    return (await runtime.invoke(spec, args or {}, dataclasses.replace(HOST, tool=name))).value


async def test_is_a_runtime_with_its_name_as_source() -> None:
    runtime = _runtime()
    assert isinstance(runtime, Runtime)
    await runtime.start()
    assert {s.source for s in runtime.tools()} == {"native"}
    assert NativeRuntime([thread_of_sync], name="builtin").tools()[0].source == "builtin"
    await runtime.aclose()


async def test_sync_runs_in_a_thread_inline_and_async_on_the_loop() -> None:
    runtime = _runtime()
    loop_thread = threading.get_ident()
    sync = await _call(runtime, "thread_of_sync", {"x": "7"})
    assert sync["x"] == 7 and sync["thread"] != loop_thread
    assert await _call(runtime, "thread_of_inline") == loop_thread
    result = await _call(runtime, "thread_of_async")
    assert result == {"thread": loop_thread, "session": "main"}
    assert await _call(runtime, "sync_with_host", {"name": "n"}) == "sync_with_host:n"


async def test_errors() -> None:
    runtime = _runtime()
    with pytest.raises(ToolError, match="ValueError: bad x 3") as info:
        await _call(runtime, "raises_value_error", {"x": 3})
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(Denied, match="nope"):
        await _call(runtime, "raises_pincer_error")
    with pytest.raises(ArgumentsInvalid, match="x: Input should be a valid integer"):
        await _call(runtime, "raises_value_error", {"x": "three"})
    with pytest.raises(ToolError, match="not JSON-serialisable"):
        await _call(runtime, "returns_object")


async def test_return_values() -> None:
    runtime = _runtime()
    assert await _call(runtime, "returns_model") == {"model": {"a": 1}, "items": [1, 2]}
    spec = next(s for s in runtime.tools() if s.name == "returns_output")
    output = await runtime.invoke(spec, {}, HOST)
    assert output.value == {"v": 1} and output.content == ({"type": "text", "text": "hi"},)


async def test_add_remove_notify_and_feed_the_registry() -> None:
    runtime = NativeRuntime([thread_of_sync])
    changes: list[str] = []
    unsubscribe = runtime.subscribe(lambda: changes.append("changed"))
    registry = Registry()
    registry.add_runtime(runtime)
    runtime.subscribe(lambda: registry.refresh(runtime))

    runtime.add(thread_of_inline)
    assert "thread_of_inline" in registry and changes == ["changed"]
    with pytest.raises(UsageError, match="already has a tool"):
        runtime.add(thread_of_inline)
    runtime.add(thread_of_inline, replace=True)

    removed = runtime.remove("thread_of_sync")
    assert removed is thread_of_sync and "thread_of_sync" not in registry
    with pytest.raises(ToolNotFound):
        runtime.remove("thread_of_sync")
    with pytest.raises(ToolNotFound, match="removed"):
        await runtime.invoke(thread_of_sync.spec, {"x": 1}, HOST)

    unsubscribe()
    runtime.add(thread_of_sync)
    assert changes == ["changed", "changed", "changed"]  # add, replace, remove; not after unsubscribe
    assert [s.name for s in runtime.tools()] == ["thread_of_inline", "thread_of_sync"]


async def test_a_broken_listener_does_not_stop_the_others() -> None:
    heard: list[int] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    runtime = NativeRuntime(on_change=broken)
    runtime.subscribe(lambda: heard.append(1))
    runtime.add(thread_of_sync)
    assert heard == [1]


async def test_only_native_tools_are_accepted() -> None:
    with pytest.raises(UsageError, match="decorate the function"):
        NativeRuntime([lambda: None])  # type: ignore[list-item]


async def test_a_spec_renamed_by_the_caller_is_not_found() -> None:
    """A renamed copy has its own (derived) hashes: the runtime runs only the tools it offers."""
    runtime = _runtime()
    spec = next(s for s in runtime.tools() if s.name == "thread_of_inline")
    renamed = dataclasses.replace(spec, name="ns.thread_of_inline")
    assert renamed.definition_hash != spec.definition_hash
    with pytest.raises(ToolNotFound):
        await runtime.invoke(renamed, {}, HOST)
