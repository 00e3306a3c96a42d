"""Long waits say what they wait for on stderr: a spinner on a terminal, a line in a pipe, and
nothing with --json (stdout stays one document)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

from pincer.runtimes.mcp import ServerConfig, ServerStore

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 120
# A stdio "MCP server" that takes its time and then leaves: pincer's start waits for it, logs
# that it failed, and goes on (a server's failure is never fatal to listing the other tools).
SLOW_SERVER = ("-c", "import time; time.sleep(3)")


def _home_with_a_slow_server(home: Path) -> dict[str, str]:
    ServerStore(home).add(ServerConfig(name="slow", transport="stdio", command=sys.executable, args=SLOW_SERVER))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    return env


def test_a_slow_start_says_what_it_waits_for_in_a_pipe(tmp_path: Path) -> None:
    env = _home_with_a_slow_server(tmp_path)
    done = subprocess.run([*PINCER, "tools", "list"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "starting MCP servers: slow ..." in done.stderr


def test_json_output_has_no_progress(tmp_path: Path) -> None:
    env = _home_with_a_slow_server(tmp_path)
    done = subprocess.run([*PINCER, "tools", "list", "--json"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "starting MCP servers" not in done.stderr
    assert any(tool["name"] == "echo" for tool in json.loads(done.stdout))


def _run_with_terminal_stderr(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (as in a shell) and stdout on a pipe."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        child = subprocess.run(argv, stdout=subprocess.PIPE, stderr=slave, env={**env, "TERM": "xterm", "COLUMNS": "120"},
                               timeout=CLI_TIMEOUT_S, check=False)  # fmt: skip
    finally:
        os.close(slave)
        reader.join(timeout=CLI_TIMEOUT_S)
        os.close(master)
    return child.returncode, child.stdout.decode(), b"".join(chunks).decode(errors="replace")


def test_on_a_terminal_a_transient_spinner_and_never_with_json(tmp_path: Path) -> None:
    env = _home_with_a_slow_server(tmp_path)
    code, _stdout, terminal = _run_with_terminal_stderr([*PINCER, "tools", "list"], env)
    assert code == 0, terminal
    assert "starting MCP servers: slow" in terminal
    assert "starting MCP servers: slow ..." not in terminal  # the spinner, not the pipe's line
    code, stdout, terminal = _run_with_terminal_stderr([*PINCER, "tools", "list", "--json"], env)
    assert code == 0, terminal
    assert "starting MCP servers" not in terminal
    assert json.loads(stdout)


def test_mcp_test_of_a_slow_server_says_it_is_starting(tmp_path: Path) -> None:
    """Newcomer item 7: an npx-launched server printed nothing for 20 s during `pincer mcp test`."""
    env = _home_with_a_slow_server(tmp_path)
    done = subprocess.run([*PINCER, "mcp", "test", "slow"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 1  # it never answers the handshake
    assert "starting MCP server slow (a server run with npx or uvx fetches its package first) ..." in done.stderr
    quiet = subprocess.run(
        [*PINCER, "mcp", "test", "slow", "--json"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S
    )
    assert "starting MCP server" not in quiet.stderr
    json.loads(quiet.stdout)
