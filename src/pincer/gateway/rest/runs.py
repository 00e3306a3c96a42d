"""``/runs``: start a skill run with the agent loop (202 at once), list and read runs, follow a
run's events, cancel it. A non-main session sees only its own runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import ServerSentEvent

from pincer.gateway.access import may_operate, rerun_request, runs_session_filter, sees_run
from pincer.gateway.rest.common import RestServices, RunsDep, ServicesDep, SessionDep, json_body_route, refuse
from pincer.gateway.rest.events import event_stream, server_event
from pincer.gateway.tokens import GatewaySession
from pincer.llm.runner import RunCursor, RunManager
from pincer.policy.visibility import require_skills_visible
from pincer.store.runs import RunRow

__all__ = ["RunBody", "router"]

router = APIRouter(route_class=json_body_route())


class RunBody(BaseModel):
    """``POST /runs``: a skill run with the agent loop, under the token's session. ``budgets``
    override [agent]'s by name (turns, tool_calls, input_tokens, output_tokens, cost_usd,
    deadline_s); ``profile`` names a [llm.profiles.NAME]."""

    model_config = ConfigDict(extra="forbid")
    skill: str | None = Field(default=None, min_length=1, max_length=128)
    params: dict[str, Any] = Field(default_factory=dict)
    message: str | None = Field(default=None, max_length=200_000)
    profile: str | None = Field(default=None, min_length=1, max_length=64)
    budgets: dict[str, float] | None = None


async def _run_row(services: RestServices, session: GatewaySession, run_id: str) -> RunRow:
    row = await services.runs.get(run_id)
    if not sees_run(session, row):
        raise refuse(404, "run_not_found", f"no run with id {run_id!r}")
    return row


def _carried_out(runs: RunManager | None) -> RunManager:
    if runs is None:
        raise refuse(503, "runs_unavailable", "this server does not carry out runs", "use `pincer serve`")
    return runs


@router.post("/runs", status_code=202, summary="Start a skill run with the agent loop")
async def start_run(services: ServicesDep, session: SessionDep, runs: RunsDep, body: RunBody) -> JSONResponse:
    from pincer.llm.run import RunRequest

    carried_out = _carried_out(runs)
    if body.skill is not None:  # the one rule for skills (policy/visibility.py)
        require_skills_visible(services.config().session(session.name), session.name)
    run_id = await carried_out.start(
        RunRequest(
            skill=body.skill, params=body.params, message=body.message, session=session.name, trigger="rest",
            profile=body.profile, budgets=body.budgets, person=session.person, may_change_policy=may_operate(session),
        )
    )  # fmt: skip
    return _started(run_id)


def _started(run_id: str) -> JSONResponse:
    base = f"/api/v1/runs/{run_id}"
    return JSONResponse(
        {"run_id": run_id, "status": "running", "url": base, "events_url": f"{base}/events", "cancel_url": f"{base}/cancel"},
        status_code=202,
    )


@router.post("/runs/{run_id}/rerun", status_code=202, summary="Run a run's skill, parameters and message again, for whoever asks")
async def rerun(services: ServicesDep, session: SessionDep, runs: RunsDep, run_id: Annotated[str, Path(max_length=64)]) -> JSONResponse:
    row = await _run_row(services, session, run_id)
    return _started(await _carried_out(runs).start(rerun_request(services.config(), session, row, trigger="rest")))


@router.get("/runs", summary="Runs, newest first")
async def list_runs(services: ServicesDep, session: SessionDep, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> dict[str, Any]:
    rows = await services.runs.list(session=runs_session_filter(session), limit=limit)
    return {"runs": services.shown([r.to_dict() for r in rows])}


@router.get("/runs/{run_id}", summary="One run: status, usage, cost, transcript, tool calls with audit ids")
async def get_run(services: ServicesDep, session: SessionDep, run_id: Annotated[str, Path(max_length=64)]) -> dict[str, Any]:
    row = await _run_row(services, session, run_id)
    messages = [m.to_dict() for m in await services.runs.messages(run_id)]
    # A value stored as a secret after the run recorded it is masked here, at display.
    shown: dict[str, Any] = services.shown({**row.to_dict(), "messages": messages})
    return shown


@router.get(
    "/runs/{run_id}/events",
    summary="The run's events as server-sent events, until it ends (Last-Event-ID resumes after that event)",
)
async def run_events(
    services: ServicesDep,
    session: SessionDep,
    runs: RunsDep,
    run_id: Annotated[str, Path(max_length=64)],
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=64)] = None,
) -> Response:
    await _run_row(services, session, run_id)
    manager = _carried_out(runs)
    after = RunCursor.parse(last_event_id) if last_event_id else None

    async def stream() -> AsyncIterator[ServerSentEvent]:
        # Ends when the run does; a client that hangs up cancels this follower, not the run.
        async for cursor, event in manager.events(run_id, after):
            yield server_event(event.kind, services.shown(event.to_dict()), cursor.to_id())

    return event_stream(stream())


@router.post("/runs/{run_id}/cancel", status_code=202, summary="Cancel a run")
async def cancel_run(
    services: ServicesDep, session: SessionDep, runs: RunsDep, run_id: Annotated[str, Path(max_length=64)]
) -> JSONResponse:
    row = await _run_row(services, session, run_id)
    if row.is_final:
        return JSONResponse(services.shown(row.to_dict()), status_code=200)
    cancelled = await runs.cancel(run_id) if runs is not None else await services.runs.request_cancel(run_id)
    return JSONResponse(services.shown(cancelled.to_dict()), status_code=202)
