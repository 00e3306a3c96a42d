"""Roots, precedence, shadowing, the walk's limits (each reported when hit), load errors that
leave the other skills loaded, and warm reloads that re-read only what changed."""

from __future__ import annotations

import os
from pathlib import Path

from pincer.config import parse_config
from pincer.skills import Root, SkillLibrary, SkillLoader, Trust, WalkLimits, default_roots
from pincer.skills.roots import BUNDLED_DIR
from tests.skills.conftest import write_skill


def test_default_roots_in_precedence_order(tmp_path: Path) -> None:
    roots = default_roots(
        workspace=tmp_path / "ws", home_dir=tmp_path / "home", pincer_home=tmp_path / "ph", extra_dirs=[tmp_path / "extra"]
    )
    assert [(r.label, r.path.relative_to(tmp_path).as_posix() if r.path.is_relative_to(tmp_path) else "bundled", r.trust) for r in roots] == [
        # An agent can write the workspace: its roots are trusted only with [skills] trust_workspace.
        ("workspace", "ws/skills", Trust.INSTALLED),
        ("workspace-agents", "ws/.agents/skills", Trust.INSTALLED),
        ("workspace-claude", "ws/.claude/skills", Trust.INSTALLED),
        ("home-agents", "home/.agents/skills", Trust.TRUSTED),
        ("home-claude", "home/.claude/skills", Trust.TRUSTED),
        ("user", "ph/skills", Trust.TRUSTED),
        ("installed", "ph/installed/skills", Trust.INSTALLED),
        ("bundled", "bundled", Trust.TRUSTED),
        ("extra-1", "extra", Trust.TRUSTED),
    ]
    assert roots[7].path == BUNDLED_DIR
    trusting = default_roots(workspace=tmp_path / "ws", home_dir=None, pincer_home=None, trust_workspace=True)
    assert [r.trust for r in trusting[:3]] == [Trust.TRUSTED] * 3
    assert roots[2].is_claude and roots[4].is_claude and not roots[0].is_claude


def test_a_higher_root_shadows_a_lower_one_and_the_report_says_why(tmp_path: Path) -> None:
    ws, user, installed = tmp_path / "ws", tmp_path / "user", tmp_path / "installed"
    write_skill(ws, "deploy", body="workspace version\n")
    write_skill(user, "deploy", body="user version\n")
    write_skill(installed, "deploy", body="installed version\n")
    write_skill(installed, "lint")
    write_skill(user, "other-name", "name: lint", folder="lint-copy")
    roots = [Root(label="workspace", path=ws), Root(label="user", path=user), Root(label="installed", path=installed, trust=Trust.INSTALLED)]
    report = SkillLoader().load(roots)
    by_name = report.by_name()
    assert by_name["deploy"].body == "workspace version\n" and by_name["deploy"].root == "workspace"
    assert by_name["lint"].root == "user"  # the folder lint-copy in user names itself lint
    assert by_name["lint"].trust is Trust.TRUSTED
    shadowed = {(s.skill.root, s.skill.name): s.reason for s in report.shadowed}
    assert "takes precedence over user" in shadowed[("user", "deploy")]
    assert "takes precedence over installed" in shadowed[("installed", "deploy")]
    assert "takes precedence over installed" in shadowed[("installed", "lint")]


def test_two_folders_of_one_root_with_the_same_name(tmp_path: Path) -> None:
    write_skill(tmp_path, "a", "name: same", folder="a")
    write_skill(tmp_path, "b", "name: same", folder="b")
    report = SkillLoader().load([Root(label="r", path=tmp_path)])
    assert [s.base_dir.name for s in report.skills] == ["a"]
    assert "same root" in report.shadowed[0].reason


