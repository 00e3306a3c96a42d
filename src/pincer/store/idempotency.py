"""Idempotency keys: a side-effecting call repeated with the same key within the TTL returns the
stored result instead of running again; concurrent duplicates fold into one execution.

Keys belong to a session: the store is keyed by (session, tool, key), so no session can replay
another's result, learn that another used a key, or block it. Results are persisted (a second
CLI process sees the first one's result); the table is bounded by expiry and by a maximum number
of entries, oldest evicted first.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from typing import Any

import anyio

from pincer.core.errors import IdempotencyConflict, StoreError, UsageError
from pincer.core.values import canonical_json

__all__ = ["IdempotencyStore", "MAX_KEY_LENGTH", "args_digest", "check_key"]

MAX_KEY_LENGTH = 256


def check_key(key: str) -> None:
    if not key or len(key) > MAX_KEY_LENGTH:
        raise UsageError(
            f"idempotency key must be 1 to {MAX_KEY_LENGTH} characters, got {len(key)}",
            hint="use a UUID or a short hash of the request",
        )
    if any(ord(ch) < 32 for ch in key):
        raise UsageError("idempotency key contains control characters", hint="use printable characters only")


def args_digest(args: Any) -> str:
    return hashlib.sha256(canonical_json(args).encode()).hexdigest()


class IdempotencyStore:
    def __init__(self, conn: sqlite3.Connection, *, ttl_s: float, max_entries: int) -> None:
        self._conn = conn
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._in_flight: dict[tuple[str, str, str], anyio.Event] = {}

    def lookup(self, session: str, tool: str, key: str, digest: str) -> dict[str, Any] | None:
        row = self._conn.execute(
            "SELECT args_hash, result, expires_at FROM idempotency WHERE session = ? AND tool = ? AND key = ?",
            (session, tool, key),
        ).fetchone()
        if row is None or row[2] < time.time():
            return None
        if row[0] != digest:
            raise IdempotencyConflict(
                f"idempotency key {key!r} was already used for {tool} with different arguments",
                hint="use a new key for a different request",
            )
        stored: dict[str, Any] = json.loads(row[1])  # what _store wrote: a result's JSON object
        return stored

    async def claim(self, session: str, tool: str, key: str) -> bool:
        """True when this caller runs the call; False after waiting for a concurrent duplicate
        (the caller then looks the stored result up)."""
        slot = (session, tool, key)
        event = self._in_flight.get(slot)
        if event is None:
            self._in_flight[slot] = anyio.Event()
            return True
        await event.wait()
        return False

    def release(self, session: str, tool: str, key: str) -> None:
        event = self._in_flight.pop((session, tool, key), None)
        if event is not None:
            event.set()

    def store(self, session: str, tool: str, key: str, digest: str, result: dict[str, Any]) -> None:
        now = time.time()
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute("DELETE FROM idempotency WHERE expires_at < ?", (now,))
                self._conn.execute(
                    "INSERT OR REPLACE INTO idempotency (session, tool, key, args_hash, result, expires_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (session, tool, key, digest, json.dumps(result), now + self.ttl_s),
                )
                count = self._conn.execute("SELECT COUNT(*) FROM idempotency").fetchone()[0]
                if count > self.max_entries:
                    self._conn.execute(
                        "DELETE FROM idempotency WHERE rowid IN "
                        "(SELECT rowid FROM idempotency ORDER BY expires_at LIMIT ?)",
                        (count - self.max_entries,),
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"the idempotent result could not be stored: {exc}") from exc
