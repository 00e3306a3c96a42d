"""An MCP server that fails to start affects only its own tools (issue 35).

Before: after `pincer mcp add broken --command /bin/false`, every later `pincer tools call`, of
any tool, started the broken server (its tools were never pinned) and printed that it did not
start. Now a one-shot call starts only the servers that may own the tool it calls, and
`pincer doctor` names the server that never answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 120


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    return subprocess.run([*PINCER, *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def test_a_broken_server_says_nothing_to_calls_of_other_tools_and_doctor_names_it(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[gateway]\nport = 0\n")
    added = _pincer(tmp_path, "mcp", "add", "dead", "--command", "/bin/false")
    assert added.returncode == 0 and "did not answer" in added.stderr, added.stderr
    eager = _pincer(tmp_path, "mcp", "add", "deadtoo", "--command", "/bin/false", "--startup", "eager", "--no-connect")
    assert eager.returncode == 0, eager.stderr
    for as_json in ((), ("--json",)):
        call = _pincer(tmp_path, "tools", "call", "echo", "--args", json.dumps({"text": "still here"}), *as_json)
        assert call.returncode == 0, call.stderr
        assert "still here" in call.stdout
        for stream in (call.stdout, call.stderr):
            assert "dead" not in stream and "MCP" not in stream, stream
    # Its own tools: a call that may be its tool still starts it, and says why it failed.
    own = _pincer(tmp_path, "tools", "call", "dead_anything")
    assert own.returncode != 0 and "dead" in own.stderr, own.stderr
    doctor = _pincer(tmp_path, "doctor", "--json")
    servers = {c["detail"].split(":")[0]: c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "mcp server"}
    assert servers["dead"]["status"] == "warn" and "never answered" in servers["dead"]["detail"]
    assert "pincer mcp test dead" in servers["dead"]["hint"]
    assert servers["deadtoo"]["status"] == "warn"
