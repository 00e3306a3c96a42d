"""Small helpers shared by the benchmarks: percentiles and a fixed-width report."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable

import anyio


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def sequential(fn: Callable[[], Awaitable[object]], n: int) -> dict[str, float]:
    """Latency of ``n`` calls one after another: p50/p95 in microseconds and calls/s."""
    samples = []
    started = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    wall = time.perf_counter() - started
    return {"p50_us": statistics.median(samples), "p95_us": percentile(samples, 95), "calls_s": n / wall}


async def concurrent(fn: Callable[[], Awaitable[object]], n: int, workers: int) -> dict[str, float]:
    """``workers`` callers sharing ``n`` calls: latency per call and total calls/s."""
    samples: list[float] = []
    per_worker = n // workers

    async def worker() -> None:
        for _ in range(per_worker):
            t0 = time.perf_counter()
            await fn()
            samples.append((time.perf_counter() - t0) * 1e6)

    started, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(worker)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "p50_us": statistics.median(samples),
        "p95_us": percentile(samples, 95),
        "calls_s": len(samples) / wall,
        # This process's CPU time per call: a busy machine's preemption moves it far less than
        # wall time (it still counts worker threads, and cache misses other processes cause).
        "cpu_us": cpu / max(len(samples), 1) * 1e6,
    }


def report(title: str, rows: dict[str, dict[str, float]], baseline: str) -> None:
    print(f"\n{title}")
    print(f"  {'':34} {'p50 us':>10} {'p95 us':>10} {'calls/s':>10} {'vs ' + baseline:>14}")
    base = rows[baseline]["calls_s"]
    for name, r in rows.items():
        print(f"  {name:34} {r['p50_us']:10.1f} {r['p95_us']:10.1f} {r['calls_s']:10.0f} {r['calls_s'] / base:13.2f}x")
