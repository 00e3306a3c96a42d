"""What the repository itself holds: no cache, environment or build output is ever committed.

How it broke: a worktree links the main checkout's ``.cache`` (a symlink, which the old
``.cache/`` ignore pattern did not match); two commits added that link, and checking them out
replaced the cache with a link to itself, so every npm prefix the tests read was gone.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NEVER_TRACKED = (".cache", ".venv", "site", "test-artifacts", "build", "dist")


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_cache_environment_or_build_output_is_tracked() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "--", *NEVER_TRACKED], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked == [], f"these must never be committed (git rm --cached them): {tracked}"
