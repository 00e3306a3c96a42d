"""Issue 38, "CLI messages": what a person reads, through the real `pincer` (subprocesses, a real
PINCER_HOME, the gateway on 127.0.0.1:0). Each docstring says what main printed before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from tests.gateway.conftest import pincer_serve

PINCER_BIN = Path(sys.executable).with_name("pincer")
CLI_TIMEOUT_S = 120


def _pincer(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env.update({"PINCER_HOME": str(home), "HOME": str(home.parent / "user-home"), "COLUMNS": "300"})
    return subprocess.run([str(PINCER_BIN), *args], input=stdin, capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _home(tmp_path: Path, config: str = "") -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(config)
    return home


def test_storing_the_store_password_does_not_warn_to_store_it(tmp_path: Path) -> None:
    """Before: `pincer secrets set pg_password` printed "warning: the registry files of ... were
    not synced with the store: no secret named 'pg_password' (set it with: pincer secrets set
    pg_password)", the command being run, before it stored the secret."""
    home = _home(tmp_path, '[store]\nurl = "postgresql://pincer@127.0.0.1:1/pincer"\npassword_secret = "pg_password"\n')
    stored = _pincer(home, "secrets", "set", "pg_password", stdin="s3cret")
    # Setting a secret is an act the audit log in the store records (docs/acts.md), so with no
    # server at this URL the command says it cannot reach it; it never tells to run itself.
    assert "were not synced" not in stored.stderr and "pincer secrets set pg_password" not in stored.stderr, stored.stderr
    listed = _pincer(home, "secrets", "list", "--json")
    assert [s["name"] for s in json.loads(listed.stdout)] == ["pg_password"] and "warning" not in listed.stderr


def test_an_offline_token_check_names_no_check(tmp_path: Path) -> None:
    """Before: offline, `pincer auth setup github` said "could not resolve 'api.github.com'" with
    the hint "check the host name", where storing it unchecked (--no-check) is the way."""
    # .invalid never resolves (RFC 6761): offline for certain, on any machine.
    home = _home(tmp_path, '[builtins.github]\nenabled = true\nbase_url = "https://api.github.invalid"\n')
    offline = _pincer(home, "auth", "setup", "github", stdin="ghp_0123456789abcdefghijklmnopqrstuvwxyzAB")
    assert offline.returncode == 1
    said = _flat(offline.stderr)
    assert "could not check the token: GET https://api.github.invalid" in said and "could not resolve" in said
    assert "hint: check the network connection; offline, store it unchecked: `pincer auth setup github --no-check`" in said
    assert "check the host name" not in said
    assert "github_token" not in _pincer(home, "secrets", "list", "--json").stdout  # nothing stored
    unchecked = _pincer(home, "auth", "setup", "github", "--no-check", stdin="ghp_0123456789abcdefghijklmnopqrstuvwxyzAB")
    assert unchecked.returncode == 0, unchecked.stderr
    assert unchecked.stderr.strip() == "stored github_token for github from stdin (not checked: --no-check)"


def test_a_session_that_cannot_see_a_tool_is_told_its_own_list_and_the_key_that_opens_it(tmp_path: Path) -> None:
    """Before: a non-main session's call of echo answered "no tool named 'echo'" with the hint
    "`pincer tools list` shows the tools there are", and `pincer tools list` (main's) lists echo."""
    home = _home(tmp_path)
    made = _pincer(home, "token", "new", "--session", "ci", "--json")
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)["token"]
    with pincer_serve(home) as server:
        hidden = httpx.post(server.info["api_url"] + "/tools/echo/call", json={"args": {"text": "hi"}},
                            headers={"Authorization": f"Bearer {token}"}, trust_env=False, timeout=60.0)  # fmt: skip
        missing = httpx.post(server.info["api_url"] + "/tools/no_such_tool/call", json={"args": {}},
                             headers={"Authorization": f"Bearer {token}"}, trust_env=False, timeout=60.0)  # fmt: skip
    error = hidden.json()["error"]
    assert hidden.status_code == 404, hidden.text
    assert error["message"] == "no tool named 'echo' in session 'ci' (its session policy hides the tools it does not allow)"
    assert error["hint"] == ("`pincer tools list --session ci` lists what it sees; to open a tool to it, add the "
                             "tool's name to [sessions.ci] allow in config.toml")  # fmt: skip
    # The same words as for a tool that does not exist: the session learns nothing of echo.
    assert missing.json()["error"]["message"] == error["message"].replace("'echo'", "'no_such_tool'")
    # What the hint says holds: the session's list has no echo; the key opens it.
    listed = _pincer(home, "tools", "list", "--session", "ci", "--json")
    assert "echo" not in {t["name"] for t in json.loads(listed.stdout)}
    config = (home / "config.toml").read_text()
    (home / "config.toml").write_text(config + '\n[sessions.ci]\nallow = ["echo"]\n')
    called = _pincer(home, "tools", "call", "echo", "--session", "ci", "--args", '{"text": "hi"}', "--json")
    assert json.loads(called.stdout)["ok"] is True, called.stdout


