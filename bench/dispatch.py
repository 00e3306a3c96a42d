"""A native no-op tool through pincer's whole call chain (session policy, grants, validation, leak
scan, audit committed to SQLite) against calling the function directly, against FastMCP's
``call_tool`` and against FastMCP's and the MCP SDK's (MCPServer) in-process clients calling the
same function, all in one run.

``Pincer.call`` is a plain call while a client speaks JSON-RPC over a memory transport, so the
baseline every ratio is taken against is ``FastMCP.call_tool`` without a client (its middleware,
argument validation and result conversion, no JSON-RPC): like for like. The in-process clients'
figures follow it, for what a caller of an MCP server in the same process pays.

It also measures the floor under the chain: a bare SQLite insert-and-commit of a row like an audit
record (the same schema and pragmas, the file made as pincer makes it), one after another, on the
event loop's thread with no hop to pincer's writer thread, and
prints the whole chain's sequential p50 as a multiple of that floor's p50, and the time per call
with 64 concurrent callers (their records group-committed; each result still returns only after its
record is committed) as a multiple of it too.

Telemetry (issue 35): the same loop, in alternating rounds, with telemetry off (the default of a
process that is not a gateway), with the gateway's Prometheus metrics kept, and with traces
exported over OTLP/HTTP too (the official SDK and exporter, to a local sink that answers 200), each
row the median of its rounds' p50s; and what the off path itself costs: ``Dispatcher.call`` next
to the chain's body without its one telemetry check (``Dispatcher._call``).

``--synchronous full`` runs the chain with ``[audit] synchronous = "full"`` (an fsync per commit,
the commits in pincer's audit writer thread) and the floor with ``PRAGMA synchronous=FULL`` too.

Run by hand: ``make bench`` or ``.venv/bin/python bench/dispatch.py [--calls N] [--synchronous full]``. Figures are
printed next to the baselines measured in the same run; nothing here gates CI.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import concurrent, report, sequential
from pincer.config import TelemetrySettings, parse_config
from pincer.core.values import CallRequest
from pincer.runtimes.native import NativeRuntime, tool
from pincer.service import Pincer
from pincer.store.sql.migrate import prepare_sqlite
from pincer.telemetry.tracing import TRACING

CONCURRENT_CALLERS = 64
# The like-for-like baseline (no JSON-RPC, as Pincer.call has none): every ratio is against it.
BASELINE = "FastMCP call_tool (no client)"
CLIENT = "FastMCP in-process client"
TELEMETRY_ROUNDS = 5


async def noop_fn(text: str = "") -> str:
    return text


@tool(name="noop")
async def noop(text: str = "") -> str:
    """Return the text unchanged."""
    return text


async def run(calls: int, mcp_calls: int, synchronous: str = "normal") -> None:
    with tempfile.TemporaryDirectory(prefix="pincer-bench-") as tmp:
        config = parse_config(f'[audit]\nsynchronous = "{synchronous}"\n', home=Path(tmp))
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

                async def fastmcp_direct() -> None:
                    result = await fast.call_tool("noop", {"text": "hello"})
                    if result.is_error:
                        raise SystemExit(f"FastMCP call failed: {result.content}")

                await sequential(through_pincer, 500)  # warm caches, validators, the WAL file
                await sequential(via_mcp, 50)
                await sequential(via_fastmcp, 50)
                await sequential(fastmcp_direct, 500)
                seq = {
                    "direct function call": await sequential(direct, calls),
                    "pincer whole chain": await sequential(through_pincer, calls),
                    BASELINE: await sequential(fastmcp_direct, calls),
                    CLIENT: await sequential(via_fastmcp, mcp_calls),
                    "MCPServer in-process client": await sequential(via_mcp, mcp_calls),
                }
                conc = {
                    "direct function call": await concurrent(direct, calls, CONCURRENT_CALLERS),
                    "pincer whole chain": await concurrent(through_pincer, calls, CONCURRENT_CALLERS),
                    BASELINE: await concurrent(fastmcp_direct, calls, CONCURRENT_CALLERS),
                    CLIENT: await concurrent(via_fastmcp, mcp_calls, CONCURRENT_CALLERS),
                    "MCPServer in-process client": await concurrent(via_mcp, mcp_calls, CONCURRENT_CALLERS),
                }
            telemetry = await telemetry_rows(pincer, request, through_pincer, calls)
            records = await pincer.audit.verify()
            last = (await pincer.audit.records(limit=1))[-1]
    floor, floor_cpu = commit_floor_cpu(last, calls, synchronous.upper())
    report("sequential (1 caller)", seq, baseline=BASELINE)
    report(f"concurrent ({CONCURRENT_CALLERS} callers)", conc, baseline=BASELINE)
    report(f"telemetry (sequential, median of {TELEMETRY_ROUNDS} alternating rounds)", telemetry, baseline="telemetry off")
    off, body = telemetry["telemetry off"], telemetry["the chain's body (no telemetry check)"]
    print(
        f"\ntelemetry off: p50 {off['p50_us']:.1f} us against {body['p50_us']:.1f} us for the chain's body without "
        f"call()'s check ({(off['p50_us'] - body['p50_us']) * 1000:+.0f} ns); metrics on "
        f"{telemetry['metrics on']['p50_us'] - off['p50_us']:+.1f} us, traces + metrics on "
        f"{telemetry['traces + metrics on']['p50_us'] - off['p50_us']:+.1f} us per call"
    )
    whole, fast, bare = seq["pincer whole chain"], seq[CLIENT], seq[BASELINE]
    print(
        f"\nwhole chain sequential p50 {whole['p50_us']:.1f} us: {whole['calls_s'] / bare['calls_s']:.2f}x the calls/s "
        f"of FastMCP's call_tool without a client (like for like, p50 {bare['p50_us']:.1f} us); after it, "
        f"{whole['calls_s'] / fast['calls_s']:.1f}x the FastMCP in-process client's; concurrent "
        f"{conc['pincer whole chain']['calls_s']:.0f} calls/s, {conc['pincer whole chain']['calls_s'] / conc[BASELINE]['calls_s']:.2f}x "
        f"call_tool's; {records} audit records committed and verified"
    )
    per_call_us = 1e6 / conc["pincer whole chain"]["calls_s"]
    print(
        f"audit commit floor (bare SQLite insert + commit of a record like the chain's, synchronous "
        f"{synchronous}): p50 {floor:.1f} us; "
        f"whole chain {whole['p50_us'] / floor:.2f}x the floor sequentially (one caller: nothing to group); "
        f"{CONCURRENT_CALLERS} concurrent callers (group commit) {per_call_us:.1f} us per call, "
        f"{per_call_us / floor:.2f}x the floor (target <= 2.5x); in CPU time (what a busy machine moves "
        f"least) {conc['pincer whole chain']['cpu_us']:.1f} us per call vs {floor_cpu:.1f} us per floor commit: "
        f"{conc['pincer whole chain']['cpu_us'] / floor_cpu:.2f}x; "
        f"{conc['pincer whole chain']['calls_s'] / conc[BASELINE]['calls_s']:.2f}x FastMCP's call_tool without a "
        f"client at {CONCURRENT_CALLERS} callers, {conc['pincer whole chain']['calls_s'] / conc[CLIENT]['calls_s']:.1f}x "
        f"its in-process client (target >= 15x)"
    )


@contextmanager
def otlp_sink() -> Iterator[str]:
    """A local OTLP/HTTP endpoint that takes every export and answers 200: the exporter's work
    (encoding, the request) is real, no collector's is."""

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()


