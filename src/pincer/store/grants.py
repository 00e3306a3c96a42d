"""Grants recorded by ``allow always`` answers, kept beside the ones in config.toml."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from pincer.core.effects import EffectKind, Mode
from pincer.core.errors import StoreError
from pincer.policy.grants import Grant

__all__ = ["GrantStore", "RECHECK_INTERVAL_S"]

RECHECK_INTERVAL_S = 0.25


class GrantStore:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._cache: tuple[Grant, ...] | None = None
        self._data_version = -1
        self._checked_at = 0.0

    def add(self, grant: Grant) -> None:
        try:
            self._conn.execute(
                "INSERT OR REPLACE INTO grants (id, created_at, body) VALUES (?, ?, ?)",
                (grant.id, time.time(), json.dumps(grant.to_dict())),
            )
        except sqlite3.Error as exc:
            raise StoreError(f"the grant could not be saved: {exc}") from exc
        self._cache = None

    def remove(self, grant_id: str) -> bool:
        cursor = self._conn.execute("DELETE FROM grants WHERE id = ?", (grant_id,))
        self._cache = None
        return cursor.rowcount == 1

    def all(self) -> tuple[Grant, ...]:
        """Every stored grant. This process's own changes show at once; another process's within
        ``RECHECK_INTERVAL_S`` (the check itself costs a statement, on every call's hot path)."""
        now = time.monotonic()
        if self._cache is not None and now - self._checked_at < RECHECK_INTERVAL_S:
            return self._cache
        self._checked_at = now
        # PRAGMA data_version changes when another connection commits: cheap cache invalidation.
        version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        if self._cache is None or version != self._data_version:
            rows = self._conn.execute("SELECT body FROM grants ORDER BY created_at").fetchall()
            self._cache = tuple(_from_dict(json.loads(body)) for (body,) in rows)
            self._data_version = version
        return self._cache


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
