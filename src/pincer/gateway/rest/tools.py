"""``/tools``: list and describe what the session may call, and call it through the chain.

A call belongs to its request: when the client hangs up before the answer (``curl -m 5``, a
client's timeout), the call is cancelled as an MCP client's is. The chain records the
cancellation and expires an approval the call waited for, so a later ``pincer approvals
approve`` is refused instead of running the call with nobody waiting.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from pincer.core.errors import UsageError
from pincer.core.values import CallRequest, ToolResult
from pincer.gateway.access import may_operate
from pincer.gateway.rest.common import (
    NAME_PATTERN,
    RestServices,
    ServicesDep,
    SessionDep,
    json_body_route,
    refuse,
    status_for,
)
from pincer.gateway.rest.tasks import receiver_of, task_resource
from pincer.policy.visibility import as_seen, visible_tool, visible_tools
from pincer.store.tasks import Task

__all__ = ["CallBody", "router"]

router = APIRouter(route_class=json_body_route())


class CallBody(BaseModel):
    """``POST /tools/{name}/call``. ``session`` defaults to the token's; only a main session
    may name another."""

    model_config = ConfigDict(extra="forbid")
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments (a JSON object).")
    session: str | None = Field(default=None, min_length=1, max_length=128)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


@router.get("/tools", summary="List the tools this session may call")
async def list_tools(services: ServicesDep, session: SessionDep) -> dict[str, Any]:
    policy = services.config().session(session.name)
    return {"session": session.name, "tools": [s.to_dict() for s in visible_tools(policy, services.registry.list())]}


@router.get("/tools/{name}", summary="Describe one tool")
async def get_tool(services: ServicesDep, session: SessionDep, name: Annotated[str, Path(pattern=NAME_PATTERN)]) -> dict[str, Any]:
    return visible_tool(services.config().session(session.name), services.registry.get, name).to_dict()


@router.post(
    "/tools/{name}/call",
    summary="Call a tool through the governed call chain",
    responses={
        403: {"description": "denied by policy or by a person"},
        404: {"description": "no such tool"},
        408: {"description": "nobody answered the approval in time"},
        422: {"description": "arguments do not fit the tool's schema"},
        202: {"description": "with Prefer: respond-async, the call became a task: GET /tasks/{id} (Location)"},
        429: {"description": "rate limited; see Retry-After"},
        502: {"description": "the tool failed"},
    },
)
async def call_tool(
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    name: Annotated[str, Path(pattern=NAME_PATTERN)],
    body: CallBody,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
    prefer: Annotated[str | None, Header(alias="Prefer", max_length=200)] = None,
) -> JSONResponse:
    target = body.session or session.name
    if target != session.name and not session.is_main:
        raise refuse(403, "session_forbidden", f"session {session.name!r} may not call as session {target!r}",
                     "leave out 'session', or use a token of a main session")  # fmt: skip
    key = body.idempotency_key or idempotency_key
    if body.idempotency_key and idempotency_key and body.idempotency_key != idempotency_key:
        raise UsageError(
            "the Idempotency-Key header and the body's idempotency_key differ",
            hint="send the key once, in either place",
        )
    call = CallRequest(tool=name, args=body.args, session=target, idempotency_key=key, caller="rest",
                       person=session.person, may_change_policy=may_operate(session))  # fmt: skip
    receiver = receiver_of(request)
    if receiver is not None and receiver.enabled() and _respond_async(prefer):
        # The call belongs to the task, not to this request: a hang-up no longer cancels it.
        started = await receiver.start(call)
        if isinstance(started, Task):
            location = f"/api/v1/tasks/{started.id}"
            return JSONResponse(task_resource(services, started), status_code=202,
                                headers={"Location": location, "Preference-Applied": "respond-async"})  # fmt: skip
        return _answer(services, target, name, started)
    result = await _call_while_connected(request, services, call)
    if result is None:  # nobody reads this answer; the cancellation is in the audit log
        return JSONResponse({"ok": False, "error": {"code": "cancelled", "message": "the client disconnected"}}, status_code=499)
    return _answer(services, target, name, result)


def _respond_async(prefer: str | None) -> bool:
    """Whether a ``Prefer`` header (RFC 7240) asks for ``respond-async``."""
    if not prefer:
        return False
    return any(part.split(";")[0].strip().lower() == "respond-async" for part in prefer.split(","))


def _answer(services: RestServices, target: str, name: str, result: ToolResult) -> JSONResponse:
    # As GET /tools/{name}: a tool the session may not see is answered as a missing one.
    result = as_seen(services.config().session(target), name, result)
    data = result.to_dict()
    if result.ok:
        return JSONResponse(data)
    status = status_for(result.error)
    headers = None
    if status == 429:
        retry = (result.error or {}).get("retry_after_s")
        headers = {"Retry-After": str(max(1, math.ceil(float(retry or 1))))}
    return JSONResponse(data, status_code=status, headers=headers)


async def _call_while_connected(request: Request, services: RestServices, call: CallRequest) -> ToolResult | None:
    """The call's result, or None when the client hung up first and the call was cancelled."""
    result: ToolResult | None = None
    async with anyio.create_task_group() as tg:

        async def cancel_when_gone() -> None:
            # The body was read whole already: the next message is the client hanging up.
            while (await request.receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(cancel_when_gone)
        result = await services.dispatcher.call(call)
        tg.cancel_scope.cancel()
    return result
