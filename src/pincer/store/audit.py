"""The audit log: one HMAC-chained record per call, committed before the call returns.

Each record's chain value is an HMAC-SHA256, under the audit key kept outside the database,
over its id, every field and the previous record's value (``store/chain.py``), so an altered,
inserted or reordered row breaks the chain at that row even for someone who can write the
database and knows the recipe. ``audit_head`` keeps the last id (= the record count) and value
in the same transaction, with an HMAC under the key over both: cutting records from the tail and
moving the head to match, or wiping the log, breaks the head's MAC. A writer that finds the head
not matching its MAC goes on recording but never re-signs it, so the next append cannot launder
a cut. A deleted database, or an older copy of it put back, only a checkpoint
(``store/checkpoint.py``) can reveal. A log begun before the key existed keeps its plain
SHA-256 chain up to the marker in ``audit_chain``; the marker says (under its MAC) whether the
head is keyed, so the head's MAC cannot be dropped by clearing a flag either.

A record made for an agent run carries its ``run_id``. That column came after the others (schema
v3), so it is hashed only when set: records without it, older ones included, chain exactly as
they did before, and setting or clearing it on a record breaks the chain there.

Group commit: concurrent callers that reach the log in the same event-loop turn share one
transaction; nobody gets a result before the transaction holding its record has committed.

Where commits run: with a ``writer`` connection (``[audit] synchronous = "full"``: an fsync per
commit, milliseconds on a disk) each batch commits in a worker thread, one batch at a time, on a
connection of its own, and every record that arrives meanwhile joins the next batch, so the
event loop never waits on an fsync. Without one (NORMAL, the default: a commit costs ~20 us with
no fsync, less than the hop to a thread) batches commit on the event loop as before.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from pincer.core.errors import AuditChainBroken, StoreError
from pincer.core.values import canonical_json
from pincer.store.anchor import AnchorFile, ChainMarker, new_chain_id
from pincer.store.chain import GENESIS_HASH, ChainKey, plain_chain_hash
from pincer.store.checkpoint import AuditCheckpoint, sign_checkpoint

logger = logging.getLogger(__name__)

__all__ = ["AuditEntry", "AuditRecord", "AuditLog", "ChainHead", "GENESIS_HASH"]

_FIELDS = (
    "ts", "session", "caller", "tool", "kind", "decision", "reason", "grant_id", "outcome",
    "error_code", "error", "args", "effects", "duration_ms", "usage", "idempotency_key",
    "cached", "approval_id",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditEntry:
    """What the dispatcher records. ``args`` are already redacted; no output is stored."""

    session: str
    caller: str
    tool: str
    decision: str
    reason: str
    outcome: str  # ok | error | denied | pending | answered | run outcomes (started, done, failed, ...)
    kind: str = "call"  # call | approval | run
    grant_id: str | None = None
    error_code: str | None = None
    error: str | None = None
    args: Any = field(default_factory=dict)
    effects: tuple[str, ...] = ()
    duration_ms: float = 0.0
    usage: Any = field(default_factory=dict)
    idempotency_key: str | None = None
    cached: bool = False
    approval_id: str | None = None
    ts: float = 0.0
    run_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditRecord:
    id: int
    ts: float
    session: str
    caller: str
    tool: str
    kind: str
    decision: str
    reason: str
    grant_id: str | None
    outcome: str
    error_code: str | None
    error: str | None
    args: Any
    effects: list[str]
    duration_ms: float
    usage: Any
    idempotency_key: str | None
    cached: bool
    approval_id: str | None
    prev_hash: str
    hash: str
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def _row_values(entry: AuditEntry, now: float) -> tuple[Any, ...]:
    return (
        entry.ts or now, entry.session, entry.caller, entry.tool, entry.kind, entry.decision, entry.reason,
        entry.grant_id, entry.outcome, entry.error_code, entry.error, _json(entry.args),
        _json(list(entry.effects)), round(entry.duration_ms, 3), _json(entry.usage),
        entry.idempotency_key, int(entry.cached), entry.approval_id,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainHead:
    """What a verification established: the records that chain, and how the chain ends."""

    records: int
    last_hash: str
    keyed_from: int  # the first record under the key; the ones before carry the plain chain
    key_id: str

    @property
    def plain_records(self) -> int:
        return min(self.records, self.keyed_from - 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "last_hash": self.last_hash,
            "keyed_from": self.keyed_from,
            "plain_records": self.plain_records,
            "key_id": self.key_id,
        }


def _json(value: Any) -> str:
    # Empty values are most of what a record holds (no effects, no usage extras): skip the encoder.
    if not value and isinstance(value, dict | list):
        return "{}" if isinstance(value, dict) else "[]"
    return canonical_json(value)


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


# A lone committer still yields once every this many appends, to notice callers queueing up.
_PROBE_EVERY = 32
_INSERT = (
    f"INSERT INTO audit (id, {', '.join(_FIELDS)}, run_id, prev_hash, hash) "
    f"VALUES ({', '.join('?' * (len(_FIELDS) + 4))})"
)
_COLUMNS = ", ".join(("id", *_FIELDS, "prev_hash", "hash", "run_id"))


def _hashed(values: tuple[Any, ...], run_id: str | None) -> tuple[Any, ...]:
    """What a record's chain value covers: its fields, and its run id when it has one."""
    return values if run_id is None else (*values, run_id)


