"""The canvas documents, and the policies that keep each in its place.

A canvas is shown as separate documents, never one: what an agent wrote and what pincer rendered
do not share a document, so no agent script can read what a person types into pincer's controls
or click them.

- **The agent HTML document** (:func:`html_document`): pushed HTML and ``canvas eval`` scripts,
  with a bridge whose ``pincer.send`` posts a message to the embedding page. Served under
  :func:`html_frame_csp`: ``sandbox allow-scripts`` (an opaque origin even when opened alone: no
  cookies, storage, popups, forms or top navigation), no network at all, violations reported.
- **pincer's A2UI document** (:func:`a2ui_document`): the renderer (:func:`renderer_script`, the
  A2UI project's, bundled at build time) and the surfaces as JSON data, nothing an agent wrote as markup or script. Served under
  :func:`a2ui_frame_csp`: sandboxed, and only scripts carrying the response's nonce run. A click
  counts only when the browser says a person made it (``event.isTrusted``).
- **The navigated page** is not pincer's document: the page frames it with a required policy
  (:func:`url_frame_csp`, the ``csp`` attribute Chromium enforces on the framed page, or refuses
  to show it) that confines it to its own origin, the one the egress rule let through.
- **The MCP App** (:func:`app_document`): one document for a host's sandbox, with pincer's A2UI in
  it and the agent HTML in a nested sandboxed ``srcdoc`` frame of its own.
- **The snapshot view** (:func:`view_document`): a static document (no script) framing the two.

The embedding page (``gateway/canvas_pages.py``) forbids every frame but these documents
(``frame-src`` with their path), which also stops a frame from navigating itself anywhere else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from pincer.canvas.drawing import A2uiRender, HtmlRender
from pincer.core.errors import ConfigError

__all__ = [
    "html_frame_csp",
    "a2ui_frame_csp",
    "url_frame_csp",
    "view_csp",
    "html_document",
    "a2ui_document",
    "app_document",
    "view_document",
    "MCP_APP_PROTOCOL_VERSION",
    "VIEW_META_KEY",
    "view_state",
    "CANVAS_EVENT_TOOL",
    "renderer_script",
]

MCP_APP_PROTOCOL_VERSION = "2026-01-26"  # @modelcontextprotocol/ext-apps 2.0.4 LATEST_PROTOCOL_VERSION
CANVAS_EVENT_TOOL = "canvas_event"

_STYLE = """
:root { --a2ui-color-primary: #1a56db; }
body { font: 15px/1.4 system-ui, sans-serif; margin: 12px; color: #111; background: #fff; }
.a2ui-surface { display: block; border: 1px solid #ddd; border-radius: 8px; padding: 12px; margin: 8px 0; }
.a2ui-error { color: #9b1c1c; }
"""

# The only way out of a frame: a message to the embedding page, which judges it by the frame.
_FRAME_BRIDGE = """
window.pincer = Object.freeze({
  send(name, data) {
    parent.postMessage({type: "pincer-canvas", name: String(name), data: data === undefined ? null : data}, "*");
  },
});
"""

# pincer's A2UI document also tells the page how tall it is (the page sizes the frame).
_A2UI_SIZE = """
new ResizeObserver(() => parent.postMessage({type: "pincer-size", height: document.documentElement.scrollHeight}, "*"))
  .observe(document.documentElement);
"""

_APP_BRIDGE = """
(function () {
  let nextId = 1;
  const pending = {};
  let view = @@VIEW@@;
  function request(method, params) {
    const id = nextId++;
    window.parent.postMessage({jsonrpc: "2.0", id: id, method: method, params: params}, "*");
    return new Promise((resolve, reject) => { pending[id] = {resolve: resolve, reject: reject}; });
  }
  function status(text) {
    const line = document.getElementById("pincer-status");
    if (line) line.textContent = text;
    document.body.dataset.status = text ? "busy" : "";
  }
  // The view as a state says: A2UI surfaces (the renderer draws them anew) and the agent HTML in
  // a sandboxed srcdoc frame of its own. A host may cache this document: the state of each tool
  // call arrives with its result (ui/notifications/tool-result, _meta "pincer/canvas-view").
  function show(state) {
    view = state;
    const surfaces = document.getElementById("pincer-a2ui");
    if (window.pincerA2ui) window.pincerA2ui.show(state.messages || [], surfaces);
    let frame = document.getElementById("pincer-html");
    if (state.html === null || state.html === undefined) {
      if (frame) frame.remove();
    } else {
      if (!frame) {
        frame = document.createElement("iframe");
        frame.id = "pincer-html";
        frame.setAttribute("sandbox", "allow-scripts");
        frame.setAttribute("referrerpolicy", "no-referrer");
        frame.title = "agent HTML";
        frame.className = "pincer-html";
        document.body.appendChild(frame);
      }
      if (frame.dataset.render !== state.renders.html) {
        frame.dataset.render = state.renders.html;
        frame.srcdoc = state.html;
      }
    }
    document.body.dataset.revision = String(state.revision);
  }
  window.addEventListener("message", (event) => {
    const msg = event.data;
    const html = document.getElementById("pincer-html");
    if (html && event.source === html.contentWindow) {
      // The agent HTML's own frame: relayed as its words, never as pincer's controls.
      if (msg && msg.type === "pincer-canvas" && typeof msg.name === "string" && view.renders.html) relay("html", view.renders.html, msg.name, msg.data);
      return;
    }
    if (event.source !== window.parent || !msg || msg.jsonrpc !== "2.0") return;
    if (msg.method === "ui/notifications/tool-input") { status("the agent is drawing..."); return; }
    if (msg.method === "ui/notifications/tool-cancelled") { status(""); return; }
    if (msg.method === "ui/notifications/tool-result") {
      const params = msg.params || {};
      const state = params._meta && params._meta[@@VIEW_KEY@@];
      if (state && typeof state === "object" && state.session === @@SESSION@@) { show(state); status(""); }
      else if (params.isError) status("the agent's last drawing was refused");
      return;
    }
    if (msg.id === undefined || !(msg.id in pending)) return;
    const waiter = pending[msg.id];
    delete pending[msg.id];
    if (msg.error) waiter.reject(msg.error); else waiter.resolve(msg.result);
  });
  const ready = request("ui/initialize", {
    appInfo: {name: "pincer-canvas", version: "1"},
    appCapabilities: {},
    protocolVersion: @@PROTOCOL@@,
  }).then((result) => {
    window.parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/initialized", params: {}}, "*");
    return result;
  });
  function relay(frame, render, name, data) {
    return ready.then(() => request("tools/call", {name: @@TOOL@@, arguments: {
      session: @@SESSION@@, frame: frame, render: render, name: String(name), data: data === undefined ? null : data}}));
  }
  window.pincer = Object.freeze({ send(name, data) { return relay("a2ui", view.renders.a2ui, name, data); } });
  document.addEventListener("DOMContentLoaded", () => show(view));
})();
"""


RENDERER_ASSET = "a2ui-renderer.js"


@cache
def renderer_script() -> str:
    """The A2UI renderer: the A2UI project's Lit renderer on ``@a2ui/web_core`` and pincer's glue
    (``canvas-renderer/``), bundled at build time (``make a2ui-renderer``, part of ``make setup``)
    and shipped in the wheel. ConfigError when this installation lacks it."""
    asset = resources.files("pincer.canvas").joinpath("assets", RENDERER_ASSET)
    if not asset.is_file():
        raise ConfigError(
            f"pincer's A2UI renderer (canvas/assets/{RENDERER_ASSET}) is not built in this installation",
            hint="run `make setup` (or `make a2ui-renderer`) in pincer's checkout, or install pincer from a wheel; "
            "or set [gateway] canvas = false",
        )
    script = asset.read_text(encoding="utf-8")
    if "</script" in script.lower() or "<!--" in script:  # it is inlined in a <script> element
        raise ConfigError(f"pincer's A2UI renderer (canvas/assets/{RENDERER_ASSET}) cannot be inlined", hint="run `make a2ui-renderer` again")
    return script


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no '</' can close it, no '<!--' can open a comment."""
    return json.dumps(value, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


_NO_NETWORK = [
    "default-src 'none'",
    "img-src data: blob:",
    "font-src data:",
    "media-src 'none'",
    "connect-src 'none'",
    "object-src 'none'",
    "frame-src 'none'",
    "worker-src 'none'",
    "manifest-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
]


def html_frame_csp(*, report_url: str, frame_ancestors: str) -> str:
    """The agent HTML document's policy: sandboxed opaque origin (no ``allow-forms``,
    ``allow-popups``, ``allow-top-navigation``, ``allow-same-origin``), inline scripts and styles
    only, no network, no forms, no frames, and violations reported to ``report_url``."""
    return "; ".join(
        [
            "sandbox allow-scripts",
            *_NO_NETWORK,
            "script-src 'unsafe-inline'",
            "style-src 'unsafe-inline'",
            f"frame-ancestors {frame_ancestors}",
            # report-uri, not report-to: Chromium ignores report-uri when report-to is present,
            # and delivers report-to's reports in batches up to a minute late. The endpoint
            # reads both formats.
            f"report-uri {report_url}",
        ]
    )


def a2ui_frame_csp(*, nonce: str, frame_ancestors: str) -> str:
    """pincer's A2UI document's policy: sandboxed, no network, and only pincer's own scripts
    (those carrying ``nonce``) run: a surface is data, never markup or script."""
    return "; ".join(
        [
            "sandbox allow-scripts",
            *_NO_NETWORK,
            f"script-src 'nonce-{nonce}'",
            f"style-src 'nonce-{nonce}'",
            f"frame-ancestors {frame_ancestors}",
        ]
    )


def url_frame_csp(origin: str) -> str:
    """The policy the page requires of a navigated page (the iframe ``csp`` attribute): its own
    origin only (the egress rule let that through), no forms, frames, plugins or workers. Chromium
    shows the page only if it accepts this (``Allow-CSP-From``), and then enforces it."""
    return "; ".join(
        [
            f"default-src {origin}",
            f"script-src {origin} 'unsafe-inline'",
            f"style-src {origin} 'unsafe-inline'",
            f"img-src {origin} data:",
            f"font-src {origin} data:",
            "object-src 'none'",
            "frame-src 'none'",
            "worker-src 'none'",
            "form-action 'none'",
            "base-uri 'none'",
        ]
    )


def view_csp(*, frame_src: str) -> str:
    """The snapshot view's policy: no script at all, frames of this canvas only."""
    return "; ".join(["default-src 'none'", "style-src 'unsafe-inline'", f"frame-src {frame_src}", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"])


def _head(title: str, nonce: str | None = None, csp_meta: str | None = None) -> list[str]:
    attr = f' nonce="{nonce}"' if nonce else ""
    head = ['<!doctype html><html><head><meta charset="utf-8">']
    if csp_meta:
        head.append(f'<meta http-equiv="Content-Security-Policy" content="{_attr(csp_meta)}">')
    head += ['<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{_attr(title)}</title>", f"<style{attr}>{_STYLE}</style>"]
    return head


def _agent_body(render: HtmlRender | None) -> list[str]:
    """The agent's HTML and its eval scripts (each reports its result as ``eval_result``)."""
    if render is None:
        return []
    parts = [f'<div id="pincer-html">{render.html}</div>'] if render.html else []
    for eval_id, script, _ in render.evals:
        # The agent's script is the body of an async function: `return x` reports x.
        parts.append(
            "<script>(async () => { const id = " + _script_json(eval_id) + "; try { const value = await (async () => {\n"
            + script.replace("</", "<\\/")
            + "\n})(); pincer.send('eval_result', {id: id, value: value === undefined ? null : String(value)}); }"
            " catch (e) { pincer.send('eval_result', {id: id, error: String(e)}); } })();</script>"
        )
    return parts


def html_document(session: str, render: HtmlRender | None, *, csp_meta: str | None = None) -> str:
    """The agent HTML document: the bridge first (so ``pincer.send`` exists for the agent's
    scripts), then the pushed HTML, then eval scripts."""
    parts = [*_head(f"pincer canvas: {session}", csp_meta=csp_meta), f"<script>{_FRAME_BRIDGE}</script>", "</head><body>"]
    parts += _agent_body(render)
    parts.append("</body></html>")
    return "".join(parts)


def _surfaces_script(render: A2uiRender | None, nonce: str | None) -> list[str]:
    attr = f' nonce="{nonce}"' if nonce else ""
    messages = [m for surface in (render.surfaces.values() if render else ()) for m in surface.messages]
    return [
        '<div id="pincer-a2ui"></div>',
        f"<script{attr}>{renderer_script()}</script>",
        f"<script{attr}>window.pincerA2ui.show({_script_json(messages)}, document.getElementById('pincer-a2ui'));</script>",
    ]


def a2ui_document(session: str, render: A2uiRender | None, *, nonce: str) -> str:
    """pincer's A2UI document: bridge, renderer and the surfaces' messages as data."""
    parts = [*_head(f"pincer canvas: {session}", nonce), f'<script nonce="{nonce}">{_FRAME_BRIDGE}{_A2UI_SIZE}</script>', "</head><body>"]
    parts += _surfaces_script(render, nonce)
    parts.append("</body></html>")
    return "".join(parts)


# The MCP App's own policy (a meta element: the host serves the document). 'unsafe-inline'
# scripts because a srcdoc frame inherits it and the agent's scripts must run there; no agent
# markup is parsed in the app document itself (its HTML sits in an escaped attribute).
_APP_META_CSP = "; ".join([*_NO_NETWORK, "script-src 'unsafe-inline'", "style-src 'unsafe-inline'"])


VIEW_META_KEY = "pincer/canvas-view"  # a canvas tool result's _meta key: the view's state


def view_state(session: str, revision: int, html: HtmlRender | None, a2ui: A2uiRender | None) -> dict[str, Any]:
    """What the MCP Apps view shows: the renderings (their ids name the events they send), the
    A2UI messages, and the agent HTML as the document its sandboxed frame loads."""
    return {
        "session": session,
        "revision": revision,
        "renders": {"html": html.id if html else None, "a2ui": a2ui.id if a2ui and a2ui.surfaces else None},
        "messages": [m for surface in (a2ui.surfaces.values() if a2ui else ()) for m in surface.messages],
        "html": html_document(session, html, csp_meta=_APP_META_CSP) if html is not None else None,
    }


def app_document(session: str, state: Mapping[str, Any]) -> str:
    """The canvas as an MCP Apps view: the ext-apps bridge, the renderer, and the canvas as
    ``state`` (:func:`view_state`) says: pincer's A2UI in the view's document, the agent HTML in a
    nested ``<iframe sandbox="allow-scripts" srcdoc>`` (an opaque origin of its own, so its
    scripts neither read the view's text fields nor call its bridge). A host may cache this
    document: each canvas tool's result carries the state anew (``_meta`` ``pincer/canvas-view``)
    and the view shows it when the host sends ``ui/notifications/tool-result``. Each event names
    the rendering it came from (``frame``, ``render``)."""
    values = {
        "VIEW_KEY": VIEW_META_KEY, "VIEW": dict(state), "PROTOCOL": MCP_APP_PROTOCOL_VERSION, "TOOL": CANVAS_EVENT_TOOL, "SESSION": session,
    }  # fmt: skip
    # One pass: what a value holds (the agent's HTML) is never read as a placeholder.
    bridge = re.sub(r"@@([A-Z_]+)@@", lambda m: _script_json(values[m.group(1)]), _APP_BRIDGE)
    style = "<style>iframe.pincer-html{border:0;width:100%;min-height:60vh} #pincer-status:empty{display:none}</style>"
    parts = [*_head(f"pincer canvas: {session}", csp_meta=_APP_META_CSP), style, f"<script>{renderer_script()}</script>", f"<script>{bridge}</script>"]
    parts += ["</head><body>", '<p id="pincer-status"></p>', '<div id="pincer-a2ui"></div>', "</body></html>"]
    return "".join(parts)


def view_document(session: str, frames: Mapping[str, str]) -> str:
    """The snapshot view: ``frames`` (kind -> URL: a2ui first, then html) stacked, no script."""
    shown = [(kind, url) for kind, url in frames.items() if url]
    height = f"{100 // max(1, len(shown))}vh"
    parts = [*_head(f"pincer canvas: {session}"), "<style>body{margin:0} iframe{display:block;border:0;width:100%}</style></head><body>"]
    for kind, url in shown:
        parts.append(f'<iframe sandbox="allow-scripts" referrerpolicy="no-referrer" title="{kind}" style="height:{height}" src="{_attr(url)}"></iframe>')
    parts.append("</body></html>")
    return "".join(parts)
