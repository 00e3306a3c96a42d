"""``tools/call`` to mcp-server-time over stdio: pincer against the SDK client and FastMCP proxies.

All in one run, one server process per path, measured in interleaved rounds so machine noise
falls on every path alike:

* direct      the official SDK ``mcp.Client`` talking to the server (the baseline);
* runtime     ``McpRuntime.invoke`` alone: pincer's MCP path without the call chain;
* runtime-lean the same with the lean path (``[tools] mcp_lean_calls``: ``tools/call`` speaks
              JSON-RPC itself instead of through the SDK's client session, runtimes/mcp/lean.py);
* pincer-lean ``Pincer.call`` as below, on the lean path;
* pincer      ``Pincer.call`` in-process: the whole call chain (policy, validation, leak scan,
              audit record in SQLite) and the MCP runtime's long-lived connection;
* gateway     an SDK client -> ``pincer serve`` (its own process, streamable HTTP, bearer token,
              2026-07-28) -> the whole call chain -> the server over stdio;
* gw-legacy   the same in the handshake era (2025-11-25: a session, results as SSE streams);
* fastmcp     an SDK client -> a FastMCP proxy in-process (memory transport) -> the server;
* fastmcp-http an SDK client -> a FastMCP proxy in its own process over streamable HTTP (uvicorn,
              as ``fastmcp run --transport http`` serves it) -> the server: the like-for-like
              baseline for the gateway, which also pays HTTP and a second process. It runs on
              the event loop ``pincer serve`` runs on (uvloop when installed); the in-process
              paths share this script's one loop.

Targets (issue 11): pincer <= 1.15x direct; the gateway, in either era, no slower than the FastMCP
proxy over HTTP and within 1.2x of FastMCP's in-process proxy. ``CPU us`` is this process's CPU per
call: the whole path for the in-process ones, only the SDK client for those over HTTP; the load
average is printed with it. Run: ``make bench`` or
``.venv/bin/python bench/mcp_proxy.py [--calls N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import percentile

TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
PINCER = str(Path(sys.executable).with_name("pincer"))
SERVER_START_TIMEOUT_S = 60.0  # a server subprocess starts mcp-server-time before it announces itself
SERVER_STOP_TIMEOUT_S = 10.0
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


async def pincer_path(stack: AsyncExitStack, home: Path, *, lean: bool = False) -> Call:
    from pincer.config import parse_config
    from pincer.core.values import CallRequest
    from pincer.runtimes.mcp import ServerConfig, ServerStore
    from pincer.service import Pincer

    ServerStore(home).add(ServerConfig(name="time", transport="stdio", command=TIME_SERVER, startup="eager"))
    tools = "[tools]\nmcp_lean_calls = true\n\n" if lean else ""
    config = parse_config(f'{tools}[[grants]]\ntool = "time_*"\ndefault = "allow"\n', home=home)
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


async def runtime_path(stack: AsyncExitStack, home: Path, *, lean: bool = False) -> Call:
    from pincer.core.values import HostContext
    from pincer.runtimes.mcp import McpRuntime, PinStore, ServerConfig

    runtime = McpRuntime(
        [ServerConfig(name="time", transport="stdio", command=TIME_SERVER)], pins=PinStore(home), lean_calls=lean
    )
    await runtime.start()
    stack.push_async_callback(runtime.aclose)
    spec = next(s for s in runtime.tools() if s.name == "time_get_current_time")
    host = HostContext(session="bench", tool=spec.name, timeout_s=30.0)

    async def call() -> object:
        return await runtime.invoke(spec, ARGS, host)

    return call


async def fastmcp_path(stack: AsyncExitStack) -> Call:
    from fastmcp import Client as FastClient
    from fastmcp.server import create_proxy

    proxy = create_proxy({"mcpServers": {"time": {"command": TIME_SERVER, "args": []}}}, name="proxy")
    client = await stack.enter_async_context(FastClient(proxy))

    async def call() -> object:
        return await client.call_tool("get_current_time", ARGS)

    return call


async def gateway_path(stack: AsyncExitStack, label: str, home: Path, *, mode: str) -> Call:
    """``pincer serve`` set up as a user does (the server added, a grant in config.toml), run as a
    subprocess; an SDK client calls it with the bearer token from the token file."""
    from pincer.runtimes.mcp import ServerConfig, ServerStore

    home.mkdir(parents=True, exist_ok=True)
    ServerStore(home).add(ServerConfig(name="time", transport="stdio", command=TIME_SERVER, startup="eager"))
    (home / "config.toml").write_text('[[grants]]\ntool = "time_*"\ndefault = "allow"\n', encoding="utf-8")
    env = {**os.environ, "PINCER_HOME": str(home)}
    info = await start_server(stack, [PINCER, "serve", "--port", "0", "--json"], env=env, log=home / "serve.log")
    token = (home / "gateway.token").read_text(encoding="utf-8").strip()
    return await http_client_path(stack, label, info["mcp_url"], "time_get_current_time", mode=mode, token=token)


async def fastmcp_http_path(stack: AsyncExitStack, label: str, scratch: Path) -> Call:
    """A FastMCP proxy for the server in its own process, over streamable HTTP."""
    scratch.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, __file__, "--serve-fastmcp-proxy"]
    info = await start_server(stack, command, env=dict(os.environ), log=scratch / "fastmcp.log")
    return await http_client_path(stack, label, info["mcp_url"], "get_current_time", mode="auto", token=None)


async def http_client_path(
    stack: AsyncExitStack, label: str, url: str, tool: str, *, mode: str, token: str | None
) -> Call:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, trust_env=False))
    client = await stack.enter_async_context(Client(streamable_http_client(url, http_client=http), mode=mode))
    ERAS[label] = client.protocol_version

    async def call() -> object:
        result = await client.call_tool(tool, ARGS)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")
        return result

    return call


ERAS: dict[str, str] = {}  # the protocol version each HTTP path negotiated


async def start_server(stack: AsyncExitStack, command: list[str], *, env: dict[str, str], log: Path) -> dict[str, Any]:
    """Start a server subprocess and read the one JSON document it writes to stdout once it
    listens (``mcp_url`` in it); SIGINT, then SIGKILL after a grace period, when the stack closes."""
    log_file = stack.enter_context(log.open("w+b"))
    process = await anyio.open_process(command, stdin=subprocess.DEVNULL, stderr=log_file, env=env)

    async def stop() -> None:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
                with anyio.move_on_after(SERVER_STOP_TIMEOUT_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await process.aclose()

    stack.push_async_callback(stop)
    if process.stdout is None:
        raise RuntimeError(f"{command[0]}: no stdout pipe")
    announced = b""
    with anyio.move_on_after(SERVER_START_TIMEOUT_S):
        async for chunk in process.stdout:
            announced += chunk
            try:
                return json.loads(announced)
            except json.JSONDecodeError:
                continue  # --json output is indented: more lines to come
    log_file.seek(0)
    raise RuntimeError(f"{' '.join(command)} did not announce itself: {log_file.read().decode(errors='replace')}")


def serve_fastmcp_proxy() -> None:
    """The FastMCP proxy's subprocess: its streamable HTTP app under uvicorn on 127.0.0.1:0."""
    import uvicorn
    from fastmcp.server import create_proxy

    proxy = create_proxy({"mcpServers": {"time": {"command": TIME_SERVER, "args": []}}}, name="proxy")
    # A TCP socket, Nagle off, as pincer serve binds its own: neither side waits on delayed ACKs.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(proxy.http_app(), log_level="warning", access_log=False, lifespan="on"))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            while not server.started:
                await anyio.sleep(0.01)
            print(json.dumps({"mcp_url": f"http://127.0.0.1:{port}/mcp"}), flush=True)

    from pincer.cli.serve import event_loop_options

    try:
        anyio.run(main, backend_options=event_loop_options())
    except KeyboardInterrupt:
        pass


