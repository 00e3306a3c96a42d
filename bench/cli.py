"""How fast the CLI answers: start-up of a few commands next to bare Python, in the same run.

    .venv/bin/python bench/cli.py [--runs 15]

Medians over ``--runs`` fresh processes of ``pincer --version``, ``pincer token``, ``pincer tools
list --json`` (a throwaway PINCER_HOME, so only the built-in, script and exec tools) and ``pincer
mcp stdio`` until it answers an ``initialize`` written to its stdin (and, a second row, the
``tools/list`` a client sends after it), next to ``python -c pass`` and
``python -c "import typer"``. Targets (issue 11 item 3): --version <= 0.25 s, token and tools list
<= 0.5 s (tools list <= 0.4 s, issue 39), mcp stdio <= 0.6 s (issue 23: initialize and tools/list); printed as ratios to ``import typer``, the floor any typer CLI pays.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN_TIMEOUT_S = 60.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench-cli", "version": "0"},
    },
}


def pincer_argv() -> list[str]:
    """The installed console script when there is one (what users run), else ``-m pincer.cli``."""
    script = Path(sys.executable).with_name("pincer")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pincer.cli"]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run; CPU time moves less with a busy machine's load."""
    cpu, started = children_cpu_s(), time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=RUN_TIMEOUT_S)
    return time.perf_counter() - started, children_cpu_s() - cpu


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def timed_initialize(argv: list[str], env: dict[str, str], *, through_tools_list: bool = False) -> tuple[float, float]:
    """Spawn to the response line of ``initialize`` (or, ``through_tools_list``, of the
    ``tools/list`` sent after it and ``notifications/initialized``, as a client does); then close
    stdin and reap the child. The CPU time is the whole child's (with its shutdown)."""
    cpu, started = children_cpu_s(), time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert child.stdin is not None and child.stdout is not None
    messages = [INITIALIZE, INITIALIZED, TOOLS_LIST] if through_tools_list else [INITIALIZE]
    awaited = 2 if through_tools_list else 1
    try:
        child.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        child.stdin.flush()
        while True:
            line = child.stdout.readline()
            if not line:
                raise RuntimeError("pincer mcp stdio exited before answering")
            message = json.loads(line)
            if message.get("id") == awaited:
                elapsed = time.perf_counter() - started
                break
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return elapsed, children_cpu_s() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    home = Path(tempfile.mkdtemp(prefix="pincer-bench-cli-"))
    # PYTHONDONTWRITEBYTECODE would compile every module on every start (no .pyc), which no
    # installed pincer does: the warm-up run writes the .pyc files (they are git-ignored).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PINCER_HOME"] = str(home)
    pincer = pincer_argv()
    cases: list[tuple[str, float | None, object]] = [
        ("python -c pass", None, lambda: timed_run([sys.executable, "-c", "pass"], env)),
        ("python -c 'import typer'", None, lambda: timed_run([sys.executable, "-c", "import typer"], env)),
        ("pincer --version", 0.25, lambda: timed_run([*pincer, "--version"], env)),
        ("pincer token", 0.5, lambda: timed_run([*pincer, "token"], env)),
        ("pincer tools list --json", 0.4, lambda: timed_run([*pincer, "tools", "list", "--json"], env)),
        ("pincer mcp stdio -> initialize", 0.6, lambda: timed_initialize([*pincer, "mcp", "stdio"], env)),
        (
            "pincer mcp stdio -> tools/list",
            0.6,
            lambda: timed_initialize([*pincer, "mcp", "stdio"], env, through_tools_list=True),
        ),
    ]
    try:
        # One warm-up of each fills the OS page cache and pincer's first-start files (token, db).
        for _label, _target, fn in cases:
            fn()  # type: ignore[operator]
        wall: dict[str, list[float]] = {label: [] for label, _t, _f in cases}
        cpu: dict[str, list[float]] = {label: [] for label, _t, _f in cases}
        # Interleaved, so a burst of load on a shared machine hits every case alike.
        for _ in range(runs):
            for label, _target, fn in cases:
                seconds, cpu_seconds = fn()  # type: ignore[operator]
                wall[label].append(seconds)
                cpu[label].append(cpu_seconds)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    typer_wall = statistics.median(wall["python -c 'import typer'"])
    typer_cpu = statistics.median(cpu["python -c 'import typer'"])
    print(f"{'command':34} {'median s':>9} {'min s':>7} {'x typer':>8} {'cpu s':>7} {'x typer':>8} {'target s':>9}")
    for label, target, _fn in cases:
        median, cpu_median = statistics.median(wall[label]), statistics.median(cpu[label])
        shown_target = f"{target:.2f}" if target is not None else "-"
        print(
            f"{label:34} {median:9.3f} {min(wall[label]):7.3f} {median / typer_wall:8.2f} "
            f"{cpu_median:7.3f} {cpu_median / typer_cpu:8.2f} {shown_target:>9}"
        )
    print(f"({runs} runs each, interleaved; wall and CPU (user+sys) medians; {pincer[0]}; load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