class _Pending:
    __slots__ = ("values", "run_id", "event", "record_id", "error", "done")

    def __init__(self, values: tuple[Any, ...], run_id: str | None = None) -> None:
        self.values = values
        self.run_id = run_id
        # Only a caller that waits on another's commit needs an event (made when it waits).
        self.event: anyio.Event | None = None
        self.record_id = 0
        self.error: BaseException | None = None
        self.done = False


# Writes that go with a unit's records in its transaction (on the connection that commits them).
UnitBefore = Callable[[sqlite3.Connection], None]
UnitAfter = Callable[[sqlite3.Connection, list[int]], None]


class _Unclaimed(Exception):
    """An :meth:`AuditLog.append_claimed` whose claim changed no row: someone else claimed it."""


class _Unit:
    """Records committed together with other rows of the same database (a webhook delivery and
    its firings): ``before`` runs first and may refuse by raising (nothing of the unit is written
    then, and the others in the batch are not touched: it must refuse before it writes), ``after``
    writes what needs the records' ids. Both run inside the batch's transaction."""

    __slots__ = ("records", "before", "after", "event", "error", "refused", "done")

    def __init__(self, records: list[_Pending], before: UnitBefore | None, after: UnitAfter | None) -> None:
        self.records = records
        self.before = before
        self.after = after
        self.event: anyio.Event | None = None
        self.error: BaseException | None = None
        self.refused: Exception | None = None
        self.done = False


