"""pincer as a task requester: an upstream MCP server's ``tools/call`` answered with a task.

pincer declares MCP's Tasks extension (``io.modelcontextprotocol/tasks``) on its upstream
connections, through the SDK's client-extension seam (a ``ResultClaim`` on ``resultType:
"task"``). A server may then answer a long ``tools/call`` with a ``CreateTaskResult``; the claim's
resolver follows the task to its end so the pincer call returns its ``CallToolResult`` as any
other call does:

- it polls ``tasks/get``, waiting the server's ``pollIntervalMs`` clamped to
  [``MIN_POLL_S``, ``MAX_POLL_S``] (0 must not become a busy loop, an absurd value must not
  outlast the call), all within the call's own deadline (the connection's ``fail_after``);
- an ``input_required`` task's questions (``elicitation/create``, form mode) go to the person
  behind the pincer call by the one rule and check of :mod:`.person_questions` (the call's
  :class:`CallQuestions`, as for a plain ``elicitation/create``): only a main session's or a
  person's client that can be asked mid-call is; the answers go back with ``tasks/update``. A
  question nobody may answer, any other kind of
  request (sampling, roots: the session's callback table refuses them, as it refuses a server's
  own) and a server asking too much (more than ``MAX_QUESTIONS_AT_ONCE`` at once or
  ``MAX_QUESTIONS`` in all, a question past ``MAX_QUESTION_CHARS``) fail the call, which
  cancels the task;
- a ``completed`` task's ``result`` is validated as a ``CallToolResult`` and then goes the chain's
  usual way (output limits, leak scan, audit);
- whenever the pincer call ends before the task does (cancelled, past its deadline, a bad
  answer), a bounded ``tasks/cancel`` goes upstream, shielded from the cancellation itself.

Fail closed: an answer naming another task, a malformed task, a ``failed``/``cancelled`` task
or an unknown status is a ToolError saying which, never a result.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import Field, TypeAdapter, ValidationError

from pincer.core.errors import ToolError
from pincer.runtimes.mcp.person_questions import (
    HOSTILE_HINT,
    MAX_QUESTION_CHARS,
    MAX_QUESTIONS,
    MAX_QUESTIONS_AT_ONCE,
    CallQuestions,
    PersonAsker,
    current_call,
)

logger = logging.getLogger(__name__)

__all__ = [
    "TASKS_EXTENSION", "UpstreamTasks", "poll_delay_s",
    "MIN_POLL_S", "MAX_POLL_S", "CANCEL_TIMEOUT_S", "MAX_QUESTIONS", "MAX_QUESTIONS_AT_ONCE", "MAX_QUESTION_CHARS",
]  # fmt: skip

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
MIN_POLL_S = 0.05  # a pollIntervalMs of 0 (or none) is not a licence to spin
MAX_POLL_S = 5.0  # nor a huge one a reason to sleep past a result that is ready
CANCEL_TIMEOUT_S = 2.0  # the courtesy tasks/cancel must not hold a cancelled call
MAX_TASK_ID_CHARS = 256
# A server asking forever is refused (person_questions.MAX_QUESTIONS per call), as the SDK's own
# driver caps rounds: a round either asks a question or fails the call, so that caps rounds too.

_Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


def poll_delay_s(poll_interval_ms: Any) -> float:
    """The wait before the next ``tasks/get``: the server's hint, clamped."""
    if isinstance(poll_interval_ms, bool) or not isinstance(poll_interval_ms, int | float):
        return MIN_POLL_S
    if poll_interval_ms != poll_interval_ms:  # NaN
        return MIN_POLL_S
    return min(MAX_POLL_S, max(MIN_POLL_S, poll_interval_ms / 1000.0))


class CreatedTask(types.Result):
    """The ``CreateTaskResult`` of a ``tools/call`` (2026-07-28 Tasks extension)."""

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId", min_length=1, max_length=MAX_TASK_ID_CHARS)
    status: _Status
    poll_interval_ms: float | None = Field(default=None, alias="pollIntervalMs")
    status_message: str | None = Field(default=None, alias="statusMessage")


