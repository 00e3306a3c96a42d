"""Messages a user reads, as ``pincer`` prints them (real subprocesses, a real PINCER_HOME):
each names what is really at fault and reads as it was written.

Issue 21 item 7; each test's docstring says what main printed before."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

PINCER_BIN = Path(sys.executable).with_name("pincer")
CLI_TIMEOUT_S = 120


def _pincer(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    base.update({"PINCER_HOME": str(home), "HOME": str(home.parent / "user-home"), "COLUMNS": "300"}, **(env or {}))
    return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=base, timeout=CLI_TIMEOUT_S)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _home_with_skill(tmp_path: Path, config: str) -> Path:
    home = tmp_path / "home"
    folder = home / "workspace" / "skills" / "hello"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: hello\ndescription: Say hello\n---\nSay hello.\n")
    (home / "config.toml").write_text(config)
    return home


def test_hub_token_new_prints_the_hub_sources_table_whole(tmp_path: Path) -> None:
    """Failed on main before this test: it printed ``token_secret = "hub_token" in its []``:
    ``[hub.sources]`` was read as rich markup and dropped."""
    home = tmp_path / "home"
    home.mkdir()
    done = _pincer(home, "hub", "token", "new", "--publisher", "alice")
    assert done.returncode == 0, done.stderr
    assert 'token_secret = "hub_token" in its [[hub.sources]])' in _flat(done.stderr)


def test_a_profiles_missing_key_variable_names_the_profile_table(tmp_path: Path) -> None:
    """Failed on main before this test: the error named ``[llm] api_key_env`` when the key at
    fault is ``[llm.profiles.claude] api_key_env``."""
    home = _home_with_skill(
        tmp_path,
        '[llm]\nmodel = "local-llama"\nbase_url = "http://127.0.0.1:9/v1"\n\n'
        '[llm.profiles.claude]\nprovider = "anthropic"\nmodel = "claude-x"\napi_key_env = "NO_SUCH_KEY_VAR_4411"\n',
    )
    done = _pincer(home, "run", "hello", "--profile", "claude", "--json")
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 2
    assert "NO_SUCH_KEY_VAR_4411 ([llm.profiles.claude] api_key_env) is not set" in error["message"]
    assert "api_key_secret in [llm.profiles.claude]" in error["hint"]


def test_a_cost_budget_for_an_unpriced_model_names_the_pricing_key(tmp_path: Path) -> None:
    """Failed on main before this test: ``--budget cost_usd=1`` for a model without a price
    said to leave out ``[agent] max_cost_usd``, which was not set; the fix is the price."""
    home = _home_with_skill(tmp_path, '[llm]\nmodel = "local-llama"\nbase_url = "http://127.0.0.1:9/v1"\n')
    done = _pincer(home, "run", "hello", "--budget", "cost_usd=1", "--json")
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 2 and "(--budget cost_usd)" in error["message"] and "'local-llama'" in error["message"]
    assert '[agent.prices."local-llama"]' in error["hint"] and "input_per_mtok" in error["hint"]
    assert "max_cost_usd" not in error["hint"] and error["hint"].endswith("leave out --budget cost_usd")


def test_a_model_server_that_cannot_be_reached_is_named_by_its_url(tmp_path: Path) -> None:
    """Failed on main before this test: "cannot reach the model server (connection failed)",
    with no word of the URL tried."""
    port = _closed_port()
    home = _home_with_skill(tmp_path, f'[llm]\nmodel = "local-llama"\nbase_url = "http://127.0.0.1:{port}/v1"\nmax_retries = 0\n')
    done = _pincer(home, "run", "hello")
    assert done.returncode == 1, done.stderr
    assert f"cannot reach the model server at http://127.0.0.1:{port}/v1/chat/completions" in done.stderr


def test_a_long_message_is_not_folded_when_stderr_is_piped(tmp_path: Path) -> None:
    """Failed on main before this test: piped output was folded at 160 columns, so a message
    naming a long path (``installed notes ... into /tmp/.../notes, recorded in pincer.lock``)
    broke across lines and a script grepping for its end found nothing (CI, stop 32)."""
    long_path = "/tmp/" + "deep-folder/" * 20 + "notes"
    script = (
        "from pincer.cli.console import stderr\n"
        "from rich.table import Table\n"
        f"stderr.print('installed notes (1 files) into {long_path}, recorded in pincer.lock')\n"
        "table = Table('name', 'why')\n"
        "table.add_row('x', 'y ' * 200)\n"
        "stderr.print(table)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    first, *table_lines = done.stderr.splitlines()
    assert first == f"installed notes (1 files) into {long_path}, recorded in pincer.lock"
    # Tables still fit the 160 columns piped output is given.
    assert table_lines and max(len(line) for line in table_lines) <= 160
