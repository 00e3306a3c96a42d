"""One ASGI app: MCP streamable HTTP at ``/mcp``, REST under ``/api/v1``, ``/healthz``, ``/readyz``
and ``/metrics`` (``gateway/probes.py``), webhooks at ``/hooks/{name}``, the dashboard at ``/ui``;
all of it behind the guard (Host/Origin, bearer token, body limit), except that webhooks
authenticate themselves (``gateway/hooks.py``), the dashboard signs people in with a session
cookie (``gateway/ui/auth.py``) and the probes need no token. While tracing is on, a server span
per request sits in front of the guard (``gateway/tracing.py``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from pincer.config import Config, GatewaySettings
from pincer.core.errors import Denied
from pincer.core.values import CallRequest
from pincer.gateway.canvas_live import LiveCanvas
from pincer.gateway.canvas_pages import CANVAS_PATHS, FRAME_PREFIX
from pincer.gateway.guard import Guard, Refusal
from pincer.gateway.hooks import HOOKS_PREFIX, HooksEndpoint
from pincer.gateway.lazy import LazyApp
from pincer.gateway.mcp_server import McpExtension, McpGateway
from pincer.gateway.probes import probe_routes
from pincer.gateway.refusals import UnauthenticatedRefusals
from pincer.gateway.services import (
    canvas_services,
    dashboard_services,
    hook_services,
    mcp_services,
    probe_services,
    rest_services,
)
from pincer.gateway.tokens import TokenBook
from pincer.gateway.ui.auth import UI_PREFIX, UiAuth, redirect_bare_prefix
from pincer.gateway.ui.favicon import FAVICON_PATH, favicon_route
from pincer.gateway.upstream_mcp import UpstreamMcpExtension
from pincer.telemetry.tracing import TRACING

if TYPE_CHECKING:
    from pincer.llm.runner import RunManager
    from pincer.service import Pincer

logger = logging.getLogger(__name__)

__all__ = ["Gateway", "create_gateway"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Gateway:
    """The assembled gateway: ``app`` to serve, ``mcp`` for notifications and tests."""

    app: ASGIApp
    mcp: McpGateway
    runs: RunManager | None = None
    canvas: LiveCanvas | None = None  # the canvas, on while [gateway] canvas = true
    tokens: TokenBook | None = None


def create_gateway(
    pincer: Pincer,
    *,
    settings: GatewaySettings,
    token: str,
    bound_host: str | None = None,
    extensions: tuple[McpExtension, ...] = (),
) -> Gateway:
    """Build the gateway over an open Pincer. ``token`` is the primary bearer token."""
    tokens = TokenBook(config=lambda: pincer.config, primary_token=token, people=pincer.people)
    if pincer.config.telemetry.metrics:
        pincer.enable_metrics()
    if settings.canvas:
        from pincer.canvas.frame import renderer_script

        renderer_script()  # a checkout without the built renderer: refused now, with the hint
    # The upstream MCP servers' resources and prompts first: the extensions keep them for what is not theirs.
    extensions = (UpstreamMcpExtension(), *extensions)
    mcp = McpGateway(mcp_services(pincer), default_session=tokens.session_named(settings.session), extensions=extensions)
    mcp_app, manager = mcp.asgi_app(max_body_bytes=settings.max_body_bytes)
    unauthenticated = UnauthenticatedRefusals()
    from pincer.llm.runner import RunManager

    runs = RunManager(agent=lambda: pincer.agent, runs=pincer.runs)

    def refusal_metrics() -> dict[str, Any]:
        return {"refused_unauthenticated": unauthenticated.snapshot()}

    def build_rest() -> ASGIApp:
        from pincer.gateway.rest import create_rest_app

        return create_rest_app(rest_services(pincer), metrics=refusal_metrics, runs=runs, tasks=mcp.tasks)

    hooks = HooksEndpoint(hook_services(pincer), refusals=unauthenticated)
    # Sign-in failures count where wrong bearer tokens are counted, and toward the same
    # per-address failure window as webhook deliveries.
    ui_auth = UiAuth(
        tokens=tokens, store=pincer.sign_ins, refusals=unauthenticated, failures=hooks.failures,
        max_failures=lambda: pincer.config.triggers.max_failures_per_minute,
    )  # fmt: skip

    def build_ui() -> ASGIApp:
        from pincer.gateway.ui.app import create_ui_app

        return create_ui_app(dashboard_services(pincer), auth=ui_auth, runs=runs, canvas=lambda: canvas.board is not None)

    # Built at their first request (lazy.py): a gateway serving only MCP never imports them.
    rest, ui = LazyApp(build_rest), LazyApp(build_ui)
    canvas = LiveCanvas(canvas_services(pincer), runs=runs, auth=ui_auth)
    canvas.attach(mcp)

    async def follow_canvas(config: Config) -> None:
        await canvas.follow(config.gateway.canvas)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.running(), manager.run(), runs.running():
            await canvas.follow(settings.canvas)
            unfollow = pincer.follow_config(follow_canvas)  # [gateway] canvas edited: on or off at once
            try:
                yield
            finally:
                unfollow()
                await canvas.follow(False)

    inner = Starlette(
        routes=[
            *probe_routes(probe_services(pincer)),
            favicon_route(),
            Route("/mcp", mcp_app, methods=["GET", "POST", "DELETE"]),
            Mount("/api/v1", app=rest),
            redirect_bare_prefix(),
            Mount(UI_PREFIX, app=ui),
        ],
        lifespan=lifespan,
    )

    async def record_refusal(refusal: Refusal) -> None:
        request = CallRequest(tool=refusal.tool, args={}, session=refusal.session, caller=refusal.caller)
        await pincer.dispatcher.reject(
            request, Denied(f"request refused before the call ({refusal.code}): {refusal.message}")
        )

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        # /mcp is the hot path: straight to its endpoint, without Starlette's routing layers.
        if scope["type"] == "http" and scope.get("path") == "/mcp":
            await mcp_app(scope, receive, send)
        elif scope["type"] == "http" and scope.get("path", "").startswith(HOOKS_PREFIX):
            await hooks(scope, receive, send)
        elif (pages := canvas.pages) is not None and scope["type"] == "http" and scope.get("path", "").startswith(CANVAS_PATHS):
            await pages(scope, receive, send)  # its own CSP: not under the dashboard's headers
        else:
            await inner(scope, receive, send)

    guarded = Guard(
        route,
        tokens=tokens,
        max_body_bytes=settings.max_body_bytes,
        bound_host=bound_host or settings.host,
        allowed_hosts=settings.allowed_hosts,
        allowed_origins=settings.allowed_origins,
        public_paths=("/healthz", "/readyz", UI_PREFIX, FAVICON_PATH),
        self_authenticated_prefixes=(HOOKS_PREFIX, UI_PREFIX + "/"),
        opaque_origin_prefixes=(FRAME_PREFIX,),  # the canvas frame's CSP reports come from Origin: null
        on_refused=record_refusal,
        unauthenticated=unauthenticated,
    )
    if TRACING.on:
        from pincer.gateway.tracing import TraceRequests

        return Gateway(app=TraceRequests(guarded), mcp=mcp, runs=runs, canvas=canvas, tokens=tokens)
    return Gateway(app=guarded, mcp=mcp, runs=runs, canvas=canvas, tokens=tokens)
