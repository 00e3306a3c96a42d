"""The REST API under ``/api/v1`` (FastAPI; its OpenAPI document at ``/api/v1/openapi.json``).

Every request arrives through the guard, so it carries the session of its bearer token. A
non-main session sees and calls only as itself; answering approvals takes a main session (an
agent must not approve its own calls). Errors are ``{"error": {code, message, hint?}}`` with a
status that says what kind of failure it was; a rate limit is 429 with ``Retry-After``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Coroutine, Mapping, MutableMapping, Sequence
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, FastAPI, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from pincer import __version__
from pincer.core.errors import ArgumentsInvalid, PincerError, UnsupportedMediaType, UsageError, http_status
from pincer.core.values import CallRequest, ToolResult
from pincer.gateway.guard import SESSION_SCOPE_KEY
from pincer.gateway.tokens import GatewaySession
from pincer.policy.visibility import require_skills_visible, visible_tool, visible_tools
from pincer.store.approvals import Answer, AnswerScope, ApprovalStatus

logger = logging.getLogger(__name__)

__all__ = ["create_rest_app", "status_for", "session_of", "json_body_route", "CallBody", "ApprovalBody", "RunBody", "MAX_AUDIT_LIMIT"]

MAX_AUDIT_LIMIT = 10_000
BUILD_EVENTS_BUFFER = 64  # stage events of one build (about 4 per iteration) waiting for the client
_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,255}$"

class CallBody(BaseModel):
    """``POST /tools/{name}/call``. ``session`` defaults to the token's; only a main session
    may name another."""

    model_config = ConfigDict(extra="forbid")
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments (a JSON object).")
    session: str | None = Field(default=None, min_length=1, max_length=128)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class ApprovalBody(BaseModel):
    """``POST /approvals/{id}``. ``scope`` says how far an ``allow_always`` grant reaches:
    ``kind`` (default: sessions of the kind that asked), ``session`` (only that session), or
    ``all`` (every session)."""

    model_config = ConfigDict(extra="forbid")
    decision: Answer
    scope: AnswerScope | None = None


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


def status_for(error: Mapping[str, Any] | None) -> int:
    """The HTTP status of a failed result: the one its error class carries."""
    return http_status((error or {}).get("code"))


def _error(
    status: int, code: str, message: str, hint: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if hint:
        body["hint"] = hint
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _pincer_error(exc: PincerError, status: int) -> JSONResponse:
    return _error(status, exc.code, exc.message, exc.hint)


def _session(request: Request) -> GatewaySession:
    session = request.scope.get(SESSION_SCOPE_KEY)
    if not isinstance(session, GatewaySession):  # the guard always sets it; defend anyway
        raise _Refused(_error(401, "unauthorized", "request carries no authenticated session"))
    return session


def session_of(request: Request) -> GatewaySession:
    """The authenticated session of a request (for routers added with ``routers=``)."""
    return _session(request)


class _Refused(Exception):
    def __init__(self, response: JSONResponse) -> None:
        self.response = response


class _JsonBodyRoute(APIRoute):
    """Reads a POST body as JSON whatever its content-type says, when it is JSON: FastAPI parses
    only ``application/json`` bodies and answers anything else (curl's default form type, no
    type at all) with a validation error about a "dictionary". A body that is not JSON is 415."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(await _as_json_request(request))

        return route


def json_body_route() -> type[APIRoute]:
    """The route class that reads any JSON body as JSON (for routers added with ``routers=``)."""
    return _JsonBodyRoute


async def _as_json_request(request: Request) -> Request:
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    if request.method != "POST" or media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return request
    body = await request.body()
    if not body.strip():
        return request  # no body at all: the route's own validation says what is missing
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        said = f"content-type {content_type!r}" if content_type else "no content-type"
        raise UnsupportedMediaType(
            f"request body: not JSON ({said})",
            hint='send a JSON object with the header content-type: application/json, e.g. {"args": {"text": "hi"}}',
        ) from None
    headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
    scope = {**request.scope, "headers": [*headers, (b"content-type", b"application/json")]}
    return _BufferedRequest(scope, body)


class _BufferedRequest(Request):
    """A request whose body was read already (to look at it) and is handed on as it was."""

    def __init__(self, scope: MutableMapping[str, Any], body: bytes) -> None:
        super().__init__(scope)
        self._body = body


