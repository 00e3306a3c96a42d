"""``pincer sandbox doctor``: one JSON document on stdout with --json, a table on stderr without."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pincer.cli import sandbox
from pincer.cli.main import app


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
    assert "No permissions to create new namespace" in result.stderr
    assert "selected: bwrap" in result.stderr
