"""A real PostgreSQL and a real Redis for the tests, started once per test session, lazily.

PostgreSQL comes from Debian's packages (``postgresql``: binaries in /usr/lib/postgresql/N/bin;
``make setup``'s ``system-deps`` installs it, the service itself stays stopped). PostgreSQL
refuses to run as root, so as root the cluster is made and run by the ``postgres`` user the
package creates (``runuser -u postgres``); as anyone else, by that user. It listens on a unix
socket in its own directory and on a free loopback port, trust authentication, fsync off (a
test cluster: what is tested is concurrency, not the disk). Redis (``redis-server``) listens
on a free loopback port without persistence.

Missing binaries fail the tests that need them (with the command that installs them): nothing is
skipped quietly. Each test gets a database of its own (``CREATE DATABASE`` from a template is
milliseconds) and a Redis key prefix of its own.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "PostgresServer", "RedisServer", "postgres_server", "private_postgres", "redis_server", "session_server_pids",
]  # fmt: skip

SERVER_START_TIMEOUT_S = 120.0
_INSTALL_HINT = "install Debian's postgresql and redis-server packages: `make system-deps` (as root)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    return Path(found[-1]).parent if found else None


@dataclass(frozen=True, kw_only=True, slots=True)
class PostgresServer:
    host: str
    port: int
    user: str
    pid: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@dataclass(frozen=True, kw_only=True, slots=True)
class RedisServer:
    host: str
    port: int
    pid: int

    def url(self, db: int = 0) -> str:
        return f"redis://{self.host}:{self.port}/{db}"


_started: dict[str, object] = {}
# The server processes and their log files live as long as the test session (their objects are
# kept, so no ResourceWarning says a still-running child was dropped); stopped at exit.
_children: list[tuple[subprocess.Popen[bytes], object]] = []


def _stop_children() -> None:
    for process, log in _children:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=SERVER_START_TIMEOUT_S)
        if hasattr(log, "close"):
            log.close()


atexit.register(_stop_children)

# atexit runs only when the test process ends by itself. One killed from outside (pytest-timeout's
# thread method, xdist replacing a crashed worker, a CI job cancelled) used to leave its PostgreSQL
# and Redis running for good, each in a session of its own. A reaper, started with the first
# server, holds the read end of a pipe only this process writes to: when the process dies, however
# it dies, the pipe ends and the reaper stops every server it was told of (its whole process
# group, SIGKILL after a grace) and removes their directories.
_REAPER_SCRIPT = """
import os, shutil, signal, sys, time
def running(pid):  # a zombie no longer counts: PID 1 in a container may never reap it
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
groups, roots = [], []
for line in sys.stdin:
    kind, _, value = line.rstrip("\\n").partition(" ")
    (groups if kind == "group" else roots).append(value)
for sig, grace in ((signal.SIGINT, 10.0), (signal.SIGKILL, 0.0)):
    for group in groups:
        try:
            os.killpg(int(group), sig)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(running(g) for g in groups):
        time.sleep(0.1)
for root in roots:
    shutil.rmtree(root, ignore_errors=True)
"""
_reaper: list[subprocess.Popen[bytes]] = []


def _reap_on_death(*, group: int, root: Path) -> None:
    """Tell the reaper (started on first use) of a server's process group and directory."""
    if not _reaper:
        reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER_SCRIPT],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        _reaper.append(reaper)
    stdin = _reaper[0].stdin
    assert stdin is not None
    stdin.write(f"group {group}\nroot {root}\n".encode())
    stdin.flush()


def session_server_pids() -> set[int]:
    """The processes of the servers kept for the whole session, and their reaper (tests/leaks.py
    leaves them be)."""
    return {process.pid for process, _ in _children} | {reaper.pid for reaper in _reaper}


