"""The canvas pages: ``/ui/canvas/{session}`` (behind sign-in) and the sandboxed frame it shows.

- ``GET /ui/canvas/{session}``: the page, with the canvas in ``<iframe sandbox="allow-scripts">``
  (no ``allow-same-origin``: pushed HTML never runs with the gateway's origin). A non-main
  session sees only its own canvas; main sees every one.
- ``GET /ui/canvas/{session}/state?after=N``: waits (at most ``STATE_WAIT_S``) until the
  canvas's revision passes N, then answers its state; the page reloads the frame on a change.
- ``GET /ui/canvas/{session}/events``: the canvas's recent events (at most ``MAX_KEPT_EVENTS``).
- ``POST /ui/canvas/{session}/events``: a person's action, forwarded by the page from the
  frame's ``pincer.send``; it reaches the run that drew the canvas, trusted only from a
  signed-in main session.
- ``GET /ui/canvas-frame/{session}/{token}``: the canvas document, under the frame CSP
  (``canvas/frame.py``). A sandboxed document sends no cookie or bearer token, so the frame and
  its CSP reports authenticate with ``token``, a per-session HMAC only the signed-in page knows.
- ``POST /ui/canvas-frame/{session}/{token}/csp-report``: the browser's CSP violation reports
  (``report-uri`` and ``report-to`` bodies), recorded as untrusted ``csp_violation`` events.

Sign-in is the dashboard's (``gateway/ui/auth.py``): a person signs in at ``/ui/login`` and
holds a session cookie; the page's posts carry the sign-in's CSRF token in ``X-CSRF-Token``.
These routes are an app of their own (not under the dashboard's, whose security headers would
replace the frame's CSP), wrapped with the same sign-in.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from pincer.canvas.board import CanvasBoard, CanvasEvent, check_session_name
from pincer.canvas.frame import frame_csp, frame_document
from pincer.core.errors import PincerError, UsageError
from pincer.gateway.ui.auth import (
    CsrfRefused,
    SignInRequired,
    UiAuth,
    UiIdentity,
    current_identity,
    exception_handlers,
    require_csrf,
    with_ui_auth,
)

__all__ = ["canvas_app", "canvas_routes", "signed_in", "FRAME_PREFIX", "CANVAS_PREFIX", "CANVAS_PATHS", "STATE_WAIT_S", "MAX_REPORT_BYTES"]

logger = logging.getLogger(__name__)

CANVAS_PREFIX = "/ui/canvas/"
FRAME_PREFIX = "/ui/canvas-frame/"
CANVAS_PATHS = (CANVAS_PREFIX, FRAME_PREFIX)  # what the gateway hands to canvas_app
STATE_WAIT_S = 25.0  # a long poll answers within this, changed or not (proxies drop silent requests)
MAX_REPORT_BYTES = 16_384
MAX_EVENT_BODY_BYTES = 32_768
_EVENT_KINDS = frozenset({"a2ui_action", "eval_result"})


def signed_in(request: Request) -> UiIdentity | None:
    """Who is signed in to the gateway's pages (None: nobody)."""
    return current_identity(request)


