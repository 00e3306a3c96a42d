"""The sandbox dies with its parent: kill the pincer process and nothing it started survives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .helpers import marker, processes_with

START_WAIT_S = 20.0
DEATH_WAIT_S = 5.0
_POLL_S = 0.05

CHILD = """
import sys, anyio
from pathlib import Path
from pincer.core.values import HostContext
from pincer.policy.exec_approvals import Ask, ExecApprovalPolicy, Security
from pincer.runtimes.script import ScriptRuntime, ScriptSettings

async def main():
    settings = ScriptSettings(scratch_root=Path(sys.argv[1]),
                              exec_policy=ExecApprovalPolicy(security=Security.FULL, ask=Ask.OFF))
    runtime = ScriptRuntime([], settings)
    await runtime.invoke(runtime.tools()[0], {"command": f"setsid sh -c 'sleep 100; echo {sys.argv[2]}' & sleep 100 # {sys.argv[2]}"},
                         HostContext(session="agent", tool="exec", timeout_s=60))

anyio.run(main)
"""


def _wait_for(predicate, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(_POLL_S)
    return False


def _grandchild_running(token: str) -> bool:
    for pid in processes_with(token):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sh\0-c\0sleep 100; echo "):
                return True
        except OSError:
            pass
    return False


def test_killing_pincer_kills_the_sandbox(public_dir: Path) -> None:
    token = marker()
    parent = subprocess.Popen([sys.executable, "-c", CHILD, str(public_dir / "scratch"), token])
    try:
        # Wait until the command itself runs (its setsid grandchild exists), past bwrap's own setup.
        assert _wait_for(lambda: _grandchild_running(token), START_WAIT_S), "the sandboxed command never started"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _wait_for(lambda: processes_with(token) == [], DEATH_WAIT_S), processes_with(token)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
