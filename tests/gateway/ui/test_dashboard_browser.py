"""The dashboard in Debian's Chromium (Playwright) against a real ``pincer serve``: sign in, a
``pincer tools call write_file`` that asks shows up on the approvals page without a reload and
is allowed with a click, the audit page and "Verify chain" (intact, then a tampered database's
first bad record), CSRF, a non-main token, escaping and redaction. Each page is saved as a
screenshot under ``test-artifacts/dashboard/flow-*.png`` (the paths close pytest's summary)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import (
    AGENT_TOKEN,
    CLI_TIMEOUT_S,
    SECRET,
    WAIT_S,
    pincer_cli,
    save_screenshot,
    tamper_audit,
    wait_until,
    waiting_call,
)  # fmt: skip

WAIT_MS = WAIT_S * 1000


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    made = browser.new_context()
    made.set_default_timeout(WAIT_MS)
    try:
        yield made
    finally:
        made.close()


def _watched(page: Page) -> list[str]:
    """Console errors of the page (a CSP violation, a script error) as they come."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def _sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url + "/ui/approvals")
    expect(page).to_have_url(url + "/ui/login?next=/ui/approvals")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(url + "/ui/approvals")


def _pending(home: Path) -> list[dict]:
    return list(json.loads(pincer_cli(home, "approvals", "list", "--json").stdout)["approvals"])


def test_an_asking_call_appears_live_is_allowed_with_a_click_and_the_chain_verifies(
    dashboard_home: Path, context: BrowserContext, stopped_calls: list[subprocess.Popen[str]]
) -> None:
    with pincer_serve(dashboard_home) as server:
        url = server.info["url"]
        page = context.new_page()
        errors = _watched(page)
        page.goto(url + "/ui/login")
        page.get_by_label("Token").fill("pcr_wrong_token_for_the_screenshot_0123")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("wrong token")
        save_screenshot(page, "login-wrong-token")
        _sign_in(page, url, server.token)
        errors.clear()  # the wrong token's 401 above was the point
        expect(page.locator("#approval-rows[data-live='connected']")).to_have_count(1)
        page.evaluate("window.__notReloaded = true")

        call = waiting_call(dashboard_home, "write_file", '{"path": "clicked.txt", "content": "from the browser"}')
        stopped_calls.append(call)
        card = page.locator("article.approval.status-pending")
        expect(card).to_have_count(1, timeout=WAIT_MS)
        assert page.evaluate("window.__notReloaded") is True  # it came over SSE, not a reload
        expect(card).to_contain_text("write_file")
        expect(card.locator("div.args")).to_contain_text("from the browser")
        save_screenshot(page, "approvals-waiting")

        # A form post without csrf_token (same cookies, same origin) is refused and changes nothing.
        approval_id = card.get_attribute("data-approval-id")
        forged = context.request.post(f"{url}/ui/approvals/{approval_id}", form={"decision": "deny"})
        assert forged.status == 403
        assert _pending(dashboard_home)[0]["status"] == "pending"

        card.get_by_role("button", name="Allow once").click()
        expect(page.get_by_role("status")).to_contain_text(f"approval {approval_id} (write_file): allow_once")
        out, err = call.communicate(timeout=CLI_TIMEOUT_S)
        assert call.returncode == 0, err
        assert json.loads(out)["ok"] is True
        assert (dashboard_home / "workspace" / "clicked.txt").read_text() == "from the browser"
        save_screenshot(page, "approvals-answered")

        page.get_by_role("link", name="Audit").click()
        rows = page.locator("table.audit tbody tr")
        expect(rows.filter(has_text="write_file").first).to_be_visible()
        page.get_by_role("button", name="Verify chain").click()
        expect(page.locator(".verify-result")).to_contain_text("Chain intact")
        save_screenshot(page, "audit-verified")
        page.get_by_label("Tool").fill("write_file")
        page.get_by_role("button", name="Filter").click()
        expect(rows.filter(has_text="echo")).to_have_count(0)
        rows.filter(has_text="write_file").first.get_by_role("link").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text("Audit record")
        save_screenshot(page, "audit-record")

        pages = (("overview", "Overview"), ("runs", "Runs"), ("grants", "Grants"), ("skills", "Skills"),
                 ("mcp-servers", "MCP servers"), ("installed", "Installed"), ("tools", "Tools"))
        for name, link in pages:
            page.get_by_role("link", name=link, exact=True).click()
            expect(page.get_by_role("heading", level=1)).to_be_visible()
            save_screenshot(page, name)
        page.get_by_role("link", name="write_file").click()
        expect(page.get_by_role("heading", level=1)).to_contain_text("write_file")
        save_screenshot(page, "tool-detail")
        assert errors == [], errors  # no CSP violation, no script error on any page


