"""The SQLite driver's notifications hear other processes: a commit made by another process on
the same pincer.db reaches every listener of the file here as RESYNC (read again), while this
process's own commits, through this database object or another one of the file, are told only
by their own notices. The watch costs nothing without a listener.

Before: the SQLite notifications were an in-process signal only, so a listener never heard of
another process's commit (a waiter found it at its next fallback read).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from pincer.store.sql import RESYNC, Sql, open_sqlite
from pincer.store.sql.sqlite import SqliteDatabase

pytestmark = pytest.mark.anyio

WAIT_S = 20.0
PROCESS_TIMEOUT_S = 60.0
ADD = Sql("INSERT INTO grants (id, created_at, body) VALUES (:id, 0, '{}')")


async def _next(notes: AsyncIterator[str], what: str) -> str:
    try:
        with anyio.fail_after(WAIT_S):
            return await anext(notes)
    except TimeoutError:
        raise AssertionError(f"waited {WAIT_S} s for {what}") from None


async def _commit_in_another_process(home: Path, grant_id: str) -> None:
    """One INSERT committed by a Python process of its own (sqlite3, as any other process)."""
    script = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=30); "
        "c.execute(\"INSERT INTO grants (id, created_at, body) VALUES (?, 0, '{}')\", (sys.argv[2],)); c.commit()"
    )
    with anyio.fail_after(PROCESS_TIMEOUT_S):
        done = await anyio.run_process([sys.executable, "-c", script, str(home / "pincer.db"), grant_id], check=False)
    assert done.returncode == 0, done.stderr.decode()


async def _sqlite(home: Path) -> SqliteDatabase:
    db = await open_sqlite(home)
    assert isinstance(db, SqliteDatabase)
    return db


async def test_a_commit_of_another_process_reaches_every_listener_as_resync(tmp_path: Path) -> None:
    db, sibling = await _sqlite(tmp_path), await _sqlite(tmp_path)
    try:
        async with db.listen("pincer_test") as mine, sibling.listen("pincer_other") as theirs:
            await _commit_in_another_process(tmp_path, "g-far")
            assert await _next(mine, "RESYNC after another process's commit") == RESYNC
            assert await _next(theirs, "RESYNC on the other channel too") == RESYNC
    finally:
        await db.aclose()
        await sibling.aclose()


async def test_this_processes_own_commits_are_told_only_by_their_notices(tmp_path: Path) -> None:
    db, sibling = await _sqlite(tmp_path), await _sqlite(tmp_path)
    try:
        async with db.listen("pincer_test") as notes:
            async with db.transaction() as tx:
                tx.add(ADD, {"id": "g-mine"})
                tx.notify("pincer_test", "mine")
            await db.execute(ADD, {"id": "g-plain"})  # a statement that commits itself
            async with sibling.transaction() as tx:  # another object of this process on the file
                tx.add(ADD, {"id": "g-sibling"})
                tx.notify("pincer_test", "sibling")
            await sibling.execute(ADD, {"id": "g-sibling-plain"})
            # A look now (the watch's periodic ones run in the same thread, in order) finds
            # nothing of another process, and no periodic one told RESYNC before it answered.
            assert await db.look_elsewhere() is False
            assert await sibling.look_elsewhere() is False
            assert [await _next(notes, "the own notices"), await _next(notes, "the sibling's")] == ["mine", "sibling"]
            await db.notify("pincer_test", "marker")
            assert await _next(notes, "the marker right after them, no RESYNC between") == "marker"
            # Another process's commit, by contrast, is told.
            await _commit_in_another_process(tmp_path, "g-far")
            assert await _next(notes, "RESYNC after another process's commit") == RESYNC
    finally:
        await db.aclose()
        await sibling.aclose()


async def test_the_watch_runs_only_while_someone_listens(tmp_path: Path) -> None:
    db = await _sqlite(tmp_path)
    try:
        assert db._writer._tick is None
        async with db.listen("pincer_a"), db.listen("pincer_b"):
            assert db._writer._tick is not None
        await db.look_elsewhere()  # a job after the last listener left: the tick is gone by now
        assert db._writer._tick is None
        # Another process commits while nobody listens: nobody is told later either.
        await _commit_in_another_process(tmp_path, "g-unheard")
        async with db.listen("pincer_a") as notes:
            await db.notify("pincer_a", "first")
            assert await _next(notes, "the first notice after listening again") == "first"
    finally:
        await db.aclose()


async def test_a_listener_outlives_its_closed_database_quietly(tmp_path: Path) -> None:
    db = await _sqlite(tmp_path)
    async with db.listen("pincer_a"):
        await db.aclose()  # the writer's thread stops; leaving the block must not fail
