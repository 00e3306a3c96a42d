"""The bundled renderer (the A2UI project's Lit renderer on ``@a2ui/web_core``) in Chromium,
in pincer's A2UI frame and under its policy: it acts only on a person's clicks, and it shows
every example of the specification without an error or a blocked script or style."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.canvas.conftest import POLL_S, STEP_TIMEOUT_S, CanvasServer, Plan, canvas_server
from tests.canvas.test_a2ui_spec import _messages, _web_core
from tests.canvas.test_canvas_browser import SURFACE_V08, SURFACE_V09, _page

pytestmark = pytest.mark.slow

# Every button of the A2UI frame, through the renderer's shadow roots, clicked by a script.
_SYNTHETIC_CLICKS = """() => {
  const found = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll("*")) {
      if (el.tagName === "BUTTON") found.push(el);
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  for (const button of found) {
    button.click();
    button.dispatchEvent(new MouseEvent("click", {bubbles: true, composed: true}));
  }
  return found.length;
}"""


def _events(server: CanvasServer) -> list[dict[str, Any]]:
    return list(server.ui.get("/ui/canvas/main/events").json()["events"])


def _wait(what: str, check: Any, page: Any) -> Any:
    """Poll ``check`` through Playwright (so the page's events arrive meanwhile)."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        page.wait_for_timeout(POLL_S * 1000)
    raise AssertionError(f"waited {STEP_TIMEOUT_S}s for {what}")


def _a2ui_frame(page: Any, render: str) -> Any:
    return _wait(f"the A2UI frame of rendering {render}", lambda: next((f for f in page.frames if f.url.endswith(f"/a2ui/{render}")), None), page)


def test_a_scripts_clicks_send_nothing_and_a_persons_click_sends_one(browser: Any, tmp_path: Path) -> None:
    with canvas_server(tmp_path / "home", Plan(steps=[])) as server:
        pushed = server.client.post("/api/v1/tools/a2ui_push/call", json={"args": {"messages": [*SURFACE_V08, *SURFACE_V09]}})
        assert pushed.status_code == 200, pushed.text
        context, page = _page(browser, server)
        try:
            frame = _a2ui_frame(page, server.state()["a2ui_render"])
            page.frame_locator("iframe.a2ui").get_by_role("button", name="Confirm").wait_for()
            assert frame.evaluate(_SYNTHETIC_CLICKS) == 2  # Book (v0.8) and Confirm (v0.9)
            page.frame_locator("iframe.a2ui").get_by_role("button", name="Confirm").click()
            _wait("the person's click", lambda: any(e["name"] == "book9" for e in _events(server)), page)
        finally:
            context.close()
        actions = [e["name"] for e in _events(server) if e["event"] == "a2ui_action"]
        assert actions == ["book9"], actions  # the script's four clicks sent nothing


_BLOCKED_CODE = ("script-src", "style-src", "Refused to execute", "Applying inline style", "unsafe-eval")


def _show_each(browser: Any, server: CanvasServer, examples: list[tuple[str, list[Any]]]) -> dict[str, list[str]]:
    """Each example on the canvas in turn (the surfaces before it deleted); what went wrong per
    example: a page error, a blocked script or style, or a message the renderer could not show."""
    problems: dict[str, list[str]] = {}
    context, page = _page(browser, server)
    said: list[str] = []
    page.on("console", lambda m: said.append(f"{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: said.append(f"pageerror: {e}"))
    try:
        shown: list[tuple[str, str]] = []
        for name, messages in examples:
            drop = [{"version": "v0.9", "deleteSurface": {"surfaceId": s}} if v == "v0.9" else {"deleteSurface": {"surfaceId": s}} for s, v in shown]
            pushed = server.client.post("/api/v1/tools/a2ui_push/call", json={"args": {"messages": [*drop, *messages]}})
            if pushed.status_code != 200:
                problems[name] = [f"refused: {pushed.text[:300]}"]
                continue
            shown = [(a["surfaceId"], a["version"]) for a in pushed.json()["output"]["applied"] if a["action"] != "deleteSurface"]
            shown = list(dict.fromkeys(shown))
            said.clear()
            frame = _a2ui_frame(page, server.state()["a2ui_render"])
            frame.wait_for_function("() => window.pincerA2ui && document.querySelectorAll('.a2ui-surface, .a2ui-error').length > 0")
            frame.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50)))")  # Lit renders on a microtask
            notes = frame.evaluate("() => Array.from(document.querySelectorAll('.a2ui-error')).map((e) => e.textContent)")
            wrong = [*notes, *(s for s in said if s.startswith("pageerror") or any(k in s for k in _BLOCKED_CODE))]
            if wrong:
                problems[name] = wrong
    finally:
        context.close()
    return problems


def test_the_renderer_shows_every_v09_example_the_published_package_ships(browser: Any, tmp_path: Path) -> None:
    files = sorted((_web_core() / "src" / "v0_9" / "schemas" / "catalogs").glob("*/examples/*.json"))
    examples = [(f"{f.parent.parent.name}/{f.name}", _messages(f)) for f in files]
    assert len(examples) >= 40
    with canvas_server(tmp_path / "home", Plan(steps=[])) as server:
        assert _show_each(browser, server, examples) == {}
