"""Pages of the dashboard: Jinja2 templates with autoescape on, behind a strict CSP.

Every value a template prints passes two gates: ``finalize`` runs the leak scanner over it (a
stored secret's value never reaches a page, even where a store kept it by mistake), and
autoescape turns it into text (no tool output, argument or skill text is ever read as HTML).
Templates never use ``|safe`` on such values; the only markup not escaped is what this package
builds itself (the SVG charts, from numbers).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pincer.core.display import honest_json, honest_text
from pincer.gateway.ui.auth import current_identity

if TYPE_CHECKING:
    from pincer.service import Pincer

__all__ = ["CSP", "SECURITY_HEADERS", "Pages", "security_headers", "pincer_of", "pages_of"]

_HERE = Path(__file__).resolve().parent
TEMPLATES_DIR = _HERE / "templates"
STATIC_DIR = _HERE / "static"

# No inline script or style, nothing from elsewhere, never framed, forms post only here.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin, not no-referrer: under no-referrer Chromium sends "Origin: null" with a form
    # post, which the guard (rightly) refuses as a foreign origin.
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


def security_headers(app: ASGIApp) -> ASGIApp:
    """Every answer under ``/ui`` carries the CSP and friends; pages are never cached (they
    show approvals and audit records)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(SECURITY_HEADERS)]
                headers.extend(SECURITY_HEADERS)
                if not scope.get("path", "").startswith("/ui/static/"):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, sending)

    return wrapped


def _when(value: float | None) -> str:
    if value is None:
        return "-"
    return dt.datetime.fromtimestamp(float(value), tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Pages:
    """The template environment over one service (its leak scanner redacts every printed value)."""

    def __init__(self, pincer: Pincer) -> None:
        self._pincer = pincer
        self.env = Environment(
            loader=FileSystemLoader(TEMPLATES_DIR),
            autoescape=select_autoescape(enabled_extensions=("html", "svg"), default_for_string=True, default=True),
            undefined=StrictUndefined,
            finalize=self._redacted,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = _when
        self.env.filters["honest"] = lambda v: honest_text(str(v))
        self.env.filters["honest_json"] = lambda v: honest_json(self.redact(v), indent=2)
        self.env.filters["json"] = lambda v: json.dumps(self.redact(v), ensure_ascii=False, default=str)

    def redact(self, value: Any) -> Any:
        """``value`` with every known secret value masked (``Pincer.shown``, as every view)."""
        return self._pincer.shown(value)

    def _redacted(self, value: Any) -> Any:
        if isinstance(value, str) and value:
            return self.redact(value)
        return value

    def render(self, request: Request, template: str, context: Mapping[str, Any], *, status: int = 200,
               headers: Mapping[str, str] | None = None) -> Response:  # fmt: skip
        identity = current_identity(request)
        page = self.env.get_template(template).render(
            {
                "identity": identity,
                "csrf_token": identity.csrf_token if identity else "",
                "path": request.url.path,
                **context,
            }
        )
        return HTMLResponse(page, status_code=status, headers=dict(headers or {}))


def pincer_of(request: Request) -> Pincer:
    pincer: Pincer = request.app.state.pincer
    return pincer


def pages_of(request: Request) -> Pages:
    pages: Pages = request.app.state.pages
    return pages
