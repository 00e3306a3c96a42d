"""The one database seam of the store: SQLite or PostgreSQL behind one small async interface.

    db = await open_sqlite(home)                     # $PINCER_HOME/pincer.db, migrated on open
    db = await open_postgres(url, password=...)      # [store] url; refused unless at schema HEAD
    ... every store takes ``db`` (store/sql/database.py: what it offers) ...
    await db.aclose()

store/sql/schema.py holds every table once; store/sql/migrate.py and store/sql/migrations/ the one
migration history of both databases; store/sql/sqlite.py and store/sql/postgres.py the drivers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio.to_thread

from pincer.store.sql.database import RESYNC, Database, Lead, Row, Transaction
from pincer.store.sql.migrate import DB_FILENAME, HEAD, prepare_sqlite
from pincer.store.sql.statement import Params, Sql

__all__ = [
    "Database", "Transaction", "Lead", "Row", "Sql", "Params", "RESYNC", "HEAD", "DB_FILENAME", "open_sqlite", "open_postgres",
]  # fmt: skip


async def open_sqlite(
    home: Path, *, synchronous: str | None = None, trace: Callable[[str], None] | None = None
) -> Database:
    """The database under ``home`` (made, or migrated to :data:`HEAD`, first, off the event
    loop). ``synchronous`` NORMAL makes a commit durable against a crash of pincer; FULL also
    against power loss, at an fsync per commit; None: the config model's default for ``[audit]
    synchronous``. ``trace``: each statement the writer runs."""
    from pincer.store.sql.sqlite import SqliteDatabase

    if synchronous is None:
        from pincer.config import AuditSettings

        synchronous = AuditSettings().synchronous.upper()

    path = home / DB_FILENAME
    await anyio.to_thread.run_sync(prepare_sqlite, path)
    db = SqliteDatabase(path, synchronous=synchronous, trace=trace)
    try:
        await db.start()
    except BaseException:
        await db.aclose()
        raise
    return db


async def open_postgres(url: str, *, password: str | None = None, size: int = 8, check_schema: bool = True) -> Database:
    """The PostgreSQL database at ``url``; refused (StoreError, the url redacted) when it cannot
    be reached or, with ``check_schema``, when it is not at :data:`HEAD` (``pincer db upgrade``)."""
    from pincer.store.sql.migrate import check
    from pincer.store.sql.postgres import PostgresDatabase

    db = await PostgresDatabase.open(url, password=password, size=size)
    if check_schema:
        try:
            await check(db)
        except BaseException:
            await db.aclose()
            raise
    return db
