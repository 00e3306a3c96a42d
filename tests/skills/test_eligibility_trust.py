"""Eligibility reasons, and trust: installed skills attenuated to read-only tools unless a grant
names the skill."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pincer.core.effects import EffectKind, Mode, RuntimeKind
from pincer.core.values import ToolSpec
from pincer.policy.grants import Grant
from pincer.skills import Environment, Trust, check_all, check_eligibility, parse_skill, tools_for_skill


def skill(frontmatter: str, *, name: str = "demo", trust: Trust = Trust.TRUSTED):
    text = f"---\nname: {name}\ndescription: d\n{frontmatter}\n---\nbody\n"
    return parse_skill(text.encode(), path=Path(f"/s/{name}/SKILL.md"), trust=trust)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("present", "also"):
        path = folder / name
        path.write_text("#!/bin/sh\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.mark.parametrize(
    ("frontmatter", "reason"),
    [
        ("requires: {bins: [present]}", None),
        ("requires: {bins: [present, missing-one]}", "needs missing-one on PATH"),
        ("metadata: {openclaw: {requires: {anyBins: [nope, also]}}}", None),
        ("metadata: {openclaw: {requires: {anyBins: [nope, nada]}}}", "needs one of nope, nada on PATH"),
        ("requires: {env: [SET_VAR]}", None),
        ("requires: {env: [UNSET_VAR, EMPTY_VAR]}", "needs the environment variables UNSET_VAR, EMPTY_VAR"),
        ("requires: {config: [channels.slack.token]}", None),
        ("requires: {config: [channels.discord]}", "needs config channels.discord (set it under [skills.config] in config.toml)"),
        ("metadata: {openclaw: {os: [darwin]}}", "runs only on darwin (this is linux)"),
        ("metadata: {openclaw: {os: [linux, darwin]}}", None),
        ("metadata: {openclaw: {always: true, requires: {bins: [missing-one]}}}", None),
    ],
)
def test_eligibility_reasons(frontmatter: str, reason: str | None, bin_dir: Path) -> None:
    environment = Environment(
        path=str(bin_dir),
        env={"SET_VAR": "1", "EMPTY_VAR": ""},
        config={"channels": {"slack": {"token": "x"}, "discord": {}}},
        os_name="linux",
    )
    result = check_eligibility(skill(frontmatter), environment)
    assert result.is_eligible is (reason is None)
    if reason is not None:
        assert result.reasons == (reason,)


def test_required_skills_resolve_to_a_fixed_point(bin_dir: Path) -> None:
    base = skill("requires: {bins: [missing-one]}", name="base")
    middle = skill("requires: {skills: [base]}", name="middle")
    top = skill("requires: {skills: [middle]}", name="top")
    alone = skill("requires: {skills: [ghost]}", name="alone")
    results = check_all([base, middle, top, alone], Environment(path=str(bin_dir)))
    assert not results["base"].is_eligible
    assert results["middle"].reasons == ("needs the skill base, not loaded or not eligible",)
    assert results["top"].reasons == ("needs the skill middle, not loaded or not eligible",)
    assert results["alone"].reasons == ("needs the skill ghost, not loaded or not eligible",)


def test_missing_dependencies_make_a_skill_ineligible() -> None:
    demo = skill("")
    environment = Environment(deps_problem=lambda s: "dependencies (package.json) are not installed: run `pincer skills deps demo`")
    assert check_eligibility(demo, environment).reasons == ("dependencies (package.json) are not installed: run `pincer skills deps demo`",)


def test_the_real_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINCER_TEST_SKILL_VAR", "yes")
    environment = Environment.current()
    assert environment.env["PINCER_TEST_SKILL_VAR"] == "yes" and environment.has_bin("sh")
    assert environment.path == os.environ["PATH"]


# -- trust -----------------------------------------------------------------------------------------


def spec(name: str, *effects: EffectKind) -> ToolSpec:
    return ToolSpec(
        name=name, description=name, input_schema={"type": "object"}, effects=frozenset(effects),
        runtime=RuntimeKind.NATIVE, side_effecting=bool(effects), source="test",
    )  # fmt: skip


SPECS = [
    spec("read_file", EffectKind.READ_FILESYSTEM),
    spec("http", EffectKind.NETWORK),
    spec("post_issue", EffectKind.NETWORK, EffectKind.EXTERNAL_WRITE),
    spec("write_file", EffectKind.WRITE_FILESYSTEM),
    spec("exec", EffectKind.EXECUTE_CODE, EffectKind.SPAWN_PROCESS),
    spec("echo"),
]


def test_a_trusted_skill_may_use_the_tools_it_names() -> None:
    access = tools_for_skill(skill("tools: [read_file, 'write_*', exec]"), SPECS)
    assert access.allowed == ("read_file", "write_file", "exec") and not access.attenuated
    assert tools_for_skill(skill(""), SPECS).allowed == tuple(s.name for s in SPECS)


def test_an_installed_skill_is_attenuated_to_read_only_tools() -> None:
    installed = skill("allowed-tools: read_file http post_issue write_file exec echo", trust=Trust.INSTALLED)
    access = tools_for_skill(installed, SPECS)
    assert access.attenuated and access.allowed == ("read_file", "http", "echo")
    withheld = dict(access.withheld)
    assert set(withheld) == {"post_issue", "write_file", "exec"}
    assert "external_write" in withheld["post_issue"] and 'tool = "skill:demo"' in withheld["post_issue"]


def test_a_grant_naming_the_skill_widens_what_it_may_use() -> None:
    installed = skill("tools: [read_file, post_issue, write_file, exec]", trust=Trust.INSTALLED)
    grant = Grant(tool="skill:demo", effects={EffectKind.EXTERNAL_WRITE: Mode.ASK, EffectKind.WRITE_FILESYSTEM: Mode.ALLOW})
    other = Grant(tool="skill:someone-else", default=Mode.ALLOW)
    access = tools_for_skill(installed, SPECS, [grant, other])
    assert access.allowed == ("read_file", "post_issue", "write_file")
    assert [t for t, _ in access.withheld] == ["exec"]
    everything = tools_for_skill(installed, SPECS, [Grant(tool="skill:*", default=Mode.ALLOW)])
    assert everything.allowed == ("read_file", "post_issue", "write_file", "exec")


def test_config_keys_come_from_skills_config_in_config_toml(tmp_path: Path) -> None:
    from pincer.config import parse_config
    from pincer.skills import SkillLibrary
    from tests.skills.conftest import write_skill

    home = tmp_path / "home"
    write_skill(home / "skills", "slacky", "requires: {config: [channels.slack]}")
    write_skill(home / "skills", "discordy", "metadata: {openclaw: {requires: {config: [channels.discord.token]}}}")
    config = parse_config("[skills.config]\nchannels.slack = true\n", home=home)
    library = SkillLibrary.from_config(config, home_dir=tmp_path / "nohome", bundled=False)
    assert library.eligibility_of("slacky").is_eligible
    assert library.eligibility_of("discordy").reasons == (
        "needs config channels.discord.token (set it under [skills.config] in config.toml)",
    )
    assert [s.name for s in library.offered()] == ["slacky"]
