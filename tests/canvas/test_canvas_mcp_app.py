"""The canvas as an MCP App (ext-apps 2.0.4): an MCP client acting as the host lists the tools
(``_meta.ui.resourceUri``), reads ``ui://pincer/canvas/main`` (``text/html;profile=mcp-app``),
renders it in Chromium in a sandboxed frame of its own, answers the view's ``ui/initialize``
and proxies its ``tools/call``; a click in that window reaches the run, marked untrusted."""

from __future__ import annotations

import json
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

        context = browser.new_context()
        context.set_default_timeout(STEP_TIMEOUT_S * 1000)
        try:
            page = context.new_page()
            page.expose_function("hostCallTool", call_tool)
            page.set_content(_HOST)
            page.evaluate("html => window.showApp(html)", content["text"])
            frame = page.frame_locator("#app")
            frame.locator("a2ui-basic-textfield:has-text('Guest') input").fill("Host-typed")
            frame.locator("a2ui-basic-button button").click()
            run = server.finished_run(run_id)
            log = page.evaluate("window.hostLog")
        finally:
            context.close()
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
