"""Triggers on PostgreSQL: jobs, the queue of firings, webhook deliveries and the scheduler leader.

The rules are store/triggers.py's, run over the portable connection; three things differ.

- Each of its transactions first takes one transaction-scoped advisory lock, which serialises
  them across gateways as SQLite's ``BEGIN IMMEDIATE`` does across processes: claiming queued
  firings, recording a delivery and its firings stay all-or-nothing and never race. A webhook
  delivery answered 202 is in the queue (committed) before the answer, so when the gateway
  that accepted it dies, whichever gateway runs the queue next starts it.
- The scheduler's leader holds a session-level advisory lock on a connection of its own: one
  process leads at a time. When it dies its connection closes and the lock is free at once for
  the next gateway's tick. When its machine dies or it hangs, the connection may stay open (no
  FIN reaches the server), but its instance's heartbeat stops (store/pg/instances.py): the next
  gateway that finds the lock taken by a stale instance ends that backend
  (``pg_terminate_backend``) and takes the lock. So the lock passes on within
  ``LEADER_HANDOVER_S``. The leader connection's ``application_name`` names its instance, which
  is how the holder of the lock is found. (The lease row still says who leads, for display.)
  Each instant still fires once should two processes think they lead for a moment (a hung one
  waking up): the scheduler moves a job's next run on with a compare-and-set and only the
  process whose move it was fires it (``TriggerStore.move_next_run``).
- The statements that say ``INSERT OR REPLACE`` or order by ``rowid`` are written for PostgreSQL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import anyio.to_thread

from pincer.core.errors import StoreError, UsageError
from pincer.core.extras import require
from pincer.store.audit import AuditEntry
from pincer.store.owners import Owners
from pincer.store.pg.connect import PgPools
from pincer.store.pg.instances import INSTANCE_STALE_S, PgInstances
from pincer.store.pg.portable import PortableConnection
from pincer.store.triggers import (
    _FIRING_COLUMNS,
    _INSERT_FIRING,
    DeliveryExists,
    DeliveryRow,
    FiringRow,
    TriggerStore,
    _dumps,
    _firing,
    _firing_values,
)

logger = logging.getLogger(__name__)

__all__ = ["PgTriggerStore", "LEADER_HANDOVER_S"]

# The longest a cron instant waits while the leader lock passes to another gateway: the holder's
# heartbeat goes stale, then the next tick (each gateway's, every second) ends its backend and
# takes the lock; a few seconds more for a busy machine.
LEADER_HANDOVER_S = INSTANCE_STALE_S + 5.0

_STORE_LOCK = 0x70696E64  # every trigger-store transaction ("pind")
_LEADER_LOCK = 0x70696E65  # held by the scheduler's leader for as long as it leads ("pine")
_LEADER_APP = "pincer-leader "  # the leader connection's application_name, then its instance's tag
_TERMINATE_WAIT_MS = 1_000  # how long ending a stale leader's backend waits for it to be gone


class PgTriggerStore(TriggerStore):
    def __init__(self, pools: PgPools, *, owners: Owners | None = None, instances: PgInstances | None = None) -> None:
        self._portable = PortableConnection(pools)
        super().__init__(cast(Any, self._portable), owners=owners or (instances.owners if instances else None))
        self._pools = pools
        self._instances = instances
        self._leader: Any = None  # the connection holding the leader lock, while this process leads

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._portable as conn:
            conn.execute("SELECT pg_advisory_xact_lock(?)", (_STORE_LOCK,))
            yield conn

    def add_job(
        self, *, name: str, source: str, spec: Mapping[str, Any], spec_hash: str, next_run: float | None,
        paused: bool = False, now: float | None = None, replace: bool = False,
    ) -> None:  # fmt: skip
        import time

        now = time.time() if now is None else now
        conflict = (
            "ON CONFLICT (name) DO UPDATE SET source = EXCLUDED.source, spec = EXCLUDED.spec, "
            "spec_hash = EXCLUDED.spec_hash, paused = EXCLUDED.paused, next_run = EXCLUDED.next_run, "
            "retry_at = NULL, attempt = 0, last_run = NULL, last_status = NULL, last_error = NULL, "
            "last_run_id = NULL, run_requested = NULL, created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at"
            if replace
            else "ON CONFLICT (name) DO NOTHING"
        )
        added = self._portable.execute(
            "INSERT INTO trigger_jobs (name, source, spec, spec_hash, paused, next_run, created_at, updated_at) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?) {conflict}",
            (name, source, _dumps(spec), spec_hash, int(paused), next_run, now, now),
        ).rowcount
        if added == 0:
            raise UsageError(
                f"a job named {name!r} exists already", hint=f"pick another name, or `pincer cron rm {name}` first"
            )

    def insert_firings(self, firings: Iterable[FiringRow], *, delivery: DeliveryRow | None = None) -> None:
        """As the SQLite store's: all or nothing; DeliveryExists for a delivery id seen before."""
        with self._tx() as conn:
            if delivery is not None:
                self._insert_delivery(conn, delivery)
            rows = [_firing_values(f) for f in firings]
            if rows:
                conn.executemany(_INSERT_FIRING, rows)

    async def insert_audited(
        self, firings: Sequence[FiringRow], entries: Sequence[AuditEntry], *, audit: Any,
        delivery: DeliveryRow | None = None,
    ) -> list[int]:  # fmt: skip
        """As the SQLite store's: the delivery, its firings and their audit records in one
        transaction (one commit), DeliveryExists with nothing written for a delivery seen before.
        It runs in a worker thread: it waits on the audit head, which this process's own
        appending batch may hold across an ``await`` (store/pg/audit.py), and takes the head
        before the store lock, so a store transaction on the event loop never waits on it while
        it waits on the loop."""
        from pincer.store.pg.audit import PgAuditLog

        if not isinstance(audit, PgAuditLog):
            raise StoreError("the trigger store on PostgreSQL records with the PostgreSQL audit log (a programming error)")
        rows = list(firings)

        def write() -> list[int]:
            with self._portable as conn:
                ids = audit.chain_within(conn, entries)
                conn.execute("SELECT pg_advisory_xact_lock(?)", (_STORE_LOCK,))
                if delivery is not None:
                    self._insert_delivery(conn, delivery)
                if rows:
                    conn.executemany(
                        _INSERT_FIRING, [_firing_values(f, audit_id) for f, audit_id in zip(rows, ids, strict=True)]
                    )
                return ids

        return await anyio.to_thread.run_sync(write)

    def _insert_delivery(self, conn: Any, delivery: DeliveryRow) -> None:
        inserted = conn.execute(
            "INSERT INTO trigger_deliveries (hook, delivery_id, received_at, event, status, response) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (delivery.hook, delivery.delivery_id, delivery.received_at, delivery.event,
             delivery.status, _dumps(delivery.response)),
        ).rowcount  # fmt: skip
        if inserted == 0:
            existing = self.delivery(delivery.hook, delivery.delivery_id)
            if existing is None:
                raise StoreError("a webhook delivery vanished while it was recorded; send it again")
            raise DeliveryExists(existing)

    def firings(self, *, kind: str | None = None, name: str | None = None, limit: int = 100) -> list[FiringRow]:
        """Newest last (ties in time by id: PostgreSQL has no insertion rowid)."""
        clauses, params = [], []
        for column, value in (("kind", kind), ("name", name)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        rows = self._portable.execute(
            f"SELECT {', '.join(_FIRING_COLUMNS)} FROM trigger_firings {where}ORDER BY ts DESC, id DESC LIMIT ?",
            (*params, int(limit)),
        ).fetchall()
        return [_firing(row) for row in reversed(rows)]

    # -- the scheduler's leader ------------------------------------------------------------------

    def acquire_lease(self, owner: str, *, now: float, stale_s: float, is_alive: Callable[[str], bool]) -> bool:
        """True while this process holds the leader lock (taken now if it is free). ``stale_s``
        and ``is_alive`` are the SQLite lease's rules; here the lock dies with its holder."""
        psycopg = require("postgres", "psycopg")

        try:
            if self._leader is None:
                tag = self._instances.tag if self._instances is not None else "-"
                conn = psycopg.connect(
                    self._pools.url, **self._pools.connect_kwargs(), application_name=f"{_LEADER_APP}{tag}"
                )
                try:
                    taken = conn.execute("SELECT pg_try_advisory_lock(%s)", (_LEADER_LOCK,)).fetchone()
                    if (taken is None or not taken[0]) and self._end_stale_leader(conn):
                        taken = conn.execute("SELECT pg_try_advisory_lock(%s)", (_LEADER_LOCK,)).fetchone()
                except BaseException:
                    conn.close()
                    raise
                if taken is None or not taken[0]:
                    conn.close()
                    return False
                self._leader = conn
                logger.info("this process now runs the scheduler (leader lock taken)")
            else:
                self._leader.execute("SELECT 1")  # still connected, so still holding it
        except psycopg.Error as exc:
            self._drop_leader()
            logger.warning("the scheduler's leader lock was lost: %s", type(exc).__name__)
            return False
        super().acquire_lease(owner, now=now, stale_s=stale_s, is_alive=lambda _holder: False)
        return True

    def release_lease(self, owner: str) -> None:
        super().release_lease(owner)
        self._drop_leader()

    def close(self) -> None:
        """Let go of the leader lock, if held (the stores are closing)."""
        self._drop_leader()

    def _end_stale_leader(self, conn: Any) -> bool:
        """End the backend holding the leader lock when its instance no longer beats (its
        machine died or it hangs); True when one was ended."""
        if self._instances is None:
            return False
        holders = conn.execute(
            "SELECT l.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.objid = %s AND l.objsubid = 1 AND l.granted",
            (_LEADER_LOCK,),
        ).fetchall()
        tags = {str(name)[len(_LEADER_APP) :]: pid for pid, name in holders if str(name or "").startswith(_LEADER_APP)}
        ended = False
        # From PostgreSQL 14 pg_terminate_backend can wait (briefly) for the backend to be gone, so
        # the retry that follows finds the lock free; before, the next tick does.
        wait = conn.info.server_version >= 140_000
        for tag in self._instances.stale_tags(sorted(tags)):
            done = conn.execute(
                "SELECT pg_terminate_backend(%s, %s)" if wait else "SELECT pg_terminate_backend(%s)",
                (tags[tag], _TERMINATE_WAIT_MS) if wait else (tags[tag],),
            ).fetchone()
            if done is not None and done[0]:
                logger.warning("the scheduler's leader (instance %s) stopped beating; its lock is taken over", tag)
                ended = True
        return ended

    def _drop_leader(self) -> None:
        leader, self._leader = self._leader, None
        if leader is not None:
            try:
                leader.close()  # the session ends: its advisory lock is released with it
            except Exception as exc:  # noqa: BLE001 - closing a broken connection; the lock is gone anyway
                logger.debug("closing the leader connection failed: %s", exc)
