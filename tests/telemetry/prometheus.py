"""A real Prometheus for the tests: Debian's ``prometheus`` (installed by ``make setup``), started on a
free loopback port with its configuration and its TSDB in the test's temporary directory, stopped
at the end; queried through its HTTP API.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.processes import interrupt

__all__ = ["Prometheus", "prometheus", "free_port", "START_TIMEOUT_S", "SCRAPE_WAIT_S"]

START_TIMEOUT_S = 60.0
SCRAPE_WAIT_S = 60.0  # a 1 s scrape interval: a value shows within seconds on an idle machine
STOP_TIMEOUT_S = 15.0
POLL_S = 0.2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, kw_only=True)
class Target:
    job: str
    address: str  # host:port
    token_file: Path | None = None


@dataclass
class Prometheus:
    url: str
    log: Path

    def query(self, expression: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expression}, trust_env=False, timeout=10.0)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def value(self, expression: str) -> float | None:
        """The one sample ``expression`` gives, or None while it gives none."""
        result = self.query(expression)
        assert len(result) <= 1, f"{expression} gives {len(result)} series: {result}"
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, expression: str, done: Callable[[float | None], bool], *, what: str) -> float | None:
        deadline = time.monotonic() + SCRAPE_WAIT_S
        while True:
            value = self.value(expression)
            if done(value):
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: {expression} is {value} after {SCRAPE_WAIT_S:g} s (log: {self.log})")
            time.sleep(POLL_S)


@contextmanager
def prometheus(directory: Path, targets: Sequence[Target]) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("Prometheus is not installed: install Debian's prometheus package (`make system-deps` as root)")
    directory.mkdir(parents=True, exist_ok=True)
    jobs = []
    for target in targets:
        auth = (
            f"    authorization:\n      type: Bearer\n      credentials_file: {target.token_file}\n"
            if target.token_file is not None
            else ""
        )
        jobs.append(f"  - job_name: {target.job}\n{auth}    static_configs:\n      - targets: ['{target.address}']\n")
    config = directory / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n" + "".join(jobs))
    port = free_port()
    log = directory / "prometheus.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={directory / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=output, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    server = Prometheus(url=f"http://127.0.0.1:{port}", log=log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"prometheus exited at start ({process.returncode}): {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{server.url}/-/ready", trust_env=False, timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prometheus was not ready within {START_TIMEOUT_S:g} s: {log.read_text()[-2000:]}")
            time.sleep(POLL_S)
        yield server
    finally:
        interrupt(process)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)
