"""Trigger state: scheduled jobs, firings (and the persisted run queue), webhook deliveries, the
scheduler lease.

A firing goes ``queued`` -> ``starting`` (claimed by one process) -> ``started`` (handed to the
agent loop; its request is dropped then) -> how the run ended (``done``, ``failed``, ...), or
``error`` when it could not start. A webhook delivery and its firings are written in one
transaction, so an accepted delivery is never without its queued runs, and a delivery id is
stored once: a replay reads the answer the first one got.

Written once over the database seam (store/sql/), for SQLite and for PostgreSQL, where every
gateway on the database shares the queue. Its transactions are serial (``transaction(serial=
"triggers")``: one at a time across every process), so claiming queued firings never races; a
webhook delivery answered 202 is in the queue (committed) before the answer, so when the process
that accepted it dies, whichever process runs the queue next starts it. Another process
(``pincer cron add``) writes the same tables; the scheduler reads the jobs again on every tick.

One process leads the scheduler at a time: the holder of the database's lead
``triggers-leader`` (``Database.try_lead``: an advisory lock on a connection of its own on
PostgreSQL, an ``flock`` beside the file on SQLite), free the moment its holder dies. On
PostgreSQL a leader whose machine died or hangs keeps its connection (no FIN reaches the server),
but its instance's heartbeat stops (store/instances.py): the next gateway that finds the lead
taken by a stale instance ends that connection and takes it, within ``LEADER_HANDOVER_S``. The
lease row says who leads, for display. Each instant still fires once should two processes think
they lead for a moment (a hung one waking up): the scheduler moves a job's next run on with a
compare-and-set and only the process whose move it was fires it (``move_next_run``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pincer.core.errors import JobNotFound, StoreError, UsageError
from pincer.store.audit import AuditEntry, AuditLog
from pincer.store.instances import INSTANCE_STALE_S, Instances, instance_tag
from pincer.store.owners import Owners, local_owners
from pincer.store.sql import Database, Lead, Sql, Transaction

logger = logging.getLogger(__name__)

__all__ = [
    "TriggerStore", "JobRow", "FiringRow", "DeliveryRow", "DeliveryExists", "OPEN_STATES", "LEADER_HANDOVER_S",
]  # fmt: skip

# The longest a cron instant waits while the lead passes to another gateway of a shared store: the
# holder's heartbeat goes stale, then the next tick (each gateway's, every second) ends its
# connection and takes the lead; a few seconds more for a busy machine.
LEADER_HANDOVER_S = INSTANCE_STALE_S + 5.0
_LEAD = "triggers-leader"
_SERIAL = "triggers"  # every transaction of this store: one at a time across the processes

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
    def __init__(self, db: Database, *, owners: Owners | None = None, instances: Instances | None = None) -> None:
        """``owners``: the token this process leads and starts firings under, and whether
        another owner still runs (store/owners.py); the local one by default. ``instances``: on
        a shared store, who else is alive (a lead held by a dead machine is taken over)."""
        self._db = db
        self._instances = instances
        self.owners = owners or (instances.owners if instances is not None else local_owners())
        self._lead: Lead | None = None

    # -- jobs ----------------------------------------------------------------------------------

    async def jobs(self) -> list[JobRow]:
        return [_job(row) for row in await self._db.fetch_all(_JOBS)]

    async def job(self, name: str) -> JobRow | None:
        row = await self._db.fetch_one(_JOB, {"name": name})
        return _job(row) if row else None

    async def require_job(self, name: str) -> JobRow:
        job = await self.job(name)
        if job is None:
            known = ", ".join(j.name for j in (await self.jobs())[:20]) or "none yet"
            raise JobNotFound(f"no job named {name!r} (jobs: {known})", hint="`pincer cron list` shows the jobs")
        return job

    async def add_job(
        self, *, name: str, source: str, spec: Mapping[str, Any], spec_hash: str, next_run: float | None,
        paused: bool = False, now: float | None = None, replace: bool = False,
    ) -> None:  # fmt: skip
        now = time.time() if now is None else now
        added = await self._db.execute(_REPLACE_JOB if replace else _ADD_JOB, {
            "name": name, "source": source, "spec": _dumps(spec), "spec_hash": spec_hash, "paused": int(paused),
            "next_run": next_run, "created_at": now, "updated_at": now,
        })  # fmt: skip
        if added == 0:
            raise UsageError(
                f"a job named {name!r} exists already", hint=f"pick another name, or `pincer cron rm {name}` first"
            )

    async def move_next_run(self, name: str, *, due: float, to: float | None, **values: Any) -> bool:
        """Move a job's next run from ``due`` on to ``to`` (and set ``values`` with it), only if
        it still says ``due``: True for the one process whose move it was. Whoever moved an
        instant on is the one that fires it, so an instant fires once even when two processes
        thought they led at the same moment (a leader whose lock was lost under it)."""
        _check_state(values)
        sql = _move_next_run(tuple(sorted(values)))
        moved = await self._db.execute(sql, {**values, "next_run": to, "updated_at": time.time(), "name": name, "due": due})
        return moved == 1

    async def update_job(self, name: str, **values: Any) -> None:
        _check_state(values)
        if "spec" in values:
            values["spec"] = _dumps(values["spec"])
        if "paused" in values:
            values["paused"] = int(bool(values["paused"]))
        await self._db.execute(_update_job(tuple(sorted(values))), {**values, "updated_at": time.time(), "name": name})

    async def remove_job(self, name: str) -> bool:
        return await self._db.execute(_REMOVE_JOB, {"name": name}) > 0

    # -- firings -------------------------------------------------------------------------------

    async def insert_firings(self, firings: Iterable[FiringRow], *, delivery: DeliveryRow | None = None) -> None:
        """Firings (and the delivery they came with) in one transaction. Raises
        :class:`DeliveryExists` when the delivery id is stored already; nothing is written then."""
        async with self._db.transaction(serial=_SERIAL) as tx:
            if delivery is not None:
                await _insert_delivery(tx, delivery)
            tx.add_many(_INSERT_FIRING, [_firing_values(f) for f in firings])

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

        async def before(tx: Transaction) -> None:
            if delivery is not None:
                await _insert_delivery(tx, delivery)

        def after(tx: Transaction, ids: list[int]) -> None:
            tx.add_many(_INSERT_FIRING, [_firing_values(f, audit_id) for f, audit_id in zip(rows, ids, strict=True)])

        return await audit.append_with(entries, before=before, after=after)

    async def set_audit(self, firing_id: str, audit_id: int) -> None:
        await self._db.execute(_SET_AUDIT, {"audit_id": audit_id, "id": firing_id})

    async def claim_queued(self, owner: str, limit: int) -> list[FiringRow]:
        """Up to ``limit`` queued, audited firings, oldest first, now ``starting`` under ``owner``."""
        async with self._db.transaction(serial=_SERIAL) as tx:
            rows = await tx.fetch_all(_QUEUED, {"limit": int(limit)})
            tx.add_many(_CLAIM, [{"owner": owner, "id": row[0]} for row in rows])
        return [_firing(row, status="starting", owner=owner) for row in rows]

    async def claim(self, firing_id: str, owner: str) -> FiringRow | None:
        """One queued firing, now ``starting`` under ``owner``; None when it is not queued."""
        async with self._db.transaction(serial=_SERIAL) as tx:
            changed = await tx.execute(_CLAIM, {"owner": owner, "id": firing_id})
        return await self.firing(firing_id) if changed else None

    async def set_statuses(self, updates: Sequence[tuple[str, str, str | None, float | None]]) -> None:
        """Several firings' state moves in one transaction, in order: ``(firing_id, status,
        error, ended_at)``, status ``started`` (handed to the agent loop) or how its run ended
        (what :meth:`finish` writes for one)."""
        async with self._db.transaction(serial=_SERIAL) as tx:
            for firing_id, status, error, ended_at in updates:
                if status == "started":
                    tx.add(_STARTED, {"id": firing_id})
                else:
                    tx.add(_FINISH, {"status": status, "error": error,
                                     "ended_at": time.time() if ended_at is None else ended_at, "id": firing_id})  # fmt: skip

    async def finish(self, firing_id: str, status: str, error: str | None = None, *, now: float | None = None) -> None:
        await self._db.execute(
            _FINISH, {"status": status, "error": error, "ended_at": time.time() if now is None else now, "id": firing_id}
        )

    async def requeue(self, firing_id: str) -> None:
        await self._db.execute(_REQUEUE, {"id": firing_id})

    async def open_firings(self) -> list[FiringRow]:
        return [_firing(row) for row in await self._db.fetch_all(_OPEN)]

    async def unaudited(self) -> list[FiringRow]:
        return [_firing(row) for row in await self._db.fetch_all(_UNAUDITED)]

    async def open_count(self, *, job: str | None = None) -> int:
        row = await (self._db.fetch_one(_OPEN_COUNT) if job is None else self._db.fetch_one(_OPEN_COUNT_JOB, {"job": job}))
        return int(row[0]) if row else 0

    async def firing(self, firing_id: str) -> FiringRow | None:
        row = await self._db.fetch_one(_FIRING, {"id": firing_id})
        return _firing(row) if row else None

    async def firings(self, *, kind: str | None = None, name: str | None = None, limit: int = 100) -> list[FiringRow]:
        """Newest last (ties in time by id)."""
        rows = await self._db.fetch_all(_firings(bool(kind), bool(name)), {"kind": kind, "name": name, "limit": int(limit)})
        return [_firing(row) for row in reversed(rows)]

    async def audited_firing(self, tool: str, firing_id: str) -> int | None:
        """The audit record of a firing, if one was written (crash recovery: never write two)."""
        row = await self._db.fetch_one(_AUDITED, {"tool": tool, "key": firing_id})
        return int(row[0]) if row else None

    # -- deliveries ----------------------------------------------------------------------------

    async def delivery(self, hook: str, delivery_id: str) -> DeliveryRow | None:
        row = await self._db.fetch_one(_DELIVERY, {"hook": hook, "delivery_id": delivery_id})
        return _delivery(row) if row is not None else None

    async def record_delivery(self, delivery: DeliveryRow) -> DeliveryRow:
        """A delivery that started nothing (ignored); returns the stored row (the first one's
        when the id was there already)."""
        try:
            await self.insert_firings((), delivery=delivery)
        except DeliveryExists as exists:
            return exists.row
        return delivery

    async def prune_deliveries(self, before: float) -> int:
        return await self._db.execute(_PRUNE_DELIVERIES, {"before": before})

    # -- the scheduler's leader ------------------------------------------------------------------

    async def acquire_lease(self, owner: str) -> bool:
        """True while this process leads the scheduler (the lead is taken now if it is free, or
        held by a process known to be dead); the lease row then names ``owner``."""
        if self._lead is not None and not await self._lead.held():
            self._lead = None
            logger.warning("the scheduler's lead was lost")
            return False  # another process takes it at its next tick; this one tries again at its next
        if self._lead is None:
            tag = self._instances.tag if self._instances is not None else instance_tag(self.owners.token)
            stale = self._instances.stale_tags if self._instances is not None else None
            self._lead = await self._db.try_lead(_LEAD, tag=tag, stale=stale)
            if self._lead is None:
                return False
            logger.info("this process now runs the scheduler")
        await self._db.execute(_LEASE, {"owner": owner, "heartbeat": time.time()})
        return True

    async def lease_holder(self) -> tuple[str, float] | None:
        row = await self._db.fetch_one(_LEASE_HOLDER)
        return (str(row[0]), float(row[1])) if row else None

    async def release_lease(self, owner: str) -> None:
        try:
            await self._db.execute(_RELEASE_LEASE, {"owner": owner})
        finally:
            await self.close()

    async def close(self) -> None:
        """Let go of the lead, if held (the stores are closing)."""
        lead, self._lead = self._lead, None
        if lead is not None:
            await lead.release()


def _check_state(values: Mapping[str, Any]) -> None:
    unknown = set(values) - _JOB_STATE
    if unknown:
        raise ValueError(f"not job state: {sorted(unknown)}")  # a programming error, never user input


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


_JOBS = Sql(f"SELECT {', '.join(_JOB_COLUMNS)} FROM trigger_jobs ORDER BY name")
_JOB = Sql(f"SELECT {', '.join(_JOB_COLUMNS)} FROM trigger_jobs WHERE name = :name")
_JOB_INSERT = (
    "INSERT INTO trigger_jobs (name, source, spec, spec_hash, paused, next_run, created_at, updated_at) "
    "VALUES (:name, :source, :spec, :spec_hash, :paused, :next_run, :created_at, :updated_at)"
)
_ADD_JOB = Sql(f"{_JOB_INSERT} ON CONFLICT (name) DO NOTHING")
_REPLACE_JOB = Sql(
    f"{_JOB_INSERT} ON CONFLICT (name) DO UPDATE SET source = excluded.source, spec = excluded.spec, "
    "spec_hash = excluded.spec_hash, paused = excluded.paused, next_run = excluded.next_run, retry_at = NULL, "
    "attempt = 0, last_run = NULL, last_status = NULL, last_error = NULL, last_run_id = NULL, run_requested = NULL, "
    "created_at = excluded.created_at, updated_at = excluded.updated_at"
)
_REMOVE_JOB = Sql("DELETE FROM trigger_jobs WHERE name = :name")


@cache
def _update_job(columns: tuple[str, ...]) -> Sql:
    sets = "".join(f"{c} = :{c}, " for c in columns)
    return Sql(f"UPDATE trigger_jobs SET {sets}updated_at = :updated_at WHERE name = :name")


@cache
def _move_next_run(columns: tuple[str, ...]) -> Sql:
    sets = "".join(f", {c} = :{c}" for c in columns)
    return Sql(f"UPDATE trigger_jobs SET next_run = :next_run{sets}, updated_at = :updated_at WHERE name = :name AND next_run = :due")


_FIRING_SELECT = f"SELECT {', '.join(_FIRING_COLUMNS)} FROM trigger_firings"
_OPEN_STATES = "status IN ('queued', 'starting', 'started')"
_INSERT_FIRING = Sql(
    f"INSERT INTO trigger_firings ({', '.join(_FIRING_COLUMNS)}) VALUES ({', '.join(':' + c for c in _FIRING_COLUMNS)})"
)
_SET_AUDIT = Sql("UPDATE trigger_firings SET audit_id = :audit_id WHERE id = :id")
_QUEUED = Sql(f"{_FIRING_SELECT} WHERE status = 'queued' AND audit_id IS NOT NULL ORDER BY ts LIMIT :limit")
_CLAIM = Sql("UPDATE trigger_firings SET status = 'starting', owner = :owner WHERE id = :id AND status = 'queued'")
# A firing's state moves: started (set_statuses), or ended (finish, and set_statuses for several).
_STARTED = Sql("UPDATE trigger_firings SET status = 'started', request = NULL WHERE id = :id")
_FINISH = Sql(
    "UPDATE trigger_firings SET status = :status, error = :error, request = NULL, ended_at = :ended_at WHERE id = :id"
)
_REQUEUE = Sql("UPDATE trigger_firings SET status = 'queued', owner = NULL WHERE id = :id")
_OPEN = Sql(f"{_FIRING_SELECT} WHERE {_OPEN_STATES} ORDER BY ts")
_UNAUDITED = Sql(f"{_FIRING_SELECT} WHERE audit_id IS NULL AND {_OPEN_STATES} ORDER BY ts")
_OPEN_COUNT = Sql(f"SELECT COUNT(*) FROM trigger_firings WHERE {_OPEN_STATES}")
_OPEN_COUNT_JOB = Sql(f"SELECT COUNT(*) FROM trigger_firings WHERE {_OPEN_STATES} AND job = :job")
_FIRING = Sql(f"{_FIRING_SELECT} WHERE id = :id")
_AUDITED = Sql("SELECT id FROM audit WHERE tool = :tool AND kind = 'trigger' AND idempotency_key = :key ORDER BY id LIMIT 1")


@cache
def _firings(kind: bool, name: bool) -> Sql:
    clauses = [f"{c} = :{c}" for c, on in (("kind", kind), ("name", name)) if on]
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return Sql(f"{_FIRING_SELECT}{where} ORDER BY ts DESC, id DESC LIMIT :limit")


_DELIVERY = Sql(
    "SELECT hook, delivery_id, received_at, event, status, response FROM trigger_deliveries "
    "WHERE hook = :hook AND delivery_id = :delivery_id"
)
_INSERT_DELIVERY = Sql(
    "INSERT INTO trigger_deliveries (hook, delivery_id, received_at, event, status, response) "
    "VALUES (:hook, :delivery_id, :received_at, :event, :status, :response) ON CONFLICT DO NOTHING"
)
_PRUNE_DELIVERIES = Sql("DELETE FROM trigger_deliveries WHERE received_at < :before")
_LEASE = Sql(
    "INSERT INTO trigger_lease (one, owner, heartbeat) VALUES (1, :owner, :heartbeat) "
    "ON CONFLICT (one) DO UPDATE SET owner = excluded.owner, heartbeat = excluded.heartbeat"
)
_LEASE_HOLDER = Sql("SELECT owner, heartbeat FROM trigger_lease WHERE one = 1")
_RELEASE_LEASE = Sql("DELETE FROM trigger_lease WHERE one = 1 AND owner = :owner")


async def _insert_delivery(tx: Transaction, delivery: DeliveryRow) -> None:
    """Insert ``delivery`` (inside the caller's transaction); DeliveryExists, with nothing
    written, when its id is stored already."""
    inserted = await tx.execute(_INSERT_DELIVERY, {
        "hook": delivery.hook, "delivery_id": delivery.delivery_id, "received_at": delivery.received_at,
        "event": delivery.event, "status": delivery.status, "response": _dumps(delivery.response),
    })  # fmt: skip
    if inserted == 0:
        row = await tx.fetch_one(_DELIVERY, {"hook": delivery.hook, "delivery_id": delivery.delivery_id})
        if row is None:
            raise StoreError("a webhook delivery vanished while it was recorded; send it again")
        raise DeliveryExists(_delivery(row))


def _delivery(row: Sequence[Any]) -> DeliveryRow:
    return DeliveryRow(
        hook=row[0], delivery_id=row[1], received_at=row[2], event=row[3], status=row[4], response=json.loads(row[5])
    )


def _firing_values(f: FiringRow, audit_id: int | None = None) -> dict[str, Any]:
    """The row's column values (``audit_id``: the record written with it, in place of its own)."""
    values = (
        f.id, f.ts, f.kind, f.name, f.fired_by, f.skill, f.session, _dumps(dict(f.params)),
        _dumps(f.payload) if f.payload is not None else None, f.run_id, f.status, f.error,
        _dumps(dict(f.request)) if f.request is not None else None, f.owner,
        f.audit_id if audit_id is None else audit_id, f.job, f.attempt, f.ended_at,
    )  # fmt: skip
    return dict(zip(_FIRING_COLUMNS, values, strict=True))
