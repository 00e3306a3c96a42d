"""The canvas document: what the agent drew, as one HTML page that runs sandboxed.

The page served by the gateway (``page`` mode) is framed by ``/ui/canvas/{session}`` in an
``<iframe sandbox="allow-scripts">`` and served with :func:`frame_csp`, whose ``sandbox
allow-scripts`` directive makes it an opaque origin even when opened on its own: pushed scripts
never run with the gateway's origin, cannot read its cookies or storage, cannot navigate the
top window or open popups, and reach no network at all (``connect-src 'none'``: the only way
out is ``pincer.send``, a postMessage to the canvas page, which posts to the gateway's canvas
endpoint). Violations are reported to the gateway (``report-uri``/``report-to``) and become
events of the run.

In ``mcp-app`` mode the same document is an MCP Apps view (``text/html;profile=mcp-app``):
``pincer.send`` speaks the ext-apps postMessage protocol to its host (``ui/initialize``, then
``tools/call`` of ``canvas_event``), and the host's sandbox isolates it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from pincer.canvas.board import Canvas

__all__ = ["frame_csp", "frame_document", "MCP_APP_PROTOCOL_VERSION", "CANVAS_EVENT_TOOL"]

MCP_APP_PROTOCOL_VERSION = "2026-01-26"  # @modelcontextprotocol/ext-apps 2.0.4 LATEST_PROTOCOL_VERSION
CANVAS_EVENT_TOOL = "canvas_event"

_STYLE = """
body { font: 15px/1.4 system-ui, sans-serif; margin: 12px; color: #111; background: #fff; }
.a2ui-surface { border: 1px solid #ddd; border-radius: 8px; padding: 12px; margin: 8px 0; }
.a2ui-row { display: flex; flex-direction: row; gap: 8px; align-items: center; }
.a2ui-column, .a2ui-list, .a2ui-card, .a2ui-modal { display: flex; flex-direction: column; gap: 8px; }
.a2ui-card { border: 1px solid #ccc; border-radius: 6px; padding: 8px; }
.a2ui-button { padding: 6px 14px; border-radius: 6px; border: 1px solid #888; background: #eee; cursor: pointer; }
.a2ui-button.primary { background: #1a56db; color: #fff; border-color: #1a56db; }
.a2ui-button p { margin: 0; }
.a2ui-textfield { display: flex; flex-direction: column; gap: 4px; }
.a2ui-textfield input, .a2ui-textfield textarea { padding: 4px 6px; font: inherit; }
"""

_PAGE_BRIDGE = """
window.pincer = {
  send(name, data) {
    parent.postMessage({type: "pincer-canvas", name: String(name), data: data === undefined ? null : data}, "*");
  },
};
"""

_APP_BRIDGE = """
(function () {
  let nextId = 1;
  const pending = {};
  function request(method, params) {
    const id = nextId++;
    window.parent.postMessage({jsonrpc: "2.0", id: id, method: method, params: params}, "*");
    return new Promise((resolve, reject) => { pending[id] = {resolve: resolve, reject: reject}; });
  }
  window.addEventListener("message", (event) => {
    const msg = event.data;
    if (event.source !== window.parent || !msg || msg.jsonrpc !== "2.0" || msg.id === undefined || !(msg.id in pending)) return;
    const waiter = pending[msg.id];
    delete pending[msg.id];
    if (msg.error) waiter.reject(msg.error); else waiter.resolve(msg.result);
  });
  const ready = request("ui/initialize", {
    appInfo: {name: "pincer-canvas", version: "1"},
    appCapabilities: {},
    protocolVersion: PROTOCOL,
  }).then((result) => {
    window.parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/initialized", params: {}}, "*");
    return result;
  });
  window.pincer = {
    send(name, data) {
      return ready.then(() => request("tools/call", {name: TOOL, arguments: {session: SESSION, name: String(name), data: data === undefined ? null : data}}));
    },
  };
})();
"""


@cache
def _renderer() -> str:
    return resources.files("pincer.canvas").joinpath("assets", "a2ui-render.js").read_text(encoding="utf-8")


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element: no '</' can close it, no '<!--' can open a comment."""
    return json.dumps(value, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def frame_csp(*, report_url: str, frame_ancestors: str) -> str:
    """The frame's Content-Security-Policy: sandboxed opaque origin, inline scripts and styles
    only, no network, no forms, no frames, and violations reported to ``report_url``."""
    return "; ".join(
        [
            "sandbox allow-scripts",
            "default-src 'none'",
            "script-src 'unsafe-inline'",
            "style-src 'unsafe-inline'",
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
            f"frame-ancestors {frame_ancestors}",
            # report-uri, not report-to: Chromium ignores report-uri when report-to is present,
            # and delivers report-to's reports in batches up to a minute late. The endpoint
            # reads both formats.
            f"report-uri {report_url}",
        ]
    )


def frame_document(canvas: Canvas, *, mode: str = "page") -> str:
    """The canvas as one document: the bridge (``window.pincer.send``), the A2UI renderer and
    surfaces, the pushed HTML, and eval scripts last (each reports its result as an
    ``eval_result`` event)."""
    if mode == "mcp-app":
        bridge = (
            _APP_BRIDGE.replace("PROTOCOL", _script_json(MCP_APP_PROTOCOL_VERSION))
            .replace("TOOL", _script_json(CANVAS_EVENT_TOOL))
            .replace("SESSION", _script_json(canvas.session))
        )
    else:
        bridge = _PAGE_BRIDGE
    parts = [
        "<!doctype html><html><head><meta charset=\"utf-8\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>pincer canvas: {_html_text(canvas.session)}</title>",
        f"<style>{_STYLE}</style>",
        f"<script>{bridge}</script>",
        "</head><body>",
    ]
    messages = [m for batch in canvas.surfaces.values() for m in batch]
    if messages:
        parts.append('<div id="pincer-a2ui"></div>')
        parts.append(f"<script>{_renderer()}</script>")
        parts.append(
            f"<script>window.pincerA2ui.show({_script_json(messages)}, document.getElementById('pincer-a2ui'));</script>"
        )
    if canvas.html:
        parts.append(f'<div id="pincer-html">{canvas.html}</div>')
    for eval_id, script in canvas.evals:
        # The agent's script is the body of an async function: `return x` reports x.
        parts.append(
            "<script>(async () => { const id = " + _script_json(eval_id) + "; try { const value = await (async () => {\n"
            + script.replace("</", "<\\/")
            + "\n})(); pincer.send('eval_result', {id: id, value: value === undefined ? null : String(value)}); }"
            " catch (e) { pincer.send('eval_result', {id: id, error: String(e)}); } })();</script>"
        )
    parts.append("</body></html>")
    return "".join(parts)


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
