"""Both backends of the store seam: every test taking ``backend`` runs on SQLite and on PostgreSQL.

``backend.audit()``, ``backend.approvals()`` and the rest each return a store on a connection
of its own, so a second one stands for another process (another gateway) on the same state.
PostgreSQL is a real server this test session starts once (tests/backends.py); each test gets a
fresh database, upgraded with ``upgrade_database`` as ``pincer db upgrade`` does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pincer.store import ApprovalStore, AuditLog, GrantStore, IdempotencyStore, open_database
from pincer.store.runs import RunStore
from tests.backends import postgres_server

KEY = b"a" * 32


class Backend:
    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self._tmp = tmp_path
        self._pools: list[Any] = []
        self.url = ""
        if kind == "postgres":
            from pincer.store.pg import upgrade_database

            self.url = postgres_server().new_database()
            upgrade_database(self.url)

    def _pg(self) -> Any:
        from pincer.store.pg.connect import PgPools

        pools = PgPools.open(self.url, size=4)
        self._pools.append(pools)
        return pools

    def _sqlite(self) -> sqlite3.Connection:
        return open_database(self._tmp)

    def audit(self, key: bytes = KEY) -> Any:
        if self.kind == "sqlite":
            return AuditLog(self._sqlite(), key=key)
        from pincer.store.pg.audit import PgAuditLog

        return PgAuditLog(self._pg(), key=key)

    def approvals(self) -> Any:
        if self.kind == "sqlite":
            return ApprovalStore(self._sqlite())
        from pincer.store.pg.approvals import PgApprovalStore

        return PgApprovalStore(self._pg())

    def audited_approvals(self, key: bytes = KEY) -> tuple[Any, Any]:
        """An approval store that records the calls of gone callers, and its audit log: what one
        gateway holds (each pair on connections of its own)."""
        if self.kind == "sqlite":
            audit = AuditLog(self._sqlite(), key=key)
            return ApprovalStore(self._sqlite(), audit=audit), audit
        from pincer.store.pg.approvals import PgApprovalStore
        from pincer.store.pg.audit import PgAuditLog

        pools = self._pg()
        pg_audit = PgAuditLog(pools, key=key)
        return PgApprovalStore(pools, audit=pg_audit), pg_audit

    def grants(self) -> Any:
        if self.kind == "sqlite":
            return GrantStore(self._sqlite())
        from pincer.store.pg.grants import PgGrantStore

        return PgGrantStore(self._pg())

    def idempotency(self, *, ttl_s: float = 60.0, max_entries: int = 100) -> Any:
        if self.kind == "sqlite":
            return IdempotencyStore(self._sqlite(), ttl_s=ttl_s, max_entries=max_entries)
        from pincer.store.pg.idempotency import PgIdempotencyStore

        return PgIdempotencyStore(self._pg(), ttl_s=ttl_s, max_entries=max_entries)

    def runs(self) -> Any:
        if self.kind == "sqlite":
            return RunStore(self._sqlite())
        from pincer.store.pg.portable import PortableConnection

        return RunStore(PortableConnection(self._pg()))  # type: ignore[arg-type]

    def sign_ins(self) -> Any:
        from pincer.store.sign_ins import SignInStore

        if self.kind == "sqlite":
            return SignInStore(self._sqlite())
        from pincer.store.pg.portable import PortableConnection

        return SignInStore(PortableConnection(self._pg()))

    def triggers(self) -> Any:
        if self.kind == "sqlite":
            from pincer.store.triggers import TriggerStore

            return TriggerStore(self._sqlite())
        from pincer.store.pg.triggers import PgTriggerStore

        return PgTriggerStore(self._pg())

    def home_files(self) -> Any:
        """The backend of the registry's shared files (store/home_share.py): on SQLite the local
        one, which shares nothing."""
        if self.kind == "sqlite":
            from pincer.store.home_share import LocalHome

            return LocalHome()
        from pincer.store.pg.home_files import PgHomeFiles

        return PgHomeFiles(self._pg())

    def tamper(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Change the database behind the stores' backs, as someone with write access can."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self._tmp / "pincer.db")
            conn.execute(sql, params)
            conn.commit()
            conn.close()
            return
        import psycopg

        from pincer.store.pg.portable import to_format_style

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(to_format_style(sql), params)

    async def aclose(self) -> None:
        for pools in self._pools:
            await pools.aclose()


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    made = Backend(request.param, tmp_path)
    try:
        yield made
    finally:
        await made.aclose()
