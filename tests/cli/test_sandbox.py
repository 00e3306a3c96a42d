"""``pincer sandbox doctor``: one JSON document on stdout with --json, a table on stderr without."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pincer.cli import sandbox
from pincer.cli.main import app

CLI_TIMEOUT_S = 60


@pytest.fixture
def public_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pincer-test-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_doctor_json() -> None:
    result = CliRunner().invoke(app, ["sandbox", "doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["selected"] == "bwrap"
    assert {b["name"] for b in report["backends"]} >= {"docker", "podman", "landlock+seccomp"}


def test_doctor_table_and_a_broken_bwrap(public_dir) -> None:
    fake = public_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    result = CliRunner(env={"COLUMNS": "400"}).invoke(sandbox.app, ["doctor", "--bwrap", str(fake)])
    assert result.exit_code == 0  # another bwrap still works
    assert "exit status 1: bwrap: No permissions to create new namespace" in result.stderr
    assert str(fake) in result.stderr  # which binary said it
    assert "selected: bwrap" in result.stderr



def test_the_report_lines_print_bracketed_reasons_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """Failed before this test: the lines under the table were printed as rich markup, so a
    reason that names a config key in brackets (``[sandbox] backend``) lost it."""
    report = {
        "backends": [],
        "cgroups": {"version": "none", "reason": "set [sandbox] memory_max to use cgroups"},
        "limits": {"memory_and_pids": "off [sandbox]"},
        "seccomp": {"available": False, "detail": "needs [sandbox] seccomp = true"},
        "relay_python": "/usr/bin/python3 [relay]",
        "selected": "bwrap [sandbox] backend",
    }
    sandbox._render(report)
    err = " ".join(capsys.readouterr().err.split())
    for text in (
        "(set [sandbox] memory_max to use cgroups); memory and process limits: off [sandbox]",
        "seccomp deny list: no (needs [sandbox] seccomp = true)",
        "network allowlist relay: /usr/bin/python3 [relay]",
        "selected: bwrap [sandbox] backend",
    ):
        assert text in err

def test_doctor_follows_config_toml(public_dir, monkeypatch) -> None:
    """The report describes the backend pincer would choose: `[sandbox] backend` is read."""
    home = public_dir / "home"
    home.mkdir()
    (home / "config.toml").write_text('[sandbox]\nbackend = "landlock"\n')
    monkeypatch.setenv("PINCER_HOME", str(home))
    result = CliRunner().invoke(app, ["sandbox", "doctor", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["selected"] == "landlock"
    assert not (home / "pincer.db").exists()  # reading the config creates nothing


FAILING_TOOL = """
name = "grumpy"
description = "Always fails"
command = ["/bin/sh", "-c", "echo half-done; echo 'grumpy: no input file' >&2; exit 3"]
effects = []
"""


def test_a_failing_script_tool_prints_text(tmp_path: Path) -> None:
    """Failed on main before script tool errors were text: `pincer tools call` printed the Python
    repr of the result dict (``tool_error: {'exit_code': 3, 'signal': None, ...``)."""
    manifest = tmp_path / "grumpy.toml"
    manifest.write_text(FAILING_TOOL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(tmp_path / "home")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pincer.cli", *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S
        )

    assert cli("tools", "install", str(manifest)).returncode == 0
    called = cli("tools", "call", "grumpy")
    assert called.returncode == 1
    assert "tool_error: grumpy failed (bwrap sandbox): exit status 3" in called.stderr
    assert "grumpy: no input file" in called.stderr and "half-done" in called.stderr
    assert "{'" not in called.stderr and "'exit_code'" not in called.stderr
    body = json.loads(cli("tools", "call", "grumpy", "--json").stdout)
    assert body["ok"] is False and body["error"]["message"].startswith("grumpy failed (bwrap sandbox): exit status 3\n")
