"""Traces at the gateway's edge: tracing switched on for a serving process, and a server span per
HTTP request that continues the caller's W3C ``traceparent``.

The span is named ``{METHOD} {route}`` with the route's template (``/api/v1/tools/{name}/call``,
``/mcp``, ``/hooks/{name}``), never the path a caller sent, and holds no query string: a path
can carry a name the caller chose and a query a credential. Installed only while tracing is on:
off, the gateway's requests pass through nothing of it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pincer.telemetry.tracing import TRACE_CONTEXT_KEYS, TRACING, error_type

if TYPE_CHECKING:
    from pincer.config import TelemetrySettings

__all__ = ["TraceRequests", "tracing_on", "http_route"]

_CONTEXT_HEADERS = frozenset(key.encode("ascii") for key in TRACE_CONTEXT_KEYS)


@asynccontextmanager
async def tracing_on(settings: TelemetrySettings) -> AsyncIterator[bool]:
    """Trace this process as ``settings`` and the ``OTEL_*`` variables say while the block runs;
    what is still batched is exported at its end. Yields whether tracing is on."""
    on = TRACING.configure(settings, environ=os.environ)
    try:
        yield on
    finally:
        if on:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(TRACING.shutdown)


class TraceRequests:
    """A server span per HTTP request, current while the request is served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"] if k.lower() in _CONTEXT_HEADERS}
        method = str(scope.get("method", "GET"))
        attributes = {"http.request.method": method, "url.scheme": str(scope.get("scheme", "http"))}
        span = TRACING.start(method, kind="server", attributes=attributes, parent=TRACING.extract(carrier))
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        token = TRACING.attach(span)
        try:
            await self.app(scope, receive, sending)
        except BaseException as exc:
            TRACING.fail(span, error_type(exc))
            raise
        finally:
            TRACING.detach(token)
            route = http_route(scope)
            if route is not None:
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
            if status:
                span.set_attribute("http.response.status_code", status)
                if status >= 500:  # the conventions: a server span fails on 5xx only
                    TRACING.fail(span, str(status))
            span.end()


def http_route(scope: Scope) -> str | None:
    """The template of the route that served ``scope`` (Starlette and FastAPI leave it there),
    or of the paths the gateway routes itself; None when none is known (a 404)."""
    template: Any = getattr(scope.get("route"), "path", None)
    if isinstance(template, str):
        return f"{scope.get('root_path', '')}{template}"
    from pincer.gateway.hooks import HOOKS_PREFIX

    path = str(scope.get("path", ""))
    if path == "/mcp":
        return path
    if path.startswith(HOOKS_PREFIX):
        return HOOKS_PREFIX + "{name}"
    return None
