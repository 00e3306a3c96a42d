"""The dashboard's ASGI app: its routes, its static files, its sign-in and security headers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from pincer.gateway.ui import (
    approvals,
    audit,
    credential_connect,
    credentials,
    grants,
    installed,
    mcp,
    oidc,
    overview,
    people,
    skills,
    tasks,
    tools,
)
from pincer.gateway.ui import runs as run_pages
from pincer.gateway.ui.auth import UiAuth, exception_handlers, login, login_form, logout, with_ui_auth
from pincer.gateway.ui.render import STATIC_DIR, Pages, security_headers

if TYPE_CHECKING:
    from pincer.gateway.ui.services import DashboardServices
    from pincer.llm.runner import RunManager

__all__ = ["create_ui_app"]


def create_ui_app(
    services: DashboardServices, *, auth: UiAuth, runs: RunManager | None = None, routes: Sequence[BaseRoute] = (),
    canvas: bool | Callable[[], bool] = False,
) -> ASGIApp:
    """The dashboard, to be mounted at ``/ui``. ``runs`` is the gateway's RunManager (live
    transcripts, Cancel); ``routes`` add pages (they use ``auth.require_identity``); ``canvas``
    puts the canvas pages (served beside, ``gateway/canvas_pages.py``) in the menu (a function:
    asked at each page, since ``[gateway] canvas`` follows config.toml)."""
    app = Starlette(
        routes=[
            Route("/", overview.page, methods=["GET"]),
            Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
            *oidc.routes(),
            *approvals.routes(),
            *audit.routes(),
            *run_pages.routes(),
            *tasks.routes(),
            *tools.routes(),
            *grants.routes(),
            *skills.routes(),
            *mcp.routes(),
            *installed.routes(),
            *people.routes(),
            *credential_connect.routes(),
            *credentials.routes(),
            Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
            *routes,
        ],
        exception_handlers=exception_handlers(),
    )
    app.state.services = services
    app.state.pages = Pages(services.shown)
    app.state.runs = runs
    app.state.canvas = canvas
    return security_headers(with_ui_auth(app, auth))
