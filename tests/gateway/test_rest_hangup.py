"""A REST caller that hangs up takes its call with it (second-hour item 1), against a real
``pincer serve`` and the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import PINCER_BIN, pincer_serve

CLI_TIMEOUT_S = 60.0
CLIENT_GIVES_UP_S = 2.0  # the caller's own timeout, well inside the approval's 60 s
EXPIRED_WITHIN_S = 30.0
POLL_S = 0.1


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PINCER_HOME": str(home)}
    return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def _approvals(home: Path) -> list[dict[str, object]]:
    listed = _pincer(home, "approvals", "list", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    return list(data["approvals"] if isinstance(data, dict) else data)


@pytest.mark.parametrize("content_type", ["application/json", "application/x-www-form-urlencoded"])
def test_a_rest_caller_that_hangs_up_expires_its_approval_and_cancels_its_call(tmp_path: Path, content_type: str) -> None:
    """Failed before the fix: the call went on waiting after ``curl -m 5`` gave up, the approval
    stayed pending, and ``pincer approvals approve ID`` then ran the write with nobody waiting
    (exit 0). Also with curl's default form content type, whose body is read before the route."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[approvals]\ntimeout_s = 60\n")
    with pincer_serve(home) as server:
        headers = {"Authorization": f"Bearer {server.token}", "content-type": content_type}
        body = json.dumps({"args": {"path": "hangup.txt", "content": "written with nobody waiting"}})
        with httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=CLIENT_GIVES_UP_S) as http:
            with pytest.raises(httpx.ReadTimeout):  # write_file asks by default; nobody answers
                http.post("/tools/write_file/call", content=body, headers=headers)
        deadline = time.monotonic() + EXPIRED_WITHIN_S
        while True:
            (approval,) = _approvals(home)
            if approval["status"] != "pending" or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)
        assert approval["status"] == "expired", approval
        late = _pincer(home, "approvals", "approve", str(approval["id"]))
        assert late.returncode == 1, late.stderr
        assert "expired" in late.stderr and "nobody would act on the answer" in " ".join(late.stderr.split())
        time.sleep(1.0)  # were the call still parked, the approval would have let it write by now
        assert not (home / "workspace" / "hangup.txt").exists()
        audit = _pincer(home, "audit", "list", "--tool", "write_file", "--json")
        assert audit.returncode == 0, audit.stderr
        assert "cancelled by its caller" in audit.stdout
        # One record of the call, naming the approval it waited on (docs/acts.md: call-cancelled).
        (call,) = [r for r in json.loads(audit.stdout) if r["kind"] == "call"]
        assert (call["outcome"], call["approval_id"], call["caller"]) == ("cancelled", approval["id"], "rest")
