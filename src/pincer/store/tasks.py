"""MCP Tasks, in the store: a call handed back to its client as a handle it polls.

A row is written before its handle leaves the gateway (the spec's MUST: a ``tasks/get`` for it
resolves at once, on any gateway of the store). Its states are the spec's: ``working``,
``input_required`` (waiting for an approval, named by ``approval_id``), and the terminal
``completed`` (``result``: the wire ``CallToolResult``), ``failed`` (``error``: a JSON-RPC error)
and ``cancelled``. ``owner`` is the process running the call while it runs (store/owners.py): a
``working`` task whose owner is gone is failed by whoever notices, never run again.

Every change is announced on :data:`TASK_CHANNEL` (payload: the task id) once committed, so a
gateway asked to cancel a call another one runs tells it at once (LISTEN/NOTIFY on PostgreSQL).

Ids are 192 random bits: unguessable, and the whole id is the only key.
"""

from __future__ import annotations

import builtins
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pincer.store.sql import Database, Sql

__all__ = ["TaskStatus", "Task", "TaskStore", "TASK_CHANNEL", "TERMINAL", "new_task_id"]

TASK_CHANNEL = "pincer_tasks"
_ID_BYTES = 24


class TaskStatus(StrEnum):
    WORKING = "working"
    INPUT_REQUIRED = "input_required"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})


def new_task_id() -> str:
    # Hex, as approvals' ids: a url-safe base64 id starts with "-" one time in 64, and
    # `pincer tasks show <id>` then took it for an option.
    return secrets.token_hex(_ID_BYTES)


@dataclass(frozen=True, kw_only=True, slots=True)
class Task:
    id: str
    session: str
    caller: str
    tool: str
    args: Mapping[str, Any]
    idempotency_key: str | None
    status: TaskStatus
    status_message: str | None
    approval_id: str | None
    result: Mapping[str, Any] | None
    error: Mapping[str, Any] | None
    owner: str | None
    cancel_requested: bool
    created_at: float
    updated_at: float
    expires_at: float
    ttl_ms: int
    poll_ms: int
    person: str | None = None  # the person whose call it is (their token made it): its rerun is theirs

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        """What the CLI and REST show (the arguments as the approval shows them: redacted)."""
        return {
            "id": self.id,
            "status": self.status.value,
            "status_message": self.status_message,
            "session": self.session,
            "caller": self.caller,
            "tool": self.tool,
            "approval_id": self.approval_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "expires_at": self.expires_at,
            "result": self.result,
            "error": self.error,
            "person": self.person,
        }


