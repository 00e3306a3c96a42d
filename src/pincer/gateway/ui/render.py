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
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pincer.core.display import honest_block, honest_json, honest_text
from pincer.gateway.ui.auth import resolved_identity

__all__ = [
    "CSP", "SECURITY_HEADERS", "Pages", "security_headers", "pages_of", "when", "duration", "count", "age",
    "iso_utc", "shown_value",
]  # fmt: skip

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


def iso_utc(value: float) -> str:
    return dt.datetime.fromtimestamp(float(value), tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def age(seconds: float) -> str:
    """How long ``seconds`` is, in the largest unit that fits: "40 s", "3 min", "2 h", "5 days"."""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{int(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 86_400:
        return f"{int(seconds // 3600)} h"
    days = int(seconds // 86_400)
    return f"{days} day" + ("" if days == 1 else "s")


def when(value: float | None, now: float | None = None) -> Markup:
    """A moment as the page shows it: ``<time datetime>`` holding the UTC time (what a page
    without JavaScript shows; ``dashboard.js`` rewrites it into the viewer's local time) and its
    age ("3 min ago", "in 2 h")."""
    if value is None:
        return Markup('<span class="none">—</span>')
    now = time.time() if now is None else now
    delta = now - float(value)
    relative = "just now" if abs(delta) < 1 else (f"{age(delta)} ago" if delta > 0 else f"in {age(delta)}")
    utc = dt.datetime.fromtimestamp(float(value), tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time datetime="{}" class="when">{}</time> <small class="age">{}</small>').format(
        iso_utc(value), utc, relative
    )


def duration(ms: float | None) -> str:
    """A duration for people: "0.4 ms", "12 ms", "1.5 s", "2 min 5 s"."""
    if ms is None:
        return "—"
    ms = float(ms)
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(int(ms // 1000), 60)
    return f"{minutes} min {seconds} s"


def count(value: float | int | None) -> str:
    """A count as an integer with thousands separated ("1,204"), never "1.0"."""
    return f"{int(value or 0):,}"


def shown_value(value: Any) -> Any:
    """What ``{{ value }}`` prints for values Python would print its own way: no ``None``,
    ``True`` or ``False`` on a page, and a structure as JSON (only raw toggles hold JSON)."""
    if value is None:
        return "—"
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, (dict, list, tuple)):
        return honest_json(value)
    return value


class Pages:
    """The template environment; ``shown`` (the service's leak scanner) redacts every printed value."""

    def __init__(self, shown: Callable[[Any], Any]) -> None:
        self._shown = shown
        self.env = Environment(
            loader=FileSystemLoader(TEMPLATES_DIR),
            autoescape=select_autoescape(enabled_extensions=("html", "svg"), default_for_string=True, default=True),
            undefined=StrictUndefined,
            finalize=self._redacted,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["when"] = when
        self.env.filters["duration"] = duration
        self.env.filters["count"] = count
        self.env.filters["honest"] = lambda v: "—" if v is None else honest_text(str(v))
        self.env.filters["honest_block"] = lambda v: "—" if v is None else honest_block(str(v))
        self.env.filters["honest_json"] = lambda v: honest_json(self.redact(v), indent=2)
        self.env.filters["json"] = lambda v: json.dumps(self.redact(v), ensure_ascii=False, default=str)

    def redact(self, value: Any) -> Any:
        """``value`` with every known secret value masked (``Pincer.shown``, as every view)."""
        return self._shown(value)

    def _redacted(self, value: Any) -> Any:
        if isinstance(value, Markup):
            return value  # built here from values that were escaped and redacted on the way in
        value = shown_value(value)
        if isinstance(value, str) and value:
            return self.redact(value)
        return value

    def render(self, request: Request, template: str, context: Mapping[str, Any], *, status: int = 200,
               headers: Mapping[str, str] | None = None) -> Response:  # fmt: skip
        identity = resolved_identity(request)
        page = self.env.get_template(template).render(
            {
                "identity": identity,
                "csrf_token": identity.csrf_token if identity else "",
                "path": request.url.path,
                "canvas_on": _canvas_on(getattr(request.app.state, "canvas", False)),
                "now": time.time(),
                **context,
            }
        )
        return HTMLResponse(page, status_code=status, headers=dict(headers or {}))


def pages_of(request: Request) -> Pages:
    pages: Pages = request.app.state.pages
    return pages


def _canvas_on(canvas: Any) -> bool:
    """``create_ui_app``'s ``canvas``: a flag, or a function the live canvas answers."""
    return bool(canvas()) if callable(canvas) else bool(canvas)
