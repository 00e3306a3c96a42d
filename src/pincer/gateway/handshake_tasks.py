"""MCP tasks in the handshake era (protocol 2025-11-25, where tasks are part of the core spec;
docs/tasks.md): the wire shape of the tasks :class:`~pincer.gateway.tasks.TaskReceiver` keeps.

One task engine, two wire shapes. A handshake-era ``tools/call`` with ``params.task`` is always
answered with a ``CreateTaskResult``: the call runs as a 2026-07-28 task-declaring call does
(the same store row, the same detached approval, the same resume on any gateway), and this module
maps the row to the 2025-11-25 names at the edge (``ttl``/``pollInterval``, ``tasks/result``
instead of ``result`` on ``tasks/get``, ``failed`` for a ``CallToolResult`` with ``isError``).

The SDK leaves ``tasks/*`` out of its 2025-11-25 surface, so these requests never reach a
handler: a middleware answers them (and a task-augmented ``tools/call``, whose
``CreateTaskResult`` the SDK's per-version sieve would refuse as a ``CallToolResult``) with
results it shapes itself, checked here against the SDK's own models for them.

Each change of a task's status is told to the connection that made it as
``notifications/tasks/status`` (gateway/task_status.py), off the store's task notifications, so a
change made on another gateway is told too.

An approval is the task's ``input_required`` state. ``tasks/result`` blocks until the task ends
(woken by the same notifications);
while it waits, a main session's client (or a person's whose roles hold the approval) is asked
the approval as an elicitation carrying ``io.modelcontextprotocol/related-task``, and the answer
goes through :meth:`TaskReceiver.update`, the path a 2026-07-28 ``tasks/update`` takes (so an
answer the chain would refuse is refused). A non-main session's client is never asked: a person
answers (CLI, REST, dashboard) and ``tasks/result`` returns when the task moves on.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from pincer.core.values import CallRequest
from pincer.elicitation import APPROVAL_DECISION_SCHEMA
from pincer.gateway.access import can_answer_approvals
from pincer.gateway.channel import McpChannel
from pincer.gateway.task_feed import TaskFeed
from pincer.gateway.task_status import TaskChanges
from pincer.gateway.tasks import MAX_TASK_ID_CHARS, TaskReceiver, task_summary
from pincer.gateway.tokens import GatewaySession
from pincer.store.tasks import Task, TaskStatus

logger = logging.getLogger(__name__)

__all__ = [
    "HandshakeTasks", "RELATED_TASK_META_KEY", "TASKS_CAPABILITY", "MAX_TTL_MS", "LIST_PAGE",
    "task_ttl", "task_id_of", "list_cursor", "next_cursor", "wire_task",
]  # fmt: skip

RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
# What a 2025-11-25 server declares in `initialize` when it takes task-augmented tools/call.
TASKS_CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())),
)
# The longest ttl a requester may ask for (a year); [tasks] ttl_s caps what it gets.
MAX_TTL_MS = 365 * 24 * 3600 * 1000
LIST_PAGE = 50  # tasks/list page size
MAX_CURSOR_CHARS = 512
# A blocked tasks/result (and tasks/cancel) wakes at its task's change notification (another
# process's change included: LISTEN/NOTIFY, SQLite's watch of other processes' commits); this
# bounds the wait should one be missed all the same (a fallback, never the way it is told).
RESULT_FALLBACK_S = 2.0
# How long tasks/cancel waits for the process running a call to stop it before marking the
# task cancelled itself (the spec: cancelled before the response).
CANCEL_WAIT_S = 5.0
# The JSON-RPC error a cancelled request answers with (what the SDK's 2025-era transport sends).
_REQUEST_CANCELLED = -32800
_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})


def task_ttl(params: Mapping[str, Any]) -> int | None:
    """The ``ttl`` of a ``tools/call``'s ``params.task`` (None: the receiver's); -32602 when
    ``task`` is not an object or ``ttl`` not a whole number of milliseconds in range."""
    task = params.get("task")
    if not isinstance(task, Mapping):
        raise MCPError(INVALID_PARAMS, f'params.task must be an object such as {{"ttl": 60000}}, got {_kind(task)}')
    unknown = sorted(str(key) for key in task if key != "ttl")
    if unknown:
        raise MCPError(INVALID_PARAMS, f"params.task has unknown fields {unknown}: it takes only ttl (milliseconds)")
    ttl = task.get("ttl")
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_TTL_MS:
        raise MCPError(
            INVALID_PARAMS,
            f"params.task.ttl must be a whole number of milliseconds from 0 to {MAX_TTL_MS}, got {_shown(ttl)}",
        )
    return ttl


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, int | float | bool | None) else _kind(value)
    return text if len(text) <= 40 else text[:40] + "..."


def task_id_of(params: Mapping[str, Any]) -> str:
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not 1 <= len(task_id) <= MAX_TASK_ID_CHARS:
        raise MCPError(
            INVALID_PARAMS, f"params.taskId must be a task id (a string of 1-{MAX_TASK_ID_CHARS} characters)"
        )
    return task_id


def list_cursor(params: Mapping[str, Any]) -> tuple[float, str] | None:
    cursor = params.get("cursor")
    if cursor is None:
        return None
    bad = MCPError(INVALID_PARAMS, "params.cursor is not a cursor this server gave: pass a nextCursor as it came")
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS:
        raise bad
    try:
        created_at, task_id = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except (ValueError, TypeError, UnicodeError, binascii.Error):
        raise bad from None
    if not isinstance(created_at, int | float) or isinstance(created_at, bool) or not isinstance(task_id, str):
        raise bad
    return float(created_at), task_id


def next_cursor(task: Task) -> str:
    return base64.urlsafe_b64encode(json.dumps([task.created_at, task.id]).encode()).decode("ascii")


def _status(task: Task) -> str:
    """The 2025-11-25 status: a tool call whose result is an error is ``failed`` there."""
    if task.status is TaskStatus.COMPLETED and (task.result or {}).get("isError"):
        return "failed"
    return task.status.value


def wire_task(task: Task) -> dict[str, Any]:
    """The task as a 2025-11-25 ``Task`` object: the extension's, under this era's names."""
    data = task_summary(task)
    data["ttl"], data["pollInterval"] = data.pop("ttlMs"), data.pop("pollIntervalMs")
    data["status"] = _status(task)
    return data


def _checked(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as it leaves, checked against the SDK's model of it (a shape bug fails here, as
    the SDK fails a malformed handler result, not at the client)."""
    model.model_validate(data, by_name=False)
    return data


