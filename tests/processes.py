"""Stopping the servers a test started as subprocesses, and a script tool the tests install.

A server is asked to stop with SIGINT (its own shutdown runs, as a person's Ctrl-C would), killed
when it has not gone within the timeout, and its pipe readers joined and pipes closed, so a test
leaves no process, thread or file descriptor behind. Several at once: :func:`interrupt` them all
first, then :func:`reap` each, so their shutdowns overlap.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterable

__all__ = ["interrupt", "reap", "SHOUT_MANIFEST"]

# A script tool (`pincer tools install shout.toml`): echoes its text argument.
SHOUT_MANIFEST = """
name = "shout"
description = "Echo the text back"
command = ["/bin/echo", "{text}"]
effects = []
[input_schema]
type = "object"
properties.text = { type = "string" }
required = ["text"]
"""


def interrupt(process: subprocess.Popen[str]) -> None:
    """SIGINT to ``process`` while it runs."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)


def reap(process: subprocess.Popen[str], readers: Iterable[threading.Thread], timeout_s: float) -> None:
    """Wait for ``process`` (SIGKILL after ``timeout_s``), then join its pipe readers and close its pipes."""
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_s)
    for reader in readers:
        reader.join(timeout=timeout_s)
    for stream in (process.stdout, process.stderr):
        if stream:
            stream.close()
