"""A stdio server is ended even when its transport's shutdown is cancelled natively.

The transport's shutdown runs in an anyio shield, but on asyncio a native ``task.cancel()`` goes
through it: asyncio's runner cancels every task when a test's event loop closes, and a retired MCP
session slow to stop is cancelled by ``_retire``. Before, such a second cancel cut the shutdown
short just after it closed the server's stdin: the lifeline stayed open, so the supervisor and the
server kept running, and the subprocess transport, its two read pipes and a memory stream were
left to the garbage collector, whose seven ResourceWarnings then failed an unrelated test of a
later file (the CI failure of tests/people/test_person_mcp_instances.py that passes alone)."""

from __future__ import annotations

import asyncio
import gc
import sys
import warnings
from pathlib import Path

import anyio
import pytest

from pincer.runtimes.mcp import ServerConnection
from pincer.runtimes.mcp import connection as connection_module
from pincer.runtimes.mcp.stdio import StdioLaunch, StdioTransport
from tests.leaks import child_processes
from tests.runtimes.mcp.conftest import CALL_TIMEOUT_S, WAIT_S, faulty_config, pid_alive

pytestmark = pytest.mark.anyio

# A server that reads its stdin to EOF, says so in a file, and then does not exit: its transport's
# shutdown waits out the close grace period, which is where the second cancel lands.
LINGERER = "import sys, time; sys.stdin.buffer.read(); open(sys.argv[1], 'w').close(); time.sleep(600)"
GONE_TIMEOUT_S = 30.0  # the supervisor's own SIGTERM grace and SIGKILL rounds, on a loaded machine


async def _until(what: str, done: object, timeout_s: float = WAIT_S) -> None:
    with anyio.fail_after(timeout_s):
        while not done():  # type: ignore[operator]
            await anyio.sleep(0.01)
    assert done(), what  # type: ignore[operator]


async def test_a_native_cancel_during_shutdown_still_ends_the_server_and_closes_everything(tmp_path: Path) -> None:
    eof_seen = tmp_path / "stdin-closed"
    transport = StdioTransport(
        StdioLaunch(server="lingerer", command=sys.executable, args=("-c", LINGERER, str(eof_seen)))
    )
    entered = anyio.Event()

    async def hold() -> None:
        async with transport:
            entered.set()
            await anyio.sleep_forever()

    task = asyncio.get_running_loop().create_task(hold())
    with anyio.fail_after(WAIT_S):
        await entered.wait()
    supervisor = transport.pid
    assert supervisor is not None
    await _until("the supervisor did not start the server", lambda: child_processes(supervisor))
    (server,) = child_processes(supervisor)

    task.cancel()  # the first cancel: the transport's shielded shutdown begins by closing stdin
    await _until("the server never saw its stdin close", eof_seen.exists)
    task.cancel()  # the second, natively, while the shutdown waits for the server to exit
    with anyio.fail_after(GONE_TIMEOUT_S):
        await asyncio.wait({task})
    assert task.cancelled()  # the cancel still reaches the caller

    await _until("the server outlived its cancelled transport", lambda: not pid_alive(server), GONE_TIMEOUT_S)
    await _until("the supervisor outlived its cancelled transport",
                 lambda: supervisor not in child_processes(), GONE_TIMEOUT_S)  # fmt: skip
    assert transport.returncode is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del task
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_a_session_retired_while_its_server_is_slow_to_stop_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_retire`` waits CLOSE_TIMEOUT_S for a stopping session, then cancels its task natively;
    on a loaded machine the transport's own bounded stop (2 s stdin grace, then the supervisor's)
    can take longer. Before, that cancel left the server and its supervisor running."""
    eof_seen = tmp_path / "stdin-closed"
    conn = ServerConnection(faulty_config("faulty", "--linger", str(eof_seen)))
    with anyio.fail_after(CALL_TIMEOUT_S):
        await conn.start()
    supervisor = conn.pid
    assert supervisor is not None
    (server,) = child_processes(supervisor)
    # The cancel lands inside the transport's stop, which waits out the stdin grace for this server.
    monkeypatch.setattr(connection_module, "CLOSE_TIMEOUT_S", 0.2)
    with anyio.fail_after(GONE_TIMEOUT_S):
        await conn.aclose()
    assert eof_seen.exists()  # its stdin was closed: the stop had begun
    await _until("the server outlived its retired session", lambda: not pid_alive(server), GONE_TIMEOUT_S)
    await _until("the supervisor outlived its retired session",
                 lambda: supervisor not in child_processes(), GONE_TIMEOUT_S)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
