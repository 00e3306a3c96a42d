"""tests/leaks.py: a file's leak fails that file's last test, not the next file's.

Before, a ResourceWarning for an object a file leaked in a reference cycle was raised whenever the
collector next ran, failing whichever test was running then (one CI run failed a test of
tests/people/test_person_mcp_instances.py that passes alone), and a subprocess a file left running
was noticed by no one. Each check runs a small suite of two files in a pytest of its own, with the
guard from tests/conftest.py and ``filterwarnings = ["error"]`` as this suite has."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.leaks import child_processes

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 300.0
CONFTEST = "from tests.leaks import file_leaves_nothing_behind  # noqa: F401\n"
INNOCENT = "def test_innocent():\n    assert True\n"


def _run(tmp_path: Path, leaker: str) -> str:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    (tmp_path / "test_a_leaks.py").write_text(leaker)
    (tmp_path / "test_b_innocent.py").write_text(INNOCENT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rA", "test_a_leaks.py", "test_b_innocent.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    return done.stdout + done.stderr


def test_a_leaked_cycle_fails_the_leaking_files_last_test(tmp_path: Path) -> None:
    """An unclosed file in a reference cycle, with automatic collection off (as when the
    thresholds do not trip before the file ends): its ResourceWarning fails test_a's teardown."""
    output = _run(
        tmp_path,
        "import gc, os\n"
        "gc.disable()\n"
        "def test_leaks():\n"
        "    cycle = {'file': open(os.devnull, 'rb')}\n"
        "    cycle['self'] = cycle\n"
        "def test_last_of_the_file():\n"
        "    pass\n",
    )
    assert "ERROR at teardown of test_last_of_the_file" in output, output
    assert "ResourceWarning: unclosed file <_io.FileIO name='/dev/null'" in output, output
    assert "PASSED test_b_innocent.py::test_innocent" in output, output


def test_a_child_process_a_file_leaves_running_fails_that_file_and_is_killed(tmp_path: Path) -> None:
    marker = f"leaks-marker-{os.getpid()}-{time.monotonic_ns()}"
    output = _run(
        tmp_path,
        "import subprocess, sys\n"
        "KEPT = []\n"
        "def test_starts_and_forgets():\n"
        f"    KEPT.append(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}]))\n",
    )
    assert "ERROR at teardown of test_starts_and_forgets" in output and "LeftRunning" in output, output
    assert "left 1 child process(es)" in output and marker in output, output
    assert "PASSED test_b_innocent.py::test_innocent" in output, output
    survivors = [pid for pid in _all_pids() if marker in _cmdline(pid)]
    assert survivors == [], f"the guard did not kill the left process: {survivors}"


def test_a_file_that_reaps_what_it_starts_passes(tmp_path: Path) -> None:
    output = _run(
        tmp_path,
        "import subprocess, sys\n"
        "def test_starts_and_reaps():\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "    try:\n"
        "        assert child.poll() is None\n"
        "    finally:\n"
        "        child.kill()\n"
        "        child.wait(timeout=30)\n",
    )
    assert "2 passed" in output and "ERROR" not in output, output


def test_child_processes_lists_a_running_child_and_not_a_reaped_one() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert child.pid in child_processes()
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.pid not in child_processes()


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
