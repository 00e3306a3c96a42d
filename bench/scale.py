"""Scale-out: calls/s with 1, 2 and 3 gateways on PostgreSQL + Redis, next to SQLite on one.

Every configuration runs real ``pincer serve`` processes on one shared PINCER_HOME; the client
(here, hand-written HTTP/1.1 over keep-alive connections: httpx cost more CPU per call than the
gateways, on the same cores) spreads ``--clients`` concurrent callers over the
gateways round robin, each calling the native no-op ``echo`` over REST: the whole governed
chain, the audit record committed before the answer. PostgreSQL and Redis are started for the
run the way the tests start them (tests/backends.py: Debian's packages, loopback, fsync off;
pass ``--fsync`` to measure with fsync on, as a real deployment runs).

    .venv/bin/python bench/scale.py [--calls 3000] [--clients 64] [--rounds 2] [--fsync]

It prints calls/s per configuration and its ratio to SQLite on one gateway measured in the same
run, and, measured during each configuration's best round, why it grows and where it stops:

- the CPU each part spent per call (the gateways, PostgreSQL's backends, Redis, this client),
  read from /proc, and how busy the machine's cores were (all of it, and pincer's share): when
  the cores are busy, another gateway only splits the same CPU;
- the chain's head row: PostgreSQL's backends are sampled (pg_stat_activity) and the share of
  samples in which one waited on a lock says how much the appends queue for the head row.

docs/scale-out.md has a run's figures and what they mean.
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
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import httpx
from anyio.streams.buffered import BufferedByteReceiveStream

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.backends import postgres_server, redis_server  # noqa: E402 - after the path is set

from _procs import cpu_s  # noqa: E402

READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
CALL_TIMEOUT_S = 60.0
WARMUP_CALLS = 100
LOCK_SAMPLE_S = 0.01
BUSY_SHARE = 0.85  # cores this busy (of all of them) are what stops the growth
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


class _Connection:
    """One keep-alive HTTP/1.1 connection to a gateway, written by hand: an HTTP client library
    costs several times the gateway's own CPU per call, and on a small machine the client's
    CPU is taken from the gateways it measures."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self._head = (
            f"POST /api/v1/tools/echo/call HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        )
        self._stream: anyio.abc.SocketStream | None = None
        self._reader: BufferedByteReceiveStream | None = None

    async def call(self, text: str) -> tuple[int, bytes]:
        body = json.dumps({"args": {"text": text}}).encode()
        request = (self._head % len(body)).encode() + body
        for attempt in (1, 2):
            if self._stream is None:
                self._stream = await anyio.connect_tcp(self.host, self.port)
                self._reader = BufferedByteReceiveStream(self._stream)
            assert self._reader is not None
            try:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    await self._stream.send(request)
                    head = await self._reader.receive_until(b"\r\n\r\n", 65_536)
                    length = next(
                        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
                        0,
                    )  # fmt: skip
                    answer = await self._reader.receive_exactly(length) if length else b""
                return int(head[9:12]), answer
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.IncompleteRead, OSError):
                # A keep-alive connection the server closed as it was reused: once more, anew.
                await self.aclose()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        stream, self._stream, self._reader = self._stream, None, None
        if stream is not None:
            await stream.aclose()


async def _drive(urls: list[str], token: str, calls: int, clients: int) -> float:
    numbers = iter(range(calls))
    targets = [httpx.URL(url) for url in urls]

    async def client(index: int) -> None:
        connections = [_Connection(t.host, t.port or 80, token) for t in targets]
        try:
            for n in numbers:
                status, answer = await connections[(index + n) % len(connections)].call(str(n))
                if status != 200 or b'"ok":true' not in answer:
                    raise SystemExit(f"a call failed: {status} {answer[:300]!r}")
        finally:
            for connection in connections:
                await connection.aclose()

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for index in range(clients):
            tg.start_soon(client, index)
    return calls / (time.perf_counter() - started)


# -- what the processes spent ---------------------------------------------------------------------




