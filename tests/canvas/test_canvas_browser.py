"""The canvas in a real browser (issue 28, "How it is checked"): Debian's Chromium through
Playwright against a real ``pincer serve``. An agent run (a scripted model) pushes HTML and A2UI
surfaces (v0.8 and v0.9) with a button and a text field; the test types and clicks and the run
receives the events; a snapshot is a PNG that shows the button; pushed HTML that tries to
reach another port, navigate the top window, open a popup or read the dashboard's cookie is
blocked, and the CSP violation reaches the run."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from playwright.sync_api import expect

from pincer.canvas.a2ui import parse_messages
from tests.canvas.conftest import STEP_TIMEOUT_S, CanvasServer, Plan, canvas_server

pytestmark = pytest.mark.slow

FORM_HTML = """<label>Name <input id="name"></label>
<button id="send" onclick="pincer.send('html_submit', {name: document.getElementById('name').value})">Send</button>"""

SURFACE_V08 = [
    {"beginRendering": {"surfaceId": "form8", "root": "col"}},
    {"dataModelUpdate": {"surfaceId": "form8", "contents": [{"key": "city", "valueString": ""}]}},
    {
        "surfaceUpdate": {
            "surfaceId": "form8",
            "components": [
                {"id": "col", "component": {"Column": {"children": {"explicitList": ["field", "go"]}}}},
                {"id": "field", "component": {"TextField": {"label": {"literalString": "City"}, "text": {"path": "/city"}}}},
                {
                    "id": "go",
                    "component": {
                        "Button": {
                            "child": "go_label",
                            "primary": True,
                            "action": {"name": "book8", "context": [{"key": "city", "value": {"path": "/city"}}]},
                        }
                    },
                },
                {"id": "go_label", "component": {"Text": {"text": {"literalString": "Book"}}}},
            ],
        }
    },
]

SURFACE_V09 = [
    {"version": "v0.9", "createSurface": {"surfaceId": "form9", "catalogId": "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}},
    {
        "version": "v0.9",
        "updateComponents": {
            "surfaceId": "form9",
            "components": [
                {"id": "root", "component": "Column", "children": ["field9", "go9"]},
                {"id": "field9", "component": "TextField", "label": "Guest", "value": {"path": "/guest"}},
                {
                    "id": "go9",
                    "component": "Button",
                    "child": "go9_label",
                    "variant": "primary",
                    "action": {"event": {"name": "book9", "context": {"guest": {"path": "/guest"}}}},
                },
                {"id": "go9_label", "component": "Text", "text": "Confirm"},
            ],
        },
    },
    {"version": "v0.9", "updateDataModel": {"surfaceId": "form9", "path": "/guest", "value": ""}},
]


def _page(browser: Any, server: CanvasServer, session: str = "main", token: str | None = None) -> tuple[Any, Any]:
    """A browser signed in to the dashboard (``/ui/login`` with ``token``, the gateway's by
    default), on a canvas page."""
    context = browser.new_context()
    context.set_default_timeout(STEP_TIMEOUT_S * 1000)
    page = context.new_page()
    page.goto(f"{server.url}/ui/canvas/{session}")  # not signed in: the login page, coming back here
    page.fill("#token", token or server.token)
    page.press("#token", "Enter")
    page.wait_for_url(f"{server.url}/ui/canvas/{session}")
    return context, page


def _canvas_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == "canvas_event"]


def test_a_run_draws_html_and_a2ui_surfaces_and_hears_typing_and_clicks(browser: Any, tmp_path: Path) -> None:
    assert len(parse_messages(SURFACE_V08)) == 3 and len(parse_messages(SURFACE_V09)) == 3
    plan = Plan(
        steps=[
            ("call", "canvas", {"action": "push", "html": FORM_HTML}),
            ("until", "Ada Lovelace"),
            ("call", "a2ui_push", {"messages": SURFACE_V08}),
            ("until", "Zurich-typed"),
            ("call", "a2ui_push", {"messages": SURFACE_V09}),
            ("hold",),  # the v0.9 click arrives while no wait is open: it is the next turn's input
            ("until", "Grace-typed"),
        ]
    )
    with canvas_server(tmp_path / "home", plan) as server:
        run_id = server.start_run()
        context, page = _page(browser, server)
        try:
            html, a2ui = page.frame_locator("iframe.agent"), page.frame_locator("iframe.a2ui")  # a document each
            server.wait_for_state(lambda s: s["waiting"] and s["has_html"])
            html.locator("#name").fill("Ada Lovelace")
            html.locator("#send").click()

            server.wait_for_state(lambda s: s["waiting"] and "form8" in s["surfaces"])
            a2ui.locator("#field input").fill("Zurich-typed")  # v0.8 elements carry their component's id
            a2ui.locator("#go button").click()

            assert plan.held.wait(STEP_TIMEOUT_S)
            before = server.wait_for_state(lambda s: "form9" in s["surfaces"])["events"]
            a2ui.locator("a2ui-basic-textfield:has-text('Guest') input").fill("Grace-typed")
            a2ui.get_by_role("button", name="Confirm").click()
            server.wait_for_state(lambda s: s["events"] > before)
            # The person sees that the click went out (before, nothing on the page changed).
            expect(page.locator("#status")).to_contain_text("(sent: a2ui_action)")
            plan.release.set()

            run = server.finished_run(run_id)
            assert run["status"] == "done", run

            # The snapshot: MCP image content, a PNG that is not blank and shows the buttons.
            shot = server.client.post("/api/v1/tools/canvas/call", json={"args": {"action": "snapshot", "width": 800, "height": 600}})
            assert shot.status_code == 200, shot.text
            image = next(b for b in shot.json()["content"] if b["type"] == "image")
            assert image["mimeType"] == "image/png"
            png = base64.b64decode(image["data"])
            assert png[:8] == b"\x89PNG\r\n\x1a\n"
            blank = context.new_page()  # the canvas page's own CSP refuses data: images
            counts = blank.evaluate(_COUNT_PIXELS, "data:image/png;base64," + image["data"])
        finally:
            context.close()
        assert counts["width"] == 800 and counts["height"] == 600
        assert counts["nonWhite"] > 2_000, counts  # not blank
        assert counts["buttonBlue"] > 500, counts  # the primary buttons' colour (#1a56db)

        canvas_events = _canvas_events(server.events(run_id))
        by_name = {e["name"]: e for e in canvas_events}
        assert by_name["html_submit"]["event"] == "html_event" and by_name["html_submit"]["data"] == {"name": "Ada Lovelace"}
        v08 = by_name["book8"]
        assert v08["event"] == "a2ui_action" and v08["data"]["message"]["userAction"]["context"] == {"city": "Zurich-typed"}
        assert v08["data"]["message"]["userAction"]["sourceComponentId"] == "go"
        v09 = by_name["book9"]["data"]["message"]
        assert v09["version"] == "v0.9" and v09["action"]["context"] == {"guest": "Grace-typed"}
        # A signed-in main person's clicks on pincer's controls are trusted, and so is HTML an
        # untainted main run pushed (its words are the operator's run's).
        assert all(e["trusted"] is True for e in canvas_events), canvas_events
        assert all(e["run"] == run_id for e in canvas_events), canvas_events

        messages = server.client.get(f"/api/v1/runs/{run_id}").json()["messages"]
        waits = [m["content"] for m in messages if m["role"] == "tool" and "Ada Lovelace" in (m["content"] or "")]
        assert waits, "the first click came back as the result of canvas wait"
        inputs = [m["content"] for m in messages if m["role"] == "user" and "Grace-typed" in (m["content"] or "")]
        assert len(inputs) == 1 and 'tool="canvas:main" trusted="true"' in inputs[0]


_COUNT_PIXELS = """async (src) => {
  const img = new Image();
  img.src = src;
  await img.decode();
  const c = document.createElement("canvas");
  c.width = img.width; c.height = img.height;
  const g = c.getContext("2d");
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let nonWhite = 0, buttonBlue = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i] < 240 || d[i + 1] < 240 || d[i + 2] < 240) nonWhite++;
    if (Math.abs(d[i] - 26) < 24 && Math.abs(d[i + 1] - 86) < 24 && Math.abs(d[i + 2] - 219) < 24) buttonBlue++;
  }
  return {width: c.width, height: c.height, nonWhite, buttonBlue};
}"""


class _Hits(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Allow-CSP-From", "*")  # a page that accepts the canvas's required policy
        self.end_headers()
        self.wfile.write(b"reached")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def other_server() -> Iterator[tuple[int, list[str]]]:
    """A server on another port that counts what reaches it (nothing should)."""
    hits: ClassVar[list[str]] = []
    handler = type("Hits", (_Hits,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


ESCAPE_HTML = """<p id="x">escape attempts</p>
<script>
(async () => {
  const results = {};
  try { results.cookie = "read: " + document.cookie; } catch (e) { results.cookie = "threw " + e.name; }
  try { await fetch("http://127.0.0.1:PORT/fetch"); results.fetch = "reached"; } catch (e) { results.fetch = "threw " + e.name; }
  try { top.location = "http://127.0.0.1:PORT/top"; results.top = "assigned"; } catch (e) { results.top = "threw " + e.name; }
  try { const w = window.open("http://127.0.0.1:PORT/popup"); results.open = w ? "opened" : "null"; } catch (e) { results.open = "threw " + e.name; }
  try { localStorage.setItem("k", "v"); results.storage = "written"; } catch (e) { results.storage = "threw " + e.name; }
  pincer.send("escape_results", results);
})();
</script>"""


def test_pushed_html_cannot_reach_out_navigate_open_popups_or_read_the_cookie(
    browser: Any, tmp_path: Path, other_server: tuple[int, list[str]]
) -> None:
    """Pushed HTML runs sandboxed with an opaque origin and no network: each escape fails, and
    the browser's CSP report of the blocked fetch reaches the run as an untrusted event."""
    port, hits = other_server
    plan = Plan(
        steps=[
            ("call", "canvas", {"action": "push", "html": ESCAPE_HTML.replace("PORT", str(port))}),
            ("until", "threw SecurityError"),  # the page's results, as the model reads them
            ("until", "csp_violation"),
        ]
    )
    with canvas_server(tmp_path / "home", plan) as server:
        run_id = server.start_run()
        server.wait_for_state(lambda s: s["waiting"] and s["has_html"])
        context, page = _page(browser, server)
        try:
            cookie = next(c for c in context.cookies() if c["name"] == "pincer_ui")  # the dashboard's sign-in
            context.add_cookies([{"name": "readable", "value": "cookie-secret-4711", "url": server.url}])
            page.reload()
            run = server.finished_run(run_id)
            assert run["status"] == "done", run
            assert page.url == f"{server.url}/ui/canvas/main"  # the top window stayed where it was
            assert len(context.pages) == 1  # no popup
        finally:
            context.close()
        assert hits == [], hits  # nothing reached the other port

        canvas_events = _canvas_events(server.events(run_id))
        results = next(e for e in canvas_events if e["name"] == "escape_results")["data"]
        assert results["cookie"] == "threw SecurityError"
        assert "cookie-secret-4711" not in json.dumps(canvas_events) and cookie["value"] not in json.dumps(canvas_events)
        assert results["fetch"].startswith("threw"), results
        assert results["open"] in ("null", "threw SecurityError"), results
        assert results["top"] != "assigned" or hits == [], results
        assert results["storage"].startswith("threw"), results
        violations = [e for e in canvas_events if e["event"] == "csp_violation"]
        assert any(f"127.0.0.1:{port}" in e["data"].get("blocked-uri", "") for e in violations), violations
        assert all(e["trusted"] is False for e in violations)


