"""Approval requests: an ``ask`` becomes a persisted request that a person answers.

Approvals are data. The call that asked waits on ``wait``; an answer may come from this process
(REST, MCP elicitation) which wakes the waiter at once, or from another process (the CLI),
which the waiter sees by polling the database.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import anyio

from pincer.core.errors import ApprovalTimeout, StoreError, UsageError

__all__ = ["Answer", "ApprovalStatus", "ApprovalRequest", "ApprovalStore", "APPROVAL_POLL_INTERVAL_S"]

APPROVAL_POLL_INTERVAL_S = 0.2


class Answer(StrEnum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    DENY = "deny"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    DENY = "deny"
    EXPIRED = "expired"


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequest:
    """What the call will do, shown to the person who answers. Args are already redacted."""

    id: str
    created_at: float
    expires_at: float
    session: str
    tool: str
    args: Any
    effects: tuple[str, ...]
    hosts: tuple[str, ...]
    reason: str
    status: ApprovalStatus = ApprovalStatus.PENDING
    answered_at: float | None = None
    answered_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "session": self.session,
            "tool": self.tool,
            "args": self.args,
            "effects": list(self.effects),
            "hosts": list(self.hosts),
            "reason": self.reason,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "answered_at": self.answered_at,
            "answered_by": self.answered_by,
        }


class ApprovalStore:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._events: dict[str, anyio.Event] = {}

    def create(
        self,
        *,
        session: str,
        tool: str,
        args: Any,
        effects: tuple[str, ...],
        hosts: tuple[str, ...],
        reason: str,
        timeout_s: float,
    ) -> ApprovalRequest:
        now = time.time()
        request = ApprovalRequest(
            id=secrets.token_hex(4),
            created_at=now,
            expires_at=now + timeout_s,
            session=session,
            tool=tool,
            args=args,
            effects=effects,
            hosts=hosts,
            reason=reason,
        )
        self._execute(
            "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
            (
                request.id, now, request.expires_at, session, tool, json.dumps(args),
                json.dumps(list(effects)), json.dumps(list(hosts)), reason,
            ),
        )  # fmt: skip
        return request

    def get(self, approval_id: str) -> ApprovalRequest:
        row = self._conn.execute("SELECT * FROM approvals WHERE id = ?", (approval_id,)).fetchone()
        if row is None:
            raise UsageError(
                f"no approval request with id {approval_id!r}",
                hint="`pincer approvals list` shows the pending ones",
            )
        return _to_request(row)

    def list(self, *, status: ApprovalStatus | None = ApprovalStatus.PENDING) -> list[ApprovalRequest]:
        self.expire_overdue()
        if status is None:
            rows = self._conn.execute("SELECT * FROM approvals ORDER BY created_at").fetchall()
        else:
            rows = self._conn.execute(
                "SELECT * FROM approvals WHERE status = ? ORDER BY created_at", (status.value,)
            ).fetchall()
        return [_to_request(row) for row in rows]

    def list_pending(self) -> list[ApprovalRequest]:
        return self.list(status=ApprovalStatus.PENDING)

    def answer(self, approval_id: str, answer: Answer | str, *, by: str = "cli") -> ApprovalRequest:
        """Answer a pending request once; a second answer or an expired request is an error."""
        try:
            answer = Answer(answer)
        except ValueError:
            raise UsageError(
                f"unknown approval answer {answer!r}", hint="answer allow_once, allow_always or deny"
            ) from None
        current = self.get(approval_id)
        if current.status is ApprovalStatus.PENDING and current.expires_at < time.time():
            self.expire_overdue()
            current = self.get(approval_id)
        if current.status is not ApprovalStatus.PENDING:
            raise UsageError(
                f"approval {approval_id} is already {current.status.value}",
                hint="only pending requests can be answered; the call may have timed out",
            )
        cursor = self._execute(
            "UPDATE approvals SET status = ?, answered_at = ?, answered_by = ? WHERE id = ? AND status = 'pending'",
            (answer.value, time.time(), by, approval_id),
        )
        if cursor.rowcount != 1:
            raise UsageError(f"approval {approval_id} was answered by someone else first")
        event = self._events.get(approval_id)
        if event is not None:
            event.set()
        return self.get(approval_id)

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalRequest:
        """Wait for an answer; on timeout the request is marked expired and ApprovalTimeout raised."""
        event = self._events.setdefault(approval_id, anyio.Event())
        try:
            with anyio.move_on_after(timeout_s):
                while True:
                    request = self.get(approval_id)
                    if request.status is not ApprovalStatus.PENDING:
                        return request
                    with anyio.move_on_after(APPROVAL_POLL_INTERVAL_S):
                        await event.wait()
            self._execute(
                "UPDATE approvals SET status = 'expired' WHERE id = ? AND status = 'pending'", (approval_id,)
            )
            request = self.get(approval_id)
            if request.status is not ApprovalStatus.EXPIRED:
                return request  # answered in the last instant
            raise ApprovalTimeout(
                f"nobody answered approval {approval_id} for {request.tool} within {timeout_s:g} s",
                hint="answer sooner with `pincer approvals approve ID`, or raise approvals.timeout_s in config.toml",
            )
        finally:
            self._events.pop(approval_id, None)

    def expire_overdue(self) -> None:
        self._execute(
            "UPDATE approvals SET status = 'expired' WHERE status = 'pending' AND expires_at < ?", (time.time(),)
        )

    def _execute(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreError(f"the approvals table could not be updated: {exc}") from exc


def _to_request(row: tuple[Any, ...]) -> ApprovalRequest:
    (rid, created, expires, session, tool, args, effects, hosts, reason, status, answered_at, answered_by) = row
    return ApprovalRequest(
        id=rid,
        created_at=created,
        expires_at=expires,
        session=session,
        tool=tool,
        args=json.loads(args),
        effects=tuple(json.loads(effects)),
        hosts=tuple(json.loads(hosts)),
        reason=reason,
        status=ApprovalStatus(status),
        answered_at=answered_at,
        answered_by=answered_by,
    )
