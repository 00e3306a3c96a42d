"""Stored grants on PostgreSQL: every gateway sees an ``allow always`` answered on any other.

A version counter moves in the same transaction as every change; a gateway reads it (one tiny
statement) at most every ``RECHECK_INTERVAL_S`` on the hot path and reloads the grants only
when it moved, the way the SQLite store reads ``PRAGMA data_version``.
"""

from __future__ import annotations

import json
import time

from pincer.policy.grants import Grant
from pincer.store.grants import RECHECK_INTERVAL_S, _from_dict
from pincer.store.pg.connect import PgPools

__all__ = ["PgGrantStore"]

_BUMP = "UPDATE grants_version SET version = version + 1 WHERE one = 1"


class PgGrantStore:
    def __init__(self, pools: PgPools) -> None:
        self._pools = pools
        self._cache: tuple[Grant, ...] | None = None
        self._version = -1
        self._checked_at = 0.0

    def add(self, grant: Grant) -> None:
        with self._pools.sync.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO grants (id, created_at, body) VALUES (%s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET created_at = EXCLUDED.created_at, body = EXCLUDED.body",
                (grant.id, time.time(), json.dumps(grant.to_dict())),
            )
            conn.execute(_BUMP)
        self._cache = None

    def remove(self, grant_id: str) -> bool:
        with self._pools.sync.connection() as conn, conn.transaction():
            removed = bool(conn.execute("DELETE FROM grants WHERE id = %s", (grant_id,)).rowcount == 1)
            conn.execute(_BUMP)
        self._cache = None
        return removed

    def all(self) -> tuple[Grant, ...]:
        now = time.monotonic()
        if self._cache is not None and now - self._checked_at < RECHECK_INTERVAL_S:
            return self._cache
        self._checked_at = now
        with self._pools.sync.connection() as conn:
            version = conn.execute("SELECT version FROM grants_version WHERE one = 1").fetchone()[0]
            if self._cache is None or version != self._version:
                rows = conn.execute("SELECT body FROM grants ORDER BY created_at").fetchall()
                self._cache = tuple(_from_dict(json.loads(body)) for (body,) in rows)
                self._version = version
        return self._cache
