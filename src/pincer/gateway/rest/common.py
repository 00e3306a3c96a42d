"""What every resource's router shares: the service and the session as FastAPI dependencies, the
error body, and the route class that reads any JSON body as JSON.

The app keeps the services it uses in ``app.state`` (``create_rest_app`` puts them there), so a
router is a module-level ``APIRouter`` and its routes name what they use: ``services:
ServicesDep``, ``session: SessionDep``, ``runs: RunsDep``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from pincer.core.errors import PincerError, UnsupportedMediaType, http_status
from pincer.core.offload import is_large, off_loop
from pincer.gateway.guard import SESSION_SCOPE_KEY
from pincer.gateway.tokens import GatewaySession
from pincer.llm.runner import RunManager

if TYPE_CHECKING:
    from pincer.builder.host import BuilderServices
    from pincer.config import Config
    from pincer.dispatch import Dispatcher
    from pincer.registry import Registry
    from pincer.secrets.store import SecretStore
    from pincer.store.approvals import ApprovalStore
    from pincer.store.audit import AuditLog
    from pincer.store.people import PeopleStore
    from pincer.store.runs import RunStore
    from pincer.store.tasks import TaskStore
    from pincer.triggers.engine import TriggerEngine

__all__ = [
    "NAME_PATTERN",
    "RestServices",
    "ServicesDep",
    "Refused",
    "RunsDep",
    "SessionDep",
    "error_response",
    "json_body_route",
    "pincer_error_response",
    "services_of",
    "refuse",
    "runs_of",
    "session_of",
    "status_for",
]

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,255}$"


def status_for(error: Mapping[str, Any] | None) -> int:
    """The HTTP status of a failed result: the one its error class carries."""
    return http_status((error or {}).get("code"))


def error_response(
    status: int, code: str, message: str, hint: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if hint:
        body["hint"] = hint
    return JSONResponse({"error": body}, status_code=status, headers=headers)


class Refused(Exception):
    """A route's refusal with its finished answer (the app's handler sends it as it is)."""

    def __init__(self, response: JSONResponse) -> None:
        self.response = response


def refuse(status: int, code: str, message: str, hint: str | None = None) -> Refused:
    return Refused(error_response(status, code, message, hint))


@dataclass(frozen=True, kw_only=True, slots=True)
class RestServices:
    """What the REST API uses of the service (``gateway/services.py`` makes it of a Pincer).
    ``config`` is config.toml as it is now (a reload replaces it); ``triggers`` is made on first
    use; ``shown`` masks every known secret value in what a route answers (``Pincer.shown``);
    ``builder``: what a build uses (``POST /builds``)."""

    config: Callable[[], Config]
    registry: Registry
    dispatcher: Dispatcher  # calls, answers and refusals: the one chain
    approvals: ApprovalStore
    audit: AuditLog
    runs: RunStore
    tasks: TaskStore
    triggers: Callable[[], TriggerEngine]
    builder: BuilderServices
    shown: Callable[[Any], Any]
    people: PeopleStore  # admins manage people (/people)
    secrets: SecretStore  # a person removed takes their own credentials along


def services_of(request: Request) -> RestServices:
    """The services the app was made over."""
    services: RestServices = request.app.state.services
    return services


def runs_of(request: Request) -> RunManager | None:
    """The gateway's run manager (None: this app does not carry out runs)."""
    runs: RunManager | None = request.app.state.runs
    return runs


def session_of(request: Request) -> GatewaySession:
    """The authenticated session of a request."""
    session = request.scope.get(SESSION_SCOPE_KEY)
    if not isinstance(session, GatewaySession):  # the guard always sets it; defend anyway
        raise refuse(401, "unauthorized", "request carries no authenticated session")
    return session


ServicesDep = Annotated[RestServices, Depends(services_of)]
RunsDep = Annotated[RunManager | None, Depends(runs_of)]
SessionDep = Annotated[GatewaySession, Depends(session_of)]


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
    """The route class that reads any JSON body as JSON (every router of the REST API uses it)."""
    return _JsonBodyRoute


async def _as_json_request(request: Request) -> Request:
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";", 1)[0].strip().lower()
    if request.method != "POST":
        return request
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        await _parse_large_body(request)
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
    return _BufferedRequest(scope, body, request.receive)


async def _parse_large_body(request: Request) -> None:
    """A large JSON body (a 5 MB argument) is parsed off the event loop, into the cache
    starlette's ``Request.json()`` reads (FastAPI's own parse then finds it done). Not JSON:
    left for FastAPI to refuse in its words."""
    body = await request.body()
    if not is_large(body):
        return
    try:
        request._json = await off_loop(json.loads, body, over=body)
    except (ValueError, RecursionError):
        return


class _BufferedRequest(Request):
    """A request whose body was read already (to look at it) and is handed on as it was; its
    ``receive`` still tells when the client hangs up."""

    def __init__(self, scope: MutableMapping[str, Any], body: bytes, receive: Any) -> None:
        super().__init__(scope, receive)
        self._body = body


def pincer_error_response(exc: PincerError, status: int | None = None) -> JSONResponse:
    return error_response(status if status is not None else status_for(exc.to_dict()), exc.code, exc.message, exc.hint)
