"""Waiting, from a test, for a CLI process's approval request to show up in another process.

A busy machine can take many seconds to start a CLI; a dead one never asks. So the wait is long
and it also watches the caller: when the process that should be asking has ended, the test fails
at once with what that process printed, instead of timing out with nothing to go on.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PENDING_WAIT_S = 90.0  # a CLI start on a loaded 2-core machine has taken over 20 s
POLL_S = 0.2


def wait_for_pending(
    home: Path,
    caller: subprocess.Popen[str],
    list_approvals: Callable[[Path], subprocess.CompletedProcess[str]],
) -> list[dict[str, Any]]:
    """The pending approval requests of ``home`` once there is one, while ``caller`` still runs."""
    deadline = time.monotonic() + PENDING_WAIT_S
    while True:
        listed = list_approvals(home)
        assert listed.returncode == 0, f"approvals list exited {listed.returncode}:\n{listed.stdout}\n{listed.stderr}"
        pending = json.loads(listed.stdout)["approvals"]
        if pending:
            return list(pending)
        if caller.poll() is not None:
            out, err = caller.communicate()
            raise AssertionError(f"the calling process ended (exit {caller.returncode}) without asking:\n{err}\n{out}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no approval request within {PENDING_WAIT_S:.0f} s (the caller still runs)")
        time.sleep(POLL_S)
