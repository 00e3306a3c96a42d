"""Approvals on PostgreSQL: the rules of store/approvals.py, and answers that travel at once.

The store is the SQLite one's code over the portable connection (store/pg/portable.py): one set
of rules (answer once, an expired request or a gone caller cannot be answered, detached requests
used once). What PostgreSQL adds is the wake-up: an answer (or an expiry) on any gateway sends
``NOTIFY pincer_approvals, '<id>'``; in each process the first call that waits while no LISTEN
runs holds a LISTEN connection for as long as it waits, and wakes every local waiter whose
request a notification names. Every waiter still reads its row every ``APPROVAL_POLL_INTERVAL_S``,
so an answer that finds no LISTEN (its holder returned first, or its connection died) is seen
that much later, never lost.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import anyio

from pincer.core.extras import require
from pincer.store.approvals import Answer, AnswerScope, ApprovalRequest, ApprovalStore
from pincer.store.audit import AuditEntry
from pincer.store.owners import Owners
from pincer.store.pg.audit import PgAuditLog
from pincer.store.pg.connect import PgPools
from pincer.store.pg.portable import PortableConnection

logger = logging.getLogger(__name__)

__all__ = ["PgApprovalStore", "APPROVAL_CHANNEL", "LISTEN_RETRY_S"]

APPROVAL_CHANNEL = "pincer_approvals"
LISTEN_RETRY_S = 1.0


class PgApprovalStore(ApprovalStore):
    def __init__(self, pools: PgPools, *, owners: Owners | None = None, audit: PgAuditLog | None = None) -> None:
        super().__init__(cast(Any, PortableConnection(pools)), owners=owners, audit=cast(Any, audit))
        self._pools = pools
        self._pg_audit = audit
        self._listening = False

    def _claimed(self, entry: AuditEntry, claim: str, params: tuple[Any, ...], *, wait: bool) -> list[int] | None:
        if self._pg_audit is None:
            return super()._claimed(entry, claim, params, wait=wait)
        return self._pg_audit.append_claimed([entry], claim, params, wait=wait)

    async def arecord_gone(self, approval_id: str, entry: AuditEntry) -> int | None:
        # In a worker thread: it waits on the audit head, which this process's own appending
        # batch may hold across an ``await`` (store/pg/audit.py).
        return await anyio.to_thread.run_sync(self.record_gone, approval_id, entry)

    def answer(
        self, approval_id: str, answer: Answer | str, *, by: str = "cli", scope: AnswerScope | str | None = None
    ) -> ApprovalRequest:
        answered = super().answer(approval_id, answer, by=by, scope=scope)
        self._notify(approval_id)
        return answered

    def expire(self, approval_id: str) -> None:
        super().expire(approval_id)
        self._notify(approval_id)

    def _notify(self, approval_id: str) -> None:
        self._conn.execute("SELECT pg_notify(?, ?)", (APPROVAL_CHANNEL, approval_id))

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalRequest:
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            if not self._listening:
                tg.start_soon(self._listen)
            try:
                answered = await super().wait(approval_id, timeout_s)
            except Exception as exc:  # noqa: BLE001 - raised below, not wrapped in an ExceptionGroup
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return answered

    async def _listen(self) -> None:
        """Wake the local waiters a notification names, until cancelled (its waiter returned;
        the next call that waits starts another)."""
        psycopg = require("postgres", "psycopg")

        self._listening = True
        try:
            while True:
                try:
                    conn = await psycopg.AsyncConnection.connect(self._pools.url, **self._pools.connect_kwargs())
                except psycopg.Error as exc:
                    logger.warning("cannot LISTEN for approval answers (polling instead): %s", type(exc).__name__)
                    await anyio.sleep(LISTEN_RETRY_S)
                    continue
                try:
                    await conn.execute(f"LISTEN {APPROVAL_CHANNEL}")
                    async for note in conn.notifies():
                        event = self._events.get(note.payload)
                        if event is not None:
                            event.set()
                except psycopg.Error as exc:
                    logger.warning("the approval LISTEN connection failed: %s", type(exc).__name__)
                    await anyio.sleep(LISTEN_RETRY_S)
                finally:
                    with anyio.CancelScope(shield=True):
                        await conn.close()
        finally:
            self._listening = False
