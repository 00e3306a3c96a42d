"""The one database seam every store is written against: SQLite or PostgreSQL behind it.

    db = await open_sqlite(home)                                 # or open_postgres(url, ...)
    rows = await db.fetch_all(LIST, {"status": "pending"})
    async with db.transaction() as tx:
        head = await tx.fetch_one(HEAD)                          # a round trip
        tx.add(MOVE_HEAD, {...}, rows=1)                         # sent with the commit
        tx.add_many(INSERT, rows)
        tx.notify("pincer_approvals", approval_id)               # delivered once committed
    async with db.listen("pincer_approvals") as notes:
        async for payload in notes: ...

Statements are :class:`~pincer.store.sql.statement.Sql` (text with named binds). Rows come back
as plain tuples in the order the statement names its columns; the column types are the portable
ones of schema.py (integers, floats, text, bytes), so both databases hand back the same values.

A transaction is one connection and one transaction. ``add`` queues a statement whose answer the
store does not need: queued statements go with the next statement that is awaited, or with the
commit, so a transaction that only writes costs one round trip (one hop to the SQLite writer
thread; one pipeline on PostgreSQL). ``rows=N`` makes the write a guard: any other number of
rows changed fails the whole transaction with :class:`~pincer.core.errors.StoreConflict`, rolled
back. Every database error becomes a :class:`~pincer.core.errors.StoreError` whose text never
holds a password.

``transaction(serial=NAME)``: transactions naming the same NAME run one at a time across every
process on the database (SQLite's writer lock does this for every write transaction already;
PostgreSQL takes a transaction-scoped advisory lock). ``lock(NAME)`` is the same for a block that
is no transaction, and ``try_lead(NAME)`` for as long as a process leads (the scheduler) (an advisory lock held on a connection of its own; on SQLite an ``flock`` on a
file beside the database). ``snapshot()`` is a read-only transaction that sees one instant of
the database throughout (a chain walk).

Notifications say "this changed" to every listener of the channel: PostgreSQL's LISTEN/NOTIFY
across every process on the database; on SQLite an in-process signal (store/sql/notices.py)
shared by every database object of the same file in this process, and :data:`RESYNC` to every
listener when another process committed (store/sql/sqlite.py watches ``PRAGMA data_version``).
A listener that may have missed notifications (its connection was lost and made again, it fell
behind) receives :data:`RESYNC` too and reads what it follows again. ``listen`` returns once the
listener is in place, so a store that reads after entering it never misses a change made after
that read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from pincer.store.sql.statement import Dialect, Params, Sql

__all__ = ["Database", "Transaction", "Queries", "Lead", "StaleRule", "Row", "RESYNC"]

Row = tuple[Any, ...]
RESYNC = ""  # a listener's payload after a gap: read again whatever it follows


# tags of the processes holding a lead -> those known to be dead (their machine stopped beating)
StaleRule = Callable[[list[str]], Awaitable[set[str]]]


class Lead(Protocol):
    """A lead this process holds (:meth:`Database.try_lead`): one process at a time, and free
    the moment that process dies."""

    async def held(self) -> bool:
        """Whether this process still holds it (a lost connection lost it)."""
        ...

    async def release(self) -> None: ...


class Queries(Protocol):
    """What a database and a transaction both answer."""

    @property
    def dialect(self) -> Dialect: ...

    async def fetch_all(self, sql: Sql, params: Params | None = None) -> list[Row]: ...

    async def fetch_one(self, sql: Sql, params: Params | None = None) -> Row | None: ...

    async def execute(self, sql: Sql, params: Params | None = None) -> int:
        """Run a write; the number of rows it changed."""
        ...

    async def execute_many(self, sql: Sql, rows: Sequence[Params]) -> None: ...


class Transaction(Queries, Protocol):
    def add(self, sql: Sql, params: Params | None = None, *, rows: int | None = None) -> None:
        """Queue a write for the next round trip (see the module docstring); ``rows``: a guard."""
        ...

    def add_many(self, sql: Sql, rows: Sequence[Params]) -> None: ...

    def notify(self, channel: str, payload: str) -> None:
        """Tell the channel's listeners, once (and only if) this transaction commits."""
        ...

    def batches(self, sql: Sql, params: Params | None = None, *, size: int = 1000) -> AsyncIterator[list[Row]]:
        """The rows of a long read, ``size`` at a time (a snapshot's chain walk)."""
        ...


class Database(Queries, Protocol):
    def transaction(self, *, serial: str | None = None) -> AbstractAsyncContextManager[Transaction]: ...

    def snapshot(self) -> AbstractAsyncContextManager[Transaction]:
        """A read-only transaction that sees one instant of the database throughout."""
        ...

    async def notify(self, channel: str, payload: str) -> None: ...

    def listen(self, channel: str) -> AbstractAsyncContextManager[AsyncIterator[str]]: ...

    def lock(self, name: str) -> AbstractAsyncContextManager[None]:
        """Held by one process at a time across the database (every other waits): a
        read-modify-write outside the database itself (a shared registry file)."""
        ...

    async def try_lead(self, name: str, *, tag: str, stale: StaleRule | None = None) -> Lead | None:
        """Take the lead ``name`` if nobody holds it: it is then this process's until released or
        until the process dies (PostgreSQL: an advisory lock on a connection of its own, whose
        ``application_name`` carries ``tag``; SQLite: an ``flock`` on a file beside the
        database). ``stale``: which holders are dead though their lock lives on (a machine that
        stopped: PostgreSQL ends their connections and takes the lead)."""
        ...

    @property
    def shown(self) -> str:
        """Where the database is, as it may be shown (a PostgreSQL url with no password)."""
        ...

    async def aclose(self) -> None: ...
