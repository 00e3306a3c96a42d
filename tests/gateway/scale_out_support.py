"""Real ``pincer serve`` processes on one PostgreSQL and Redis (tests/backends.py), for the
scale-out tests: start several side by side, read what they print, stop or kill them."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from tests.gateway.conftest import read_json_document
from tests.processes import interrupt, reap

SERVER_START_TIMEOUT_S = 120.0
SERVER_STOP_TIMEOUT_S = 20.0
CLI_TIMEOUT_S = 120.0
PINCER_BIN = Path(sys.executable).with_name("pincer")

T = TypeVar("T")


@dataclass
class Gateway:
    process: subprocess.Popen[str]
    url: str
    home: Path
    errors: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr(self) -> str:
        return "".join(self.errors)


def env_for(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    return {**env, "PINCER_HOME": str(home), **(extra or {})}


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PINCER_BIN), *args], capture_output=True, text=True, env=env_for(home), timeout=CLI_TIMEOUT_S
    )


@contextmanager
def gateways(homes: Sequence[Path]) -> Iterator[list[Gateway]]:
    """One gateway per home (a home may repeat), started side by side; stopped (SIGINT, then
    SIGKILL) at the end."""
    started: list[tuple[subprocess.Popen[str], queue.Queue[str], list[str], list[threading.Thread], Path]] = []
    try:
        for home in homes:
            process = subprocess.Popen(
                [str(PINCER_BIN), "serve", "--port", "0", "--json"], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, env=env_for(home),
            )  # fmt: skip
            lines: queue.Queue[str] = queue.Queue()
            errors: list[str] = []
            readers = [
                threading.Thread(target=lambda p=process, q=lines: [q.put(line) for line in p.stdout or ()], daemon=True),
                threading.Thread(target=lambda p=process, e=errors: [e.append(line) for line in p.stderr or ()], daemon=True),
            ]
            for reader in readers:
                reader.start()
            started.append((process, lines, errors, readers, home))
        found = []
        for process, lines, errors, _, home in started:
            try:
                info = read_json_document(lines, SERVER_START_TIMEOUT_S)
            except AssertionError:
                raise AssertionError(f"pincer serve did not start: {''.join(errors)}") from None
            assert "url" in info, f"pincer serve did not start: {info} {''.join(errors)}"
            found.append(Gateway(process=process, url=info["url"], home=home, errors=errors))
        yield found
    finally:
        for process, *_ in started:
            interrupt(process)
        for process, _, _, readers, _ in started:
            reap(process, readers, SERVER_STOP_TIMEOUT_S)


def upgrade(home: Path) -> None:
    done = cli(home, "db", "upgrade", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is True


def rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def wait_for(
    what: str, found: Callable[[], T | None], *, alive: Sequence[Gateway], timeout_s: float = 60.0, every_s: float = 0.2
) -> T:
    """Poll ``found`` until it gives something true; fail at once with a
    gateway's stderr when one of ``alive`` died, and after ``timeout_s`` saying ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = found()
        if value:
            return value
        for gateway in alive:
            if gateway.process.poll() is not None:
                raise AssertionError(f"a gateway died while waiting for {what}: {gateway.stderr()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s:g} s")
        time.sleep(every_s)
