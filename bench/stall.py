"""Does a busy dashboard stall the gateway? Echo calls on an idle gateway next to the same gateway
with 5 open approvals pages and a running audit verify, over 100,000 approvals and 100,000 audit
records, on SQLite and on PostgreSQL (issue 35 item 4; target: loaded p99 at most 2x idle p99).

    .venv/bin/python bench/stall.py [--calls 400] [--records 100000] [--backend sqlite|postgres|both]

Per backend: a throwaway PINCER_HOME (PostgreSQL: a database of the server the tests start, on a
loopback port), filled through pincer's own stores (the audit log's group commit; the approvals
as rows of answered requests), then one ``pincer serve``. Measured there, one after the other:
``--calls`` sequential ``POST /api/v1/tools/echo/call`` on one keep-alive connection with nothing
else going on; then the same with 5 signed-in dashboard clients each holding
``/ui/approvals/events`` open (having loaded the page once, as a browser does) and a client
running ``GET /api/v1/audit/verify?full=1`` (a walk of every record) back to back. Printed: p50
and p99 of each phase, the ratio of the loaded p99 to the idle one, and how many full verifies
finished during the loaded phase.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
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

from bench._stats import percentile  # noqa: E402
from tests.backends import postgres_server  # noqa: E402
from tests.gateway.conftest import pincer_serve  # noqa: E402

PINCER_BIN = Path(sys.executable).with_name("pincer")
PAGES = 5
CALL_TIMEOUT_S = 120.0
WARMUP_CALLS = 50
SEED_CHUNK = 2_000
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    return {**env, "PINCER_HOME": str(home)}


def _home(backend: str) -> Path:
    home = Path(tempfile.mkdtemp(prefix=f"pincer-bench-stall-{backend}-"))
    config = "[triggers]\nenabled = false\n"
    if backend == "postgres":
        config += f'\n[store]\nurl = "{postgres_server().new_database()}"\n'
    (home / "config.toml").write_text(config)
    if backend == "postgres":
        subprocess.run([str(PINCER_BIN), "db", "upgrade"], env=_env(home), check=True, capture_output=True)
    return home


async def _seed(home: Path, records: int) -> None:
    """``records`` audit records (appended as calls append them) and as many answered approvals."""
    from pincer.cli.common import open_pincer
    from pincer.store.audit import AuditEntry
    from pincer.store.sql import Sql

    os.environ["PINCER_HOME"] = str(home)
    insert = Sql(
        "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
        "answered_at, answered_by, session_kind, detail, closed_at) VALUES (:id, :created_at, :expires_at, 'main', "
        "'write_file', '{\"path\": \"x.txt\"}', '[\"write\"]', '[]', 'asks by default', 'deny', :answered_at, 'bench', "
        "'main', '{}', :answered_at)"
    )
    async with open_pincer(builtins=False, quiet=True) as pincer:
        now = time.time() - records
        for start in range(0, records, SEED_CHUNK):
            rows = [{"id": f"{i:032x}", "created_at": now + i, "expires_at": now + i + 60, "answered_at": now + i + 1}
                    for i in range(start, min(records, start + SEED_CHUNK))]  # fmt: skip
            await pincer.db.execute_many(insert, rows)
            async with anyio.create_task_group() as tg:  # appended together: one transaction a chunk
                for i in range(start, min(records, start + SEED_CHUNK)):
                    tg.start_soon(pincer.audit.append, AuditEntry(
                        session="main", caller="bench", tool="echo", decision="allow", reason="allowed by policy",
                        outcome="ok", args={"text": f"seed {i}"}, duration_ms=0.1,
                    ))  # fmt: skip


def echo_latencies(url: str, token: str, calls: int, *, warmup: int = WARMUP_CALLS,
                   timeout_s: float = CALL_TIMEOUT_S) -> list[float]:  # fmt: skip
    """``calls`` echo calls over REST one after another (after ``warmup`` more), each one's ms."""
    with httpx.Client(base_url=url, trust_env=False, timeout=timeout_s,
                      headers={"Authorization": f"Bearer {token}"}) as http:  # fmt: skip
        for i in range(warmup):
            http.post("/api/v1/tools/echo/call", json={"args": {"text": f"warm {i}"}}).raise_for_status()
        took = []
        for i in range(calls):
            began = time.perf_counter()
            http.post("/api/v1/tools/echo/call", json={"args": {"text": f"call {i}"}}).raise_for_status()
            took.append((time.perf_counter() - began) * 1000)
    return took


def _open_page(url: str, token: str, stop: threading.Event, opened: threading.Barrier) -> None:
    with httpx.Client(base_url=url, trust_env=False, timeout=CALL_TIMEOUT_S) as http:
        form = _CSRF.search(http.get("/ui/login").text)
        assert form, "no login form"
        http.post("/ui/login", data={"token": token, "csrf_token": form.group(1)})
        http.get("/ui/approvals").raise_for_status()
        try:
            with http.stream("GET", "/ui/approvals/events") as stream:
                opened.wait()
                for _ in stream.iter_lines():
                    if stop.is_set():
                        return
        except httpx.HTTPError:
            return


def _verify_on(url: str, token: str, stop: threading.Event, done: list[int]) -> None:
    with httpx.Client(
        base_url=url, trust_env=False, timeout=None, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        while not stop.is_set():
            answer = http.get("/api/v1/audit/verify", params={"full": "1"}).json()
            assert answer.get("ok"), answer
            done.append(int(answer["records"]))


def _row(name: str, took: list[float]) -> str:
    return f"  {name:<44} p50 {statistics.median(took):7.2f} ms   p99 {percentile(took, 99):7.2f} ms"


def measure(backend: str, calls: int, records: int) -> float:
    home = _home(backend)
    try:
        began = time.perf_counter()
        anyio.run(_seed, home, records)
        print(
            f"{backend}: {records:,} audit records and {records:,} approvals seeded in {time.perf_counter() - began:.0f} s"
        )
        with pincer_serve(home, pincer=PINCER_BIN) as server:
            url, token = server.info["url"], server.token
            idle = echo_latencies(url, token, calls)
            stop = threading.Event()
            opened = threading.Barrier(PAGES + 1)
            verifies: list[int] = []
            threads = [
                threading.Thread(target=_open_page, args=(url, token, stop, opened), daemon=True) for _ in range(PAGES)
            ]
            for thread in threads:
                thread.start()
            opened.wait(timeout=CALL_TIMEOUT_S)
            verifier = threading.Thread(target=_verify_on, args=(url, token, stop, verifies), daemon=True)
            verifier.start()
            time.sleep(0.5)  # the first verify is under way
            loaded = echo_latencies(url, token, calls)
            stop.set()
            verifier.join(timeout=CALL_TIMEOUT_S)
        ratio = percentile(loaded, 99) / percentile(idle, 99)
        print(_row("idle gateway", idle))
        print(_row(f"{PAGES} approvals pages + a running full verify", loaded))
        print(f"  loaded p99 / idle p99: {ratio:.2f}x (target <= 2x); full verifies of {records:,} records "
              f"finished meanwhile: {len(verifies)}")  # fmt: skip
        return ratio
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args()
    print(
        f"{args.calls} sequential echo calls over REST per phase, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        measure(backend, args.calls, args.records)


if __name__ == "__main__":
    main()