def create_rest_app(
    pincer: Any,
    *,
    metrics: Callable[[], dict[str, Any]] | None = None,
    runs: Any = None,
    routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """The FastAPI app, to be mounted at ``/api/v1``. ``metrics`` gives the gateway's counters
    (refusals made before authentication) for ``GET /metrics``; ``runs`` (a
    ``pincer.llm.runner.RunManager`` whose task group the gateway holds) carries out runs;
    ``routers`` add more routes (``POST /commands``)."""
    app = FastAPI(
        title="pincer",
        version=__version__,
        summary="Governed tools for AI agents: list, call, approve, audit.",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )

    app.router.route_class = _JsonBodyRoute  # before the routes: each is made with it

    @app.exception_handler(_Refused)
    async def refused(request: Request, exc: _Refused) -> JSONResponse:
        return exc.response

    async def audit_refused_call(request: Request, error: PincerError) -> None:
        """A call was attempted: the audit log records its refusal like any other."""
        tool = request.path_params.get("name")
        if request.method == "POST" and tool and request.url.path.endswith("/call"):
            session = request.scope.get(SESSION_SCOPE_KEY)
            call = CallRequest(
                tool=str(tool), args={}, session=session.name if isinstance(session, GatewaySession) else "(unknown)",
                caller="rest",
            )
            await pincer.dispatcher.reject(call, error)

    @app.exception_handler(UnsupportedMediaType)
    async def not_json(request: Request, exc: UnsupportedMediaType) -> JSONResponse:
        await audit_refused_call(request, exc)
        return _pincer_error(exc, exc.http_status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problem = _describe_validation(exc)
        malformed_json = any(e.get("type") == "json_invalid" for e in exc.errors())
        code = "malformed_json" if malformed_json else "invalid_request"
        hint = (
            'send a JSON object, for example {"args": {"text": "hi"}}'
            if malformed_json
            else "see the request schema at /api/v1/openapi.json"
        )
        await audit_refused_call(request, ArgumentsInvalid(f"request body: {problem}", hint=hint))
        return _error(400 if malformed_json else 422, code, f"request body: {problem}", hint)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        hint = "see /api/v1/openapi.json for the routes" if exc.status_code in (404, 405) else None
        return _error(exc.status_code, code, f"{request.method} {request.url.path}: {exc.detail}", hint)

    @app.exception_handler(PincerError)
    async def pincer_error(request: Request, exc: PincerError) -> JSONResponse:
        return _pincer_error(exc, status_for(exc.to_dict()))

    # -- tools -------------------------------------------------------------------------------

    @app.get("/tools", summary="List the tools this session may call")
    async def list_tools(request: Request) -> dict[str, Any]:
        session = _session(request)
        policy = pincer.config.session(session.name)
        return {"session": session.name, "tools": [s.to_dict() for s in visible_tools(policy, pincer.registry.list())]}

    @app.get("/tools/{name}", summary="Describe one tool")
    async def get_tool(request: Request, name: Annotated[str, Path(pattern=_NAME)]) -> dict[str, Any]:
        session = _session(request)
        return visible_tool(pincer.config.session(session.name), pincer.registry.get, name).to_dict()

    @app.post(
        "/tools/{name}/call",
        summary="Call a tool through the governed call chain",
        responses={
            403: {"description": "denied by policy or by a person"},
            404: {"description": "no such tool"},
            408: {"description": "nobody answered the approval in time"},
            422: {"description": "arguments do not fit the tool's schema"},
            429: {"description": "rate limited; see Retry-After"},
            502: {"description": "the tool failed"},
        },
    )
    async def call_tool(
        request: Request,
        name: Annotated[str, Path(pattern=_NAME)],
        body: CallBody,
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
    ) -> JSONResponse:
        session = _session(request)
        target = body.session or session.name
        if target != session.name and not session.is_main:
            raise _Refused(
                _error(
                    403,
                    "session_forbidden",
                    f"session {session.name!r} may not call as session {target!r}",
                    "leave out 'session', or use a token of a main session",
                )
            )
        key = body.idempotency_key or idempotency_key
        if body.idempotency_key and idempotency_key and body.idempotency_key != idempotency_key:
            raise UsageError(
                "the Idempotency-Key header and the body's idempotency_key differ",
                hint="send the key once, in either place",
            )
        result: ToolResult = await pincer.call(
            CallRequest(tool=name, args=body.args, session=target, idempotency_key=key, caller="rest")
        )
        data = result.to_dict()
        if result.content:
            data["content"] = [dict(block) for block in result.content]
        if result.ok:
            return JSONResponse(data)
        status = status_for(result.error)
        headers = None
        if status == 429:
            retry = (result.error or {}).get("retry_after_s")
            headers = {"Retry-After": str(max(1, math.ceil(float(retry or 1))))}
        return JSONResponse(data, status_code=status, headers=headers)

    # -- approvals ---------------------------------------------------------------------------

    @app.get("/approvals", summary="List approval requests (pending unless status=all)")
    async def list_approvals(
        request: Request, status: Annotated[str, Query(pattern="^(pending|all)$")] = "pending"
    ) -> dict[str, Any]:
        session = _session(request)
        requests = pincer.approvals.list(status=None if status == "all" else ApprovalStatus.PENDING)
        if not session.is_main:
            requests = [r for r in requests if r.session == session.name]
        return {"approvals": [r.to_dict() for r in requests]}

    @app.get("/approvals/{approval_id}", summary="One approval request")
    async def get_approval(request: Request, approval_id: Annotated[str, Path(max_length=100)]) -> dict[str, Any]:
        session = _session(request)
        approval = _find_approval(pincer, approval_id)
        if not session.is_main and approval.session != session.name:
            raise _Refused(_error(404, "not_found", f"no approval request with id {approval_id!r}"))
        return approval.to_dict()

    @app.post("/approvals/{approval_id}", summary="Answer an approval request (main sessions only)")
    async def answer_approval(
        request: Request, approval_id: Annotated[str, Path(max_length=100)], body: ApprovalBody
    ) -> dict[str, Any]:
        session = _session(request)
        if not session.is_main:
            raise _Refused(
                _error(
                    403,
                    "session_forbidden",
                    f"session {session.name!r} may not answer approvals",
                    "answer with a main session's token, or with `pincer approvals`",
                )
            )
        _find_approval(pincer, approval_id)
        answered = pincer.dispatcher.answer(
            approval_id, body.decision, by=f"rest:{session.name}", as_session=session.name, scope=body.scope
        )
        return answered.to_dict()

    # -- audit -------------------------------------------------------------------------------

    @app.get("/audit", summary="Audit records, newest last")
    async def audit(
        request: Request,
        tool: Annotated[str | None, Query(max_length=256)] = None,
        session_name: Annotated[str | None, Query(alias="session", max_length=128)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_LIMIT)] = 100,
    ) -> dict[str, Any]:
        session = _session(request)
        if not session.is_main:
            if session_name not in (None, session.name):
                raise _Refused(
                    _error(403, "session_forbidden", f"session {session.name!r} may read only its own records")
                )
            session_name = session.name
        records = pincer.audit.records(tool=tool, session=session_name, limit=limit)
        return {"records": [r.to_dict() for r in records]}

    @app.get("/audit/verify", summary="Verify the audit chain")
    async def verify(request: Request) -> JSONResponse:
        _session(request)
        try:
            head = pincer.audit.verify_chain()
        except PincerError as exc:
            return JSONResponse({"ok": False, "error": exc.to_dict()}, status_code=409)
        return JSONResponse({"ok": True, **head.to_dict()})

    @app.get("/audit/checkpoint", summary="A signed head of the audit log, to keep elsewhere (main sessions only)")
    async def checkpoint(request: Request) -> JSONResponse:
        session = _session(request)
        if not session.is_main:
            raise _Refused(
                _error(403, "session_forbidden", f"session {session.name!r} may not take audit checkpoints",
                       "use a main session's token, or `pincer audit checkpoint`")
            )  # fmt: skip
        try:
            made = pincer.audit.checkpoint()
        except PincerError as exc:
            return JSONResponse({"ok": False, "error": exc.to_dict()}, status_code=409)
        return JSONResponse(made.to_dict())

    # -- runs --------------------------------------------------------------------------------

    def run_row(request: Request, run_id: str) -> Any:
        session = _session(request)
        row = pincer.runs.get(run_id)
        if not session.is_main and row.session != session.name:
            raise _Refused(_error(404, "run_not_found", f"no run with id {run_id!r}"))
        return row

    @app.post("/runs", status_code=202, summary="Start a skill run with the agent loop")
    async def start_run(request: Request, body: RunBody) -> JSONResponse:
        from pincer.llm.run import RunRequest

        session = _session(request)
        if runs is None:
            raise _Refused(_error(503, "runs_unavailable", "this server does not carry out runs", "use `pincer serve`"))
        if body.skill is not None:  # the one rule for skills (policy/visibility.py)
            require_skills_visible(pincer.config.session(session.name), session.name)
        run_id = await runs.start(
            RunRequest(
                skill=body.skill, params=body.params, message=body.message, session=session.name, trigger="rest",
                profile=body.profile, budgets=body.budgets,
            )
        )  # fmt: skip
        base = f"/api/v1/runs/{run_id}"
        return JSONResponse(
            {"run_id": run_id, "status": "running", "url": base, "events_url": f"{base}/events", "cancel_url": f"{base}/cancel"},
            status_code=202,
        )

    @app.get("/runs", summary="Runs, newest first")
    async def list_runs(request: Request, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> dict[str, Any]:
        session = _session(request)
        rows = pincer.runs.list(session=None if session.is_main else session.name, limit=limit)
        return {"runs": [r.to_dict() for r in rows]}

    @app.get("/runs/{run_id}", summary="One run: status, usage, cost, transcript, tool calls with audit ids")
    async def get_run(request: Request, run_id: Annotated[str, Path(max_length=64)]) -> dict[str, Any]:
        row = run_row(request, run_id)
        messages = [m.to_dict() for m in pincer.runs.messages(run_id)]
        return {**row.to_dict(), "messages": messages}

    @app.get("/runs/{run_id}/events", summary="The run's events as server-sent events, until it ends")
    async def run_events(request: Request, run_id: Annotated[str, Path(max_length=64)]) -> Response:
        from fastapi.responses import StreamingResponse

        run_row(request, run_id)
        if runs is None:
            raise _Refused(_error(503, "runs_unavailable", "this server does not carry out runs", "use `pincer serve`"))

        async def stream() -> Any:
            async for event in runs.events(run_id):
                data = json.dumps(event.to_dict(), ensure_ascii=False, default=str)
                yield f"event: {event.kind}\ndata: {data}\n\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    # -- builds ------------------------------------------------------------------------------

    @app.post("/builds", summary="Build a tool; its stages stream as server-sent events (stage, done or error)")
    async def start_build(request: Request, body: BuildBody) -> Response:
        from fastapi.responses import StreamingResponse

        from pincer.builder.build import BuildRequest
        from pincer.builder.service import run_build

        session = _session(request)
        if not session.is_main:
            raise _Refused(_error(403, "session_forbidden", f"session {session.name!r} may not build tools",
                                  "use a main session's token, or an agent's build_tool (it asks a person)"))  # fmt: skip
        build = BuildRequest(description=body.description, name=body.name or body.edit, hosts=tuple(body.hosts),
                             secrets=tuple(body.secrets), max_iterations=body.max_iterations, standalone=body.standalone,
                             edit=body.edit, session=session.name)  # fmt: skip

        async def stream() -> Any:
            send, receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](BUILD_EVENTS_BUFFER)

            def progress(stage: str, seconds: float, detail: str) -> None:
                send.send_nowait(("stage", {"stage": stage, "seconds": round(seconds, 4), "detail": detail}))

            async def drive() -> None:
                async with send:
                    try:
                        report = await run_build(pincer, build, profile=body.profile, progress=progress)
                        await send.send(("done", report.to_json()))
                    except PincerError as exc:
                        await send.send(("error", exc.to_dict()))

            async with anyio.create_task_group() as tg:
                tg.start_soon(drive)
                async with receive:
                    async for kind, data in receive:
                        yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.post("/runs/{run_id}/cancel", status_code=202, summary="Cancel a run")
    async def cancel_run(request: Request, run_id: Annotated[str, Path(max_length=64)]) -> JSONResponse:
        row = run_row(request, run_id)
        if row.is_final:
            return JSONResponse(row.to_dict(), status_code=200)
        cancelled = runs.cancel(run_id) if runs is not None else pincer.runs.request_cancel(run_id)
        return JSONResponse(cancelled.to_dict(), status_code=202)

    # -- metrics -----------------------------------------------------------------------------

    @app.get("/metrics", summary="Counters of this gateway process (main sessions only)")
    async def gateway_metrics(request: Request) -> dict[str, Any]:
        session = _session(request)
        if not session.is_main:
            raise _Refused(
                _error(403, "session_forbidden", f"session {session.name!r} may not read the gateway's metrics",
                       "use a main session's token")
            )  # fmt: skip
        return {"gateway": metrics() if metrics is not None else {}}

    for router in routers:
        app.include_router(router)

    return app


def _find_approval(pincer: Any, approval_id: str) -> Any:
    try:
        return pincer.approvals.get(approval_id)
    except UsageError as exc:
        raise _Refused(_pincer_error(exc, 404)) from None


def _describe_validation(exc: RequestValidationError) -> str:
    """Each failing location and rule, without echoing the input (it may hold secrets)."""
    parts = []
    errors = exc.errors()
    for error in errors[:5]:
        if error.get("type") == "json_invalid":
            position = next((p for p in error.get("loc", ()) if isinstance(p, int)), None)
            where = f" (at character {position})" if position is not None else ""
            parts.append(f"not valid JSON{where}: {error.get('ctx', {}).get('error', 'decode error')}")
            continue
        loc = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "(body)"
        parts.append(f"{loc}: {error.get('msg', 'invalid')}")
    if len(errors) > 5:
        parts.append(f"and {len(errors) - 5} more")
    return "; ".join(parts)
