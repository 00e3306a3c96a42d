"""``pincer auth setup|status|revoke`` as a subprocess: the token from stdin or the env var,
checked against the validation endpoint on the configured base URL, stored, never printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.builtins.conftest import TOKEN
from tests.builtins.fakegithub import FakeGitHub

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 120


def _pincer(home: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PINCER_", "GITHUB_", "BRAVE_"))}
    base["PINCER_HOME"] = str(home)
    base.update(env or {})
    return subprocess.run([*PINCER, *args], input=stdin, capture_output=True, text=True, env=base, timeout=CLI_TIMEOUT_S)


def _home(tmp_path: Path, fake: FakeGitHub) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[builtins.github]\nenabled = true\nbase_url = "{fake.base_url}"\n')
    return home


def test_setup_status_revoke(tmp_path: Path, fake_github: FakeGitHub) -> None:
    home = _home(tmp_path, fake_github)
    before = json.loads(_pincer(home, "auth", "status", "--json").stdout)
    assert {r["tool"]: r["stored"] for r in before} == {"github": False, "llm_context": False, "web_search": False}

    done = _pincer(home, "auth", "setup", "github", "--json", stdin=TOKEN + "\n")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["checked"] == f"{fake_github.base_url}/user" and answer["source"] == "stdin"
    assert [r.operation_id for r in fake_github.requests] == ["users/get-authenticated"]
    assert fake_github.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert fake_github.errors == []

    after = {r["tool"]: r for r in json.loads(_pincer(home, "auth", "status", "--json").stdout)}
    assert after["github"]["stored"] and after["github"]["base_url"] == fake_github.base_url
    revoked = _pincer(home, "auth", "revoke", "github", "--json")
    assert json.loads(revoked.stdout)["removed"] is True
    final = {r["tool"]: r["stored"] for r in json.loads(_pincer(home, "auth", "status", "--json").stdout)}
    assert final["github"] is False
    for out in (done, revoked):
        assert TOKEN not in out.stdout + out.stderr


def test_a_refused_token_is_not_stored(tmp_path: Path, fake_github: FakeGitHub) -> None:
    home = _home(tmp_path, fake_github)
    fake_github.script.append((401, {}, {"message": "Bad credentials"}))
    done = _pincer(home, "auth", "setup", "github", stdin="ghp_wrong\n")
    assert done.returncode == 1
    assert "refused the token" in done.stderr and "401" in done.stderr and "ghp_wrong" not in done.stderr
    status = {r["tool"]: r["stored"] for r in json.loads(_pincer(home, "auth", "status", "--json").stdout)}
    assert status["github"] is False


def test_the_token_from_the_env_var_the_manifest_names(tmp_path: Path, fake_github: FakeGitHub) -> None:
    home = _home(tmp_path, fake_github)
    done = _pincer(home, "auth", "setup", "github", "--from-env", "--json", env={"GITHUB_TOKEN": TOKEN})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["source"] == "env var GITHUB_TOKEN"
    missing = _pincer(home, "auth", "setup", "github", "--from-env")
    assert missing.returncode == 2 and "GITHUB_TOKEN is not set" in missing.stderr


def test_unknown_names_say_which_exist(tmp_path: Path, fake_github: FakeGitHub) -> None:
    home = _home(tmp_path, fake_github)
    done = _pincer(home, "auth", "setup", "gitlab", stdin="x")
    assert done.returncode == 2 and "github" in done.stderr
