"""Approval requests: an ``ask`` becomes a persisted request that a person answers.

Approvals are data. The call that asked waits on ``wait``. Every change of a request (made,
answered, expired, used, its caller gone) is announced on the store's notifications, channel
:data:`APPROVAL_CHANNEL`, payload the request's id, once its transaction committed
(store/sql/database.py: LISTEN/NOTIFY across every process on PostgreSQL; on SQLite by id in
this process and as RESYNC for another process's commit, such as ``pincer approvals approve``).
A waiter wakes on its id, or RESYNC, at once; it also reads its row every
``APPROVAL_POLL_INTERVAL_S``, a fallback should a notification be missed all the same. A page
that shows the approvals follows the same channel instead of reading the table again and again.

An approval belongs to the call that asked. The waiting process is recorded (pid and start
time), so an approval whose caller is gone (the call timed out, was cancelled, or its process
died) is expired and cannot be answered: nobody would act on the answer.

The call that never ran is recorded too (outcome ``cancelled``, naming the approval), exactly
once. A caller that is still alive records its own call (:meth:`ApprovalStore.record_gone`). A
caller that died (SIGKILL: it wrote nothing) is recorded by whoever notices first that its
process is gone: a listing, an answer, a call that looks for a detached approval, or a pincer
opening on this home. Either way the record is written in the same transaction that sets the
approval's ``gone_recorded``, and only when that transaction is the one that set it, so several
processes (gateways on one store) noticing at once write one record.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any

import anyio

from pincer.core.acts import CANCELLED
from pincer.core.errors import ApprovalAnswered, ApprovalGone, ApprovalTimeout, StoreError, UsageError
from pincer.store.audit import AuditEntry, AuditLog
from pincer.store.owners import Owners, local_owners
from pincer.store.sql import RESYNC, Database, Sql

__all__ = [
    "Answer",
    "AnswerScope",
    "ApprovalStatus",
    "ApprovalRequest",
    "ApprovalStore",
    "APPROVAL_POLL_INTERVAL_S",
    "APPROVAL_CHANNEL",
]

# A waiter's read of its row without a notification: a fallback only (every answer, from any
# process, is notified), so it may be rare.
APPROVAL_POLL_INTERVAL_S = 2.0
APPROVAL_CHANNEL = "pincer_approvals"  # the store's notifications of a changed request (payload: its id)
# 128 random bits: an id never collides (a 32-bit one did among ~77,000 requests, the birthday
# bound) and cannot be guessed. The whole id is the lookup key everywhere; no prefix finds one.
APPROVAL_ID_BYTES = 16


class Answer(StrEnum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    DENY = "deny"


class AnswerScope(StrEnum):
    """How far an ``allow_always`` grant reaches. ``kind`` (the default): sessions of the kind
    that asked (main, or non-main); ``session``: only the session that asked; ``all``: every
    session, which the answerer must choose on purpose."""

    SESSION = "session"
    KIND = "kind"
    ALL = "all"


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
    session_kind: str = "main"
    detail: Mapping[str, Any] = field(default_factory=dict)  # what else the person is shown (exec: the command)
    status: ApprovalStatus = ApprovalStatus.PENDING
    answered_at: float | None = None
    answered_by: str | None = None
    scope: AnswerScope | None = None
    waiter: str | None = None
    binding: str | None = None  # the call a detached approval belongs to
    consumed_at: float | None = None
    run_id: str | None = None  # the agent run that made the call (None: a direct call)
    tainted_by: str | None = None  # for a tainted run: what tainted it (policy/taint.py), redacted
    caller: str | None = None  # the call's caller (cli, rest, mcp, agent, ...); None: asked before it was kept
    gone_recorded: bool = False  # the record of the call, which never ran, is written
    closed_at: float | None = None  # when it stopped waiting (answered, expired, its caller gone)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "session": self.session,
            "session_kind": self.session_kind,
            "tool": self.tool,
            "args": self.args,
            "effects": list(self.effects),
            "hosts": list(self.hosts),
            "reason": self.reason,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "answered_at": self.answered_at,
            "answered_by": self.answered_by,
            "scope": self.scope.value if self.scope else None,
            "detail": dict(self.detail),
            "run_id": self.run_id,
            "tainted_by": self.tainted_by,
            "caller": self.caller,
        }


# Named, not ``*``: a database whose columns were added in another order (put back to an older
# version by hand, then migrated again) reads the same.
_COLUMNS = (
    "id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, answered_at, answered_by, "
    "session_kind, scope, detail, waiter, binding, consumed_at, run_id, tainted_by, caller, gone_recorded, closed_at"
)
_CREATE = Sql(
    "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
    "session_kind, detail, waiter, run_id, tainted_by, caller) VALUES (:id, :created_at, :expires_at, :session, "
    ":tool, :args, :effects, :hosts, :reason, 'pending', :session_kind, :detail, :waiter, :run_id, :tainted_by, :caller)"
)
_GET = Sql(f"SELECT {_COLUMNS} FROM approvals WHERE id = :id")
_PENDING_IDS = Sql("SELECT id, session FROM approvals WHERE status = 'pending' ORDER BY created_at, id")
_ALL = Sql(f"SELECT {_COLUMNS} FROM approvals ORDER BY created_at")
_BY_STATUS = Sql(f"SELECT {_COLUMNS} FROM approvals WHERE status = :status ORDER BY created_at")
_ANSWER = Sql(
    "UPDATE approvals SET status = :status, answered_at = :answered_at, answered_by = :answered_by, scope = :scope, "
    "closed_at = :answered_at WHERE id = :id AND status = 'pending'"
)
# Every change that ends a request's wait sets ``closed_at`` with its status: the answered list
# is read by it, newest first, through an index (revision 0008).
_EXPIRE = Sql("UPDATE approvals SET status = 'expired', closed_at = :now WHERE id = :id AND status = 'pending'")
_EXPIRE_OVERDUE = Sql(
    "UPDATE approvals SET status = 'expired', closed_at = expires_at WHERE status = 'pending' AND expires_at < :now "
    "RETURNING id"
)
_WAITING = Sql(f"SELECT {_COLUMNS} FROM approvals WHERE status = 'pending' AND waiter IS NOT NULL")
_DETACH = Sql("UPDATE approvals SET waiter = NULL, binding = :binding WHERE id = :id")
_DETACHED = Sql(
    f"SELECT {_COLUMNS} FROM approvals WHERE binding = :binding AND consumed_at IS NULL AND status != 'expired' "
    "ORDER BY created_at DESC LIMIT 1"
)
_CONSUME = Sql("UPDATE approvals SET consumed_at = :now WHERE id = :id AND consumed_at IS NULL")
# Set by whoever records the call of an approval that never ran: the caller itself (which
# also expires a request still pending), or the first process that finds the caller dead.
_CLAIM_GONE = Sql(
    "UPDATE approvals SET gone_recorded = 1, status = CASE WHEN status = 'pending' THEN 'expired' ELSE status END, "
    "closed_at = CASE WHEN status = 'pending' THEN :now ELSE closed_at END WHERE id = :id AND gone_recorded = 0"
)
_CLAIM_ORPHAN = Sql(
    "UPDATE approvals SET gone_recorded = 1, status = 'expired', closed_at = :now "
    "WHERE id = :id AND status = 'pending' AND waiter = :waiter AND gone_recorded = 0"
)


class ApprovalStore:
    def __init__(self, db: Database, *, owners: Owners | None = None, audit: AuditLog | None = None) -> None:
        """``owners``: this process's owner token (a request's ``waiter``) and whether another
        waiter still runs (store/owners.py); the local one by default. ``audit``: the log of
        the same database, where the calls that never ran are recorded (without one, a request
        whose caller died is only expired)."""
        self._db = db
        self.owners = owners or local_owners()
        self._audit = audit

    async def create(
        self,
        *,
        session: str,
        tool: str,
        args: Any,
        effects: tuple[str, ...],
        hosts: tuple[str, ...],
        reason: str,
        timeout_s: float,
        session_kind: str = "main",
        detail: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        tainted_by: str | None = None,
        caller: str | None = None,
    ) -> ApprovalRequest:
        now = time.time()
        request = ApprovalRequest(
            id=secrets.token_hex(APPROVAL_ID_BYTES),
            created_at=now,
            expires_at=now + timeout_s,
            session=session,
            session_kind=session_kind,
            tool=tool,
            args=args,
            effects=effects,
            hosts=hosts,
            reason=reason,
            detail=dict(detail or {}),
            waiter=self.owners.token,
            run_id=run_id,
            tainted_by=tainted_by,
            caller=caller,
        )
        async with self._db.transaction() as tx:
            tx.add(_CREATE, {
                "id": request.id, "created_at": now, "expires_at": request.expires_at, "session": session,
                "tool": tool, "args": json.dumps(args), "effects": json.dumps(list(effects)),
                "hosts": json.dumps(list(hosts)), "reason": reason, "session_kind": session_kind,
                "detail": json.dumps(request.detail), "waiter": request.waiter, "run_id": run_id,
                "tainted_by": tainted_by, "caller": caller,
            })  # fmt: skip
            tx.notify(APPROVAL_CHANNEL, request.id)
        return request

    async def get(self, approval_id: str) -> ApprovalRequest:
        row = await self._db.fetch_one(_GET, {"id": approval_id})
        if row is None:
            raise UsageError(
                f"no approval request with id {approval_id!r}",
                hint="`pincer approvals list` shows the pending ones",
            )
        return _to_request(row)

    async def list(self, *, status: ApprovalStatus | None = ApprovalStatus.PENDING) -> builtins.list[ApprovalRequest]:
        await self.expire_overdue()
        if status is None:
            rows = await self._db.fetch_all(_ALL)
        else:
            rows = await self._db.fetch_all(_BY_STATUS, {"status": status.value})
        return [_to_request(row) for row in rows]

    async def page(
        self, *, status: ApprovalStatus | None, limit: int, after: tuple[float, str] | None = None,
        session: str | None = None, tool_glob: str | None = None,
    ) -> builtins.list[ApprovalRequest]:  # fmt: skip
        """At most ``limit`` requests, oldest first, after ``after`` (a ``(created_at, id)`` a page
        before ended on), of ``session`` and tools matching ``tool_glob`` when given: filtered and
        cut in the database (an index range on ``(created_at, id)``), so a page reads its rows,
        not the table."""
        await self.expire_overdue()
        sql = _page_query(status is not None, session is not None, after is not None, bool(tool_glob))
        params = {"status": status.value if status is not None else None, "session": session, "limit": limit,
                  "after_at": after[0] if after else None, "after_id": after[1] if after else None,
                  "tool": _like_of(tool_glob or "")}  # fmt: skip
        return [_to_request(row) for row in await self._db.fetch_all(sql, params)]

    async def list_pending(self) -> builtins.list[ApprovalRequest]:
        return await self.list(status=ApprovalStatus.PENDING)

    async def answered(
        self, *, limit: int, session: str | None = None, status: str | None = None, tool_glob: str | None = None,
        before: tuple[float, str] | None = None,
    ) -> builtins.list[ApprovalRequest]:  # fmt: skip
        """The newest ``limit`` answered or expired requests (newest first by ``closed_at``, then
        id), before ``before`` (a ``(closed_at, id)`` a page before ended on), filtered in the
        database and read along an index on ``([session,] closed_at, id)``: a page reads its rows,
        never the table sorted. ``tool_glob``: ``*`` and ``?`` as in a shell pattern, everything
        else literal."""
        sql = _answered_query(session is not None, status is not None, bool(tool_glob), before is not None)
        params = {"limit": limit, "session": session, "status": status, "tool": _like_of(tool_glob or ""),
                  "before_at": before[0] if before else None, "before_id": before[1] if before else None}  # fmt: skip
        return [_to_request(row) for row in await self._db.fetch_all(sql, params)]

    async def pending_ids(self) -> builtins.list[tuple[str, str]]:
        """(id, session) of every pending request: what a page compares to see a change (an
        index read of the open requests only)."""
        return [(str(i), str(s)) for i, s in await self._db.fetch_all(_PENDING_IDS)]

    def changes(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """The ids of requests as they change (made, answered, expired), or RESYNC: the store's
        notifications on :data:`APPROVAL_CHANNEL`, in place once entered; every process's
        changes on either database."""
        return self._db.listen(APPROVAL_CHANNEL)

    async def answer(
        self, approval_id: str, answer: Answer | str, *, by: str = "cli", scope: AnswerScope | str | None = None,
        record: Callable[[ApprovalRequest], AuditEntry] | None = None,
    ) -> ApprovalRequest:
        """Answer a pending request once. A second answer, an expired request, or one whose
        caller is gone is an error (ApprovalGone): nobody would act on it.

        ``record``: the audit record of the answer, made from the answered request, written in
        the answer's own transaction. The waiting call is told only after both are committed, so
        the log has the answer before the call it let through (it once raced: the call's record
        came first when the waiter woke before the answer's append committed)."""
        try:
            answer = Answer(answer)
        except ValueError:
            raise UsageError(
                f"unknown approval answer {answer!r}", hint="answer allow_once, allow_always or deny"
            ) from None
        try:
            scope = AnswerScope(scope) if scope is not None else None
        except ValueError:
            raise UsageError(f"unknown answer scope {scope!r}", hint="use session, kind or all") from None
        current = await self.get(approval_id)
        caller_gone = current.status is ApprovalStatus.PENDING and not await self.owners.is_alive(current.waiter)
        if caller_gone:
            await self._close_orphan(current)
            current = await self.get(approval_id)
        if current.status is ApprovalStatus.PENDING and current.expires_at < time.time():
            await self.expire(approval_id)
            current = await self.get(approval_id)
        if current.status is ApprovalStatus.EXPIRED or caller_gone:
            raise ApprovalGone(
                f"approval {approval_id} for {current.tool} has expired: the call that asked is gone "
                "(it timed out, was cancelled, or its process ended), so nobody would act on the answer",
                hint="run the call again; `pincer approvals list` shows what still waits",
            )
        if current.status is not ApprovalStatus.PENDING:
            raise ApprovalAnswered(
                f"approval {approval_id} was already answered ({current.status.value})",
                hint="only pending requests can be answered; `pincer approvals list` shows them",
            )
        now = time.time()
        params = {"status": answer.value, "answered_at": now, "answered_by": by,
                  "scope": scope.value if scope else None, "id": approval_id}  # fmt: skip
        if record is not None:
            answered = dataclasses.replace(
                current, status=ApprovalStatus(answer.value), answered_at=now, answered_by=by, scope=scope
            )
            changed = 0 if await self._claimed(record(answered), _ANSWER, params) is None else 1
            if changed:
                await self._db.notify(APPROVAL_CHANNEL, approval_id)
        else:
            async with self._db.transaction() as tx:
                changed = await tx.execute(_ANSWER, params)
                tx.notify(APPROVAL_CHANNEL, approval_id)
        if changed != 1:
            raise ApprovalAnswered(
                f"approval {approval_id} was answered by someone else first",
                hint="`pincer approvals show ID` shows who answered",
            )
        return await self.get(approval_id)

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalRequest:
        """Wait for an answer; on timeout the request is marked expired and ApprovalTimeout raised."""
        async with self._db.listen(APPROVAL_CHANNEL) as notes:  # in place before the first read
            with anyio.move_on_after(timeout_s):
                while True:
                    request = await self.get(approval_id)
                    if request.status is not ApprovalStatus.PENDING:
                        return request
                    with anyio.move_on_after(APPROVAL_POLL_INTERVAL_S):
                        async for changed in notes:
                            if changed in (approval_id, RESYNC):
                                break
        await self.expire(approval_id)
        request = await self.get(approval_id)
        if request.status is not ApprovalStatus.EXPIRED:
            return request  # answered in the last instant
        raise ApprovalTimeout(
            f"nobody answered approval {approval_id} for {request.tool} within {timeout_s:g} s",
            hint="answer sooner with `pincer approvals approve ID`, or raise approvals.timeout_s in config.toml",
        )

    async def detach(self, approval_id: str, binding: str) -> None:
        """The caller left on purpose and will call again: the request stays pending (until it
        expires) without a waiting process, bound to the call that made it."""
        await self._changed(_DETACH, {"binding": binding, "id": approval_id}, approval_id)

    async def find_detached(self, binding: str) -> ApprovalRequest | None:
        """The newest unconsumed, unexpired detached request for this call, if any."""
        await self.expire_overdue()
        row = await self._db.fetch_one(_DETACHED, {"binding": binding})
        return _to_request(row) if row is not None else None

    async def consume(self, approval_id: str) -> bool:
        """Use a detached request's answer once; False when another call used it first."""
        return await self._changed(_CONSUME, {"now": time.time(), "id": approval_id}, approval_id) == 1

    async def expire(self, approval_id: str) -> None:
        """Mark a pending request expired: its call is gone (timed out, cancelled, process ended)."""
        await self._changed(_EXPIRE, {"id": approval_id, "now": time.time()}, approval_id)

    async def expire_overdue(self) -> None:
        """Expire the pending requests whose waiting process is gone (recording their calls),
        then those past their time (a live waiter records its own call when it sees that)."""
        for row in await self._db.fetch_all(_WAITING):
            request = _to_request(row)
            if not await self.owners.is_alive(request.waiter):
                await self._close_orphan(request)
        async with self._db.transaction() as tx:
            for (expired,) in await tx.fetch_all(_EXPIRE_OVERDUE, {"now": time.time()}):
                tx.notify(APPROVAL_CHANNEL, str(expired))

    async def record_gone(self, approval_id: str, entry: AuditEntry) -> int | None:
        """Record the call that waited on ``approval_id`` and never ran (its caller cancelled it,
        or nobody answered in time), expiring the request if it still waits: the record's id,
        or None when the call's record was written already (by a process that took this caller
        for dead). Called by the caller itself."""
        ids = await self._claimed(entry, _CLAIM_GONE, {"id": approval_id, "now": time.time()})
        await self._db.notify(APPROVAL_CHANNEL, approval_id)
        return ids[0] if ids else None

    async def _close_orphan(self, request: ApprovalRequest) -> None:
        """Expire a pending request whose waiting process is gone, with the record of its call."""
        if self._audit is None:
            await self.expire(request.id)
            return
        entry = AuditEntry(
            session=request.session, caller=request.caller or "unknown", tool=request.tool, decision="ask",
            reason=f"the call waiting on approval {request.id} never ran: its process ({request.waiter}) ended "
            "before an answer", outcome=CANCELLED, error_code=ApprovalGone.code,
            error=f"the caller waiting on approval {request.id} is gone", args=request.args, effects=request.effects,
            approval_id=request.id, run_id=request.run_id,
        )  # fmt: skip
        claim = {"id": request.id, "waiter": request.waiter, "now": time.time()}
        if await self._claimed(entry, _CLAIM_ORPHAN, claim) is not None:
            await self._db.notify(APPROVAL_CHANNEL, request.id)

    async def _claimed(self, entry: AuditEntry, claim: Sql, params: dict[str, Any]) -> builtins.list[int] | None:
        if self._audit is None:
            raise StoreError(
                "the approval store records calls with an audit log it was not given (a programming error)"
            )
        return await self._audit.append_claimed([entry], claim, params)

    async def _changed(self, sql: Sql, params: dict[str, Any], approval_id: str) -> int:
        """Run one change of a request and announce it; the number of rows changed."""
        async with self._db.transaction() as tx:
            changed = await tx.execute(sql, params)
            if changed:
                tx.notify(APPROVAL_CHANNEL, approval_id)
        return changed


def _to_request(row: tuple[Any, ...]) -> ApprovalRequest:
    (
        rid, created, expires, session, tool, args, effects, hosts, reason, status, answered_at, answered_by,
        session_kind, scope, detail, waiter, binding, consumed_at, run_id, tainted_by, caller, gone_recorded,
        closed_at,
    ) = row  # fmt: skip
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
        session_kind=session_kind,
        scope=AnswerScope(scope) if scope else None,
        detail=json.loads(detail),
        waiter=waiter,
        binding=binding,
        consumed_at=consumed_at,
        run_id=run_id,
        tainted_by=tainted_by,
        caller=caller,
        gone_recorded=bool(gone_recorded),
        closed_at=closed_at,
    )


