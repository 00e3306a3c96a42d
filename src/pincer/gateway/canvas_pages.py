"""The canvas pages: ``/ui/canvas/{session}`` (behind sign-in) and the sandboxed frames it shows.

- ``GET /ui/canvas/{session}``: the page. It shows each part of the canvas in a frame of its
  own (``canvas/frame.py``): pincer's A2UI surfaces, the agent's HTML, or a navigated URL, each
  a new ``<iframe sandbox="allow-scripts">`` per rendering. A non-main session sees only its
  own canvas; main sees every one.
- ``GET /ui/canvas/{session}/state?after=N``: waits (at most ``STATE_WAIT_S``) until the
  canvas's revision passes N, then answers its state with the renderings to show.
- ``GET /ui/canvas/{session}/events``: the canvas's recent events (at most ``MAX_KEPT_EVENTS``).
- ``POST /ui/canvas/{session}/events``: an action, relayed by the page from one of its frames,
  naming the frame and the rendering it showed there (the page knows a message's frame by its
  window, never by what the message says). The board judges it (``canvas/drawing.py``).
- ``GET /ui/canvas-frame/{session}/{token}/html/{render}`` (the agent HTML document),
  ``.../a2ui/{render}`` (pincer's A2UI document) and ``.../view`` (a static view of both, for
  snapshots): each kind with its own token, since a sandboxed document sends no cookie. A frame
  document is served only to its embedding page, never to a navigation a frame started itself
  (``Sec-Fetch-Site`` cross-site: an opaque origin's), so each frame shows what the page put there.
- ``POST /ui/canvas-frame/{session}/{token}/csp-report/{render}``: the browser's CSP violation
  reports (``report-uri`` and ``report-to`` bodies), untrusted ``csp_violation`` events.

Sign-in is the dashboard's (``gateway/ui/auth.py``): a person signs in at ``/ui/login`` and
holds a session cookie; the page's posts carry the sign-in's CSRF token in ``X-CSRF-Token``.
These routes are an app of their own (not under the dashboard's, whose security headers would
replace the frames' policies), wrapped with the same sign-in.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from pincer.canvas.board import CanvasBoard, Reporter, check_session_name
from pincer.canvas.drawing import A2uiRender, HtmlRender
from pincer.canvas.frame import (
    a2ui_document,
    a2ui_frame_csp,
    html_document,
    html_frame_csp,
    url_frame_csp,
    view_csp,
    view_document,
)
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
_EVENT_SHAPE = 'send {"frame": "html" or "a2ui", "render": ..., "name": ..., "data": ...}; the canvas page does'



async def signed_in(request: Request) -> UiIdentity | None:
    """Who is signed in to the gateway's pages (None: nobody)."""
    return await current_identity(request)