async def telemetry_rows(
    pincer: Pincer, request: CallRequest, through_pincer: Callable[[], Awaitable[None]], calls: int
) -> dict[str, dict[str, float]]:
    """The chain with telemetry off, with metrics, with traces and metrics, in alternating rounds
    (a busy machine's drift falls on every row alike); each row the median of its rounds."""
    dispatcher = pincer.dispatcher

    async def body_only() -> None:
        from pincer.dispatch import _Trace

        await dispatcher._call(request, None, _Trace(), None)

    with otlp_sink() as endpoint:
        TRACING.configure(TelemetrySettings(traces=True, endpoint=endpoint), environ=os.environ)
        metrics = pincer.enable_metrics()
        modes: dict[str, tuple[bool, object, Callable[[], Awaitable[None]]]] = {
            "telemetry off": (False, None, through_pincer),
            "the chain's body (no telemetry check)": (False, None, body_only),
            "metrics on": (False, metrics, through_pincer),
            "traces + metrics on": (True, metrics, through_pincer),
        }
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name in modes}
        per_round = max(calls // TELEMETRY_ROUNDS, 100)
        try:
            for _ in range(TELEMETRY_ROUNDS):
                for name, (traced, kept, fn) in modes.items():
                    TRACING.on, dispatcher.metrics = traced, kept  # type: ignore[assignment]
                    rounds[name].append(await sequential(fn, per_round))
        finally:
            TRACING.on, dispatcher.metrics = False, None
            TRACING.shutdown()
    return {
        name: {key: statistics.median(r[key] for r in found) for key in ("p50_us", "p95_us", "calls_s")}
        for name, found in rounds.items()
    }


_FLOOR_COLUMNS = (
    "ts, session, caller, tool, kind, decision, reason, grant_id, outcome, error_code, error, args, effects, "
    "duration_ms, usage, idempotency_key, cached, approval_id, prev_hash, hash"
)


def commit_floor(record: Any, calls: int, synchronous: str = "NORMAL") -> float:
    """p50 in microseconds of inserting (autocommit: one transaction each) rows carrying ``record``'s
    values into a fresh pincer database: what committing one audit record costs SQLite alone."""
    return commit_floor_cpu(record, calls, synchronous)[0]


def commit_floor_cpu(record: Any, calls: int, synchronous: str = "NORMAL") -> tuple[float, float]:
    """:func:`commit_floor`'s p50 and the CPU time per commit of the same loop, in microseconds."""
    values = [getattr(record, name.strip()) for name in _FLOOR_COLUMNS.split(",")]
    for index in (11, 12, 14):  # args, effects, usage are stored as JSON text
        values[index] = json.dumps(values[index], separators=(",", ":"), sort_keys=True)
    sql = f"INSERT INTO audit (id, {_FLOOR_COLUMNS}) VALUES ({', '.join('?' * 21)})"
    samples = []
    with tempfile.TemporaryDirectory(prefix="pincer-floor-") as tmp:
        prepare_sqlite(Path(tmp) / "pincer.db")
        conn = sqlite3.connect(Path(tmp) / "pincer.db", isolation_level=None)
        conn.execute(f"PRAGMA synchronous={synchronous}")
        try:
            cpu = time.process_time()
            for record_id in range(1, calls + 1):
                started = time.perf_counter()
                conn.execute(sql, (record_id, *values))
                samples.append((time.perf_counter() - started) * 1e6)
            cpu = time.process_time() - cpu
        finally:
            conn.close()
    return statistics.median(samples), cpu / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--mcp-calls", type=int, default=2_000)
    parser.add_argument("--synchronous", choices=("normal", "full"), default="normal")
    args = parser.parse_args()
    anyio.run(run, args.calls, args.mcp_calls, args.synchronous)


if __name__ == "__main__":
    main()
