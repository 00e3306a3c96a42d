"""Fixtures for the MCP runtime tests: real servers as subprocesses, every wait bounded."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from pincer.runtimes.mcp import PinStore, ServerConfig

HERE = Path(__file__).parent
FAULTY_SERVER = HERE / "faulty_server.py"
REPO = HERE.parents[2]
NPM_CACHE = Path(os.environ.get("PINCER_NPM_CACHE", REPO / ".cache" / "npm"))
EVERYTHING_JS = NPM_CACHE / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE22 = NPM_CACHE / "node_modules" / ".bin" / "node"

# Published servers the pass-through tests run (`make mcp-deps` installs them, see the Makefile).
MCP_SERVERS = REPO / ".cache" / "npm-mcp-servers" / "node_modules"
PLAYWRIGHT_MCP_JS = MCP_SERVERS / "@playwright" / "mcp" / "cli.js"
APPS_SERVER_JS = MCP_SERVERS / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist" / "index.js"

CALL_TIMEOUT_S = 10.0  # a real call to a local server answers in milliseconds
WAIT_S = 10.0  # any other bounded wait in these tests


def faulty_config(name: str = "faulty", *extra: str, **changes: object) -> ServerConfig:
    config = ServerConfig(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=("-u", str(FAULTY_SERVER), *extra),
        connect_timeout_s=5.0,
    )
    return config.with_changes(**changes) if changes else config


def time_server_config(name: str = "time") -> ServerConfig:
    command = Path(sys.executable).with_name("mcp-server-time")
    return ServerConfig(
        name=name, transport="stdio", command=str(command), args=("--local-timezone", "UTC"), connect_timeout_s=20.0
    )


def npm_ready() -> Path:
    """server-everything and Node are installed by `make mcp-deps` (part of `make test`)."""
    if not EVERYTHING_JS.is_file() or not shutil.which("node"):
        pytest.fail(f"{EVERYTHING_JS} is missing: run `make mcp-deps` (make test does)")
    return EVERYTHING_JS


def published_ready() -> None:
    """The published npm servers of the pass-through tests are installed by `make mcp-deps`."""
    npm_ready()
    for path in (PLAYWRIGHT_MCP_JS, APPS_SERVER_JS):
        if not path.is_file():
            pytest.fail(f"{path} is missing: run `make mcp-deps` (make test does)")


@pytest.fixture
def pins(tmp_path: Path) -> PinStore:
    return PinStore(tmp_path / "home")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers signal 0; it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