def _error(status: int, code: str, message: str, hint: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if hint:
        body["hint"] = hint
    return JSONResponse({"error": body}, status_code=status)


async def _viewer(request: Request, *, page: bool = False) -> tuple[UiIdentity, str] | Response:
    """The signed-in viewer and the canvas session it may see, or the refusal (for the page
    itself: SignInRequired, which the sign-in answers with its login page)."""
    viewer = await signed_in(request)
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
<html lang="en"><head><meta charset="utf-8"><title>canvas: {title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style nonce="{nonce}">
html, body {{ margin: 0; height: 100%; font: 14px system-ui, sans-serif; }}
body {{ display: flex; flex-direction: column; }}
header {{ padding: 6px 12px; background: #f3f4f6; border-bottom: 1px solid #ddd; }}
header a {{ color: #1d4ed8; margin-right: 12px; }}
h1 {{ display: inline; font-size: inherit; font-weight: normal; }}
noscript p {{ margin: 12px; }}
#canvas {{ flex: 1; display: flex; flex-direction: column; min-height: 0; }}
#canvas iframe {{ border: 0; width: 100%; display: block; }}
#canvas iframe.agent {{ flex: 1; min-height: 240px; }}
#canvas iframe.a2ui {{ height: 160px; max-height: 70vh; border-bottom: 1px solid #eee; }}
.hidden {{ display: none !important; }}
</style></head>
<body>
<header><a href="/ui/">Dashboard</a><h1>canvas <b>{title}</b></h1> <span id="status" role="status"></span></header>
<noscript><p>The canvas shows what an agent draws by script: turn JavaScript on for this page.</p></noscript>
<div id="canvas" class="hidden"><div id="a2ui-slot"></div><div id="agent-slot" class="hidden"></div></div>
<script nonce="{nonce}">
(function () {{
  const session = {session_json};
  const frames = {frames_json};
  const urlOrigin = {url_origin_json} && new URL({url_origin_json}).origin;
  const csrf = {csrf_json};
  const base = "/ui/canvas/" + encodeURIComponent(session);
  const canvas = document.getElementById("canvas");
  const slots = {{a2ui: document.getElementById("a2ui-slot"), agent: document.getElementById("agent-slot")}};
  const status = document.getElementById("status");
  // The canvas' state, and what became of the last action the page sent (a click's feedback).
  let mood = "", note = "";
  function tell() {{ status.textContent = [mood, note].filter(Boolean).join(" "); }}
  // Which frame a message came from is known by its window, never by what it says. The
  // navigated page's window is not here: nothing it sends is relayed.
  const sources = new Map();
  const shown = {{}};
  let revision = -1;
  function place(slot, key, make) {{
    if (shown[slot] && shown[slot].key === key) return;
    if (shown[slot]) shown[slot].el.remove();
    shown[slot] = null;
    slots[slot].textContent = "";
    if (key === null) return;
    const el = make();
    slots[slot].appendChild(el);
    shown[slot] = {{key: key, el: el}};
    if (el.tagName === "IFRAME" && el.dataset.frame) {{
      sources.set(el.contentWindow, {{frame: el.dataset.frame, render: el.dataset.render}});
      if (sources.size > 64) sources.delete(sources.keys().next().value);
    }}
  }}
  function frame(kind, render) {{
    const el = document.createElement("iframe");
    el.setAttribute("sandbox", "allow-scripts");
    el.setAttribute("referrerpolicy", "no-referrer");
    el.className = kind === "a2ui" ? "a2ui" : "agent";
    el.title = kind === "a2ui" ? "pincer's A2UI surfaces" : "the agent's HTML";
    el.dataset.frame = kind;
    el.dataset.render = render;
    el.src = frames[kind] + render;
    return el;
  }}
  function page(url, csp) {{
    if (!("csp" in HTMLIFrameElement.prototype)) {{
      // This browser cannot make the page keep to its origin: it is not shown at all.
      const note = document.createElement("p");
      note.textContent = "The agent shows " + url + " (this browser cannot confine it, so it is not shown here).";
      return note;
    }}
    const el = document.createElement("iframe");
    el.setAttribute("sandbox", "allow-scripts");
    el.setAttribute("referrerpolicy", "no-referrer");
    el.setAttribute("csp", csp);
    el.className = "agent";
    el.title = "a page the agent shows";
    el.src = url;
    return el;
  }}
  function show(state) {{
    if (state.url && new URL(state.url).origin !== urlOrigin) {{ location.reload(); return; }}
    canvas.classList.toggle("hidden", !state.visible);
    mood = !state.visible ? "(nothing shown: the agent has not presented the canvas)" : state.waiting ? "(the agent waits for you)" : "";
    tell();
    place("a2ui", state.a2ui_render, () => frame("a2ui", state.a2ui_render));
    const agent = state.url ? "url:" + state.url : state.html_render;
    place("agent", agent, () => state.url ? page(state.url, state.url_csp) : frame("html", state.html_render));
    slots.agent.classList.toggle("hidden", agent === null);
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
        mood = "(reconnecting)";
        tell();
        await new Promise((r) => setTimeout(r, 2000));
      }}
    }}
  }}
  window.addEventListener("message", (event) => {{
    const from = sources.get(event.source);
    const msg = event.data;
    if (!from || !msg) return;
    if (from.frame === "a2ui" && msg.type === "pincer-size" && shown.a2ui && shown.a2ui.el.contentWindow === event.source) {{
      shown.a2ui.el.style.height = Math.max(40, Math.min(Number(msg.height) || 0, 4000) + 4) + "px";
      return;
    }}
    if (msg.type !== "pincer-canvas" || typeof msg.name !== "string") return;
    if (from.frame === "a2ui" && msg.name !== "a2ui_action") return;
    fetch(base + "/events", {{
      method: "POST", credentials: "same-origin",
      headers: {{"Content-Type": "application/json", "X-CSRF-Token": csrf}},
      body: JSON.stringify({{frame: from.frame, render: from.render, name: msg.name, data: msg.data}}),
    }}).then((r) => {{ note = r.ok ? "(sent: " + msg.name + ")" : "(an action was not delivered: " + r.status + ")"; tell(); }})
      .catch(() => {{ note = "(an action was not delivered)"; tell(); }});
  }});
  follow();
}})();
</script>
</body></html>
"""


def _origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


def _url_origin(url: str | None) -> str | None:
    if not url:
        return None
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _frame_opened_by_a_frame(request: Request) -> bool:
    """A navigation a sandboxed frame started itself (its origin is opaque, so the browser says
    cross-site): a frame document is served only to the page that embeds it, or a person."""
    return request.headers.get("sec-fetch-site", "") in ("cross-site", "same-site")


def canvas_routes(board: CanvasBoard) -> list[BaseRoute]:
    """The canvas routes over ``board`` (mounted at the app's root)."""

    def frame_base(session: str, kind: str) -> str:
        return f"{FRAME_PREFIX}{session}/{board.frame_token(session, kind)}"

    async def page(request: Request) -> Response:
        found = await _viewer(request, page=True)
        if isinstance(found, Response):
            return found
        viewer, session = found
        nonce = secrets.token_urlsafe(16)
        frames = {"html": frame_base(session, "html") + "/html/", "a2ui": frame_base(session, "a2ui") + "/a2ui/"}
        url_origin = _url_origin(board.get(session).url)
        html = _PAGE.format(
            title=session, nonce=nonce, session_json=_js_value(session), frames_json=_js_value(frames), url_origin_json=_js_value(url_origin),
            csrf_json=_js_value(viewer.csrf_token),
        )  # fmt: skip
        # Frames: this canvas's own documents (their path), and the navigated page's origin.
        # The same rule stops a frame from navigating itself anywhere else.
        frame_src = f"{_origin(request)}{FRAME_PREFIX}{session}/" + (f" {url_origin}" if url_origin else "")
        csp = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
            f"frame-src {frame_src}; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
        return HTMLResponse(html, headers=_page_headers(csp))

    async def state(request: Request) -> Response:
        found = await _viewer(request)
        if isinstance(found, Response):
            return found
        _, session = found
        try:
            after = int(request.query_params.get("after", "-1"))
        except ValueError:
            return _error(400, "invalid_request", "after must be a revision number", "send back the revision the last answer had")
        canvas = await board.wait_change(session, after, STATE_WAIT_S)
        origin = _url_origin(canvas.url)
        answer = {**canvas.page_state(), "url_csp": url_frame_csp(origin) if origin else None}
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

    async def recent(request: Request) -> Response:
        found = await _viewer(request)
        if isinstance(found, Response):
            return found
        _, session = found
        return JSONResponse({"session": session, "events": [e.to_dict() for e in board.get(session).events]}, headers={"Cache-Control": "no-store"})

    async def events(request: Request) -> Response:
        found = await _viewer(request)
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
            return _error(400, "invalid_request", "a canvas event is a JSON object", _EVENT_SHAPE)
        if not isinstance(sent, dict) or not isinstance(sent.get("name"), str) or not sent["name"]:
            return _error(400, "invalid_request", "a canvas event needs a name", _EVENT_SHAPE)
        if sent.get("frame") not in ("html", "a2ui") or not isinstance(sent.get("render"), str):
            return _error(400, "invalid_request", "a canvas event names the frame (html or a2ui) and the rendering it came from", _EVENT_SHAPE)
        # A gesture the page relays from pincer's A2UI frame is this signed-in person's.
        relay = Reporter(label=f"the canvas page of session {viewer.name}", person_main=viewer.is_main)
        try:
            event = board.act(session, frame=sent["frame"], render_id=sent["render"], name=sent["name"][:128], data=sent.get("data"), reporter=relay)
        except PincerError as exc:
            return _error(exc.http_status, exc.code, exc.message, exc.hint)
        answer = {"recorded": True, "event": event.kind, "name": event.name, "trusted": event.trusted, "run": event.run}
        return JSONResponse(answer, status_code=202)

    def _frame_session(request: Request, kind: str) -> str | Response:
        try:
            session = check_session_name(request.path_params["session"])
        except UsageError as exc:
            return _error(400, exc.code, exc.message, exc.hint)
        if not board.is_frame_token(session, kind, request.path_params["token"]):
            return _error(404, "canvas_not_found", "no such canvas frame", "open the canvas page at /ui/canvas/SESSION")
        return session

    def _frame_document(request: Request, kind: str) -> tuple[str, Any] | Response:
        session = _frame_session(request, kind)
        if isinstance(session, Response):
            return session
        if _frame_opened_by_a_frame(request):
            return _error(403, "forbidden", "a canvas frame cannot open another canvas document", "open the canvas page at /ui/canvas/SESSION")
        render = board.render(session, request.path_params["render"])
        expected = HtmlRender if kind == "html" else A2uiRender
        if not isinstance(render, expected):
            return _error(404, "canvas_changed", "the canvas no longer keeps that rendering", "reload the canvas page: it shows the canvas as it is now")
        return session, render

    async def html_frame(request: Request) -> Response:
        found = _frame_document(request, "html")
        if isinstance(found, Response):
            return found
        session, render = found
        report = f"{frame_base(session, 'html')}/csp-report/{render.id}"
        headers = _page_headers(html_frame_csp(report_url=report, frame_ancestors=_origin(request)))
        return HTMLResponse(html_document(session, render), headers=headers)

    async def a2ui_frame(request: Request) -> Response:
        found = _frame_document(request, "a2ui")
        if isinstance(found, Response):
            return found
        session, render = found
        nonce = secrets.token_urlsafe(16)
        headers = _page_headers(a2ui_frame_csp(nonce=nonce, frame_ancestors=_origin(request)))
        return HTMLResponse(a2ui_document(session, render, nonce=nonce), headers=headers)

    async def view(request: Request) -> Response:
        session = _frame_session(request, "view")
        if isinstance(session, Response):
            return session
        canvas = board.get(session)
        state = canvas.page_state()
        frames = {
            "a2ui": f"{frame_base(session, 'a2ui')}/a2ui/{state['a2ui_render']}" if state["a2ui_render"] else "",
            "html": f"{frame_base(session, 'html')}/html/{state['html_render']}" if state["html_render"] else "",
        }
        csp = view_csp(frame_src=f"{_origin(request)}{FRAME_PREFIX}{session}/")
        return HTMLResponse(view_document(session, frames), headers=_page_headers(csp))

    async def csp_report(request: Request) -> Response:
        session = _frame_session(request, "html")
        if isinstance(session, Response):
            return session
        body = await _read_bounded(request, MAX_REPORT_BYTES)
        if body is None:
            return _error(413, "body_too_large", f"a CSP report is larger than {MAX_REPORT_BYTES} bytes")
        token = board.frame_token(session, "html")
        for report in _reports(body):
            # The frame's URL carries its token: a model reading the report needs neither.
            report = {k: v.replace(token, "TOKEN") for k, v in report.items()}
            try:
                board.report(session, request.path_params["render"], report)
            except PincerError as exc:  # over the event rate: the browser is told, nothing else breaks
                return _error(exc.http_status, exc.code, exc.message, exc.hint)
        return Response(status_code=204)

    return [
        Route("/ui/canvas/{session}", page, methods=["GET"]),
        Route("/ui/canvas/{session}/state", state, methods=["GET"]),
        Route("/ui/canvas/{session}/events", events, methods=["POST"]),
        Route("/ui/canvas/{session}/events", recent, methods=["GET"]),
        Route(FRAME_PREFIX + "{session}/{token}/html/{render}", html_frame, methods=["GET"]),
        Route(FRAME_PREFIX + "{session}/{token}/a2ui/{render}", a2ui_frame, methods=["GET"]),
        Route(FRAME_PREFIX + "{session}/{token}/view", view, methods=["GET"]),
        Route(FRAME_PREFIX + "{session}/{token}/csp-report/{render}", csp_report, methods=["POST"]),
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


def _js_value(value: Any) -> str:
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
