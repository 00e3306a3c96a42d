"""docs/config-example.md, docs/cli.md and docs/skills.md stay true: their config blocks parse,\ntheir commands exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pincer.config import parse_config

ROOT = Path(__file__).resolve().parents[2]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def test_the_config_blocks_parse(tmp_path: Path) -> None:
    example = (ROOT / "docs" / "config-example.md").read_text()
    (config_block,) = [b for b in _blocks(example, "toml") if "[skills]" in b]
    parsed = parse_config(config_block.replace("<sha256 of the token>", "0" * 64), home=tmp_path)
    assert parsed.skills.max_loaded_per_root == 200 and parsed.skills.config == {"channels": {"slack": True}}
    for block in _blocks((ROOT / "docs" / "skills.md").read_text(), "toml"):
        parse_config(block, home=tmp_path)


def test_every_skills_command_shown_exists() -> None:
    text = (ROOT / "docs" / "cli.md").read_text() + (ROOT / "docs" / "skills.md").read_text()
    commands = set(re.findall(r"^pincer skills ([a-z]+)", text, re.MULTILINE))
    assert {"list", "show", "check", "render", "select", "catalog", "deps", "pull", "approve"} <= commands
    for command in sorted(commands):
        shown = subprocess.run([sys.executable, "-m", "pincer.cli", "skills", command, "--help"], capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, (command, shown.stderr)
