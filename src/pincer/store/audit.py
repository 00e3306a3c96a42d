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
transaction, and every record that arrives while a batch commits joins the next one; nobody gets
a result before the transaction holding its record has committed.

One log for both databases (store/sql/). Every process on the database may append: a batch's
transaction moves the head row with the records, and only from the head it read, so there is one
chain with no gap and no fork however many processes (gateways) append. The head this log last
wrote is kept: a batch chained onto it is one round trip (one hop to the SQLite writer thread,
one pipeline on PostgreSQL), whose first write moves the head only if it is still that head
(``UPDATE ... WHERE`` it is, a guard: store/sql/database.py); when another process moved it, the
transaction rolls back and the batch is chained again onto the head as it is, read under the
write lock (``FOR UPDATE`` on PostgreSQL). Nothing of a commit runs on the event loop but the
HMACs.

A log in a SQLite database may begin with records of the plain chain (written before the key
existed); a PostgreSQL log is keyed from its first record, and its marker must say so.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_process
import anyio.to_thread
from anyio import BrokenWorkerProcess

from pincer.core.errors import AuditChainBroken, StoreConflict, StoreError, UsageError
from pincer.core.offload import is_large, off_loop
from pincer.core.values import canonical_json
from pincer.store.anchor import AnchorFile, ChainMarker, new_chain_id
from pincer.store.chain import GENESIS_HASH, ChainKey, encoded_fields
from pincer.store.chain_walk import HASH_AT, ChainWalk, check_batch
from pincer.store.chain_walk import RECORD_FIELDS as _FIELDS
from pincer.store.chain_walk import hashed as _hashed
from pincer.store.checkpoint import AuditCheckpoint, sign_checkpoint
from pincer.store.sql import Database, Sql, Transaction
from pincer.store.sql.database import Queries
from pincer.store.sql.dialects import locking

logger = logging.getLogger(__name__)

__all__ = [
    "AuditEntry",
    "AuditRecord",
    "AuditLog",
    "ChainHead",
    "ChainWalk",
    "VerifyProgress",
    "GENESIS_HASH",
    "VERIFIED_MARK",
    "ARCHIVED_MARK",
]


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
    # Who: the person behind the call or act (a personal access token's), and the person (or
    # session) who answered its approval. None: no person known (a configured token, the CLI).
    person: str | None = None
    approved_by: str | None = None


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
    person: str | None = None
    approved_by: str | None = None

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


@dataclass(frozen=True, kw_only=True, slots=True)
class ArchiveReport:
    """What ``archive()`` moved out of the database: records ``first_id`` to ``last_id`` (none when
    ``last_id`` < ``first_id``), into these segment files."""

    first_id: int
    last_id: int
    segments: tuple[str, ...]

    @property
    def records(self) -> int:
        return max(0, self.last_id - self.first_id + 1)

    def to_dict(self) -> dict[str, Any]:
        return {"first_id": self.first_id, "last_id": self.last_id, "records": self.records,
                "segments": list(self.segments)}  # fmt: skip


@dataclass(kw_only=True, slots=True)
class VerifyProgress:
    """A running verify: records checked so far of ``total`` (the head when it began); ``start``:
    the records its marks vouched for, which it did not walk."""

    full: bool
    total: int = 0
    start: int = 0
    checked: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"full": self.full, "total": self.total, "start": self.start, "checked": self.checked}


def _json(value: Any) -> str:
    # Empty values are most of what a record holds (no effects, no usage extras): skip the encoder.
    if not value and isinstance(value, dict | list):
        return "{}" if isinstance(value, dict) else "[]"
    return canonical_json(value)


