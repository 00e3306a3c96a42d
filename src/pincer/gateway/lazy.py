"""An ASGI app built at its first request.

The REST API (FastAPI, its routers and their pydantic models) and the dashboard (its pages and
Jinja2 templates) were ~11 MiB of an idle gateway's resident memory (``pincer serve`` 102 -> 91 MiB
without them), and a gateway that only serves MCP never uses them. Mounted through ``LazyApp`` they are imported and
built when the first request for them arrives, then kept; every request goes through the same
app with the same rules as if it had been built at start-up.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["LazyApp"]


class LazyApp:
    """``build()`` runs once, at the first request (synchronously: no other request can see it
    half-built on the event loop); a ``build`` that raises is tried again at the next request."""

    __slots__ = ("_build", "_app")

    def __init__(self, build: Callable[[], ASGIApp]) -> None:
        self._build = build
        self._app: ASGIApp | None = None

    @property
    def built(self) -> bool:
        return self._app is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is None:
            app = self._app = self._build()
        await app(scope, receive, send)
