"""The REST API under ``/api/v1`` (FastAPI; its OpenAPI document at ``/api/v1/openapi.json``).

One router per resource, each a module of this package: ``tools``, ``approvals``, ``runs``,
``builds``, ``audit``, ``commands``, ``metrics``. The service and the session reach each route as
dependencies (``common.py``); webhooks are not here but at ``/hooks/`` (``gateway/hooks.py``),
since they authenticate themselves.

Every request arrives through the guard, so it carries the session of its bearer token. A
non-main session sees and calls only as itself; answering approvals takes a main session (an
agent must not approve its own calls). Errors are ``{"error": {code, message, hint?}}`` with a
status that says what kind of failure it was; a rate limit is 429 with ``Retry-After``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.telemetry import TelemetryConfig
from starlette.exceptions import HTTPException as StarletteHTTPException

from pincer import __version__
from pincer.core.errors import ArgumentsInvalid, PincerError, UnsupportedMediaType
from pincer.core.values import CallRequest
from pincer.gateway.guard import SESSION_SCOPE_KEY
from pincer.gateway.rest.approvals import ApprovalBody
from pincer.gateway.rest.approvals import router as approvals_router
from pincer.gateway.rest.audit import MAX_AUDIT_LIMIT
from pincer.gateway.rest.audit import router as audit_router
from pincer.gateway.rest.builds import router as builds_router
from pincer.gateway.rest.commands import router as commands_router
from pincer.gateway.rest.common import (
    Refused,
    RestServices,
    error_response,
    json_body_route,
    pincer_error_response,
    session_of,
    status_for,
)
from pincer.gateway.rest.metrics import router as metrics_router
from pincer.gateway.rest.people import router as people_router
from pincer.gateway.rest.runs import RunBody
from pincer.gateway.rest.runs import router as runs_router
from pincer.gateway.rest.tasks import router as tasks_router
from pincer.gateway.rest.tools import CallBody
from pincer.gateway.rest.tools import router as tools_router
from pincer.gateway.tasks import TaskReceiver
from pincer.gateway.tokens import GatewaySession
from pincer.llm.runner import RunManager

if TYPE_CHECKING:
    from pincer.dispatch import Dispatcher

__all__ = ["create_rest_app", "status_for", "session_of", "json_body_route", "CallBody", "ApprovalBody", "RunBody", "MAX_AUDIT_LIMIT"]

_NO_TELEMETRY: TelemetryConfig = {
    "tracing": False, "metrics": False, "logs": False, "operation_spans": False, "auto_configure": False,
}  # fmt: skip
_ROUTERS = (
    tools_router, approvals_router, audit_router, runs_router, builds_router, metrics_router, commands_router,
    tasks_router, people_router,
)  # fmt: skip


def create_rest_app(
    services: RestServices,
    *,
    metrics: Callable[[], dict[str, Any]] | None = None,
    runs: RunManager | None = None,
    routers: Sequence[APIRouter] = (),
    tasks: TaskReceiver | None = None,
) -> FastAPI:
    """The FastAPI app, to be mounted at ``/api/v1``. ``metrics`` gives the gateway's counters
    (refusals made before authentication) for ``GET /metrics``; ``runs`` (a
    ``pincer.llm.runner.RunManager`` whose task group the gateway holds) carries out runs;
    ``routers`` add more routes; ``tasks``: the MCP gateway's task receiver, which makes
    ``Prefer: respond-async`` calls into tasks (gateway/tasks.py)."""
    app = FastAPI(
        title="pincer",
        version=__version__,
        summary="Governed tools for AI agents: list, call, approve, audit.",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        # FastAPI's own OpenTelemetry (0.142+) would add a second server span per request with
        # the raw path, and log validation failures with what the caller sent: the gateway's
        # span (gateway/tracing.py) is the one, the same for REST, MCP and webhooks.
        telemetry=_NO_TELEMETRY,
    )
    app.state.services = services
    app.state.runs = runs
    app.state.tasks = tasks
    app.state.metrics = metrics
    app.router.route_class = json_body_route()
    _add_error_handlers(app, services.dispatcher)
    for router in (*_ROUTERS, *routers):
        app.include_router(router)
    return app


def _add_error_handlers(app: FastAPI, dispatcher: Dispatcher) -> None:
    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused) -> JSONResponse:
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
            await dispatcher.reject(call, error)

    @app.exception_handler(UnsupportedMediaType)
    async def not_json(request: Request, exc: UnsupportedMediaType) -> JSONResponse:
        await audit_refused_call(request, exc)
        return pincer_error_response(exc, exc.http_status)

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
        return error_response(400 if malformed_json else 422, code, f"request body: {problem}", hint)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        hint = "see /api/v1/openapi.json for the routes" if exc.status_code in (404, 405) else None
        return error_response(exc.status_code, code, f"{request.method} {request.url.path}: {exc.detail}", hint)

    @app.exception_handler(PincerError)
    async def pincer_error(request: Request, exc: PincerError) -> JSONResponse:
        return pincer_error_response(exc)


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
