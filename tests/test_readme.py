"""The README's commands work as written (newcomer item 5): every fenced block marked
``sh runnable`` runs, as a bash script from the checkout, in a throwaway PINCER_HOME."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK_TIMEOUT_S = 300
_RUNNABLE = re.compile(r"^```sh runnable\n(.*?)^```", re.S | re.M)


def _blocks() -> list[str]:
    return _RUNNABLE.findall(README.read_text())


def test_the_readme_has_runnable_blocks() -> None:
    assert _blocks(), "README.md lost its `sh runnable` blocks"


@pytest.mark.parametrize("block", _blocks(), ids=lambda b: b.splitlines()[1] if len(b.splitlines()) > 1 else b)
def test_a_runnable_block_runs_as_written(block: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PINCER_", "VIRTUAL_ENV"))}
    env["PINCER_HOME"] = str(tmp_path / "home")
    env["HOME"] = str(tmp_path)  # nothing of the user's own ~/.pincer or skills is read
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    if "the key is" in block:
        assert "[REDACTED:secret]" in done.stdout and "tok-demo-51823907-value" not in done.stdout
