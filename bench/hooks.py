"""Webhook deliveries: ``pincer serve`` vs a bare Starlette endpoint doing the same HMAC check.

2,000 Standard Webhooks deliveries from 32 concurrent clients over loopback (every wait
bounded), three times:

1. to ``pincer serve``: each delivery is verified, checked for replay, written with its queued
   run to SQLite, audited (HMAC-chained) and answered 202 with its run id; the runs start in the
   background. Counted afterwards: every delivery answered, every accepted one with exactly one
   run and one audit record.
2. to a bare Starlette app under the same uvicorn and event loop that verifies the same signature
   (pincer's ``verify_standard``), inserts and commits one row per delivery into SQLite (WAL, the
   same ``synchronous`` as pincer's store; a delivery id seen before is not inserted twice) and
   answers 202: the baseline, measured in the same run.
3. to ``pincer serve`` again, killed with SIGKILL when half of the deliveries are answered, then
   started again: every delivery answered 202 before the kill must be run after the restart,
   exactly once, with one audit record.

The agent loop is not part of this build: the recording starter (``tests.triggers.recording``)
stands in for it, through ``tests/triggers/serve_recording.py`` (the real ``pincer serve`` with
only its run starter swapped); each run is recorded in a SQLite file of its own.

    .venv/bin/python bench/hooks.py [--deliveries 2000] [--clients 32] [--py-spy serve-samples.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import base64
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _procs import cpu_s  # noqa: E402
from pincer.triggers.signatures import sign_standard, verify_standard  # noqa: E402

READY_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0
RUNS_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 20.0
SECRET = "whsec_" + base64.b64encode(b"bench-hooks-key-0123456789abcdef").decode()
CONFIG = '[[hooks]]\nname = "bench"\nmessage = "event {{ event }}"\nauth = "standard"\nsecret = "bench_hook_secret"\n'
LAUNCHER = ROOT / "tests" / "triggers" / "serve_recording.py"
PINCER = Path(sys.executable).with_name("pincer")


# -- the baseline: a bare Starlette endpoint (run as a subprocess of this script) ----------------


def _baseline_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from pincer.core.errors import SignatureInvalid

    # One row per delivery, committed before the answer, as pincer commits its delivery: the
    # baseline persists too (issue 23), with pincer's pragmas and on the event loop as pincer does.
    folder = tempfile.mkdtemp(prefix="pincer-bench-baseline-")
    atexit.register(shutil.rmtree, folder, True)
    db = Path(folder) / "deliveries.db"
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE deliveries (id TEXT PRIMARY KEY, received REAL NOT NULL, body BLOB NOT NULL)")

    async def hook(request: Request) -> JSONResponse:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            delivery = verify_standard(SECRET, headers, body, now=time.time())
        except SignatureInvalid as exc:
            return JSONResponse({"error": exc.message}, status_code=401)
        inserted = conn.execute(
            "INSERT OR IGNORE INTO deliveries (id, received, body) VALUES (?, ?, ?)", (delivery, time.time(), body)
        ).rowcount
        return JSONResponse({"accepted": True, "delivery": delivery}, status_code=202 if inserted else 200)

    return Starlette(routes=[Route("/hooks/bench", hook, methods=["POST"])])


def _serve_baseline() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(json.dumps({"url": f"http://127.0.0.1:{sock.getsockname()[1]}"}), flush=True)
    config = uvicorn.Config(_baseline_app(), log_level="warning", access_log=False, lifespan="off", server_header=False)
    try:
        import uvloop  # noqa: F401

        config.loop = "uvloop"
    except ImportError:
        pass
    uvicorn.Server(config).run(sockets=[sock])


# -- running things ----------------------------------------------------------------------------


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str


def _start(argv: list[str], env: dict[str, str]) -> Server:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    deadline = time.monotonic() + READY_TIMEOUT_S
    buffered = ""
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        buffered += line
        try:
            return Server(process=process, url=json.loads(buffered)["url"])
        except ValueError:
            continue
    process.kill()
    raise SystemExit(f"{argv[1]} did not start within {READY_TIMEOUT_S:g} s")


def _stop(server: Server) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
        try:
            server.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=STOP_TIMEOUT_S)
    if server.process.stdout:
        server.process.stdout.close()


def _env(home: Path, runs: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    return {**base, "PINCER_HOME": str(home), "PINCER_TEST_RUNS_DB": str(runs), "PYTHONPATH": str(ROOT)}


def _home(root: Path, name: str) -> tuple[Path, Path]:
    home, runs = root / name, root / f"{name}-runs.db"
    home.mkdir()
    (home / "config.toml").write_text(CONFIG)
    done = subprocess.run([str(PINCER), "secrets", "set", "bench_hook_secret"], input=SECRET, text=True,
                          capture_output=True, env=_env(home, runs), timeout=120)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return home, runs


def _pincer(home: Path, runs: Path, *, start_delay_s: float = 0.0) -> Server:
    env = {**_env(home, runs), "PINCER_TEST_START_DELAY_S": str(start_delay_s)}
    return _start([sys.executable, str(LAUNCHER), "--port", "0", "--json"], env)




def _sample(pid: int, out: Path | None) -> subprocess.Popen[bytes] | None:
    """py-spy sampling ``pid`` into ``out`` as collapsed stacks (bench/README.md), until SIGINT."""
    if out is None:
        return None
    argv = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid), "--format", "raw",
            "--rate", "250", "--nonblocking", "-o", str(out)]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_sampling(sampler: subprocess.Popen[bytes] | None) -> None:
    if sampler is not None:
        sampler.send_signal(signal.SIGINT)  # py-spy writes its samples and exits
        sampler.wait(timeout=STOP_TIMEOUT_S)


# -- the client --------------------------------------------------------------------------------


def _delivery(n: int, tag: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"type": "order.created", "data": {"n": n, "items": [1, 2, 3]}}).encode()
    msg_id, stamp = f"msg_{tag}_{n:06d}", int(time.time())
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(stamp),
               "webhook-signature": sign_standard(SECRET, msg_id, stamp, body), "content-type": "application/json"}  # fmt: skip
    return body, headers


@dataclass
class Sent:
    seconds: float
    statuses: dict[int, int]
    accepted: dict[str, str]  # delivery id -> run id
    unanswered: int


class _Connection:
    """One keep-alive HTTP/1.1 connection on a raw socket: the client's own cost stays small
    against the servers' (httpx costs more per request than the bare endpoint does)."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = f"POST {path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\ncontent-length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        self.writer.write(head.encode() + body)
        await self.writer.drain()
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass


async def _send(url: str, count: int, clients: int, tag: str, *, kill: subprocess.Popen[str] | None = None) -> Sent:
    deliveries = [_delivery(n, tag) for n in range(count)]
    pending = iter(deliveries)
    statuses: dict[int, int] = {}
    accepted: dict[str, str] = {}
    unanswered = 0
    answered = 0

    async def client() -> None:
        nonlocal unanswered, answered
        connection = _Connection(url)
        try:
            for body, headers in pending:
                try:
                    status, answer = await asyncio.wait_for(connection.post("/hooks/bench", body, headers), REQUEST_TIMEOUT_S)
                except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError, StopIteration):
                    unanswered += 1
                    await connection.close()
                    connection = _Connection(url)
                    continue
                answered += 1
                statuses[status] = statuses.get(status, 0) + 1
                if status == 202:
                    data = json.loads(answer)
                    if "run_id" in data:
                        accepted[headers["webhook-id"]] = data["run_id"]
                if kill is not None and answered == count // 2:
                    kill.send_signal(signal.SIGKILL)
        finally:
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    seconds = time.perf_counter() - started
    return Sent(seconds=seconds, statuses=statuses, accepted=accepted, unanswered=unanswered)


def _runs(path: Path) -> list[str]:
    try:
        db = sqlite3.connect(path, timeout=10)
        try:
            return [row[0] for row in db.execute("SELECT run_id FROM runs")]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return []


def _audited(home: Path) -> dict[str, int]:
    db = sqlite3.connect(home / "pincer.db", timeout=10)
    try:
        counts: dict[str, int] = {}
        for (args,) in db.execute("SELECT args FROM audit WHERE kind = 'trigger'"):
            run_id = json.loads(args)["run_id"]
            counts[run_id] = counts.get(run_id, 0) + 1
        return counts
    finally:
        db.close()


def _wait_for_runs(runs: Path, expected: set[str]) -> set[str]:
    deadline = time.monotonic() + RUNS_TIMEOUT_S
    while time.monotonic() < deadline:
        done = set(_runs(runs))
        if expected <= done:
            return done
        time.sleep(0.2)
    return set(_runs(runs))


