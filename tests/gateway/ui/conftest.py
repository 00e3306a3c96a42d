"""What the dashboard's tests share: a real ``pincer serve`` on 127.0.0.1:0, signing in over
plain HTTP, a ``pincer tools call`` that waits on an approval, a tampered audit database, and
the screenshots the browser tests save (their paths are printed in pytest's terminal summary,
so CI's log names them)."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser

from pincer.gateway.tokens import token_digest

REPO = Path(__file__).resolve().parents[3]
SCREENSHOTS = REPO / "test-artifacts" / "dashboard"  # CI keeps test-artifacts/
_SESSION_STARTED = time.time()
PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 60.0
WAIT_S = 90.0  # the longest any test waits for something to show up (a loaded 2-core machine has needed over 30 s)
POLL_S = 0.1
AGENT_TOKEN = "pcr_dashboard_agent_token_0123456789abc"
SECRET = "ghp_dashboardSecret0123456789abcdefghijXY"
_saved: list[Path] = []


def dashboard_config(*, max_failures: int = 20) -> str:
    """A home's config.toml: a non-main session ``agent`` with its own token."""
    return (
        f"[triggers]\nmax_failures_per_minute = {max_failures}\n\n"
        f'[[gateway.tokens]]\nsha256 = "{token_digest(AGENT_TOKEN)}"\nsession = "agent"\n'
    )


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    return env


def pincer_cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PINCER, *args], input=stdin, capture_output=True, text=True, env=cli_env(home),
                          timeout=CLI_TIMEOUT_S)  # fmt: skip


def waiting_call(home: Path, tool: str, args: str) -> subprocess.Popen[str]:
    """``pincer tools call TOOL --args ARGS --json`` started and left to wait (it asks)."""
    return subprocess.Popen([*PINCER, "tools", "call", tool, "--args", args, "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(home))  # fmt: skip


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no form with a csrf_token"
    return found.group(1)


def sign_in(client: httpx.Client, token: str) -> httpx.Response:
    form = client.get("/ui/login")
    return client.post("/ui/login", data={"token": token, "csrf_token": csrf_of(form.text)})


def wait_until(what: str, check: object) -> object:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = check()  # type: ignore[operator]
        if value:
            return value
        time.sleep(POLL_S)
    raise AssertionError(f"{what} did not happen within {WAIT_S} s")


def tamper_audit(home: Path, record_id: int, reason: str = "rewritten later") -> None:
    """Rewrite one audit record's reason behind pincer's back."""
    with sqlite3.connect(home / "pincer.db") as conn:
        conn.execute("UPDATE audit SET reason = ? WHERE id = ?", (reason, record_id))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium (tests/chromium.py), one for a test module."""
    from tests.chromium import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A ``pincer serve`` over a home with something on every page (``seeded.py``), one for a
    test module."""
    from tests.gateway.ui.seeded import seeded_dashboard

    home = tmp_path_factory.mktemp("dashboard") / "home"
    home.mkdir()
    with seeded_dashboard(home) as made:
        yield made


@pytest.fixture
def dashboard_home(pincer_home: Path) -> Path:
    (pincer_home / "config.toml").write_text(dashboard_config())
    return pincer_home


@pytest.fixture
def stopped_calls() -> Iterator[list[subprocess.Popen[str]]]:
    """CLI calls a test started; killed at the end if still waiting."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=CLI_TIMEOUT_S)


def save_screenshot(page: object, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"flow-{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    _saved.append(path)
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Under `make test` the screenshots are taken in pytest-xdist's worker processes, so this
    # process lists the files this run wrote rather than what it saved itself.
    saved = _saved or sorted(
        (p for p in SCREENSHOTS.glob("*.png") if p.stat().st_mtime >= _SESSION_STARTED), key=lambda p: p.stat().st_mtime
    )
    if saved:
        terminalreporter.section("dashboard screenshots")
        for path in saved:
            terminalreporter.write_line(str(path))
