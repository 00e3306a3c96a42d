"""``pincer build`` in a home with a publisher key, and a build whose tool has the name of one
installed (second-hour items 3 and 4): the real CLI as a subprocess, the local model server."""

from __future__ import annotations

import json
from pathlib import Path

from pincer.demo.model_server import serve_models
from tests.builder.helpers import code_turn, plan_turn
from tests.builder.test_cli import _pincer
from tests.builder.test_refusals import SHOUT

SCHEMA = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
SHOUT_TESTS = [{"args": {"word": "hey"}, "expect": {"shout": "HEY!"}}]


def _home(tmp_path: Path, server: object) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    url = server.openai_url  # type: ignore[attr-defined]
    (home / "config.toml").write_text(f'[llm]\nprovider = "openai"\nmodel = "scripted-model"\nbase_url = "{url}"\n')
    return home


def test_a_home_with_a_publisher_key_trusts_what_it_builds_and_records_a_failed_build(tmp_path: Path, runner_cache: Path) -> None:
    """Failed before the fix: after `pincer hub keygen`, the first build ran every stage and then
    failed at register ("signed by key ... which is not in the trust store"), and the failed build
    left no record for `pincer builds list|show`."""
    script = [plan_turn("shout", [], schema=SCHEMA), code_turn(SHOUT, SHOUT_TESTS),
              plan_turn("whisper", [], schema=SCHEMA), code_turn(SHOUT.replace("def shout", "def whisper"), SHOUT_TESTS)]  # fmt: skip
    with serve_models(script) as server:
        home = _home(tmp_path, server)
        made = _pincer(home, runner_cache, "hub", "keygen", "--json")
        assert made.returncode == 0, made.stderr
        public = json.loads(made.stdout)["public_key"]
        built = _pincer(home, runner_cache, "build", "shout a word", "--json")
        assert built.returncode == 0, built.stderr[-3000:]
        report = json.loads(built.stdout)["build"]
        assert report["key"] == "tools/shout" and report["signer"] == "self"
        trusted = json.loads(_pincer(home, runner_cache, "hub", "trust", "list", "--json").stdout)
        keys = trusted["keys"] if isinstance(trusted, dict) else trusted
        assert [(k["name"], k["public_key"]) for k in keys] == [("self", public)]

        # A build that fails after its plan (here at register: the trust store is unreadable) is recorded.
        (home / "hub" / "trust.json").write_text('{"keys": 5}')
        failed = _pincer(home, runner_cache, "build", "whisper a word")
        assert failed.returncode != 0 and "trust.json" in failed.stderr, failed.stderr[-3000:]
    listed = {r["name"]: r for r in json.loads(_pincer(home, runner_cache, "builds", "list", "--json").stdout)}
    assert listed["shout"]["ok"] is True and listed["whisper"]["ok"] is False
    shown = json.loads(_pincer(home, runner_cache, "builds", "show", "whisper", "--json").stdout)
    assert any("trust.json" in f for f in shown["failures"]), shown["failures"]
    assert {s["stage"] for s in shown["stages"]} >= {"plan", "generate", "test", "build"}


def test_a_build_never_replaces_an_installed_tool_by_accident(tmp_path: Path, runner_cache: Path) -> None:
    """Failed before the fix: a second build whose model picked the name of the installed tool
    silently replaced it (0.1.1 -> 0.1.2)."""
    script = [plan_turn("shout", [], schema=SCHEMA), code_turn(SHOUT, SHOUT_TESTS),
              plan_turn("shout", [], schema=SCHEMA),  # the model picks the same name: refused after the plan
              plan_turn("shout", [], schema=SCHEMA), code_turn(SHOUT.replace('"!"', '"!!"'), [{"args": {"word": "a"}, "expect": {"shout": "A!!"}}])]  # fmt: skip
    with serve_models(script) as server:
        home = _home(tmp_path, server)
        first = _pincer(home, runner_cache, "build", "shout a word", "--json")
        assert first.returncode == 0, first.stderr[-3000:]
        assert json.loads(first.stdout)["build"]["version"] == "0.1.1"
        again = _pincer(home, runner_cache, "build", "make words loud")
        assert again.returncode == 1, again.stderr[-3000:]
        said = " ".join(again.stderr.split())
        assert "tools/shout@0.1.1" in said and "--edit shout" in said and "--replace" in said
        assert len(server.requests) == 3  # it stopped after the plan: no code was asked for
        installed = json.loads(_pincer(home, runner_cache, "installed", "--json").stdout)
        rows = installed["artifacts"] if isinstance(installed, dict) else installed
        assert [(r["key"], r["version"]) for r in rows if r["key"] == "tools/shout"] == [("tools/shout", "0.1.1")]
        replaced = _pincer(home, runner_cache, "build", "make words louder", "--replace", "--json")
        assert replaced.returncode == 0, replaced.stderr[-3000:]
        assert json.loads(replaced.stdout)["build"]["version"] == "0.1.2"
