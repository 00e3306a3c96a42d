"""MCP Tasks: what a task-declaring ``tools/call`` costs against a plain one, and ``tasks/get``
at 1,000 live tasks.

In process, on one event loop and one SQLite store: the same no-op tool called through the MCP
gateway's ``run_call`` as a 2026-07-28 client that declares ``io.modelcontextprotocol/tasks``
(answered directly: the call ends before ``[tasks] after_s``, so the extra is the per-session
bound's count and the call's own task) and as one that does not (the baseline), then the same
call made a task at once (``[tasks] only``: the row written before the handle returns). Then
1,000 live tasks in the store and ``tasks/get`` of random ones: p50/p95.

    .venv/bin/python bench/tasks.py [--calls 2000] [--gets 2000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

import anyio

from _stats import sequential
from pincer.config import parse_config
from pincer.gateway.channel import McpChannel
from pincer.gateway.mcp_server import McpGateway
from pincer.gateway.services import mcp_services
from pincer.gateway.tasks import CLIENT_CAPABILITIES_META_KEY, TASKS_EXTENSION
from pincer.gateway.tokens import GatewaySession
from pincer.policy.session import SessionKind
from pincer.runtimes.native import NativeRuntime, tool
from pincer.service import Pincer
from pincer.store.tasks import TaskStatus

MODERN = "2026-07-28"
LIVE_TASKS = 1_000


@tool(name="noop", inline=True)
async def noop(text: str = "") -> str:
    """Return the text unchanged."""
    return text


@tool(name="noop_task", inline=True)
async def noop_task(text: str = "") -> str:
    """Return the text unchanged (configured to run only as a task)."""
    return text


def _channel(*, tasks: bool) -> McpChannel:
    capabilities = {"extensions": {TASKS_EXTENSION: {}}} if tasks else {}
    return McpChannel(
        protocol_version=MODERN,
        client_capabilities=capabilities,
        meta={CLIENT_CAPABILITIES_META_KEY: capabilities},
    )


async def run(calls: int, gets: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pincer-bench-tasks-") as tmp:
        home = Path(tmp)
        config = parse_config('[tasks]\nmax_live_per_session = 100000\nonly = ["noop_task"]\n', home=home)
        async with Pincer.open(home, config=config, secret_key=b"b" * 32, builtins=False) as pincer:
            await pincer.add_runtime(NativeRuntime([noop, noop_task], name="bench"))
            session = GatewaySession(name="main", kind=SessionKind.MAIN)
            gateway = McpGateway(mcp_services(pincer), default_session=session)
            async with gateway.running():
                plain, declaring = _channel(tasks=False), _channel(tasks=True)

                async def plain_call() -> None:
                    await gateway.run_call(session, "noop", {"text": "hi"}, plain)

                async def declaring_call() -> None:
                    result = await gateway.run_call(session, "noop", {"text": "hi"}, declaring)
                    if result.get("resultType") != "complete":
                        raise SystemExit(f"a fast call became a task: {result}")

                async def as_task() -> None:
                    task = await gateway.tasks.start(_request("noop_task"))
                    if not hasattr(task, "id"):
                        raise SystemExit(f"the call did not become a task: {task}")

                for fn in (plain_call, declaring_call):
                    await sequential(fn, 200)  # warm-up
                base = await sequential(plain_call, calls)
                declared = await sequential(declaring_call, calls)
                made = await sequential(as_task, min(calls, 500))
                print(
                    f"{'tools/call (2026-07-28, same tool)':<44} {'p50 us':>9} {'p95 us':>9} {'calls/s':>9} {'ratio':>7}"
                )
                for label, row in (("plain (baseline)", base), ("declares tasks, answered directly", declared),
                                   ("made a task at once (row + handle)", made)):  # fmt: skip
                    ratio = row["p50_us"] / base["p50_us"]
                    print(
                        f"{label:<44} {row['p50_us']:>9.0f} {row['p95_us']:>9.0f} {row['calls_s']:>9.0f} {ratio:>6.2f}x"
                    )
                ids = []
                for _ in range(LIVE_TASKS):
                    task = await pincer.tasks.create(
                        session="main", caller="mcp", tool="noop", args={}, idempotency_key=None,
                        status=TaskStatus.WORKING, status_message="running", approval_id=None,
                        owner=pincer.approvals.owners.token, ttl_ms=3_600_000, poll_ms=1_000,
                    )  # fmt: skip
                    ids.append(task.id)
                live = await pincer.tasks.live_count("main")

                async def get() -> None:
                    await gateway.tasks.get(session, random.choice(ids))

                await sequential(get, 200)
                polled = await sequential(get, gets)
                print(f"tasks/get at {live} live tasks: p50 {polled['p50_us']:.0f} us, p95 {polled['p95_us']:.0f} us, "
                      f"{polled['calls_s']:.0f}/s")  # fmt: skip


def _request(name: str) -> object:
    from pincer.core.values import CallRequest

    return CallRequest(tool=name, args={"text": "hi"}, session="main", caller="mcp")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--gets", type=int, default=2_000)
    args = parser.parse_args()
    anyio.run(run, args.calls, args.gets)


if __name__ == "__main__":
    main()