@cache
def _page_query(status: bool, session: bool, after: bool, tool: bool) -> Sql:
    """The SELECT of :meth:`ApprovalStore.page` for the filters it has (one statement each)."""
    clauses = ["status = :status"] if status else []
    clauses += ["session = :session"] if session else []
    clauses += ["tool LIKE :tool ESCAPE '\\'"] if tool else []
    clauses += ["(created_at > :after_at OR (created_at = :after_at AND id > :after_id))"] if after else []
    where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
    return Sql(f"SELECT {_COLUMNS} FROM approvals {where}ORDER BY created_at, id LIMIT :limit")


@cache
def _answered_query(session: bool, status: bool, tool: bool, before: bool = False) -> Sql:
    """The SELECT of :meth:`ApprovalStore.answered` for the filters it has (one statement each).
    A closed request has a ``closed_at`` (a pending one none); both sort keys descend, so one
    index scanned backwards serves the order, and the row-value ``<`` is a range on it."""
    clauses = ["closed_at IS NOT NULL"]
    clauses += ["session = :session"] if session else []
    clauses += ["status = :status"] if status else []
    clauses += ["tool LIKE :tool ESCAPE '\\'"] if tool else []
    clauses += ["(closed_at, id) < (:before_at, :before_id)"] if before else []
    return Sql(
        f"SELECT {_COLUMNS} FROM approvals WHERE {' AND '.join(clauses)} ORDER BY closed_at DESC, id DESC LIMIT :limit"
    )


def _like_of(glob: str) -> str:
    """A shell pattern's ``*`` and ``?`` as LIKE's ``%`` and ``_``; LIKE's own wildcards literal.
    (LIKE is case-insensitive for ASCII on SQLite; a tool filter is a name, so that is kept.)"""
    out = []
    for char in glob:
        if char in "%_\\":
            out.append("\\" + char)
        else:
            out.append({"*": "%", "?": "_"}.get(char, char))
    return "".join(out)
