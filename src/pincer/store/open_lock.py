"""One process at a time sets up a SQLite file: the switch to WAL and the schema migrations.

Two processes opening a new database at once both ask SQLite to switch it from its rollback
journal to WAL. Each then holds a shared lock and wants the exclusive one; SQLite sees the
deadlock and answers one of them "database is locked" at once, without waiting out the busy
timeout. So a second `pincer` command started beside the first on a fresh home failed now and
then (the CLI tests met it about once in a few hundred starts). Holding an exclusive ``flock`` on
a lock file beside the database while it is set up makes the second wait its turn; once the
file is in WAL and migrated the section is a few statements long.

The lock is a file of its own (``.NAME.open-lock``), not the database: SQLite locks the database
with POSIX record locks, and where ``flock`` is emulated with those (NFS) the two would meet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pincer.store.jsonfile import flocked

__all__ = ["open_lock"]


@contextlib.contextmanager
def open_lock(database: Path) -> Iterator[None]:
    """Hold the setup lock of ``database`` (its directory must exist)."""
    with flocked(database.with_name(f".{database.name}.open-lock")):
        yield
