"""Trigger state: scheduled jobs, firings (and the persisted run queue), webhook deliveries, the
scheduler lease.

A firing goes ``queued`` -> ``starting`` (claimed by one process) -> ``started`` (handed to the
agent loop; its request is dropped then) -> how the run ended (``done``, ``failed``, ...), or
``error`` when it could not start. A webhook delivery and its firings are written in one
transaction, so an accepted delivery is never without its queued runs, and a delivery id is
stored once: a replay reads the answer the first one got.

Every statement is short and runs on the caller's thread (the event loop's, like the rest of the
store). Another process (``pincer cron add``) opens its own connection; the scheduler reads the
jobs table again on every tick.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pincer.core.errors import JobNotFound, StoreError, UsageError
from pincer.store.audit import AuditEntry, AuditLog
from pincer.store.owners import Owners, local_owners

__all__ = ["TriggerStore", "JobRow", "FiringRow", "DeliveryRow", "DeliveryExists", "OPEN_STATES"]

OPEN_STATES = ("queued", "starting", "started")
_JOB_COLUMNS = (
    "name", "source", "spec", "spec_hash", "paused", "next_run", "retry_at", "attempt", "last_run", "last_status",
    "last_error", "last_run_id", "run_requested", "created_at", "updated_at",
)  # fmt: skip
_JOB_STATE = frozenset({"paused", "next_run", "retry_at", "attempt", "last_run", "last_status", "last_error",
                        "last_run_id", "run_requested", "spec", "spec_hash", "source"})  # fmt: skip
_FIRING_COLUMNS = (
    "id", "ts", "kind", "name", "fired_by", "skill", "session", "params", "payload", "run_id", "status", "error",
    "request", "owner", "audit_id", "job", "attempt", "ended_at",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRow:
    name: str
    source: str  # cli | import | config | skill:NAME
    spec: Mapping[str, Any]
    spec_hash: str
    paused: bool = False
    next_run: float | None = None
    retry_at: float | None = None
    attempt: int = 0
    last_run: float | None = None
    last_status: str | None = None
    last_error: str | None = None
    last_run_id: str | None = None
    run_requested: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class FiringRow:
    id: str
    ts: float
    kind: str
    name: str
    fired_by: str
    session: str
    run_id: str
    status: str
    skill: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    payload: Any = None
    error: str | None = None
    request: Mapping[str, Any] | None = None
    owner: str | None = None
    audit_id: int | None = None
    job: str | None = None
    attempt: int = 0
    ended_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _FIRING_COLUMNS if name not in ("request", "owner")}
        data["params"] = dict(self.params)
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class DeliveryRow:
    hook: str
    delivery_id: str
    received_at: float
    event: str | None
    status: int
    response: Mapping[str, Any]


class DeliveryExists(Exception):
    """The delivery id was stored already (a concurrent replay won the race): its row."""

    def __init__(self, row: DeliveryRow) -> None:
        super().__init__(row.delivery_id)
        self.row = row


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class TriggerStore:
    def __init__(self, conn: sqlite3.Connection, *, owners: Owners | None = None) -> None:
        """``owners``: the token this process leads and starts firings under, and whether
        another owner still runs (store/owners.py); the local one by default."""
        self._conn = conn
        self.owners = owners or local_owners()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _run(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreError(f"the trigger store failed: {exc}", hint="check that pincer.db is writable") from exc

    # -- jobs ----------------------------------------------------------------------------------

    def jobs(self) -> list[JobRow]:
        rows = self._run(f"SELECT {', '.join(_JOB_COLUMNS)} FROM trigger_jobs ORDER BY name").fetchall()
        return [_job(row) for row in rows]

    def job(self, name: str) -> JobRow | None:
        row = self._run(f"SELECT {', '.join(_JOB_COLUMNS)} FROM trigger_jobs WHERE name = ?", (name,)).fetchone()
        return _job(row) if row else None

    def require_job(self, name: str) -> JobRow:
        job = self.job(name)
        if job is None:
            known = ", ".join(j.name for j in self.jobs()[:20]) or "none yet"
            raise JobNotFound(f"no job named {name!r} (jobs: {known})", hint="`pincer cron list` shows the jobs")
        return job

    def add_job(
        self, *, name: str, source: str, spec: Mapping[str, Any], spec_hash: str, next_run: float | None,
        paused: bool = False, now: float | None = None, replace: bool = False,
    ) -> None:  # fmt: skip
        now = time.time() if now is None else now
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        try:
            self._conn.execute(
                f"{verb} INTO trigger_jobs (name, source, spec, spec_hash, paused, next_run, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (name, source, _dumps(spec), spec_hash, int(paused), next_run, now, now),
            )
        except sqlite3.IntegrityError:
            raise UsageError(
                f"a job named {name!r} exists already", hint=f"pick another name, or `pincer cron rm {name}` first"
            ) from None
        except sqlite3.Error as exc:
            raise StoreError(f"the trigger store failed: {exc}") from exc

    def move_next_run(self, name: str, *, due: float, to: float | None, **values: Any) -> bool:
        """Move a job's next run from ``due`` on to ``to`` (and set ``values`` with it), only if
        it still says ``due``: True for the one process whose move it was. Whoever moved an
        instant on is the one that fires it, so an instant fires once even when two processes
        thought they led at the same moment (a leader whose lock was lost under it)."""
        unknown = set(values) - _JOB_STATE
        if unknown:
            raise ValueError(f"not job state: {sorted(unknown)}")  # a programming error, never user input
        assignments = "".join(f", {key} = ?" for key in values)
        moved = self._run(
            f"UPDATE trigger_jobs SET next_run = ?{assignments}, updated_at = ? WHERE name = ? AND next_run = ?",
            (to, *values.values(), time.time(), name, due),
        ).rowcount
        return moved == 1

    def update_job(self, name: str, **values: Any) -> None:
        unknown = set(values) - _JOB_STATE
        if unknown:
            raise ValueError(f"not job state: {sorted(unknown)}")  # a programming error, never user input
        if "spec" in values:
            values["spec"] = _dumps(values["spec"])
        if "paused" in values:
            values["paused"] = int(bool(values["paused"]))
        assignments = ", ".join(f"{key} = ?" for key in values)
        self._run(
            f"UPDATE trigger_jobs SET {assignments}, updated_at = ? WHERE name = ?", (*values.values(), time.time(), name)
        )

    def remove_job(self, name: str) -> bool:
        return self._run("DELETE FROM trigger_jobs WHERE name = ?", (name,)).rowcount > 0

    # -- firings -------------------------------------------------------------------------------

    def insert_firings(self, firings: Iterable[FiringRow], *, delivery: DeliveryRow | None = None) -> None:
        """Firings (and the delivery they came with) in one transaction. Raises
        :class:`DeliveryExists` when the delivery id is stored already; nothing is written then."""
        try:
            with self._tx() as conn:
                if delivery is not None:
                    _insert_delivery(conn, delivery)
                conn.executemany(_INSERT_FIRING, [_firing_values(f) for f in firings])
        except sqlite3.Error as exc:
            raise StoreError(f"the trigger store could not record the firing: {exc}") from exc

    async def insert_audited(
        self, firings: Sequence[FiringRow], entries: Sequence[AuditEntry], *, audit: AuditLog,
        delivery: DeliveryRow | None = None,
    ) -> list[int]:  # fmt: skip
        """The firings, each with its audit record (``entries[i]`` for ``firings[i]``; the
        firing's ``audit_id`` names it), and the delivery they came with: one transaction, so one
        durable commit, which ``audit`` group-commits with whatever else it records in that turn
        (``audit`` is the log of this store's database). Returns the records' ids once committed.
        Raises :class:`DeliveryExists` when the delivery id is stored already: nothing of it is
        written then."""
        rows = list(firings)

        def before(conn: sqlite3.Connection) -> None:
            if delivery is not None:
                _insert_delivery(conn, delivery)

        def after(conn: sqlite3.Connection, ids: list[int]) -> None:
            conn.executemany(_INSERT_FIRING, [_firing_values(f, audit_id) for f, audit_id in zip(rows, ids, strict=True)])

        return await audit.append_with(entries, before=before, after=after)

    def set_audit(self, firing_id: str, audit_id: int) -> None:
        self._run("UPDATE trigger_firings SET audit_id = ? WHERE id = ?", (audit_id, firing_id))

    def claim_queued(self, owner: str, limit: int) -> list[FiringRow]:
        """Up to ``limit`` queued, audited firings, oldest first, now ``starting`` under ``owner``."""
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT {', '.join(_FIRING_COLUMNS)} FROM trigger_firings WHERE status = 'queued' "
                "AND audit_id IS NOT NULL ORDER BY ts LIMIT ?",
                (int(limit),),
            ).fetchall()
            conn.executemany(
                "UPDATE trigger_firings SET status = 'starting', owner = ? WHERE id = ? AND status = 'queued'",
                [(owner, row[0]) for row in rows],
            )
        return [_firing(row, status="starting", owner=owner) for row in rows]

    def claim(self, firing_id: str, owner: str) -> FiringRow | None:
        """One queued firing, now ``starting`` under ``owner``; None when it is not queued."""
        with self._tx() as conn:
            changed = conn.execute(
                "UPDATE trigger_firings SET status = 'starting', owner = ? WHERE id = ? AND status = 'queued'",
                (owner, firing_id),
            ).rowcount
        return self.firing(firing_id) if changed else None

    def set_statuses(self, updates: Sequence[tuple[str, str, str | None, float | None]]) -> None:
        """Several firings' state moves in one transaction, in order: ``(firing_id, status,
        error, ended_at)``, status ``started`` (handed to the agent loop) or how its run ended
        (what :meth:`finish` writes for one)."""
        try:
            with self._tx() as conn:
                for firing_id, status, error, ended_at in updates:
                    if status == "started":
                        conn.execute(_STARTED_SQL, (firing_id,))
                    else:
                        conn.execute(_FINISH_SQL, (status, error, time.time() if ended_at is None else ended_at, firing_id))
        except sqlite3.Error as exc:
            raise StoreError(f"the trigger store failed: {exc}", hint="check that pincer.db is writable") from exc

    def finish(self, firing_id: str, status: str, error: str | None = None, *, now: float | None = None) -> None:
        self._run(_FINISH_SQL, (status, error, time.time() if now is None else now, firing_id))

    def requeue(self, firing_id: str) -> None:
        self._run("UPDATE trigger_firings SET status = 'queued', owner = NULL WHERE id = ?", (firing_id,))

    def open_firings(self) -> list[FiringRow]:
        rows = self._run(
            f"SELECT {', '.join(_FIRING_COLUMNS)} FROM trigger_firings WHERE status IN ('queued', 'starting', 'started') "
            "ORDER BY ts"
        ).fetchall()
        return [_firing(row) for row in rows]

    def unaudited(self) -> list[FiringRow]:
        rows = self._run(
            f"SELECT {', '.join(_FIRING_COLUMNS)} FROM trigger_firings WHERE audit_id IS NULL "
            "AND status IN ('queued', 'starting', 'started') ORDER BY ts"
        ).fetchall()
        return [_firing(row) for row in rows]

    def open_count(self, *, job: str | None = None) -> int:
        params: tuple[str, ...] = ()
        if job is None:
            sql = "SELECT COUNT(*) FROM trigger_firings WHERE status IN ('queued', 'starting', 'started')"
        else:
            sql = "SELECT COUNT(*) FROM trigger_firings WHERE status IN ('queued', 'starting', 'started') AND job = ?"
            params = (job,)
        return int(self._run(sql, params).fetchone()[0])

    def firing(self, firing_id: str) -> FiringRow | None:
        row = self._run(f"SELECT {', '.join(_FIRING_COLUMNS)} FROM trigger_firings WHERE id = ?", (firing_id,)).fetchone()
        return _firing(row) if row else None

    def firings(self, *, kind: str | None = None, name: str | None = None, limit: int = 100) -> list[FiringRow]:
        """Newest last."""
        clauses, params = [], []
        if kind:
            clauses.append("kind = ?")
            params.append(kind)
        if name:
            clauses.append("name = ?")
            params.append(name)
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        rows = self._run(
            f"SELECT {', '.join(_FIRING_COLUMNS)} FROM trigger_firings {where}ORDER BY ts DESC, rowid DESC LIMIT ?",
            (*params, int(limit)),
        ).fetchall()
        return [_firing(row) for row in reversed(rows)]

    def audited_firing(self, tool: str, firing_id: str) -> int | None:
        """The audit record of a firing, if one was written (crash recovery: never write two)."""
        row = self._run(
            "SELECT id FROM audit WHERE tool = ? AND kind = 'trigger' AND idempotency_key = ? ORDER BY id LIMIT 1",
            (tool, firing_id),
        ).fetchone()
        return int(row[0]) if row else None

    # -- deliveries ----------------------------------------------------------------------------

    def delivery(self, hook: str, delivery_id: str) -> DeliveryRow | None:
        row = self._run(_DELIVERY_SQL, (hook, delivery_id)).fetchone()
        return _delivery(row) if row is not None else None

    def record_delivery(self, delivery: DeliveryRow) -> DeliveryRow:
        """A delivery that started nothing (ignored); returns the stored row (the first one's
        when the id was there already)."""
        try:
            self.insert_firings((), delivery=delivery)
        except DeliveryExists as exists:
            return exists.row
        return delivery

    def prune_deliveries(self, before: float) -> int:
        return self._run("DELETE FROM trigger_deliveries WHERE received_at < ?", (before,)).rowcount

    # -- the scheduler lease -------------------------------------------------------------------

    def acquire_lease(self, owner: str, *, now: float, stale_s: float, is_alive: Callable[[str], bool]) -> bool:
        """Take or renew the lease; True when ``owner`` holds it afterwards. A lease whose holder
        died, or that was not renewed for ``stale_s``, is taken over."""
        with self._tx() as conn:
            row = conn.execute("SELECT owner, heartbeat FROM trigger_lease WHERE one = 1").fetchone()
            if row is None or row[0] == owner or now - row[1] > stale_s or not is_alive(row[0]):
                conn.execute(
                    "INSERT INTO trigger_lease (one, owner, heartbeat) VALUES (1, ?, ?) "
                    "ON CONFLICT (one) DO UPDATE SET owner = excluded.owner, heartbeat = excluded.heartbeat",
                    (owner, now),
                )
                return True
        return False

    def lease_holder(self) -> tuple[str, float] | None:
        row = self._run("SELECT owner, heartbeat FROM trigger_lease WHERE one = 1").fetchone()
        return (str(row[0]), float(row[1])) if row else None

    def release_lease(self, owner: str) -> None:
        self._run("DELETE FROM trigger_lease WHERE one = 1 AND owner = ?", (owner,))


def _job(row: Sequence[Any]) -> JobRow:
    data = dict(zip(_JOB_COLUMNS, row, strict=True))
    data["spec"] = json.loads(data["spec"])
    data["paused"] = bool(data["paused"])
    return JobRow(**data)


def _firing(row: Sequence[Any], **override: Any) -> FiringRow:
    data = dict(zip(_FIRING_COLUMNS, row, strict=True))
    data["params"] = json.loads(data["params"]) if data["params"] else {}
    data["payload"] = json.loads(data["payload"]) if data["payload"] else None
    data["request"] = json.loads(data["request"]) if data["request"] else None
    data.update(override)
    return FiringRow(**data)


# A firing's state moves: started (set_statuses), or ended (finish, and set_statuses for several).
_STARTED_SQL = "UPDATE trigger_firings SET status = 'started', request = NULL WHERE id = ?"
_FINISH_SQL = "UPDATE trigger_firings SET status = ?, error = ?, request = NULL, ended_at = ? WHERE id = ?"

_DELIVERY_SQL = (
    "SELECT hook, delivery_id, received_at, event, status, response FROM trigger_deliveries "
    "WHERE hook = ? AND delivery_id = ?"
)

_INSERT_FIRING = (
    f"INSERT INTO trigger_firings ({', '.join(_FIRING_COLUMNS)}) VALUES ({', '.join('?' * len(_FIRING_COLUMNS))})"
)


def _insert_delivery(conn: sqlite3.Connection, delivery: DeliveryRow) -> None:
    """Insert ``delivery`` on ``conn`` (inside the caller's transaction); DeliveryExists, with
    nothing written, when its id is stored already."""
    try:
        conn.execute(
            "INSERT INTO trigger_deliveries (hook, delivery_id, received_at, event, status, response) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (delivery.hook, delivery.delivery_id, delivery.received_at, delivery.event, delivery.status,
             _dumps(delivery.response)),
        )  # fmt: skip
    except sqlite3.IntegrityError:
        row = conn.execute(_DELIVERY_SQL, (delivery.hook, delivery.delivery_id)).fetchone()
        if row is None:
            raise
        raise DeliveryExists(_delivery(row)) from None


def _delivery(row: Sequence[Any]) -> DeliveryRow:
    return DeliveryRow(
        hook=row[0], delivery_id=row[1], received_at=row[2], event=row[3], status=row[4], response=json.loads(row[5])
    )


def _firing_values(f: FiringRow, audit_id: int | None = None) -> tuple[Any, ...]:
    """The row's column values (``audit_id``: the record written with it, in place of its own)."""
    return (
        f.id, f.ts, f.kind, f.name, f.fired_by, f.skill, f.session, _dumps(dict(f.params)),
        _dumps(f.payload) if f.payload is not None else None, f.run_id, f.status, f.error,
        _dumps(dict(f.request)) if f.request is not None else None, f.owner,
        f.audit_id if audit_id is None else audit_id, f.job, f.attempt, f.ended_at,
    )  # fmt: skip
