"""Agent runs: one row per run, and its transcript one message per row.

A run row says what ran (skill, redacted params, trigger, session, provider and model), how it
stands (running, done, failed, budget_exceeded, cancelled, and which budget), what it used
(tokens, turns, tool calls, cost) and when. Messages are appended as the run goes, each with the
audit record of the tool call it answers, so a transcript is never rewritten. Everything here is
already redacted by the loop: no secret reaches this table.

The process running a run is recorded (``owner``); a run whose process is gone is reported
``failed`` ("its process exited") instead of running forever. Cancelling from another process
(``pincer runs cancel ID``) sets ``cancel_requested``, which the running loop polls.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from pincer.core.errors import RunNotFound, StoreError
from pincer.core.values import canonical_json
from pincer.store.owners import Owners, local_owners
from pincer.store.sql import Database, Sql

__all__ = ["RunRow", "RunMessage", "RunStore", "RUN_STATUSES", "FINAL_STATUSES"]

RUN_STATUSES = ("running", "done", "failed", "budget_exceeded", "cancelled")
FINAL_STATUSES = frozenset(RUN_STATUSES) - {"running"}
_COLUMNS = (
    "id", "created_at", "updated_at", "ended_at", "skill", "params", "message", "trigger", "session", "provider",
    "model", "status", "stop", "error", "usage", "cost_usd", "owner", "cancel_requested", "person",
)  # fmt: skip
_ROW = ", ".join(_COLUMNS)
_CREATE = Sql(f"INSERT INTO runs ({_ROW}) VALUES ({', '.join(':' + c for c in _COLUMNS)})")
_MESSAGE = Sql(
    "INSERT INTO run_messages (run_id, seq, ts, role, body, audit_id) VALUES (:run_id, :seq, :ts, :role, :body, :audit_id)"
)
_CANCEL = Sql("UPDATE runs SET cancel_requested = 1, updated_at = :now WHERE id = :id")
_CANCEL_REQUESTED = Sql("SELECT cancel_requested FROM runs WHERE id = :id")
_GET = Sql(f"SELECT {_ROW} FROM runs WHERE id = :id")
_MESSAGES = Sql(
    "SELECT seq, ts, role, body, audit_id FROM run_messages WHERE run_id = :run_id AND seq > :after ORDER BY seq"
)


@cache
def _list_query(*, session: bool, status: bool = False, skill: bool = False, before: bool = False) -> Sql:
    """Newest first by ``(created_at, id)``, the filters asked for in the WHERE, cut at ``:limit``:
    a page by key (``before``: the ``(created_at, id)`` a page ended on) neither skips nor repeats
    a run, and a filtered page reads only the runs it shows (and one more). Each filter has an
    index ``(column, created_at, id)`` (revision 0009) and ``runs_created`` is ``(created_at,
    id)``: whichever the database picks, it reads along it from the cursor with no sort; a second
    filter is tested on the rows that index gives."""
    clauses = [f"{c} = :{c}" for c, on in (("session", session), ("status", status), ("skill", skill)) if on]
    if before:
        clauses.append("created_at <= :before_at AND (created_at < :before_at OR id < :before_id)")
    where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
    return Sql(f"SELECT {_ROW} FROM runs {where}ORDER BY created_at DESC, id DESC LIMIT :limit")


_ORPHANED = Sql(
    "UPDATE runs SET status = 'failed', error = :error, ended_at = :ended_at, updated_at = :now "
    "WHERE id = :id AND status = 'running'"
)
_UPDATABLE = ("usage", "cost_usd", "status", "ended_at", "stop", "error")


@cache
def _update(columns: tuple[str, ...]) -> Sql:
    """The UPDATE of ``columns`` (besides updated_at): one statement per combination."""
    sets = ", ".join(f"{c} = :{c}" for c in ("updated_at", *columns))
    return Sql(f"UPDATE runs SET {sets} WHERE id = :id")


@dataclass(frozen=True, kw_only=True, slots=True)
class RunMessage:
    seq: int
    ts: float
    role: str
    body: Mapping[str, Any]
    audit_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {"seq": self.seq, "ts": self.ts, "role": self.role, **self.body}
        if self.audit_id is not None:
            data["audit_id"] = self.audit_id
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRow:
    id: str
    created_at: float
    updated_at: float
    ended_at: float | None
    skill: str | None
    params: Mapping[str, Any]
    message: str | None
    trigger: str
    session: str
    provider: str
    model: str
    status: str
    stop: str | None = None
    error: Mapping[str, Any] | None = None
    usage: Mapping[str, Any] = field(default_factory=dict)
    cost_usd: float | None = None
    cancel_requested: bool = False
    person: str | None = None  # the person on whose behalf it runs (their token started it)

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "stop": self.stop,
            "skill": self.skill,
            "params": dict(self.params),
            "message": self.message,
            "trigger": self.trigger,
            "session": self.session,
            "provider": self.provider,
            "model": self.model,
            "usage": dict(self.usage),
            "cost_usd": self.cost_usd,
            "error": dict(self.error) if self.error else None,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "ended_at": self.ended_at,
            "duration_s": round((self.ended_at or self.updated_at) - self.created_at, 3),
            "cancel_requested": self.cancel_requested,
            "person": self.person,
        }


class RunStore:
    def __init__(self, db: Database, *, owners: Owners | None = None) -> None:
        """``owners``: the token a run started here is owned by, and whether another run's
        owner still runs (store/owners.py); the local one by default."""
        self._db = db
        self.owners = owners or local_owners()
        self._owner = self.owners.token  # read once: /proc is read for the start time

    async def append_messages(
        self, run_id: str, messages: builtins.list[tuple[int, str, Mapping[str, Any], int | None]]
    ) -> None:
        """Append (seq, role, body, audit_id) messages in one transaction (one commit per turn)."""
        if not messages:
            return
        now = time.time()
        rows = [{"run_id": run_id, "seq": seq, "ts": now, "role": role, "body": canonical_json(dict(body)),
                 "audit_id": audit_id} for seq, role, body, audit_id in messages]  # fmt: skip
        await self._db.execute_many(_MESSAGE, rows)

    async def create(
        self,
        *,
        run_id: str,
        skill: str | None,
        params: Mapping[str, Any],
        message: str | None,
        trigger: str,
        session: str,
        provider: str,
        model: str,
        now: float | None = None,
        person: str | None = None,
    ) -> None:
        now = time.time() if now is None else now
        await self._db.execute(_CREATE, {
            "id": run_id, "created_at": now, "updated_at": now, "ended_at": None, "skill": skill,
            "params": canonical_json(dict(params)), "message": message, "trigger": trigger, "session": session,
            "provider": provider, "model": model, "status": "running", "stop": None, "error": None, "usage": "{}",
            "cost_usd": None, "owner": self._owner, "cancel_requested": 0, "person": person,
        })  # fmt: skip

    async def update(
        self,
        run_id: str,
        *,
        usage: Mapping[str, Any] | None = None,
        cost_usd: float | None = None,
        status: str | None = None,
        stop: str | None = None,
        error: Mapping[str, Any] | None = None,
    ) -> None:
        now = time.time()
        values: dict[str, Any] = {}
        if usage is not None:
            values["usage"] = canonical_json(dict(usage))
        if cost_usd is not None:
            values["cost_usd"] = cost_usd
        if status is not None:
            if status not in RUN_STATUSES:
                raise StoreError(f"unknown run status {status!r}")
            values["status"] = status
            if status in FINAL_STATUSES:
                values["ended_at"] = now
        if stop is not None:
            values["stop"] = stop
        if error is not None:
            values["error"] = canonical_json(dict(error))
        columns = tuple(c for c in _UPDATABLE if c in values)
        await self._db.execute(_update(columns), {**values, "updated_at": now, "id": run_id})

    async def append_message(
        self, run_id: str, seq: int, role: str, body: Mapping[str, Any], audit_id: int | None = None
    ) -> None:
        await self.append_messages(run_id, [(seq, role, body, audit_id)])

    async def request_cancel(self, run_id: str) -> RunRow:
        """Ask the run to stop (the loop polls this). Returns the row; RunNotFound if none."""
        row = await self.get(run_id)
        if not row.is_final:
            await self._db.execute(_CANCEL, {"now": time.time(), "id": run_id})
        return await self.get(run_id)

    async def is_cancel_requested(self, run_id: str) -> bool:
        row = await self._db.fetch_one(_CANCEL_REQUESTED, {"id": run_id})
        return bool(row and row[0])

    # -- reading -------------------------------------------------------------------------------

    async def get(self, run_id: str) -> RunRow:
        row = await self._db.fetch_one(_GET, {"id": run_id})
        if row is None:
            raise RunNotFound(f"no run with id {run_id!r}", hint="`pincer runs list` shows the runs there are")
        return await self._settle(_to_row(row), row[16])

    async def messages(self, run_id: str, *, after_seq: int = -1) -> builtins.list[RunMessage]:
        rows = await self._db.fetch_all(_MESSAGES, {"run_id": run_id, "after": after_seq})
        return [RunMessage(seq=r[0], ts=r[1], role=r[2], body=json.loads(r[3]), audit_id=r[4]) for r in rows]

    async def list(
        self,
        *,
        session: str | None = None,
        limit: int = 50,
        before: tuple[float, str] | None = None,
        status: str | None = None,
        skill: str | None = None,
    ) -> builtins.list[RunRow]:
        """Newest first (by ``created_at``, then ``id``), at most ``limit``; with ``before`` (the
        ``(created_at, id)`` of the last run a page showed), only the runs after it in that order;
        ``status``, ``skill``: only the runs that had them when read (a running run found orphaned
        on the way is returned as the failed run it is)."""
        asked = {"session": session, "status": status, "skill": skill}
        params: dict[str, Any] = {"limit": int(limit)} | {k: v for k, v in asked.items() if v is not None}
        if before is not None:
            params |= {"before_at": float(before[0]), "before_id": str(before[1])}
        sql = _list_query(session=session is not None, status=status is not None, skill=skill is not None,
                          before=before is not None)  # fmt: skip
        rows = await self._db.fetch_all(sql, params)
        return [await self._settle(_to_row(row), row[16]) for row in rows]

    async def _settle(self, row: RunRow, owner: str | None) -> RunRow:
        """A running run whose process is gone did not finish: say so, once, in the table too."""
        if row.status != "running" or await self.owners.is_alive(owner):
            return row
        error = {"code": "run_orphaned", "message": "the process running this run exited before it finished"}
        await self._db.execute(
            _ORPHANED, {"error": canonical_json(error), "ended_at": row.updated_at, "now": time.time(), "id": row.id}
        )
        return replace(row, status="failed", error=error, ended_at=row.updated_at)


def _to_row(row: tuple[Any, ...]) -> RunRow:
    (
        run_id, created_at, updated_at, ended_at, skill, params, message, trigger, session, provider, model, status,
        stop, error, usage, cost_usd, _owner, cancel_requested, person,
    ) = row  # fmt: skip
    return RunRow(
        id=run_id, created_at=created_at, updated_at=updated_at, ended_at=ended_at, skill=skill,
        params=json.loads(params), message=message, trigger=trigger, session=session, provider=provider,
        model=model, status=status, stop=stop, error=json.loads(error) if error else None,
        usage=json.loads(usage or "{}"), cost_usd=cost_usd, cancel_requested=bool(cancel_requested),
        person=person,
    )  # fmt: skip
