"""The database seam (store/sql/database.py) on both drivers: every test runs on SQLite and PostgreSQL.

Two database objects made from one backend stand for two processes (two gateways) on one store.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.errors import StoreConflict, StoreError
from pincer.store.sql import RESYNC, Sql, open_postgres, open_sqlite
from tests.backends import postgres_server
from tests.store.conftest import Backend

ADD = Sql("INSERT INTO grants (id, created_at, body) VALUES (:id, :at, :body)")
ALL = Sql("SELECT id, created_at, body FROM grants ORDER BY id")
COUNT = Sql("SELECT COUNT(*) FROM grants")
BUMP = Sql("UPDATE grants_version SET version = version + 1 WHERE one = 1 AND version = :seen")
VERSION = Sql("SELECT version FROM grants_version WHERE one = 1")
WAIT_S = 10.0  # the longest any wait below waits for what it names


def grant(i: int) -> dict[str, Any]:
    return {"id": f"g{i:03d}", "at": float(i), "body": f'{{"i":{i}}}'}


@pytest.mark.anyio
async def test_rows_come_back_as_the_portable_python_values(backend: Backend) -> None:
    db = await backend.db()
    assert await db.execute(ADD, grant(1)) == 1
    assert await db.fetch_all(ALL) == [("g001", 1.0, '{"i":1}')]
    assert await db.fetch_one(VERSION) == (0,)
    assert await db.fetch_one(Sql("SELECT id FROM grants WHERE id = :id"), {"id": "nope"}) is None
    await db.execute_many(ADD, [grant(i) for i in range(2, 5)])
    assert await db.fetch_one(COUNT) == (4,)


@pytest.mark.anyio
async def test_a_transaction_is_all_or_nothing_and_its_queued_writes_go_with_the_commit(backend: Backend) -> None:
    db, other = await backend.db(), await backend.db()
    async with db.transaction() as tx:
        tx.add(ADD, grant(1))
        tx.add_many(ADD, [grant(2), grant(3)])
        assert await tx.fetch_one(COUNT) == (3,)  # its own queued writes, sent before the read
        assert await other.fetch_one(COUNT) == (0,)  # nobody else sees them before the commit
        tx.add(ADD, grant(4))
    assert await other.fetch_one(COUNT) == (4,)
    with pytest.raises(RuntimeError, match="changed its mind"):
        async with db.transaction() as tx:
            tx.add(ADD, grant(5))
            await tx.execute(ADD, grant(6))
            raise RuntimeError("changed its mind")
    assert await other.fetch_one(COUNT) == (4,)


@pytest.mark.anyio
async def test_a_guard_that_does_not_hold_rolls_the_whole_transaction_back(backend: Backend) -> None:
    db, other = await backend.db(), await backend.db()
    async with db.transaction() as tx:
        tx.add(BUMP, {"seen": 0}, rows=1)
        tx.add(ADD, grant(1))
    with pytest.raises(StoreConflict, match="changed 0 rows, not 1"):
        async with other.transaction() as tx:  # another writer, still at the version it saw
            tx.add(ADD, grant(2))
            tx.add(BUMP, {"seen": 0}, rows=1)
    assert await db.fetch_all(ALL) == [("g001", 1.0, '{"i":1}')] and await db.fetch_one(VERSION) == (1,)


@pytest.mark.anyio
async def test_a_cancelled_transaction_is_rolled_back_and_the_database_goes_on(backend: Backend) -> None:
    db = await backend.db()
    with anyio.move_on_after(0.2) as scope:
        async with db.transaction() as tx:
            await tx.execute(ADD, grant(1))
            await anyio.sleep(WAIT_S)
    assert scope.cancelled_caught
    assert await db.fetch_one(COUNT) == (0,)
    await db.execute(ADD, grant(2))
    assert await db.fetch_one(COUNT) == (1,)


@pytest.mark.anyio
async def test_serial_transactions_of_two_processes_run_one_at_a_time(backend: Backend) -> None:
    """Each reads the counter and writes it back one higher: interleaved, they would lose counts."""
    first, second = await backend.db(), await backend.db()

    async def count_up(db: Any) -> None:
        for _ in range(15):
            async with db.transaction(serial="counter") as tx:
                (seen,) = await tx.fetch_one(VERSION)
                await anyio.sleep(0)  # the other gets every chance to interleave
                tx.add(Sql("UPDATE grants_version SET version = :next WHERE one = 1"), {"next": seen + 1})

    async with anyio.create_task_group() as tg:
        tg.start_soon(count_up, first)
        tg.start_soon(count_up, second)
    assert await first.fetch_one(VERSION) == (30,)


@pytest.mark.anyio
async def test_a_snapshot_sees_one_instant_and_reads_long_results_in_batches(backend: Backend) -> None:
    db, writer = await backend.db(), await backend.db()
    await db.execute_many(ADD, [grant(i) for i in range(7)])
    async with db.snapshot() as snap:
        assert await snap.fetch_one(COUNT) == (7,)
        await writer.execute(ADD, grant(100))  # committed while the snapshot reads
        batches = [batch async for batch in snap.batches(ALL, size=3)]
        assert [len(b) for b in batches] == [3, 3, 1] and batches[0][0][0] == "g000"
        assert await snap.fetch_one(COUNT) == (7,)
    assert await db.fetch_one(COUNT) == (8,)


@pytest.mark.anyio
async def test_a_notification_reaches_every_listener_once_its_transaction_commits(backend: Backend) -> None:
    db, other = await backend.db(), await backend.db()
    async with db.listen("pincer_test") as mine, other.listen("pincer_test") as theirs:
        with pytest.raises(StoreConflict):
            async with other.transaction() as tx:
                tx.add(ADD, grant(1))
                tx.notify("pincer_test", "rolled back: never told")
                tx.add(BUMP, {"seen": 99}, rows=1)  # fails: the whole transaction rolls back
        await db.notify("pincer_test", "hello")
        async with other.transaction() as tx:
            tx.add(ADD, grant(2))
            tx.notify("pincer_test", "g002")
        with anyio.fail_after(WAIT_S):
            assert [await anext(mine), await anext(mine)] == ["hello", "g002"]
            assert [await anext(theirs), await anext(theirs)] == ["hello", "g002"]


@pytest.mark.anyio
async def test_notifications_only_reach_the_channel_listened_to(backend: Backend) -> None:
    db = await backend.db()
    async with db.listen("pincer_a") as a_notes:
        await db.notify("pincer_b", "not for a")
        await db.notify("pincer_a", "for a")
        with anyio.fail_after(WAIT_S):
            assert await anext(a_notes) == "for a"


@pytest.mark.anyio
async def test_a_postgres_listener_whose_connection_died_is_told_to_read_again() -> None:
    import psycopg

    url = postgres_server().new_database()
    from pincer.store.sql.migrate import upgrade_postgres

    upgrade_postgres(url)
    db = await open_postgres(url)
    try:
        async with db.listen("pincer_test") as notes:
            with psycopg.connect(url, autocommit=True) as admin:
                ended = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND query ILIKE 'LISTEN%'"
                ).fetchall()
            assert ended == [(True,)]
            with anyio.fail_after(WAIT_S):
                assert await anext(notes) == RESYNC
            await db.notify("pincer_test", "after")
            with anyio.fail_after(WAIT_S):
                assert await anext(notes) == "after"
    finally:
        await db.aclose()


@pytest.mark.anyio
async def test_no_sqlite_connection_is_made_or_used_on_the_event_loop(tmp_path: Path) -> None:
    """Every connection is made in a worker thread with sqlite3's own check that no other thread
    uses it, so the event loop's thread cannot run a statement on one even by mistake."""
    opened: list[int] = []

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "sqlite3.connect" and str(args[0]).startswith(str(tmp_path)):
            opened.append(threading.get_ident())

    sys.addaudithook(hook)
    db = await open_sqlite(tmp_path)
    try:
        await db.execute(ADD, grant(1))
        assert await db.fetch_all(ALL) and await db.fetch_one(COUNT) == (1,)
        async with db.transaction() as tx:
            tx.add(ADD, grant(2))
        async with db.snapshot() as snap:
            assert await snap.fetch_one(COUNT) == (2,)
    finally:
        await db.aclose()
    loop_thread = threading.get_ident()
    # The open's migration check is in a thread too; then the writer, the readers, the snapshot's.
    assert len(opened) >= 3 and loop_thread not in opened


