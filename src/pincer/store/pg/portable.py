"""The few sqlite3.Connection methods the portable stores use, over the PostgreSQL pool.

The approval and run stores (store/approvals.py, store/runs.py) write plain SQL that both
databases read alike (no ``INSERT OR REPLACE``, no ``PRAGMA``, no ``rowid``); with this
connection they run unchanged on PostgreSQL, so both backends share one implementation of
their rules instead of two that drift apart. Only what differs is translated: the ``?``
placeholders become psycopg's ``%s``, results are read whole before the pool connection goes
back (every statement of those stores returns a handful of rows), and database errors become
our StoreError, the URL redacted.

``with conn:`` is one transaction on one pool connection, as it is for sqlite3.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pincer.core.errors import StoreError
from pincer.core.extras import require
from pincer.store.pg.connect import PgPools, redact_url

__all__ = ["PortableConnection", "to_format_style"]


def to_format_style(sql: str) -> str:
    """qmark placeholders to psycopg's format style (a literal ``%`` doubled first)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Result:
    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows, []
        return rows

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())


class _Held(threading.local):
    """The pool connection of an open ``with`` block, per thread (a worker thread's block and
    the event loop's never share one)."""

    conn: Any = None
    conn_cm: Any = None
    transaction: Any = None


class PortableConnection:
    def __init__(self, pools: PgPools) -> None:
        self._pools = pools
        self._state = _Held()

    @property
    def _held(self) -> Any:
        return self._state.conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        psycopg = require("postgres", "psycopg")

        try:
            if self._held is not None:
                return _read(self._held.execute(to_format_style(sql), tuple(params)))
            with self._pools.sync.connection() as conn:
                return _read(conn.execute(to_format_style(sql), tuple(params)))
        except psycopg.Error as exc:
            raise _translated(exc, self._pools.url) from None

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> _Result:
        psycopg = require("postgres", "psycopg")

        try:
            if self._held is not None:
                self._held.cursor().executemany(to_format_style(sql), list(rows))
            else:
                with self._pools.sync.connection() as conn, conn.transaction():
                    conn.cursor().executemany(to_format_style(sql), list(rows))
        except psycopg.Error as exc:
            raise _translated(exc, self._pools.url) from None
        return _Result([], -1)

    def __enter__(self) -> PortableConnection:
        state = self._state
        if state.conn is not None:
            raise StoreError("a store transaction was opened inside another one (a programming error)")
        state.conn_cm = self._pools.sync.connection()
        state.conn = state.conn_cm.__enter__()
        state.transaction = state.conn.transaction()
        state.transaction.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        state = self._state
        transaction, conn_cm = state.transaction, state.conn_cm
        state.transaction = state.conn = state.conn_cm = None
        try:
            transaction.__exit__(*exc_info)
        finally:
            conn_cm.__exit__(*exc_info)


def _read(cursor: Any) -> _Result:
    rows = cursor.fetchall() if cursor.description is not None else []
    return _Result(rows, cursor.rowcount)


def _translated(exc: BaseException, url: str) -> StoreError:
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return StoreError(
        f"the PostgreSQL store {redact_url(url)} failed: {redact_url(first_line)}",
        hint="check that the server runs and that `pincer db upgrade` ran with this [store] url",
    )
