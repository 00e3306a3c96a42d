"""``POST /builds``: build a tool (main sessions only); its stages stream as server-sent events
(``stage``, then ``done`` with the report or ``error``), numbered from 1. The build belongs to
its stream: a client that hangs up cancels it (``pincer builds show NAME`` has what it did)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import ServerSentEvent

from pincer.core.errors import PincerError
from pincer.gateway.access import may_operate
from pincer.gateway.rest.common import ServicesDep, SessionDep, json_body_route, refuse
from pincer.gateway.rest.events import event_stream, server_event

__all__ = ["BUILD_EVENTS_BUFFER", "BuildBody", "router"]

BUILD_EVENTS_BUFFER = 64  # stage events of one build (about 4 per iteration) waiting for the client

router = APIRouter(route_class=json_body_route())


class BuildBody(BaseModel):
    """``POST /builds``: build a tool (main sessions only); progress as server-sent events."""

    model_config = ConfigDict(extra="forbid")
    description: str = Field(min_length=1, max_length=20_000)
    name: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    hosts: list[str] = Field(default_factory=list, max_length=50)
    secrets: list[str] = Field(default_factory=list, max_length=50)
    max_iterations: int = Field(default=4, ge=1, le=20)
    profile: str | None = Field(default=None, min_length=1, max_length=64)
    standalone: bool = False
    edit: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    replace: bool = Field(default=False, description="Replace a tool of the same name (else the build stops after the plan).")


@router.post("/builds", summary="Build a tool; its stages stream as server-sent events (stage, done or error)")
async def start_build(services: ServicesDep, session: SessionDep, body: BuildBody) -> Response:
    from pincer.builder.build import BuildRequest
    from pincer.builder.service import run_build

    if not may_operate(session):
        raise refuse(403, "session_forbidden", f"{session.actor('rest')} may not build tools",
                     "use a main session's token, an operator's, or an agent's build_tool (it asks a person)")  # fmt: skip
    build = BuildRequest(description=body.description, name=body.name or body.edit, hosts=tuple(body.hosts),
                         secrets=tuple(body.secrets), max_iterations=body.max_iterations, standalone=body.standalone,
                         edit=body.edit, replace=body.replace, session=session.name)  # fmt: skip

    async def stream() -> AsyncIterator[ServerSentEvent]:
        send, receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](BUILD_EVENTS_BUFFER)

        def progress(stage: str, seconds: float, detail: str) -> None:
            send.send_nowait(("stage", {"stage": stage, "seconds": round(seconds, 4), "detail": detail}))

        async def drive() -> None:
            async with send:
                try:
                    report = await run_build(services.builder, build, actor=session.actor("rest"), profile=body.profile,
                                             progress=progress)  # fmt: skip
                    await send.send(("done", report.to_json()))
                except PincerError as exc:
                    await send.send(("error", exc.to_dict()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(drive)
            async with receive:
                number = 0
                async for kind, data in receive:
                    number += 1
                    yield server_event(kind, data, str(number))

    return event_stream(stream())
