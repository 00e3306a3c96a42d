"""pincer as an MCP Tasks receiver (``io.modelcontextprotocol/tasks``, 2026-07-28; docs/tasks.md).

A ``tools/call`` whose request declares the extension in its per-request capabilities runs as
any other. It is handed back as a task (``resultType: "task"``) when it must wait for a person
(an approval) — at once — or when it is still running after ``[tasks] after_s``. The task row is
written to the store before the handle leaves (store/tasks.py), so ``tasks/get`` on any gateway of
the store answers for it, and the call no longer depends on the connection that made it.

Waiting for an approval does not hold a process: the approval is *detached* (approver.py), bound
to the call (session, tool, arguments, idempotency key), and the task waits in ``input_required``.
Whoever answers it — the task's own main session through ``tasks/update``, or a person through
the CLI, REST or the dashboard — changes the approval; every gateway follows the approvals'
notifications, and the one whose UPDATE takes the task runs the same call again, which finds the
detached answer and uses it once. So a task waiting for an answer survives a restart of the
gateway, and is resumed by whichever gateway is up. A call that was *running* when its process
died is failed with a message saying so, never run twice.

Only the session that created a task can see, answer or cancel it; an unknown id and another
session's id get the same error. A non-main session's task shows no question (an agent must not
approve its own calls): its status message says how a person answers.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import BaseModel, ConfigDict, Field

from pincer.core.acts import CANCELLED
from pincer.core.errors import ApprovalGone, ApprovalPending, PincerError, TooManyTasks, UsageError
from pincer.core.values import CallRequest, ToolResult
from pincer.elicitation import APPROVAL_DECISION_SCHEMA, answer_from_reply
from pincer.gateway.access import can_answer_approvals
from pincer.gateway.approvals import waiting_message
from pincer.gateway.channel import McpChannel
from pincer.gateway.task_feed import TaskFeed
from pincer.gateway.task_questions import TaskQuestions
from pincer.gateway.tokens import GatewaySession
from pincer.policy.roles import PersonAct
from pincer.store.approvals import APPROVAL_CHANNEL, ApprovalRequest, ApprovalStatus, ApprovalStore
from pincer.store.audit import AuditEntry
from pincer.store.tasks import Task, TaskStatus, TaskStore

if TYPE_CHECKING:
    from pincer.config import TasksSettings
    from pincer.dispatch import Dispatcher
    from pincer.store.people import PeopleStore
    from pincer.store.sql import Database

logger = logging.getLogger(__name__)

__all__ = [
    "TASKS_EXTENSION", "TaskReceiver", "TaskServices", "cancel_task", "declares_tasks", "missing_extension", "TaskIdParams", "UpdateTaskParams",
    "MAX_INPUT_RESPONSES_BYTES", "MAX_TASK_ID_CHARS", "task_summary",
]  # fmt: skip

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"
# The most a tasks/update's inputResponses may weigh: an approval's answer is a few dozen bytes.
MAX_INPUT_RESPONSES_BYTES = 16 * 1024
MAX_TASK_ID_CHARS = 128
# How often the waiting and running tasks are looked at without a notification (another process
# on a SQLite home, a gateway that died without a word).
SWEEP_INTERVAL_S = 1.0
_NOT_FOUND = "Failed to retrieve task: Task not found"
# A client polling tasks/get faster than pollIntervalMs is answered from the row this gateway
# read last, for at most min(pollIntervalMs, COALESCE_MAX_S): the store sees at most one read
# per task per window whatever the client does, and no answer is staler than that.
COALESCE_MAX_S = 1.0
MAX_COALESCED = 4096  # rows kept for that; the oldest go first
_INTERRUPTED = (
    "the gateway running this call stopped before it finished; it was not run again "
    "(a tool's effects may be partly done: check before calling it again)"
)


def declares_tasks(meta: Mapping[str, Any] | None) -> bool:
    """Whether a request's ``_meta`` declares the extension in its per-request capabilities."""
    if not isinstance(meta, Mapping):
        return False
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def missing_extension(message: str) -> MCPError:
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        message,
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


