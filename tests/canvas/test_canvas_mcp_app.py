"""The canvas as an MCP App (ext-apps 2.0.4): an MCP client acting as the host lists the tools
(``_meta.ui.resourceUri``), reads ``ui://pincer/canvas/main`` (``text/html;profile=mcp-app``),
renders it in Chromium in a sandboxed frame of its own, answers the view's ``ui/initialize``
and proxies its ``tools/call``; a click in that window reaches the run, marked untrusted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.canvas.conftest import STEP_TIMEOUT_S, CanvasServer, Plan, canvas_server
from tests.canvas.test_canvas_browser import SURFACE_V09

pytestmark = pytest.mark.slow

VERSION = "2026-07-28"


def _rpc(server: CanvasServer, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """One request of the stateless MCP wire, as a host's MCP client sends it."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    meta = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    answer = server.client.post("/mcp", headers=headers, json=body)
    assert answer.status_code == 200, answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        found = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        message = next(m for m in found if m.get("id") == 1)
    else:
        message = answer.json()
    assert "error" not in message, message
    return dict(message["result"])


_HOST = """<!doctype html><html><body>
<iframe id="app" sandbox="allow-scripts" style="width: 800px; height: 500px"></iframe>
<script>
window.hostLog = [];
const app = document.getElementById("app");
window.addEventListener("message", async (event) => {
  if (event.source !== app.contentWindow) return;
  const msg = event.data;
  window.hostLog.push(msg.method || "response");
  const reply = (result) => app.contentWindow.postMessage({jsonrpc: "2.0", id: msg.id, result: result}, "*");
  if (msg.method === "ui/initialize") {
    reply({protocolVersion: msg.params.protocolVersion, hostInfo: {name: "test-host", version: "1"},
           hostCapabilities: {serverTools: {}}, hostContext: {displayMode: "inline"}});
  } else if (msg.method === "tools/call") {
    reply(await window.hostCallTool(msg.params));
  }
});
window.showApp = (html) => { app.srcdoc = html; };
</script></body></html>"""


def test_an_mcp_apps_host_renders_the_canvas_and_its_click_reaches_the_run(browser: Any, tmp_path: Any) -> None:
    plan = Plan(steps=[("call", "a2ui_push", {"messages": SURFACE_V09}), ("until", "an MCP App host (session main)")])
    with canvas_server(tmp_path / "home", plan) as server:
        run_id = server.start_run()
        server.wait_for_state(lambda s: s["waiting"] and "form9" in s["surfaces"])

        tools = {t["name"]: t for t in _rpc(server, "tools/list", {})["tools"]}
        ui = tools["canvas"]["_meta"]["ui"]
        assert ui["resourceUri"] == "ui://pincer/canvas/main" and "model" in ui["visibility"]
        assert tools["canvas"]["_meta"]["ui/resourceUri"] == "ui://pincer/canvas/main"
        assert tools["a2ui_push"]["_meta"]["ui"]["resourceUri"] == "ui://pincer/canvas/main"
        assert tools["canvas_event"]["_meta"]["ui"]["visibility"] == ["app"]
        listed = _rpc(server, "resources/list", {})["resources"]
        assert {"uri": "ui://pincer/canvas/main", "mimeType": "text/html;profile=mcp-app"}.items() <= next(
            r for r in listed if r["uri"] == "ui://pincer/canvas/main"
        ).items()
        read = _rpc(server, "resources/read", {"uri": ui["resourceUri"]}, name=ui["resourceUri"])
        (content,) = read["contents"]
        assert content["mimeType"] == "text/html;profile=mcp-app"

        calls: list[dict[str, Any]] = []

        def call_tool(params: dict[str, Any]) -> dict[str, Any]:
            calls.append(params)
            return _rpc(server, "tools/call", {"name": params["name"], "arguments": params["arguments"]}, name=params["name"])

        with _host_page(browser, _HOST, call_tool) as page:
            page.evaluate("html => window.showApp(html)", content["text"])
            frame = page.frame_locator("#app")
            frame.locator("a2ui-basic-textfield:has-text('Guest') input").fill("Host-typed")
            frame.locator("a2ui-basic-button button").click()
            run = server.finished_run(run_id)
            log = page.evaluate("window.hostLog")
        assert run["status"] == "done", run
        assert log[:2] == ["ui/initialize", "ui/notifications/initialized"], log
        assert calls and calls[0]["name"] == "canvas_event" and calls[0]["arguments"]["session"] == "main"
        assert calls[0]["arguments"]["frame"] == "a2ui" and calls[0]["arguments"]["render"]  # the rendering it came from

        events = [e for e in server.events(run_id) if e["kind"] == "canvas_event"]
        (click,) = events
        assert click["name"] == "book9" and click["trusted"] is False and "an MCP App host (session main)" in click["source"]
        assert click["run"] == run_id
        assert click["data"]["message"]["action"]["context"] == {"guest": "Host-typed"}
        assert any(e["kind"] == "tainted" for e in server.events(run_id))


def test_a_canvas_uri_that_names_no_session_is_refused(tmp_path: Any) -> None:
    plan = Plan(steps=[])
    with canvas_server(tmp_path / "home", plan) as server:
        body = {
            "jsonrpc": "2.0", "id": 1, "method": "resources/read",
            "params": {"uri": "ui://pincer/canvas/../x", "_meta": {"io.modelcontextprotocol/protocolVersion": VERSION,
                                                                    "io.modelcontextprotocol/clientCapabilities": {}}},
        }  # fmt: skip
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": VERSION, "Mcp-Method": "resources/read", "Mcp-Name": "ui://pincer/canvas/../x"}  # fmt: skip
        answer = server.client.post("/mcp", headers=headers, json=body)
        text = answer.text
        assert "Resource not found" in text and "not a canvas session name" in text, text


