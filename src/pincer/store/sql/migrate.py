"""Bringing a database to this pincer's schema: one history for SQLite and PostgreSQL (Alembic).

A database is in one of four states, read without importing Alembic (most opens find the first
and go no further):

- at :data:`HEAD`: nothing to do;
- at an older revision: Alembic runs the revisions it lacks (store/sql/migrations/versions/);
- written by a pincer from before this history (SQLite ``user_version``, PostgreSQL's
  ``pincer_schema``, up to their old ladders' last version): it is recognised, brought to the end of its old ladder and stamped at
  the baseline revision ``0001`` (store/sql/legacy.py: that ladder, unchanged), then migrated
  forward like any other;
- empty: the tables of store/sql/schema.py are made, seeded, and stamped at :data:`HEAD`;

and a revision this pincer does not know was written by a newer one: refused, never touched.

Who migrates: the SQLite database under PINCER_HOME when it is opened, under its open lock
(store/open_lock.py), so two processes starting at once migrate it once. PostgreSQL only through
``pincer db upgrade`` (several gateways start at once, and a migration is an operator's
decision), under an advisory lock, so two upgrades at once apply each revision once; a gateway
refuses a database that is not at :data:`HEAD` with a hint naming the command (:func:`check`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pincer.core.errors import SchemaBehind, StoreError
from pincer.store.open_lock import open_lock
from pincer.store.sql import legacy
from pincer.store.sql.database import Database
from pincer.store.sql.statement import Sql

__all__ = [
    "HEAD", "REVISIONS", "SchemaState", "prepare_sqlite", "upgrade_postgres", "check", "read_state",
    "DB_FILENAME", "MIGRATIONS_DIR",
]  # fmt: skip

DB_FILENAME = "pincer.db"
# The revisions this pincer knows, oldest first; a test holds them equal to Alembic's scripts.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009")
HEAD = REVISIONS[-1]
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_UPGRADE_LOCK = 0x70696E63  # the advisory lock `pincer db upgrade` holds ("pinc", as before Alembic)
_BUSY_TIMEOUT_S = 5.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemaState:
    revision: str | None  # the Alembic revision; None before Alembic
    legacy: int = 0  # the old ladder's version (SQLite user_version, PostgreSQL pincer_schema)

    @property
    def empty(self) -> bool:
        return self.revision is None and self.legacy == 0

    @property
    def at_head(self) -> bool:
        return self.revision == HEAD

    def describe(self) -> str:
        if self.revision is not None:
            return f"schema {self.revision}"
        if self.legacy:
            return f"the schema of an older pincer (version {self.legacy})"
        return "no pincer schema yet"

    def refuse_newer(self, where: str) -> None:
        newer = self.revision is not None and self.revision not in REVISIONS
        if newer or (self.revision is None and self.legacy > _legacy_last(where)):
            raise StoreError(
                f"{where} was written by a newer pincer ({self.describe()}; this one knows schema {HEAD})",
                hint="upgrade pincer on this machine, or point PINCER_HOME or [store] url elsewhere",
            )


def _legacy_last(where: str) -> int:
    return legacy.POSTGRES_LAST if where.startswith("the PostgreSQL") else legacy.SQLITE_LAST


# -- SQLite ------------------------------------------------------------------------------------


def _sqlite_state(conn: sqlite3.Connection) -> SchemaState:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "alembic_version" in tables:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return SchemaState(revision=str(row[0]) if row else None, legacy=legacy.sqlite_version(conn))
    return SchemaState(revision=None, legacy=legacy.sqlite_version(conn))


def _create_private(path: Path) -> None:
    """Create the file 0600 before SQLite does (it would use the umask, often 0644): the audit
    log, approvals and idempotent results are nobody else's to read. SQLite gives its -wal and
    -shm files the database file's mode.

    An existing file is never opened here: closing any descriptor of a file drops every POSIX
    lock this process holds on it, SQLite's included, so a second open in a process that has the
    database open (a second database object, the CLI beside its service) would leave the first
    without its locks; the next process to connect then takes itself for the only one and resets
    the WAL index under it (seen as "disk I/O error")."""
    refused = StoreError(
        f"cannot open the pincer database {path}: it is not a regular file",
        hint="PINCER_HOME must hold pincer.db itself (not a symlink) in a directory you can write",
    )
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        try:
            # O_EXCL: made here, or by another process meanwhile; O_NOFOLLOW: never through a link.
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(
                f"cannot open the pincer database {path}: {exc.strerror}",
                hint="PINCER_HOME must hold pincer.db itself (not a symlink) in a directory you can write",
            ) from None
        info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise refused


def prepare_sqlite(path: Path) -> SchemaState:
    """Make ``path`` a pincer database at :data:`HEAD` in WAL mode (created 0600 if missing);
    the state it was found in. Blocking: the drivers call it from a worker thread."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _create_private(path)
        with open_lock(path):  # the switch to WAL and the migrations, one process at a time
            return _prepare_locked(path)
    except OSError as exc:
        raise StoreError(
            f"cannot open the pincer database {path}: {exc.strerror or exc}",
            hint="PINCER_HOME must be a directory you can write",
        ) from None