_COLUMNS = (
    "id, session, caller, tool, args, idempotency_key, status, status_message, approval_id, result, error, owner, "
    "cancel_requested, created_at, updated_at, expires_at, ttl_ms, poll_ms, person"
)
_CREATE = Sql(
    f"INSERT INTO tasks ({_COLUMNS}) VALUES (:id, :session, :caller, :tool, :args, :idempotency_key, :status, "
    ":status_message, :approval_id, NULL, NULL, :owner, 0, :now, :now, :expires_at, :ttl_ms, :poll_ms, :person)"
)
_GET = Sql(f"SELECT {_COLUMNS} FROM tasks WHERE id = :id")
_LIVE_OF = Sql("SELECT COUNT(*) FROM tasks WHERE session = :session AND status IN ('working', 'input_required')")
_OLDEST_LIVE_OF = Sql(
    "SELECT MIN(created_at) FROM tasks WHERE session = :session AND status IN ('working', 'input_required')"
)
_LIST = Sql(f"SELECT {_COLUMNS} FROM tasks ORDER BY created_at DESC LIMIT :limit")
_LIST_OF = Sql(f"SELECT {_COLUMNS} FROM tasks WHERE session = :session ORDER BY created_at DESC LIMIT :limit")
# One page of a session's live tasks, newest first, after the (created_at, id) a cursor names.
_PAGE_OF = Sql(
    f"SELECT {_COLUMNS} FROM tasks WHERE session = :session AND expires_at >= :now "
    "AND (:first = 1 OR created_at < :created_at OR (created_at = :created_at AND id < :id)) "
    "ORDER BY created_at DESC, id DESC LIMIT :limit"
)
_WAITING = Sql(f"SELECT {_COLUMNS} FROM tasks WHERE status = 'input_required' ORDER BY created_at")
_RUNNING = Sql(f"SELECT {_COLUMNS} FROM tasks WHERE status = 'working'")
# Taking a waiting task to run it: only one gateway's UPDATE changes the row.
_CLAIM = Sql(
    "UPDATE tasks SET status = 'working', owner = :owner, status_message = :message, updated_at = :now "
    "WHERE id = :id AND status = 'input_required' AND approval_id = :approval_id AND cancel_requested = 0"
)
_WAIT = Sql(
    "UPDATE tasks SET status = 'input_required', approval_id = :approval_id, status_message = :message, "
    "owner = NULL, updated_at = :now WHERE id = :id AND status = 'working' AND owner = :owner"
)
_FINISH = Sql(
    "UPDATE tasks SET status = :status, result = :result, error = :error, status_message = :message, owner = NULL, "
    "updated_at = :now WHERE id = :id AND status IN ('working', 'input_required')"
)
_FINISH_OWNED = Sql(
    "UPDATE tasks SET status = :status, result = :result, error = :error, status_message = :message, owner = NULL, "
    "updated_at = :now WHERE id = :id AND status = 'working' AND owner = :owner"
)
_FINISH_WAITING = Sql(
    "UPDATE tasks SET status = :status, result = :result, error = :error, status_message = :message, owner = NULL, "
    "updated_at = :now WHERE id = :id AND status = 'input_required' AND approval_id = :approval_id"
)
_REQUEST_CANCEL = Sql(
    "UPDATE tasks SET cancel_requested = 1, updated_at = :now WHERE id = :id AND status IN ('working', 'input_required')"
)
_PRUNE = Sql("DELETE FROM tasks WHERE expires_at < :now")


class TaskStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self,
        *,
        session: str,
        caller: str,
        tool: str,
        args: Mapping[str, Any],
        idempotency_key: str | None,
        status: TaskStatus,
        status_message: str | None,
        approval_id: str | None,
        owner: str | None,
        ttl_ms: int,
        poll_ms: int,
        person: str | None = None,
    ) -> Task:
        task_id = new_task_id()
        now = time.time()
        async with self._db.transaction() as tx:
            tx.add(_CREATE, {
                "id": task_id, "session": session, "caller": caller, "tool": tool, "args": json.dumps(dict(args)),
                "idempotency_key": idempotency_key, "status": status.value, "status_message": status_message,
                "approval_id": approval_id, "owner": owner, "now": now, "expires_at": now + ttl_ms / 1000,
                "ttl_ms": ttl_ms, "poll_ms": poll_ms, "person": person,
            })  # fmt: skip
            tx.notify(TASK_CHANNEL, task_id)
        task = await self.get(task_id)
        assert task is not None  # written above, in a committed transaction
        return task

    async def get(self, task_id: str) -> Task | None:
        row = await self._db.fetch_one(_GET, {"id": task_id})
        return _to_task(row) if row is not None else None

    async def live_count(self, session: str) -> int:
        row = await self._db.fetch_one(_LIVE_OF, {"session": session})
        return int(row[0]) if row is not None else 0

    async def oldest_live(self, session: str) -> float | None:
        row = await self._db.fetch_one(_OLDEST_LIVE_OF, {"session": session})
        return float(row[0]) if row is not None and row[0] is not None else None

    async def list(self, *, session: str | None = None, limit: int = 100) -> builtins.list[Task]:
        if session is None:
            rows = await self._db.fetch_all(_LIST, {"limit": limit})
        else:
            rows = await self._db.fetch_all(_LIST_OF, {"session": session, "limit": limit})
        return [_to_task(row) for row in rows]

    async def page(
        self, session: str, *, after: tuple[float, str] | None = None, limit: int = 100
    ) -> builtins.list[Task]:
        """Up to ``limit`` of ``session``'s unexpired tasks, newest first, those older than
        ``after`` (the ``created_at`` and id of the last task of the page before)."""
        created_at, last_id = after if after is not None else (0.0, "")
        rows = await self._db.fetch_all(_PAGE_OF, {
            "session": session, "now": time.time(), "first": 1 if after is None else 0,
            "created_at": created_at, "id": last_id, "limit": limit,
        })  # fmt: skip
        return [_to_task(row) for row in rows]

    async def waiting(self) -> builtins.list[Task]:
        return [_to_task(row) for row in await self._db.fetch_all(_WAITING)]

    async def running(self) -> builtins.list[Task]:
        return [_to_task(row) for row in await self._db.fetch_all(_RUNNING)]

    async def claim(self, task_id: str, *, approval_id: str, owner: str, message: str) -> bool:
        """Take a task waiting on ``approval_id`` to run it here; False when another took it."""
        return await self._changed(
            _CLAIM, {"id": task_id, "approval_id": approval_id, "owner": owner, "message": message, "now": time.time()},
            task_id,
        ) == 1  # fmt: skip

    async def wait_for(self, task_id: str, *, approval_id: str, owner: str, message: str) -> bool:
        """A running task now waits for a person's answer to ``approval_id``."""
        return await self._changed(
            _WAIT, {"id": task_id, "approval_id": approval_id, "owner": owner, "message": message, "now": time.time()},
            task_id,
        ) == 1  # fmt: skip

    async def finish(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        result: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
        message: str | None = None,
        owner: str | None = None,
        approval_id: str | None = None,
    ) -> bool:
        """End a task once: ``owner`` given, only while that process runs it; ``approval_id``
        given, only while it waits on that approval; else from either unfinished state."""
        params: dict[str, Any] = {
            "id": task_id, "status": status.value, "message": message, "now": time.time(),
            "result": json.dumps(dict(result)) if result is not None else None,
            "error": json.dumps(dict(error)) if error is not None else None,
        }  # fmt: skip
        if owner is not None:
            sql, params["owner"] = _FINISH_OWNED, owner
        elif approval_id is not None:
            sql, params["approval_id"] = _FINISH_WAITING, approval_id
        else:
            sql = _FINISH
        return await self._changed(sql, params, task_id) == 1

    async def request_cancel(self, task_id: str) -> bool:
        return await self._changed(_REQUEST_CANCEL, {"id": task_id, "now": time.time()}, task_id) == 1

    async def prune(self) -> None:
        """Forget the tasks past their time to live (the spec lets a server discard them)."""
        await self._db.execute(_PRUNE, {"now": time.time()})

    def listen(self) -> Any:
        return self._db.listen(TASK_CHANNEL)

    async def _changed(self, sql: Sql, params: dict[str, Any], task_id: str) -> int:
        async with self._db.transaction() as tx:
            changed = await tx.execute(sql, params)
            if changed:
                tx.notify(TASK_CHANNEL, task_id)
        return changed


def _to_task(row: tuple[Any, ...]) -> Task:
    (
        tid, session, caller, tool, args, key, status, message, approval_id, result, error, owner, cancel,
        created, updated, expires, ttl_ms, poll_ms, person,
    ) = row  # fmt: skip
    return Task(
        id=tid,
        session=session,
        caller=caller,
        tool=tool,
        args=json.loads(args),
        idempotency_key=key,
        status=TaskStatus(status),
        status_message=message,
        approval_id=approval_id,
        result=json.loads(result) if result is not None else None,
        error=json.loads(error) if error is not None else None,
        owner=owner,
        cancel_requested=bool(cancel),
        created_at=float(created),
        updated_at=float(updated),
        expires_at=float(expires),
        ttl_ms=int(ttl_ms),
        poll_ms=int(poll_ms),
        person=person,
    )
