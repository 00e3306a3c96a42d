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

import json
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pincer.core.errors import RunNotFound, StoreError
from pincer.core.values import canonical_json
from pincer.store.owners import Owners, local_owners

__all__ = ["RunRow", "RunMessage", "RunStore", "RUN_STATUSES", "FINAL_STATUSES"]

RUN_STATUSES = ("running", "done", "failed", "budget_exceeded", "cancelled")
FINAL_STATUSES = frozenset(RUN_STATUSES) - {"running"}
_ROW = (
    "id, created_at, updated_at, ended_at, skill, params, message, trigger, session, provider, model, status, "
    "stop, error, usage, cost_usd, owner, cancel_requested"
)


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
        }


class RunStore:
    def __init__(self, conn: sqlite3.Connection, *, owners: Owners | None = None) -> None:
        """``owners``: the token a run started here is owned by, and whether another run's
        owner still runs (store/owners.py); the local one by default."""
        self._conn = conn
        self.owners = owners or local_owners()
        self._owner = self.owners.token  # read once: /proc is read for the start time

    def append_messages(self, run_id: str, messages: list[tuple[int, str, Mapping[str, Any], int | None]]) -> None:
        """Append (seq, role, body, audit_id) messages in one transaction (one commit per turn)."""
        if not messages:
            return
        now = time.time()
        rows = [(run_id, seq, now, role, canonical_json(dict(body)), audit_id) for seq, role, body, audit_id in messages]
        try:
            with self._conn:  # one BEGIN ... COMMIT
                self._conn.executemany(
                    "INSERT INTO run_messages (run_id, seq, ts, role, body, audit_id) VALUES (?, ?, ?, ?, ?, ?)", rows
                )
        except sqlite3.Error as exc:
            raise StoreError(f"the runs table could not be written: {exc}", hint="check that pincer.db is writable") from exc

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        try:
            return self._conn.execute(sql, params).rowcount
        except sqlite3.Error as exc:
            raise StoreError(f"the runs table could not be written: {exc}", hint="check that pincer.db is writable") from exc

    def create(
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
    ) -> None:
        now = time.time() if now is None else now
        self._write(
            f"INSERT INTO runs ({_ROW}) VALUES ({', '.join('?' * 18)})",
            (
                run_id, now, now, None, skill, canonical_json(dict(params)), message, trigger, session, provider, model,
                "running", None, None, "{}", None, self._owner, 0,
            ),
        )  # fmt: skip

    def update(
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
        sets: list[str] = ["updated_at = ?"]
        params: list[Any] = [now]
        if usage is not None:
            sets.append("usage = ?")
            params.append(canonical_json(dict(usage)))
        if cost_usd is not None:
            sets.append("cost_usd = ?")
            params.append(cost_usd)
        if status is not None:
            if status not in RUN_STATUSES:
                raise StoreError(f"unknown run status {status!r}")
            sets.append("status = ?")
            params.append(status)
            if status in FINAL_STATUSES:
                sets.append("ended_at = ?")
                params.append(now)
        if stop is not None:
            sets.append("stop = ?")
            params.append(stop)
        if error is not None:
            sets.append("error = ?")
            params.append(canonical_json(dict(error)))
        params.append(run_id)
        self._write(f"UPDATE runs SET {', '.join(sets)} WHERE id = ?", tuple(params))

    def append_message(self, run_id: str, seq: int, role: str, body: Mapping[str, Any], audit_id: int | None = None) -> None:
        self._write(
            "INSERT INTO run_messages (run_id, seq, ts, role, body, audit_id) VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, seq, time.time(), role, canonical_json(dict(body)), audit_id),
        )

    def request_cancel(self, run_id: str) -> RunRow:
        """Ask the run to stop (the loop polls this). Returns the row; RunNotFound if none."""
        row = self.get(run_id)
        if not row.is_final:
            self._write("UPDATE runs SET cancel_requested = 1, updated_at = ? WHERE id = ?", (time.time(), run_id))
        return self.get(run_id)

    def is_cancel_requested(self, run_id: str) -> bool:
        row = self._conn.execute("SELECT cancel_requested FROM runs WHERE id = ?", (run_id,)).fetchone()
        return bool(row and row[0])

    # -- reading -------------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRow:
        row = self._conn.execute(f"SELECT {_ROW} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(f"no run with id {run_id!r}", hint="`pincer runs list` shows the runs there are")
        return self._settle(_to_row(row), row[16])

    def messages(self, run_id: str, *, after_seq: int = -1) -> list[RunMessage]:
        rows = self._conn.execute(
            "SELECT seq, ts, role, body, audit_id FROM run_messages WHERE run_id = ? AND seq > ? ORDER BY seq",
            (run_id, after_seq),
        ).fetchall()
        return [RunMessage(seq=r[0], ts=r[1], role=r[2], body=json.loads(r[3]), audit_id=r[4]) for r in rows]

    def list(self, *, session: str | None = None, limit: int = 50) -> list[RunRow]:
        """Newest first."""
        sql = f"SELECT {_ROW} FROM runs"
        params: list[Any] = []
        if session is not None:
            sql += " WHERE session = ?"
            params.append(session)
        sql += " ORDER BY created_at DESC LIMIT ?"
        params.append(int(limit))
        return [self._settle(_to_row(row), row[16]) for row in self._conn.execute(sql, params).fetchall()]

    def _settle(self, row: RunRow, owner: str | None) -> RunRow:
        """A running run whose process is gone did not finish: say so, once, in the table too."""
        if row.status != "running" or self.owners.is_alive(owner):
            return row
        error = {"code": "run_orphaned", "message": "the process running this run exited before it finished"}
        self._write(
            "UPDATE runs SET status = 'failed', error = ?, ended_at = ?, updated_at = ? WHERE id = ? AND status = 'running'",
            (canonical_json(error), row.updated_at, time.time(), row.id),
        )
        return replace(row, status="failed", error=error, ended_at=row.updated_at)


def _to_row(row: tuple[Any, ...]) -> RunRow:
    (
        run_id, created_at, updated_at, ended_at, skill, params, message, trigger, session, provider, model, status,
        stop, error, usage, cost_usd, _owner, cancel_requested,
    ) = row  # fmt: skip
    return RunRow(
        id=run_id, created_at=created_at, updated_at=updated_at, ended_at=ended_at, skill=skill,
        params=json.loads(params), message=message, trigger=trigger, session=session, provider=provider,
        model=model, status=status, stop=stop, error=json.loads(error) if error else None,
        usage=json.loads(usage or "{}"), cost_usd=cost_usd, cancel_requested=bool(cancel_requested),
    )  # fmt: skip
