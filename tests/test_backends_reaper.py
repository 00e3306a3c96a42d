"""A test process killed from outside leaves no PostgreSQL or Redis behind (tests/backends.py's reaper)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 60.0

_START = """
import sys
from tests.backends import postgres_server, redis_server
redis = redis_server()
postgres = postgres_server()
print(redis.pid, postgres.pid, flush=True)
sys.stdin.read()
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_servers_of_a_killed_test_process_are_stopped() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _START], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        redis_pid, postgres_pid = (int(pid) for pid in line.split())
        assert _running(redis_pid) and _running(postgres_pid)
        process.send_signal(signal.SIGKILL)  # no atexit, no finally: only the reaper can act
        process.wait(timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and (_running(redis_pid) or _running(postgres_pid)):
            time.sleep(0.1)
        assert not _running(redis_pid), f"Redis (pid {redis_pid}) still running {WAIT_S:g} s after its test process was killed"
        assert not _running(postgres_pid), (
            f"PostgreSQL (pid {postgres_pid}) still running {WAIT_S:g} s after its test process was killed"
        )
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=WAIT_S)
        if process.stdin is not None:
            process.stdin.close()
        if process.stdout is not None:
            process.stdout.close()