# A lone committer still yields once every this many appends, to notice callers queueing up.
_PROBE_EVERY = 32
VERIFY_BATCH_ROWS = 1_000  # the records a chain walk reads at a time
_TRAILING = ("prev_hash", "hash", "run_id", "person", "approved_by")
_COLUMNS = ", ".join(("id", *_FIELDS, *_TRAILING))
_INSERT = Sql(f"INSERT INTO audit ({_COLUMNS}) VALUES ({', '.join(':' + c for c in ('id', *_FIELDS, *_TRAILING))})")
_MARKER = Sql("SELECT keyed_from, key_id, plain_head, mac, head_keyed, chain_id FROM audit_chain WHERE one = 1")
_MARKER_LOCKED = locking(
    "SELECT keyed_from, key_id, plain_head, mac, head_keyed, chain_id FROM audit_chain WHERE one = 1"
)
_KEY_LOG = Sql(
    "UPDATE audit_chain SET keyed_from = :keyed_from, key_id = :key_id, plain_head = :plain_head, mac = :mac, "
    "head_keyed = 1, chain_id = :chain_id WHERE one = 1"
)
_UPGRADE_MARKER = Sql("UPDATE audit_chain SET head_keyed = 1, chain_id = :chain_id, mac = :mac WHERE one = 1")
_HEAD = Sql("SELECT last_id, last_hash, mac FROM audit_head WHERE one = 1")
_HEAD_LOCKED = locking("SELECT last_id, last_hash, mac FROM audit_head WHERE one = 1")
_SIGN_HEAD = Sql("UPDATE audit_head SET mac = :mac WHERE one = 1")
_MOVE_HEAD = Sql("UPDATE audit_head SET last_id = :last_id, last_hash = :last_hash, mac = :mac WHERE one = 1")
# The head moved only if it is still the one this log wrote last: a guard (rows=1).
_MOVE_KNOWN_HEAD = Sql(
    "UPDATE audit_head SET last_id = :last_id, last_hash = :last_hash, mac = :mac "
    "WHERE one = 1 AND last_id = :was_id AND last_hash = :was_hash AND mac = :was_mac"
)
_ROWS_AFTER = Sql(f"SELECT {_COLUMNS} FROM audit WHERE id > :after_id ORDER BY id")
_MARKS = Sql("SELECT name, last_id, last_hash, mac FROM audit_marks")
_SAVE_MARK = Sql(
    "INSERT INTO audit_marks (name, last_id, last_hash, made_at, mac) VALUES (:name, :last_id, :last_hash, :made_at, :mac) "
    "ON CONFLICT (name) DO UPDATE SET last_id = excluded.last_id, last_hash = excluded.last_hash, "
    "made_at = excluded.made_at, mac = excluded.mac WHERE audit_marks.last_id <= excluded.last_id"
)
_ROWS_BETWEEN = Sql(f"SELECT {_COLUMNS} FROM audit WHERE id > :after_id AND id <= :upto ORDER BY id")
_LAST_BEFORE = Sql("SELECT MAX(id) FROM audit WHERE id > :after_id AND ts < :before")
_MOVE_ARCHIVED = Sql(
    "UPDATE audit_marks SET last_id = :last_id, last_hash = :last_hash, made_at = :made_at, mac = :mac "
    "WHERE name = 'archived' AND last_id = :was_id AND last_hash = :was_hash"
)
# Only records the archived mark covers ever leave the database: the bound is read from the mark
# itself, in the statement, so no caller can delete past it.
_DELETE_ARCHIVED = Sql(
    "DELETE FROM audit WHERE id > :after_id AND id <= :upto "
    "AND id <= (SELECT last_id FROM audit_marks WHERE name = 'archived')"
)
VERIFIED_MARK = "verified"  # where the last intact verify ended
ARCHIVED_MARK = "archived"  # where the records archived out of the database end
_HASH_OF = Sql("SELECT hash FROM audit WHERE id = :id")


class _Pending:
    __slots__ = ("values", "fields", "run_id", "person", "approved_by", "event", "record_id", "error", "done")

    def __init__(self, values: tuple[Any, ...], entry: AuditEntry) -> None:
        self.values = values
        self.run_id = entry.run_id
        self.person = entry.person
        self.approved_by = entry.approved_by
        # Encoded here, not when chained: the chaining runs on the event loop in the transaction.
        self.fields = encoded_fields(_hashed(values, entry.run_id, entry.person, entry.approved_by))
        # Only a caller that waits on another's commit needs an event (made when it waits).
        self.event: anyio.Event | None = None
        self.record_id = 0
        self.error: BaseException | None = None
        self.done = False


async def _pending(entry: AuditEntry, now: float) -> _Pending:
    """A record made ready to chain: encoded off the event loop when it is large (arguments of
    megabytes). Shielded: an append once called is committed whoever is cancelled, as before."""
    large = is_large(entry.args) or is_large(entry.error)  # the rest of a record is short
    return await off_loop(_make_pending, entry, now, large=large, shield=True)


def _make_pending(entry: AuditEntry, now: float) -> _Pending:
    return _Pending(_row_values(entry, now), entry)


