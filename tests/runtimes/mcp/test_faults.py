"""Fault tests against a real misbehaving server: each failure is a clear error within its
timeout, and the next call succeeds once the server is back. The mid-call faults run on both
paths of ``tools/call``: the SDK's client session and the lean path (runtimes/mcp/lean.py)."""

from __future__ import annotations

import itertools
import os
import signal
from pathlib import Path

import anyio
import pytest

from pincer.core.errors import RuntimeUnavailable, ToolError, ToolTimeout
from pincer.runtimes.mcp import ServerConnection
from pincer.runtimes.mcp import connection as connection_module
from tests.runtimes.mcp.conftest import CALL_TIMEOUT_S, WAIT_S, faulty_config, pid_alive

pytestmark = pytest.mark.anyio

SHORT_TIMEOUT_S = 1.0  # the per-call timeout of the hang tests
PROBE_TIMEOUT_S = 1.0
BOTH_PATHS = pytest.mark.parametrize("lean", [False, True], ids=["sdk", "lean"])


async def text_of(conn: ServerConnection, tool: str, args: dict | None = None, timeout_s: float = CALL_TIMEOUT_S) -> str:
    result = await conn.call_tool(tool, args or {}, timeout_s=timeout_s)
    return "".join(block.text for block in result.content if block.type == "text")


async def wait_for_file(path: Path) -> None:
    with anyio.fail_after(WAIT_S):
        while not path.exists():
            await anyio.sleep(0.01)


@BOTH_PATHS
async def test_kill_9_mid_call_fails_the_call_and_the_next_call_restarts(lean: bool, tmp_path: Path) -> None:
    conn = ServerConnection(faulty_config(), lean=lean)
    try:
        first_pid = int(await text_of(conn, "pid"))
        marker = tmp_path / "arrived"
        errors: list[BaseException] = []

        async def slow_call() -> None:
            try:
                await text_of(conn, "slow", {"seconds": 60, "marker": str(marker)})
            except ToolError as exc:
                errors.append(exc)

        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                await wait_for_file(marker)
                os.kill(first_pid, signal.SIGKILL)
        assert len(errors) == 1
        message = str(errors[0])
        assert "killed by signal 9" in message and "slow" in message
        assert not isinstance(errors[0], ToolTimeout)
        with anyio.fail_after(WAIT_S):
            assert await text_of(conn, "echo", {"text": "back"}) == "back"
        assert int(await text_of(conn, "pid")) != first_pid
    finally:
        await conn.aclose()


@BOTH_PATHS
async def test_crash_mid_call_reports_the_exit_status(lean: bool, tmp_path: Path) -> None:
    conn = ServerConnection(faulty_config(), lean=lean)
    try:
        with anyio.fail_after(WAIT_S), pytest.raises(ToolError, match="exited with status 3 during the call to crash"):
            await text_of(conn, "crash")
        assert await text_of(conn, "echo", {"text": "again"}) == "again"
        assert conn.status().failures == 1
    finally:
        await conn.aclose()


@BOTH_PATHS
async def test_a_hung_call_times_out_and_the_live_server_is_kept(lean: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_module, "PROBE_TIMEOUT_S", PROBE_TIMEOUT_S)
    conn = ServerConnection(faulty_config(), lean=lean)
    try:
        pid = int(await text_of(conn, "pid"))
        with anyio.fail_after(SHORT_TIMEOUT_S + WAIT_S), pytest.raises(ToolTimeout, match="hang did not answer within 1 s"):
            await text_of(conn, "hang", timeout_s=SHORT_TIMEOUT_S)
        # The probe finds the server answering: same process, next call fine.
        assert int(await text_of(conn, "pid")) == pid
    finally:
        await conn.aclose()


@BOTH_PATHS
async def test_a_frozen_server_is_restarted_after_the_probe(lean: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_module, "PROBE_TIMEOUT_S", PROBE_TIMEOUT_S)
    conn = ServerConnection(faulty_config(), lean=lean)
    try:
        pid = int(await text_of(conn, "pid"))
        with anyio.fail_after(SHORT_TIMEOUT_S + WAIT_S), pytest.raises(ToolTimeout):
            await text_of(conn, "freeze", timeout_s=SHORT_TIMEOUT_S)
        with anyio.fail_after(WAIT_S):
            new_pid = int(await text_of(conn, "pid"))
        assert new_pid != pid
        with anyio.fail_after(WAIT_S):
            while pid_alive(pid):
                await anyio.sleep(0.01)
    finally:
        await conn.aclose()


@BOTH_PATHS
async def test_garbage_on_stdout_ends_the_connection_with_the_line_in_the_error(lean: bool) -> None:
    conn = ServerConnection(faulty_config(), lean=lean)
    try:
        pid = int(await text_of(conn, "pid"))
        with anyio.fail_after(WAIT_S), pytest.raises(ToolError, match="not JSON-RPC on stdout: 'this is not json-rpc'"):
            await text_of(conn, "garbage")
        assert await text_of(conn, "echo", {"text": "clean"}) == "clean"
        assert int(await text_of(conn, "pid")) != pid
    finally:
        await conn.aclose()


async def test_no_answer_to_initialize_then_the_server_comes_back(tmp_path: Path) -> None:
    flag = tmp_path / "silent"
    flag.touch()
    conn = ServerConnection(faulty_config("faulty", "--silent-if", str(flag), connect_timeout_s=SHORT_TIMEOUT_S))
    try:
        with anyio.fail_after(SHORT_TIMEOUT_S + WAIT_S):
            with pytest.raises(RuntimeUnavailable, match="no answer to initialize within 1 s"):
                await text_of(conn, "echo", {"text": "x"})
        status = conn.status()
        assert status.state == "failed" and status.failures == 1
        flag.unlink()
        with anyio.fail_after(WAIT_S):
            assert await text_of(conn, "echo", {"text": "up"}) == "up"
        assert conn.status().state == "running"
    finally:
        await conn.aclose()


async def test_repeated_failures_back_off_and_say_when_the_next_start_is(tmp_path: Path) -> None:
    conn = ServerConnection(faulty_config("gone", command=str(tmp_path / "no-such-program")))
    try:
        with anyio.fail_after(WAIT_S):
            with pytest.raises(RuntimeUnavailable, match="cannot run") as first:
                await text_of(conn, "echo", {"text": "x"})
            assert "no-such-program" in str(first.value)
            with pytest.raises(RuntimeUnavailable):
                await text_of(conn, "echo", {"text": "x"})
            # Two failures: the next start waits BACKOFF_INITIAL_S; a call that cannot wait that
            # long is told so instead of waiting.
            with pytest.raises(RuntimeUnavailable, match="failed 2 times in a row.*next start is in"):
                await text_of(conn, "echo", {"text": "x"}, timeout_s=0.01)
    finally:
        await conn.aclose()


def test_backoff_grows_and_is_capped() -> None:
    delays = [connection_module.backoff_delay(n) for n in range(1, 12)]
    assert delays[0] == 0.0
    assert delays[1] == connection_module.BACKOFF_INITIAL_S
    assert all(b >= a for a, b in itertools.pairwise(delays))
    assert delays[-1] == connection_module.BACKOFF_MAX_S
