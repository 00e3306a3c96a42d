"""``pincer skills ...`` as real subprocesses with an isolated PINCER_HOME and HOME: every
command the README shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.skills.conftest import write_skill

CLI_TIMEOUT_S = 120


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "pincer-home"
    home.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    return {**base, "PINCER_HOME": str(home), "HOME": str(tmp_path / "user-home")}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pincer.cli", "skills", *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S
    )


def doc(result: subprocess.CompletedProcess[str]):
    return json.loads(result.stdout)


def workspace(env: dict[str, str]) -> Path:
    return Path(env["PINCER_HOME"]) / "workspace"


def test_list_shows_every_field_and_all_shows_shadowed_ones_and_errors(env: dict[str, str]) -> None:
    config = Path(env["PINCER_HOME"]) / "config.toml"
    config.write_text((config.read_text() if config.exists() else "") + "\n[skills]\ntrust_workspace = true\n")
    write_skill(workspace(env) / "skills", "code-review", "activation: {keywords: [review]}", "my own review\n")
    write_skill(Path(env["HOME"]) / ".claude" / "skills", "fix-issue", "argument-hint: '[n]'", "Fix $ARGUMENTS\n")
    write_skill(Path(env["PINCER_HOME"]) / "skills", "Bad_Name", "requires: {bins: [no-such-bin-here]}")
    broken = Path(env["PINCER_HOME"]) / "skills" / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("---\nname: broken\ndescription: [x\n---\n")
    listed = cli(env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in doc(listed)["skills"]}
    assert set(rows) == {"code-review", "fix-issue", "Bad_Name", "summarize-url", "release-notes"}
    review = rows["code-review"]
    assert review["root"] == "workspace" and review["trust"] == "trusted" and review["eligible"]
    assert review["path"] == str(workspace(env) / "skills" / "code-review" / "SKILL.md")
    assert rows["fix-issue"]["dialect"] == "claude" and rows["fix-issue"]["root"] == "home-claude"
    assert rows["Bad_Name"]["why_not"] == ["needs no-such-bin-here on PATH"] and not rows["Bad_Name"]["eligible"]
    assert any("Agent Skills rule" in w for w in rows["Bad_Name"]["warnings"])
    assert rows["summarize-url"]["triggers"] == ["command: /summarize", "manual"]
    everything = doc(cli(env, "list", "--all", "--json"))
    (shadowed,) = everything["shadowed"]
    assert shadowed["name"] == "code-review" and shadowed["root"] == "bundled" and "takes precedence" in shadowed["reason"]
    (error,) = everything["errors"]
    assert error["line"] == 3 and error["path"].endswith("broken/SKILL.md")
    assert [r["label"] for r in everything["roots"]][:3] == ["workspace", "workspace-agents", "workspace-claude"]
    human = cli(env, "list", "--all")
    assert human.returncode == 0 and "shadowed" in human.stderr and "code-review" in human.stderr


def test_show_render_select_and_catalog(env: dict[str, str]) -> None:
    shown = doc(cli(env, "show", "code-review", "--json"))
    assert shown["name"] == "code-review" and shown["eligibility"] == {"eligible": True, "reasons": []}
    assert [p["name"] for p in shown["parameters"]] == ["path", "focus", "pr_url"] and shown["files"][0]["path"] == "SKILL.md"
    assert shown["files"][0]["digest"].startswith("sha256:")
    plain = cli(env, "show", "code-review")
    assert plain.returncode == 0 and "# Code review" in plain.stdout

    rendered = cli(env, "render", "code-review", "--param", "path=src/app.py", "--param", "focus=security", "--json")
    assert rendered.returncode == 0, rendered.stderr
    body = doc(rendered)
    assert body["params"] == {"path": "src/app.py", "focus": "security"} and "focus on **security**" in body["text"]
    text = cli(env, "render", "summarize-url", "-p", "url=https://example.com", "-p", "bullets=3")
    assert text.returncode == 0 and "Write 3 bullet points in English" in text.stdout
    bad = cli(env, "render", "summarize-url", "-p", "url=https://e.com", "-p", "bullets=many", "--json")
    assert bad.returncode == 2 and doc(bad)["error"]["code"] == "invalid_arguments"
    unknown = cli(env, "render", "summarize-url", "-p", "colour=red")
    assert unknown.returncode == 2 and "has no parameter 'colour'" in unknown.stderr
    missing = cli(env, "render", "no-such-skill", "--json")
    assert missing.returncode == 2 and doc(missing)["error"]["code"] == "skill_not_found"

    chosen = doc(cli(env, "select", "please review my code before the pull request", "--json"))
    assert [s["name"] for s in chosen["selected"]] == ["code-review"] and chosen["selected"][0]["score"] >= 20
    line = cli(env, "select", "summarize https://example.com/post")
    assert line.stdout.startswith("summarize-url\t33\t")  # keyword 10, pattern 20, description 3
    catalog = cli(env, "catalog")
    assert catalog.stdout.startswith("<available_skills>") and "<name>release-notes</name>" in catalog.stdout


def test_check_reports_warnings_and_exits_1_on_errors(env: dict[str, str], tmp_path: Path, corpus: Path) -> None:
    clean = cli(env, "check", "--json")
    assert clean.returncode == 0 and doc(clean)["ok"] and doc(clean)["errors"] == []
    good = write_skill(tmp_path / "lib", "good")
    warned = write_skill(tmp_path / "lib", "warned", "name: Warned")
    broken = tmp_path / "lib" / "broken" / "SKILL.md"
    broken.parent.mkdir()
    broken.write_bytes(b"---\nname: broken\n\x00\n---\n")
    result = cli(env, "check", str(tmp_path / "lib"), "--json")
    assert result.returncode == 1
    report = doc(result)
    assert not report["ok"] and report["errors"][0]["line"] == 3 and "binary" in report["errors"][0]["message"]
    warnings = {s["name"]: s["warnings"] for s in report["skills"]}
    assert warnings["good"] == [] and any("differs from its folder" in w["message"] for w in warnings["Warned"])
    single = cli(env, "check", str(good), str(warned.parent))
    assert single.returncode == 0 and "warning" in single.stderr and "2 skills, " in single.stderr
    assert cli(env, "check", str(tmp_path / "nowhere")).returncode == 1
    openclaw = doc(cli(env, "check", str(corpus / "openclaw-skills-2026-04"), "--json"))
    assert openclaw["ok"] and len(openclaw["skills"]) == 53 and openclaw["warning_count"] == 2
    # the two skills that rely on OpenClaw tools pincer lacks: "The shell tool uses a fresh TTY"
    # (1password) and allowed-tools: ["message"] (discord)
    warned_of = {s["name"]: [w["message"] for w in s["warnings"]] for s in openclaw["skills"] if s["warnings"]}
    assert set(warned_of) == {"1password", "discord"} and "names 'message'" in warned_of["discord"][0]


def test_limits_are_configurable_and_reported(env: dict[str, str]) -> None:
    for index in range(4):
        write_skill(workspace(env) / "skills", f"s{index}")
    (Path(env["PINCER_HOME"]) / "config.toml").write_text("[skills]\nmax_loaded_per_root = 2\n")
    everything = doc(cli(env, "list", "--all", "--json"))
    assert {(h["root"], h["limit"]) for h in everything["limits"]} == {
        ("workspace", "max_loaded_per_root"),
        ("bundled", "max_loaded_per_root"),  # three bundled skills, two loaded
    }
    assert {"s0", "s1"} <= {r["name"] for r in everything["skills"]} and "s2" not in {r["name"] for r in everything["skills"]}
    (Path(env["PINCER_HOME"]) / "config.toml").write_text("[skills]\nmax_loaded_per_root = 0\n")
    bad = cli(env, "list", "--json")
    assert bad.returncode == 2 and "skills.max_loaded_per_root" in doc(bad)["error"]["message"]


def test_deps_and_approve_refuse_what_does_not_apply(env: dict[str, str]) -> None:
    none = cli(env, "deps", "code-review", "--json")
    assert none.returncode == 1 and "declares no dependencies" in doc(none)["error"]["message"]
    local = cli(env, "approve", "code-review", "--json")
    assert local.returncode == 2 and "nothing to approve" in doc(local)["error"]["message"]