# Writes that go with a unit's records in its transaction: ``before`` may read (and refuse by
# raising), ``after`` queues what needs the records' ids.
UnitBefore = Callable[[Transaction], Awaitable[None]]
UnitAfter = Callable[[Transaction, list[int]], None]


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
    """The audit records of one database, chained under ``key`` (the 32-byte audit key); made
    with :meth:`open`.

    Opening a database whose marker is still pending (new, or written before the key existed)
    fills it in: the keyed chain begins at the next record. A database keyed under another
    key is refused, so no record is ever chained under a key its verifier does not hold.
    ``anchor``: the log's anchor in its home (store/anchor.py). With one, a pending marker is
    never filled in over a log the anchor says was keyed, and verify compares the two.
    ``plain_prefix``: whether the log may begin with plain-chained records (a SQLite log written
    before the key existed); a log that may not is refused by verify unless keyed from record 1.
    """

    def __init__(
        self, db: Database, *, key: bytes, anchor: AnchorFile | None = None, plain_prefix: bool = True
    ) -> None:
        self._db = db
        self._key = ChainKey(key)
        self._raw_key = key  # for the worker process that verifies (store/chain_walk.py)
        self._walk_in_process = True
        self._anchor = anchor
        self._plain_prefix = plain_prefix
        self._pending: list[_Pending | _Unit] = []
        self._flushing = False
        self._crowded, self._alone = True, 0
        # The head as this log last wrote or checked it, while its MAC held: (id, hash, mac).
        self._head_row: tuple[int, str, str] | None = None
        self._verifying: VerifyProgress | None = None

    @classmethod
    async def open(cls, db: Database, *, key: bytes, anchor: AnchorFile | None = None) -> AuditLog:
        """The log of ``db``: its marker keyed under ``key`` if it was pending, and its head read."""
        log = cls(db, key=key, anchor=anchor, plain_prefix=db.dialect == "sqlite")
        await log._adopt()
        if not await log._load_head():
            logger.error("the audit head does not match its MAC; `pincer audit verify` will name it")
        return log

    @property
    def key_id(self) -> str:
        return self._key.key_id

    @property
    def queue_depth(self) -> int:
        """Records handed in and not yet in a commit under way (readiness and metrics read it)."""
        return len(self._pending)

    async def _adopt(self) -> None:
        """Fill in a pending marker under this key, unless the anchor says the log was keyed;
        refuse a marker made under another key; anchor the log when it has no anchor yet."""
        marker = await self._read_marker()
        if marker is not None and not marker.pending:
            self._check_key(marker)
            if not (marker.head_keyed and marker.chain_id) and not self._anchored():
                await self._upgrade_marker()
        elif marker is not None and self._anchored():
            logger.error(
                "the audit chain marker in the database is pending, but this log's anchor %s says it was keyed: "
                "it is not keyed again, and `pincer audit verify` will name it", self._anchor,
            )  # fmt: skip
        elif marker is not None:
            await self._key_log()
        else:
            self._check_key(marker)
        if self._anchor is not None:
            self._anchor.settle(self._key, await self._read_marker())

    def _anchored(self) -> bool:
        return self._anchor is not None and self._anchor.exists()

    async def _key_log(self) -> None:
        async with self._db.transaction() as tx:
            marker = marker_of(await tx.fetch_one(_MARKER_LOCKED))
            if marker is not None and marker.pending:
                head = await tx.fetch_one(_HEAD_LOCKED)
                head_id, head_hash = (int(head[0]), str(head[1])) if head else (0, GENESIS_HASH)
                keyed_from, plain_head, sign_head = head_id + 1, head_hash, True
                if not self._plain_prefix and head_id:
                    # A log that began keyed has no plain records: it is keyed from its first
                    # record whatever its head says, and a head with records is never signed here.
                    keyed_from, plain_head, sign_head = 1, GENESIS_HASH, False
                chain_id = new_chain_id()
                mac = self._key.marker_mac(keyed_from=keyed_from, plain_head=plain_head, head_keyed=True,
                                           chain_id=chain_id)  # fmt: skip
                tx.add(_KEY_LOG, {"keyed_from": keyed_from, "key_id": self._key.key_id, "plain_head": plain_head,
                                  "mac": mac, "chain_id": chain_id})  # fmt: skip
                if sign_head:
                    tx.add(_SIGN_HEAD, {"mac": self._key.head_mac(last_id=head_id, last_hash=head_hash)})
                if keyed_from > 1:
                    logger.warning(
                        "the audit log's %d records before record %d carry the plain SHA-256 chain of an older "
                        "pincer; from record %d on, records are chained under the audit key %s",
                        keyed_from - 1, keyed_from, keyed_from, self._key.key_id,
                    )  # fmt: skip
        self._check_key(await self._read_marker())

    async def _upgrade_marker(self) -> None:
        """A log keyed before its head was (schema 4), or before chains had ids (schema 7): sign
        the head as it stands and give the chain its id, once, under the marker's MAC. Only a
        marker whose MAC holds is upgraded."""
        async with self._db.transaction() as tx:
            marker = marker_of(await tx.fetch_one(_MARKER_LOCKED))
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
                tx.add(_UPGRADE_MARKER, {"chain_id": chain_id, "mac": mac})
                if not marker.head_keyed:
                    head = await tx.fetch_one(_HEAD_LOCKED)
                    head_id, head_hash = (int(head[0]), str(head[1])) if head else (0, GENESIS_HASH)
                    tx.add(_SIGN_HEAD, {"mac": self._key.head_mac(last_id=head_id, last_hash=head_hash)})
                    logger.info("the audit log's head is now signed under the audit key %s", self._key.key_id)

    def _check_key(self, marker: ChainMarker | None) -> None:
        if marker is None:
            # Not fatal here: verify names it; refusing to open would only stop the recording.
            logger.error("the audit chain marker is missing from the database; `pincer audit verify` will fail")
        elif not marker.pending and marker.key_id != self._key.key_id:
            raise StoreError(
                f"this audit log is chained under audit key {marker.key_id}, not under this pincer's key "
                f"{self._key.key_id}",
                hint="set PINCER_AUDIT_KEY (or restore $PINCER_HOME/audit.key) to the key the log was begun with; "
                "gateways sharing a store need the same key",
            )

    async def _read_marker(self) -> ChainMarker | None:
        """The marker; keyed_from 0 while pending; None when the row (or its table) is gone."""
        try:
            return marker_of(await self._db.fetch_one(_MARKER))
        except StoreError:
            return None  # no such table: the marker was removed with it

    async def _load_head(self) -> bool:
        """Read the head; whether its MAC holds (then it is the head this log chains onto)."""
        row = await self._db.fetch_one(_HEAD)
        trusted = row is not None and self._trusted(row)
        self._head_row = (int(row[0]), str(row[1]), str(row[2])) if row is not None and trusted else None
        return trusted

    def _trusted(self, head: Sequence[Any]) -> bool:
        return self._key.matches(head[2], self._key.head_mac(last_id=int(head[0]), last_hash=str(head[1])))

    # -- appending -----------------------------------------------------------------------

    async def append(self, entry: AuditEntry, *, gather: bool | None = True) -> int:
        """Record one entry; returns its id once the record is committed.

        ``gather`` lets the first caller yield once so that callers running in the same turn join
        its transaction; a caller that knows it is alone passes False and commits at once. None
        decides from what the last yields found: while they gathered others, keep yielding; once
        one found nobody, commit at once and yield again only every ``_PROBE_EVERY`` appends."""
        pending = await _pending(entry, time.time())
        await self._submit(pending, gather)
        if pending.error is not None:
            raise StoreError(f"the audit record could not be written: {pending.error}") from pending.error
        return pending.record_id

    async def append_with(
        self, entries: Sequence[AuditEntry], *, before: UnitBefore | None = None, after: UnitAfter | None = None,
        gather: bool | None = True,
    ) -> list[int]:  # fmt: skip
        """Record ``entries`` in one transaction with the rows ``before`` and ``after`` write in
        it (see :class:`_Unit`); returns the records' ids once it committed. What ``before``
        raised is raised here, with nothing of the unit written. Group-committed with the other
        appends like :meth:`append`: one commit for a webhook delivery, its firings and their
        records, shared with whatever else arrived in the same turn."""
        now = time.time()
        unit = _Unit([await _pending(e, now) for e in entries], before, after)
        await self._submit(unit, gather)
        if unit.error is not None:
            raise StoreError(f"the audit record could not be written: {unit.error}") from unit.error
        if unit.refused is not None:
            raise unit.refused
        return [p.record_id for p in unit.records]

    async def append_claimed(
        self, entries: Sequence[AuditEntry], claim: Sql, params: dict[str, Any]
    ) -> list[int] | None:
        """Record ``entries`` in one transaction with the statement ``claim`` (an UPDATE), only
        when it changes exactly one row: the records' ids, or None with nothing written. Whoever's
        claim changes the row writes the records, once, however many processes try
        (store/approvals.py: the record of a call whose caller is gone)."""

        async def claimed(tx: Transaction) -> None:
            if await tx.execute(claim, params) != 1:
                raise _Unclaimed

        try:
            return await self.append_with(entries, before=claimed)
        except _Unclaimed:
            return None

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
        """Commit every pending record, batch after batch; returns how many. Whatever arrives
        while a batch commits waits for the next one."""
        committed = 0
        # Shielded: the callers waiting on these records get their answer whoever is cancelled.
        with anyio.CancelScope(shield=True):
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await self._commit(batch)
                finally:
                    _finish(batch)
                committed += len(batch)
        return committed

    async def _commit(self, batch: list[_Pending | _Unit]) -> None:
        """Append a batch in one transaction: onto the head this log wrote last when it is still
        the head (one round trip), else onto the head as it is (read under the write lock). A
        head that does not match its MAC is chained onto but never re-signed, so an append cannot
        launder a cut; ``pincer audit verify`` names it."""
        try:
            known = self._head_row
            if known is not None:
                try:
                    await self._commit_onto(batch, known)
                    return
                except StoreConflict:
                    self._head_row = None  # another process appended (or the head was changed)
            await self._commit_onto(batch, None)
        except Exception as exc:  # noqa: BLE001 - every waiter of the batch gets the failure
            logger.error("audit commit failed: %s", exc)
            for pending in batch:
                pending.error = exc

    async def _commit_onto(self, batch: list[_Pending | _Unit], known: tuple[int, str, str] | None) -> None:
        async with self._db.transaction() as tx:
            if any(type(item) is _Unit for item in batch):
                records, units = await _admitted(batch, tx)
            else:  # plain records, the hot path: nothing to admit
                records, units = batch, []  # type: ignore[assignment]
            if known is None:
                head = await tx.fetch_one(_HEAD_LOCKED)
                if head is None:
                    raise StoreError(
                        "the audit head row is missing", hint="run `pincer audit verify` to see what was removed"
                    )
                was_id, was_hash, was_mac = int(head[0]), str(head[1]), head[2]
                trusted = self._trusted(head)
                if not trusted:
                    logger.error("the audit head does not match its MAC; `pincer audit verify` will name it")
            else:
                (was_id, was_hash, was_mac), trusted = known, True
            rows, head_id, head_hash = self._chained(records, was_id, was_hash)
            mac = self._key.head_mac(last_id=head_id, last_hash=head_hash) if trusted else was_mac
            if rows:
                moved = {"last_id": head_id, "last_hash": head_hash, "mac": mac}
                if known is not None:
                    tx.add(
                        _MOVE_KNOWN_HEAD, {**moved, "was_id": was_id, "was_hash": was_hash, "was_mac": was_mac}, rows=1
                    )
                else:
                    tx.add(_MOVE_HEAD, moved)
                tx.add_many(_INSERT, rows)
            for unit in units:
                if unit.after is not None:
                    unit.after(tx, [p.record_id for p in unit.records])
        self._head_row = (head_id, head_hash, mac) if trusted else None

    def _chained(self, records: list[_Pending], head_id: int, head_hash: str) -> tuple[list[dict[str, Any]], int, str]:
        """The rows of ``records`` chained onto the head (each record given its id), and the head
        after them."""
        rows: list[dict[str, Any]] = []
        for pending in records:
            head_id += 1
            digest = self._key.record_hash_of(head_id, pending.fields, head_hash)
            row = dict(zip(_FIELDS, pending.values, strict=True))
            row.update(id=head_id, run_id=pending.run_id, person=pending.person, approved_by=pending.approved_by,
                       prev_hash=head_hash, hash=digest)  # fmt: skip
            rows.append(row)
            pending.record_id = head_id
            head_hash = digest
        return rows, head_id, head_hash

    # -- reading -------------------------------------------------------------------------

    async def records(
        self,
        *,
        tool: str | None = None,
        session: str | None = None,
        limit: int | None = None,
        after_id: int = 0,
        run_id: str | None = None,
        person: str | None = None,
        before_id: int | None = None,
        decision: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[AuditRecord]:
        """Records newest last; ``limit`` keeps the newest ``limit``. ``person``: only the records
        naming that person, behind the call or behind its approval. ``before_id``: only records
        older than that one (a page by key: a range on the id, however deep). ``decision``,
        ``since``, ``until`` (``ts`` within them, both ends kept): in the statement, so ``limit``
        counts only the records that pass them."""
        sql = _records_query(bool(tool), bool(session), bool(run_id), bool(limit), bool(person), before_id is not None,
                             decision=bool(decision), since=since is not None, until=until is not None)  # fmt: skip
        params = {"after_id": after_id, "tool": tool, "session": session, "run_id": run_id, "limit": int(limit or 0),
                  "person": person, "before_id": before_id, "decision": decision, "since": since, "until": until}  # fmt: skip
        rows = await self._db.fetch_all(sql, params)
        return [_to_record(row) for row in reversed(rows)]

    async def timestamps(self, tool: str, since: float) -> list[float]:
        """Times of executed calls of a tool since ``since``: seeds rate limits across processes."""
        rows = await self._db.fetch_all(_TIMESTAMPS, {"tool": tool, "since": since})
        return [float(row[0]) for row in rows]

    async def grant_uses(self, grant_id: str) -> int:
        row = await self._db.fetch_one(GRANT_USES, {"grant_id": grant_id})
        return int(row[0]) if row else 0

    async def verify(self) -> int:
        """Walk the chain; returns the number of records, raises AuditChainBroken at the first bad one."""
        return (await self.verify_chain()).records

    @property
    def verifying(self) -> VerifyProgress | None:
        """How far the verify running now has come (None: none runs)."""
        return self._verifying

    async def verify_chain(
        self, *, check_head: bool = True, incremental: bool = False, archive: Path | None = None
    ) -> ChainHead:
        """Walk the chain in one read snapshot (what any process appends meanwhile is not seen;
        the head read is the one of the same instant); raise AuditChainBroken at the first
        fault. ``check_head`` False leaves out the head (for a checkpoint, which says more about a
        cut). ``incremental``: walk on from where the last verify ended (its signed ``verified``
        mark) instead of from the first record; a full walk also checks every record before it.

        The records are read a batch at a time and each batch is checked on a worker thread, so
        the event loop runs on between batches; :attr:`verifying` says how far the walk is.
        A walk that ends intact moves the ``verified`` mark to where it ended.

        ``archive``: the directory of the segments ``archive()`` wrote; the records that left the
        database are walked there first, up to the database's ``archived`` mark, and the walk goes
        on in the database from it (always from there: an archive means a full walk). Without
        one, the walk begins at that mark, which vouches for the records before it."""
        incremental = incremental and archive is None
        progress = VerifyProgress(full=not incremental)
        self._verifying = progress
        try:
            async with self._db.snapshot() as snap:
                head = await self._walk(
                    snap, check_head=check_head, incremental=incremental, progress=progress, archive=archive
                )
        finally:
            if self._verifying is progress:
                self._verifying = None
        await self._save_mark(VERIFIED_MARK, head.records, head.last_hash)
        return head

    async def _walk(
        self, snap: Transaction, *, check_head: bool, incremental: bool, progress: VerifyProgress,
        archive: Path | None = None,
    ) -> ChainHead:  # fmt: skip
        try:
            marker = marker_of(await snap.fetch_one(_MARKER))
        except StoreError:
            marker = None
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
        keyed_from = marker.keyed_from
        if not marker.mac_holds(self._key) or (not self._plain_prefix and keyed_from != 1):
            raise AuditChainBroken(
                f"the audit chain marker was altered (it says the keyed chain begins at record {keyed_from})",
                record_id=1,
                hint="the log cannot be trusted; verify against a checkpoint and restore pincer.db from a backup",
            )
        head_row = await snap.fetch_one(_HEAD)
        progress.total = int(head_row[0]) if head_row else 0
        walk = ChainWalk(key=self._key, keyed_from=keyed_from, plain_head=marker.plain_head)
        marks = await self._marks(snap)
        start = marks.get(ARCHIVED_MARK)
        verified = marks.get(VERIFIED_MARK)
        if archive is not None:
            await self._walk_archive(archive, walk, start or (0, GENESIS_HASH), progress)
        if incremental and verified is not None and (start is None or verified[0] > start[0]):
            start = verified
        if start is not None and start[0] > 0:
            await self._resume(snap, walk, *start)
        progress.checked = progress.start = walk.count
        async for batch in snap.batches(_ROWS_AFTER, {"after_id": walk.count}, size=VERIFY_BATCH_ROWS):
            await self._check_off_loop(walk, batch)
            progress.checked = walk.count
        walk.finish()
        if check_head:
            self._check_head(marker, head_row, walk.count, walk.prev)
        return ChainHead(records=walk.count, last_hash=walk.prev, keyed_from=keyed_from, key_id=self._key.key_id)

    async def _check_off_loop(self, walk: ChainWalk, batch: list[Any]) -> None:
        """Walk on over ``batch`` away from the event loop: a walk of 100,000 records would hold
        every other request for its whole length on the loop (1.45 s at 50,000), and on a thread
        it still takes the GIL from the loop for most of that time (every handover waits out the
        interpreter's switch interval: an echo call's p99 went 9.5x up on SQLite). So the chain
        values are computed in a worker process; a thread only if no process can be started."""
        if self._walk_in_process:
            try:
                verdict = await anyio.to_process.run_sync(
                    check_batch, self._raw_key, walk.keyed_from, walk.plain_head, walk.count, walk.prev, batch,
                    cancellable=True,
                )  # fmt: skip
            except (OSError, BrokenWorkerProcess) as exc:
                logger.warning("the audit chain is verified on a thread: no worker process could be started (%s)", exc)
                self._walk_in_process = False
            else:
                if verdict[0] == "broken":
                    message, _, hint = str(verdict[2]).partition("\0")
                    raise AuditChainBroken(message, record_id=verdict[1], hint=hint or None)
                walk.resume(verdict[1], str(verdict[2]))
                return
        await anyio.to_thread.run_sync(walk.check, batch)

    async def _marks(self, snap: Queries) -> dict[str, tuple[int, str]]:
        """The marks whose MAC holds; an altered one is a broken chain (it cannot be ignored: an
        ``archived`` mark is all that vouches for the records no longer in the database)."""
        found: dict[str, tuple[int, str]] = {}
        for name, last_id, last_hash, mac in await snap.fetch_all(_MARKS):
            if name not in (VERIFIED_MARK, ARCHIVED_MARK):
                continue
            if not self._key.matches(
                mac, self._key.mark_mac(name=name, last_id=int(last_id), last_hash=str(last_hash))
            ):
                raise AuditChainBroken(
                    f"the audit log's {name!r} mark was altered (it says record {last_id}): its MAC does not match",
                    record_id=max(int(last_id), 1),
                    hint="someone with write access to the database moved it; verify against the archive "
                    "(`pincer audit verify --archive DIR`) and restore pincer.db from a backup",
                )
            found[str(name)] = (int(last_id), str(last_hash))
        return found

    async def _resume(self, snap: Transaction, walk: ChainWalk, last_id: int, last_hash: str) -> None:
        """Start ``walk`` after record ``last_id`` of a mark, once that record is still the one
        the mark names (when it is still in the database)."""
        row = await snap.fetch_one(_HASH_OF, {"id": last_id})
        if row is not None and not self._key.matches(row[0], last_hash):
            raise AuditChainBroken(
                f"audit record {last_id} is not the one the log's mark names: it was rewritten",
                record_id=last_id,
                hint="restore pincer.db from a backup; `pincer audit verify` names the first bad record",
            )
        walk.resume(last_id, last_hash)

    async def _walk_archive(
        self, directory: Path, walk: ChainWalk, archived: tuple[int, str], progress: VerifyProgress
    ) -> None:
        """Walk the archive's records up to the ``archived`` mark; the segments past it hold
        records that are still in the database too (an archive cut short before its rows left)."""
        from pincer.store.audit_archive import read_archive

        archived_id, archived_hash = archived
        segments = await anyio.to_thread.run_sync(read_archive, directory, self._key)
        ends = segments[-1].last_id if segments else 0
        if ends < archived_id:
            raise AuditChainBroken(
                f"the audit archive ends at record {ends}, but the database's records begin after record "
                f"{archived_id}: the segments of records {ends + 1} to {archived_id} are missing",
                record_id=ends + 1,
                hint="restore the missing segment files into the archive directory from their copy",
            )
        for segment in segments:
            if segment.first_id > archived_id:
                break
            rows = await anyio.to_thread.run_sync(segment.rows_between, 0, archived_id)
            for start in range(0, len(rows), VERIFY_BATCH_ROWS):
                await anyio.to_thread.run_sync(walk.check, rows[start : start + VERIFY_BATCH_ROWS])
                progress.checked = walk.count
        if walk.count != archived_id or (archived_id and walk.prev != archived_hash):
            raise AuditChainBroken(
                f"the audit archive's record {archived_id} is not the one the database's archived mark names",
                record_id=max(archived_id, 1),
                hint="the archive is of another log, or was rewritten; restore it from its copy",
            )

    async def archive(self, directory: Path, *, before: float | None = None) -> ArchiveReport:
        """Move the oldest records (all, or those before the time ``before``) out of the database
        into signed segments in ``directory`` (store/audit_archive.py). In this order: the chain
        is verified (a broken one is refused, nothing written); the segments are written durably
        and read back and walked; then one transaction moves the ``archived`` mark (guarded: from
        the mark read) and deletes exactly the records up to it. A failure anywhere before that
        transaction leaves every record in the database."""
        from pincer.store.audit_archive import SEGMENT_RECORDS, read_archive, write_segment

        head = await self.verify_chain()
        marks = await self._marks(self._db)
        was_id, was_hash = marks.get(ARCHIVED_MARK, (0, GENESIS_HASH))
        upto = head.records
        if before is not None:
            row = await self._db.fetch_one(_LAST_BEFORE, {"after_id": was_id, "before": before})
            upto = int(row[0]) if row and row[0] is not None else was_id
        if upto <= was_id:
            return ArchiveReport(first_id=was_id + 1, last_id=was_id, segments=())
        await anyio.to_thread.run_sync(functools.partial(directory.mkdir, parents=True, exist_ok=True))
        written: list[str] = []
        prev, pending = was_hash, []
        async with self._db.snapshot() as snap:
            async for batch in snap.batches(_ROWS_BETWEEN, {"after_id": was_id, "upto": upto}, size=VERIFY_BATCH_ROWS):
                pending.extend(batch)
                while len(pending) >= SEGMENT_RECORDS or (pending and pending[-1][0] == upto):
                    rows, pending = pending[:SEGMENT_RECORDS], pending[SEGMENT_RECORDS:]
                    path = await anyio.to_thread.run_sync(
                        functools.partial(write_segment, directory, self._key, rows, prev_hash=prev, now=time.time())
                    )
                    written.append(path.name)
                    prev = str(rows[-1][HASH_AT])
        # What is on disk, walked again from the mark it continues: only then do the rows leave.
        marker = marker_of(await self._db.fetch_one(_MARKER))
        walk = ChainWalk(key=self._key, keyed_from=marker.keyed_from if marker else 1,
                         plain_head=marker.plain_head if marker else GENESIS_HASH)  # fmt: skip
        walk.resume(was_id, was_hash)
        for segment in await anyio.to_thread.run_sync(read_archive, directory, self._key):
            if segment.last_id > was_id and segment.first_id <= upto:
                on_disk = await anyio.to_thread.run_sync(segment.rows_between, was_id, upto)
                await anyio.to_thread.run_sync(walk.check, on_disk)
        if walk.count != upto or walk.prev != prev:
            raise AuditChainBroken(
                f"the archive written to {directory} does not end at record {upto}",
                record_id=walk.count + 1,
                hint="check the directory is writable and not shared with another log; nothing left the database",
            )
        mac = self._key.mark_mac(name=ARCHIVED_MARK, last_id=upto, last_hash=prev)
        async with self._db.transaction(serial="pincer_audit_archive") as tx:
            if ARCHIVED_MARK in marks:
                tx.add(_MOVE_ARCHIVED, {"last_id": upto, "last_hash": prev, "made_at": time.time(), "mac": mac,
                                        "was_id": was_id, "was_hash": was_hash}, rows=1)  # fmt: skip
            else:
                tx.add(_SAVE_MARK, {"name": ARCHIVED_MARK, "last_id": upto, "last_hash": prev, "made_at": time.time(),
                                    "mac": mac}, rows=1)  # fmt: skip
            tx.add(_DELETE_ARCHIVED, {"after_id": was_id, "upto": upto})
        return ArchiveReport(first_id=was_id + 1, last_id=upto, segments=tuple(written))

    async def _archived_hash(self, record_id: int, archive: Path | None) -> tuple[str] | None:
        """The chain value of an archived record, from the archive (which verify_chain walked);
        None when the record was never archived (then it is simply gone)."""
        from pincer.store.audit_archive import read_archive

        archived = (await self._marks(self._db)).get(ARCHIVED_MARK)
        if archived is None or record_id > archived[0]:
            return None
        if archive is None:
            raise UsageError(
                f"audit record {record_id}, the checkpoint's last, was archived out of the database",
                hint="verify the checkpoint with the archive: pincer audit verify --checkpoint FILE --archive DIR",
            )
        for segment in await anyio.to_thread.run_sync(read_archive, archive, self._key):
            if segment.first_id <= record_id <= segment.last_id:
                rows = await anyio.to_thread.run_sync(segment.rows_between, record_id - 1, record_id)
                return (str(rows[0][HASH_AT]),) if rows else None
        return None

    async def _save_mark(self, name: str, last_id: int, last_hash: str) -> None:
        """Move mark ``name`` forward to ``last_id`` (never back)."""
        mac = self._key.mark_mac(name=name, last_id=last_id, last_hash=last_hash)
        try:
            await self._db.execute(_SAVE_MARK, {"name": name, "last_id": last_id, "last_hash": last_hash,
                                                "made_at": time.time(), "mac": mac})  # fmt: skip
        except StoreError as exc:  # a read-only database: the next verify walks more, no harm
            logger.debug("the audit log's %s mark was not saved: %s", name, exc)

    def _check_head(self, marker: ChainMarker, head: Sequence[Any] | None, count: int, prev: str) -> None:
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

    async def checkpoint(self) -> AuditCheckpoint:
        """A signed head of the log as it is now; refused (AuditChainBroken) for a broken chain."""
        head = await self.verify_chain()
        return sign_checkpoint(
            self._key, records=head.records, last_hash=head.last_hash, keyed_from=head.keyed_from, now=time.time()
        )

    async def verify_checkpoint(self, checkpoint: AuditCheckpoint, *, archive: Path | None = None) -> ChainHead:
        """Prove that no record up to ``checkpoint`` changed and none of them is gone.

        Raises CheckpointInvalid for a checkpoint this key did not sign, AuditChainBroken when the
        log is broken, shorter than the checkpoint, or differs from it at its last record. A
        checkpoint whose last record was archived needs the ``archive`` to be checked."""
        checkpoint.check_signature(self._key)
        head = await self.verify_chain(check_head=False, archive=archive)
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
            row = await self._db.fetch_one(_HASH_OF, {"id": checkpoint.last_id})
            if row is None:
                row = await self._archived_hash(checkpoint.last_id, archive)
            if row is None or not self._key.matches(row[0], checkpoint.last_hash):
                raise AuditChainBroken(
                    f"audit record {checkpoint.last_id} is not the one {made} saw: the log up to it was rewritten",
                    record_id=checkpoint.last_id,
                    hint="restore pincer.db from a backup",
                )
        return await self.verify_chain(archive=archive)  # the head too, now that the checkpoint's findings are out


async def _admitted(batch: list[_Pending | _Unit], tx: Transaction) -> tuple[list[_Pending], list[_Unit]]:
    """The batch's records and the units whose ``before`` admitted them (run here, in the open
    transaction). An exception of a unit's own (a delivery seen before) is its answer: kept in
    ``unit.refused``, and the unit writes nothing. A store error is the transaction's and goes up."""
    records: list[_Pending] = []
    units: list[_Unit] = []
    for item in batch:
        if isinstance(item, _Pending):
            records.append(item)
            continue
        item.refused = None
        if item.before is not None:
            try:
                await item.before(tx)
            except StoreError:
                raise
            except Exception as exc:  # noqa: BLE001 - the unit's own refusal: its answer
                item.refused = exc
                continue
        units.append(item)
        records.extend(item.records)
    return records, units


def _finish(batch: list[_Pending] | list[_Pending | _Unit]) -> None:
    for pending in batch:
        pending.done = True
        if pending.event is not None:
            pending.event.set()


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


def _to_record(row: Sequence[Any]) -> AuditRecord:
    (
        record_id, ts, session, caller, tool, kind, decision, reason, grant_id, outcome, error_code,
        error, args, effects, duration_ms, usage, idempotency_key, cached, approval_id, prev_hash, digest, run_id,
        person, approved_by,
    ) = row  # fmt: skip
    return AuditRecord(
        id=record_id, ts=ts, session=session, caller=caller, tool=tool, kind=kind, decision=decision,
        reason=reason, grant_id=grant_id, outcome=outcome, error_code=error_code, error=error,
        args=json.loads(args), effects=json.loads(effects), duration_ms=duration_ms,
        usage=json.loads(usage), idempotency_key=idempotency_key, cached=bool(cached),
        approval_id=approval_id, prev_hash=prev_hash, hash=digest, run_id=run_id, person=person,
        approved_by=approved_by,
    )  # fmt: skip


# A call that used its grant (and its rate limit): it ran, or it was let through and then
# cancelled by its caller (it may have run in part). One that never got past its approval (timed
# out, or its caller died waiting: outcome cancelled with those codes) used nothing.
_USED_SQL = "(outcome IN ('ok', 'error') OR (outcome = 'cancelled' AND error_code NOT IN ('approval_timeout', 'approval_gone')))"
# Executed calls of a tool since a time (what rate limits count).
_TIMESTAMPS = Sql(
    f"SELECT ts FROM audit WHERE tool = :tool AND ts >= :since AND kind = 'call' AND {_USED_SQL} "
    "AND cached = 0 AND decision = 'allow' ORDER BY ts"
)
GRANT_USES = Sql(
    f"SELECT COUNT(*) FROM audit WHERE grant_id = :grant_id AND kind = 'call' AND {_USED_SQL} AND cached = 0"
)


@cache
def _records_query(tool: bool, session: bool, run_id: bool, limit: bool, person: bool = False,
                   before: bool = False, *, decision: bool = False, since: bool = False, until: bool = False) -> Sql:  # fmt: skip
    """The SELECT of ``records()`` for the filters it has, newest first (one statement each).
    ``person``: the records naming the person, behind the call or behind its approval;
    ``before``: only ids under ``:before_id``; ``decision``, ``since``, ``until``: tested on the
    rows the id walk (or the ``(tool, ts)`` index) gives, no index of their own: each audit index
    is one more page written per commit, and a page stops at its limit."""
    filters = [c for c, on in (("tool", tool), ("session", session), ("run_id", run_id), ("decision", decision)) if on]
    ids = ["id > :after_id"] + (["id < :before_id"] if before else [])
    times = [f"{{plus}}ts {op} :{name}" for name, op, on in (("since", ">=", since), ("until", "<=", until)) if on]
    where = " AND ".join(ids + [f"{c} = :{c}" for c in filters] + [t.format(plus="") for t in times])
    cut = " LIMIT :limit" if limit else ""
    if not person:
        return Sql(f"SELECT {_COLUMNS} FROM audit WHERE {where} ORDER BY id DESC{cut}")
    # Exact, on the person column: the records made by the person, and those of the calls an
    # approval the person answered let through (its answer record names the person). Never
    # approved_by's channel:principal text: a session named like a person answers as
    # "rest:alice" too, and is not alice. Two reads joined, not one OR (which neither database
    # serves from an index without reading all the person's rows, or the table): the person's
    # own along ``audit_person`` newest first, cut at ``limit`` with no sort; the calls their
    # answers let through found by ``audit_approval`` from their answer records (a sort of those
    # calls only). On SQLite the other filters of that second read are written ``+column``
    # (SQLite's way to keep a term off an index): without statistics it would otherwise walk all
    # of a tool's or a session's records rather than the person's answers.
    mine = f"SELECT {_COLUMNS} FROM audit WHERE {where} AND person = :person ORDER BY id DESC{cut}"

    def approved(plus: str) -> str:
        kept = " AND ".join(ids + [f"{plus}{c} = :{c}" for c in filters] + [t.format(plus=plus) for t in times])
        return (
            f"SELECT {_COLUMNS} FROM audit WHERE {kept} AND approved_by IS NOT NULL "
            "AND (person IS NULL OR person != :person) AND approval_id IN (SELECT approval_id FROM audit "
            f"WHERE person = :person AND kind = 'approval' AND approval_id IS NOT NULL) ORDER BY id DESC{cut}"
        )

    def both(plus: str) -> str:
        return (
            f"SELECT {_COLUMNS} FROM ({mine}) AS mine UNION ALL SELECT {_COLUMNS} FROM ({approved(plus)}) AS approved "
            f"ORDER BY id DESC{cut}"
        )

    return Sql(both("+"), postgresql=both(""))
