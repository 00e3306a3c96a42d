"""What the chain's tool-timeout scope costs a call: a bare await, the same await inside
``anyio.CancelScope()`` (no deadline), and inside ``anyio.CancelScope(deadline=...)`` (what
``Dispatcher._execute`` enters: a loop timer armed and disarmed on every call), on one event loop,
interleaved round by round, one caller and 64 concurrent callers, in CPU time.

The difference between the last two is what one timer shared by every call in flight could save
at most; issue 23's third pass tried that (one ``loop.call_at`` for the earliest deadline) and
measured 1-3 us a call, 1-4% of the whole chain, within the noise of ``bench/dispatch.py``, so the
chain keeps anyio's scope. Run by hand: ``.venv/bin/python bench/deadlines.py [--calls N]``;
nothing here gates CI.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable

import anyio

TIMEOUT_S = 30.0


async def _bare(n: int) -> None:
    for _ in range(n):
        await anyio.lowlevel.checkpoint()


async def _scope_without_deadline(n: int) -> None:
    for _ in range(n):
        with anyio.CancelScope():
            await anyio.lowlevel.checkpoint()


async def _scope_with_deadline(n: int) -> None:
    for _ in range(n):
        with anyio.CancelScope(deadline=anyio.current_time() + TIMEOUT_S):
            await anyio.lowlevel.checkpoint()


async def _cpu_us_per_call(body: Callable[[int], Awaitable[None]], callers: int, n: int) -> float:
    """Microseconds of CPU per call (``process_time``: a busy machine moves it least)."""
    started = time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(body, n)
    return (time.process_time() - started) / (callers * n) * 1e6


async def main(calls: int, rounds: int) -> None:
    bodies = {
        "bare await": _bare,
        "scope, no deadline": _scope_without_deadline,
        "scope with deadline": _scope_with_deadline,
    }
    for callers in (1, 64):
        n = max(1, calls // callers)
        samples: dict[str, list[float]] = {name: [] for name in bodies}
        for _ in range(rounds):
            for name, body in bodies.items():
                samples[name].append(await _cpu_us_per_call(body, callers, n))
        bare = statistics.median(samples["bare await"])
        print(f"{callers} caller(s), {n * callers} calls x {rounds} rounds, CPU us per call (median):")
        for name, values in samples.items():
            value = statistics.median(values)
            extra = "" if name == "bare await" else f"  (+{value - bare:.2f} us over the bare await, {value / bare:.2f}x)"
            print(f"  {name:22} {value:7.2f}{extra}")
        timer = statistics.median(samples["scope with deadline"]) - statistics.median(samples["scope, no deadline"])
        print(f"  the deadline's timer alone: {timer:.2f} us a call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=64_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.calls, args.rounds)