def test_a_broken_file_is_an_error_naming_file_and_line_and_the_others_still_load(tmp_path: Path) -> None:
    write_skill(tmp_path, "good")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: bad\ndescription: [oops\n---\n")
    binary = tmp_path / "binary"
    binary.mkdir()
    (binary / "SKILL.md").write_bytes(b"\x00\x01\x02")
    big = tmp_path / "big"
    big.mkdir()
    (big / "SKILL.md").write_text("x" * 5000)
    report = SkillLoader(WalkLimits(max_file_bytes=4096)).load([Root(label="r", path=tmp_path)])
    assert [s.name for s in report.skills] == ["good"]
    errors = {e.path.parent.name: e for e in report.errors}
    assert errors["bad"].line == 3 and "not valid YAML" in errors["bad"].message
    assert "binary" in errors["binary"].message
    assert "larger than the 4,096 byte limit" in errors["big"].message and "max_file_bytes" in (errors["big"].hint or "")


def test_the_walk_limits_are_reported_when_hit(tmp_path: Path) -> None:
    for index in range(8):
        write_skill(tmp_path, f"s{index}")
    (tmp_path / "not-a-skill").mkdir()
    (tmp_path / ".hidden").mkdir()
    write_skill(tmp_path / ".hidden", "x", folder="")
    report = SkillLoader(WalkLimits(max_candidates_per_root=6, max_loaded_per_root=4)).load([Root(label="r", path=tmp_path)])
    assert [s.name for s in report.skills] == ["s0", "s1", "s2", "s3"]
    assert {h.limit for h in report.limits} == {"max_candidates_per_root", "max_loaded_per_root"}
    assert all("raise [skills]" in h.message for h in report.limits)
    unbounded = SkillLoader().load([Root(label="r", path=tmp_path)])
    assert len(unbounded.skills) == 8 and unbounded.limits == ()


def test_a_warm_reload_reads_only_changed_files(tmp_path: Path) -> None:
    paths = [write_skill(tmp_path, f"s{i}") for i in range(3)]
    loader = SkillLoader()
    first = loader.load([Root(label="r", path=tmp_path)])
    again = loader.load([Root(label="r", path=tmp_path)])
    assert all(a is b for a, b in zip(first.skills, again.skills, strict=True))  # the same parsed values
    paths[1].write_text("---\nname: s1\ndescription: changed\n---\n")
    os.utime(paths[1], ns=(1, 1))
    changed = loader.load([Root(label="r", path=tmp_path)])
    assert changed.skills[0] is first.skills[0] and changed.skills[1].description == "changed"


def test_the_library_uses_workspace_home_pincer_home_and_extra_dirs(tmp_path: Path) -> None:
    home = tmp_path / "ph"
    extra = tmp_path / "extra"
    config = parse_config(f'[workspace]\npath = "{tmp_path / "ws"}"\n[skills]\nextra_dirs = ["{extra}"]\n', home=home)
    write_skill(tmp_path / "ws" / ".claude" / "skills", "from-claude")
    write_skill(tmp_path / "home" / ".agents" / "skills", "from-home")
    write_skill(home / "skills", "from-user")
    write_skill(extra, "from-extra")
    write_skill(extra, "code-review", body="shadowed by the bundled one\n")
    library = SkillLibrary.from_config(config, home_dir=tmp_path / "home")
    roots = {s.name: s.root for s in library.skills}
    assert roots["from-claude"] == "workspace-claude" and roots["from-home"] == "home-agents"
    assert roots["from-user"] == "user" and roots["from-extra"] == "extra-1" and roots["code-review"] == "bundled"
    assert {"code-review", "summarize-url", "release-notes"} <= set(roots)


def test_file_listings_stay_within_the_extension_limits(tmp_path: Path) -> None:
    from pincer.skills import parse_skill
    from pincer.skills.files import list_files, read_file

    skill_md = write_skill(tmp_path, "big")
    (skill_md.parent / "refs").mkdir()
    for index in range(5):
        (skill_md.parent / "refs" / f"{index}.md").write_text("x" * 100)
    (skill_md.parent / "node_modules").mkdir()
    (skill_md.parent / "node_modules" / "dep.js").write_text("skipped")
    (skill_md.parent / ".secret").write_text("skipped")
    skill = parse_skill(skill_md.read_bytes(), path=skill_md)
    full = list_files(skill)
    assert [f.path for f in full.files] == ["SKILL.md", *(f"refs/{i}.md" for i in range(5))] and not full.truncated
    assert list_files(skill, max_files=3).truncated and len(list_files(skill, max_files=3).files) == 3
    assert list_files(skill, max_bytes=skill_md.stat().st_size + 250).truncated
    assert read_file(skill, "refs/0.md") == b"x" * 100
    import pytest

    from pincer.core.errors import SkillNotFound, UsageError

    for bad in ("../outside", "/etc/passwd", ".secret", "node_modules/dep.js"):
        with pytest.raises((UsageError, SkillNotFound)):
            read_file(skill, bad)