class TaskIdParams(BaseModel):
    """``tasks/get`` and ``tasks/cancel`` params: exactly a task id (and ``_meta``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)
    task_id: str = Field(alias="taskId", min_length=1, max_length=MAX_TASK_ID_CHARS)
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


@dataclass(kw_only=True)
class _Start:
    """What the first moments of a call decide: it ended, it asked, or it runs on."""

    done: anyio.Event = field(default_factory=anyio.Event)
    result: ToolResult | None = None
    asked: ApprovalRequest | None = None
    task: Task | None = None  # set once the call is a task: the runner then writes its end there
    decided: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    wake: anyio.Event = field(default_factory=anyio.Event)  # it ended, or its server asked a question
    questions: TaskQuestions | None = None  # its upstream server's questions (2026-07-28 clients)


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskServices:
    """What tasks use of the service: their store, the approvals a waiting task is bound to, the
    call chain that runs and answers them, the database's approval notifications, and ``[tasks]``
    as config.toml says now (a reload replaces it)."""

    tasks: TaskStore
    approvals: ApprovalStore
    dispatcher: Dispatcher
    db: Database
    settings: Callable[[], TasksSettings]
    people: PeopleStore  # a rerun's person's roles as they are then


class TaskReceiver:
    """The task side of one MCP gateway: makes tasks, answers ``tasks/*``, resumes and fails
    them. ``to_wire`` turns a call's result into the wire ``CallToolResult`` exactly as a plain
    ``tools/call`` answers it (visibility, result hooks)."""

    def __init__(
        self,
        services: TaskServices,
        *,
        to_wire: Callable[[str, str, ToolResult], dict[str, Any]],
        task_group: Callable[[], anyio.abc.TaskGroup | None],
        base_url: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._services = services
        self._to_wire = to_wire
        self._task_group = task_group
        self._base_url = base_url
        self._running: dict[str, anyio.CancelScope] = {}  # task id -> the call running it here
        self._questions: dict[str, TaskQuestions] = {}  # task id -> its server's questions, here
        self._recent: collections.OrderedDict[str, tuple[float, Task]] = collections.OrderedDict()

    @property
    def store(self) -> TaskStore:
        return self._services.tasks

    @property
    def _owner(self) -> str:
        return self._services.approvals.owners.token

    @property
    def _settings(self) -> TasksSettings:
        return self._services.settings()

    def enabled(self) -> bool:
        return bool(self._settings.enabled) and self._task_group() is not None

    def only_as_task(self, tool: str) -> bool:
        return tool in self._settings.only

    # -- tools/call ----------------------------------------------------------------------------

    async def call(self, session: GatewaySession, request: CallRequest) -> dict[str, Any]:
        """``tools/call``: the wire result when the call ends in time, else the task handle."""
        started = await self.start(request)
        if isinstance(started, Task):
            return self._handle(started)
        return self._to_wire(session.name, request.tool, started)

    async def start(
        self, request: CallRequest, *, always: bool = False, ttl_ms: int | None = None
    ) -> Task | ToolResult:
        """Run the call for ``request.session``: its result when it ends within ``[tasks]
        after_s`` without asking anybody, else the task it became (stored before this returns).
        ``always``: a task whatever happens (a handshake-era task-augmented call, which must be
        answered with one); ``ttl_ms``: the requester's ttl, at most ``[tasks] ttl_s``. A call
        refused before it runs (too many tasks) is still the refusal's result."""
        settings = self._settings
        if await self.store.live_count(request.session) >= settings.max_live_per_session:
            oldest = await self.store.oldest_live(request.session)
            retry = oldest + settings.ttl_s - time.time() if oldest is not None else 1.0
            rejected: ToolResult = await self._services.dispatcher.reject(
                request,
                TooManyTasks(
                    f"session {request.session} holds {settings.max_live_per_session} unfinished tasks already",
                    retry_after_s=max(1.0, min(retry, settings.poll_interval_ms / 1000 * 10)),
                    hint="wait for one to finish or cancel one (tasks/cancel, `pincer tasks cancel ID`); "
                    "[tasks] max_live_per_session sets the bound",
                ),
            )
            return rejected
        start = _Start()
        channel = request.client
        if not always and isinstance(channel, McpChannel) and channel.is_modern:
            # An upstream server's question makes the call a task at once, as an approval does.
            start.questions = TaskQuestions(start.wake.set)
            channel.task_asker = start.questions.ask
        task_group = self._task_group()
        assert task_group is not None  # enabled() said so
        task_group.start_soon(self._run_first, request, start)
        after = 0.0 if always or self.only_as_task(request.tool) else settings.after_s
        with anyio.move_on_after(after):
            await start.wake.wait()
        try:
            if start.result is not None and start.asked is None and not always:
                return start.result
            if start.asked is not None:
                # The call left on purpose: the approval waits, detached, bound to the call.
                await start.done.wait()
                start.task = await self._create(request, start.asked, ttl_ms)
            else:
                start.task = await self._create(request, None, ttl_ms)
                self._running[start.task.id] = start.scope
                if start.questions is not None:
                    self._questions[start.task.id] = start.questions
        finally:
            start.decided.set()
        return start.task

    async def _run_first(self, request: CallRequest, start: _Start) -> None:
        async def on_approval(approval: ApprovalRequest) -> None:
            start.asked = approval
            raise ApprovalPending("", approval_id=approval.id)  # the approver detaches it

        with start.scope:
            try:
                start.result = await self._services.dispatcher.call(request, on_approval=on_approval)
            finally:
                start.done.set()
                start.wake.set()
        await start.decided.wait()
        task = start.task
        if task is None or task.status is TaskStatus.INPUT_REQUIRED:
            return  # answered directly, or the task was made waiting for its approval
        # Made running (past after_s, or a handshake-era task at once): its end is written here,
        # an approval asked meanwhile included (the task then waits for it).
        try:
            with anyio.CancelScope(shield=True):
                await self._finish(task, start.result, owner=self._owner)
        finally:
            self._running.pop(task.id, None)
            self._questions.pop(task.id, None)

    async def _create(self, request: CallRequest, asked: ApprovalRequest | None, ttl_ms: int | None = None) -> Task:
        settings = self._settings
        most = int(settings.ttl_s * 1000)
        return await self.store.create(
            session=request.session,
            caller=request.caller,
            tool=request.tool,
            args=request.args,
            idempotency_key=request.idempotency_key,
            status=TaskStatus.INPUT_REQUIRED if asked is not None else TaskStatus.WORKING,
            status_message=self._waiting_text(asked) if asked is not None else f"{request.tool} is running",
            approval_id=asked.id if asked is not None else None,
            owner=None if asked is not None else self._owner,
            ttl_ms=most if ttl_ms is None else min(ttl_ms, most),
            poll_ms=settings.poll_interval_ms,
            person=request.person,
        )

    async def _finish(self, task: Task, result: ToolResult | None, *, owner: str) -> None:
        try:
            await self._write_end(task, result, owner=owner)
        finally:
            self._recent.pop(task.id, None)  # written here: the next poll reads it

    async def _write_end(self, task: Task, result: ToolResult | None, *, owner: str) -> None:
        if result is None:  # cancelled: the chain recorded the call
            await self.store.finish(task.id, TaskStatus.CANCELLED, message="cancelled", owner=owner)
            return
        if result.error is not None and result.error.get("code") == "approval_pending":
            approval_id = str(result.error.get("approval_id", ""))
            approval = await self._services.approvals.get(approval_id)
            await self.store.wait_for(
                task.id, approval_id=approval_id, owner=owner, message=self._waiting_text(approval)
            )
            return
        wire = self._to_wire(task.session, task.tool, result)
        await self.store.finish(task.id, TaskStatus.COMPLETED, result=wire, message="completed", owner=owner)

    def _waiting_text(self, approval: ApprovalRequest) -> str:
        return waiting_message(approval, self._base_url())

    # -- tasks/get, tasks/update, tasks/cancel ------------------------------------------------------

    async def get(self, session: GatewaySession, task_id: str) -> dict[str, Any]:
        return {**self.detailed(await self.read(session, task_id), session), "resultType": "complete"}

    async def read(self, session: GatewaySession, task_id: str) -> Task:
        """``session``'s own live task ``task_id`` as a poll sees it (see COALESCE_MAX_S); an
        unknown id and another session's get the same error."""
        task = self._coalesced(task_id)
        if task is None:
            task = await self._own(session, task_id)
            self._recent[task_id] = (time.monotonic(), task)
            while len(self._recent) > MAX_COALESCED:
                self._recent.popitem(last=False)
        elif task.session != session.name:
            raise MCPError(INVALID_PARAMS, _NOT_FOUND)
        elif task.expires_at < time.time():
            raise MCPError(INVALID_PARAMS, "Failed to retrieve task: Task has expired")
        return task

    def _coalesced(self, task_id: str) -> Task | None:
        """The row read for ``task_id`` within its polling window, if any (see COALESCE_MAX_S)."""
        recent = self._recent.get(task_id)
        if recent is None:
            return None
        read_at, task = recent
        if time.monotonic() - read_at >= min(task.poll_ms / 1000, COALESCE_MAX_S):
            del self._recent[task_id]
            return None
        return task

    async def update(self, session: GatewaySession, task_id: str, responses: Mapping[str, Any]) -> dict[str, Any]:
        self._recent.pop(task_id, None)  # the client's own act shows in its next poll
        task = await self._own(session, task_id)
        if len(json.dumps(responses, separators=(",", ":"))) > MAX_INPUT_RESPONSES_BYTES:
            raise MCPError(
                INVALID_PARAMS,
                f"inputResponses is larger than {MAX_INPUT_RESPONSES_BYTES} bytes: an approval's answer is "
                '{"action": "accept", "content": {"decision": "allow_once"}}',
            )
        questions = self._questions.get(task_id)
        if questions is not None and questions.answer(responses):
            return {"resultType": "complete"}  # the runtime checks the answers (person_questions.py)
        if task.status is not TaskStatus.INPUT_REQUIRED or task.approval_id is None:
            return {"resultType": "complete"}  # nothing outstanding: the spec says ignore it
        key = _key(task.approval_id)
        if key not in responses:
            return {"resultType": "complete"}
        answer = answer_from_reply(responses[key])
        if answer is None:
            return {"resultType": "complete"}  # dismissed: the approval stays open for other ways
        # A non-main session's answer, or a person's whose roles do not hold the approval, is
        # refused by the chain, the one place every answer passes.
        try:
            await self._services.dispatcher.answer(
                task.approval_id,
                answer,
                by=f"mcp-task:{session.principal}",
                as_session=session.name,
                roles=session.roles,
                person=session.person,
            )
        except PincerError as exc:
            raise MCPError(INVALID_PARAMS, exc.message) from None
        await self.sweep()  # move it on now rather than at the next notification
        return {"resultType": "complete"}

    async def cancel(self, session: GatewaySession, task_id: str) -> dict[str, Any]:
        task = await self._own(session, task_id)
        await self.cancel_task(task)
        return {"resultType": "complete"}

    async def cancel_task(self, task: Task) -> None:
        """Cancel a task however it stands (:func:`cancel_task`); one running here stops now."""
        self._recent.pop(task.id, None)
        await cancel_task(task, tasks=self._services.tasks, approvals=self._services.approvals)
        scope = self._running.get(task.id)
        if scope is not None:
            scope.cancel()

    async def own(self, session: GatewaySession, task_id: str) -> Task:
        """``session``'s own live task ``task_id`` as the store has it now."""
        self._recent.pop(task_id, None)
        return await self._own(session, task_id)

    async def _own(self, session: GatewaySession, task_id: str) -> Task:
        task = await self.store.get(task_id)
        # Another session's task is answered as a missing one: ids are not confirmed to others.
        if task is None or task.session != session.name:
            raise MCPError(INVALID_PARAMS, _NOT_FOUND)
        if task.expires_at < time.time():
            raise MCPError(INVALID_PARAMS, "Failed to retrieve task: Task has expired")
        return task

    def detailed(self, task: Task, session: GatewaySession | None) -> dict[str, Any]:
        """The task as ``tasks/get`` shows it to ``session`` (and ``notifications/tasks`` too)."""
        data = task_summary(task)
        if task.status is TaskStatus.INPUT_REQUIRED:
            requests: dict[str, Any] = {}
            # Only a main session's client (or an approving person's) is asked: an agent must not
            # approve its own calls.
            if task.approval_id is not None and session is not None and can_answer_approvals(session):
                requests[_key(task.approval_id)] = {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": task.status_message or f"approve the call of {task.tool}",
                        "requestedSchema": APPROVAL_DECISION_SCHEMA,
                    },
                }
            data["inputRequests"] = requests
        elif task.status is TaskStatus.WORKING and (questions := self._questions.get(task.id)) and questions.pending:
            # Its upstream server asks, in this process: the task waits for its client's answer.
            data["status"] = TaskStatus.INPUT_REQUIRED.value
            data["statusMessage"] = f"{task.tool}: its MCP server asks a question; answer it with tasks/update"
            data["inputRequests"] = dict(questions.pending)
        elif task.status is TaskStatus.COMPLETED:
            data["result"] = dict(task.result or {})
        elif task.status is TaskStatus.FAILED:
            data["error"] = dict(task.error or {"code": INTERNAL_ERROR, "message": "the call failed"})
        return data

    async def watchable(self, session: GatewaySession, task_ids: Sequence[str]) -> list[Task]:
        """Of ``task_ids``, the live tasks ``session`` may follow: its own, not expired. The
        others (unknown, expired, another session's) are left out alike."""
        now = time.time()
        tasks = [await self.store.get(task_id) for task_id in task_ids]
        return [task for task in tasks if task is not None and task.session == session.name and task.expires_at >= now]

    def _handle(self, task: Task) -> dict[str, Any]:
        handle = self.detailed(task, None)
        handle.pop("inputRequests", None)
        return {**handle, "resultType": "task"}

    # -- following the store -------------------------------------------------------------------

    async def follow(self, feed: TaskFeed) -> None:
        """Move tasks on as their approvals are answered, and fail the ones whose process died:
        on each approval notification and each task change (``feed``: the gateway's), and every
        ``SWEEP_INTERVAL_S`` (a gateway that died says nothing; a task's time runs out)."""
        wake = anyio.Event()

        async def woken(notes: AsyncIterator[str]) -> None:
            async for _ in notes:
                wake.set()

        async def approvals(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with self._services.db.listen(APPROVAL_CHANNEL) as notes:
                task_status.started()
                await woken(notes)

        # Both in place before the first sweep reads: a change made after that read wakes it.
        with feed.subscribe() as changes:
            async with anyio.create_task_group() as tg:
                await tg.start(approvals)
                await feed.listening.wait()
                tg.start_soon(woken, changes)
                while True:
                    try:
                        await self.sweep()
                    except Exception:  # a store hiccup: the next sweep tries again
                        logger.exception("looking at the waiting tasks failed")
                    with anyio.move_on_after(SWEEP_INTERVAL_S):
                        await wake.wait()
                    wake = anyio.Event()

    async def sweep(self) -> None:
        for task in await self.store.waiting():
            await self._look_at_waiting(task)
        for task in await self.store.running():
            if task.owner == self._owner:
                scope = self._running.get(task.id)
                if task.cancel_requested and scope is not None:
                    scope.cancel()
            elif not await self._services.approvals.owners.is_alive(task.owner):
                error = {"code": INTERNAL_ERROR, "message": _INTERRUPTED}
                await self.store.finish(task.id, TaskStatus.FAILED, error=error, message=_INTERRUPTED, owner=task.owner)
        await self.store.prune()

    async def _look_at_waiting(self, task: Task) -> None:
        if task.approval_id is None:
            return
        try:
            approval = await self._services.approvals.get(task.approval_id)
        except UsageError:
            approval = None
        if approval is not None and approval.status is ApprovalStatus.PENDING:
            if approval.expires_at >= time.time():
                return
            await self._services.approvals.expire_overdue()
            approval = await self._services.approvals.get(task.approval_id)
        if approval is None or approval.status is ApprovalStatus.EXPIRED:
            await self._expired(task, approval)
            return
        if approval.status is ApprovalStatus.PENDING:
            return
        task_group = self._task_group()
        if task_group is None:
            return
        if await self.store.claim(
            task.id, approval_id=task.approval_id, owner=self._owner, message=f"{task.tool} is running"
        ):
            scope = self._running[task.id] = anyio.CancelScope()
            task_group.start_soon(self._rerun, task, scope)

    async def _expired(self, task: Task, approval: ApprovalRequest | None) -> None:
        """Nobody answered in time: the task completes with the call's approval_timeout result,
        and the call, which never ran, gets its one record (written once, whichever gateway)."""
        assert task.approval_id is not None
        gone = f"approval {task.approval_id} expired before it was answered: the call did not run"
        error = {"code": "approval_timeout", "message": gone,
                 "hint": "call the tool again; raise [approvals] timeout_s to wait longer"}  # fmt: skip
        result = ToolResult(ok=False, error=error)
        if approval is not None:
            entry = AuditEntry(
                session=task.session, caller=task.caller, tool=task.tool, decision="ask",
                reason=f"nobody answered approval {approval.id} in time", outcome=CANCELLED,
                error_code="approval_timeout", error=gone, args=approval.args, effects=approval.effects,
                approval_id=approval.id, idempotency_key=task.idempotency_key, person=task.person,
            )  # fmt: skip
            audit_id = await self._services.approvals.record_gone(approval.id, entry)
            result = ToolResult(ok=False, error=error, audit_id=audit_id)
        await self.store.finish(
            task.id, TaskStatus.COMPLETED, result=self._to_wire(task.session, task.tool, result),
            message=gone, approval_id=task.approval_id,
        )  # fmt: skip

    async def _may_change_policy(self, person: str | None) -> bool:
        """As the call was first decided: a person's roles as they are now (a person removed
        meanwhile, or no longer an operator, changes no policy); no person: as before people."""
        if person is None:
            return True
        held = await self._services.people.get(person)
        return held is not None and held.roles.may(PersonAct.OPERATE)

    async def _rerun(self, task: Task, scope: anyio.CancelScope) -> None:
        """The same call again: the approver finds the detached answer and uses it once."""
        request = CallRequest(
            tool=task.tool,
            args=task.args,
            session=task.session,
            idempotency_key=task.idempotency_key,
            caller=task.caller,
            person=task.person,
            may_change_policy=await self._may_change_policy(task.person),
        )

        async def on_approval(approval: ApprovalRequest) -> None:
            raise ApprovalPending("", approval_id=approval.id)  # asked again: wait detached again

        result: ToolResult | None = None
        try:
            with scope:
                result = await self._services.dispatcher.call(request, on_approval=on_approval)
            with anyio.CancelScope(shield=True):
                await self._finish(task, result, owner=self._owner)
        finally:
            self._running.pop(task.id, None)


async def cancel_task(task: Task, *, tasks: TaskStore, approvals: ApprovalStore) -> None:
    """Cancel a task however it stands: a waiting one here and now (its approval expired, one
    audit record saying ``cancelled``); a running one is marked, and the process running it
    cancels the call when it sees the mark (the store's notification, or its next sweep)."""
    if task.terminal:
        return
    await tasks.request_cancel(task.id)
    if task.status is not TaskStatus.INPUT_REQUIRED or task.approval_id is None:
        return
    if not await tasks.finish(task.id, TaskStatus.CANCELLED, message="cancelled", approval_id=task.approval_id):
        return  # taken meanwhile to run: the runner sees the mark
    approval = await approvals.get(task.approval_id)
    entry = AuditEntry(
        session=task.session, caller=task.caller, tool=task.tool, decision="ask",
        reason=f"the task waiting on approval {approval.id} was cancelled",
        outcome=CANCELLED, error_code=ApprovalGone.code, error=f"task {task.id} was cancelled",
        args=approval.args, effects=approval.effects, approval_id=approval.id,
        idempotency_key=task.idempotency_key, person=task.person,
    )  # fmt: skip
    await approvals.record_gone(approval.id, entry)


def _key(approval_id: str) -> str:
    return f"approval:{approval_id}"


def task_summary(task: Task) -> dict[str, Any]:
    """The task's state in the extension's names (2026-07-28); the handshake era renames them."""
    data: dict[str, Any] = {
        "taskId": task.id,
        "status": task.status.value,
        "createdAt": _iso(task.created_at),
        "lastUpdatedAt": _iso(task.updated_at),
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_ms,
    }
    if task.status_message:
        data["statusMessage"] = task.status_message
    return data


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"
