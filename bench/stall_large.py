"""Does a large call stall the gateway? Echo calls on an idle gateway next to the same gateway while
another client sends 5 MB echo calls back to back (issue 35 item 4: the leak scan, the schema
check and the size limit of a large value run off the event loop, ``core/offload.py``).

    .venv/bin/python bench/stall_large.py [--calls 300] [--mb 5] [--src DIR]

One ``pincer serve`` under a throwaway PINCER_HOME (``[gateway] max_body_bytes`` raised so a 5 MB
body is taken). Measured one after the other: ``--calls`` sequential small ``echo`` calls over
REST on one keep-alive connection with nothing else going on; then the same while a second client
sends ``echo`` calls whose argument is ``--mb`` MB of pincer's own source (text that looks like
tool output) one after another. Printed: p50 and p99 of each phase, the ratio of the loaded p99 to
the idle one, the large calls finished meanwhile, and the gateway's CPU seconds in each phase.

``--src DIR``: run the gateway from another checkout's ``src`` (``git archive main src | tar -x
-C /tmp/before``), to see the chain before the change in the same way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._procs import cpu_s  # noqa: E402
from bench._stats import percentile  # noqa: E402
from bench.stall import echo_latencies  # noqa: E402
from tests.gateway.conftest import pincer_serve  # noqa: E402

PINCER_BIN = Path(sys.executable).with_name("pincer")
CALL_TIMEOUT_S = 600.0  # a large call on the chain before the change takes seconds on a loaded machine
WARMUP_CALLS = 30


def _large_text(mb: float) -> str:
    source = "".join(p.read_text() for p in sorted((ROOT / "src" / "pincer").rglob("*.py")))
    size = int(mb * 1024 * 1024)
    return (source * (size // len(source) + 1))[:size]


def _client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, trust_env=False, timeout=CALL_TIMEOUT_S, headers={"Authorization": f"Bearer {token}"})


def _large_calls(url: str, token: str, text: str, stop: threading.Event, started: threading.Event, done: list[float]) -> None:
    with _client(url, token) as http:
        while not stop.is_set():
            began = time.perf_counter()
            started.set()
            answer = http.post("/api/v1/tools/echo/call", json={"args": {"text": text}})
            answer.raise_for_status()
            assert answer.json().get("ok"), answer.text[:300]
            done.append(time.perf_counter() - began)


def _row(name: str, took: list[float], cpu: float, wall: float) -> str:
    return (f"  {name:<36} p50 {statistics.median(took):8.2f} ms   p99 {percentile(took, 99):8.2f} ms   "
            f"gateway CPU {cpu:6.2f} s in {wall:6.2f} s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--src", type=Path, default=None, help="run the gateway from this src directory")
    args = parser.parse_args()
    if args.src is not None:
        os.environ["PYTHONPATH"] = str(args.src.resolve())
    text = _large_text(args.mb)
    load = os.getloadavg()[0]
    print(f"{args.calls} sequential echo calls over REST per phase, beside {args.mb:g} MB echo calls; "
          f"{os.cpu_count()} cores, load {load:.1f}; gateway from {args.src or 'this checkout'}")  # fmt: skip
    home = Path(tempfile.mkdtemp(prefix="pincer-bench-stall-large-"))
    try:
        body_limit = int(args.mb * 1024 * 1024 * 2) + 65_536
        (home / "config.toml").write_text(f"[triggers]\nenabled = false\n\n[gateway]\nmax_body_bytes = {body_limit}\n")
        with pincer_serve(home, pincer=PINCER_BIN) as server:
            url, token, pid = server.info["url"], server.token, server.process.pid
            cpu, wall = cpu_s(pid), time.perf_counter()
            idle = echo_latencies(url, token, args.calls, warmup=WARMUP_CALLS, timeout_s=CALL_TIMEOUT_S)
            idle_cpu, idle_wall = cpu_s(pid) - cpu, time.perf_counter() - wall
            stop, started = threading.Event(), threading.Event()
            finished: list[float] = []
            sender = threading.Thread(target=_large_calls, args=(url, token, text, stop, started, finished), daemon=True)
            sender.start()
            started.wait(timeout=CALL_TIMEOUT_S)
            time.sleep(0.5)  # the first large body is on its way in
            cpu, wall = cpu_s(pid), time.perf_counter()
            loaded = echo_latencies(url, token, args.calls, warmup=WARMUP_CALLS, timeout_s=CALL_TIMEOUT_S)
            loaded_cpu, loaded_wall = cpu_s(pid) - cpu, time.perf_counter() - wall
            stop.set()
            sender.join(timeout=CALL_TIMEOUT_S)
        ratio = percentile(loaded, 99) / percentile(idle, 99)
        print(_row("idle gateway", idle, idle_cpu, idle_wall))
        print(_row(f"beside {args.mb:g} MB calls", loaded, loaded_cpu, loaded_wall))
        each = f", {statistics.median(finished):.2f} s each (median)" if finished else ""
        print(f"  loaded p99 / idle p99: {ratio:.2f}x; large calls finished meanwhile: {len(finished)}{each}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