class TaskGateway(Protocol):
    """What the middleware uses of its MCP gateway (``mcp_server.McpGateway``)."""

    @property
    def tasks(self) -> TaskReceiver: ...

    @property
    def task_feed(self) -> TaskFeed: ...

    def session_of(self, ctx: ServerRequestContext[Any, Any]) -> GatewaySession: ...

    def call_request(
        self,
        session: GatewaySession,
        name: str,
        arguments: Mapping[str, Any],
        channel: McpChannel,
        *,
        idempotency_key: str | None = None,
    ) -> CallRequest: ...

    @staticmethod
    def idempotency_key(params: Mapping[str, Any]) -> str | None: ...


class HandshakeTasks:
    """The middleware serving 2025-11-25 tasks on one MCP gateway."""

    def __init__(self, gateway: TaskGateway) -> None:
        self._gateway = gateway
        self.changes = TaskChanges(gateway.task_feed, lambda: gateway.tasks.store, wire_task)

    @property
    def _receiver(self) -> TaskReceiver:
        return self._gateway.tasks

    def enabled(self) -> bool:
        return self._receiver.enabled()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        if ctx.method == "tools/call" and "task" in params:
            if not self.enabled():
                return await call_next(ctx)  # undeclared: the spec says process it normally
            return await self._call(ctx, params)
        if ctx.method not in _METHODS:
            return await call_next(ctx)
        if not self.enabled():
            raise MCPError(METHOD_NOT_FOUND, f"{ctx.method}: tasks are off on this gateway ([tasks] enabled = false)")
        session = self._gateway.session_of(ctx)
        if ctx.method == "tasks/list":
            return await self._list(session, params)
        task_id = task_id_of(params)
        if ctx.method == "tasks/get":
            return _checked(types.GetTaskResult, wire_task(await self._receiver.read(session, task_id)))
        if ctx.method == "tasks/cancel":
            return await self._cancel(session, task_id)
        return await self._result(ctx, session, task_id)

    # -- tools/call with params.task -------------------------------------------------------------

    async def _call(self, ctx: ServerRequestContext[Any, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        ttl = task_ttl(params)
        gateway = self._gateway
        session = gateway.session_of(ctx)
        name = str(params["name"])  # a string: the malformed-call middleware ran before this one
        arguments = params.get("arguments") or {}
        # The call outlives this request: nothing is sent to the client on its behalf after the
        # CreateTaskResult (a tool's progress and logs go nowhere; a question of its own fails it).
        channel = McpChannel(
            protocol_version=ctx.protocol_version, client_capabilities=ctx.session.client_capabilities, meta=ctx.meta
        )
        request = gateway.call_request(
            session, name, arguments, channel, idempotency_key=gateway.idempotency_key(params)
        )
        started = await self._receiver.start(request, always=True, ttl_ms=ttl)
        if not isinstance(started, Task):  # refused before it ran (too many tasks): audited
            error = dict(started.error or {})
            error["auditId"] = started.audit_id
            raise MCPError(INVALID_REQUEST, str(error.get("message", "the call was refused")), data=error)
        self.changes.follow(started, ctx.session)
        return _checked(types.CreateTaskResult, {"task": wire_task(started)})

    # -- tasks/list, tasks/cancel -----------------------------------------------------------------

    async def _list(self, session: GatewaySession, params: Mapping[str, Any]) -> dict[str, Any]:
        after = list_cursor(params)
        tasks = await self._receiver.store.page(session.name, after=after, limit=LIST_PAGE + 1)
        result: dict[str, Any] = {"tasks": [wire_task(task) for task in tasks[:LIST_PAGE]]}
        if len(tasks) > LIST_PAGE:
            result["nextCursor"] = next_cursor(tasks[LIST_PAGE - 1])
        return _checked(types.ListTasksResult, result)

    async def _cancel(self, session: GatewaySession, task_id: str) -> dict[str, Any]:
        with self.changes.watch(task_id) as wake:
            task = await self._receiver.own(session, task_id)
            if task.terminal:
                raise MCPError(INVALID_PARAMS, f"Cannot cancel task: it is already {_status(task)} (a terminal status)")
            await self._receiver.cancel_task(task)
            # The process running the call stops it and writes `cancelled` (here at once; another
            # gateway at its store notification); past CANCEL_WAIT_S the row is marked here.
            with anyio.move_on_after(CANCEL_WAIT_S):
                while not task.terminal:
                    await wake.wait(RESULT_FALLBACK_S)
                    task = await self._receiver.own(session, task_id)
        if not task.terminal:
            await self._receiver.store.finish(task.id, TaskStatus.CANCELLED, message="cancelled")
            task = await self._receiver.own(session, task_id)
        return _checked(types.CancelTaskResult, wire_task(task))

    # -- tasks/result ----------------------------------------------------------------------------

    async def _result(
        self, ctx: ServerRequestContext[Any, Any], session: GatewaySession, task_id: str
    ) -> dict[str, Any]:
        """Block until the task ends, asking its approvals of the client meanwhile (when it may
        answer them); then what the call itself would have answered."""
        channel = McpChannel.from_context(ctx)
        asked: set[str] = set()
        with self.changes.watch(task_id) as wake:
            task = await self._receiver.own(session, task_id)
            async with anyio.create_task_group() as tg:
                while not task.terminal:
                    approval = task.approval_id
                    if (
                        task.status is TaskStatus.INPUT_REQUIRED
                        and approval is not None
                        and approval not in asked
                        and can_answer_approvals(session)
                        and channel.can_ask
                    ):
                        asked.add(approval)
                        tg.start_soon(self._ask, channel, session, task, approval)
                    await wake.wait(RESULT_FALLBACK_S)
                    task = await self._receiver.own(session, task_id)
                tg.cancel_scope.cancel()  # an elicitation still open is withdrawn: answered elsewhere
        return self._payload(task)

    async def _ask(self, channel: McpChannel, session: GatewaySession, task: Task, approval_id: str) -> None:
        """Put the task's approval to the client; its answer goes the way tasks/update's does."""
        key = f"approval:{approval_id}"
        try:
            reply = await channel.elicit(
                task.status_message or f"approve the call of {task.tool}",
                APPROVAL_DECISION_SCHEMA,
                key=key,
                meta={RELATED_TASK_META_KEY: {"taskId": task.id}},
            )
            await self._receiver.update(session, task.id, {key: reply})
        except Exception as exc:  # the approval stays answerable over REST and the CLI  # noqa: BLE001
            logger.info("task %s: approval %s was not answered by the client: %s", task.id, approval_id, exc)

    @staticmethod
    def _payload(task: Task) -> dict[str, Any]:
        related = {RELATED_TASK_META_KEY: {"taskId": task.id}}
        if task.status is TaskStatus.COMPLETED:
            result = {k: v for k, v in (task.result or {}).items() if k != "resultType"}
            result["_meta"] = {**dict(result.get("_meta") or {}), **related}
            return _checked(types.CallToolResult, result)
        if task.status is TaskStatus.CANCELLED:
            raise MCPError(_REQUEST_CANCELLED, f"task {task.id} was cancelled: the call did not finish", data=related)
        error = dict(task.error or {})
        code = error.get("code")
        raise MCPError(
            code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
            str(error.get("message", "the call failed")),
            data=related,
        )
