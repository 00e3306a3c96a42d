"""The PostgreSQL driver of the database seam (store/sql/database.py), for several gateways.

Every statement runs on psycopg's ``AsyncConnectionPool`` from the event loop, in autocommit
unless it is part of a transaction. A statement's text is compiled once, by SQLAlchemy, from its
named binds to psycopg's ``%(name)s`` (store/sql/statement.py); SQLAlchemy runs nothing here.
Queued writes (``Transaction.add``) go to the server in one pipeline with the statement that
follows them or with the commit.

``transaction(serial=NAME)`` begins with a transaction-scoped advisory lock named by NAME, so
those transactions run one at a time across every gateway, the way SQLite's writer lock
serialises them across processes.

LISTEN runs on a connection of its own, in a thread of its own (:class:`_ListenThread`): it waits
on the connection's socket and a wake-up pipe together, so a new channel is listened to at
once, and it hands each notification to the listeners of this database (store/sql/notices.py).
A connection that fails is made again after :data:`LISTEN_RETRY_S`, and every listener is told
:data:`~pincer.store.sql.database.RESYNC`: what was sent meanwhile was missed.

The password never sits in config.toml: ``[store] password_secret`` names a secret, else libpq
reads ``PGPASSFILE`` (or ~/.pgpass). A url with a password written into it still works, but every
url in a log line or an error is redacted (:func:`redact_url`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import select
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio

from pincer.core.errors import StoreConflict, StoreError
from pincer.core.extras import require
from pincer.store.sql.database import Row, StaleRule
from pincer.store.sql.notices import Channels, Listener
from pincer.store.sql.statement import Dialect, Params, Sql

logger = logging.getLogger(__name__)

__all__ = [
    "PostgresDatabase", "redact_url", "store_unreachable", "connect_kwargs", "CONNECT_TIMEOUT_S",
    "POOL_WAIT_TIMEOUT_S", "LISTEN_RETRY_S", "LISTEN_READY_TIMEOUT_S", "lock_number",
]  # fmt: skip

CONNECT_TIMEOUT_S = 10
POOL_WAIT_TIMEOUT_S = 30.0
LISTEN_RETRY_S = 1.0
LISTEN_READY_TIMEOUT_S = 5.0  # the longest ``listen`` waits for its LISTEN before it goes on without
_LISTEN_PING_S = 10.0  # an idle LISTEN connection is checked this often
_NO_PARAMS: Params = {}

_USERINFO = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<userinfo>[^@/?#]*)@", re.IGNORECASE)
_PASSWORD_PARAM = re.compile(r"(?i)([?&]password=)[^&#]*")


def redact_url(url: str) -> str:
    """``url`` with any password in it (``user:pw@`` or ``?password=``) replaced by ``***``."""
    match = _USERINFO.match(url)
    if match is not None:
        user, has_password, _ = match["userinfo"].partition(":")
        userinfo = f"{user}:***" if has_password else user
        url = f"{match['scheme']}{userinfo}@{url[match.end() :]}"
    return _PASSWORD_PARAM.sub(r"\1***", url)


def _first_line(exc: BaseException) -> str:
    # libpq's messages can quote the conninfo; only the first line, redacted, is ever shown.
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def store_unreachable(url: str, exc: BaseException) -> StoreError:
    return StoreError(
        f"cannot reach the PostgreSQL store {redact_url(url)}: {redact_url(_first_line(exc))}",
        hint="check [store] url in config.toml, that the server runs, and the password "
        "([store] password_secret names a secret; or PGPASSFILE)",
    )


def _failed(url: str, exc: BaseException) -> StoreError:
    return StoreError(
        f"the PostgreSQL store {redact_url(url)} failed: {redact_url(_first_line(exc))}",
        hint="check that the server runs and that `pincer db upgrade` ran with this [store] url",
    )


def connect_kwargs(password: str | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
    if password is not None:
        kwargs["password"] = password
    return kwargs


def lock_number(name: str) -> int:
    """A 63-bit advisory lock number for ``name`` (the same in every process)."""
    return int.from_bytes(hashlib.sha256(b"pincer-lock:" + name.encode()).digest()[:8], "big") >> 1


class _Compiled:
    """Statement texts in psycopg's paramstyle, compiled once each by SQLAlchemy."""

    def __init__(self) -> None:
        from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

        self._dialect = psycopg_dialect.dialect()  # type: ignore[no-untyped-call,unused-ignore]
        self._texts: dict[Sql, str] = {}

    def __call__(self, sql: Sql) -> str:
        text = self._texts.get(sql)
        if text is None:
            from sqlalchemy import text as sa_text

            text = self._texts[sql] = str(sa_text(sql.for_dialect("postgresql")).compile(dialect=self._dialect))
        return text


