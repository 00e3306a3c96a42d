"""The SQLite driver of the database seam (store/sql/database.py): pincer.db under PINCER_HOME.

No sqlite3 call runs on the event loop. One writer thread owns the connection every write goes
through (SQLite takes one writer at a time anyway); reader threads own read-only connections of
their own and answer reads beside it, which WAL lets them do without waiting on the writer
(store/sql/workers.py: how a job crosses to a thread and back). A write transaction holds the
writer for its whole length (an ``anyio.Lock``, so nothing else of this process runs inside it)
and begins ``BEGIN IMMEDIATE``: it takes SQLite's write lock first, so two processes never both
read and then fail to write. Another process's transaction makes it wait up to
:data:`BUSY_TIMEOUT_MS`, in the writer thread.

Notifications are an in-process signal (store/sql/notices.py): every database object of the same
file in this process hears them, once the transaction that sent them has committed. Another
process's commits (``pincer approvals approve``, ``pincer tasks cancel``, another gateway on the
file) are announced as RESYNC: while anyone listens through a database object, its writer thread
reads ``PRAGMA data_version`` on the writer's connection every :data:`WATCH_INTERVAL_S`, between
its jobs. SQLite changes that number when another connection has committed to the file, and
never for the connection's own commits, so the writer (through which every commit of this object
goes) sees exactly the other connections' commits, at the cost of one pragma per interval and
nothing on the write path. The number says only that something changed, so the listeners are
told RESYNC and read again what they follow. Another database object of this process on the same
file is another connection too: its commits are told in-process already, so a change seen while
one of those is under way or was booked since the last look is taken for it
(:meth:`~pincer.store.sql.notices.Channels.local_commits`); pincer opens one database object per
process, the tests sometimes two.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from pincer.core.errors import StoreConflict, StoreError
from pincer.store.sql.database import Row, StaleRule
from pincer.store.sql.notices import Listener, channels_of_file
from pincer.store.sql.statement import Dialect, Params, Sql
from pincer.store.sql.workers import Worker

__all__ = ["SqliteDatabase", "BUSY_TIMEOUT_MS", "READER_THREADS", "WATCH_INTERVAL_S"]

BUSY_TIMEOUT_MS = 5_000
READER_THREADS = 2
# How often a database object with listeners looks whether another process committed: the
# longest another process's change waits before this one's listeners hear of it (plus a write
# of this process the writer is busy with). One pragma on the writer's thread: idle, a process
# with a listener spent 13 ms of CPU in 10 s at 0.1 s, 23 ms at 0.05 s (load 5.7), 0.2 ms without.
WATCH_INTERVAL_S = 0.1
_NO_PARAMS: Params = {}

T = TypeVar("T")
# A queued write: (statement text, parameters or rows, many?, rows it must change or None).
_Queued = tuple[str, Any, bool, int | None]


def _connect(
    path: Path, synchronous: str, *, read_only: bool, trace: Callable[[str], None] | None = None
) -> sqlite3.Connection:
    # isolation_level None: sqlite3 begins nothing by itself; the transactions here say BEGIN.
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, cached_statements=256)
    if trace is not None:
        conn.set_trace_callback(trace)
    try:
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        if read_only:
            conn.execute("PRAGMA query_only=ON")  # a write sent to a reader is an error, not a write
    except BaseException:
        conn.close()
        raise
    return conn


def _close(conn: sqlite3.Connection) -> None:
    conn.close()


def _flock(path: Path) -> int:
    """An exclusive ``flock`` on ``path`` (made 0600, never through a link); its descriptor."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