def _check(name: str, sent: Sent, runs: Path, home: Path, count: int) -> list[str]:
    problems = []
    recorded = _runs(runs)
    audited = _audited(home)
    if sent.unanswered and name != "kill":
        problems.append(f"{name}: {sent.unanswered} deliveries unanswered")
    missing = set(sent.accepted.values()) - set(recorded)
    if missing:
        problems.append(f"{name}: {len(missing)} accepted deliveries never ran")
    if len(recorded) != len(set(recorded)):
        problems.append(f"{name}: a run was recorded twice")
    twice = [r for r in sent.accepted.values() if audited.get(r) != 1]
    if twice:
        problems.append(f"{name}: {len(twice)} accepted deliveries without exactly one audit record")
    if name != "kill" and len(sent.accepted) != count:
        problems.append(f"{name}: {count - len(sent.accepted)} deliveries not accepted ({sent.statuses})")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=2_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--py-spy", type=Path, default=None, help="write py-spy's samples of the steady pincer serve here")
    args = parser.parse_args()
    count, clients = args.deliveries, args.clients
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pincer-bench-hooks-") as tmp:
        root = Path(tmp)

        home, runs = _home(root, "steady")
        server = _pincer(home, runs)
        try:
            asyncio.run(_send(server.url, 100, clients, "warm"))
            sampler = _sample(server.process.pid, args.py_spy)
            cpu = cpu_s(server.process.pid)
            try:
                steady = asyncio.run(_send(server.url, count, clients, "steady"))
            finally:
                _stop_sampling(sampler)
            _wait_for_runs(runs, set(steady.accepted.values()))
            # Until every run has been handed over and recorded: the background work is pincer's too.
            cpu = cpu_s(server.process.pid) - cpu
        finally:
            _stop(server)
        problems += _check("steady", steady, runs, home, count)

        baseline_server = _start([sys.executable, __file__, "--baseline-server"], _env(root, root / "none.db"))
        try:
            asyncio.run(_send(baseline_server.url, 100, clients, "warm"))
            base_cpu = cpu_s(baseline_server.process.pid)
            baseline = asyncio.run(_send(baseline_server.url, count, clients, "base"))
            base_cpu = cpu_s(baseline_server.process.pid) - base_cpu
        finally:
            _stop(baseline_server)

        home, runs = _home(root, "kill")
        # Each start takes 50 ms (8 at a time): runs queue up behind the deliveries, so the kill
        # finds accepted deliveries whose runs have not started yet.
        server = _pincer(home, runs, start_delay_s=0.05)
        try:
            killed = asyncio.run(_send(server.url, count, clients, "kill", kill=server.process))
            server.process.wait(timeout=STOP_TIMEOUT_S)
        finally:
            _stop(server)
        before_restart = set(_runs(runs))
        restarted = _pincer(home, runs)
        try:
            _wait_for_runs(runs, set(killed.accepted.values()))
        finally:
            _stop(restarted)
        problems += _check("kill", killed, runs, home, count)
        after_restart = set(killed.accepted.values()) - before_restart

    rate, base_rate = count / steady.seconds, count / baseline.seconds
    print(f"webhook deliveries: {count} signed (Standard Webhooks), {clients} concurrent clients, loopback")
    per, base_per = cpu / count * 1e6, base_cpu / count * 1e6
    print(f"{'':34} {'deliveries/s':>12} {'ratio':>7} {'server CPU us/delivery':>23} {'ratio':>7}")
    print(f"{'bare Starlette + HMAC + commit':34} {base_rate:12.0f} {1.0:7.2f} {base_per:23.0f} {1.0:7.2f}")
    print(f"{'pincer serve (persist+audit+202)':34} {rate:12.0f} {rate / base_rate:7.2f} {per:23.0f} "
          f"{base_per / per if per else 0.0:7.2f}")
    print(f"(CPU: the server process's user + system time, pincer's until every run was handed over; "
          f"a busy machine moves it less than wall time; load {Path('/proc/loadavg').read_text().split()[0]})")
    verdict = "every one ran exactly once with one audit record" if not problems else "see the problems below"
    print(f"steady: {len(steady.accepted)} of {count} accepted; {verdict}")
    print(f"SIGKILL at {count // 2} answered: {len(killed.accepted)} accepted before the kill, "
          f"{killed.unanswered} unanswered; {len(after_restart)} of the accepted ones ran only after the restart; {verdict}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    if "--baseline-server" in sys.argv:
        _serve_baseline()
    else:
        raise SystemExit(main())
