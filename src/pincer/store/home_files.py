"""The registry's shared files, in the store (store/home_share.py says what they are and how a home
syncs with them).

``home_files`` holds one row per path (its bytes, their sha256, the file mode, whether it is a
link or was deleted, the counter value it was published under, and who published it, for the
operator's eye); ``home_files_version`` is the counter. A publish takes the counter row first
(``UPDATE ... RETURNING``), so publishes commit in counter order and a home that read up to
version N has seen every row of every version up to N. Deletions stay as rows (``kind =
'gone'``): a home that was away learns about them too.

Written once against the database seam: PostgreSQL is where homes share them (``[store] url``);
on SQLite nothing is shared (store/home_share.py's ``LocalHome``), but the store works there too.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from pincer.store.home_share import SharedFile
from pincer.store.sql import Database, Sql

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

__all__ = ["HomeFiles", "PortalHomeFiles", "shared_home_files", "POOL_SIZE"]

POOL_SIZE = 2  # one connection holds a read-modify-write's lock, one does its reads and writes

_COLUMNS = "path, kind, data, sha256, mode, version"
_VERSION = Sql("SELECT version FROM home_files_version WHERE one = 1")
_CHANGES = Sql(f"SELECT {_COLUMNS} FROM home_files WHERE version > :since ORDER BY version, path")
_GET = Sql(f"SELECT {_COLUMNS} FROM home_files WHERE path = :path")
_NEXT = Sql("UPDATE home_files_version SET version = version + 1 WHERE one = 1 RETURNING version")
_PUBLISH = Sql(
    "INSERT INTO home_files (path, kind, data, sha256, mode, version, written_by, written_at) "
    "VALUES (:path, :kind, :data, :sha256, :mode, :version, :written_by, :written_at) "
    "ON CONFLICT (path) DO UPDATE SET kind = excluded.kind, data = excluded.data, sha256 = excluded.sha256, "
    "mode = excluded.mode, version = excluded.version, written_by = excluded.written_by, "
    "written_at = excluded.written_at"
)


def _file(row: tuple[Any, ...]) -> SharedFile:
    path, kind, data, sha256, mode, version = row
    return SharedFile(path=path, kind=kind, data=bytes(data), sha256=sha256, mode=int(mode), version=int(version))


class HomeFiles:
    """The store side of :class:`~pincer.store.home_share.HomeSync`, over any database."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._writer = f"{socket.gethostname()}:{os.getpid()}"

    async def version(self) -> int:
        row = await self._db.fetch_one(_VERSION)
        return int(row[0]) if row else 0

    async def changes(self, since: int) -> list[SharedFile]:
        return [_file(row) for row in await self._db.fetch_all(_CHANGES, {"since": since})]

    async def get(self, path: str) -> SharedFile | None:
        row = await self._db.fetch_one(_GET, {"path": path})
        return _file(row) if row is not None else None

    async def publish(self, files: Sequence[SharedFile]) -> int:
        """Store ``files`` under one new counter value, in one transaction; that value."""
        now = time.time()
        async with self._db.transaction() as tx:
            row = await tx.fetch_one(_NEXT)
            version = int(row[0]) if row else 0
            tx.add_many(_PUBLISH, [{"path": f.path, "kind": f.kind, "data": f.data, "sha256": f.sha256, "mode": f.mode,
                                    "version": version, "written_by": self._writer, "written_at": now}
                                   for f in files])  # fmt: skip
        return version

    def lock(self, path: str) -> AbstractAsyncContextManager[None]:
        """Held across one read-modify-write of ``path``, by every home on the store."""
        return self._db.lock(f"home-file:{path}")


class PortalHomeFiles:
    """:class:`HomeFiles` for :class:`~pincer.store.home_share.HomeSync`, whose work is
    synchronous (file locks, hashing, the JSON writers of pins and server lists, from any thread):
    its database lives in a thread of its own, with an event loop of its own there (anyio's
    blocking portal), and each call waits for its answer from there. A read-modify-write made on
    an event loop waits for it as it waits for the file lock it holds already."""

    is_shared = True

    def __init__(self, portal: BlockingPortal, files: HomeFiles) -> None:
        self._portal = portal
        self._files = files

    def version(self) -> int:
        return self._portal.call(self._files.version)

    def changes(self, since: int) -> list[SharedFile]:
        return self._portal.call(self._files.changes, since)

    def get(self, path: str) -> SharedFile | None:
        return self._portal.call(self._files.get, path)

    def publish(self, files: Sequence[SharedFile]) -> int:
        return self._portal.call(self._files.publish, files)

    @contextmanager
    def lock(self, path: str) -> Iterator[None]:
        with self._portal.wrap_async_context_manager(self._files.lock(path)):
            yield


@contextmanager
def shared_home_files(url: str, *, password: str | None = None) -> Iterator[PortalHomeFiles | None]:
    """The shared files of the PostgreSQL store at ``url`` for synchronous code, for the block
    (StoreError when it cannot be reached); None when the store is not at this pincer's schema
    yet (whoever opens it next names ``pincer db upgrade``)."""
    from anyio.from_thread import start_blocking_portal

    from pincer.store.sql import open_postgres
    from pincer.store.sql.migrate import read_state

    with start_blocking_portal() as portal:
        db = portal.call(lambda: open_postgres(url, password=password, size=POOL_SIZE, check_schema=False))
        try:
            if not portal.call(read_state, db).at_head:
                yield None
                return
            yield PortalHomeFiles(portal, HomeFiles(db))
        finally:
            portal.call(db.aclose)
