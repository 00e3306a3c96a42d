"""The collector while a ``pincer`` command starts (cli/startup_gc.py): start-up runs with a high
first-generation threshold, and once the command's Pincer is open its objects are frozen out of
later passes and the process's own thresholds are back. Real ``pincer`` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pincer.cli.startup_gc import STARTUP_THRESHOLDS

CLI_TIMEOUT_S = 120.0

# Runs the console script's main() and, at exit, reports the collector's state on stderr's last line.
PROGRAM = """
import atexit, gc, json, sys
atexit.register(lambda: print(json.dumps({"enabled": gc.isenabled(), "threshold": gc.get_threshold(),
                                          "frozen": gc.get_freeze_count()}), file=sys.stderr))
sys.argv = ["pincer", *sys.argv[1:]]
from pincer.cli.main import main
main()
"""


def run_pincer(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S
    )
    assert done.stderr.strip(), f"pincer {' '.join(args)} reported nothing at exit (exit {done.returncode})"
    return done, json.loads(done.stderr.strip().splitlines()[-1])


def test_a_command_that_opens_its_pincer_gets_the_default_thresholds_back_and_its_startup_frozen(
    tmp_path: Path,
) -> None:
    done, state = run_pincer(tmp_path, "tools", "list", "--json")
    assert done.returncode == 0, done.stderr
    assert "read_file" in {tool["name"] for tool in json.loads(done.stdout)}
    defaults = subprocess.run(
        [sys.executable, "-c", "import gc; print(list(gc.get_threshold()))"],
        capture_output=True, text=True, check=True, timeout=CLI_TIMEOUT_S,
    )  # fmt: skip
    assert state["threshold"] == json.loads(defaults.stdout)
    assert state["enabled"] is True
    assert isinstance(state["frozen"], int) and state["frozen"] > 10_000, state


def test_a_command_that_opens_no_pincer_still_collects(tmp_path: Path) -> None:
    done, state = run_pincer(tmp_path, "token", "--json")
    assert done.returncode == 0, done.stderr
    assert state["enabled"] is True
    assert state["threshold"] == list(STARTUP_THRESHOLDS)
    assert state["frozen"] == 0