class PostgresDatabase:
    dialect: Dialect = "postgresql"

    def __init__(self, url: str, *, pool: Any, kwargs: dict[str, Any]) -> None:
        self.url = url  # as configured; only ever shown through redact_url
        self._pool = pool  # psycopg_pool.AsyncConnectionPool
        self._kwargs = kwargs
        self._compiled = _Compiled()
        self._channels = Channels()
        self._listener: _ListenThread | None = None

    @property
    def shown(self) -> str:
        return redact_url(self.url)

    @classmethod
    async def open(cls, url: str, *, password: str | None = None, size: int = 8) -> PostgresDatabase:
        """Open the pool; a server that refuses is reported at once, with libpq's reason."""
        psycopg = require("postgres", "psycopg")
        AsyncConnectionPool = require("postgres", "psycopg_pool").AsyncConnectionPool

        kwargs = connect_kwargs(password)
        try:
            # One plain connection first: the pool would retry until its timeout and say only
            # that it timed out.
            await (await psycopg.AsyncConnection.connect(url, **kwargs)).close()
        except psycopg.Error as exc:
            raise store_unreachable(url, exc) from None
        pool = AsyncConnectionPool(
            url, min_size=1, max_size=size, kwargs=kwargs, open=False, timeout=POOL_WAIT_TIMEOUT_S, name="pincer"
        )
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - psycopg.Error, or the pool's PoolTimeout
            await pool.close()
            raise store_unreachable(url, exc) from None
        return cls(url, pool=pool, kwargs=kwargs)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        psycopg = require("postgres", "psycopg")
        PoolTimeout = require("postgres", "psycopg_pool").PoolTimeout

        try:
            yield
        except (psycopg.Error, PoolTimeout) as exc:
            raise _failed(self.url, exc) from None

    # -- reads and single writes --------------------------------------------------------------

    async def fetch_all(self, sql: Sql, params: Params | None = None) -> list[Row]:
        with self._translated():
            async with self._pool.connection() as conn:
                cursor = await conn.execute(self._compiled(sql), params or _NO_PARAMS)
                rows: list[Row] = await cursor.fetchall()
                return rows

    async def fetch_one(self, sql: Sql, params: Params | None = None) -> Row | None:
        with self._translated():
            async with self._pool.connection() as conn:
                cursor = await conn.execute(self._compiled(sql), params or _NO_PARAMS)
                row: Row | None = await cursor.fetchone()
                return row

    async def execute(self, sql: Sql, params: Params | None = None) -> int:
        with self._translated():
            async with self._pool.connection() as conn:
                cursor = await conn.execute(self._compiled(sql), params or _NO_PARAMS)
                return int(cursor.rowcount)

    async def execute_many(self, sql: Sql, rows: Sequence[Params]) -> None:
        async with self.transaction() as tx:
            tx.add_many(sql, rows)

    # -- transactions ---------------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, *, serial: str | None = None) -> AsyncIterator[PostgresTransaction]:
        with self._translated():
            async with self._pool.connection() as conn:
                async with conn.transaction():
                    tx = PostgresTransaction(self, conn)
                    if serial is not None:
                        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_number(serial),))
                    yield tx
                    with anyio.CancelScope(shield=True):
                        await tx.flush()

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[PostgresTransaction]:
        with self._translated():
            async with self._pool.connection() as conn:
                async with conn.transaction():
                    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    yield PostgresTransaction(self, conn)

    # -- notifications --------------------------------------------------------------------------

    async def notify(self, channel: str, payload: str) -> None:
        with self._translated():
            async with self._pool.connection() as conn:
                await conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))

    @asynccontextmanager
    async def listen(self, channel: str) -> AsyncIterator[Listener]:
        if self._listener is None:
            self._listener = _ListenThread(self.url, self._kwargs, self._channels)
        listener_thread = self._listener
        with self._channels.listening(channel) as listener:
            with anyio.move_on_after(LISTEN_READY_TIMEOUT_S) as waited:
                await listener_thread.ready(channel)
            if waited.cancelled_caught:
                logger.warning("LISTEN %s is not in place yet (the store's connection is down?); going on", channel)
            yield listener

    @asynccontextmanager
    async def lock(self, name: str) -> AsyncIterator[None]:
        number = lock_number(name)
        with self._translated():
            async with self._pool.connection() as conn:
                await conn.execute("SELECT pg_advisory_lock(%s)", (number,))
                try:
                    yield  # the block's own errors are not the store's (raised through as they are)
                finally:
                    with anyio.CancelScope(shield=True):
                        await conn.execute("SELECT pg_advisory_unlock(%s)", (number,))

    async def try_lead(self, name: str, *, tag: str, stale: StaleRule | None = None) -> PostgresLead | None:
        psycopg = require("postgres", "psycopg")

        number = lock_number(name)
        app = f"{_LEAD_APP}{tag}"[:63]
        try:
            conn = await psycopg.AsyncConnection.connect(self.url, **self._kwargs, application_name=app)
        except psycopg.Error as exc:
            raise store_unreachable(self.url, exc) from None
        try:
            with self._translated():
                taken = await _try_lock(conn, number)
                if not taken and stale is not None and await self._end_stale_holders(conn, number, stale):
                    taken = await _try_lock(conn, number)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await conn.close()
            raise
        if not taken:
            await conn.close()
            return None
        return PostgresLead(conn)

    async def _end_stale_holders(self, conn: Any, number: int, stale: StaleRule) -> bool:
        """End the connections holding lock ``number`` whose processes ``stale`` says are dead
        (their machine stopped, or they hang: no FIN reaches the server, so the lock lives on);
        True when one was ended."""
        cursor = await conn.execute(
            "SELECT l.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s AND l.objsubid = 1 AND l.granted",
            (number >> 32, number & 0xFFFFFFFF),
        )
        holders = {str(app)[len(_LEAD_APP):]: pid for pid, app in await cursor.fetchall()
                   if str(app or "").startswith(_LEAD_APP)}  # fmt: skip
        ended = False
        # From PostgreSQL 14 pg_terminate_backend can wait (briefly) for the backend to be gone, so
        # the retry that follows finds the lock free; before, the next try does.
        wait = conn.info.server_version >= 140_000
        for tag in await stale(sorted(holders)):
            cursor = await conn.execute(
                "SELECT pg_terminate_backend(%s, %s)" if wait else "SELECT pg_terminate_backend(%s)",
                (holders[tag], _TERMINATE_WAIT_MS) if wait else (holders[tag],),
            )
            done = await cursor.fetchone()
            if done is not None and done[0]:
                logger.warning("the holder of a lead (instance %s) stopped beating; its lock is taken over", tag)
                ended = True
        return ended

    async def aclose(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await anyio.to_thread.run_sync(listener.stop)
        await self._pool.close()


_LEAD_APP = "pincer-lead "  # a lead connection's application_name, then its holder's tag
_TERMINATE_WAIT_MS = 1_000  # how long ending a stale holder's backend waits for it to be gone


async def _try_lock(conn: Any, number: int) -> bool:
    cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (number,))
    row = await cursor.fetchone()
    return bool(row and row[0])


