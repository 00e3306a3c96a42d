"""The commands of the README and of docs/ work as written (newcomer item 5): every fenced block
marked ``sh runnable`` runs, as a bash script from the checkout, in a throwaway PINCER_HOME; every
block marked ``python runnable-with-gateway`` runs as a Python script against a real ``pincer
serve`` of a throwaway PINCER_HOME (its URL in place of the default ``http://127.0.0.1:8765``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# The README's first session and the pages that hold runnable blocks (triggers, a Python client).
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
BLOCK_TIMEOUT_S = 300
_RUNNABLE = re.compile(r"^```sh runnable\n(.*?)^```", re.S | re.M)
_WITH_GATEWAY = re.compile(r"^```python runnable-with-gateway\n(.*?)^```", re.S | re.M)
DEFAULT_GATEWAY = "http://127.0.0.1:8765"


def _blocks(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """(page, block) for every block of ``pattern`` in the README and in docs/."""
    return [(str(page.relative_to(ROOT)), block) for page in PAGES for block in pattern.findall(page.read_text())]


def _block_id(found: tuple[str, str]) -> str:
    page, block = found
    lines = block.splitlines()
    return f"{page}:{lines[1] if len(lines) > 1 else lines[0]}"


def test_the_readme_has_runnable_blocks() -> None:
    assert _RUNNABLE.findall(README.read_text()), "README.md lost its `sh runnable` first session"
    assert len(_blocks(_RUNNABLE)) >= 2, "docs/triggers.md lost its `sh runnable` block"


@pytest.mark.parametrize("found", _blocks(_RUNNABLE), ids=_block_id)
def test_a_runnable_block_runs_as_written(found: tuple[str, str], tmp_path: Path) -> None:
    _page, block = found
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


def test_the_docs_have_a_python_client_block() -> None:
    """Issue 21 item 17. Before: the README had no MCP client snippet (issue 38 moved it to the
    page for MCP clients; the README shows Claude Code's)."""
    page = ROOT / "docs" / "start-mcp-client.md"
    assert _WITH_GATEWAY.findall(page.read_text()), "docs/start-mcp-client.md lost its `python runnable-with-gateway` block"
    assert "claude mcp add" in README.read_text(), "README.md lost its MCP client snippet"


@pytest.mark.parametrize("found", _blocks(_WITH_GATEWAY), ids=_block_id)
def test_a_python_block_runs_against_a_real_gateway(found: tuple[str, str], tmp_path: Path) -> None:
    from tests.gateway.conftest import pincer_serve

    _page, block = found

    home = tmp_path / "home"
    home.mkdir()
    assert DEFAULT_GATEWAY in block
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PINCER_", "VIRTUAL_ENV"))}
    env.update(PINCER_HOME=str(home), HOME=str(tmp_path), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    with pincer_serve(home) as server:
        base = server.info["mcp_url"].removesuffix("/mcp")
        done = subprocess.run(
            [sys.executable, "-c", block.replace(DEFAULT_GATEWAY, base)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S,
        )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    lines = done.stdout.splitlines()
    assert lines[0].startswith("http: [") and "'echo'" in lines[0]
    assert lines[1] == '{"text": "hi"}'
    assert lines[2].startswith("stdio: [") and "'echo'" in lines[2]
