"""`pincer tools install` / `wasm install` of a .wasm tell what the wait is for, stage by stage,
on stderr (a line per stage off a terminal), and print no progress with --json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pincer.runtimes.wasm import install as disk

CLI_TIMEOUT_S = 120.0
PINCER_BIN = Path(sys.executable).parent / "pincer"
STAGES = ("reading", "compiling", "describing", "installing")


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S, check=False)


def _home(private_compile_cache, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(private_compile_cache("echo"), disk.cache_dir(home))  # a cache hit: seconds, not 20
    return home


def test_install_prints_a_line_per_stage_in_a_pipe(wasm_components, private_compile_cache, tmp_path: Path) -> None:
    """Failed on main before: off a terminal the 20 s compile printed nothing until it was done."""
    done = _pincer(_home(private_compile_cache, tmp_path), "tools", "install", str(wasm_components["echo"]), "--name", "e1")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    for stage in STAGES:
        assert any(line.startswith(f"{stage} ") and line.endswith(" ...") for line in lines), (stage, lines)
    assert lines[-1] == "installed e1: Return the given params unchanged."


def test_install_with_json_prints_no_progress(wasm_components, private_compile_cache, tmp_path: Path) -> None:
    done = _pincer(_home(private_compile_cache, tmp_path), "wasm", "install", str(wasm_components["echo"]), "--name", "e2", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "e2"
    assert not any(line.startswith(STAGES) for line in done.stderr.splitlines()), done.stderr
