"""Both backends of the store seam: every test taking ``backend`` runs on SQLite and on PostgreSQL.

``backend.audit()``, ``backend.approvals()`` and the rest each return a store on a connection
of its own, so a second one stands for another process (another gateway) on the same state.
PostgreSQL is a real server this test session starts once (tests/backends.py); each test gets a
fresh database, upgraded as ``pincer db upgrade`` does. The stores are async; each method here
that makes one is too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from pincer.store import ApprovalStore, AuditLog, GrantStore, IdempotencyStore
from pincer.store.runs import RunStore
from pincer.store.sign_ins import SignInStore
from pincer.store.sql import Database, Sql, open_postgres, open_sqlite
from pincer.store.triggers import TriggerStore
from tests.backends import postgres_server

KEY = b"a" * 32


class Backend:
    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self._tmp = tmp_path
        self._databases: list[Any] = []
        self._closing = ExitStack()
        self.url = ""
        if kind == "postgres":
            from pincer.store.sql.migrate import upgrade_postgres

            self.url = postgres_server().new_database()
            upgrade_postgres(self.url)

    async def db(self) -> Database:
        """A database object of its own on the backend's one database (another process's, when
        a test makes two)."""
        if self.kind == "sqlite":
            made = await open_sqlite(self._tmp)
        else:
            made = await open_postgres(self.url, size=4)
        self._databases.append(made)
        return made

    async def audit(self, key: bytes = KEY) -> AuditLog:
        return await AuditLog.open(await self.db(), key=key)

    async def approvals(self) -> ApprovalStore:
        return ApprovalStore(await self.db())

    async def audited_approvals(self, key: bytes = KEY) -> tuple[ApprovalStore, AuditLog]:
        """An approval store that records the calls of gone callers, and its audit log: what one
        gateway holds (each pair on a database object of its own)."""
        db = await self.db()
        audit = await AuditLog.open(db, key=key)
        return ApprovalStore(db, audit=audit), audit

    async def grants(self) -> GrantStore:
        return GrantStore(await self.db())

    async def idempotency(self, *, ttl_s: float = 60.0, max_entries: int = 100) -> IdempotencyStore:
        return IdempotencyStore(await self.db(), ttl_s=ttl_s, max_entries=max_entries)

    async def runs(self) -> RunStore:
        return RunStore(await self.db())

    async def sign_ins(self) -> SignInStore:
        return SignInStore(await self.db())

    async def triggers(self) -> TriggerStore:
        return TriggerStore(await self.db())

    def home_files(self) -> Any:
        """The backend of the registry's shared files (store/home_share.py): on SQLite the local
        one, which shares nothing; on PostgreSQL the store's, through a thread of its own (as a
        home reaches it)."""
        if self.kind == "sqlite":
            from pincer.store.home_share import LocalHome

            return LocalHome()
        from pincer.store.home_files import shared_home_files

        return self._closing.enter_context(shared_home_files(self.url))

    def tamper(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Change the database behind the stores' backs, as someone with write access can
        (``sql`` with ``?`` placeholders, on either database)."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self._tmp / "pincer.db")
            conn.execute(sql, params)
            conn.commit()
            conn.close()
            return
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.replace("%", "%%").replace("?", "%s"), params)

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._closing.close)
        for made in self._databases:
            await made.aclose()


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = Backend(request.param, tmp_path)
    try:
        yield made
    finally:
        await made.aclose()


class Opener:
    """SQLite databases a test opens (each one another process's view of its file), closed at
    its end: ``await opened.db(path)``, ``await opened.audit(path, key=...)``."""

    def __init__(self) -> None:
        self._made: list[Database] = []

    async def db(self, home: Path, **kwargs: Any) -> Database:
        made = await open_sqlite(home, **kwargs)
        self._made.append(made)
        return made

    async def audit(self, home: Path, *, key: bytes = KEY, anchor: Any = None, **kwargs: Any) -> AuditLog:
        return await AuditLog.open(await self.db(home, **kwargs), key=key, anchor=anchor)

    async def aclose(self) -> None:
        while self._made:
            await self._made.pop().aclose()


@pytest.fixture
async def opened() -> AsyncIterator[Opener]:
    made = Opener()
    try:
        yield made
    finally:
        await made.aclose()


async def query_plan(db: Database, sql: Sql, params: dict[str, Any], *, sorts: bool = False) -> str:
    """The database's plan for ``sql`` with ``params``, as text. On PostgreSQL sequential scans
    (and, unless ``sorts``, sorts) are priced out: a plan that still has one has no index for it."""
    if db.dialect == "sqlite":
        rows = await db.fetch_all(Sql("EXPLAIN QUERY PLAN " + sql.text), params)
        return "\n".join(str(row[-1]) for row in rows)
    async with db.transaction() as tx:
        await tx.execute(Sql("SET LOCAL enable_seqscan = off"))
        if not sorts:
            await tx.execute(Sql("SET LOCAL enable_sort = off"))
        rows = await tx.fetch_all(Sql("EXPLAIN " + sql.for_dialect("postgresql")), params)
    return "\n".join(str(row[0]) for row in rows)
