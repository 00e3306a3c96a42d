"""MCP ``tools/call`` over streamable HTTP: ``pincer serve`` vs an SDK ``MCPServer`` (FastMCP).

Both servers expose the same no-op function and run in their own process under the same
uvicorn on the same event loop (uvloop when installed, as ``pincer serve`` uses); the client runs
here. Both run the tool the same way: inline on the event loop by default (pincer's
``tool(inline=True)``, an ``async def`` for MCPServer, which sends a plain ``def`` to a worker
thread), or both on a worker thread with ``--tool thread``. pincer's call goes through the whole
governed chain (policy, validation, audit record committed to SQLite); MCPServer's straight to the
function.

The client speaks HTTP/1.1 on raw keep-alive sockets, one connection per simulated client, so
that the client's own cost stays small against the servers'. Each era is measured:
2026-07-28 (one self-contained POST per call) and 2025-11-25 (an initialized session), and in
the handshake era ``tools/list`` too. pincer's direct path answers with JSON; the SDK answers
with an SSE stream by default, so MCPServer is measured twice: as it comes (SSE) and with
``json_response=True`` (the same response mode as pincer). For 1 and 32 concurrent clients it
prints p50, p95 and calls/s, next to both baselines measured in the same run, as ratios.

    .venv/bin/python bench/gateway.py [--seconds 3] [--rounds 3] [--tool inline|thread]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

READY_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0
WARMUP_CALLS = 200
CONCURRENCY = (1, 32)
MODERN, LEGACY = "2026-07-28", "2025-11-25"
# pincer, and the SDK's MCPServer answering as it comes (SSE) and with json_response=True
MODES = ("mcpserver", "mcpserver-json", "pincer")
TOOL_KINDS = ("inline", "thread")


# -- the servers (run as subprocesses of this script) --------------------------------------------


def noop(value: str = "") -> str:
    """Return the value unchanged.

    Args:
        value: anything
    """
    return value


async def noop_async(value: str = "") -> str:
    """Return the value unchanged.

    Args:
        value: anything
    """
    return value


def _listen() -> socket.socket:
    # As uvicorn binds its own: a TCP socket, so asyncio turns Nagle off on its connections.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def event_loop_options() -> dict[str, Any]:
    """What ``pincer serve`` runs on: uvloop when it is installed."""
    from pincer.cli.serve import event_loop_options as options

    return options()


def serve_pincer(*, inline: bool) -> None:
    import anyio

    from pincer.config import parse_config
    from pincer.gateway.serve import serve
    from pincer.runtimes.native.decorator import tool
    from pincer.runtimes.native.runtime import NativeRuntime
    from pincer.service import Pincer

    home = Path(tempfile.mkdtemp(prefix="pincer-bench-"))

    async def main() -> None:
        config = parse_config("", home=home)
        async with Pincer.open(home, config=config, secret_key=b"b" * 32, builtins=False) as pincer:
            await pincer.add_runtime(NativeRuntime([tool(inline=inline)(noop)], name="bench"))

            def ready(info: Any) -> None:
                token = (home / "gateway.token").read_text().strip()
                print(json.dumps({"url": info.mcp_url, "token": token}), flush=True)

            await serve(pincer, settings=config.gateway, host="127.0.0.1", port=0, on_ready=ready)

    anyio.run(main, backend_options=event_loop_options())


def serve_mcpserver(*, json_response: bool, inline: bool) -> None:
    import logging

    import anyio
    import uvicorn
    from mcp.server import MCPServer

    server = MCPServer("baseline")
    # MCPServer runs a plain ``def`` on a worker thread and an ``async def`` on the event loop.
    server.tool(name="noop")(noop_async if inline else noop)
    # MCPServer logs each new session at INFO; a session is opened once per simulated client.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    app = server.streamable_http_app(json_response=json_response)
    sock = _listen()
    port = sock.getsockname()[1]
    config = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: config.serve(sockets=[sock]))
            while not config.started:
                await anyio.sleep(0.01)
            print(json.dumps({"url": f"http://127.0.0.1:{port}/mcp", "token": None}), flush=True)

    # The same event loop as pincer's server (uvicorn's own loop setting is bypassed by serve()).
    anyio.run(main, backend_options=event_loop_options())


# -- a minimal HTTP/1.1 client -----------------------------------------------------------------


class Connection:
    def __init__(self, host: str, port: int, path: str, token: str | None) -> None:
        self.host, self.port, self.path, self.token = host, port, path, token
        self.session_id: str | None = None
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def post(self, message: dict[str, Any], headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
        body = json.dumps(message, separators=(",", ":")).encode()
        lines = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(body)}",
        ]
        if self.token:
            lines.append(f"Authorization: Bearer {self.token}")
        if self.session_id:
            lines.append(f"Mcp-Session-Id: {self.session_id}")
        lines += [f"{k}: {v}" for k, v in headers.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        status = await self.reader.readline()
        if not status.startswith(b"HTTP/1.1 2"):
            raise RuntimeError(f"HTTP {status!r}")
        response_headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            response_headers[name.strip().lower()] = value.strip()
        if "content-length" in response_headers:
            return response_headers, await self.reader.readexactly(int(response_headers["content-length"]))
        data = bytearray()
        while True:  # chunked (an SSE stream): read until the terminating chunk
            size = int((await self.reader.readline()).strip(), 16)
            if size == 0:
                await self.reader.readline()
                return response_headers, bytes(data)
            data.extend(await self.reader.readexactly(size))
            await self.reader.readline()

    async def close(self) -> None:
        self.writer.close()


def _result(body: bytes) -> dict[str, Any]:
    text = body.decode()
    for line in reversed(text.splitlines()):
        if line.startswith("data:") and len(line) > 6:
            text = line[5:]
            break
    message = json.loads(text)
    if "result" not in message or message["result"].get("isError"):
        raise RuntimeError(f"call failed: {message}")
    return message["result"]


class Caller:
    """One simulated client: its own connection, in one protocol era."""

    def __init__(self, url: str, token: str | None, era: str) -> None:
        rest = url.removeprefix("http://")
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.partition(":")
        self.conn = Connection(host, int(port), "/" + path, token)
        self.era = era
        self.ids = iter(range(1, 10**9))

    async def start(self) -> None:
        await self.conn.open()
        if self.era == LEGACY:
            init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
            headers, _ = await self.conn.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, {})
            self.conn.session_id = headers["mcp-session-id"]
            await self.conn.post(
                {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"MCP-Protocol-Version": LEGACY}
            )

    async def call(self, method: str = "tools/call") -> None:
        if method == "tools/list":
            _, body = await self.conn.post(
                {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/list"}, {"MCP-Protocol-Version": self.era}
            )
            if not _result(body).get("tools"):
                raise RuntimeError("tools/list returned no tools")
            return
        params: dict[str, Any] = {"name": "noop", "arguments": {"value": "x"}}
        headers = {"MCP-Protocol-Version": self.era}
        if self.era == MODERN:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "noop"}
        _, body = await self.conn.post(
            {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call", "params": params}, headers
        )
        _result(body)


@dataclass
class Figures:
    p50_ms: float
    p95_ms: float
    calls_per_s: float


async def measure(url: str, token: str | None, era: str, clients: int, seconds: float, method: str) -> Figures:
    callers = [Caller(url, token, era) for _ in range(clients)]
    for caller in callers:
        await caller.start()
    for _ in range(max(1, WARMUP_CALLS // clients)):
        await asyncio.gather(*(c.call(method) for c in callers))
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop(caller: Caller) -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await asyncio.wait_for(caller.call(method), REQUEST_TIMEOUT_S)
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in callers))
    elapsed = time.perf_counter() - began
    for caller in callers:
        await caller.conn.close()
    cuts = statistics.quantiles(latencies, n=100)
    return Figures(p50_ms=cuts[49] * 1000, p95_ms=cuts[94] * 1000, calls_per_s=len(latencies) / elapsed)


def start(mode: str, tool_kind: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, "--tool", tool_kind],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert process.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("{"):
            return process, json.loads(line)
        if process.poll() is not None:
            break
    process.kill()
    raise SystemExit(f"the {mode} server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per cell and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each cell reports the median")
    parser.add_argument(
        "--tool", choices=TOOL_KINDS, default="inline", help="where both servers run the tool (default inline)"
    )
    parser.add_argument("--serve", choices=list(MODES), help=argparse.SUPPRESS)
    options = parser.parse_args()
    inline = options.tool == "inline"
    if options.serve == "pincer":
        serve_pincer(inline=inline)
        return
    if options.serve in ("mcpserver", "mcpserver-json"):
        serve_mcpserver(json_response=options.serve == "mcpserver-json", inline=inline)
        return

    # Rounds alternate the two servers so that a busy neighbour on the machine hits both; each
    # cell reports the median over the rounds.
    cells = [(era, clients, "tools/call") for era in (MODERN, LEGACY) for clients in CONCURRENCY]
    cells += [(LEGACY, clients, "tools/list") for clients in CONCURRENCY]
    samples: dict[tuple[str, str, int, str], list[Figures]] = {}
    for _ in range(options.rounds):
        for mode in MODES:
            process, info = start(mode, options.tool)
            try:
                for era, clients, method in cells:
                    figures = asyncio.run(measure(info["url"], info["token"], era, clients, options.seconds, method))
                    samples.setdefault((mode, era, clients, method), []).append(figures)
            finally:
                process.terminate()
                process.wait(timeout=READY_TIMEOUT_S)

    def median(mode: str, era: str, clients: int, method: str) -> Figures:
        runs = samples[(mode, era, clients, method)]
        return Figures(
            p50_ms=statistics.median(f.p50_ms for f in runs),
            p95_ms=statistics.median(f.p95_ms for f in runs),
            calls_per_s=statistics.median(f.calls_per_s for f in runs),
        )

    print(
        f"MCP over streamable HTTP: median of {options.rounds} rounds x {options.seconds:g} s per cell, "
        f"{os.cpu_count()} CPUs, every server on {'uvloop' if event_loop_options() else 'asyncio'}, "
        f"the tool {'inline on the event loop' if inline else 'on a worker thread'} in both"
    )
    print(
        f"{'era':<11}{'method':<11}{'clients':>8}  {'pincer p50/p95 ms':>18} {'calls/s':>8}   "
        f"{'baseline':<15}{'p50/p95 ms':>16} {'calls/s':>8}   {'throughput':>10} {'p50':>6}"
    )
    for era, clients, method in cells:
        ours = median("pincer", era, clients, method)
        for mode, label in (("mcpserver", "MCPServer SSE"), ("mcpserver-json", "MCPServer JSON")):
            base = median(mode, era, clients, method)
            head = (
                f"{era:<11}{method:<11}{clients:>8}  {ours.p50_ms:>8.2f}/{ours.p95_ms:<8.2f} {ours.calls_per_s:>9.0f}"
                if mode == "mcpserver"
                else " " * 57
            )
            print(
                f"{head}   {label:<15}{base.p50_ms:>8.2f}/{base.p95_ms:<7.2f} {base.calls_per_s:>9.0f}   "
                f"{ours.calls_per_s / base.calls_per_s:>9.2f}x {ours.p50_ms / base.p50_ms:>5.2f}x"
            )


if __name__ == "__main__":
    main()