def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    parents[int(entry)] = int(fh.read().decode("ascii", "replace").rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        found.append(pid)
        frontier.extend(child for child, parent in parents.items() if parent == pid)
    return found


def _machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all the machine's cores since boot."""
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:9]]
    idle = values[3] + values[4]
    return float(sum(values) - idle), float(sum(values))


@dataclass(frozen=True, kw_only=True, slots=True)
class Round:
    rate: float
    wall_s: float
    calls: int
    cpu_s: dict[str, float]  # part -> CPU seconds spent in the round
    machine_busy: float  # share of all cores busy, whoever used them
    lock_waiting: float | None  # share of samples in which a backend waited on a lock
    active: float | None  # mean backends running a statement

    def ms_per_call(self, part: str) -> float:
        return self.cpu_s.get(part, 0.0) * 1000 / self.calls

    @property
    def ours_busy(self) -> float:
        return sum(self.cpu_s.values()) / (self.wall_s * (os.cpu_count() or 1))


class _LockSampler:
    """Samples the database's backends every LOCK_SAMPLE_S: how often one waits on a lock."""

    def __init__(self, url: str | None) -> None:
        self._url = url
        self._stop = threading.Event()
        self.samples = self.waiting = self.active = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _LockSampler:
        if self._url:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._url:
            self._thread.join(STOP_TIMEOUT_S)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self._url or "", autocommit=True) as conn:
            while not self._stop.wait(LOCK_SAMPLE_S):
                row = conn.execute(
                    "SELECT COUNT(*) FILTER (WHERE wait_event_type = 'Lock'), COUNT(*) FILTER (WHERE state = 'active') "
                    "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()
                self.samples += 1
                self.waiting += 1 if row and row[0] else 0
                self.active += int(row[1]) if row else 0


def _round(
    urls: list[str], token: str, calls: int, clients: int, parts: dict[str, list[int]], store_url: str | None
) -> Round:
    def pids_of(name: str, roots: list[int]) -> list[int]:
        # PostgreSQL: the postmaster and every backend under it (a backend that ends during the
        # round takes its CPU with it; the gateways' pooled connections live through the round).
        return [p for root in roots for p in _descendants(root)] if name == "postgres" else roots

    before = {(name, pid): cpu_s(pid) for name, roots in parts.items() for pid in pids_of(name, roots)}
    client_before, machine_before, started = time.process_time(), _machine_busy(), time.perf_counter()
    with _LockSampler(store_url) as sampler:
        anyio.run(_drive, urls, token, calls, clients)
    wall = time.perf_counter() - started
    cpu = {
        name: sum(max(0.0, cpu_s(pid) - before.get((name, pid), 0.0)) for pid in pids_of(name, roots))
        for name, roots in parts.items()
    }
    cpu["client"] = time.process_time() - client_before
    machine_after = _machine_busy()
    busy = (machine_after[0] - machine_before[0]) / max(1.0, machine_after[1] - machine_before[1])
    return Round(
        rate=calls / wall, wall_s=wall, calls=calls, cpu_s=cpu, machine_busy=busy,
        lock_waiting=sampler.waiting / sampler.samples if sampler.samples else None,
        active=sampler.active / sampler.samples if sampler.samples else None,
    )  # fmt: skip


def measure(
    home: Path, gateways: int, *, calls: int, clients: int, rounds: int, store_url: str | None = None,
    servers: dict[str, list[int]] | None = None,
) -> Round:  # fmt: skip
    from pincer.gateway.tokens import load_or_create_token

    token = load_or_create_token(home)
    running = _start(home, gateways)
    try:
        urls = [url for _, url in running]
        anyio.run(_drive, urls, token, WARMUP_CALLS, min(clients, WARMUP_CALLS))
        parts = {"gateways": [process.pid for process, _ in running], **(servers or {})}
        return max((_round(urls, token, calls, clients, parts, store_url) for _ in range(rounds)), key=lambda r: r.rate)
    finally:
        _stop(running)


def _why(results: dict[str, Round]) -> list[str]:
    """How throughput grew with the gateways and what stopped it, from the measured rounds."""
    cores = os.cpu_count() or 1
    pg = [results[f"postgres, {n} gateway{'s' if n > 1 else ''}"] for n in (1, 2, 3)]
    lines = [
        f"growth: 2 gateways {pg[1].rate / pg[0].rate:.2f}x of 1, 3 gateways {pg[2].rate / pg[1].rate:.2f}x of 2",
    ]
    for n, found in enumerate(pg, start=1):
        per_call = sum(found.ms_per_call(part) for part in found.cpu_s)
        lines.append(
            f"{n} gateway{'s' if n > 1 else ' '}: cores {found.machine_busy:.0%} busy ({found.ours_busy:.0%} by this run), "
            f"CPU per call {per_call:.2f} ms = " + " + ".join(f"{part} {found.ms_per_call(part):.2f}" for part in found.cpu_s)
            + f"; at most {cores * 1000 / per_call:.0f} calls/s on {cores} cores"
            + (f"; a backend waited on a lock in {found.lock_waiting:.0%} of samples "
               f"({found.active:.1f} statements running on average)" if found.lock_waiting is not None else "")
        )  # fmt: skip
    last, first = pg[2], pg[0]
    per_call = sum(last.ms_per_call(part) for part in last.cpu_s)
    locks = (
        f" The head row's lock waits grow with the gateways ({first.lock_waiting:.0%} of samples with one, "
        f"{last.lock_waiting:.0%} with three): on a machine with cores to spare they are the next limit."
        if first.lock_waiting is not None and last.lock_waiting is not None
        else ""
    )
    if last.machine_busy >= BUSY_SHARE:
        lines.append(
            f"why it stops: the cores. With 3 gateways the {cores} cores were {last.machine_busy:.0%} busy "
            f"({last.ours_busy:.0%} by this run, the rest other work on the machine). A call cost {per_call:.2f} ms of "
            f"CPU ({last.ms_per_call('client'):.2f} of it in this client), so the CPU this run got serves "
            f"{last.ours_busy * cores * 1000 / per_call:.0f} calls/s: another gateway only splits the same CPU." + locks
        )
    elif last.lock_waiting is not None and last.lock_waiting >= 0.5:
        lines.append(
            f"why it stops: the chain's head row. The cores had room ({last.machine_busy:.0%} busy) but a backend waited "
            f"on a lock in {last.lock_waiting:.0%} of samples: appends queue for the head row, one batch per commit."
        )
    else:
        lines.append(
            f"it had not stopped: the cores were {last.machine_busy:.0%} busy and lock waits rare; more gateways "
            "(or more clients) would add throughput." + locks
        )
    return lines


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
    redis = redis_server()
    cache = redis.url(db=2)
    servers = {"postgres": [server.pid], "redis": [redis.pid]}
    results: dict[str, Round] = {}
    sqlite = "sqlite, 1 gateway"
    results[sqlite] = measure(_home(None, None), 1, calls=args.calls, clients=args.clients, rounds=args.rounds)
    print(f"{sqlite}: {results[sqlite].rate:.0f} calls/s", file=sys.stderr)
    for count in (1, 2, 3):
        url = server.new_database()
        home = _home(url, cache)
        name = f"postgres, {count} gateway{'s' if count > 1 else ''}"
        results[name] = measure(
            home, count, calls=args.calls, clients=args.clients, rounds=args.rounds, store_url=url, servers=servers
        )
        print(f"{name}: {results[name].rate:.0f} calls/s", file=sys.stderr)
    baseline = results[sqlite].rate
    print(f"{args.calls} echo calls over REST from {args.clients} clients, {os.cpu_count()} cores, best of {args.rounds}")
    print(f"{'configuration':<24}{'calls/s':>10}{'vs sqlite':>11}{'cores busy':>12}{'gateway ms/call':>17}")
    for name, found in results.items():
        print(
            f"{name:<24}{found.rate:>10.0f}{found.rate / baseline:>10.2f}x{found.machine_busy:>12.0%}"
            f"{found.ms_per_call('gateways'):>17.2f}"
        )
    for line in _why(results):
        print(line)


if __name__ == "__main__":
    main()
