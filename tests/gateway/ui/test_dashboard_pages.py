"""Every dashboard page in Debian's Chromium (Playwright), at 1280 and 390 px wide, over a home
seeded the way a user fills one (``seeded.py``), signed in as main and as a non-main session:

- axe-core (npm, pinned; ``make ui-deps`` installs it into ``.cache/npm-ui``) finds no serious or
  critical accessibility violation;
- a screenshot of each page is written to ``test-artifacts/dashboard/NAME-WIDTH.png`` (CI keeps
  ``test-artifacts/``), and what it shows is checked: nothing wider than the screen (no
  horizontal scrolling at 390 px, no element across the viewport's edge), no page taller than its
  content (no blank space below it, no block taller than one and a half screens: long values are
  folded or scroll in their own box), no console error (a CSP violation, a script error);
- without JavaScript every page still renders, in UTC, with its forms.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tests.gateway.ui.conftest import AGENT_TOKEN, REPO, SCREENSHOTS, WAIT_S
from tests.gateway.ui.seeded import Seeded

AXE = Path(os.environ.get("PINCER_AXE_JS", REPO / ".cache" / "npm-ui" / "node_modules" / "axe-core" / "axe.min.js"))
WIDTHS = (1280, 390)
VIEWPORT_H = 800
BLANK_BELOW_PX = 80  # space under the last thing on a page, beyond main's own padding
TALLEST_BLOCK = 1.5  # screens: a value longer than this is folded or scrolls in its own box
BLOCKING = ("serious", "critical")

_GEOMETRY = """() => {
  const TALLEST = TALLEST_BLOCK_HERE;
  const W = window.innerWidth, H = window.innerHeight;
  const clipped = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const style = getComputedStyle(p);
      if (style.overflowX !== "visible" || style.overflowY !== "visible") return true;
    }
    return false;
  };
  const across = [];
  const tall = [];
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(el).visibility === "hidden") continue;
    if (el.parentElement && el.parentElement.closest("details:not([open])") && el.tagName !== "SUMMARY") continue;  // folded
    const left = r.left + window.scrollX, right = r.right + window.scrollX;
    if (right <= 0 || left >= W) continue;  // entirely off screen on purpose (the skip link, a hidden header row)
    if ((left < -0.5 || right > W + 0.5) && !clipped(el)) across.push(el.tagName + "." + el.className + " " + Math.round(left) + ".." + Math.round(right));
    if (["PRE", "P", "TD", "DD", "LI", "DIV"].includes(el.tagName) && r.height > H * TALLEST
        && el.scrollHeight <= el.clientHeight + 1 && !el.querySelector("article, section, table, pre.scroll"))
      tall.push(el.tagName + "." + el.className + " " + Math.round(r.height) + "px");
  }
  const main = document.querySelector("main") || document.body;
  let bottom = 0;
  for (const el of main.querySelectorAll("*")) bottom = Math.max(bottom, el.getBoundingClientRect().bottom + window.scrollY);
  const padding = parseFloat(getComputedStyle(main).paddingBottom) || 0;
  return {scrollWidth: document.documentElement.scrollWidth, width: W, height: document.documentElement.scrollHeight,
          contentBottom: Math.ceil(bottom + padding), viewport: H, across: across.slice(0, 10), tall: tall.slice(0, 10)};
}""".replace("TALLEST_BLOCK_HERE", str(TALLEST_BLOCK))


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE.is_file():
        pytest.fail(f"axe-core is not installed at {AXE}: run `make ui-deps` (make test does)")
    return AXE.read_text()


def _main_pages(seeded: Seeded) -> list[tuple[str, str]]:
    return [
        ("overview", "/ui/"), ("approvals", "/ui/approvals"), ("approvals-expired", "/ui/approvals?status=expired"),
        ("runs", "/ui/runs"), ("run-done", f"/ui/runs/{seeded.done_run}"), ("run-waiting", f"/ui/runs/{seeded.waiting_run}"),
        ("audit", "/ui/audit"), ("audit-record", "/ui/audit/1"), ("tools", "/ui/tools"), ("tool-browser", "/ui/tools/browser"),
        ("tool-http", "/ui/tools/http"), ("grants", "/ui/grants"), ("skills", "/ui/skills"), ("mcp", "/ui/mcp"),
        ("installed", "/ui/installed"), ("canvas", "/ui/canvas/main"), ("people", "/ui/people"), ("tokens", "/ui/tokens"),
    ]  # fmt: skip


AGENT_PAGES = [("agent-overview", "/ui/"), ("agent-approvals", "/ui/approvals"), ("agent-audit", "/ui/audit"),
               ("agent-runs", "/ui/runs"), ("agent-skills", "/ui/skills"), ("agent-grants", "/ui/grants")]  # fmt: skip


def _watch(page: Page, errors: list[str]) -> None:
    """Console errors of ``page`` (a CSP violation, a script error), as they come."""
    page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))


def _sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "/ui/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(url + "/ui/")


def _check(page: Page, name: str, width: int, axe_source: str | None) -> list[str]:
    """What is wrong with the page shown now (an empty list: nothing), its screenshot written."""
    problems: list[str] = []
    page.evaluate("document.fonts.ready")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"), full_page=True)
    shape: dict[str, Any] = page.evaluate(_GEOMETRY)
    if shape["scrollWidth"] > shape["width"]:
        problems.append(f"{name}@{width}: {shape['scrollWidth']} px wide in a {shape['width']} px screen")
    if shape["across"]:
        problems.append(f"{name}@{width}: across the screen's edge: {shape['across']}")
    if shape["tall"]:
        problems.append(f"{name}@{width}: blocks taller than {TALLEST_BLOCK} screens: {shape['tall']}")
    if shape["height"] > max(shape["viewport"], shape["contentBottom"] + BLANK_BELOW_PX):
        problems.append(f"{name}@{width}: {shape['height']} px tall for content ending at {shape['contentBottom']} px")
    if axe_source is not None:
        page.evaluate(axe_source)
        found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
                              ".map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))")  # fmt: skip
        blocking = [v for v in found if v["impact"] in BLOCKING]
        if blocking:
            problems.append(f"{name}@{width}: axe: {blocking}")
    return problems


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_is_accessible_and_fits_the_screen(seeded: Seeded, browser: Browser, axe_source: str, width: int) -> None:
    problems: list[str] = []
    errors: list[str] = []
    for token, pages in ((seeded.token, _main_pages(seeded)), (AGENT_TOKEN, AGENT_PAGES)):
        context = browser.new_context(viewport={"width": width, "height": VIEWPORT_H})
        context.set_default_timeout(WAIT_S * 1000)
        try:
            page = context.new_page()
            _watch(page, errors)
            page.goto(seeded.url + "/ui/login")
            problems += _check(page, "login" if token == seeded.token else "login-agent", width, axe_source)
            _sign_in(page, seeded.url, token)
            for name, path in pages:
                answer = page.goto(seeded.url + path)
                assert answer is not None and answer.status == 200, (name, answer and answer.status)
                problems += _check(page, name, width, axe_source)
        finally:
            context.close()
    assert not errors, errors
    assert not problems, "\n".join(problems)


def test_the_pages_work_without_javascript(seeded: Seeded, browser: Browser) -> None:
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": VIEWPORT_H})
    try:
        page = context.new_page()
        _sign_in(page, seeded.url, seeded.token)
        for name, path in _main_pages(seeded):
            page.goto(seeded.url + path)
            assert page.locator("h1").count() == 1, name
            times = page.locator("time.when")
            if times.count():
                assert times.first.inner_text().endswith(" UTC"), name  # nothing rewrote it
        page.goto(seeded.url + "/ui/audit")
        page.get_by_label("Tool").fill("echo")
        page.get_by_role("button", name="Filter").click()
        assert "tool=echo" in page.url and page.locator("table.audit tbody tr").count() >= 3
        page.goto(seeded.url + f"/ui/runs/{seeded.waiting_run}")
        assert page.get_by_role("button", name="Allow once").count() == 1
        assert page.get_by_role("button", name="Cancel run").count() == 1
    finally:
        context.close()


def test_a_person_sees_times_in_their_own_zone(seeded: Seeded, browser: Browser) -> None:
    context = browser.new_context(timezone_id="Asia/Tokyo", locale="en-GB", viewport={"width": 1280, "height": VIEWPORT_H})
    try:
        page = context.new_page()
        _sign_in(page, seeded.url, seeded.token)
        page.goto(seeded.url + "/ui/audit/1")
        first = page.locator("time.when").first
        iso = first.get_attribute("datetime")
        shown = first.inner_text()
        assert iso and not shown.endswith("UTC"), shown
        expected = page.evaluate("(iso) => new Intl.DateTimeFormat(undefined, {dateStyle: 'medium', timeStyle: 'medium'}).format(new Date(iso))", iso)
        assert shown == expected and page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone") == "Asia/Tokyo"
        assert first.get_attribute("title", timeout=WAIT_S * 1000) is not None and "UTC" in (first.get_attribute("title") or "")
    finally:
        context.close()
