"""What SQLite and PostgreSQL spell differently, in one place: every store asks here.

Both take ``INSERT ... ON CONFLICT (...) DO UPDATE SET x = excluded.x`` / ``DO NOTHING``,
``RETURNING`` (SQLite 3.35 and later) and row values (``(a, b) IN (SELECT ...)``) alike, so those
are written once in the stores. What differs:

- a read that locks the rows it reads for the rest of its transaction: PostgreSQL says ``FOR
  UPDATE``; SQLite needs nothing, its write transactions begin ``BEGIN IMMEDIATE`` and so hold
  the one write lock from their first statement (:func:`locking`);
- the database's own clock, in seconds since the epoch, the one clock every machine on a shared
  store agrees on (:func:`with_clock`: ``{now}`` in the text).
"""

from __future__ import annotations

from pincer.store.sql.statement import Sql

__all__ = ["locking", "with_clock", "SQLITE_NOW", "POSTGRES_NOW"]

SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
POSTGRES_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"


def locking(text: str) -> Sql:
    """``text`` (a SELECT) that also locks the rows it reads until its transaction ends."""
    return Sql(text, postgresql=f"{text} FOR UPDATE")


def with_clock(text: str) -> Sql:
    """``text`` with ``{now}`` standing for the database's clock (seconds since the epoch)."""
    return Sql(text.replace("{now}", SQLITE_NOW), postgresql=text.replace("{now}", POSTGRES_NOW))