def _prepare_locked(path: Path) -> SchemaState:
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_TIMEOUT_S)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            state = _sqlite_state(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"cannot open the pincer database {path}: {exc}",
            hint="check that the file is a pincer database and the directory is writable",
        ) from exc
    if state.at_head:
        return state
    state.refuse_newer(str(path))
    engine = _sqlite_engine(path)
    try:
        with engine.connect() as conn:
            _migrate(conn, state, str(path))
    except Exception as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreError(
            f"cannot migrate the pincer database {path} to schema {HEAD}: {_first_line(exc)}",
            hint="check that the file is a pincer database and the directory is writable; "
            "restore pincer.db from a backup if it was changed by hand",
        ) from exc
    finally:
        engine.dispose()
    return state


def _sqlite_engine(path: Path) -> Any:
    import sqlalchemy as sa

    def connect() -> sqlite3.Connection:
        # isolation_level None: sqlite3 begins nothing itself; the "begin" hook below says BEGIN
        # IMMEDIATE, so each revision's DDL is one transaction that holds the write lock.
        return sqlite3.connect(path, isolation_level=None, timeout=_BUSY_TIMEOUT_S)

    engine = sa.create_engine("sqlite://", creator=connect, poolclass=sa.pool.NullPool)

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


# -- PostgreSQL --------------------------------------------------------------------------------


def upgrade_postgres(url: str, *, password: str | None = None) -> tuple[SchemaState, SchemaState]:
    """Bring the database at ``url`` to :data:`HEAD` (``pincer db upgrade``); the states before
    and after. Blocking: call it from a worker thread."""
    import sqlalchemy as sa

    from pincer.core.extras import require
    from pincer.store.sql.postgres import connect_kwargs, redact_url, store_unreachable

    psycopg = require("postgres", "psycopg")

    kwargs = connect_kwargs(password)
    kwargs.pop("autocommit")  # SQLAlchemy begins and commits itself
    try:
        psycopg.connect(url, **kwargs).close()
    except psycopg.Error as exc:
        raise store_unreachable(url, exc) from None
    engine = sa.create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(url, **kwargs), poolclass=sa.pool.NullPool
    )
    where = f"the PostgreSQL store {redact_url(url)}"
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({_UPGRADE_LOCK})")
            conn.commit()
            try:
                before = _postgres_state(lambda sql: [tuple(r) for r in conn.exec_driver_sql(sql)])
                conn.commit()
                before.refuse_newer(where)
                if not before.at_head:
                    _migrate(conn, before, where)
            finally:
                conn.rollback()
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_UPGRADE_LOCK})")
                conn.commit()
    except (psycopg.Error, sa.exc.SQLAlchemyError) as exc:
        # SQLAlchemyError, not only DBAPIError: a revision's inspection of a table someone dropped
        # raises NoSuchTableError, which `pincer db upgrade` showed as a traceback.
        raise StoreError(
            f"{where} could not be upgraded: {redact_url(_first_line(exc))}",
            hint="check that the [store] url's user may create tables there; each revision is one transaction, "
            "so running `pincer db upgrade` again goes on where it stopped",
        ) from None
    finally:
        engine.dispose()
    return before, SchemaState(revision=HEAD, legacy=before.legacy)


def _postgres_state(query: Any) -> SchemaState:
    """``query(sql)``: the statement's rows."""
    present = query("SELECT to_regclass('alembic_version') IS NOT NULL, to_regclass('pincer_schema') IS NOT NULL")[0]
    old = int(query("SELECT COALESCE(MAX(version), 0) FROM pincer_schema")[0][0]) if present[1] else 0
    if present[0]:
        row = query("SELECT version_num FROM alembic_version")
        return SchemaState(revision=str(row[0][0]) if row else None, legacy=old)
    return SchemaState(revision=None, legacy=old)


_STATE_TABLES = Sql("SELECT to_regclass('alembic_version') IS NOT NULL, to_regclass('pincer_schema') IS NOT NULL")
_REVISION = Sql("SELECT version_num FROM alembic_version")
_LEGACY = Sql("SELECT COALESCE(MAX(version), 0) FROM pincer_schema")


