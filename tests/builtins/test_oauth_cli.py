"""``pincer auth setup|status|revoke google`` and ``pincer install bundles/google`` as subprocesses,
against authlib's authorization server on 127.0.0.1:0: the browser mode (``BROWSER`` is a small
script that consents and follows the redirect to the loopback listener, as a browser would), the
``--no-browser`` paste, the scopes shown before consent, a forged paste refused, and the values
never printed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.builtins import fakegoogle
from tests.builtins.fakegoogle import CLIENT_ID, CLIENT_SECRET, FakeGoogle

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 120
HTTP_TIMEOUT_S = 30.0
# The "browser": consents (GET the authorization URL) and follows the redirect to the loopback.
BROWSER_SCRIPT = """
import sys, httpx
answer = httpx.get(sys.argv[1], follow_redirects=False, timeout=30)
httpx.get(answer.headers["location"], timeout=30)
"""


@pytest.fixture
def fake() -> Iterator[FakeGoogle]:
    with fakegoogle.serve() as server:
        yield server


def _env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PINCER_", "GOOGLE_", "SLACK_", "BROWSER"))}
    env.update({"PINCER_HOME": str(home), "PINCER_SECRET_KEY": "ab" * 32, "GOOGLE_OAUTH_CLIENT_ID": CLIENT_ID,
                "GOOGLE_OAUTH_CLIENT_SECRET": CLIENT_SECRET})
    env.update(extra or {})
    return env


def _pincer(home: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PINCER, *args], input=stdin, capture_output=True, text=True,
                          env=env or _env(home), timeout=CLI_TIMEOUT_S)


def _home(tmp_path: Path, fake: FakeGoogle) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(fake.config("gmail", "google_drive"))
    return home


def _secrets(home: Path) -> dict[str, str]:
    from pincer.secrets.store import SecretStore

    with SecretStore.open(home, key=bytes.fromhex("ab" * 32)) as store:
        return {info.name: store.get(info.name) for info in store.names()}


def test_setup_in_the_browser_then_status_and_revoke(tmp_path: Path, fake: FakeGoogle) -> None:
    home = _home(tmp_path, fake)
    browser = tmp_path / "browser.py"
    browser.write_text(BROWSER_SCRIPT)
    env = _env(home, {"BROWSER": f"{sys.executable} {browser} %s"})
    done = _pincer(home, "auth", "setup", "google", "--json", env=env)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["scopes"] == ["https://www.googleapis.com/auth/gmail.modify",
                                "https://www.googleapis.com/auth/gmail.compose", "https://www.googleapis.com/auth/drive"]
    shown = done.stderr.index("allow these scopes")
    assert shown < done.stderr.index("https://www.googleapis.com/auth/drive") < done.stderr.index("open this URL")
    assert fake.consents[-1]["scope"] == " ".join(answer["scopes"])
    assert fake.consents[-1]["redirect_uri"].startswith("http://127.0.0.1:")
    stored = _secrets(home)
    assert stored["google_oauth_token"] in fake.live_access_tokens()
    assert {"google_oauth_refresh_token", "google_oauth_client_id", "google_oauth_client_secret"} <= set(stored)

    status = {r["tool"]: r for r in json.loads(_pincer(home, "auth", "status", "--json").stdout)}
    google = status["google"]
    assert google["stored"] and google["refreshable"] and not google["expired"]
    assert google["expires_at"].endswith("Z") and google["scopes"] == answer["scopes"]
    human = _pincer(home, "auth", "status")
    assert "google: google_oauth_token stored; expires 20" in human.stderr

    revoked = _pincer(home, "auth", "revoke", "google", "--json")
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout)["revoked_at_server"] is True
    assert fake.revocations == [stored["google_oauth_refresh_token"]] and fake.live_access_tokens() == []
    assert "google_oauth_token" not in _secrets(home)
    after = {r["tool"]: r for r in json.loads(_pincer(home, "auth", "status", "--json").stdout)}
    assert after["google"]["stored"] is False and after["google"]["expires_at"] is None
    for out in (done, revoked, human):
        for value in stored.values():
            if value != CLIENT_ID:
                assert value not in out.stdout + out.stderr


def _paste_login(home: Path, redirect_for: object) -> subprocess.CompletedProcess[str]:
    """Run --no-browser: read the URL it prints, consent, paste what ``redirect_for`` makes of it."""
    process = subprocess.Popen([*PINCER, "auth", "setup", "google", "--no-browser", "--json"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(home))
    assert process.stderr is not None and process.stdin is not None
    lines = []
    url = None
    for line in process.stderr:
        lines.append(line)
        if line.startswith("http") and "/authorize?" in line:
            url = line.strip()
        if "paste the address" in line:
            break
    assert url is not None, "".join(lines)
    location = httpx.get(url, follow_redirects=False, timeout=HTTP_TIMEOUT_S).headers["location"]
    out, err = process.communicate(str(redirect_for(location)) + "\n", timeout=CLI_TIMEOUT_S)  # type: ignore[operator]
    return subprocess.CompletedProcess(process.args, process.returncode, out, "".join(lines) + err)


def test_setup_without_a_browser_takes_the_pasted_redirect(tmp_path: Path, fake: FakeGoogle) -> None:
    home = _home(tmp_path, fake)
    done = _paste_login(home, lambda location: location)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["refreshable"] is True
    assert _secrets(home)["google_oauth_token"] in fake.live_access_tokens()


def test_a_forged_paste_is_refused_and_nothing_is_stored(tmp_path: Path, fake: FakeGoogle) -> None:
    home = _home(tmp_path, fake)
    done = _paste_login(home, lambda location: location.split("state=")[0] + "state=forged")
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "oauth_callback_refused" and "forged" in error["message"]
    assert "google_oauth_token" not in _secrets(home)
    assert [t["grant_type"] for t in fake.token_requests] == []  # the code was never exchanged


def test_setup_without_a_client_id_says_how_to_set_one(tmp_path: Path, fake: FakeGoogle) -> None:
    home = _home(tmp_path, fake)
    env = {k: v for k, v in _env(home).items() if not k.startswith("GOOGLE_")}
    done = _pincer(home, "auth", "setup", "google", "--no-browser", "--json", env=env, stdin="")
    assert done.returncode == 2
    assert "pincer secrets set google_oauth_client_id" in json.loads(done.stdout)["error"]["hint"]


def test_setup_with_no_google_tool_enabled_asks_to_install_them(tmp_path: Path, fake: FakeGoogle) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(fake.config())
    done = _pincer(home, "auth", "setup", "google", "--no-browser", "--json", stdin="")
    assert done.returncode == 2
    assert "pincer install bundles/google" in json.loads(done.stdout)["error"]["hint"]


def test_install_the_google_bundle(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = _pincer(home, "install", "bundles/google", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    names = ["gmail", "google_calendar", "google_docs", "google_drive", "google_sheets", "google_slides"]
    assert [r["key"] for r in result["results"]] == [f"tools/{n}" for n in names]
    assert {r["action"] for r in result["results"]} == {"installed"}
    data = tomllib.loads((home / "config.toml").read_text())
    assert all(data["builtins"][n] == {"enabled": True} for n in names)
    tools = {t["name"] for t in json.loads(_pincer(home, "tools", "list", "--json").stdout)}
    assert set(names) <= tools
    again = json.loads(_pincer(home, "install", "bundles/gws", "--json").stdout)  # IronClaw's alias
    assert {r["action"] for r in again["results"]} == {"unchanged"}


def test_slack_setup_stores_the_bot_token_the_slack_tool_reads(tmp_path: Path, fake: FakeGoogle) -> None:
    home = _home(tmp_path, fake)
    browser = tmp_path / "browser.py"
    browser.write_text(BROWSER_SCRIPT)
    env = _env(home, {"BROWSER": f"{sys.executable} {browser} %s", "SLACK_OAUTH_CLIENT_ID": CLIENT_ID,
                      "SLACK_OAUTH_CLIENT_SECRET": CLIENT_SECRET})
    done = _pincer(home, "auth", "setup", "slack", "--oauth", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["secret"] == "slack_bot_token"
    assert "chat:write,channels:read" in fake.consents[-1]["scope"]
    stored = _secrets(home)
    assert stored["slack_bot_token"] in fake.live_access_tokens()
    assert stored["slack_bot_token"] not in done.stdout + done.stderr
    status = {r["tool"]: r for r in json.loads(_pincer(home, "auth", "status", "--json").stdout)}
    assert status["slack"]["stored"] and status["slack"]["expires_at"] is None  # Slack's bot tokens do not expire
    revoked = json.loads(_pincer(home, "auth", "revoke", "slack", "--json").stdout)
    assert revoked["revoked_at_server"] is True and "slack_bot_token" not in _secrets(home)


# A browser that stays open after the redirect (a console browser such as w3m, or a BROWSER
# command that waits for its window): it writes its pid, then lingers until killed.
LINGERING_BROWSER = """
import os, sys, time, httpx
open(sys.argv[2], "w").write(str(os.getpid()))
devnull = os.open(os.devnull, os.O_WRONLY)  # not the command's pipes: the test reads them to their end
os.dup2(devnull, 1)
os.dup2(devnull, 2)
answer = httpx.get(sys.argv[1], follow_redirects=False, timeout=30)
httpx.get(answer.headers["location"], timeout=300)  # a person's browser waits, too
time.sleep(600)
"""
# Far longer than the login takes, far shorter than the browser lingers.
LINGERING_CLI_TIMEOUT_S = 60


def test_the_redirect_is_answered_while_the_browser_command_still_runs(tmp_path: Path, fake: FakeGoogle) -> None:
    """Before, the loopback listener began reading only once ``webbrowser.open`` returned, which
    for a BROWSER command that waits (a console browser) is when the person quits it: the redirect
    sat unanswered, the browser's request timed out (30 s in the other tests), or the login hung."""
    home = _home(tmp_path, fake)
    browser, pid_file = tmp_path / "browser.py", tmp_path / "browser.pid"
    browser.write_text(LINGERING_BROWSER)
    env = _env(home, {"BROWSER": f"{sys.executable} {browser} %s {pid_file}"})
    try:
        done = subprocess.run([*PINCER, "auth", "setup", "google", "--json"], capture_output=True, text=True, env=env,
                              timeout=LINGERING_CLI_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"`pincer auth setup google` did not finish within {LINGERING_CLI_TIMEOUT_S} s while its browser stayed open")
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert done.returncode == 0, done.stderr
    assert _secrets(home)["google_oauth_token"] in fake.live_access_tokens()
