"""NativeRuntime.invoke against calling the same function directly, in one run.

Run by hand: ``.venv/bin/python bench/native_invoke.py``. Prints p50/p95 per call and calls/s,
and each row's throughput as a ratio of the direct call measured here (never an absolute gate).
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import report, sequential
from pincer.core.values import HostContext
from pincer.runtimes.native import NativeRuntime, tool

CALLS = 200_000


@tool
async def noop() -> None:
    """Does nothing."""


@tool
async def one_arg(x: int) -> int:
    """Returns x.

    Args:
        x: a number
    """
    return x


@tool(inline=True)
def sync_inline(x: int) -> int:
    """Returns x, synchronously on the loop."""
    return x


async def main() -> None:
    runtime = NativeRuntime([noop, one_arg, sync_inline])
    host = HostContext(session="main", tool="noop")
    specs = {s.name: s for s in runtime.tools()}
    fn_noop, fn_one = noop.fn, one_arg.fn

    async def direct() -> None:
        await fn_noop()

    async def direct_one() -> None:
        await fn_one(x=3)

    async def invoke_noop() -> None:
        await runtime.invoke(specs["noop"], {}, host)

    async def invoke_one() -> None:
        await runtime.invoke(specs["one_arg"], {"x": 3}, host)

    async def invoke_inline() -> None:
        await runtime.invoke(specs["sync_inline"], {"x": 3}, host)

    rows = {}
    for name, fn in [
        ("direct noop()", direct),
        ("direct one_arg(x=3)", direct_one),
        ("invoke noop {}", invoke_noop),
        ("invoke one_arg {x: 3}", invoke_one),
        ("invoke sync inline {x: 3}", invoke_inline),
    ]:
        await sequential(fn, CALLS // 10)  # warm up
        rows[name] = await sequential(fn, CALLS)
    report(f"NativeRuntime.invoke, {CALLS} sequential calls", rows, baseline="direct noop()")


if __name__ == "__main__":
    anyio.run(main)