async def read_state(db: Database) -> SchemaState:
    """The schema state of a PostgreSQL database (``pincer db status``, a gateway's start)."""
    present = await db.fetch_one(_STATE_TABLES)
    assert present is not None
    old_row = await db.fetch_one(_LEGACY) if present[1] else None
    old = int(old_row[0]) if old_row else 0
    if not present[0]:
        return SchemaState(revision=None, legacy=old)
    row = await db.fetch_one(_REVISION)
    return SchemaState(revision=str(row[0]) if row else None, legacy=old)


_SQLITE_REVISION = Sql("SELECT version_num FROM alembic_version")
_SQLITE_LEGACY = Sql("PRAGMA user_version")


async def is_current(db: Database) -> bool:
    """Whether ``db`` is at this pincer's schema now (``GET /readyz``): at :data:`HEAD`, and with
    the guard version older pincers refuse still in place (a newer pincer moves either)."""
    if db.dialect == "sqlite":
        revision, version = await db.fetch_one(_SQLITE_REVISION), await db.fetch_one(_SQLITE_LEGACY)
        state = SchemaState(revision=str(revision[0]) if revision else None, legacy=int(version[0]) if version else 0)
    else:
        state = await read_state(db)
    guard = (legacy.SQLITE_LAST if db.dialect == "sqlite" else legacy.POSTGRES_LAST) + 1
    return state.at_head and state.legacy == guard


async def check(db: Database) -> SchemaState:
    """Refuse a PostgreSQL database that is not at this pincer's schema: StoreError for a newer
    one, SchemaBehind for one without it yet or an older one (its acts wait: store/pending_acts.py)."""
    state = await read_state(db)
    where = f"the PostgreSQL store {db.shown}"
    state.refuse_newer(where)
    if not state.at_head:
        raise SchemaBehind(
            f"{where} has {state.describe()}; this pincer needs schema {HEAD}",
            hint="run `pincer db upgrade` once (with the same [store] url), then start the gateways",
        )
    return state


# -- both --------------------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    """What a failed step said, on one line; with its kind when the text alone is only a name
    (SQLAlchemy's NoSuchTableError says just the table's)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text if " " in text else f"{type(exc).__name__}: {text}"


def _migrate(conn: Any, state: SchemaState, where: str) -> None:
    """Make an empty database, or run the revisions an older one lacks (``conn``: SQLAlchemy's);
    one line of pincer's own says so once it is done."""
    from alembic import command
    from alembic.config import Config

    with _alembic_quiet():
        if state.empty:
            _create(conn)
        else:
            config = Config()
            config.set_main_option("script_location", str(MIGRATIONS_DIR))
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            conn.commit()
    if state.empty:
        logger.info("%s: made at schema %s", where, HEAD)
    else:
        logger.info("%s: upgraded from %s to schema %s", where, state.describe(), HEAD)


_quiet_lock = threading.Lock()
_quiet_depth = 0


@contextmanager
def _alembic_quiet() -> Iterator[None]:
    """Alembic's logger held at WARNING for the block: it announces its context at INFO ("Context
    impl SQLiteImpl", "Will assume non-transactional DDL") on every run, which an embedder logging
    at INFO would see on every first open; pincer says what it did in one line of its own. A level
    the embedder gave Alembic's logger is left alone, and so is every other logger; blocks in
    several threads at once restore it once the last ends."""
    global _quiet_depth
    alembic_logger = logging.getLogger("alembic")
    with _quiet_lock:
        if _quiet_depth == 0 and alembic_logger.level != logging.NOTSET:
            chosen = True  # the embedder's own choice
        else:
            chosen = False
            _quiet_depth += 1
            alembic_logger.setLevel(logging.WARNING)
    if chosen:
        yield
        return
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                alembic_logger.setLevel(logging.NOTSET)


def _create(conn: Any) -> None:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from sqlalchemy import inspect as sa_inspect

    from pincer.store.sql.schema import LEGACY_GUARD_VERSION, SEED_ROWS, metadata, pincer_schema, tables_for

    dialect = conn.dialect.name
    with conn.begin():
        present = set(sa_inspect(conn).get_table_names()) & {table.name for table in tables_for(dialect)}
        if present:  # tables of pincer's but no version of any pincer: nothing here to guess at
            raise StoreError(
                f"the database has pincer's tables ({', '.join(sorted(present))}) but no schema version",
                hint="restore the database from a backup, or point PINCER_HOME or [store] url at an empty one",
            )
        metadata.create_all(conn, tables=tables_for(dialect))
        for table, row in SEED_ROWS:
            conn.execute(table.insert().values(**row))
        if dialect == "sqlite":
            conn.exec_driver_sql(f"PRAGMA user_version = {LEGACY_GUARD_VERSION['sqlite']}")
        else:
            conn.execute(pincer_schema.insert().values(version=LEGACY_GUARD_VERSION["postgresql"]))
        MigrationContext.configure(conn).stamp(ScriptDirectory(str(MIGRATIONS_DIR)), "head")
