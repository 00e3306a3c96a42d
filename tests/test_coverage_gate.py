"""tools/coverage_gate.py (issue 40 item 4): the table `make test` prints and the gate under it.
Real coverage data, from a real `coverage run` of the CLI; the floors are the tool's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "tools" / "coverage_gate.py"
RUN_TIMEOUT_S = 180


def _env() -> dict[str, str]:
    # Not measured by the run that may be measuring this test: the data must be this run's alone.
    return {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE_", "COV_CORE_", "PINCER_"))}


def test_a_run_that_covers_little_is_printed_per_package_and_fails_the_gate(tmp_path: Path) -> None:
    data = tmp_path / "coverage"
    ran = subprocess.run(
        [sys.executable, "-m", "coverage", "run", f"--data-file={data}", "-m", "pincer.cli", "--version"],
        capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    done = subprocess.run([sys.executable, str(GATE), "--data-file", str(data)], capture_output=True, text=True,
                          cwd=ROOT, env=_env(), timeout=RUN_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:]}
    assert {"core", "policy", "safety", "store", "dispatch", "cli", "src/pincer"} <= set(rows)
    assert float(rows["cli"][2]) > 0 and float(rows["gateway"][2]) == 0  # the CLI ran, no gateway did
    assert "coverage under the floor: src/pincer:" in done.stderr and "never lower FLOORS" in done.stderr


def test_no_data_is_said_not_passed(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(GATE), "--data-file", str(tmp_path / "none")], capture_output=True,
                          text=True, cwd=ROOT, env=_env(), timeout=RUN_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 2 and "run the tests with --cov first" in done.stderr


def test_data_already_combined_is_read_as_make_test_leaves_it(tmp_path: Path) -> None:
    """`make test` runs the gate without --data-file, on the one file pytest-cov combined
    ([tool.coverage.run] data_file, relative to where it runs). The gate handed coverage
    data_file=None, which means "no file": it said "no data" (exit 2) after a green suite
    (found on the first fresh-clone run with coverage)."""
    data = tmp_path / ".coverage-data" / "coverage"
    data.parent.mkdir()
    ran = subprocess.run(
        [sys.executable, "-m", "coverage", "run", f"--data-file={data}", "-m", "pincer.cli", "--version"],
        capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    combined = subprocess.run([sys.executable, "-m", "coverage", "combine", f"--data-file={data}"], capture_output=True,
                              text=True, cwd=ROOT, env=_env(), timeout=RUN_TIMEOUT_S)  # fmt: skip
    assert combined.returncode == 0 and data.exists() and not list(data.parent.glob("coverage.*")), combined.stderr
    done = subprocess.run([sys.executable, str(GATE)], capture_output=True, text=True, cwd=tmp_path, env=_env(),
                          timeout=RUN_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 1 and "run the tests with --cov first" not in done.stderr, done.stdout + done.stderr
    assert any(line.split()[0] == "cli" for line in done.stdout.splitlines()[1:]), done.stdout
