"""Helpers for the skills tests: skill folders written under tmp_path."""

from __future__ import annotations

import re
from pathlib import Path


def write_skill(root: Path, name: str, frontmatter: str = "", body: str = "Do the thing.\n", *, folder: str | None = None) -> Path:
    """``root/<folder or name>/SKILL.md`` with ``frontmatter`` (name and description added when absent)."""
    target = root / (folder or name)
    target.mkdir(parents=True, exist_ok=True)
    lines = frontmatter.strip("\n")
    if not re.search(r"^name:", lines, re.MULTILINE):
        lines = f"name: {name}\n" + lines
    if not re.search(r"^description:", lines, re.MULTILINE):
        lines += f"\ndescription: The {name} skill"
    (target / "SKILL.md").write_text(f"---\n{lines.strip()}\n---\n{body}")
    return target / "SKILL.md"