def test_removing_a_bundled_tool_that_install_enabled_disables_it(tmp_path: Path) -> None:
    """Before: `pincer remove tools/browser` after `pincer install tools/browser` said
    "tools/browser was not installed from the hub" (exit 2) and left it enabled."""
    home = _home(tmp_path)
    installed = _pincer(home, "install", "tools/web_fetch")
    assert installed.returncode == 0, installed.stderr
    removed = _pincer(home, "remove", "tools/web_fetch")
    assert removed.returncode == 0, removed.stderr
    assert removed.stderr.strip() == "removed tools/web_fetch (bundled with pincer: [builtins.web_fetch] enabled = false)"
    assert tomllib.loads((home / "config.toml").read_text())["builtins"]["web_fetch"]["enabled"] is False
    assert "web_fetch" not in {t["name"] for t in json.loads(_pincer(home, "tools", "list", "--json").stdout)}
    again = _pincer(home, "remove", "tools/web_fetch")
    assert again.returncode == 0 and again.stderr.strip() == "nothing to remove: tools/web_fetch is not enabled"
    unknown = _pincer(home, "remove", "tools/no_such_tool")
    assert unknown.returncode == 2 and "tools/no_such_tool was not installed from the hub" in unknown.stderr


def test_a_call_whose_token_is_missing_is_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    """Before: github's create_issue without a token went to an approval ("waiting for approval
    ...") and failed only once someone answered or the approval timed out."""
    home = _home(tmp_path, "[builtins.github]\nenabled = true\n\n[approvals]\ntimeout_s = 5\n")
    args = '{"action": "create_issue", "owner": "o", "repo": "r", "title": "t"}'
    called = _pincer(home, "tools", "call", "github", "--args", args)
    assert called.returncode == 1
    said = _flat(called.stderr)
    assert "waiting for approval" not in said and "approval_timeout" not in said
    assert "github: its credential is not set up: secret 'github_token' is not set, so the call cannot run" in said
    assert "hint: set it with `pincer auth setup github` (or `pincer secrets set github_token`), then call again" in said
    (record,) = json.loads(_pincer(home, "audit", "list", "--json").stdout)
    assert record["approval_id"] is None and record["error_code"] == "secret_error"
    assert json.loads(_pincer(home, "approvals", "list", "--json").stdout) == {"approvals": [], "next_cursor": None}


def test_a_credential_rule_refuses_only_the_calls_that_need_it(tmp_path: Path) -> None:
    """[[credentials]] for the http tool: a call to the rule's host without its secret is refused
    before the ask; a call to another host is not refused for a credential it would not use."""
    home = _home(tmp_path, """
[[credentials]]
secret = "example_key"
host_patterns = ["api.example.com"]

[approvals]
timeout_s = 2
""")
    needs = _pincer(home, "tools", "call", "http", "--args", '{"url": "https://api.example.com/v1/x"}')
    assert "secret 'example_key' is not set" in _flat(needs.stderr) and "waiting for approval" not in needs.stderr
    other = _pincer(home, "tools", "call", "http", "--args", '{"url": "https://other.example.org/"}')
    assert "waiting for approval" in other.stderr and "example_key" not in other.stderr


def test_run_takes_a_plain_prompt_without_a_skill(tmp_path: Path) -> None:
    """Before: `pincer run` required a skill ("Missing argument 'SKILL'"); a plain prompt had no
    run of its own (only the interactive `pincer chat`)."""
    script = [
        Turn(text="Checking the time.", calls=(ScriptedCall(name="time", arguments={}),)),
        Turn(text="It is now."),
    ]
    with serve_models(script) as models:
        home = _home(tmp_path, f'[llm]\nmodel = "gpt-4o-mini"\nbase_url = "{models.openai_url}"\n')
        ran = _pincer(home, "run", "--message", "What time is it?", "--json")
        asked = models.requests
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["status"] == "done" and result["skill"] is None, result
    assert any("What time is it?" in json.dumps(r.body, default=str) for r in asked), asked
    nothing = _pincer(home, "run")
    assert nothing.returncode == 2
    assert "nothing to run: name a skill, or give the prompt with --message" in _flat(nothing.stderr)
