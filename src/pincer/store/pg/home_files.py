"""The registry's shared files on PostgreSQL (store/home_share.py says what they are and how a
home syncs with them).

``home_files`` holds one row per path (its bytes, their sha256, the file mode, whether it is a
link or was deleted, the counter value it was published under, and who published it, for the
operator's eye); ``home_files_version`` is the counter. A publish takes the counter row
(``UPDATE ... RETURNING``), so publishes commit in counter order and a home that read up to
version N has seen every row of every version up to N. Deletions stay as rows (``kind =
'gone'``): a home that was away learns about them too.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pincer.core.errors import StoreError
from pincer.core.extras import require
from pincer.store.home_share import SharedFile
from pincer.store.pg.connect import PgPools, redact_url

__all__ = ["PgHomeFiles"]

_COLUMNS = "path, kind, data, sha256, mode, version"


def _row(row: tuple[Any, ...]) -> SharedFile:
    path, kind, data, sha256, mode, version = row
    return SharedFile(path=path, kind=kind, data=bytes(data), sha256=sha256, mode=int(mode), version=int(version))


def _lock_key(path: str) -> int:
    """A 63-bit advisory lock number for ``path`` (apart from the numbers other locks use)."""
    return int.from_bytes(hashlib.sha256(b"pincer-home-file:" + path.encode()).digest()[:8], "big") >> 1


class PgHomeFiles:
    is_shared = True

    def __init__(self, pools: PgPools) -> None:
        self._pools = pools
        self._writer = f"{socket.gethostname()}:{os.getpid()}"

    @contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        psycopg = require("postgres", "psycopg")
        PoolTimeout = require("postgres", "psycopg_pool").PoolTimeout

        try:
            yield
        except (psycopg.Error, PoolTimeout) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(
                f"the registry files could not be {doing} the PostgreSQL store {self._pools.shown_url}: "
                f"{redact_url(first)}",
                hint="check that the server runs and [store] url; `pincer db status` shows the store and its schema",
            ) from None

    def version(self) -> int:
        with self._translated("read from"), self._pools.sync.connection() as conn:
            return int(conn.execute("SELECT version FROM home_files_version WHERE one = 1").fetchone()[0])

    def changes(self, since: int) -> list[SharedFile]:
        with self._translated("read from"), self._pools.sync.connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM home_files WHERE version > %s ORDER BY version, path", (since,)
            ).fetchall()
        return [_row(row) for row in rows]

    def get(self, path: str) -> SharedFile | None:
        with self._translated("read from"), self._pools.sync.connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM home_files WHERE path = %s", (path,)).fetchone()
        return _row(row) if row is not None else None

    def publish(self, files: Sequence[SharedFile]) -> int:
        now = time.time()
        with self._translated("written to"), self._pools.sync.connection() as conn, conn.transaction():
            version = int(
                conn.execute("UPDATE home_files_version SET version = version + 1 WHERE one = 1 RETURNING version").fetchone()[0]
            )
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO home_files (path, kind, data, sha256, mode, version, written_by, written_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (path) DO UPDATE SET kind = EXCLUDED.kind, "
                    "data = EXCLUDED.data, sha256 = EXCLUDED.sha256, mode = EXCLUDED.mode, version = EXCLUDED.version, "
                    "written_by = EXCLUDED.written_by, written_at = EXCLUDED.written_at",
                    [(f.path, f.kind, f.data, f.sha256, f.mode, version, self._writer, now) for f in files],
                )
        return version

    @contextmanager
    def lock(self, path: str) -> Iterator[None]:
        with self._translated("locked in"):
            conn = self._pools.sync.getconn()
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (_lock_key(path),))
            except BaseException:
                self._pools.sync.putconn(conn)
                raise
        try:
            yield  # the body's own errors are not the store's
        finally:
            try:
                with self._translated("unlocked in"):
                    conn.execute("SELECT pg_advisory_unlock(%s)", (_lock_key(path),))
            finally:
                self._pools.sync.putconn(conn)
