"""A native no-op tool through pincer's whole call chain (session policy, grants, validation, leak
scan, audit committed to SQLite) against calling the function directly, against FastMCP's in-process client and against the
MCP SDK's own in-process client (MCPServer) calling the same function, all in one run.

Run by hand: ``make bench`` or ``.venv/bin/python bench/dispatch.py [--calls N]``. Figures are
printed next to the baselines measured in the same run; nothing here gates CI.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import concurrent, report, sequential
from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.runtimes.native import NativeRuntime, tool
from pincer.service import Pincer

CONCURRENT_CALLERS = 64


async def noop_fn(text: str = "") -> str:
    return text


@tool(name="noop")
async def noop(text: str = "") -> str:
    """Return the text unchanged."""
    return text


async def run(calls: int, mcp_calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pincer-bench-") as tmp:
        config = parse_config("", home=Path(tmp))
        async with Pincer.open(Path(tmp), config=config, secret_key=b"b" * 32, builtins=False) as pincer:
            for i in range(10):  # a realistic store: the scanner has values to look for
                pincer.secrets.set(f"token_{i}", f"secret-value-{i:04d}-abcdefghijklmnop")
            await pincer.add_runtime(NativeRuntime([noop], name="bench"))
            request = CallRequest(tool="noop", args={"text": "hello"})

            async def through_pincer() -> None:
                result = await pincer.call(request)
                if not result.ok:
                    raise SystemExit(f"bench call failed: {result.error}")

            async def direct() -> None:
                await noop_fn("hello")

            from fastmcp import Client as FastMCPClient
            from fastmcp import FastMCP
            from mcp import Client
            from mcp.server import MCPServer

            server = MCPServer("bench")
            server.tool(name="noop")(noop_fn)
            fast = FastMCP("bench")
            fast.tool(name="noop")(noop_fn)
            async with Client(server) as client, FastMCPClient(fast) as fast_client:

                async def via_mcp() -> None:
                    await client.call_tool("noop", {"text": "hello"})

                async def via_fastmcp() -> None:
                    await fast_client.call_tool("noop", {"text": "hello"})

                await sequential(through_pincer, 500)  # warm caches, validators, the WAL file
                await sequential(via_mcp, 50)
                await sequential(via_fastmcp, 50)
                seq = {
                    "direct function call": await sequential(direct, calls),
                    "pincer whole chain": await sequential(through_pincer, calls),
                    "FastMCP in-process client": await sequential(via_fastmcp, mcp_calls),
                    "MCPServer in-process client": await sequential(via_mcp, mcp_calls),
                }
                conc = {
                    "direct function call": await concurrent(direct, calls, CONCURRENT_CALLERS),
                    "pincer whole chain": await concurrent(through_pincer, calls, CONCURRENT_CALLERS),
                    "FastMCP in-process client": await concurrent(via_fastmcp, mcp_calls, CONCURRENT_CALLERS),
                    "MCPServer in-process client": await concurrent(via_mcp, mcp_calls, CONCURRENT_CALLERS),
                }
            records = pincer.audit.verify()
    report("sequential (1 caller)", seq, baseline="FastMCP in-process client")
    report(f"concurrent ({CONCURRENT_CALLERS} callers)", conc, baseline="FastMCP in-process client")
    whole, fast = seq["pincer whole chain"], seq["FastMCP in-process client"]
    print(
        f"\nwhole chain sequential p50 {whole['p50_us']:.1f} us; {whole['calls_s'] / fast['calls_s']:.1f}x the "
        f"FastMCP in-process client; concurrent {conc['pincer whole chain']['calls_s']:.0f} calls/s; "
        f"{records} audit records committed and verified"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--mcp-calls", type=int, default=2_000)
    args = parser.parse_args()
    anyio.run(run, args.calls, args.mcp_calls)


if __name__ == "__main__":
    main()
