"""With a writer connection (``[audit] synchronous = "full"``), audit commits run in a worker
thread: never on the event loop's thread, concurrent callers still share a transaction, every
append returns only once its record is committed (another connection reads it), and the chain
stays in order and verifies."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.service import Pincer
from pincer.store import AuditEntry, AuditLog, open_database
from tests.funcruntime import FuncRuntime

pytestmark = pytest.mark.anyio

KEY = b"w" * 32
CALLERS = 24


def _entry(i: int) -> AuditEntry:
    return AuditEntry(session="main", caller="test", tool="t", decision="allow", reason="r", outcome="ok", args={"i": i})


def _committed(db: Path, record_id: int) -> bool:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT 1 FROM audit WHERE id = ?", (record_id,)).fetchone() is not None
    finally:
        conn.close()


async def test_commits_run_off_the_loop_thread_grouped_and_in_order(tmp_path: Path) -> None:
    writer = open_database(tmp_path, synchronous="FULL")
    threads: list[int] = []
    begins: list[str] = []

    def trace(statement: str) -> None:
        if statement.startswith("INSERT INTO audit "):
            threads.append(threading.get_ident())
        elif statement.startswith("BEGIN"):
            begins.append(statement)

    writer.set_trace_callback(trace)
    log = AuditLog(open_database(tmp_path), key=KEY, writer=writer)
    loop_thread = threading.get_ident()
    ids: list[int] = []

    async def caller(i: int) -> None:
        record_id = await log.append(_entry(i))
        assert _committed(tmp_path / "pincer.db", record_id)  # committed before the append returned
        ids.append(record_id)

    async with anyio.create_task_group() as group:
        for i in range(CALLERS):
            group.start_soon(caller, i)
    assert sorted(ids) == list(range(1, CALLERS + 1))
    assert threads and loop_thread not in threads
    assert len(begins) < CALLERS  # callers arriving together shared transactions
    assert log.verify() == CALLERS
    assert log.append_sync(_entry(99)) == CALLERS + 1 and log.verify() == CALLERS + 1


async def test_a_cancelled_leader_still_commits_for_the_callers_waiting_on_it(tmp_path: Path) -> None:
    log = AuditLog(open_database(tmp_path), key=KEY, writer=open_database(tmp_path, synchronous="FULL"))
    done: list[int] = []

    async def follower(i: int) -> None:
        done.append(await log.append(_entry(i)))

    async with anyio.create_task_group() as group:
        with anyio.CancelScope() as scope:
            group.start_soon(follower, 1)
            group.start_soon(follower, 2)
            scope.cancel()
            await log.append(_entry(0))  # cancelled at its gather; still commits
    assert sorted(done) == [2, 3]  # the leader (the cancelled main task) took id 1
    assert log.verify() == 3


async def test_synchronous_full_in_config_puts_the_chain_s_commits_off_the_loop(tmp_path: Path) -> None:
    config = parse_config('[audit]\nsynchronous = "full"\n', home=tmp_path)
    runtime = FuncRuntime()

    async def echo(args: object, host: object) -> object:
        return "ok"

    runtime.add("echo", echo)
    async with Pincer.open(tmp_path, config=config, secret_key=b"k" * 32, builtins=False, scripts=False, wasm=False) as pincer:
        await pincer.add_runtime(runtime)
        assert pincer._writer is not None
        results = []
        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(lambda: _call(pincer, results))
        assert all(r.ok for r in results) and len(results) == 8
        assert pincer.audit.verify() == 8


async def _call(pincer: Pincer, results: list[object]) -> None:
    result = await pincer.call(CallRequest(tool="echo", args={}))
    assert result.audit_id is not None and _committed(pincer.home / "pincer.db", result.audit_id)
    results.append(result)