def test_a_tampered_database_shows_its_first_bad_record(dashboard_home: Path, context: BrowserContext) -> None:
    for text in ("one", "two", "three"):
        assert pincer_cli(dashboard_home, "tools", "call", "echo", "--args", json.dumps({"text": text})).returncode == 0
    tamper_audit(dashboard_home, 2)
    with pincer_serve(dashboard_home) as server:
        page = context.new_page()
        _sign_in(page, server.info["url"], server.token)
        page.get_by_role("link", name="Audit").click()
        page.get_by_role("button", name="Verify chain").click()
        result = page.locator(".verify-result")
        expect(result).to_contain_text("Chain broken at record 2")
        expect(result).to_contain_text("audit record 2 was altered")
        save_screenshot(page, "audit-tampered")


def test_a_non_main_token_cannot_see_mains_approvals(
    dashboard_home: Path, context: BrowserContext, stopped_calls: list[subprocess.Popen[str]]
) -> None:
    call = waiting_call(dashboard_home, "write_file", '{"path": "main.txt", "content": "main"}')
    stopped_calls.append(call)
    wait_until("main's call asking", lambda: _pending(dashboard_home))
    with pincer_serve(dashboard_home) as server:
        page = context.new_page()
        _sign_in(page, server.info["url"], AGENT_TOKEN)
        expect(page.locator(".who")).to_contain_text("agent")
        expect(page.locator("article.approval")).to_have_count(0)
        expect(page.locator("#approval-rows")).to_contain_text("Nothing is waiting")
        save_screenshot(page, "approvals-non-main")
        page.get_by_role("link", name="Audit").click()
        expect(page.locator("table.audit")).not_to_contain_text("write_file")
    assert _pending(dashboard_home)[0]["status"] == "pending"


def test_script_in_a_payload_shows_as_text_and_a_stored_secret_is_redacted(
    dashboard_home: Path, context: BrowserContext
) -> None:
    assert pincer_cli(dashboard_home, "secrets", "set", "github_token", stdin=SECRET + "\n").returncode == 0
    script = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
    called = pincer_cli(dashboard_home, "tools", "call", "echo", "--args", json.dumps({"text": f"{script} {SECRET}"}))
    assert called.returncode == 0
    # Record 1 is the secret's (setting it is an act, docs/acts.md); the echo's is the last.
    (echoed,) = [r["id"] for r in json.loads(pincer_cli(dashboard_home, "audit", "list", "--json").stdout) if r["tool"] == "echo"]
    with pincer_serve(dashboard_home) as server:
        page = context.new_page()
        errors = _watched(page)
        _sign_in(page, server.info["url"], server.token)
        page.goto(server.info["url"] + f"/ui/audit/{echoed}")
        args = page.locator("div.args").filter(has_text="<script>")
        expect(args).to_have_count(1)
        assert page.title() != "pwned" and page.locator("img[src=x]").count() == 0
        assert SECRET not in page.content()
        save_screenshot(page, "audit-record-escaped")
        assert errors == []


def test_every_form_works_without_javascript(
    dashboard_home: Path, browser: Browser, stopped_calls: list[subprocess.Popen[str]]
) -> None:
    """Deny a waiting call, add a grant with hosts and an expiry, revoke it: plain form posts."""
    context = browser.new_context(java_script_enabled=False)
    context.set_default_timeout(WAIT_MS)
    try:
        with pincer_serve(dashboard_home) as server:
            url = server.info["url"]
            page = context.new_page()
            _sign_in(page, url, server.token)
            call = waiting_call(dashboard_home, "write_file", '{"path": "nojs.txt", "content": "never"}')
            stopped_calls.append(call)
            wait_until("the call to ask", lambda: _pending(dashboard_home))
            page.goto(url + "/ui/approvals")  # no live updates without a script: a reload shows it
            card = page.locator("article.approval.status-pending")
            expect(card).to_have_count(1)
            card.get_by_role("button", name="Deny").click()
            expect(page.get_by_role("status")).to_contain_text("deny")
            out, _ = call.communicate(timeout=CLI_TIMEOUT_S)
            assert json.loads(out)["ok"] is False
            assert not (dashboard_home / "workspace" / "nojs.txt").exists()

            page.goto(url + "/ui/grants")
            form = page.locator("form.grant-form")
            form.locator("input[name=tool]").fill("http")  # "Tool" is also in the hosts field's hint
            form.get_by_label("network", exact=True).check()
            form.get_by_label("Hosts").fill("api.example.com")
            form.get_by_label("Expires in (hours)").fill("2")
            form.get_by_role("button", name="Add grant").click()
            expect(page.get_by_role("status")).to_have_text("grant added")
            added = page.locator("article.grant").filter(has_text="stored")
            expect(added).to_have_count(1)
            expect(added).to_contain_text("api.example.com")
            expect(added.locator("time.when")).to_have_count(1)  # the expiry, as a time
            added.get_by_role("button", name="Revoke").click()
            expect(page.get_by_role("status")).to_have_text("grant revoked")
            expect(page.locator("article.grant").filter(has_text="stored")).to_have_count(0)
    finally:
        context.close()
