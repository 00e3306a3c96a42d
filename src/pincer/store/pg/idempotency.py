"""Idempotency keys on PostgreSQL: concurrent duplicates fold into one execution across gateways.

The contract is store/idempotency.py's (keys belong to a session; a stored result is replayed,
other arguments under the same key are a conflict). Folding works in two steps: duplicates in
one process wait on one in-process event, as with SQLite; across processes the first claims the
key with a row that has no result yet (``INSERT ... ON CONFLICT DO NOTHING``: one wins), and the
others poll that row until its result is there. A claim names its process (an owner token,
store/owners.py): when that process dies without a result (on this machine: its pid is gone; on
another: its instance's heartbeat went stale, store/pg/instances.py), or ``CLAIM_LEASE_S`` passes,
the next duplicate takes the claim over and runs the call, since nothing ran to completion. A call that ended without a storable result
(it failed before the tool ran) removes its claim, so a retry runs.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio

from pincer.core.errors import IdempotencyConflict
from pincer.store.owners import Owners, local_owners
from pincer.store.pg.connect import PgPools

__all__ = ["PgIdempotencyStore", "CLAIM_LEASE_S", "CLAIM_POLL_INTERVAL_S"]

CLAIM_LEASE_S = 3_600.0  # the longest a tool may run ([tools] timeout_s's bound)
CLAIM_POLL_INTERVAL_S = 0.05


class PgIdempotencyStore:
    def __init__(self, pools: PgPools, *, ttl_s: float, max_entries: int, owners: Owners | None = None) -> None:
        self._pools = pools
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.owners = owners or local_owners()
        self._token = self.owners.token
        self._in_flight: dict[tuple[str, str, str], anyio.Event] = {}

    def lookup(self, session: str, tool: str, key: str, digest: str) -> dict[str, Any] | None:
        with self._pools.sync.connection() as conn:
            row = conn.execute(
                "SELECT args_hash, result, expires_at FROM idempotency WHERE session = %s AND tool = %s AND key = %s",
                (session, tool, key),
            ).fetchone()
        if row is None or row[1] is None or row[2] < time.time():
            return None  # none, a claim still running, or expired
        if row[0] != digest:
            raise IdempotencyConflict(
                f"idempotency key {key!r} was already used for {tool} with different arguments",
                hint="use a new key for a different request",
            )
        stored: dict[str, Any] = json.loads(row[1])
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
                state = self._try_claim(session, tool, key)
                if state == "claimed":
                    return True
                if state == "done":
                    self.release(session, tool, key, _local_only=True)
                    return False
                await anyio.sleep(CLAIM_POLL_INTERVAL_S)
        except BaseException:
            self.release(session, tool, key, _local_only=True)
            raise

    def _try_claim(self, session: str, tool: str, key: str) -> str:
        now = time.time()
        with self._pools.sync.connection() as conn, conn.transaction():
            inserted = conn.execute(
                "INSERT INTO idempotency (session, tool, key, args_hash, result, expires_at, claimed_by, claim_until) "
                "VALUES (%s, %s, %s, '', NULL, %s, %s, %s) ON CONFLICT DO NOTHING",
                (session, tool, key, now + self.ttl_s, self._token, now + CLAIM_LEASE_S),
            ).rowcount
            if inserted == 1:
                return "claimed"
            row = conn.execute(
                "SELECT result, expires_at, claimed_by, claim_until FROM idempotency "
                "WHERE session = %s AND tool = %s AND key = %s FOR UPDATE",
                (session, tool, key),
            ).fetchone()
            if row is None:
                return "retry"  # removed in between
            result, expires_at, claimed_by, claim_until = row
            if result is not None and expires_at >= now:
                return "done"
            if result is None and claim_until >= now and claimed_by and self.owners.is_alive(claimed_by):
                return "wait"
            # Expired, or a claim whose process is gone: nothing finished; take it over.
            conn.execute(
                "UPDATE idempotency SET args_hash = '', result = NULL, expires_at = %s, claimed_by = %s, "
                "claim_until = %s WHERE session = %s AND tool = %s AND key = %s",
                (now + self.ttl_s, self._token, now + CLAIM_LEASE_S, session, tool, key),
            )
            return "claimed"

    def release(self, session: str, tool: str, key: str, *, _local_only: bool = False) -> None:
        event = self._in_flight.pop((session, tool, key), None)
        if event is not None:
            event.set()
        if not _local_only:
            # Our claim with no result stored: the call did not complete; let the next one run.
            with self._pools.sync.connection() as conn:
                conn.execute(
                    "DELETE FROM idempotency WHERE session = %s AND tool = %s AND key = %s AND result IS NULL "
                    "AND claimed_by = %s",
                    (session, tool, key, self._token),
                )

    def store(self, session: str, tool: str, key: str, digest: str, result: dict[str, Any]) -> None:
        now = time.time()
        with self._pools.sync.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM idempotency WHERE expires_at < %s", (now,))
            conn.execute(
                "INSERT INTO idempotency (session, tool, key, args_hash, result, expires_at) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session, tool, key) DO UPDATE SET "
                "args_hash = EXCLUDED.args_hash, result = EXCLUDED.result, expires_at = EXCLUDED.expires_at, "
                "claimed_by = NULL, claim_until = NULL",
                (session, tool, key, digest, json.dumps(result), now + self.ttl_s),
            )
            count = conn.execute("SELECT COUNT(*) FROM idempotency").fetchone()[0]
            if count > self.max_entries:
                conn.execute(
                    "DELETE FROM idempotency WHERE ctid IN "
                    "(SELECT ctid FROM idempotency WHERE result IS NOT NULL ORDER BY expires_at LIMIT %s)",
                    (count - self.max_entries,),
                )