class _TaskState(types.Result):
    """A ``tasks/get`` answer: only what pincer acts on is read; the rest is ignored."""

    task_id: str = Field(alias="taskId", min_length=1, max_length=MAX_TASK_ID_CHARS)
    status: _Status
    poll_interval_ms: float | None = Field(default=None, alias="pollIntervalMs")
    status_message: str | None = Field(default=None, alias="statusMessage")
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class _TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class _UpdateParams(types.RequestParams):
    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class _GetTask(types.Request[_TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskIdParams


class _CancelTask(types.Request[_TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskIdParams


class _UpdateTask(types.Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateParams


_INPUT_REQUESTS: TypeAdapter[dict[str, types.InputRequest]] = TypeAdapter(dict[str, types.InputRequest])


class UpstreamTasks(ClientExtension):
    """The Tasks extension on pincer's upstream connections: claims ``resultType: "task"``."""

    identifier = TASKS_EXTENSION

    def __init__(self, server: str) -> None:
        self._server = server

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve),)

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        """Follow the task ``created`` to its end; cancel it upstream if the call ends first."""
        what = f"{self._server}/{ctx.tool_name}: upstream task {created.task_id[:64]}"
        finished = False
        try:
            result = await _follow(created, ctx, what)
            finished = True
            return result
        finally:
            if not finished:
                await _cancel_upstream(ctx, created.task_id, what)


async def _follow(created: CreatedTask, ctx: ClaimContext, what: str) -> types.CallToolResult:
    session = ctx.session
    task_id = created.task_id
    delay = poll_delay_s(created.poll_interval_ms)
    state: _TaskState | None = None
    status: str = created.status
    while True:
        if status == "input_required" and state is not None and state.input_requests:
            await _answer(ctx, task_id, state.input_requests, what)
        elif status not in ("working", "input_required"):
            return _terminal(state, status, what)
        await anyio.sleep(delay)
        try:
            state = await session.send_request(_GetTask(params=_TaskIdParams(taskId=task_id)), _TaskState)
        except ValidationError as exc:
            raise ToolError(
                f"{what}: the server's tasks/get answer is not a valid task: {exc.error_count()} problem(s)",
                hint="the server is broken or speaks another version of the Tasks extension",
            ) from None
        if state.task_id != task_id:
            raise ToolError(
                f"{what}: the server's tasks/get answer names another task; the call is refused",
                hint="the server is broken or hostile; check it with `pincer mcp test`",
            )
        status = state.status
        delay = poll_delay_s(state.poll_interval_ms)


def _terminal(state: _TaskState | None, status: str, what: str) -> types.CallToolResult:
    if status == "completed":
        if state is None or state.result is None:
            raise ToolError(f"{what} completed without a result", hint="the server is broken")
        try:
            return types.CallToolResult.model_validate(state.result, by_name=False)
        except ValidationError as exc:
            raise ToolError(
                f"{what}: its result is not a valid CallToolResult: {exc.error_count()} problem(s)",
                hint="the server is broken or speaks another protocol version",
            ) from None
    if status == "failed":
        error = (state.error if state is not None else None) or {}
        message = str(error.get("message") or "no reason given")[:500]
        raise ToolError(f"{what} failed upstream: {message}")
    raise ToolError(f"{what} was cancelled upstream")


async def _answer(ctx: ClaimContext, task_id: str, requests: dict[str, Any], what: str) -> None:
    """Each question to the person (other requests through the session's callback table, which
    refuses them), the answers back with ``tasks/update``; a refusal cancels the task."""
    if len(requests) > MAX_QUESTIONS_AT_ONCE:  # counted before anything is parsed or shown
        raise ToolError(
            f"{what} asked {len(requests)} questions at once; pincer puts at most {MAX_QUESTIONS_AT_ONCE} to a person",
            hint=HOSTILE_HINT,
        )
    try:
        parsed = _INPUT_REQUESTS.validate_python(requests, by_name=False)
    except ValidationError as exc:
        raise ToolError(
            f"{what}: its inputRequests are not valid MCP requests: {exc.error_count()} problem(s)",
            hint="the server is broken or speaks another protocol version",
        ) from None
    session = ctx.session
    # The call's questions (in the caller's task); none: nobody made this call, nobody is asked.
    call = current_call() or CallQuestions(PersonAsker(), what)
    responses: dict[str, Any] = {}
    for key, request in parsed.items():
        if isinstance(request, types.ElicitRequest):
            responses[key] = await call.answer(request.params, what=what)
            continue
        context = ClientRequestContext(session=session, request_id=key, meta=None)
        answer = await session.dispatch_input_request(context, request)
        if isinstance(answer, types.ErrorData):
            raise ToolError(f"{what} asked for input pincer cannot give: {answer.message}")
        responses[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    await session.send_request(
        _UpdateTask(params=_UpdateParams(taskId=task_id, inputResponses=responses)), types.Result
    )


async def _cancel_upstream(ctx: ClaimContext, task_id: str, what: str) -> None:
    with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT_S):
        try:
            await ctx.session.send_request(_CancelTask(params=_TaskIdParams(taskId=task_id)), types.Result)
        except (MCPError, ValidationError, OSError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            # the server may be gone: the call's own error is what matters
            logger.info("%s: tasks/cancel failed: %s", what, exc)
