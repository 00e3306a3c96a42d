"""``pincer run``'s approval prompt ends with its run (second-hour item 2): the real CLI as a
subprocess, its stdin a pipe held open (nobody types), stopped with Ctrl-C or with
``pincer runs cancel`` from another process."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from tests.acts.support import CLI_ACTOR
from tests.cli.test_run_cli import CLI_TIMEOUT_S, PINCER, POLL_S, _env, _home, pincer

PROMPT_WAIT_S = 60.0


def _chars(stream: IO[str], sink: list[str]) -> None:
    # Character by character: the prompt ends without a line break.
    for ch in iter(lambda: stream.read(1), ""):
        sink.append(ch)


def _wait_for_text(sink: list[str], text: str) -> None:
    deadline = time.monotonic() + PROMPT_WAIT_S
    while text not in "".join(sink):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} within {PROMPT_WAIT_S} s; stderr so far: {''.join(sink)[-2000:]!r}")
        time.sleep(POLL_S)


@pytest.mark.parametrize("stop", ["ctrl-c", "runs cancel"])
def test_a_cancelled_run_ends_its_prompt_and_expires_its_approval(tmp_path: Path, stop: str) -> None:
    """Failed before the fix: after Ctrl-C (or ``pincer runs cancel``) the process printed that it
    was cancelling but kept waiting on the prompt until Enter, the approval stayed pending, and a
    later ``pincer approvals approve ID`` answered exit 0 for a call the audit records as
    cancelled."""
    script = [Turn(calls=(ScriptedCall(name="write_file", arguments={"path": "late.md", "content": "x"}),)), Turn(text="done")]
    with serve_models(script) as server:
        home = _home(tmp_path, server)
        proc = subprocess.Popen(
            [*PINCER, "run", "release-notes", "-p", "version=1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=_env(home),
        )  # fmt: skip
        out: list[str] = []
        err: list[str] = []
        threads = [threading.Thread(target=_chars, args=(proc.stdout, out), daemon=True),
                   threading.Thread(target=_chars, args=(proc.stderr, err), daemon=True)]  # fmt: skip
        for t in threads:
            t.start()
        try:
            _wait_for_text(err, "allow? [y]es once")
            pending = json.loads(pincer(home, "approvals", "list", "--json").stdout)
            approvals = pending["approvals"] if isinstance(pending, dict) else pending
            (approval,) = approvals
            if stop == "ctrl-c":
                proc.send_signal(signal.SIGINT)
            else:
                (run,) = json.loads(pincer(home, "runs", "list", "--json").stdout)
                assert pincer(home, "runs", "cancel", run["id"]).returncode == 0
            # stdin stays open and silent: the process must end by itself.
            proc.wait(timeout=CLI_TIMEOUT_S)
        finally:
            proc.kill()
            for t in threads:
                t.join(5)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    text = "".join(err)
    assert proc.returncode == 1, text
    assert "cancelled" in text
    late = pincer(home, "approvals", "approve", approval["id"])
    assert late.returncode == 1, late.stderr
    assert "has expired" in late.stderr
    shown = json.loads(pincer(home, "approvals", "show", approval["id"], "--json").stdout)
    assert shown["status"] == "expired"
    assert not (home / "workspace" / "late.md").exists()
    records = json.loads(pincer(home, "audit", "list", "--tool", "write_file", "--json").stdout)
    assert any("cancelled by its caller" in str(r.get("error") or r.get("reason") or "") or r.get("outcome") == "cancelled" for r in records), records


def test_a_prompt_ends_when_its_approval_is_answered_from_another_shell(tmp_path: Path) -> None:
    """Failed before the fix: `pincer approvals approve ID` from another shell answered the
    approval, but `pincer run` went on waiting at its prompt until Enter before the call ran."""
    script = [Turn(calls=(ScriptedCall(name="write_file", arguments={"path": "approved.md", "content": "x"}),)), Turn(text="done")]
    with serve_models(script) as server:
        home = _home(tmp_path, server)
        proc = subprocess.Popen(
            [*PINCER, "run", "release-notes", "-p", "version=1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=_env(home),
        )  # fmt: skip
        out: list[str] = []
        err: list[str] = []
        threads = [threading.Thread(target=_chars, args=(proc.stdout, out), daemon=True),
                   threading.Thread(target=_chars, args=(proc.stderr, err), daemon=True)]  # fmt: skip
        for t in threads:
            t.start()
        try:
            _wait_for_text(err, "allow? [y]es once")
            (approval,) = json.loads(pincer(home, "approvals", "list", "--json").stdout)["approvals"]
            approved = pincer(home, "approvals", "approve", approval["id"])
            assert approved.returncode == 0, approved.stderr
            proc.wait(timeout=CLI_TIMEOUT_S)  # stdin stays open and silent
        finally:
            proc.kill()
            for t in threads:
                t.join(5)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    text = "".join(err)
    assert proc.returncode == 0, text
    assert f"approval {approval['id']}: allow_once (answered by {CLI_ACTOR})" in text
    assert (home / "workspace" / "approved.md").read_text() == "x"
