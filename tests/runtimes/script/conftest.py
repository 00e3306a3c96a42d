"""Fixtures for the script runtime: real sandboxes, real processes."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pincer.core.values import HostContext, ToolOutput
from pincer.policy.exec_approvals import Ask, ExecApprovalPolicy, Security
from pincer.runtimes.script import Limits, ScriptRuntime, ScriptSettings

FULL = ExecApprovalPolicy(security=Security.FULL, ask=Ask.OFF)

RunExec = Callable[..., Awaitable[ToolOutput]]


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory the sandbox uid can reach (pytest's tmp_path sits under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="pincer-test-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def settings(public_dir: Path) -> ScriptSettings:
    return ScriptSettings(scratch_root=public_dir / "scratch", exec_policy=FULL)


@pytest.fixture
def run_exec(settings: ScriptSettings) -> RunExec:
    """Run one command line through the exec tool of a fresh runtime, sandboxed (session "agent")."""

    async def run(command: str, *, session: str = "agent", limits: Limits | None = None, **host: Any) -> ToolOutput:
        chosen = settings if limits is None else ScriptSettings(
            scratch_root=settings.scratch_root, exec_policy=settings.exec_policy, exec_limits=limits
        )
        runtime = ScriptRuntime([], chosen)
        spec = next(s for s in runtime.tools() if s.name == "exec")
        context = HostContext(session=session, tool="exec", **host)
        return await runtime.invoke(spec, {"command": command}, context)

    return run


ACCEPT_WAIT_S = 2.0


@pytest.fixture
def loopback_listener():
    """A real TCP listener on the host's loopback that records whether anyone connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(ACCEPT_WAIT_S)
    accepted: list[bool] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
            accepted.append(True)
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()
    thread.join(ACCEPT_WAIT_S + 1)
