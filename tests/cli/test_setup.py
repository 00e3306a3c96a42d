"""``pincer init`` and ``pincer config check|show|path``: the template parses back to the defaults,
every problem is reported with its key, and the key reference in docs/config.md cannot drift."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.config import Config, ConfigFile, load_config, parse_config
from pincer.config_check import check_config_text, check_home
from pincer.config_template import KEYS, render_settings, render_template, schema_keys

ROOT = Path(__file__).resolve().parents[2]
PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 60


def pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    return subprocess.run([*PINCER, *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def _uncommented_defaults(template: str) -> str:
    """The template with every `# key = default` line of a [section] uncommented (examples of
    keys without a default and of [[arrays]]/[maps.NAME] stay commented)."""
    defaults = {(k.section, k.name): k.default_toml for k in schema_keys() if k.shape == "table" and k.default_toml}
    out, section = [], None
    for line in template.splitlines():
        if re.fullmatch(r"\[[a-z_.]+\]", line):
            section = line.strip("[]")
        found = re.match(r"# ([a-z_]+) = (.*?)\s{2,}#", line + "  #")
        if section and found and defaults.get((section, found.group(1))) == found.group(2).strip():
            line = f"{found.group(1)} = {found.group(2).strip()}"
        out.append(line)
    return "\n".join(out)


def test_init_writes_a_template_that_parses_to_the_defaults(tmp_path: Path) -> None:
    result = pincer(tmp_path, "init", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"ok": True, "path": str(tmp_path / "config.toml"), "backup": None}
    written = (tmp_path / "config.toml").read_text()
    assert written == render_template()
    defaults = Config(home=tmp_path, workspace=tmp_path / "workspace")
    assert load_config(tmp_path) == defaults
    # The values shown are the real defaults: uncommented, they change nothing.
    active = _uncommented_defaults(written)
    assert active.count("\ntimeout_s = ") == 3 and "\nport = 8765" in active  # approvals, tools, llm
    assert parse_config(active, home=tmp_path) == defaults


def test_the_template_shows_every_key_of_the_schema() -> None:
    template = render_template()
    for key in schema_keys():
        assert re.search(rf"^# {key.name} = ", template, re.M), key.path
    headers = {"table": "[{}]", "array": "# [[{}]]", "map": "# [{}."}
    for section, shape in {(k.section, k.shape) for k in schema_keys()}:
        assert headers[shape].format(section) in template, section


def test_every_help_sentence_belongs_to_a_real_key() -> None:
    paths = {k.path for k in schema_keys()}
    assert set(KEYS) <= paths, sorted(set(KEYS) - paths)


def test_docs_config_md_is_generated_from_the_schema() -> None:
    done = subprocess.run([sys.executable, "tools/config_docs.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    text = (ROOT / "docs" / "config.md").read_text()
    for key in schema_keys():
        assert f"| `{key.name}` |" in text, key.path


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[approvals]\ntimeout_s = 5\n')
    refused = pincer(tmp_path, "init")
    assert refused.returncode == 2
    assert "exists" in refused.stderr and "pincer init --force" in refused.stderr
    assert (tmp_path / "config.toml").read_text() == '[approvals]\ntimeout_s = 5\n'
    forced = pincer(tmp_path, "init", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "config.toml.bak").read_text() == '[approvals]\ntimeout_s = 5\n'
    assert (tmp_path / "config.toml").read_text() == render_template()


def test_config_check_passes_on_a_fresh_home_and_after_init(tmp_path: Path) -> None:
    fresh = pincer(tmp_path, "config", "check", "--json")
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout)["ok"] is True
    assert pincer(tmp_path, "init").returncode == 0
    assert pincer(tmp_path, "config", "check").returncode == 0


def test_config_check_lists_every_problem_with_its_key(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[approvals]\ntimeoutt = 3\n\n[gateway]\nport = 70000\n\n[sandbox]\nbackend = "chroot"\n')
    (tmp_path / "exec-approvals.json").write_text("{not json")
    result = pincer(tmp_path, "config", "check", "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    by_kind = {f["kind"]: f for f in report["files"]}
    keys = [p["key"] for p in by_kind["config"]["problems"]]
    assert keys == ["approvals.timeoutt", "sandbox.backend", "gateway.port"]
    typo = by_kind["config"]["problems"][0]
    assert "did you mean timeout_s?" in typo["hint"]
    assert by_kind["exec approvals"]["ok"] is False
    text = pincer(tmp_path, "config", "check")
    assert text.returncode == 1 and text.stdout == ""
    assert "approvals.timeoutt: not a setting pincer knows" in text.stderr and "4 problems" in text.stderr


def test_config_check_of_another_file_and_of_a_cross_key_rule(tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text('[[grants]]\ntool = "http"\n')
    result = pincer(tmp_path, "config", "check", str(other), "--json")
    assert result.returncode == 1
    config = json.loads(result.stdout)["files"][0]
    assert config["path"] == str(other)
    assert config["problems"][0]["key"] == "grants.0" and "neither effects nor default" in config["problems"][0]["message"]
    missing = pincer(tmp_path, "config", "check", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_config_check_reads_the_other_settings_files(tmp_path: Path) -> None:
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "servers.json").write_text(json.dumps({"schema_version": 1, "servers": [{"name": "x"}]}))
    (tmp_path / "tools" / "script").mkdir(parents=True)
    (tmp_path / "tools" / "script" / "bad.toml").write_text('name = "bad"\n')
    reports = {r.kind: r for r in check_home(tmp_path)}
    assert not reports["mcp servers"].is_ok and "servers.0" in reports["mcp servers"].problems[0].message
    assert not reports["script tool"].is_ok
    assert reports["config"].is_ok and not reports["config"].exists


def test_config_show_is_the_settings_in_force_and_parses_back(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[approvals]\ntimeout_s = 5\n[[grants]]\ntool = "http"\neffects = { network = "allow" }\n'
        'expires = 2027-01-01T00:00:00Z\n[limits."http*"]\ncalls_per_minute = 3\n'
    )
    shown = pincer(tmp_path, "config", "show")
    assert shown.returncode == 0, shown.stderr
    assert "timeout_s = 5" in shown.stdout and "port = 8765" in shown.stdout
    original = ConfigFile.model_validate(tomllib.loads((tmp_path / "config.toml").read_text()))
    assert ConfigFile.model_validate(tomllib.loads(shown.stdout)) == original
    as_json = json.loads(pincer(tmp_path, "config", "show", "--json").stdout)
    assert as_json["approvals"]["timeout_s"] == 5 and as_json["gateway"]["port"] == 8765
    (tmp_path / "config.toml").write_text("[approvals\n")
    broken = pincer(tmp_path, "config", "show", "--json")
    assert broken.returncode == 2 and json.loads(broken.stdout)["error"]["code"] == "config_error"


def test_config_path_names_the_files(tmp_path: Path) -> None:
    paths = json.loads(pincer(tmp_path, "config", "path", "--json").stdout)
    assert paths["config"] == {"path": str(tmp_path / "config.toml"), "exists": False}
    assert {"exec approvals", "mcp servers", "openapi services", "database", "secret key"} <= set(paths)


def test_render_settings_round_trips_the_examples_of_the_docs() -> None:
    text = (ROOT / "docs" / "config.md").read_text()
    blocks = [part.split("```", 1)[0] for part in text.split("```toml")[1:]]
    example = "\n".join(blocks).replace("<sha256 of the token>", "0" * 64)
    data = ConfigFile.model_validate(tomllib.loads(example))
    assert data.grants and data.sessions and data.limits and data.credentials and data.gateway.tokens
    assert ConfigFile.model_validate(tomllib.loads(render_settings(data))) == data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300) | st.from_regex(r"\[[a-z_]{1,12}\]\n[a-z_]{1,14} = (1|\"x\"|true|\[\]|-5|1e9)\n", fullmatch=True))
def test_check_config_text_only_ever_reports_problems(tmp_path: Path, text: str) -> None:
    problems = check_config_text(text, home=tmp_path)
    assert all(p.message for p in problems)
    if not problems:
        parse_config(text, home=tmp_path)  # what the check passes, pincer starts on


@pytest.mark.parametrize("text", ['[approvals]\ntimeout_s = 0\n', '[gateway]\nport = -1\n', 'grants = 3\n', '[nope]\n'])
def test_check_config_text_and_parse_config_agree(tmp_path: Path, text: str) -> None:
    problems = check_config_text(text, home=tmp_path)
    assert problems
    with pytest.raises(Exception) as raised:
        parse_config(text, home=tmp_path)
    assert problems[0].key.split(".")[0] in str(raised.value)
