"""``pincer mcp stdio`` answers ``initialize`` and ``tools/list`` before it imports the MCP SDK
(issue 23 item 1), and the SDK server it hands over to carries on the same conversation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pincer.gateway import stdio_prelude

ANSWER_TIMEOUT_S = 60.0

# Run as `pincer mcp stdio`, with an audit hook that holds the first import of the MCP SDK until
# the gate file exists: an answer that needed the SDK cannot arrive before the test opens the gate.
_GATED = """
import os, sys, time
gate = sys.argv[1]
def hold_the_sdk(event, args):
    if event == "import" and args[0].split(".")[0] in ("mcp", "mcp_types") and not os.path.exists(gate):
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
sys.addaudithook(hold_the_sdk)
sys.argv = ["pincer", "mcp", "stdio", *sys.argv[2:]]
from pincer.cli.main import main
main()
"""


def _initialize(request_id: int, version: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
    }


class _Child:
    def __init__(self, home: Path, gate: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
        env["PINCER_HOME"] = str(home)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _GATED, str(gate), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def answer(self, request_id: int) -> dict[str, Any]:
        """The next message on stdout, which must answer ``request_id`` (a bounded wait)."""
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        buffer = b""
        while b"\n" not in buffer:
            if time.monotonic() > deadline:
                raise AssertionError(f"no answer to request {request_id} within {ANSWER_TIMEOUT_S} s")
            chunk = self.process.stdout.read()
            if chunk:
                buffer += chunk
            elif self.process.poll() is not None:
                raise AssertionError(f"pincer mcp stdio exited: {self.process.stderr.read().decode()}")  # type: ignore[union-attr]
            else:
                time.sleep(0.01)
        line, rest = buffer.split(b"\n", 1)
        assert not rest, rest
        message = json.loads(line)
        assert message.get("id") == request_id, message
        return message

    def close(self) -> str:
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=ANSWER_TIMEOUT_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        stderr = self.process.stderr.read().decode()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return stderr


@pytest.mark.parametrize(
    ("config", "version", "answered"),
    [
        ("", "2025-11-25", "2025-11-25"),
        ("", "2024-11-05", "2024-11-05"),
        ("", "2099-01-01", "2025-11-25"),  # a version the server does not know: its latest
        ("[skills]\nenabled = false\n", "2025-06-18", "2025-06-18"),
    ],
    ids=["latest", "oldest", "unknown-version", "skills-off"],
)
def test_handshake_is_answered_before_the_sdk_loads_and_as_the_sdk_answers_it(
    tmp_path: Path, config: str, version: str, answered: str
) -> None:
    """Failed before the prelude: `initialize` waited for `import mcp` (the audit hook holds it,
    so no answer came before the gate opened) and took 1.5 s at load 3."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(config)
    gate = tmp_path / "gate"
    child = _Child(home, gate)
    try:
        child.send(_initialize(1, version))
        first = child.answer(1)["result"]
        child.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        child.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = child.answer(2)["result"]
        gate.touch()  # the SDK may load now: the next requests are the SDK server's
        child.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}})
        called = child.answer(3)["result"]
        child.send({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
        listed_by_sdk = child.answer(4)["result"]
    finally:
        stderr = child.close()
    assert first["protocolVersion"] == answered
    assert first["serverInfo"]["name"] == "pincer"
    # Prompts and resources are served with skills off too: the upstream MCP servers' ones.
    assert "prompts" in first["capabilities"] and "resources" in first["capabilities"]
    # The SDK server answered the replayed initialize too: the prelude's answer must be the same.
    assert "would have answered" not in stderr, stderr
    assert listed == listed_by_sdk
    assert "echo" in {tool["name"] for tool in listed["tools"]}
    assert called["structuredContent"] == {"text": "hi"} and not called.get("isError")


def test_a_session_policy_applies_to_the_prelude_tools_list(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[sessions.agent]\nkind = "non-main"\ndeny = ["echo"]\n')
    child = _Child(home, tmp_path / "gate", "--session", "agent")
    try:
        child.send(_initialize(1, "2025-11-25"))
        child.answer(1)
        child.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        child.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = child.answer(2)["result"]
        (tmp_path / "gate").touch()
        child.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        listed_by_sdk = child.answer(3)["result"]
    finally:
        child.close()
    names = {tool["name"] for tool in listed["tools"]}
    assert "echo" not in names and "read_file" in names
    assert listed == listed_by_sdk


def test_anything_else_first_goes_to_the_sdk_server(tmp_path: Path) -> None:
    """A request the prelude does not take (here a ping before initialize, and malformed
    initialize params) is the SDK's to answer, in its words."""
    home = tmp_path / "home"
    home.mkdir()
    gate = tmp_path / "gate"
    gate.touch()
    child = _Child(home, gate)
    try:
        child.send({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 5}})
        refused = child.answer(7)
    finally:
        stderr = child.close()
    assert "error" in refused, refused
    assert "would have answered" not in stderr


def test_the_prelude_knows_the_sdks_handshake_versions() -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == stdio_prelude.HANDSHAKE_PROTOCOL_VERSIONS
    assert stdio_prelude.LATEST_HANDSHAKE_VERSION == LATEST_HANDSHAKE_VERSION


def test_a_home_that_cannot_open_after_the_handshake_is_a_clear_error_and_exit_1(tmp_path: Path) -> None:
    """Failed before claim_stdio unwrapped its task group: the broken audit key surfaced as an
    ExceptionGroup traceback instead of the error and its hint."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "audit.key").write_text("not a key\n")
    (home / "audit.key").chmod(0o600)
    child = _Child(home, tmp_path / "gate")
    try:
        child.send(_initialize(1, "2025-11-25"))
        child.answer(1)  # answered from the config alone, before the home is opened
        child.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        child.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        code = child.process.wait(timeout=ANSWER_TIMEOUT_S)  # stdin still open: it exits by itself
    finally:
        stderr = child.close()
    assert code == 1
    assert "audit.key is not a 32-byte key" in stderr and "hint:" in stderr
    assert "Traceback" not in stderr, stderr