def _error(status: int, code: str, message: str, hint: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if hint:
        body["hint"] = hint
    return JSONResponse({"error": body}, status_code=status)


def _viewer(request: Request, *, page: bool = False) -> tuple[UiIdentity, str] | Response:
    """The signed-in viewer and the canvas session it may see, or the refusal (for the page
    itself: SignInRequired, which the sign-in answers with its login page)."""
    viewer = signed_in(request)
    if viewer is None:
        if page:
            raise SignInRequired(request.url.path)
        return _error(401, "unauthorized", "sign in to see a canvas", "sign in at /ui/login with the token `pincer token` prints")
    try:
        session = check_session_name(request.path_params["session"])
    except UsageError as exc:
        return _error(400, exc.code, exc.message, exc.hint)
    if not viewer.is_main and viewer.name != session:
        # Not found, not forbidden: a session does not learn which other canvases exist.
        return _error(404, "canvas_not_found", f"no canvas {session!r} for session {viewer.name!r}", "open your own session's canvas")
    return viewer, session


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>canvas: {title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style nonce="{nonce}">
html, body {{ margin: 0; height: 100%; font: 14px system-ui, sans-serif; }}
header {{ padding: 6px 12px; background: #f3f4f6; border-bottom: 1px solid #ddd; }}
#canvas {{ border: 0; width: 100%; height: calc(100% - 34px); display: block; }}
.hidden {{ display: none !important; }}
</style></head>
<body>
<header>canvas <b>{title}</b> <span id="status"></span></header>
<iframe id="canvas" class="hidden" sandbox="allow-scripts" referrerpolicy="no-referrer" title="canvas"></iframe>
<script nonce="{nonce}">
(function () {{
  const session = {session_json};
  const frameBase = {frame_json};
  const csrf = {csrf_json};
  const base = "/ui/canvas/" + encodeURIComponent(session);
  const frame = document.getElementById("canvas");
  frame.dataset.frame = frameBase;
  const status = document.getElementById("status");
  let revision = -1;
  function show(state) {{
    frame.classList.toggle("hidden", !state.visible);
    status.textContent = !state.visible ? "(hidden)" : state.waiting ? "(the agent waits for you)" : "";
    const src = state.url ? state.url : frameBase + "?r=" + state.content;
    if (frame.getAttribute("src") !== src) frame.setAttribute("src", src);
    document.body.dataset.revision = String(state.revision);
    document.body.dataset.waiting = String(state.waiting);
  }}
  async function follow() {{
    for (;;) {{
      try {{
        const response = await fetch(base + "/state?after=" + revision, {{credentials: "same-origin", headers: {{"Accept": "application/json"}}}});
        if (!response.ok) throw new Error("state " + response.status);
        const state = await response.json();
        if (state.revision !== revision) {{ revision = state.revision; show(state); }}
      }} catch (e) {{
        status.textContent = "(reconnecting)";
        await new Promise((r) => setTimeout(r, 2000));
      }}
    }}
  }}
  window.addEventListener("message", (event) => {{
    if (event.source !== frame.contentWindow) return;
    const msg = event.data;
    if (!msg || msg.type !== "pincer-canvas" || typeof msg.name !== "string") return;
    fetch(base + "/events", {{
      method: "POST", credentials: "same-origin",
      headers: {{"Content-Type": "application/json", "X-CSRF-Token": csrf}},
      body: JSON.stringify({{name: msg.name, data: msg.data}}),
    }}).catch(() => {{ status.textContent = "(an event was not delivered)"; }});
  }});
  follow();
}})();
</script>
</body></html>
"""


def canvas_routes(board: CanvasBoard) -> list[BaseRoute]:
    """The canvas routes over ``board`` (mounted at the app's root)."""

    async def page(request: Request) -> Response:
        found = _viewer(request, page=True)
        if isinstance(found, Response):
            return found
        viewer, session = found
        nonce = secrets.token_urlsafe(16)
        frame = f"{FRAME_PREFIX}{session}/{board.frame_token(session)}"
        html = _PAGE.format(
            title=session, nonce=nonce, session_json=_js(session), frame_json=_js(frame), csrf_json=_js(viewer.csrf_token),
        )  # fmt: skip
        csp = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
            "frame-src 'self' https: http:; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        return HTMLResponse(html, headers=_page_headers(csp))

    async def state(request: Request) -> Response:
        found = _viewer(request)
        if isinstance(found, Response):
            return found
        _, session = found
        try:
            after = int(request.query_params.get("after", "-1"))
        except ValueError:
            return _error(400, "invalid_request", "after must be a revision number", "send back the revision the last answer had")
        canvas = await board.wait_change(session, after, STATE_WAIT_S)
        return JSONResponse(canvas.state(), headers={"Cache-Control": "no-store"})

    async def recent(request: Request) -> Response:
        found = _viewer(request)
        if isinstance(found, Response):
            return found
        _, session = found
        return JSONResponse({"session": session, "events": [e.to_dict() for e in board.get(session).events]}, headers={"Cache-Control": "no-store"})

    async def events(request: Request) -> Response:
        found = _viewer(request)
        if isinstance(found, Response):
            return found
        viewer, session = found
        try:
            require_csrf(viewer, {"csrf_token": request.headers.get("x-csrf-token", "")})
        except CsrfRefused:
            return _error(403, "csrf", "a canvas event must come from the canvas page", "reload the canvas page (its posts carry the sign-in's X-CSRF-Token)")
        body = await _read_bounded(request, MAX_EVENT_BODY_BYTES)
        if body is None:
            return _error(413, "body_too_large", f"a canvas event is larger than {MAX_EVENT_BODY_BYTES} bytes", "send less data with the action")
        try:
            sent = json.loads(body)
        except ValueError:
            return _error(400, "invalid_request", "a canvas event is a JSON object", 'send {"name": ..., "data": ...}')
        if not isinstance(sent, dict) or not isinstance(sent.get("name"), str) or not sent["name"]:
            return _error(400, "invalid_request", "a canvas event needs a name", 'send {"name": ..., "data": ...}')
        name, data = sent["name"][:128], sent.get("data")
        kind = name if name in _EVENT_KINDS else "html_event"
        label = str(data.get("name", name))[:128] if kind == "a2ui_action" and isinstance(data, dict) else name
        trusted = viewer.is_main  # only a signed-in main session's actions are trusted
        try:
            event = board.record(
                CanvasEvent(
                    session=session, kind=kind, name=label, data=data if isinstance(data, dict) else {"value": data},
                    trusted=trusted, source=f"canvas page (session {viewer.name})",
                )
            )
        except PincerError as exc:
            return _error(exc.http_status, exc.code, exc.message, exc.hint)
        return JSONResponse({"recorded": True, "event": event.kind, "name": event.name, "trusted": event.trusted}, status_code=202)

    def _frame_session(request: Request) -> str | Response:
        try:
            session = check_session_name(request.path_params["session"])
        except UsageError as exc:
            return _error(400, exc.code, exc.message, exc.hint)
        if not board.is_frame_token(session, request.path_params["token"]):
            return _error(404, "canvas_not_found", "no such canvas frame", "open the canvas page at /ui/canvas/SESSION")
        return session

    async def frame(request: Request) -> Response:
        session = _frame_session(request)
        if isinstance(session, Response):
            return session
        report = f"{FRAME_PREFIX}{session}/{board.frame_token(session)}/csp-report"
        origin = f"{request.url.scheme}://{request.url.netloc}"
        headers = _page_headers(frame_csp(report_url=report, frame_ancestors=origin))
        return HTMLResponse(frame_document(board.get(session)), headers=headers)

    async def csp_report(request: Request) -> Response:
        session = _frame_session(request)
        if isinstance(session, Response):
            return session
        body = await _read_bounded(request, MAX_REPORT_BYTES)
        if body is None:
            return _error(413, "body_too_large", f"a CSP report is larger than {MAX_REPORT_BYTES} bytes")
        token = board.frame_token(session)
        for report in _reports(body):
            # The frame's URL carries its token: a model reading the report needs neither.
            report = {k: v.replace(token, "TOKEN") for k, v in report.items()}
            try:
                board.record(
                    CanvasEvent(
                        session=session, kind="csp_violation", name=str(report.get("violated-directive") or report.get("effective-directive") or "csp"),
                        data=report, trusted=False, source="the browser's CSP report",
                    )
                )
            except PincerError as exc:  # over the event rate: the browser is told, nothing else breaks
                return _error(exc.http_status, exc.code, exc.message, exc.hint)
        return Response(status_code=204)

    return [
        Route("/ui/canvas/{session}", page, methods=["GET"]),
        Route("/ui/canvas/{session}/state", state, methods=["GET"]),
        Route("/ui/canvas/{session}/events", events, methods=["POST"]),
        Route("/ui/canvas/{session}/events", recent, methods=["GET"]),
        Route(FRAME_PREFIX + "{session}/{token}", frame, methods=["GET"]),
        Route(FRAME_PREFIX + "{session}/{token}/csp-report", csp_report, methods=["POST"]),
    ]


def canvas_app(board: CanvasBoard, *, auth: UiAuth) -> ASGIApp:
    """The canvas routes as one app, with the dashboard's sign-in."""
    return with_ui_auth(Starlette(routes=canvas_routes(board), exception_handlers=exception_handlers()), auth)


def _page_headers(csp: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": csp,
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


def _js(value: str) -> str:
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


async def _read_bounded(request: Request, limit: int) -> bytes | None:
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            return None
    return bytes(body)


_REPORT_KEYS = ("blocked-uri", "violated-directive", "effective-directive", "document-uri", "disposition", "source-file", "line-number")


def _reports(body: bytes) -> list[dict[str, Any]]:
    """The violations in a ``report-uri`` body (``{"csp-report": {...}}``) or a ``report-to``
    batch (``[{"type": "csp-violation", "body": {...}}]``), each cut to the fields a person
    reads (camelCase report-to names mapped to report-uri's)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    found: list[dict[str, Any]] = []
    if isinstance(parsed, dict) and isinstance(parsed.get("csp-report"), dict):
        found.append(parsed["csp-report"])
    elif isinstance(parsed, list):
        for item in parsed[:20]:
            if isinstance(item, dict) and item.get("type") == "csp-violation" and isinstance(item.get("body"), dict):
                raw = item["body"]
                found.append({
                    "blocked-uri": raw.get("blockedURL"), "effective-directive": raw.get("effectiveDirective"),
                    "violated-directive": raw.get("effectiveDirective"), "document-uri": raw.get("documentURL"),
                    "disposition": raw.get("disposition"), "source-file": raw.get("sourceFile"), "line-number": raw.get("lineNumber"),
                })  # fmt: skip
    return [{k: str(r[k])[:500] for k in _REPORT_KEYS if r.get(k) is not None} for r in found]