class PostgresLead:
    """A lead held as a session advisory lock on a connection of its own (closing it lets go)."""

    def __init__(self, conn: Any) -> None:
        self._conn: Any = conn

    async def held(self) -> bool:
        psycopg = require("postgres", "psycopg")

        if self._conn is None:
            return False
        try:
            await self._conn.execute("SELECT 1")  # still connected, so still holding it
        except psycopg.Error as exc:
            logger.warning("a lead was lost with its connection: %s", redact_url(_first_line(exc)))
            await self.release()
            return False
        return True

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with anyio.CancelScope(shield=True):
                try:
                    await conn.close()  # the session ends: its advisory lock with it
                except Exception as exc:  # noqa: BLE001 - closing a broken connection; the lock is gone anyway
                    logger.debug("closing a lead's connection failed: %s", exc)


class PostgresTransaction:
    """One transaction on one pool connection (see store/sql/database.py's ``Transaction``)."""

    dialect: Dialect = "postgresql"

    def __init__(self, db: PostgresDatabase, conn: Any) -> None:
        self._db = db
        self._conn = conn
        self._queued: list[tuple[Sql, Any, bool, int | None]] = []

    def add(self, sql: Sql, params: Params | None = None, *, rows: int | None = None) -> None:
        self._queued.append((sql, params or _NO_PARAMS, False, rows))

    def add_many(self, sql: Sql, rows: Sequence[Params]) -> None:
        if rows:
            self._queued.append((sql, list(rows), True, None))

    def notify(self, channel: str, payload: str) -> None:
        # pg_notify inside the transaction: PostgreSQL delivers it at the commit, or never.
        self._queued.append((_NOTIFY, {"channel": channel, "payload": payload}, False, None))

    async def flush(self) -> None:
        """Send what is queued: a guard on its own round trip, checked at once (a write queued
        after it must not run when it fails), the writes between guards in one pipeline. A guard
        that does not hold raises StoreConflict."""
        queued, self._queued = self._queued, []
        compiled = self._db._compiled
        conn = self._conn
        run: list[tuple[Sql, Any, bool, int | None]] = []
        for item in [*queued, None]:
            if item is not None and item[3] is None:
                run.append(item)
                continue
            await _send_all(conn, compiled, run)
            run = []
            if item is None:
                break
            sql, values, _many, expected = item
            cursor = await conn.execute(compiled(sql), values)
            if cursor.rowcount != expected:
                raise StoreConflict(
                    f"a guarded write changed {cursor.rowcount} rows, not {expected}: another writer changed them first"
                )

    async def fetch_all(self, sql: Sql, params: Params | None = None) -> list[Row]:
        await self.flush()
        cursor = await self._conn.execute(self._db._compiled(sql), params or _NO_PARAMS)
        rows: list[Row] = await cursor.fetchall()
        return rows

    async def fetch_one(self, sql: Sql, params: Params | None = None) -> Row | None:
        await self.flush()
        cursor = await self._conn.execute(self._db._compiled(sql), params or _NO_PARAMS)
        row: Row | None = await cursor.fetchone()
        return row

    async def execute(self, sql: Sql, params: Params | None = None) -> int:
        await self.flush()
        cursor = await self._conn.execute(self._db._compiled(sql), params or _NO_PARAMS)
        return int(cursor.rowcount)

    async def execute_many(self, sql: Sql, rows: Sequence[Params]) -> None:
        self.add_many(sql, rows)
        await self.flush()

    async def batches(self, sql: Sql, params: Params | None = None, *, size: int = 1000) -> AsyncIterator[list[Row]]:
        await self.flush()
        # A server-side cursor: the rows come ``size`` at a time, never all into memory.
        async with self._conn.cursor(name=f"pincer_batches_{id(self):x}") as cursor:
            await cursor.execute(self._db._compiled(sql), params or _NO_PARAMS)
            while batch := await cursor.fetchmany(size):
                yield batch


