"""The threads SQLite's connections live on (store/sql/workers.py): a database that cannot be
opened answers every job with why, a caller that gives up leaves the thread serving the next
job, and jobs queued before a close still finish."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from pincer.core.errors import StoreError
from pincer.store.sql.workers import Worker

pytestmark = pytest.mark.anyio
WAIT_S = 30  # a job crossing to the worker's thread and back


def _select_one(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT 1").fetchone()[0])


async def test_a_database_that_cannot_be_opened_answers_every_job_with_why(tmp_path: Path) -> None:
    worker: Worker[sqlite3.Connection] = Worker("test", lambda: sqlite3.connect(tmp_path), lambda c: c.close())
    with anyio.fail_after(WAIT_S):
        for _ in range(2):  # each job, not only the first, hears it
            with pytest.raises(sqlite3.OperationalError, match="unable to open database file"):
                await worker.run(_select_one)
        await worker.aclose()
    with pytest.raises(StoreError, match=r"the database \(test\) is closed"):
        await worker.run(_select_one)


async def test_a_caller_that_gives_up_leaves_the_thread_serving_the_next_job(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    worker: Worker[sqlite3.Connection] = Worker("test", lambda: sqlite3.connect(path), lambda c: c.close())
    started, release = threading.Event(), threading.Event()

    def slow(conn: sqlite3.Connection) -> int:
        started.set()
        release.wait(WAIT_S)
        return _select_one(conn)

    async def give_up_once_it_runs(scope: anyio.CancelScope) -> None:
        await anyio.to_thread.run_sync(started.wait, WAIT_S)
        scope.cancel()

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(give_up_once_it_runs, scope)
            await worker.run(slow)  # cancelled while the thread runs it
        assert scope.cancelled_caught and started.is_set()
    release.set()  # the job ends after its caller left: its answer goes nowhere
    with anyio.fail_after(WAIT_S):
        assert await worker.run(_select_one) == 1
        await worker.aclose()


async def test_jobs_queued_before_a_close_still_finish(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    worker: Worker[sqlite3.Connection] = Worker("test", lambda: sqlite3.connect(path), lambda c: c.close(), threads=2)
    results: list[int] = []

    async def one() -> None:
        results.append(await worker.run(_select_one))

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(one)
            await anyio.sleep(0)  # queued
            tg.start_soon(worker.aclose)
    assert results == [1] * 6
