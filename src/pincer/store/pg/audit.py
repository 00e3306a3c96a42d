"""The audit log on PostgreSQL: one HMAC chain shared by every gateway on the database.

The records and their chain values are exactly those of the SQLite log (store/audit.py,
store/chain.py): same fields, same hashing, same head MAC. What differs is who may append:
every gateway process. Appends are serialised by the head row: a batch's transaction takes
``SELECT ... FROM audit_head FOR UPDATE``, chains its records onto the head it finds there
(whoever wrote it), and moves the head and its MAC in the same transaction, so there is one
chain with no gap and no fork however many processes append.

Group commit: appends that arrive while a batch is committing wait and go together in the next
transaction (one round trip for the batch: psycopg pipelines ``executemany``), so the cost of a
commit is shared the way the SQLite writer thread shares an fsync. Nobody gets a record id
before the transaction holding the record has committed.

A log is keyed from its first record (no plain chain predates it): the marker says so under its
MAC, and a database begun under another audit key is refused at open.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import anyio

from pincer.core.errors import AuditChainBroken, StoreError
from pincer.core.extras import require
from pincer.store.anchor import AnchorFile, ChainMarker, new_chain_id
from pincer.store.audit import (
    _COLUMNS,
    _FIELDS,
    _TIMESTAMPS_SQL,
    GRANT_USES_SQL,
    AuditEntry,
    AuditRecord,
    ChainHead,
    _hashed,
    _Pending,
    _records_query,
    _row_values,
    _to_record,
    marker_of,
)
from pincer.store.chain import GENESIS_HASH, ChainKey
from pincer.store.checkpoint import AuditCheckpoint, sign_checkpoint
from pincer.store.pg.connect import PgPools
from pincer.store.pg.portable import to_format_style

logger = logging.getLogger(__name__)

__all__ = ["PgAuditLog", "VERIFY_BATCH_ROWS"]

VERIFY_BATCH_ROWS = 2_000
_MARKER_SQL = "SELECT keyed_from, key_id, plain_head, mac, head_keyed, chain_id FROM audit_chain"
_INSERT = (
    f"INSERT INTO audit (id, {', '.join(_FIELDS)}, run_id, prev_hash, hash) "
    f"VALUES ({', '.join(['%s'] * (len(_FIELDS) + 4))})"
)


class PgAuditLog:
    """The same contract as :class:`pincer.store.audit.AuditLog`, over a PostgreSQL database."""

    def __init__(self, pools: PgPools, *, key: bytes, anchor: AnchorFile | None = None) -> None:
        """``anchor``: this home's anchor of the shared log (store/anchor.py): with one, a pending
        marker is never keyed over a log the anchor says was keyed, and verify compares the two."""
        self._pools = pools
        self._key = ChainKey(key)
        self._anchor = anchor
        self._pending: list[_Pending] = []
        self._flushing = False
        self._adopt()

    @property
    def key_id(self) -> str:
        return self._key.key_id

    @property
    def queue_depth(self) -> int:
        """Records handed in and not yet in a commit under way (readiness and metrics read it)."""
        return len(self._pending)

    def _adopt(self) -> None:
        """Key a new log's marker under this key (unless this home's anchor says the log was
        keyed); refuse a log keyed under another; give a log keyed before chains had ids its id."""
        anchored = self._anchor is not None and self._anchor.exists()
        with self._pools.sync.connection() as conn, conn.transaction():
            marker = marker_of(conn.execute(f"{_MARKER_SQL} FOR UPDATE").fetchone())
            if marker is None:
                logger.error("the audit chain marker is missing from the database; `pincer audit verify` will fail")
                return
            if marker.pending and anchored:
                logger.error(
                    "the audit chain marker in the database is pending, but this home's anchor %s says the log was "
                    "keyed: it is not keyed again, and `pincer audit verify` will name it", self._anchor,
                )  # fmt: skip
            elif marker.pending:
                chain_id = new_chain_id()
                mac = self._key.marker_mac(keyed_from=1, plain_head=GENESIS_HASH, head_keyed=True, chain_id=chain_id)
                conn.execute(
                    "UPDATE audit_chain SET keyed_from = 1, key_id = %s, plain_head = %s, mac = %s, head_keyed = 1, "
                    "chain_id = %s",
                    (self._key.key_id, GENESIS_HASH, mac, chain_id),
                )
                head = conn.execute("SELECT last_id, last_hash FROM audit_head WHERE one = 1").fetchone()
                if head is not None and head[0] == 0:
                    conn.execute(
                        "UPDATE audit_head SET mac = %s WHERE one = 1",
                        (self._key.head_mac(last_id=0, last_hash=GENESIS_HASH),),
                    )
            elif marker.key_id != self._key.key_id:
                raise StoreError(
                    f"this audit log is chained under audit key {marker.key_id}, not under this pincer's key "
                    f"{self._key.key_id}",
                    hint="give every gateway the same audit key: set PINCER_AUDIT_KEY (or copy "
                    "$PINCER_HOME/audit.key) from the gateway that began the log",
                )
            elif marker.chain_id is None and not anchored and marker.mac_holds(self._key):
                chain_id = new_chain_id()  # a log keyed before chains had ids (schema 6)
                mac = self._key.marker_mac(
                    keyed_from=marker.keyed_from, plain_head=marker.plain_head, head_keyed=marker.head_keyed,
                    chain_id=chain_id,
                )  # fmt: skip
                conn.execute("UPDATE audit_chain SET chain_id = %s, mac = %s", (chain_id, mac))
        if self._anchor is not None:
            self._anchor.settle(self._key, self._read_marker())

    def _read_marker(self) -> ChainMarker | None:
        with self._pools.sync.connection() as conn:
            return marker_of(conn.execute(_MARKER_SQL).fetchone())

    # -- appending ------------------------------------------------------------------------

    async def append(self, entry: AuditEntry, *, gather: bool | None = True) -> int:
        """Record one entry; returns its id once its transaction has committed. ``gather`` is
        accepted for the SQLite log's signature: here every append that arrives while a batch
        commits joins the next one, whatever it says."""
        pending = _Pending(_row_values(entry, time.time()), entry.run_id)
        self._pending.append(pending)
        if self._flushing:
            event = pending.event = anyio.Event()
            await event.wait()
        else:
            self._flushing = True
            try:
                # Shielded: the callers waiting on these records get their answer whoever is cancelled.
                with anyio.CancelScope(shield=True):
                    while self._pending:
                        batch, self._pending = self._pending, []
                        try:
                            await self._commit(batch)
                        finally:
                            _finish(batch)
            finally:
                self._flushing = False
        if pending.error is not None:
            raise StoreError(f"the audit record could not be written: {pending.error}") from pending.error
        return pending.record_id

    def append_sync(self, entry: AuditEntry) -> int:
        """For synchronous callers (the CLI answering an approval)."""
        pending = _Pending(_row_values(entry, time.time()), entry.run_id)
        try:
            with self._pools.sync.connection() as conn, conn.transaction():
                head = conn.execute("SELECT last_id, last_hash, mac FROM audit_head WHERE one = 1 FOR UPDATE").fetchone()
                rows, new_head = self._chain([pending], head)
                conn.cursor().executemany(_INSERT, rows)
                conn.execute("UPDATE audit_head SET last_id = %s, last_hash = %s, mac = %s WHERE one = 1", new_head)
        except Exception as exc:
            raise StoreError(f"the audit record could not be written: {exc}") from exc
        return pending.record_id

    def append_claimed(
        self, entries: Sequence[AuditEntry], claim: str, params: tuple[Any, ...], *, wait: bool = True
    ) -> list[int] | None:
        """As the SQLite log's: ``entries`` recorded in one transaction with ``claim`` (qmark
        SQL), only when the claim changes exactly one row; None with nothing written otherwise.
        ``wait=False`` takes the head with ``NOWAIT``: a caller on the event loop, where this
        process's own appending batch may hold the head across an ``await``, gets None (logged)
        while the head is taken, instead of waiting on a lock only the loop could free."""
        from pincer.store.pg.portable import PortableConnection

        try:
            with PortableConnection(self._pools) as conn:
                ids = self.chain_within(conn, entries, wait=wait)
                if conn.execute(claim, params).rowcount != 1:
                    raise _Unclaimed
                return ids
        except _Unclaimed:
            return None
        except StoreError as exc:
            if wait:
                raise
            logger.info("the audit head is busy; the claimed record waits for the next try: %s", exc.message)
            return None

    def chain_within(self, conn: Any, entries: Sequence[AuditEntry], *, wait: bool = True) -> list[int]:
        """Chain ``entries`` inside the caller's open transaction on ``conn`` (a
        :class:`~pincer.store.pg.portable.PortableConnection` in a ``with`` block, qmark SQL): the
        head is locked (``FOR UPDATE``) first, so a caller that takes other locks after this never
        waits on them while holding the head. They commit or roll back with the caller's other
        rows. Blocking: call it from a worker thread, never on the event loop, where it would
        wait on the head an appending batch of this process holds across an ``await``."""
        now = time.time()
        batch = [_Pending(_row_values(e, now), e.run_id) for e in entries]
        lock = "FOR UPDATE" if wait else "FOR UPDATE NOWAIT"
        head = conn.execute(f"SELECT last_id, last_hash, mac FROM audit_head WHERE one = 1 {lock}").fetchone()
        rows, new_head = self._chain(batch, head)
        conn.executemany(_INSERT.replace("%s", "?"), rows)
        conn.execute("UPDATE audit_head SET last_id = ?, last_hash = ?, mac = ? WHERE one = 1", new_head)
        return [p.record_id for p in batch]

    async def _commit(self, batch: list[_Pending]) -> None:
        try:
            pool = await self._pools.aio()
            async with pool.connection() as conn, conn.transaction():
                cursor = await conn.execute("SELECT last_id, last_hash, mac FROM audit_head WHERE one = 1 FOR UPDATE")
                rows, new_head = self._chain(batch, await cursor.fetchone())
                await conn.cursor().executemany(_INSERT, rows)
                await conn.execute("UPDATE audit_head SET last_id = %s, last_hash = %s, mac = %s WHERE one = 1", new_head)
        except Exception as exc:  # noqa: BLE001 - every waiter of the batch gets the failure
            logger.error("audit commit failed: %s", exc)
            for pending in batch:
                pending.error = exc
                pending.record_id = 0

    def _chain(self, batch: list[_Pending], head: Any) -> tuple[list[tuple[Any, ...]], tuple[Any, ...]]:
        """The rows of ``batch`` chained onto ``head``, and the head after them. A head whose MAC
        does not hold (cut or moved by hand) is chained onto but never re-signed, so an append
        cannot launder a cut; ``pincer audit verify`` names it."""
        if head is None:
            raise StoreError("the audit head row is missing", hint="run `pincer audit verify` to see what was removed")
        head_id, head_hash, mac = head
        trusted = self._key.matches(mac, self._key.head_mac(last_id=head_id, last_hash=head_hash))
        if not trusted:
            logger.error("the audit head does not match its MAC; `pincer audit verify` will name it")
        rows = []
        for pending in batch:
            record_id = head_id + 1
            digest = self._key.record_hash(record_id, _hashed(pending.values, pending.run_id), head_hash)
            rows.append((record_id, *pending.values, pending.run_id, head_hash, digest))
            pending.record_id = record_id
            head_id, head_hash = record_id, digest
        new_mac = self._key.head_mac(last_id=head_id, last_hash=head_hash) if trusted else mac
        return rows, (head_id, head_hash, new_mac)

    # -- reading ----------------------------------------------------------------------------

    def records(
        self,
        *,
        tool: str | None = None,
        session: str | None = None,
        limit: int | None = None,
        after_id: int = 0,
        run_id: str | None = None,
    ) -> list[AuditRecord]:
        """Records newest last; ``limit`` keeps the newest ``limit``."""
        sql, params = _records_query(tool=tool, session=session, limit=limit, after_id=after_id, run_id=run_id)
        with self._pools.sync.connection() as conn:
            rows = conn.execute(to_format_style(sql), params).fetchall()
        return [_to_record(row) for row in reversed(rows)]

    def timestamps(self, tool: str, since: float) -> list[float]:
        with self._pools.sync.connection() as conn:
            rows = conn.execute(to_format_style(_TIMESTAMPS_SQL), (tool, since)).fetchall()
        return [row[0] for row in rows]

    def grant_uses(self, grant_id: str) -> int:
        with self._pools.sync.connection() as conn:
            row = conn.execute(to_format_style(GRANT_USES_SQL), (grant_id,)).fetchone()
        return int(row[0])

    def verify(self) -> int:
        return self.verify_chain().records

    def verify_chain(self, *, check_head: bool = True) -> ChainHead:
        """Walk the whole chain in one snapshot (REPEATABLE READ: appends made meanwhile by any
        gateway are not seen, the head read is the one of the same instant)."""
        psycopg = require("postgres", "psycopg")

        try:
            with self._pools.sync.connection() as conn:
                conn.autocommit = False
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                try:
                    with conn.transaction():
                        return self._walk(conn, check_head=check_head)
                finally:
                    conn.isolation_level = None
                    conn.autocommit = True
        except psycopg.Error as exc:
            raise StoreError(
                f"the audit log could not be read: {exc}", hint="check [store] url and that `pincer db upgrade` ran"
            ) from exc

    def _walk(self, conn: Any, *, check_head: bool) -> ChainHead:
        marker = marker_of(conn.execute(_MARKER_SQL).fetchone())
        if self._anchor is not None:
            self._anchor.check(self._key, marker)
        if marker is None or marker.pending:
            raise AuditChainBroken(
                "the audit chain marker (where the keyed chain begins) is missing from the database",
                record_id=1,
                hint="verify against a checkpoint (`pincer audit verify --checkpoint FILE`) and restore from a backup",
            )
        if marker.key_id != self._key.key_id:
            raise AuditChainBroken(
                f"the audit chain marker names audit key {marker.key_id}, not this key {self._key.key_id}",
                record_id=1,
                hint="verify with the audit key the log was written with (PINCER_AUDIT_KEY or audit.key)",
            )
        if marker.keyed_from != 1 or not marker.mac_holds(self._key):
            raise AuditChainBroken(
                f"the audit chain marker was altered (it says the keyed chain begins at record {marker.keyed_from})",
                record_id=1,
                hint="the log cannot be trusted; verify against a checkpoint and restore from a backup",
            )
        prev, expected_id = GENESIS_HASH, 1
        with conn.cursor(name="pincer_audit_verify") as cursor:
            cursor.itersize = VERIFY_BATCH_ROWS
            cursor.execute(f"SELECT {_COLUMNS} FROM audit ORDER BY id")
            for row in cursor:
                record_id = row[0]
                if record_id != expected_id:
                    raise AuditChainBroken(
                        f"audit record {expected_id} is missing (next present is {record_id})",
                        record_id=expected_id,
                        hint="a record was deleted; the log cannot be trusted from this point",
                    )
                if row[-3] != prev:
                    raise AuditChainBroken(
                        f"audit record {record_id} does not follow record {record_id - 1} (previous hash differs)",
                        record_id=record_id,
                        hint="records were deleted, reordered or rewritten before this one",
                    )
                values = _hashed(tuple(row[1 : 1 + len(_FIELDS)]), row[-1])
                if not self._key.matches(row[-2], self._key.record_hash(record_id, values, prev)):
                    raise AuditChainBroken(
                        f"audit record {record_id} was altered (its hash does not match its content)",
                        record_id=record_id,
                    )
                prev, expected_id = row[-2], expected_id + 1
        count = expected_id - 1
        if check_head:
            head = conn.execute("SELECT last_id, last_hash, mac FROM audit_head WHERE one = 1").fetchone()
            head_id, head_hash, head_mac = head if head else (0, GENESIS_HASH, None)
            if not self._key.matches(head_mac, self._key.head_mac(last_id=head_id, last_hash=head_hash)):
                raise AuditChainBroken(
                    f"the audit head was altered (it says the log ends at record {head_id}, and its MAC does not "
                    f"match; the log holds {count} records)",
                    record_id=count + 1,
                    hint="records were cut from the end of the log and the head moved to match; verify against "
                    "a checkpoint (`pincer audit verify --checkpoint FILE`) and restore from a backup",
                )
            if head_id != count or head_hash != prev:
                raise AuditChainBroken(
                    f"the audit log ends at record {count} but its head says {head_id}",
                    record_id=count + 1,
                    hint="records were removed from the end of the log",
                )
        return ChainHead(records=count, last_hash=prev, keyed_from=1, key_id=self._key.key_id)

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint(self) -> AuditCheckpoint:
        head = self.verify_chain()
        return sign_checkpoint(
            self._key, records=head.records, last_hash=head.last_hash, keyed_from=head.keyed_from, now=time.time()
        )

    def verify_checkpoint(self, checkpoint: AuditCheckpoint) -> ChainHead:
        checkpoint.check_signature(self._key)
        head = self.verify_chain(check_head=False)
        made = f"the checkpoint of {checkpoint.created_at}"
        if head.records < checkpoint.records:
            raise AuditChainBroken(
                f"the audit log has {head.records} records, but {made} counted {checkpoint.records}: "
                f"records {head.records + 1} to {checkpoint.records} were deleted",
                record_id=head.records + 1,
                hint="restore the database from a backup; the records after the checkpoint cannot be recovered",
            )
        if checkpoint.records:
            with self._pools.sync.connection() as conn:
                row = conn.execute("SELECT hash FROM audit WHERE id = %s", (checkpoint.last_id,)).fetchone()
            if row is None or not self._key.matches(row[0], checkpoint.last_hash):
                raise AuditChainBroken(
                    f"audit record {checkpoint.last_id} is not the one {made} saw: the log up to it was rewritten",
                    record_id=checkpoint.last_id,
                    hint="restore the database from a backup",
                )
        return self.verify_chain()


class _Unclaimed(Exception):
    """An :meth:`PgAuditLog.append_claimed` whose claim changed no row."""


def _finish(batch: list[_Pending]) -> None:
    for pending in batch:
        pending.done = True
        if pending.event is not None:
            pending.event.set()