_NOTIFY = Sql("SELECT pg_notify(:channel, :payload)")


async def _send_all(conn: Any, compiled: _Compiled, items: list[tuple[Sql, Any, bool, int | None]]) -> None:
    """Unguarded writes: one, or several in one pipeline."""
    if not items:
        return
    if len(items) == 1:
        await _send(conn, compiled, items[0])
        return
    async with conn.pipeline():
        for item in items:
            await _send(conn, compiled, item)


async def _send(conn: Any, compiled: _Compiled, item: tuple[Sql, Any, bool, int | None]) -> None:
    sql, values, many, _expected = item
    if many:
        async with conn.cursor() as cursor:
            await cursor.executemany(compiled(sql), values)
        return
    await conn.execute(compiled(sql), values)


class _ListenThread:
    """LISTEN on a connection of its own, in a thread, for the channels someone listens to."""

    def __init__(self, url: str, kwargs: dict[str, Any], channels: Channels) -> None:
        self._url = url
        self._kwargs = kwargs
        self._channels = channels
        self._lock = threading.Lock()
        self._listening: set[str] = set()  # LISTEN sent on the current connection
        self._waiting: dict[str, list[tuple[Any, Any]]] = {}  # channel -> (loop, future) to tell
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="pincer-pg-listen", daemon=True)
        self._thread.start()

    async def ready(self, channel: str) -> None:
        """Return once LISTEN ``channel`` is in place on the connection."""
        import asyncio

        loop = asyncio.get_running_loop()
        with self._lock:
            if channel in self._listening:
                return
            future = loop.create_future()
            self._waiting.setdefault(channel, []).append((loop, future))
        self._wake()
        await future

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:  # stopped: the pipe is closed
            pass

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        self._thread.join(timeout=CONNECT_TIMEOUT_S + 5)
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _serve(self) -> None:
        psycopg = require("postgres", "psycopg")

        had_connection = False
        while not self._stop.is_set():
            try:
                conn = psycopg.connect(self._url, **self._kwargs)
            except psycopg.Error as exc:
                logger.warning("cannot LISTEN on the PostgreSQL store (retrying): %s", redact_url(_first_line(exc)))
                self._stop.wait(LISTEN_RETRY_S)
                continue
            resync, had_connection = had_connection, True
            try:
                self._listen_on(conn, resync=resync)
            except psycopg.Error as exc:
                logger.warning("the PostgreSQL LISTEN connection failed (making it again): %s",
                               redact_url(_first_line(exc)))  # fmt: skip
                self._stop.wait(LISTEN_RETRY_S)
            finally:
                with self._lock:
                    self._listening.clear()
                try:
                    conn.close()
                except Exception as exc:  # noqa: BLE001 - closing a broken connection
                    logger.debug("closing the LISTEN connection failed: %s", exc)

    def _listen_on(self, conn: Any, *, resync: bool) -> None:
        """Listen on ``conn`` until it fails or the thread stops. ``resync``: the connection
        before this one failed; once this one listens again, every listener hears RESYNC (what
        was sent between the two was missed)."""
        sql = require("postgres", "psycopg.sql")

        idle = 0.0
        while not self._stop.is_set():
            wanted = set(self._channels.channels()) | set(self._waiting)
            with self._lock:
                current = set(self._listening)
            for channel in sorted(wanted - current):
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            for channel in sorted(current - wanted):
                conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)))
            with self._lock:
                self._listening = wanted
                waiting, self._waiting = self._waiting, {}
            for futures in waiting.values():
                for loop, future in futures:
                    try:
                        loop.call_soon_threadsafe(_done, future)
                    except RuntimeError:  # its loop is closed
                        pass
            if resync:
                self._channels.resync()
                resync = False
            readable, _, _ = select.select([conn.fileno(), self._wake_r], [], [], 1.0)
            if self._wake_r in readable:
                os.read(self._wake_r, 4096)
            if conn.fileno() in readable:
                idle = 0.0
                for note in conn.notifies(timeout=0.0):
                    self._channels.deliver(note.channel, note.payload)
            elif not readable:
                idle += 1.0
                if idle >= _LISTEN_PING_S:  # a connection whose server went away says so here
                    conn.execute("SELECT 1")
                    idle = 0.0


def _done(future: Any) -> None:
    if not future.done():
        future.set_result(None)
