"""``pincer build``, ``pincer builds list|show`` and ``--edit`` as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pincer.demo.model_server import serve_models
from tests.acts.support import CLI_ACTOR, audit_rows
from tests.builder.helpers import code_turn, plan_turn
from tests.builder.test_refusals import SHOUT

PINCER = Path(sys.executable).parent / "pincer"
TIMEOUT_S = 240


def _pincer(home: Path, runner_cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env.update(PINCER_HOME=str(home), PINCER_RUNNER_CACHE=str(runner_cache), HOME=str(home.parent))
    return subprocess.run([str(PINCER), *args], capture_output=True, text=True, env=env, timeout=TIMEOUT_S, check=False)


def test_build_then_list_show_and_edit_from_the_command_line(tmp_path, runner_cache):
    home = tmp_path / "home"
    home.mkdir()
    schema = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
    louder = SHOUT.replace('"!"', '"!!"')
    script = [
        plan_turn("shout", [], schema=schema),
        code_turn(SHOUT, [{"args": {"word": "hey"}, "expect": {"shout": "HEY!"}}]),
        plan_turn("shout", [], schema=schema),
        code_turn(SHOUT.replace("upper()", "lower()"), [{"args": {"word": "hey"}, "expect": {"shout": "HEY!!"}}]),
        code_turn(louder, [{"args": {"word": "hey"}, "expect": {"shout": "HEY!!"}}]),
    ]
    with serve_models(script) as server:
        (home / "config.toml").write_text(f'[llm]\nprovider = "openai"\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n')
        done = _pincer(home, runner_cache, "build", "shout a word", "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout)["build"]
        assert report["key"] == "tools/shout" and report["iterations"] == 1 and report["version"] == "0.1.1"
        assert {s["stage"] for s in report["stages"]} >= {"runner", "plan", "generate", "check", "test", "build", "register"}
        # The build's install is one act, by the CLI's user (docs/acts.md: tool-build).
        built = [r for r in audit_rows(home) if r["kind"] == "hub"]
        assert [(r["tool"], r["caller"]) for r in built] == [("tools/shout", CLI_ACTOR)], built

        human = _pincer(home, runner_cache, "build", "--edit", "shout", "two exclamation marks", "--max-iterations", "3")
        assert human.returncode == 0, human.stderr[-3000:]
        assert "built tools/shout@0.1.2" in human.stderr and "2 iteration(s)" in human.stderr
        for stage in ("plan", "test", "register"):
            assert any(line.startswith(stage) and " s " in line for line in human.stderr.splitlines())
        edit_brief = server.requests[2].body["messages"][1]["content"]
        assert "changes the existing tool 'shout'" in edit_brief and 'upper() + "!"' in edit_brief

    listed = _pincer(home, runner_cache, "builds", "list", "--json")
    assert listed.returncode == 0 and [r["name"] for r in json.loads(listed.stdout)] == ["shout"]
    shown = json.loads(_pincer(home, runner_cache, "builds", "show", "shout", "--json").stdout)
    assert shown["iterations"] == 2 and len(shown["diffs"]) == 1 and "+    return {\"shout\": params[\"word\"].upper() + \"!!\"}" in shown["diffs"][0]
    called = _pincer(home, runner_cache, "tools", "call", "shout", "--args", '{"word": "hi"}', "--json")
    assert called.returncode == 0, called.stdout + called.stderr[-2000:]
    assert json.loads(called.stdout)["output"] == {"shout": "HI!!"}
    verified = _pincer(home, runner_cache, "verify", "--json")
    assert verified.returncode == 0, verified.stdout


WATCH_TIMEOUT_S = 30.0  # generous: the watcher reacts within a second on a quiet machine


def test_a_running_pincer_serve_picks_up_a_built_tool_without_a_restart(tmp_path, runner_cache):
    import time

    import httpx

    from tests.gateway.conftest import pincer_serve

    home = tmp_path / "home"
    home.mkdir()
    schema = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
    source = SHOUT.replace("Shout a word.", f"Shout a word, like {LATE_SECRET}.")
    script = [plan_turn("shout", [], schema=schema), code_turn(source, [{"args": {"word": "hey"}, "expect": {"shout": "HEY!"}}])]
    with serve_models(script) as server:
        (home / "config.toml").write_text(f'[llm]\nprovider = "openai"\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n')
        with pincer_serve(home) as served:
            url, headers = served.info["url"], {"Authorization": f"Bearer {served.token}"}
            done = _pincer(home, runner_cache, "build", "shout a word", "--json")
            assert done.returncode == 0, done.stderr[-3000:]
            deadline = time.monotonic() + WATCH_TIMEOUT_S
            names: set[str] = set()
            while time.monotonic() < deadline and "shout" not in names:
                listed = httpx.get(url + "/api/v1/tools", headers=headers, trust_env=False, timeout=10).json()
                names = {t["name"] for t in listed["tools"]}
                time.sleep(0.1)
            assert "shout" in names
            called = httpx.post(url + "/api/v1/tools/shout/call", headers=headers, json={"args": {"word": "served"}},
                                trust_env=False, timeout=30)  # fmt: skip
            assert called.status_code == 200 and called.json()["output"] == {"shout": "SERVED!"}, called.text


LATE_SECRET = "plain-words-that-became-a-secret-7f3a9c"


def test_builds_list_and_show_mask_a_secret_stored_after_the_build(tmp_path, runner_cache):
    """Before the fix `pincer builds list|show` printed the recorded build's description whole, though
    a value in it had been stored as a secret since (the build ran before it was one)."""
    home = tmp_path / "home"
    home.mkdir()
    schema = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
    source = SHOUT.replace("Shout a word.", f"Shout a word, like {LATE_SECRET}.")
    script = [plan_turn("shout", [], schema=schema), code_turn(source, [{"args": {"word": "hey"}, "expect": {"shout": "HEY!"}}])]
    with serve_models(script) as server:
        (home / "config.toml").write_text(f'[llm]\nprovider = "openai"\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n')
        done = _pincer(home, runner_cache, "build", "shout a word", "--json")
        assert done.returncode == 0, done.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    stored = subprocess.run([str(PINCER), "secrets", "set", "late_token"], input=LATE_SECRET, capture_output=True,
                            text=True, env={**env, "PINCER_HOME": str(home)}, timeout=TIMEOUT_S, check=False)  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    listed = _pincer(home, runner_cache, "builds", "list", "--json")
    shown = _pincer(home, runner_cache, "builds", "show", "shout", "--json")
    human = _pincer(home, runner_cache, "builds", "show", "shout")
    for result in (listed, shown, human):
        assert result.returncode == 0, result.stderr
        assert LATE_SECRET not in result.stdout + result.stderr
    assert json.loads(shown.stdout)["description"] == "Shout a word, like [REDACTED:secret]."
    assert LATE_SECRET in (home / "builds" / "shout" / "build.json").read_text()  # masked when shown, kept as recorded
