"""``/favicon.ico`` for the whole gateway, without a token: a browser asks for it on every page
(the dashboard's, the canvas', a JSON answer opened in a tab) without sending any credential, and
answering 401 only filled the log with a warning per page load. The icon is public: it is the
same file served under ``/ui/static/``."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

__all__ = ["FAVICON_PATH", "favicon_route"]

FAVICON_PATH = "/favicon.ico"
_ICON = Path(__file__).resolve().parent / "static" / "favicon.ico"


async def _favicon(request: Request) -> Response:
    return FileResponse(_ICON, media_type="image/x-icon", headers={"Cache-Control": "public, max-age=86400"})


def favicon_route() -> Route:
    return Route(FAVICON_PATH, _favicon, methods=["GET", "HEAD"])
