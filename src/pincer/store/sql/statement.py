"""A statement, written once for both databases: SQL text with named binds (``:name``).

Where the two databases need other words (a locking read, the database's clock, an advisory
lock), the statement carries the PostgreSQL text beside the SQLite one; every such difference is
spelled in :mod:`pincer.store.sql.dialects`, so a store module never asks which database it runs
on. Each driver turns a statement into its own paramstyle once and keeps it (the SQLite driver
needs nothing: ``:name`` is sqlite3's own named style; the PostgreSQL driver has SQLAlchemy
compile it to psycopg's ``%(name)s``).

A statement is compared by identity, so a driver's cache costs one dictionary lookup; statements
that vary (a list's filters) come from a function with ``functools.cache`` that returns the same
object for the same variant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["Sql", "Params", "Dialect"]

Dialect = Literal["sqlite", "postgresql"]
Params = Mapping[str, Any]


class Sql:
    """SQL text with named binds; ``postgresql`` replaces it on PostgreSQL when given."""

    __slots__ = ("text", "postgresql")

    def __init__(self, text: str, *, postgresql: str | None = None) -> None:
        self.text = text.strip()
        self.postgresql = postgresql.strip() if postgresql is not None else None

    def for_dialect(self, dialect: Dialect) -> str:
        if dialect == "postgresql" and self.postgresql is not None:
            return self.postgresql
        return self.text

    def __repr__(self) -> str:
        return f"Sql({self.text!r})"