CPU_US: dict[str, list[float]] = {}  # this process's CPU per call, per round


async def measure(paths: dict[str, Call], calls: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for call in paths.values():
        for _ in range(WARMUP_CALLS):
            await call()
    rounds = max(1, calls // ROUND_CALLS)
    for _ in range(rounds):
        for name, call in paths.items():
            cpu = time.process_time()
            for _ in range(ROUND_CALLS):
                started = time.perf_counter()
                await call()
                samples[name].append((time.perf_counter() - started) * 1000)
            CPU_US.setdefault(name, []).append((time.process_time() - cpu) * 1e6 / ROUND_CALLS)
    return samples


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            paths: dict[str, Call] = {"direct": await direct_path(stack)}
            paths["runtime"] = await runtime_path(stack, Path(tmp) / "rt")
            paths["runtime-lean"] = await runtime_path(stack, Path(tmp) / "rt-lean", lean=True)
            paths["pincer"] = await pincer_path(stack, Path(tmp) / "home")
            paths["pincer-lean"] = await pincer_path(stack, Path(tmp) / "home-lean", lean=True)
            paths["gateway"] = await gateway_path(stack, "gateway", Path(tmp) / "gw", mode="auto")
            paths["gw-legacy"] = await gateway_path(stack, "gw-legacy", Path(tmp) / "gw-legacy", mode="legacy")
            paths["fastmcp"] = await fastmcp_path(stack)
            paths["fastmcp-http"] = await fastmcp_http_path(stack, "fastmcp-http", Path(tmp) / "fastmcp")
            samples = await measure(paths, calls)
    base = statistics.median(samples["direct"])
    print(f"tools/call get_current_time -> mcp-server-time (stdio), {len(samples['direct'])} calls per path; "
          f"load average at the end {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'path':<13} {'p50 ms':>8} {'p90 ms':>8} {'vs direct':>10} {'CPU us':>8}  MCP over HTTP")
    for name, values in samples.items():
        p50 = statistics.median(values)
        era = ERAS.get(name, "-")
        cpu = statistics.median(CPU_US[name])
        print(f"{name:<13} {p50:8.3f} {percentile(values, 90):8.3f} {p50 / base:9.2f}x {cpu:8.0f}  {era}")
    cpu_of = {name: statistics.median(values) for name, values in CPU_US.items()}
    for plain, lean in (("runtime", "runtime-lean"), ("pincer", "pincer-lean")):
        print(f"{lean} CPU per call: {cpu_of[lean]:.0f} us vs {plain} {cpu_of[plain]:.0f} us "
              f"({cpu_of[lean] / cpu_of[plain]:.2f}x; direct SDK client {cpu_of['direct']:.0f} us)")  # fmt: skip
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    print(f"target pincer <= 1.15x direct: {'met' if p50['pincer'] <= 1.15 * base else 'NOT met'} "
          f"({p50['pincer'] / base:.2f}x)")
    for gateway in ("gateway", "gw-legacy"):
        for proxy, bound in (("fastmcp-http", 1.0), ("fastmcp", 1.2)):
            verdict = "met" if p50[gateway] <= bound * p50[proxy] else "NOT met"
            print(f"target {gateway} <= {bound:g}x {proxy} proxy: {verdict} ({p50[gateway] / p50[proxy]:.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls per path")
    parser.add_argument("--serve-fastmcp-proxy", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_fastmcp_proxy:
        serve_fastmcp_proxy()
    else:
        anyio.run(main, options.calls)
