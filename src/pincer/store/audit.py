"""The audit log: one SHA-256 hash-chained record per call, committed before the call returns.

Each record's hash covers its id, every field and the previous record's hash, so an altered,
deleted or reordered row breaks the chain at that row. ``audit_head`` keeps the last id and hash
in the same transaction, so a truncated tail is caught too.

Group commit: concurrent callers that reach the log in the same event-loop turn share one
transaction; nobody gets a result before the transaction holding its record has committed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel

from pincer.core.errors import AuditChainBroken, StoreError
from pincer.core.values import canonical_json

logger = logging.getLogger(__name__)

__all__ = ["AuditEntry", "AuditRecord", "AuditLog", "GENESIS_HASH"]

GENESIS_HASH = "0" * 64

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
    outcome: str  # ok | error | denied | pending | answered
    kind: str = "call"  # call | approval
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

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def _row_values(entry: AuditEntry, now: float) -> tuple[Any, ...]:
    return (
        entry.ts or now, entry.session, entry.caller, entry.tool, entry.kind, entry.decision, entry.reason,
        entry.grant_id, entry.outcome, entry.error_code, entry.error, _json(entry.args),
        _json(list(entry.effects)), round(entry.duration_ms, 3), _json(entry.usage),
        entry.idempotency_key, int(entry.cached), entry.approval_id,
    )  # fmt: skip


def _json(value: Any) -> str:
    # Empty values are most of what a record holds (no effects, no usage extras): skip the encoder.
    if not value and isinstance(value, dict | list):
        return "{}" if isinstance(value, dict) else "[]"
    return canonical_json(value)


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _chain_hash(record_id: int, values: tuple[Any, ...], prev_hash: str) -> str:
    payload = _COMPACT([record_id, prev_hash, *values])
    return hashlib.sha256(payload.encode()).hexdigest()


_MAX_APPEND_RETRIES = 100
# A lone committer still yields once every this many appends, to notice callers queueing up.
_PROBE_EVERY = 32
_INSERT = (
    f"INSERT INTO audit (id, {', '.join(_FIELDS)}, prev_hash, hash) "
    f"VALUES ({', '.join('?' * (len(_FIELDS) + 3))})"
)


class _Pending:
    __slots__ = ("values", "event", "record_id", "error", "done")

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values
        # Only a caller that waits on another's commit needs an event (made when it waits).
        self.event: anyio.Event | None = None
        self.record_id = 0
        self.error: BaseException | None = None
        self.done = False


class AuditLog:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._pending: list[_Pending] = []
        self._flushing = False
        self._crowded, self._alone = True, 0
        self._head_id, self._head_hash = 0, GENESIS_HASH
        self._load_head()

    async def append(self, entry: AuditEntry, *, gather: bool | None = True) -> int:
        """Record one entry; returns its id once the record is committed.

        ``gather`` lets the first caller yield once so that callers running in the same turn join
        its transaction; a caller that knows it is alone passes False and commits at once. None
        decides from what the last yields found: while they gathered others, keep yielding; once
        one found nobody, commit at once and yield again only every ``_PROBE_EVERY`` appends."""
        pending = _Pending(_row_values(entry, time.time()))
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
                        self._drain()
                        raise
                committed = self._drain()
            finally:
                self._flushing = False
            if gather:
                self._crowded, self._alone = committed > 1, 0
            else:
                self._alone += 1
        if pending.error is not None:
            raise StoreError(f"the audit record could not be written: {pending.error}") from pending.error
        return pending.record_id

    def _drain(self) -> int:
        committed = 0
        while self._pending:
            batch, self._pending = self._pending, []
            self._commit(batch)
            committed += len(batch)
        return committed

    def append_sync(self, entry: AuditEntry) -> int:
        """For synchronous callers (the CLI answering an approval)."""
        pending = _Pending(_row_values(entry, time.time()))
        self._commit([pending])
        if pending.error is not None:
            raise StoreError(f"the audit record could not be written: {pending.error}") from pending.error
        return pending.record_id

    def _commit(self, batch: list[_Pending]) -> None:
        """Append a batch, hashing each record onto the chain head.

        The head is cached: a record is inserted with the next id and the cached hash as its
        ``prev_hash``. Ids are the primary key, so if another process appended meanwhile the
        insert fails on that id, and the head is re-read and the record re-hashed. A batch of
        several records runs in one transaction that reads the head under the write lock."""
        conn = self._conn
        try:
            if len(batch) == 1:
                for _ in range(_MAX_APPEND_RETRIES):
                    try:
                        self._insert(batch[0])
                        break
                    except sqlite3.IntegrityError:
                        self._load_head()
                else:
                    raise sqlite3.OperationalError("the audit head kept moving under concurrent writers")
            else:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._load_head()
                    for pending in batch:
                        self._insert(pending)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    self._load_head()
                    raise
        except sqlite3.Error as exc:
            logger.error("audit commit failed: %s", exc)
            for pending in batch:
                pending.error = exc
        finally:
            for pending in batch:
                pending.done = True
                if pending.event is not None:
                    pending.event.set()

    def _insert(self, pending: _Pending) -> None:
        record_id = self._head_id + 1
        digest = _chain_hash(record_id, pending.values, self._head_hash)
        self._conn.execute(_INSERT, (record_id, *pending.values, self._head_hash, digest))
        pending.record_id = record_id
        self._head_id, self._head_hash = record_id, digest

    def _load_head(self) -> None:
        row = self._conn.execute("SELECT last_id, last_hash FROM audit_head WHERE one = 1").fetchone()
        self._head_id, self._head_hash = row if row else (0, GENESIS_HASH)

    # -- reading -------------------------------------------------------------------------

    def records(
        self,
        *,
        tool: str | None = None,
        session: str | None = None,
        limit: int | None = None,
        after_id: int = 0,
    ) -> list[AuditRecord]:
        """Records newest last; ``limit`` keeps the newest ``limit``."""
        clauses, params = ["id > ?"], [after_id]
        if tool:
            clauses.append("tool = ?")
            params.append(tool)
        if session:
            clauses.append("session = ?")
            params.append(session)
        sql = f"SELECT * FROM audit WHERE {' AND '.join(clauses)} ORDER BY id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        rows = self._conn.execute(sql, params).fetchall()
        return [_to_record(row) for row in reversed(rows)]

    def timestamps(self, tool: str, since: float) -> list[float]:
        """Times of executed calls of a tool since ``since``: seeds rate limits across processes."""
        rows = self._conn.execute(
            "SELECT ts FROM audit WHERE tool = ? AND ts >= ? AND kind = 'call' AND outcome IN ('ok', 'error') "
            "AND cached = 0 AND decision = 'allow' ORDER BY ts",
            (tool, since),
        ).fetchall()
        return [row[0] for row in rows]

    def grant_uses(self, grant_id: str) -> int:
        row = self._conn.execute(
            "SELECT COUNT(*) FROM audit WHERE grant_id = ? AND kind = 'call' AND outcome IN ('ok', 'error') "
            "AND cached = 0",
            (grant_id,),
        ).fetchone()
        return int(row[0])

    def verify(self) -> int:
        """Walk the chain; returns the number of records, raises AuditChainBroken at the first bad one."""
        prev, expected_id, count = GENESIS_HASH, 1, 0
        for row in self._iter_rows():
            record_id = row[0]
            values = tuple(row[1 : 1 + len(_FIELDS)])
            stored_prev, stored_hash = row[-2], row[-1]
            if record_id != expected_id:
                raise AuditChainBroken(
                    f"audit record {expected_id} is missing (next present is {record_id})",
                    record_id=expected_id,
                    hint="a record was deleted; the log cannot be trusted from this point",
                )
            if stored_prev != prev:
                raise AuditChainBroken(
                    f"audit record {record_id} does not follow record {record_id - 1} (previous hash differs)",
                    record_id=record_id,
                    hint="records were deleted, reordered or rewritten before this one",
                )
            if _chain_hash(record_id, values, prev) != stored_hash:
                raise AuditChainBroken(
                    f"audit record {record_id} was altered (its hash does not match its content)",
                    record_id=record_id,
                )
            prev, expected_id, count = stored_hash, expected_id + 1, count + 1
        head = self._conn.execute("SELECT last_id, last_hash FROM audit_head WHERE one = 1").fetchone()
        head_id, head_hash = head if head else (0, GENESIS_HASH)
        if head_id != count or head_hash != prev:
            raise AuditChainBroken(
                f"the audit log ends at record {count} but its head says {head_id}",
                record_id=count + 1,
                hint="records were removed from the end of the log",
            )
        return count

    def _iter_rows(self) -> Iterator[tuple[Any, ...]]:
        columns = ", ".join(("id", *_FIELDS, "prev_hash", "hash"))
        cursor = self._conn.execute(f"SELECT {columns} FROM audit ORDER BY rowid")
        while batch := cursor.fetchmany(1000):
            yield from batch


def _to_record(row: sqlite3.Row | tuple[Any, ...]) -> AuditRecord:
    (
        record_id, ts, session, caller, tool, kind, decision, reason, grant_id, outcome, error_code,
        error, args, effects, duration_ms, usage, idempotency_key, cached, approval_id, prev_hash, digest,
    ) = row  # fmt: skip
    return AuditRecord(
        id=record_id, ts=ts, session=session, caller=caller, tool=tool, kind=kind, decision=decision,
        reason=reason, grant_id=grant_id, outcome=outcome, error_code=error_code, error=error,
        args=json.loads(args), effects=json.loads(effects), duration_ms=duration_ms,
        usage=json.loads(usage), idempotency_key=idempotency_key, cached=bool(cached),
        approval_id=approval_id, prev_hash=prev_hash, hash=digest,
    )  # fmt: skip
