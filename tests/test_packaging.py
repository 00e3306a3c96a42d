"""`pip install .` and `pipx install .` give a working pincer (newcomer item 5): the wheel holds
every file the package reads at run time, and its `pincer` entry point runs from it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT_S = 300


def _tracked_package_files() -> set[str]:
    out = subprocess.run(
        ["git", "ls-files", "src/pincer"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return {line.removeprefix("src/") for line in out.splitlines() if line}


def test_the_wheel_carries_every_package_file_and_its_entry_point_runs(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("pincer-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "pincer = pincer.cli.main:main" in archive.read(entry_points).decode()
    missing = sorted(f for f in _tracked_package_files() if f not in names)
    assert not missing, f"files the wheel leaves out (add them to package-data): {missing}"

    # The installed package, alone on the path before this checkout's, answers.
    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": str(target), "PINCER_HOME": str(tmp_path / "home")}
    code = "import pincer, sys; from pincer.cli.main import main; sys.argv = ['pincer', '--version']; main()"
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert ran.returncode == 0 and ran.stdout.startswith("pincer "), ran.stderr
    where = subprocess.run(
        [sys.executable, "-c", "import pincer; print(pincer.__file__)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert where.stdout.strip().startswith(str(target))
