"""Scale-out: calls/s with 1, 2 and 3 gateways on PostgreSQL + Redis, next to SQLite on one.

Every configuration runs real ``pincer serve`` processes on one shared PINCER_HOME; the client
(here, httpx over keep-alive connections) spreads ``--clients`` concurrent callers over the
gateways round robin, each calling the native no-op ``echo`` over REST: the whole governed
chain, the audit record committed before the answer. PostgreSQL and Redis are started for the
run the way the tests start them (tests/backends.py: Debian's packages, loopback, fsync off;
pass ``--fsync`` to measure with fsync on, as a real deployment runs).

    .venv/bin/python bench/scale.py [--calls 3000] [--clients 64] [--rounds 2] [--fsync]

It prints calls/s per configuration and its ratio to SQLite on one gateway measured in the same
run. How it grows and where it stops is in docs/scale-out.md: on a machine with few cores the
gateways, PostgreSQL and this client share them, so throughput stops growing once the cores are
busy; every append also takes the chain's head row in turn, which bounds appends per second
by one commit round trip per batch (group commit keeps the batches large under load).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.backends import postgres_server, redis_server  # noqa: E402 - after the path is set

READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
CALL_TIMEOUT_S = 60.0
WARMUP_CALLS = 100
PINCER_BIN = Path(sys.executable).with_name("pincer")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    return {**env, "PINCER_HOME": str(home)}


def _home(store_url: str | None, cache_url: str | None) -> Path:
    home = Path(tempfile.mkdtemp(prefix="pincer-bench-scale-"))
    config = "[triggers]\nenabled = false\n"
    if store_url:
        config += f'\n[store]\nurl = "{store_url}"\n'
    if cache_url:
        config += f'\n[cache]\nurl = "{cache_url}"\n'
    (home / "config.toml").write_text(config)
    if store_url:
        subprocess.run([str(PINCER_BIN), "db", "upgrade"], env=_env(home), check=True, capture_output=True)
    return home


def _start(home: Path, count: int) -> list[tuple[subprocess.Popen[str], str]]:
    started = []
    for _ in range(count):
        process = subprocess.Popen(
            [str(PINCER_BIN), "serve", "--port", "0", "--json"], stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=_env(home),
        )  # fmt: skip
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda p=process, q=lines: [q.put(x) for x in p.stdout or ()], daemon=True).start()
        started.append((process, lines))
    gateways = []
    for process, lines in started:
        buffered, deadline = "", time.monotonic() + READY_TIMEOUT_S
        while True:
            if time.monotonic() > deadline:
                raise SystemExit("a gateway did not start")
            try:
                buffered += lines.get(timeout=0.2)
                gateways.append((process, json.loads(buffered)["url"]))
                break
            except (queue.Empty, json.JSONDecodeError):
                continue
    return gateways


def _stop(gateways: list[tuple[subprocess.Popen[str], str]]) -> None:
    for process, _ in gateways:
        process.terminate()
    for process, _ in gateways:
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()


async def _drive(urls: list[str], token: str, calls: int, clients: int) -> float:
    numbers = iter(range(calls))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(
        trust_env=False, timeout=CALL_TIMEOUT_S, headers={"Authorization": f"Bearer {token}"}, limits=limits
    ) as http:

        async def client(index: int) -> None:
            for n in numbers:
                url = f"{urls[(index + n) % len(urls)]}/api/v1/tools/echo/call"
                try:
                    answer = await http.post(url, json={"args": {"text": str(n)}})
                except httpx.TransportError:
                    # A keep-alive connection the server closed as it was reused: once more, anew.
                    answer = await http.post(url, json={"args": {"text": str(n)}})
                if answer.status_code != 200:
                    raise SystemExit(f"a call failed: {answer.text}")

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for index in range(clients):
                tg.start_soon(client, index)
        return calls / (time.perf_counter() - started)


def measure(home: Path, gateways: int, *, calls: int, clients: int, rounds: int) -> float:
    from pincer.gateway.tokens import load_or_create_token

    token = load_or_create_token(home)
    running = _start(home, gateways)
    try:
        urls = [url for _, url in running]
        anyio.run(_drive, urls, token, WARMUP_CALLS, min(clients, WARMUP_CALLS))
        return max(anyio.run(_drive, urls, token, calls, clients) for _ in range(rounds))
    finally:
        _stop(running)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fsync", action="store_true", help="PostgreSQL with fsync and synchronous_commit on")
    args = parser.parse_args()
    server = postgres_server()
    if args.fsync:
        import psycopg

        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET fsync = on")
            conn.execute("ALTER SYSTEM SET synchronous_commit = on")
            conn.execute("SELECT pg_reload_conf()")
    cache = redis_server().url(db=2)
    results: dict[str, float] = {}
    results["sqlite, 1 gateway"] = measure(_home(None, None), 1, calls=args.calls, clients=args.clients, rounds=args.rounds)
    print(f"sqlite, 1 gateway: {results['sqlite, 1 gateway']:.0f} calls/s", file=sys.stderr)
    for count in (1, 2, 3):
        home = _home(server.new_database(), cache)
        name = f"postgres, {count} gateway{'s' if count > 1 else ''}"
        results[name] = measure(home, count, calls=args.calls, clients=args.clients, rounds=args.rounds)
        print(f"{name}: {results[name]:.0f} calls/s", file=sys.stderr)
    baseline = results["sqlite, 1 gateway"]
    print(f"{args.calls} echo calls over REST from {args.clients} clients, {os.cpu_count()} cores, best of {args.rounds}")
    print(f"{'configuration':<24}{'calls/s':>10}{'vs sqlite':>11}")
    for name, rate in results.items():
        print(f"{name:<24}{rate:>10.0f}{rate / baseline:>10.2f}x")


if __name__ == "__main__":
    main()
