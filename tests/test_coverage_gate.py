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