@pytest.mark.anyio
async def test_a_write_sent_as_a_read_is_refused_on_sqlite(tmp_path: Path) -> None:
    db = await open_sqlite(tmp_path)
    try:
        with pytest.raises(StoreError, match="readonly|read-only|query_only|attempt to write"):
            await db.fetch_all(Sql("INSERT INTO grants (id, created_at, body) VALUES ('x', 0, '{}') RETURNING id"))
    finally:
        await db.aclose()
    with sqlite3.connect(tmp_path / "pincer.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM grants").fetchone() == (0,)


@pytest.mark.anyio
async def test_postgres_errors_never_show_the_password_of_the_url(tmp_path: Path) -> None:
    server = postgres_server()
    url = server.url("no_such_database").replace(f"{server.user}@", f"{server.user}:pw-not-shown@")
    with pytest.raises(StoreError) as info:
        await open_postgres(url)
    assert "pw-not-shown" not in str(info.value) + (info.value.hint or "") and "***" in info.value.message
    good = postgres_server().new_database()
    from pincer.store.sql.migrate import upgrade_postgres

    upgrade_postgres(good)
    db = await open_postgres(good.replace(f"{server.user}@", f"{server.user}:pw-not-shown@"))
    try:
        with pytest.raises(StoreError) as info:
            await db.fetch_all(Sql("SELECT no_such_column FROM grants"))
        assert "pw-not-shown" not in str(info.value) and "no_such_column" in info.value.message
    finally:
        await db.aclose()


@pytest.mark.anyio
async def test_a_closed_database_says_so(backend: Backend) -> None:
    db = await backend.db()
    await db.aclose()
    if backend.kind == "sqlite":
        with pytest.raises(StoreError, match="closed"):
            await db.fetch_all(ALL)
    else:
        with pytest.raises(StoreError):
            await db.fetch_all(ALL)


@pytest.mark.anyio
async def test_a_lock_is_held_by_one_process_at_a_time(backend: Backend) -> None:
    """Two processes each read a counter, wait, and write it back one higher under the lock."""
    first, second = await backend.db(), await backend.db()
    inside: list[str] = []

    async def count_up(db: Any, who: str) -> None:
        for _ in range(5):
            async with db.lock("counter"):
                inside.append(who)
                assert len(inside) == 1, inside  # nobody else holds it
                (seen,) = await db.fetch_one(VERSION)
                await anyio.sleep(0.01)
                await db.execute(Sql("UPDATE grants_version SET version = :next WHERE one = 1"), {"next": seen + 1})
                inside.remove(who)

    with anyio.fail_after(WAIT_S * 3):
        async with anyio.create_task_group() as tg:
            tg.start_soon(count_up, first, "first")
            tg.start_soon(count_up, second, "second")
    assert await first.fetch_one(VERSION) == (10,)
