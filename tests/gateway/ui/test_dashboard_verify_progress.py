"""The audit page shows how far "Verify chain" has come while it runs, and then its result
(issue 35 item 4).

Before: the page said nothing until the walk ended (1.45 s at 50,000 records, far longer on a
busy store), although the gateway knew (``GET /api/v1/audit/verify/progress``). Now the page's
``#verify-progress`` follows ``/ui/audit/verify/events`` and fetches its server-rendered
fragment, as the approvals page does, with no inline script under the dashboard's CSP.

The walk is held at a known point without touching pincer: a real PostgreSQL store whose
``audit`` table another connection locks (ACCESS EXCLUSIVE), so the verify has read the chain's
head (the total) and waits for its first batch of records. A real ``pincer serve`` and Debian's
Chromium (tests/chromium.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
from playwright.sync_api import Browser, expect

from tests.backends import postgres_server
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import CLI_TIMEOUT_S, WAIT_S, cli_env, csrf_of, sign_in, wait_until

PINCER = ".venv/bin/pincer"
RECORDS = 3


def _postgres_home(tmp_path: Path) -> tuple[Path, str]:
    url = postgres_server().new_database()
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[store]\nurl = "{url}"\n\n[triggers]\nenabled = false\n')
    for args in (("db", "upgrade"), *(("tools", "call", "echo", "--args", json.dumps({"text": str(i)})) for i in range(RECORDS))):
        done = subprocess.run([PINCER, *args], capture_output=True, text=True, env=cli_env(home), timeout=CLI_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
    return home, url


@contextmanager
def _audit_locked(url: str) -> Iterator[int]:
    """The audit table locked against every read (a verify waits at its first batch); yields the
    chain's head, the total a verify reads before it."""
    with psycopg.connect(url) as conn:
        (head,) = conn.execute("SELECT last_id FROM audit_head WHERE one = 1").fetchone() or (None,)
        assert isinstance(head, int) and head >= RECORDS
        conn.execute("LOCK TABLE audit IN ACCESS EXCLUSIVE MODE")
        try:
            yield head
        finally:
            conn.rollback()


def test_the_verify_progress_is_streamed_and_server_rendered(tmp_path: Path) -> None:
    home, url = _postgres_home(tmp_path)
    with pincer_serve(home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
        assert sign_in(http, server.token).status_code == 303
        page = http.get("/ui/audit")
        assert 'id="verify-progress"' in page.text and 'data-live-source="/ui/audit/verify/events"' in page.text
        assert not re.search(r"<script(?![^>]*\bsrc=)", page.text), "an inline script the CSP would refuse"
        idle = http.get("/ui/audit/verify/progress")
        assert idle.status_code == 200 and "walked" not in idle.text
        csrf = csrf_of(page.text)
        answers: list[httpx.Response] = []
        with _audit_locked(url) as head:
            verifying = threading.Thread(
                target=lambda: answers.append(http.post("/ui/audit/verify", data={"csrf_token": csrf, "full": "1"})),
                daemon=True,
            )
            verifying.start()
            with http.stream("GET", "/ui/audit/verify/events") as events:
                assert events.status_code == 200 and events.headers["content-type"].startswith("text/event-stream")
                lines = events.iter_lines()
                # waits for: the stream's event for the running verify
                assert next(line for line in lines if line.startswith("event:")) == "event: verify"
                shown = wait_until("the progress to name the total", lambda: (
                    text if f"of {head} records walked" in (text := http.get("/ui/audit/verify/progress").text) else None))  # fmt: skip
        assert f"Verifying every record: 0 of {head} records walked" in str(shown)
        verifying.join(WAIT_S)
        assert not verifying.is_alive(), f"the verify did not end within {WAIT_S} s of the unlock"
        (answer,) = answers
        assert answer.status_code == 200 and "Chain intact" in answer.text
        done = http.get("/ui/audit/verify/progress").text
        assert "walked" not in done and f"Chain intact: {head} records" in done  # the result, once it is over
        assert http.get("/ui/audit/verify/events", headers={"Cookie": ""}).status_code in (303, 401)


def test_the_audit_page_shows_the_walk_while_the_button_waits(tmp_path: Path, browser: Browser) -> None:
    home, url = _postgres_home(tmp_path)
    with pincer_serve(home) as server:
        context = browser.new_context(base_url=server.info["url"])
        try:
            page = context.new_page()
            errors: list[str] = []  # a script the CSP refused says so on the console
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto("/ui/login")
            page.get_by_label("Token").fill(server.token)
            page.get_by_role("button", name="Sign in").click()
            expect(page).to_have_url(server.info["url"] + "/ui/")
            page.goto("/ui/audit")
            expect(page.locator("#verify-progress")).to_have_attribute("data-live", "connected", timeout=WAIT_S * 1000)
            with _audit_locked(url) as head:
                page.click("button[name=full]", no_wait_after=True)
                expect(page.locator("#verify-progress")).to_contain_text(
                    f"Verifying every record: 0 of {head} records walked", timeout=WAIT_S * 1000
                )
            expect(page.locator(".verify-result")).to_contain_text(f"Chain intact: {head} records", timeout=WAIT_S * 1000)
            assert not errors, errors
        finally:
            context.close()