class SqliteDatabase:
    dialect: Dialect = "sqlite"

    def __init__(
        self,
        path: Path,
        *,
        synchronous: str = "NORMAL",
        readers: int = READER_THREADS,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        """``trace``: called (in the writer's thread) with each statement the writer runs, as
        sqlite3's ``set_trace_callback`` gives it: what a commit costs, seen from outside."""
        self.path = path
        self._synchronous = synchronous
        self._writer: Worker[sqlite3.Connection] = Worker(
            "pincer-sqlite-writer", lambda: _connect(path, synchronous, read_only=False, trace=trace), _close
        )
        self._readers: Worker[sqlite3.Connection] = Worker(
            "pincer-sqlite-reader", lambda: _connect(path, synchronous, read_only=True), _close, threads=readers
        )
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._channels = channels_of_file(os.path.realpath(path))
        self._trace = trace
        self._watch = _Watch()  # the writer thread's alone

    @property
    def shown(self) -> str:
        return str(self.path)

    async def trace(self, callback: Callable[[str], None] | None) -> None:
        """From now on, call ``callback`` (in the writer's thread) with each statement the
        writer runs (None: stop); the ``trace`` of the constructor, for a database already open."""
        self._trace = callback
        await self._writer.run(lambda conn: conn.set_trace_callback(callback))

    async def start(self) -> None:
        """Open the writer's connection now, so a database that cannot be opened fails here."""
        await self._writer.run(lambda conn: None)

    # -- reads and single writes --------------------------------------------------------------

    async def fetch_all(self, sql: Sql, params: Params | None = None) -> list[Row]:
        text, values = sql.text, params or _NO_PARAMS
        return await self._readers.run(self._guarded(lambda conn: conn.execute(text, values).fetchall()))

    async def fetch_one(self, sql: Sql, params: Params | None = None) -> Row | None:
        text, values = sql.text, params or _NO_PARAMS
        row: Row | None = await self._readers.run(self._guarded(lambda conn: conn.execute(text, values).fetchone()))
        return row

    async def execute(self, sql: Sql, params: Params | None = None) -> int:
        text, values = sql.text, params or _NO_PARAMS

        def run(conn: sqlite3.Connection) -> int:
            with self._committing():  # a statement outside a transaction commits itself
                return int(conn.execute(text, values).rowcount)

        async with self._write_lock:
            return await self._writer.run(self._guarded(run))

    async def execute_many(self, sql: Sql, rows: Sequence[Params]) -> None:
        async with self.transaction() as tx:
            tx.add_many(sql, rows)

    # -- transactions ---------------------------------------------------------------------------

    def transaction(self, *, serial: str | None = None) -> _Writing:
        # ``serial`` needs nothing here: BEGIN IMMEDIATE already makes every write transaction on
        # the file, from any process, wait for the one before.
        return _Writing(self)

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[SqliteTransaction]:
        # A connection of its own for the snapshot's length: a long read never holds up the
        # shared readers, and its thread goes with it.
        worker: Worker[sqlite3.Connection] = Worker(
            "pincer-sqlite-snapshot", lambda: _connect(self.path, self._synchronous, read_only=True), _close
        )
        tx = SqliteTransaction(self, worker, begin="BEGIN")
        try:
            try:
                yield tx
            finally:
                with anyio.CancelScope(shield=True):
                    await tx.rollback()
        finally:
            with anyio.CancelScope(shield=True):
                await worker.aclose()

    # -- notifications --------------------------------------------------------------------------

    async def notify(self, channel: str, payload: str) -> None:
        self._channels.deliver(channel, payload)

    @asynccontextmanager
    async def listen(self, channel: str) -> AsyncIterator[Listener]:
        with self._channels.listening(channel) as listener:
            # In place, then the watch's first look: another process's commit made before that
            # look is one the caller's first read (after this returns) sees.
            await self._follow_others(+1)
            try:
                yield listener
            finally:
                with suppress(StoreError):  # closed meanwhile: its thread stopped looking with it
                    await self._follow_others(-1)

    async def look_elsewhere(self) -> bool:
        """Look now whether another process committed since the last look, telling every listener
        RESYNC if so (what the writer does every :data:`WATCH_INTERVAL_S` while anyone listens
        through this object; without a listener the first look only takes its bearings)."""
        return await self._writer.run(self._guarded(self._look))

    async def _follow_others(self, change: int) -> None:
        watch = self._watch

        def follow(conn: sqlite3.Connection) -> None:
            first = watch.listeners == 0
            watch.listeners += change
            if first and watch.listeners > 0:
                watch.version = None
                self._look(conn)  # its bearings: nothing before it is told
                self._writer.tick_every(WATCH_INTERVAL_S, self._look)
            elif watch.listeners == 0:
                self._writer.tick_every(WATCH_INTERVAL_S, None)

        with anyio.CancelScope(shield=True):  # counted once, whatever happens to the caller
            await self._writer.run(self._guarded(follow))

    @contextmanager
    def _committing(self) -> Iterator[None]:
        """Around a commit of the writer (in its thread): booked, so the watch of another
        database object of this process on the file does not take it for another process's."""
        self._channels.committing()
        try:
            yield
        finally:
            self._watch.own_commits += 1
            self._channels.committed()

    def _look(self, conn: sqlite3.Connection) -> bool:
        """In the writer's thread: whether another connection committed since the last look,
        and not one of this process (see the module's docstring); if so every listener of the
        file hears RESYNC."""
        watch = self._watch
        if self._trace is not None:  # the trace shows what the stores run, not this look
            conn.set_trace_callback(None)
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
        finally:
            if self._trace is not None:
                conn.set_trace_callback(self._trace)
        under_way, booked = self._channels.local_commits()
        others = booked - watch.own_commits  # this writer's own are never under way here
        elsewhere = (
            watch.version is not None and version != watch.version and under_way == 0 and others == watch.others
        )
        watch.version, watch.others = version, others
        if elsewhere:
            self._channels.resync()
        return elsewhere

    @asynccontextmanager
    async def lock(self, name: str) -> AsyncIterator[None]:
        # flock blocks: taken in a worker thread; a file per name beside the database.
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        path = self.path.with_name(f".{self.path.name}.lock-{digest}")
        fd = await anyio.to_thread.run_sync(_flock, path)
        try:
            yield
        finally:
            os.close(fd)  # closing lets go

    async def try_lead(self, name: str, *, tag: str, stale: StaleRule | None = None) -> FileLead | None:
        # One machine: the kernel frees an flock the moment its process dies; ``stale`` has nothing to end.
        path = self.path.with_name(f".{self.path.name}.lead-{hashlib.sha256(name.encode()).hexdigest()[:16]}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return FileLead(fd)

    async def aclose(self) -> None:
        await self._readers.aclose()
        await self._writer.aclose()

    # -- in the threads -------------------------------------------------------------------------

    def _guarded(self, job: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
        path = self.path

        def guarded(conn: sqlite3.Connection) -> T:
            try:
                return job(conn)
            except sqlite3.Error as exc:
                raise store_error(path, exc) from exc

        return guarded


class _Watch:
    """What the writer's thread knows of the file's commits (see the module's docstring)."""

    __slots__ = ("listeners", "version", "others", "own_commits")

    def __init__(self) -> None:
        self.listeners = 0  # listen blocks open through this database object
        self.version: int | None = None  # PRAGMA data_version at the last look
        self.others = 0  # commits of this process's other database objects, at the last look
        self.own_commits = 0


class _Writing:
    """A write transaction's block (:meth:`SqliteDatabase.transaction`): the writer held for its
    length, the commit (or the rollback) shielded so a cancelled caller never leaves it half-way,
    notices delivered once committed. A class rather than ``asynccontextmanager``: the audit's
    group commit enters one per batch, and a generator and its frame cost more than it."""

    __slots__ = ("_db", "_tx")

    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db
        self._tx: SqliteTransaction | None = None

    async def __aenter__(self) -> SqliteTransaction:
        await self._db._write_lock.acquire()
        self._tx = SqliteTransaction(self._db, self._db._writer, begin="BEGIN IMMEDIATE")
        return self._tx

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: object) -> None:
        tx = self._tx
        assert tx is not None
        try:
            with anyio.CancelScope(shield=True):
                if kind is None:
                    await tx.commit()
                else:
                    await tx.rollback()
        finally:
            self._db._write_lock.release()
        if kind is None:
            for channel, payload in tx.notices:
                self._db._channels.deliver(channel, payload)


class FileLead:
    """A lead held as an ``flock`` on an open file (closing it lets go)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    async def held(self) -> bool:
        return self._fd is not None

    async def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class SqliteTransaction:
    """One transaction on one thread's connection (see store/sql/database.py's ``Transaction``)."""

    dialect: Dialect = "sqlite"

    def __init__(self, db: SqliteDatabase, worker: Worker[sqlite3.Connection], *, begin: str) -> None:
        self._db = db
        self._worker = worker
        self._begin = begin
        self._begun = False
        self._queued: list[_Queued] = []
        self.notices: list[tuple[str, str]] = []

    def add(self, sql: Sql, params: Params | None = None, *, rows: int | None = None) -> None:
        self._queued.append((sql.text, params or _NO_PARAMS, False, rows))

    def add_many(self, sql: Sql, rows: Sequence[Params]) -> None:
        if rows:
            self._queued.append((sql.text, rows, True, None))

    def notify(self, channel: str, payload: str) -> None:
        self.notices.append((channel, payload))

    async def fetch_all(self, sql: Sql, params: Params | None = None) -> list[Row]:
        text, values = sql.text, params or _NO_PARAMS
        return await self._hop(lambda conn: conn.execute(text, values).fetchall())

    async def fetch_one(self, sql: Sql, params: Params | None = None) -> Row | None:
        text, values = sql.text, params or _NO_PARAMS
        row: Row | None = await self._hop(lambda conn: conn.execute(text, values).fetchone())
        return row

    async def execute(self, sql: Sql, params: Params | None = None) -> int:
        text, values = sql.text, params or _NO_PARAMS
        return await self._hop(lambda conn: conn.execute(text, values).rowcount)

    async def execute_many(self, sql: Sql, rows: Sequence[Params]) -> None:
        self.add_many(sql, rows)
        await self._hop(lambda conn: None)

    async def batches(self, sql: Sql, params: Params | None = None, *, size: int = 1000) -> AsyncIterator[list[Row]]:
        text, values = sql.text, params or _NO_PARAMS
        cursor: list[sqlite3.Cursor] = []

        def first(conn: sqlite3.Connection) -> list[Row]:
            cursor.append(conn.execute(text, values))
            return cursor[0].fetchmany(size)

        batch = await self._hop(first)
        while batch:
            yield batch
            if len(batch) < size:
                return
            batch = await self._worker.run(self._db._guarded(lambda conn: cursor[0].fetchmany(size)))

    async def _hop(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Whatever is queued, then ``job``, in one trip to the thread (BEGIN first, the first time)."""
        queued, self._queued = self._queued, []
        begin = None if self._begun else self._begin
        self._begun = True

        def run(conn: sqlite3.Connection) -> T:
            if begin is not None:
                conn.execute(begin)
            _run_queued(conn, queued)
            return job(conn)

        return await self._worker.run(self._db._guarded(run))

    async def commit(self) -> None:
        queued, self._queued = self._queued, []
        if not self._begun and not queued:
            return
        begin = None if self._begun else self._begin
        self._begun = False

        def run(conn: sqlite3.Connection) -> None:
            try:
                if begin is not None:
                    conn.execute(begin)
                _run_queued(conn, queued)
                with self._db._committing() if self._worker is self._db._writer else nullcontext():
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        await self._worker.run(self._db._guarded(run))

    async def rollback(self) -> None:
        self._queued = []
        if not self._begun:
            return
        self._begun = False

        def run(conn: sqlite3.Connection) -> None:
            if conn.in_transaction:
                conn.execute("ROLLBACK")

        await self._worker.run(self._db._guarded(run))


def _run_queued(conn: sqlite3.Connection, queued: list[_Queued]) -> None:
    for text, values, many, expected in queued:
        if many:
            conn.executemany(text, values)
            continue
        changed = conn.execute(text, values).rowcount
        if expected is not None and changed != expected:
            raise StoreConflict(
                f"a guarded write changed {changed} rows, not {expected}: another writer changed them first"
            )


def store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    return StoreError(
        f"the pincer database {path} failed: {exc}",
        hint="check that PINCER_HOME is writable and pincer.db is a pincer database (`pincer doctor` checks it)",
    )
