"""Executions of real components: results, limits, traps and recovery, logs, concurrency."""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from pincer.core.errors import RuntimeUnavailable, ToolError, ToolNotFound, ToolTimeout
from pincer.core.values import HostContext
from pincer.runtimes.wasm.limits import MIB, WasmLimits

pytestmark = pytest.mark.anyio

CALL_TIMEOUT_S = 30.0


def host_for(name: str, *, timeout_s: float = CALL_TIMEOUT_S, depth: int = 0) -> HostContext:
    return HostContext(session="main", tool=name, timeout_s=timeout_s, depth=depth)


async def call(runtime, name: str, args: dict, **host_kwargs):
    spec = next(s for s in runtime.tools() if s.name == name)
    return await runtime.invoke(spec, args, host_for(name, **host_kwargs))


async def test_echo_returns_its_params_and_is_described_by_its_exports(wasm_runtime):
    runtime = await wasm_runtime({"echo": None})
    (spec,) = runtime.tools()
    assert spec.name == "echo"
    assert spec.description == "Return the given params unchanged."
    assert spec.input_schema["properties"] == {"message": {"type": "string"}}
    assert spec.runtime.value == "wasm" and spec.effects == frozenset()
    out = await call(runtime, "echo", {"message": "hi", "n": [1, 2, {"x": None}]})
    assert out.value == {"message": "hi", "n": [1, 2, {"x": None}]}
    assert not out.is_error
    assert out.usage["fuel"] > 0


async def test_infinite_loop_is_stopped_by_fuel_and_the_next_call_works(wasm_runtime):
    runtime = await wasm_runtime({"spin": None, "echo": None}, WasmLimits(fuel=200_000_000, timeout_s=60))
    with pytest.raises(ToolError) as caught:
        await call(runtime, "spin", {"forever": True})
    assert not isinstance(caught.value, ToolTimeout)
    assert "ran out of fuel" in caught.value.message and "200,000,000" in caught.value.message
    assert (await call(runtime, "spin", {"n": 10})).value == {"total": 45}
    assert (await call(runtime, "echo", {"a": 1})).value == {"a": 1}


async def test_infinite_loop_is_stopped_by_the_deadline_and_the_next_call_works(wasm_runtime):
    # fuel large enough for minutes of looping: only the epoch deadline can stop it
    runtime = await wasm_runtime({"spin": None}, WasmLimits(fuel=10**15, timeout_s=0.3))
    with pytest.raises(ToolTimeout) as caught:
        await call(runtime, "spin", {"forever": True})
    assert "deadline of 0.3 s" in caught.value.message
    roomy = await wasm_runtime({}, WasmLimits(fuel=10**15))  # the next call must not race a short deadline
    assert (await call(roomy, "spin", {"n": 4})).value == {"total": 6}


async def test_the_calls_timeout_lowers_the_deadline(wasm_runtime):
    runtime = await wasm_runtime({"spin": None}, WasmLimits(fuel=10**15, timeout_s=60))
    with pytest.raises(ToolTimeout) as caught:
        await call(runtime, "spin", {"forever": True}, timeout_s=0.2)
    assert "deadline of 0.2 s" in caught.value.message


async def test_memory_bomb_is_refused_naming_the_limit_and_the_next_call_works(wasm_runtime):
    runtime = await wasm_runtime({"membomb": None})
    with pytest.raises(ToolError) as caught:
        await call(runtime, "membomb", {"mb": 1024})
    assert "memory limit of 64 MiB" in caught.value.message
    assert (await call(runtime, "membomb", {"mb": 4})).value == {"allocated_mb": 4}


async def test_a_memory_limit_below_what_the_guest_needs_to_start_is_named(wasm_runtime, pincer_home):
    runtime = await wasm_runtime({"echo": None})
    assert (await call(runtime, "echo", {"ok": True})).value == {"ok": True}
    # a second runtime over the same home cannot even instantiate echo in 4 MiB: not loaded, and why
    tight = await wasm_runtime({}, WasmLimits(memory_bytes=4 * MIB))
    assert tight.tools() == ()
    assert "memory limit of 4 MiB" in tight.load_errors["echo"]
    assert (await call(runtime, "echo", {"ok": True})).value == {"ok": True}


async def test_per_tool_limits_from_the_capabilities_file_apply(wasm_runtime):
    caps = {"limits": {"fuel": 150_000_000, "memory_mb": 32}}
    runtime = await wasm_runtime({"spin": caps})
    with pytest.raises(ToolError) as caught:
        await call(runtime, "spin", {"forever": True})
    assert "150,000,000" in caught.value.message


async def test_logs_are_returned_capped_at_1000_entries_of_4kb(wasm_runtime):
    # 1,005 logs of 5 kB take seconds on a busy machine: the deadline is not what is tested here.
    runtime = await wasm_runtime({"spin": None}, WasmLimits(timeout_s=120))
    out = await call(runtime, "spin", {"logs": 3, "log_bytes": 5, "n": 1})
    assert out.logs == ("info: 0:xxxxx", "info: 1:xxxxx", "info: 2:xxxxx")
    out = await call(runtime, "spin", {"logs": 1005, "log_bytes": 5000, "n": 1}, timeout_s=120)
    assert len(out.logs) == 1001
    assert out.logs[-1] == "warn: 5 more log entries dropped (limit 1000)"
    first = out.logs[0]
    assert first.endswith(" [truncated]")
    assert len(first.removeprefix("info: ").removesuffix(" [truncated]").encode()) == 4096


async def test_executions_run_in_parallel_on_worker_threads(wasm_runtime):
    runtime = await wasm_runtime({"spin": None}, WasmLimits(workers=2))
    results: list[dict] = []

    async def one(n: int) -> None:
        results.append((await call(runtime, "spin", {"n": n})).value)

    async with anyio.create_task_group() as tg:
        for n in (1000, 2000, 3000, 4000):
            tg.start_soon(one, n)
    assert sorted(r["total"] for r in results) == [n * (n - 1) // 2 for n in (1000, 2000, 3000, 4000)]


async def test_a_tool_error_is_an_error_output_not_a_trap(wasm_runtime):
    runtime = await wasm_runtime({"fetch": None})
    out = await call(runtime, "fetch", {"url": "https://example.com/"})
    assert out.is_error
    assert "http-request is not granted" in out.value


async def test_unknown_tool_and_unstarted_runtime_are_clear_errors(wasm_runtime, pincer_home, wasm_compile_cache):
    from pincer.runtimes.wasm.runtime import WasmRuntime

    runtime = await wasm_runtime({"echo": None})
    spec = runtime.tools()[0]
    ghost = dataclasses.replace(spec, name="ghost")
    with pytest.raises(ToolNotFound):
        await runtime.invoke(ghost, {}, host_for("ghost"))
    cold = WasmRuntime(pincer_home, cache_dir=wasm_compile_cache)
    with pytest.raises(RuntimeUnavailable, match="not started"):
        await cold.invoke(spec, {}, host_for("echo"))