_CACHING_HOST = """<!doctype html><html><body>
<div id="views"></div>
<script>
// A host that read the view's template once and shows it anew for each tool call (MCP Apps
// allows it to cache the template): what the call drew reaches the view only as notifications.
window.hostLog = [];
window.showCall = (html, args, result) => new Promise((done) => {
  const app = document.createElement("iframe");
  app.setAttribute("sandbox", "allow-scripts");
  app.style.width = "800px"; app.style.height = "400px";
  document.getElementById("views").replaceChildren(app);
  const send = (message) => app.contentWindow.postMessage(message, "*");
  window.addEventListener("message", async (event) => {
    if (event.source !== app.contentWindow) return;
    const msg = event.data;
    window.hostLog.push(msg.method || "response");
    if (msg.method === "ui/initialize") {
      send({jsonrpc: "2.0", id: msg.id, result: {protocolVersion: msg.params.protocolVersion, hostInfo: {name: "caching-host", version: "1"},
            hostCapabilities: {serverTools: {}}, hostContext: {displayMode: "inline"}}});
    } else if (msg.method === "ui/notifications/initialized") {
      send({jsonrpc: "2.0", method: "ui/notifications/tool-input", params: {arguments: args}});
      window.sendResult = () => send({jsonrpc: "2.0", method: "ui/notifications/tool-result", params: result});
      done();
    } else if (msg.method === "tools/call") {
      send({jsonrpc: "2.0", id: msg.id, result: await window.hostCallTool(msg.params)});
    }
  });
  app.srcdoc = html;
});
</script></body></html>"""


def test_a_host_that_caches_the_view_shows_what_each_call_drew(browser: Any, tmp_path: Any) -> None:
    """The host reads ``ui://pincer/canvas/main`` once, while the canvas is empty, and shows that
    template for each later call. Before the change the view showed the canvas as it was when
    read, whatever the call drew, and ignored the notifications (failed at ``first["_meta"][...]``:
    the result carried nothing for the view); now each call's result carries the view's state
    and the view shows it on ``ui/notifications/tool-result``."""
    with canvas_server(tmp_path / "home", Plan(steps=[])) as server:
        (cached,) = _rpc(server, "resources/read", {"uri": "ui://pincer/canvas/main"}, name="ui://pincer/canvas/main")["contents"]

        def call_tool(params: dict[str, Any]) -> dict[str, Any]:
            return _rpc(server, "tools/call", {"name": params["name"], "arguments": params["arguments"]}, name=params["name"])

        first_args = {"messages": SURFACE_V09}
        first = call_tool({"name": "a2ui_push", "arguments": first_args})
        view = first["_meta"]["pincer/canvas-view"]
        assert view["session"] == "main" and view["renders"]["a2ui"] and len(view["messages"]) == 3
        with _host_page(browser, _CACHING_HOST, call_tool) as page:
            page.evaluate("([html, args, result]) => window.showCall(html, args, result)", [cached["text"], first_args, first])
            frame = page.frame_locator("#views iframe")
            frame.locator("#pincer-status", has_text="the agent is drawing").wait_for()  # tool-input heard
            assert frame.locator("a2ui-basic-button").count() == 0  # the cached template alone shows nothing
            page.evaluate("window.sendResult()")
            frame.locator("a2ui-basic-textfield:has-text('Guest') input").fill("Cached-typed")
            frame.get_by_role("button", name="Confirm").click()
            clicked = _wait_for_event(server, "book9", page)
            assert clicked["data"]["message"]["action"]["context"] == {"guest": "Cached-typed"}
            assert clicked["trusted"] is False and "an MCP App host" in clicked["source"]

            # The next call, shown from the same cached template: the view shows that call's canvas.
            relabel = [{"version": "v0.9", "updateComponents": {"surfaceId": "form9", "components": [
                {"id": "go9_label", "component": "Text", "text": "Reconfirm"}]}}]  # fmt: skip
            second = call_tool({"name": "a2ui_push", "arguments": {"messages": relabel}})
            page.evaluate("([html, args, result]) => window.showCall(html, args, result)", [cached["text"], {"messages": relabel}, second])
            page.evaluate("window.sendResult()")
            frame.get_by_role("button", name="Reconfirm").wait_for()
            log = page.evaluate("window.hostLog")
        assert log.count("ui/initialize") == 2 and "tools/call" in log


@contextmanager
def _host_page(browser: Any, host_html: str, call_tool: Any) -> Iterator[Any]:
    """A host's page (``host_html``) whose ``hostCallTool`` proxies the view's tool calls."""
    context = browser.new_context()
    context.set_default_timeout(STEP_TIMEOUT_S * 1000)
    try:
        page = context.new_page()
        page.expose_function("hostCallTool", call_tool)
        page.set_content(host_html)
        yield page
    finally:
        context.close()


def _wait_for_event(server: CanvasServer, name: str, page: Any) -> dict[str, Any]:
    """The canvas's event ``name``, waited for through Playwright (the host's tool calls are
    served meanwhile)."""
    import time

    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        events = server.ui.get("/ui/canvas/main/events").json()["events"]
        found = [e for e in events if e["name"] == name]
        if found:
            return dict(found[0])
        page.wait_for_timeout(100)
    raise AssertionError(f"no canvas event {name!r} within {STEP_TIMEOUT_S}s")
