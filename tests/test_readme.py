"""The README's commands work as written (newcomer item 5): every fenced block marked
``sh runnable`` runs, as a bash script from the checkout, in a throwaway PINCER_HOME; every block
marked ``python runnable-with-gateway`` runs as a Python script against a real ``pincer serve`` of
a throwaway PINCER_HOME (its URL in place of the default ``http://127.0.0.1:8765``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK_TIMEOUT_S = 300
_RUNNABLE = re.compile(r"^```sh runnable\n(.*?)^```", re.S | re.M)
_WITH_GATEWAY = re.compile(r"^```python runnable-with-gateway\n(.*?)^```", re.S | re.M)
DEFAULT_GATEWAY = "http://127.0.0.1:8765"


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


def test_the_readme_has_a_python_client_block() -> None:
    """Issue 21 item 17. Before: the README had no MCP client snippet."""
    assert _WITH_GATEWAY.findall(README.read_text()), "README.md lost its `python runnable-with-gateway` block"


@pytest.mark.parametrize("block", _WITH_GATEWAY.findall(README.read_text()), ids=lambda b: b.splitlines()[0])
def test_a_python_block_runs_against_a_real_gateway(block: str, tmp_path: Path) -> None:
    from tests.gateway.conftest import pincer_serve

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