class AuditLog:
    """The audit records of one database, chained under ``key`` (the 32-byte audit key).

    Opening a database whose marker is still pending (new, or written before the key existed)
    fills it in: the keyed chain begins at the next record. A database keyed under another
    key is refused, so no record is ever chained under a key its verifier does not hold.
    ``anchor``: the log's anchor in its home (store/anchor.py). With one, a pending marker is
    never filled in over a log the anchor says was keyed, and verify compares the two.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        key: bytes,
        writer: sqlite3.Connection | None = None,
        anchor: AnchorFile | None = None,
    ) -> None:
        self._conn = conn
        # Commits go through ``writer`` in a worker thread when there is one (see the module
        # docstring); the lock keeps append_sync and a thread's batch from interleaving.
        self._writer = writer
        self._write_lock = threading.Lock()
        self._key = ChainKey(key)
        self._anchor = anchor
        self._pending: list[_Pending | _Unit] = []
        self._flushing = False
        self._crowded, self._alone = True, 0
        self._head_id, self._head_hash = 0, GENESIS_HASH
        self._head_trusted = False  # whether the head as last read matched its MAC
        self._head_row: tuple[Any, ...] | None = None  # the head row as this log last signed or checked it
        try:
            self._adopt()
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot read the audit chain marker: {exc}", hint="check that pincer.db is a pincer database"
            ) from exc
        self._load_head()
        if not self._head_trusted:
            logger.error("the audit head does not match its MAC; `pincer audit verify` will name it")

    @property
    def key_id(self) -> str:
        return self._key.key_id

    @property
    def queue_depth(self) -> int:
        """Records handed in and not yet in a commit under way (readiness and metrics read it)."""
        return len(self._pending)

    def _adopt(self) -> None:
        """Fill in a pending marker under this key, unless the anchor says the log was keyed;
        refuse a marker made under another key; anchor the log when it has no anchor yet."""
        marker = self._read_marker()
        if marker is not None and not marker.pending:
            self._check_key(marker)
            if not (marker.head_keyed and marker.chain_id) and not self._anchored():
                self._upgrade_marker()
        elif marker is not None and self._anchored():
            logger.error(
                "the audit chain marker in the database is pending, but this log's anchor %s says it was keyed: "
                "it is not keyed again, and `pincer audit verify` will name it", self._anchor,
            )  # fmt: skip
        elif marker is not None:
            self._key_log()
        else:
            self._check_key(marker)
        if self._anchor is not None:
            self._anchor.settle(self._key, self._read_marker())

    def _anchored(self) -> bool:
        return self._anchor is not None and self._anchor.exists()

    def _key_log(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            marker = self._read_marker()
            if marker is not None and marker.pending:
                self._load_head()
                keyed_from, plain_head, chain_id = self._head_id + 1, self._head_hash, new_chain_id()
                conn.execute(
                    "UPDATE audit_chain SET keyed_from = ?, key_id = ?, plain_head = ?, mac = ?, head_keyed = 1, "
                    "chain_id = ? WHERE one = 1",
                    (keyed_from, self._key.key_id, plain_head,
                     self._key.marker_mac(keyed_from=keyed_from, plain_head=plain_head, head_keyed=True,
                                          chain_id=chain_id),
                     chain_id),
                )  # fmt: skip
                self._sign_head()
                if keyed_from > 1:
                    logger.warning(
                        "the audit log's %d records before record %d carry the plain SHA-256 chain of an older "
                        "pincer; from record %d on, records are chained under the audit key %s",
                        keyed_from - 1, keyed_from, keyed_from, self._key.key_id,
                    )  # fmt: skip
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._check_key(self._read_marker())

    def _upgrade_marker(self) -> None:
        """A log keyed before its head was (schema 4), or before chains had ids (schema 7): sign
        the head as it stands and give the chain its id, once, under the marker's MAC. Only a
        marker whose MAC holds is upgraded."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            marker = self._read_marker()
            if (
                marker is not None
                and not marker.pending
                and not (marker.head_keyed and marker.chain_id)
                and marker.mac_holds(self._key)
            ):
                chain_id = marker.chain_id or new_chain_id()
                mac = self._key.marker_mac(
                    keyed_from=marker.keyed_from, plain_head=marker.plain_head, head_keyed=True, chain_id=chain_id
                )
                conn.execute("UPDATE audit_chain SET head_keyed = 1, chain_id = ?, mac = ? WHERE one = 1",
                             (chain_id, mac))  # fmt: skip
                if not marker.head_keyed:
                    self._load_head()
                    self._sign_head()
                    logger.info("the audit log's head is now signed under the audit key %s", self._key.key_id)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _sign_head(self, conn: sqlite3.Connection | None = None) -> None:
        """Set the head's MAC to the head as cached (inside the caller's transaction)."""
        mac = self._key.head_mac(last_id=self._head_id, last_hash=self._head_hash)
        (conn or self._conn).execute("UPDATE audit_head SET mac = ? WHERE one = 1", (mac,))
        self._head_trusted = True
        self._head_row = (self._head_id, self._head_hash, mac)

    def _check_key(self, marker: ChainMarker | None) -> None:
        if marker is None:
            # Not fatal here: verify names it; refusing to open would only stop the recording.
            logger.error("the audit chain marker is missing from the database; `pincer audit verify` will fail")
        elif not marker.pending and marker.key_id != self._key.key_id:
            raise StoreError(
                f"this audit log is chained under audit key {marker.key_id}, not under this pincer's key "
                f"{self._key.key_id}",
                hint="set PINCER_AUDIT_KEY (or restore $PINCER_HOME/audit.key) to the key the log was begun with",
            )

    def _read_marker(self) -> ChainMarker | None:
        """The marker; keyed_from 0 while pending; None when the row (or its table) is gone."""
        try:
            row = self._conn.execute(
                "SELECT keyed_from, key_id, plain_head, mac, head_keyed, chain_id FROM audit_chain WHERE one = 1"
            ).fetchone()
        except sqlite3.OperationalError:
            return None
        return marker_of(row)

    async def append(self, entry: AuditEntry, *, gather: bool | None = True) -> int:
        """Record one entry; returns its id once the record is committed.

        ``gather`` lets the first caller yield once so that callers running in the same turn join
        its transaction; a caller that knows it is alone passes False and commits at once. None
        decides from what the last yields found: while they gathered others, keep yielding; once
        one found nobody, commit at once and yield again only every ``_PROBE_EVERY`` appends."""
        pending = _Pending(_row_values(entry, time.time()), entry.run_id)
        await self._submit(pending, gather)
        if pending.error is not None:
            raise StoreError(f"the audit record could not be written: {pending.error}") from pending.error
        return pending.record_id

    async def append_with(
        self, entries: Sequence[AuditEntry], *, before: UnitBefore | None = None, after: UnitAfter | None = None,
        gather: bool | None = True,
    ) -> list[int]:  # fmt: skip
        """Record ``entries`` in one transaction with the rows ``before`` and ``after`` write on its
        connection (see :class:`_Unit`); returns the records' ids once it committed. What
        ``before`` raised is raised here, with nothing of the unit written. Group-committed with
        the other appends like :meth:`append`: one commit for a webhook delivery, its firings and
        their records, shared with whatever else arrived in the same turn."""
        now = time.time()
        unit = _Unit([_Pending(_row_values(e, now), e.run_id) for e in entries], before, after)
        await self._submit(unit, gather)
        if unit.error is not None:
            raise StoreError(f"the audit record could not be written: {unit.error}") from unit.error
        if unit.refused is not None:
            raise unit.refused
        return [p.record_id for p in unit.records]

    async def _submit(self, pending: _Pending | _Unit, gather: bool | None) -> None:
        self._pending.append(pending)
        if self._flushing:
            event = pending.event = anyio.Event()
            await event.wait()
        else:
            self._flushing = True
            if gather is None:
                gather = self._crowded or self._alone >= _PROBE_EVERY
            try:
                if gather:
                    try:
                        await anyio.lowlevel.checkpoint()
                    except anyio.get_cancelled_exc_class():
                        # A cancelled leader still commits what it and the others wait on.
                        await self._flush()
                        raise
                committed = await self._flush()
            finally:
                self._flushing = False
            if gather:
                self._crowded, self._alone = committed > 1, 0
            else:
                self._alone += 1

    async def _flush(self) -> int:
        """Commit every pending record, batch after batch; returns how many."""
        if self._writer is None:
            return self._drain()
        committed = 0
        # Shielded: the callers waiting on these records get their answer whoever is cancelled.
        with anyio.CancelScope(shield=True):
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await anyio.to_thread.run_sync(self._commit_locked, batch)
                finally:
                    _finish(batch)  # events are set here, on the loop: anyio.Event is not thread-safe
                committed += len(batch)
        return committed

    def _drain(self) -> int:
        committed = 0
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                self._commit_locked(batch)
            finally:
                _finish(batch)
            committed += len(batch)
        return committed

    def _commit_locked(self, batch: list[_Pending | _Unit]) -> None:
        with self._write_lock:
            self._commit(batch)

    def append_sync(self, entry: AuditEntry) -> int:
        """For synchronous callers (the CLI answering an approval)."""
        pending = _Pending(_row_values(entry, time.time()), entry.run_id)
        self._commit_locked([pending])
        if pending.error is not None:
            raise StoreError(f"the audit record could not be written: {pending.error}") from pending.error
        return pending.record_id

    def append_claimed(self, entries: Sequence[AuditEntry], claim: str, params: tuple[Any, ...]) -> list[int] | None:
        """Record ``entries`` in one transaction with the statement ``claim`` (an UPDATE, qmark
        placeholders), only when it changes exactly one row: the records' ids, or None with
        nothing written. Whoever's claim changes the row writes the records, once, however many
        processes try (store/approvals.py: the record of a call whose caller is gone)."""
        def before(conn: sqlite3.Connection) -> None:
            if conn.execute(claim, params).rowcount != 1:
                raise _Unclaimed

        now = time.time()
        unit = _Unit([_Pending(_row_values(e, now), e.run_id) for e in entries], before, None)
        self._commit_locked([unit])
        if unit.error is not None:
            raise StoreError(f"the audit record could not be written: {unit.error}") from unit.error
        if unit.refused is not None:
            return None
        return [p.record_id for p in unit.records]

    def _commit(self, batch: list[_Pending | _Unit]) -> None:
        """Append a batch, hashing each record onto the chain head, in one transaction that reads
        the head (and checks its MAC) under the write lock, so another process's appends are
        chained onto, and moves the head's MAC with the records when the head it found held."""
        conn = self._writer or self._conn
        try:
            if self._head_row is not None and self._commit_on_known_head(batch, conn):
                return
            # One transaction under the write lock: the head is read there (another process may
            # have appended), the records inserted, and the head's MAC moved with them.
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._load_head(conn)
                units, rows, head = self._chained(batch, conn)
                conn.executemany(_INSERT, rows)  # the trigger moves last_id and last_hash with them
                _write_afters(units, conn)
                self._head_id, self._head_hash = head
                if self._head_trusted:
                    self._sign_head(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                self._load_head(conn)
                raise
        except Exception as exc:  # noqa: BLE001 - every waiter of the batch gets the failure
            logger.error("audit commit failed: %s", exc)
            for pending in batch:
                pending.error = exc

    def _commit_on_known_head(self, batch: list[_Pending | _Unit], conn: sqlite3.Connection) -> bool:
        """The batch chained onto the head this log last wrote or checked, in one transaction
        whose first write checks that head and sets its new MAC in one statement (``UPDATE ...
        WHERE`` the head is still the one it knew): one statement for what a read of the head and
        a MAC update did. False, with nothing written, when the head moved (another process
        appended, or someone changed it): the caller then reads it as it is."""
        known = self._head_row
        assert known is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            units, rows, (head_id, head_hash) = self._chained(batch, conn)
            mac = self._key.head_mac(last_id=head_id, last_hash=head_hash)
            moved = conn.execute(
                "UPDATE audit_head SET mac = ? WHERE one = 1 AND last_id = ? AND last_hash = ? AND mac = ?",
                (mac, *known),
            ).rowcount
            if moved != 1:
                conn.execute("ROLLBACK")
                return False
            conn.executemany(_INSERT, rows)  # the trigger moves last_id and last_hash with them
            _write_afters(units, conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            self._load_head(conn)
            raise
        self._head_id, self._head_hash = head_id, head_hash
        self._head_row = (head_id, head_hash, mac)
        return True

    def _chained(
        self, batch: list[_Pending | _Unit], conn: sqlite3.Connection
    ) -> tuple[list[_Unit], list[tuple[Any, ...]], tuple[int, str]]:
        """The batch's rows chained onto the head as cached, each record given its id: the units
        whose ``before`` admitted them (run here, in the open transaction), the rows to insert,
        and the head after them."""
        records: list[_Pending] = []
        units: list[_Unit] = []
        for item in batch:
            if isinstance(item, _Pending):
                records.append(item)
            elif _unit_admitted(item, conn):
                units.append(item)
                records.extend(item.records)
        head_id, head_hash = self._head_id, self._head_hash
        rows: list[tuple[Any, ...]] = []
        for pending in records:
            head_id += 1
            digest = self._key.record_hash(head_id, _hashed(pending.values, pending.run_id), head_hash)
            rows.append((head_id, *pending.values, pending.run_id, head_hash, digest))
            pending.record_id = head_id
            head_hash = digest
        return units, rows, (head_id, head_hash)

    def _load_head(self, conn: sqlite3.Connection | None = None) -> None:
        row = (conn or self._conn).execute("SELECT last_id, last_hash, mac FROM audit_head WHERE one = 1").fetchone()
        if row is None:
            self._head_id, self._head_hash, self._head_trusted = 0, GENESIS_HASH, False
            return
        self._head_id, self._head_hash, mac = row
        if row == self._head_row:
            return  # the head this log wrote (or checked) last: its MAC was right then
        trusted = self._key.matches(mac, self._key.head_mac(last_id=self._head_id, last_hash=self._head_hash))
        self._head_row = tuple(row) if trusted else None
        if self._head_trusted and not trusted:
            logger.error("the audit head does not match its MAC; `pincer audit verify` will name it")
        self._head_trusted = trusted

    # -- reading -------------------------------------------------------------------------

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
        rows = self._conn.execute(sql, params).fetchall()
        return [_to_record(row) for row in reversed(rows)]

    def timestamps(self, tool: str, since: float) -> list[float]:
        """Times of executed calls of a tool since ``since``: seeds rate limits across processes."""
        rows = self._conn.execute(_TIMESTAMPS_SQL, (tool, since)).fetchall()
        return [row[0] for row in rows]

    def grant_uses(self, grant_id: str) -> int:
        row = self._conn.execute(GRANT_USES_SQL, (grant_id,)).fetchone()
        return int(row[0])

    def verify(self) -> int:
        """Walk the chain; returns the number of records, raises AuditChainBroken at the first bad one."""
        return self.verify_chain().records

    def verify_chain(self, *, check_head: bool = True) -> ChainHead:
        """Walk the whole chain in one read snapshot; raise AuditChainBroken at the first fault.
        ``check_head`` False leaves out the head (for a checkpoint, which says more about a cut)."""
        conn = self._conn
        try:
            conn.execute("BEGIN")
            try:
                return self._walk(check_head=check_head)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(
                f"the audit log could not be read: {exc}", hint="check that pincer.db is a pincer database"
            ) from exc

    def _walk(self, *, check_head: bool) -> ChainHead:
        marker = self._read_marker()
        if self._anchor is not None:
            self._anchor.check(self._key, marker)
        if marker is None or marker.pending:
            raise AuditChainBroken(
                "the audit chain marker (where the keyed chain begins) is missing from the database",
                record_id=1,
                hint="someone removed it to pass keyed records off as plain ones; verify against a checkpoint "
                "(`pincer audit verify --checkpoint FILE`) and restore pincer.db from a backup",
            )
        if marker.key_id != self._key.key_id:
            raise AuditChainBroken(
                f"the audit chain marker names audit key {marker.key_id}, not this key {self._key.key_id}",
                record_id=marker.keyed_from,
                hint="verify with the audit key the log was written with (PINCER_AUDIT_KEY or audit.key)",
            )
        keyed_from, plain_head = marker.keyed_from, marker.plain_head
        if not marker.mac_holds(self._key):
            raise AuditChainBroken(
                f"the audit chain marker was altered (it says the keyed chain begins at record {keyed_from})",
                record_id=1,
                hint="the log cannot be trusted; verify against a checkpoint and restore pincer.db from a backup",
            )
        prev, expected_id, count = GENESIS_HASH, 1, 0
        for row in self._iter_rows():
            record_id = row[0]
            values = _hashed(tuple(row[1 : 1 + len(_FIELDS)]), row[-1])
            stored_prev, stored_hash = row[-3], row[-2]
            if record_id != expected_id:
                raise AuditChainBroken(
                    f"audit record {expected_id} is missing (next present is {record_id})",
                    record_id=expected_id,
                    hint="a record was deleted; the log cannot be trusted from this point",
                )
            if record_id == keyed_from and prev != plain_head:
                raise _plain_records_altered(keyed_from)
            if stored_prev != prev:
                raise AuditChainBroken(
                    f"audit record {record_id} does not follow record {record_id - 1} (previous hash differs)",
                    record_id=record_id,
                    hint="records were deleted, reordered or rewritten before this one",
                )
            if record_id < keyed_from:
                expected = plain_chain_hash(record_id, values, prev)
            else:
                expected = self._key.record_hash(record_id, values, prev)
            if not self._key.matches(stored_hash, expected):
                raise AuditChainBroken(
                    f"audit record {record_id} was altered (its hash does not match its content)",
                    record_id=record_id,
                )
            prev, expected_id, count = stored_hash, expected_id + 1, count + 1
        if count < keyed_from - 1:
            raise AuditChainBroken(
                f"the audit log ends at record {count}, but {keyed_from - 1} records were there when it was keyed",
                record_id=count + 1,
                hint="records were removed from the end of the log",
            )
        if count == keyed_from - 1 and prev != plain_head:
            raise _plain_records_altered(keyed_from)
        if check_head:
            self._check_head(marker, count, prev)
        return ChainHead(records=count, last_hash=prev, keyed_from=keyed_from, key_id=self._key.key_id)

    def _check_head(self, marker: ChainMarker, count: int, prev: str) -> None:
        head = self._conn.execute("SELECT last_id, last_hash, mac FROM audit_head WHERE one = 1").fetchone()
        if head is None and marker.head_keyed:
            raise AuditChainBroken(
                f"the audit head is missing from the database (the log holds {count} records)",
                record_id=count + 1,
                hint="the log was wiped or cut and its head removed; verify against a checkpoint "
                "(`pincer audit verify --checkpoint FILE`) and restore pincer.db from a backup",
            )
        head_id, head_hash, head_mac = head if head else (0, GENESIS_HASH, None)
        if marker.head_keyed and not self._key.matches(
            head_mac, self._key.head_mac(last_id=head_id, last_hash=head_hash)
        ):
            raise AuditChainBroken(
                f"the audit head was altered (it says the log ends at record {head_id}, and its MAC does not "
                f"match; the log holds {count} records)",
                record_id=count + 1,
                hint="records were cut from the end of the log (or it was wiped) and the head moved to match; "
                "verify against a checkpoint (`pincer audit verify --checkpoint FILE`) and restore pincer.db",
            )
        if head_id != count or head_hash != prev:
            raise AuditChainBroken(
                f"the audit log ends at record {count} but its head says {head_id}",
                record_id=count + 1,
                hint="records were removed from the end of the log",
            )

    # -- checkpoints -----------------------------------------------------------------------

    def checkpoint(self) -> AuditCheckpoint:
        """A signed head of the log as it is now; refused (AuditChainBroken) for a broken chain."""
        head = self.verify_chain()
        return sign_checkpoint(
            self._key, records=head.records, last_hash=head.last_hash, keyed_from=head.keyed_from, now=time.time()
        )

    def verify_checkpoint(self, checkpoint: AuditCheckpoint) -> ChainHead:
        """Prove that no record up to ``checkpoint`` changed and none of them is gone.

        Raises CheckpointInvalid for a checkpoint this key did not sign, AuditChainBroken when the
        log is broken, shorter than the checkpoint, or differs from it at its last record."""
        checkpoint.check_signature(self._key)
        head = self.verify_chain(check_head=False)
        made = f"the checkpoint of {checkpoint.created_at}"
        if head.records < checkpoint.records:
            raise AuditChainBroken(
                f"the audit log has {head.records} records, but {made} counted {checkpoint.records}: "
                f"records {head.records + 1} to {checkpoint.records} were deleted",
                record_id=head.records + 1,
                hint="restore pincer.db from a backup; the records after the checkpoint cannot be recovered from it",
            )
        if head.keyed_from != checkpoint.keyed_from:
            raise AuditChainBroken(
                f"the keyed chain begins at record {head.keyed_from}, but {made} says record "
                f"{checkpoint.keyed_from}: its marker was replaced and records re-chained as plain ones",
                record_id=min(head.keyed_from, checkpoint.keyed_from),
                hint="restore pincer.db from a backup",
            )
        if checkpoint.records:
            row = self._conn.execute("SELECT hash FROM audit WHERE id = ?", (checkpoint.last_id,)).fetchone()
            if row is None or not self._key.matches(row[0], checkpoint.last_hash):
                raise AuditChainBroken(
                    f"audit record {checkpoint.last_id} is not the one {made} saw: the log up to it was rewritten",
                    record_id=checkpoint.last_id,
                    hint="restore pincer.db from a backup",
                )
        return self.verify_chain()  # the head too, now that the checkpoint's own findings are out

    def _iter_rows(self) -> Iterator[tuple[Any, ...]]:
        cursor = self._conn.execute(f"SELECT {_COLUMNS} FROM audit ORDER BY rowid")
        while batch := cursor.fetchmany(1000):
            yield from batch


def _finish(batch: list[_Pending] | list[_Pending | _Unit]) -> None:
    for pending in batch:
        pending.done = True
        if pending.event is not None:
            pending.event.set()


def _plain_records_altered(keyed_from: int) -> AuditChainBroken:
    return AuditChainBroken(
        f"the records before {keyed_from} (written before the log was keyed) were altered: they no longer "
        "end where the marker says",
        record_id=max(keyed_from - 1, 1),
        hint="the log cannot be trusted; verify against a checkpoint and restore pincer.db from a backup",
    )


def marker_of(row: Sequence[Any] | None) -> ChainMarker | None:
    """The marker of an ``audit_chain`` row (keyed_from, key_id, plain_head, mac, head_keyed,
    chain_id) as either database returns it; None for no row."""
    if row is None:
        return None
    keyed_from, key_id, plain_head, mac, head_keyed, chain_id = row
    if keyed_from is None:
        return ChainMarker(keyed_from=0, key_id="", plain_head="", mac="")
    if type(keyed_from) is not int or keyed_from < 1:
        keyed_from = -1  # not a record id: the marker's MAC cannot match, so verify says altered
    return ChainMarker(
        keyed_from=keyed_from, key_id=str(key_id), plain_head=str(plain_head), mac=str(mac),
        head_keyed=bool(head_keyed), chain_id=None if chain_id is None else str(chain_id),
    )  # fmt: skip


def _to_record(row: sqlite3.Row | tuple[Any, ...]) -> AuditRecord:
    (
        record_id, ts, session, caller, tool, kind, decision, reason, grant_id, outcome, error_code,
        error, args, effects, duration_ms, usage, idempotency_key, cached, approval_id, prev_hash, digest, run_id,
    ) = row  # fmt: skip
    return AuditRecord(
        id=record_id, ts=ts, session=session, caller=caller, tool=tool, kind=kind, decision=decision,
        reason=reason, grant_id=grant_id, outcome=outcome, error_code=error_code, error=error,
        args=json.loads(args), effects=json.loads(effects), duration_ms=duration_ms,
        usage=json.loads(usage), idempotency_key=idempotency_key, cached=bool(cached),
        approval_id=approval_id, prev_hash=prev_hash, hash=digest, run_id=run_id,
    )  # fmt: skip


# A call that used its grant (and its rate limit): it ran, or it was let through and then
# cancelled by its caller (it may have run in part). One that never got past its approval (timed
# out, or its caller died waiting: outcome cancelled with those codes) used nothing.
_USED_SQL = (
    "(outcome IN ('ok', 'error') OR (outcome = 'cancelled' AND error_code NOT IN ('approval_timeout', 'approval_gone')))"
)
# Executed calls of a tool since a time (what rate limits count); "?" placeholders, which the
# PostgreSQL store (store/pg/audit.py) turns into "%s" with to_format_style.
_TIMESTAMPS_SQL = (
    f"SELECT ts FROM audit WHERE tool = ? AND ts >= ? AND kind = 'call' AND {_USED_SQL} "
    "AND cached = 0 AND decision = 'allow' ORDER BY ts"
)
GRANT_USES_SQL = f"SELECT COUNT(*) FROM audit WHERE grant_id = ? AND kind = 'call' AND {_USED_SQL} AND cached = 0"


def _records_query(
    *, tool: str | None, session: str | None, limit: int | None, after_id: int, run_id: str | None
) -> tuple[str, list[Any]]:
    """The SELECT of ``records()`` and its parameters, newest first, with ``?`` placeholders
    (the PostgreSQL store runs it through ``to_format_style``), so both stores filter alike."""
    clauses: list[str] = ["id > ?"]
    params: list[Any] = [after_id]
    for column, value in (("tool", tool), ("session", session), ("run_id", run_id)):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    sql = f"SELECT {_COLUMNS} FROM audit WHERE {' AND '.join(clauses)} ORDER BY id DESC"
    if limit:
        sql += f" LIMIT {int(limit)}"
    return sql, params


def _write_afters(units: list[_Unit], conn: sqlite3.Connection) -> None:
    """Each unit's ``after`` step, once its records have their ids (same transaction)."""
    for unit in units:
        if unit.after is not None:
            unit.after(conn, [p.record_id for p in unit.records])


def _unit_admitted(unit: _Unit, conn: sqlite3.Connection) -> bool:
    """Run the unit's ``before`` step in the open transaction. An exception of its own (a delivery
    seen before) is the unit's answer: kept in ``unit.refused``, and the unit writes nothing. A
    database error is the transaction's and goes up."""
    unit.refused = None
    if unit.before is None:
        return True
    try:
        unit.before(conn)
    except sqlite3.Error:
        raise
    except Exception as exc:  # noqa: BLE001 - the unit's own refusal: its answer
        unit.refused = exc
        return False
    return True
