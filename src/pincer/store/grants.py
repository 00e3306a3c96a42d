"""Grants recorded by ``allow always`` answers, kept beside the ones in config.toml.

Every change moves a version counter in the same transaction (``grants_version``); a reader
checks it (one tiny statement) at most every ``RECHECK_INTERVAL_S`` on the hot path and reloads
the grants only when it moved, so an ``allow always`` answered in any process, on any gateway of
a shared store, holds everywhere within that interval, and this process's own changes at once.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pincer.core.effects import EffectKind, Mode
from pincer.policy.grants import Grant
from pincer.store.sql import Database, Sql

__all__ = ["GrantStore", "RECHECK_INTERVAL_S"]

RECHECK_INTERVAL_S = 0.25

_UPSERT = Sql(
    "INSERT INTO grants (id, created_at, body) VALUES (:id, :created_at, :body) "
    "ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, body = excluded.body"
)
_DELETE = Sql("DELETE FROM grants WHERE id = :id")
_BUMP = Sql("UPDATE grants_version SET version = version + 1 WHERE one = 1")
_VERSION = Sql("SELECT version FROM grants_version WHERE one = 1")
_ALL = Sql("SELECT body FROM grants ORDER BY created_at, id")


class GrantStore:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._cache: tuple[Grant, ...] | None = None
        self._version = -1
        self._checked_at = 0.0
        self._changes = 0  # this process's own changes: a read begun before one is not kept

    async def add(self, grant: Grant) -> None:
        async with self._db.transaction() as tx:
            tx.add(_UPSERT, {"id": grant.id, "created_at": time.time(), "body": json.dumps(grant.to_dict())})
            tx.add(_BUMP)
        self._changed()

    def _changed(self) -> None:
        self._cache = None
        self._changes += 1

    async def remove(self, grant_id: str) -> bool:
        async with self._db.transaction() as tx:
            removed = await tx.execute(_DELETE, {"id": grant_id})
            tx.add(_BUMP)
        self._changed()
        return removed == 1

    async def all(self) -> tuple[Grant, ...]:
        """Every stored grant; the same tuple object while nothing changed (callers cache on it)."""
        now = time.monotonic()
        cache = self._cache
        if cache is not None and now - self._checked_at < RECHECK_INTERVAL_S:
            return cache
        self._checked_at = now  # the callers meanwhile keep the cache; one of them reads
        changes = self._changes
        row = await self._db.fetch_one(_VERSION)
        version = int(row[0]) if row else 0
        if cache is not None and version == self._version:
            return cache
        rows = await self._db.fetch_all(_ALL)
        grants = tuple(_from_dict(json.loads(body)) for (body,) in rows)
        if changes == self._changes:
            self._cache, self._version = grants, version
        return grants


def _from_dict(data: dict[str, Any]) -> Grant:
    return Grant(
        tool=data["tool"],
        effects={EffectKind(k): Mode(v) for k, v in data["effects"].items()},
        default=Mode(data["default"]) if data.get("default") else None,
        hosts=tuple(data["hosts"]) if data.get("hosts") is not None else None,
        expires_at=data.get("expires_at"),
        max_invocations=data.get("max_invocations"),
        sessions=tuple(data["sessions"]) if data.get("sessions") is not None else None,
        source=data.get("source", "approval"),
        id=data["id"],
    )