def _as_postgres_user(argv: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


def postgres_server() -> PostgresServer:
    cached = _started.get("postgres")
    if isinstance(cached, PostgresServer):
        return cached
    cluster = _PostgresCluster.create()
    process = cluster.start()
    _children.append((process, cluster.log))
    _reap_on_death(group=process.pid, root=cluster.root)
    atexit.register(shutil.rmtree, cluster.root, True)
    _started["postgres"] = cluster.server
    return cluster.server


@dataclass(kw_only=True)
class _PostgresCluster:
    """One initdb'd cluster: its directory, its port, and how to start its server."""

    root: Path
    bindir: Path
    port: int
    user: str
    log: Any = None
    process: subprocess.Popen[bytes] | None = None

    @classmethod
    def create(cls) -> _PostgresCluster:
        bindir = _pg_bin()
        if bindir is None:
            pytest.fail(f"PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): {_INSTALL_HINT}")
        root = Path(tempfile.mkdtemp(prefix="pincer-pg-"))
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        user = "postgres" if os.geteuid() == 0 else os.environ.get("USER", "postgres")
        subprocess.run(
            _as_postgres_user([str(bindir / "initdb"), "-D", str(root / "data"), "-A", "trust", "-U", user, "-E", "UTF8"]),
            check=True, capture_output=True, timeout=SERVER_START_TIMEOUT_S,
        )  # fmt: skip
        _as_postgres_run(["mkdir", "-p", str(root / "run")])
        return cls(root=root, bindir=bindir, port=_free_port(), user=user)

    @property
    def server(self) -> PostgresServer:
        assert self.process is not None
        return PostgresServer(host="127.0.0.1", port=self.port, user=self.user, pid=self.process.pid)

    def start(self) -> subprocess.Popen[bytes]:
        """Start the server on the cluster's port; returns once it answers."""
        if self.log is None:
            self.log = open(self.root / "postgres.log", "ab")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            _as_postgres_user([
                str(self.bindir / "postgres"), "-D", str(self.root / "data"), "-p", str(self.port), "-k", str(self.root / "run"),
                "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB",
            ]),
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        _wait_for(lambda: _pg_ready(self.server), what=f"PostgreSQL (log: {self.root / 'postgres.log'})", process=self.process)
        return self.process

    def stop(self) -> None:
        """Stop the server (a fast shutdown: open connections are ended) and wait until it is gone."""
        process = self.process
        if process is not None and process.poll() is None:
            # "fast": open connections (a gateway's pool) are ended instead of waited for
            subprocess.run(
                _as_postgres_user([str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "stop", "-m", "fast", "-w"]),
                check=True, capture_output=True, timeout=SERVER_START_TIMEOUT_S,
            )  # fmt: skip
            process.wait(timeout=SERVER_START_TIMEOUT_S)


@contextmanager
def private_postgres() -> Iterator[_PostgresCluster]:
    """A PostgreSQL cluster of the test's own, which the test may stop and start again (the shared
    one serves every other test). Removed at the end."""
    cluster = _PostgresCluster.create()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if cluster.log is not None:
            cluster.log.close()
        shutil.rmtree(cluster.root, ignore_errors=True)


def _as_postgres_run(argv: list[str]) -> None:
    subprocess.run(_as_postgres_user(argv), check=True, timeout=SERVER_START_TIMEOUT_S)


def _pg_ready(server: PostgresServer) -> bool:
    import psycopg

    try:
        with psycopg.connect(server.url(), connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


def redis_server() -> RedisServer:
    cached = _started.get("redis")
    if isinstance(cached, RedisServer):
        return cached
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(f"redis-server is not installed: {_INSTALL_HINT}")
    root = Path(tempfile.mkdtemp(prefix="pincer-redis-"))
    port = _free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(root),
         "--protected-mode", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    _children.append((process, None))
    _reap_on_death(group=process.pid, root=root)
    atexit.register(shutil.rmtree, root, True)
    server = RedisServer(host="127.0.0.1", port=port, pid=process.pid)
    _wait_for(lambda: _redis_ready(server), what="Redis", process=process)
    _started["redis"] = server
    return server


def _redis_ready(server: RedisServer) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((server.host, server.port), timeout=2) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16).startswith(b"+PONG")
    return False


def _wait_for(ready: object, *, what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited at start (code {process.returncode})")
        if callable(ready) and ready():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} did not start within {SERVER_START_TIMEOUT_S:g} s")
