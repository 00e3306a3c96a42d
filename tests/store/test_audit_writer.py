"""Audit commits run in the database's writer thread, never on the event loop's: concurrent
callers still share a transaction, every append returns only once its record is committed
(another connection reads it), the chain stays in order and verifies, and a leader cancelled
while it gathers still commits for the callers waiting on it. ``[audit] synchronous = "full"``
makes every commit durable against power loss (an fsync each) on the same path."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.service import Pincer
from pincer.store import AuditEntry
from tests.funcruntime import FuncRuntime
from tests.store.conftest import Opener

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


async def test_commits_run_off_the_loop_thread_grouped_and_in_order(tmp_path: Path, opened: Opener) -> None:
    threads: list[int] = []
    begins: list[str] = []

    def trace(statement: str) -> None:
        if statement.startswith("INSERT INTO audit "):
            threads.append(threading.get_ident())
        elif statement.startswith("BEGIN"):
            begins.append(statement)

    log = await opened.audit(tmp_path, key=KEY, synchronous="FULL", trace=trace)
    begins.clear()
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
    assert await log.verify() == CALLERS
    assert await log.append(_entry(99)) == CALLERS + 1 and await log.verify() == CALLERS + 1


async def test_a_cancelled_leader_still_commits_for_the_callers_waiting_on_it(tmp_path: Path, opened: Opener) -> None:
    log = await opened.audit(tmp_path, key=KEY)
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
    assert await log.verify() == 3


async def test_synchronous_full_in_config_commits_every_record_before_its_call_returns(tmp_path: Path) -> None:
    config = parse_config('[audit]\nsynchronous = "full"\n', home=tmp_path)
    runtime = FuncRuntime()

    async def echo(args: object, host: object) -> object:
        return "ok"

    runtime.add("echo", echo)
    async with Pincer.open(tmp_path, config=config, secret_key=b"k" * 32, builtins=False, scripts=False, wasm=False) as pincer:
        await pincer.add_runtime(runtime)
        with sqlite3.connect(tmp_path / "pincer.db") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        results = []
        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(lambda: _call(pincer, results))
        assert all(r.ok for r in results) and len(results) == 8
        assert await pincer.audit.verify() == 8


async def _call(pincer: Pincer, results: list[object]) -> None:
    result = await pincer.call(CallRequest(tool="echo", args={}))
    assert result.audit_id is not None and _committed(pincer.home / "pincer.db", result.audit_id)
    results.append(result)
