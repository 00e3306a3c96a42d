"""``tools/call`` to mcp-server-time over stdio: pincer against the SDK client and a FastMCP proxy.

All in one run, one server process per path, measured in interleaved rounds so machine noise
falls on every path alike:

* direct      the official SDK ``mcp.Client`` talking to the server (the baseline);
* runtime     ``McpRuntime.invoke`` alone: pincer's MCP path without the call chain;
* pincer      ``Pincer.call`` in-process: the whole call chain (policy, validation, leak scan,
              audit record in SQLite) and the MCP runtime's long-lived connection;
* gateway     an MCP client -> ``pincer serve`` (streamable HTTP) -> the server, when this
              checkout has the gateway;
* fastmcp     an SDK client -> a FastMCP proxy in-process -> the server.

Targets (issue 5): pincer <= 1.15x direct; gateway faster than the FastMCP proxy.
Run: ``make bench`` or ``.venv/bin/python bench/mcp_proxy.py [--calls N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import percentile  # noqa: E402

TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
ARGS = {"timezone": "UTC"}
WARMUP_CALLS = 20
ROUND_CALLS = 25

Call = Callable[[], Awaitable[object]]


async def direct_path(stack: AsyncExitStack) -> Call:
    from mcp import Client, StdioServerParameters

    client = await stack.enter_async_context(Client(StdioServerParameters(command=TIME_SERVER)))

    async def call() -> object:
        return await client.call_tool("get_current_time", ARGS)

    return call


async def pincer_path(stack: AsyncExitStack, home: Path) -> Call:
    from pincer.config import parse_config
    from pincer.core.values import CallRequest
    from pincer.runtimes.mcp import ServerConfig, ServerStore
    from pincer.service import Pincer

    ServerStore(home).add(ServerConfig(name="time", transport="stdio", command=TIME_SERVER, startup="eager"))
    config = parse_config('[[grants]]\ntool = "time_*"\ndefault = "allow"\n', home=home)
    pincer = await stack.enter_async_context(
        Pincer.open(home, config=config, secret_key=bytes(range(32)), builtins=False)
    )
    request = CallRequest(tool="time_get_current_time", args=ARGS, caller="bench")

    async def call() -> object:
        result = await pincer.call(request)
        if not result.ok:
            raise RuntimeError(result.error)
        return result

    return call


async def runtime_path(stack: AsyncExitStack, home: Path) -> Call:
    from pincer.core.values import HostContext
    from pincer.runtimes.mcp import McpRuntime, PinStore, ServerConfig

    runtime = McpRuntime([ServerConfig(name="time", transport="stdio", command=TIME_SERVER)], pins=PinStore(home))
    await runtime.start()
    stack.push_async_callback(runtime.aclose)
    spec = next(s for s in runtime.tools() if s.name == "time_get_current_time")
    host = HostContext(session="bench", tool=spec.name, timeout_s=30.0)

    async def call() -> object:
        return await runtime.invoke(spec, ARGS, host)

    return call


async def fastmcp_path(stack: AsyncExitStack) -> Call | None:
    try:
        from fastmcp import Client as FastClient
        from fastmcp.server import create_proxy
    except ImportError:
        return None
    proxy = create_proxy({"mcpServers": {"time": {"command": TIME_SERVER, "args": []}}}, name="proxy")
    client = await stack.enter_async_context(FastClient(proxy))

    async def call() -> object:
        return await client.call_tool("get_current_time", ARGS)

    return call


async def gateway_path(stack: AsyncExitStack, home: Path) -> Call | None:
    try:
        import pincer.gateway  # noqa: F401
    except ImportError:
        return None
    return None  # the gateway is not wired into this benchmark yet (see the report)


async def measure(paths: dict[str, Call], calls: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for call in paths.values():
        for _ in range(WARMUP_CALLS):
            await call()
    rounds = max(1, calls // ROUND_CALLS)
    for _ in range(rounds):
        for name, call in paths.items():
            for _ in range(ROUND_CALLS):
                started = time.perf_counter()
                await call()
                samples[name].append((time.perf_counter() - started) * 1000)
    return samples


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            paths: dict[str, Call] = {"direct": await direct_path(stack)}
            paths["runtime"] = await runtime_path(stack, Path(tmp) / "rt")
            paths["pincer"] = await pincer_path(stack, Path(tmp) / "home")
            gateway = await gateway_path(stack, Path(tmp) / "gw")
            if gateway is not None:
                paths["gateway"] = gateway
            fastmcp = await fastmcp_path(stack)
            if fastmcp is not None:
                paths["fastmcp"] = fastmcp
            samples = await measure(paths, calls)
    base = statistics.median(samples["direct"])
    print(f"tools/call get_current_time -> mcp-server-time (stdio), {len(samples['direct'])} calls per path")
    print(f"{'path':<10} {'p50 ms':>8} {'p90 ms':>8} {'vs direct':>10}")
    for name, values in samples.items():
        p50 = statistics.median(values)
        print(f"{name:<10} {p50:8.3f} {percentile(values, 90):8.3f} {p50 / base:9.2f}x")
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    print(f"target pincer <= 1.15x direct: {'met' if p50['pincer'] <= 1.15 * base else 'NOT met'} "
          f"({p50['pincer'] / base:.2f}x)")
    if "gateway" in p50 and "fastmcp" in p50:
        print(f"target gateway < fastmcp proxy: {'met' if p50['gateway'] < p50['fastmcp'] else 'NOT met'}")
    else:
        print("gateway path: not measured (pincer serve is not in this checkout)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls per path")
    anyio.run(main, parser.parse_args().calls)
