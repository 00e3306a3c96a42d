"""Idempotency keys: a side-effecting call repeated with the same key within the TTL returns the
stored result instead of running again; concurrent duplicates fold into one execution.

Keys belong to a session: the store is keyed by (session, tool, key), so no session can replay
another's result, learn that another used a key, or block it. Results are persisted; the table
is bounded by expiry and by a maximum number of entries, oldest evicted first.

Folding works in two steps: duplicates in one process wait on one in-process event; across
processes (the CLI beside a gateway, or several gateways on one PostgreSQL store) the first
claims the key with a row that has no result yet (``INSERT ... ON CONFLICT DO NOTHING``: one
wins), and the others read that row every ``CLAIM_POLL_INTERVAL_S`` until its result is there. A
claim names its process (an owner token, store/owners.py): when that process dies without a
result, or ``CLAIM_LEASE_S`` passes, the next duplicate takes the claim over and runs the call,
since nothing ran to completion. A call that ended without a storable result (it failed before
the tool ran) removes its claim, so a retry runs.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import anyio

from pincer.core.errors import IdempotencyConflict, UsageError
from pincer.core.values import canonical_json
from pincer.store.owners import Owners, local_owners
from pincer.store.sql import Database, Sql
from pincer.store.sql.dialects import locking

__all__ = [
    "IdempotencyStore", "MAX_KEY_LENGTH", "CLAIM_LEASE_S", "CLAIM_POLL_INTERVAL_S", "args_digest", "check_key",
]  # fmt: skip

MAX_KEY_LENGTH = 256
CLAIM_LEASE_S = 3_600.0  # the longest a tool may run ([tools] timeout_s's bound)
CLAIM_POLL_INTERVAL_S = 0.05

_KEY = "session = :session AND tool = :tool AND key = :key"
_LOOKUP = Sql(f"SELECT args_hash, result, expires_at FROM idempotency WHERE {_KEY}")
_CLAIM = Sql(
    "INSERT INTO idempotency (session, tool, key, args_hash, result, expires_at, claimed_by, claim_until) "
    "VALUES (:session, :tool, :key, '', NULL, :expires_at, :token, :claim_until) ON CONFLICT DO NOTHING"
)
_CLAIMED = locking(f"SELECT result, expires_at, claimed_by, claim_until FROM idempotency WHERE {_KEY}")
_TAKE_OVER = Sql(
    "UPDATE idempotency SET args_hash = '', result = NULL, expires_at = :expires_at, claimed_by = :token, "
    f"claim_until = :claim_until WHERE {_KEY}"
)
_UNCLAIM = Sql(f"DELETE FROM idempotency WHERE {_KEY} AND result IS NULL AND claimed_by = :token")
_EXPIRE = Sql("DELETE FROM idempotency WHERE expires_at < :now")
_STORE = Sql(
    "INSERT INTO idempotency (session, tool, key, args_hash, result, expires_at) "
    "VALUES (:session, :tool, :key, :args_hash, :result, :expires_at) ON CONFLICT (session, tool, key) DO UPDATE "
    "SET args_hash = excluded.args_hash, result = excluded.result, expires_at = excluded.expires_at, "
    "claimed_by = NULL, claim_until = NULL"
)
_COUNT = Sql("SELECT COUNT(*) FROM idempotency")
_EVICT = Sql(
    "DELETE FROM idempotency WHERE (session, tool, key) IN "
    "(SELECT session, tool, key FROM idempotency WHERE result IS NOT NULL ORDER BY expires_at LIMIT :over)"
)


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
    def __init__(self, db: Database, *, ttl_s: float, max_entries: int, owners: Owners | None = None) -> None:
        self._db = db
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.owners = owners or local_owners()
        self._in_flight: dict[tuple[str, str, str], anyio.Event] = {}

    async def lookup(self, session: str, tool: str, key: str, digest: str) -> dict[str, Any] | None:
        row = await self._db.fetch_one(_LOOKUP, {"session": session, "tool": tool, "key": key})
        if row is None or row[1] is None or row[2] < time.time():
            return None  # none, a claim still running, or expired
        if row[0] != digest:
            raise IdempotencyConflict(
                f"idempotency key {key!r} was already used for {tool} with different arguments",
                hint="use a new key for a different request",
            )
        stored: dict[str, Any] = json.loads(row[1])  # what store() wrote: a result's JSON object
        return stored

    async def claim(self, session: str, tool: str, key: str) -> bool:
        """True when this caller runs the call; False once a duplicate's result is stored (the
        caller then looks it up)."""
        slot = (session, tool, key)
        event = self._in_flight.get(slot)
        if event is not None:
            await event.wait()
            return False
        self._in_flight[slot] = anyio.Event()
        try:
            while True:
                state = await self._try_claim(session, tool, key)
                if state == "claimed":
                    return True
                if state == "done":
                    self._wake(slot)
                    return False
                await anyio.sleep(CLAIM_POLL_INTERVAL_S)
        except BaseException:
            self._wake(slot)
            raise

    async def _try_claim(self, session: str, tool: str, key: str) -> str:
        now = time.time()
        slot = {"session": session, "tool": tool, "key": key}
        claim = {**slot, "expires_at": now + self.ttl_s, "token": self.owners.token, "claim_until": now + CLAIM_LEASE_S}
        async with self._db.transaction() as tx:
            if await tx.execute(_CLAIM, claim) == 1:
                return "claimed"
            row = await tx.fetch_one(_CLAIMED, slot)
            if row is None:
                return "retry"  # removed in between
            result, expires_at, claimed_by, claim_until = row
            if result is not None and expires_at >= now:
                return "done"
            if result is None and claim_until >= now and claimed_by and await self.owners.is_alive(claimed_by):
                return "wait"
            # Expired, or a claim whose process is gone: nothing finished; take it over.
            tx.add(_TAKE_OVER, claim)
        return "claimed"

    def _wake(self, slot: tuple[str, str, str]) -> None:
        event = self._in_flight.pop(slot, None)
        if event is not None:
            event.set()

    async def release(self, session: str, tool: str, key: str) -> None:
        """The call ended without :meth:`store`: wake this process's duplicates and remove the
        claim (the call did not complete), so the next one runs. After a store, nothing to do."""
        slot = (session, tool, key)
        if slot not in self._in_flight:
            return
        self._wake(slot)
        await self._db.execute(_UNCLAIM, {"session": session, "tool": tool, "key": key, "token": self.owners.token})

    async def store(self, session: str, tool: str, key: str, digest: str, result: dict[str, Any]) -> None:
        now = time.time()
        async with self._db.transaction() as tx:
            tx.add(_EXPIRE, {"now": now})
            tx.add(_STORE, {"session": session, "tool": tool, "key": key, "args_hash": digest,
                            "result": json.dumps(result), "expires_at": now + self.ttl_s})  # fmt: skip
            row = await tx.fetch_one(_COUNT)
            over = int(row[0]) - self.max_entries if row else 0
            if over > 0:
                tx.add(_EVICT, {"over": over})
        self._wake((session, tool, key))  # the duplicates waiting here read the result now