def test_eval_runs_in_the_open_canvas_and_navigate_shows_an_allowed_url(
    browser: Any, tmp_path: Path, other_server: tuple[int, list[str]]
) -> None:
    """``eval`` (execute_code, allowed here by a grant) runs in the page a person has open and
    returns its value; ``navigate`` shows a URL the grant's hosts allow, in the sandboxed frame."""
    port, hits = other_server
    grants = f"""
[network]
allow_private = true

[[grants]]
tool = "canvas"
effects = {{ execute_code = "allow", network = "allow" }}
hosts = ["127.0.0.1:{port}"]
"""
    with canvas_server(tmp_path / "home", Plan(steps=[]), extra_config=grants) as server:
        call = server.client.post
        assert call("/api/v1/tools/canvas/call", json={"args": {"action": "push", "html": "<p id=p>hello</p>"}}).status_code == 200
        context, page = _page(browser, server)
        try:
            page.frame_locator("iframe.agent").locator("#p").wait_for()
            ran = call("/api/v1/tools/canvas/call", json={"args": {"action": "eval", "script": "return document.getElementById('p').textContent + ' ' + self.origin"}})
            assert ran.status_code == 200, ran.text
            assert ran.json()["output"]["ran"] is True and ran.json()["output"]["value"] == "hello null"  # an opaque origin

            frame_url = server.url + page.evaluate("document.querySelector('iframe.agent').getAttribute('src')")
            shown = call("/api/v1/tools/canvas/call", json={"args": {"action": "navigate", "url": f"http://127.0.0.1:{port}/nav"}})
            assert shown.status_code == 200, shown.text
            # The page reloads itself to allow that origin (and only it) in its frame-src.
            shown_page = page.wait_for_selector(f"iframe.agent[src='http://127.0.0.1:{port}/nav']", state="attached")
            assert shown_page.get_attribute("sandbox") == "allow-scripts"
            assert shown_page.get_attribute("csp").startswith(f"default-src http://127.0.0.1:{port};")  # its own origin only
            page.frame_locator("iframe.agent").locator("text=reached").wait_for()

            # Opened on its own, outside the sandboxed iframe, the frame is still an opaque origin
            # (its CSP's sandbox directive): pushed scripts never get the gateway's origin.
            alone = context.new_page()
            alone.goto(frame_url)
            assert alone.evaluate("self.origin") == "null"
            assert alone.evaluate("(() => { try { return document.cookie; } catch (e) { return e.name; } })()") == "SecurityError"
        finally:
            context.close()
        assert "/nav" in hits
