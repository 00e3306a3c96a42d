"""Real gateways for the tests: in-process (uvicorn on 127.0.0.1:0 in the test's event loop, so
a test can change the registry under it) and as a ``pincer serve`` subprocess."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pincer.config import parse_config
from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.gateway.serve import ServeInfo, serve
from pincer.service import Pincer
from pincer.store.sql.migrate import upgrade_postgres
from tests.backends import postgres_server
from tests.gateway.conformance.fixtures.runtime import FixtureRuntime, FixtureTool, channel_of, fixture
from tests.processes import interrupt, reap

SERVER_START_TIMEOUT_S = 120.0  # a loaded 2-core machine starts a gateway in ~1-2 s idle, 30+ s at load 15
SERVER_STOP_TIMEOUT_S = 15.0
LIVE_HTTP_TIMEOUT_S = 60.0  # one request to a live gateway, on a busy machine
SECRET_KEY = b"k" * 32
PINCER_BIN = Path(sys.executable).with_name("pincer")
# `pincer serve` / `pincer mcp stdio` with the conformance fixtures installed (they are not in the wheel).
FIXTURES_LAUNCHER = Path(__file__).resolve().parent / "conformance" / "serve_fixtures.py"


def pincer_command(*argv: str, fixtures: bool = False) -> list[str]:
    """The argv that runs ``pincer ARGV``, through the fixtures launcher when ``fixtures``."""
    return [sys.executable, str(FIXTURES_LAUNCHER), *argv] if fixtures else [str(PINCER_BIN), *argv]


@dataclass
class LiveGateway:
    pincer: Pincer
    info: ServeInfo
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def http(self, **kwargs: Any) -> httpx.AsyncClient:
        # httpx's own default (5 s) is shorter than a busy machine's answer to a run's start.
        kwargs.setdefault("timeout", LIVE_HTTP_TIMEOUT_S)
        return httpx.AsyncClient(base_url=self.info.url, trust_env=False, **kwargs)

    @asynccontextmanager
    async def mcp(self, *, mode: str = "auto", token: str | None = None, **kwargs: Any) -> AsyncIterator[Client]:
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token or self.token}"}, trust_env=False
        ) as http:
            async with Client(
                streamable_http_client(self.info.mcp_url, http_client=http), mode=mode, **kwargs
            ) as client:
                yield client


# -- small tools the tests drive: progress, log, and one that asks to write ------------------


@fixture("report", "Reports progress twice and logs once")
async def _report(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    await channel.progress(1, 2, "half")
    await channel.log("info", "reporting")
    await channel.progress(2, 2, "done")
    return ToolOutput(value="reported")


def _asking_tool() -> FixtureTool:
    spec = ToolSpec(
        name="write_note",
        description="Pretends to write a note (declares write_filesystem, so the default policy asks)",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        effects=frozenset({EffectKind.WRITE_FILESYSTEM}),
        runtime=RuntimeKind.NATIVE,
        side_effecting=True,
        source="tests",
    )

    async def handler(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        return ToolOutput(value={"written": args["text"]})

    return FixtureTool(spec=spec, handler=handler)


@fixture(
    "say",
    "Returns its text (the tests' stand-in for the echo built-in)",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False},
)
async def _say(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return ToolOutput(value=args["text"])


def make_test_runtime() -> FixtureRuntime:
    return FixtureRuntime([_say, _report, _asking_tool()])


@asynccontextmanager
async def live_gateway(
    home: Path, *, config: str = "", extra_runtime: bool = True, fixtures: bool = False, builtins: bool = False
) -> AsyncIterator[LiveGateway]:
    """A gateway over a fresh Pincer in ``home``, serving on 127.0.0.1:0 until the block ends."""
    parsed = parse_config(config, home=home)
    # The built-ins belong to another part; these tests bring their own tools (unless they ask).
    async with Pincer.open(home, config=parsed, secret_key=SECRET_KEY, builtins=builtins) as pincer:
        if extra_runtime:
            await pincer.add_runtime(make_test_runtime())
        extensions: tuple[Any, ...] = ()
        if fixtures:
            from tests.gateway.conformance.fixtures import install_fixtures

            extensions = (await install_fixtures(pincer),)
        ready: list[ServeInfo] = []
        started = anyio.Event()

        def on_ready(info: ServeInfo) -> None:
            ready.append(info)
            started.set()

        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await serve(
                    pincer, settings=parsed.gateway, host="127.0.0.1", port=0, on_ready=on_ready, extensions=extensions
                )

            tg.start_soon(run)
            with anyio.fail_after(SERVER_START_TIMEOUT_S):
                await started.wait()
            token = (home / "gateway.token").read_text().strip()
            try:
                yield LiveGateway(pincer=pincer, info=ready[0], token=token)
            finally:
                with anyio.move_on_after(SERVER_STOP_TIMEOUT_S):
                    tg.cancel_scope.cancel()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> str:
    """The config text that puts the store in SQLite (under the home) or a fresh PostgreSQL."""
    if request.param == "sqlite":
        return ""
    url = postgres_server().new_database()
    upgrade_postgres(url)
    return f'[store]\nurl = "{url}"\n'


@pytest.fixture
async def gateway(pincer_home: Path) -> AsyncIterator[LiveGateway]:
    async with live_gateway(pincer_home) as live:
        yield live


# -- subprocesses ------------------------------------------------------------------------------


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    info: dict[str, Any]
    home: Path
    stderr_lines: queue.Queue[str]

    def wait_for_log(self, text: str, timeout_s: float = SERVER_START_TIMEOUT_S) -> str:
        """The first stderr line (from now on) that contains ``text``; AssertionError after the timeout."""
        deadline = threading.Event()
        timer = threading.Timer(timeout_s, deadline.set)
        timer.start()
        seen = []
        try:
            while not deadline.is_set():
                try:
                    line = self.stderr_lines.get(timeout=0.1)
                except queue.Empty:
                    continue
                seen.append(line)
                if text in line:
                    return line
        finally:
            timer.cancel()
        raise AssertionError(f"no log line with {text!r} within {timeout_s} s; saw {seen[-20:]!r}")

    @property
    def token(self) -> str:
        return (self.home / "gateway.token").read_text().strip()


def _reader(stream: Any, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def read_json_document(lines: queue.Queue[str], timeout_s: float) -> dict[str, Any]:
    """Read stdout lines until they form one JSON document (``--json`` output is indented)."""
    buffered = ""
    deadline = threading.Event()
    timer = threading.Timer(timeout_s, deadline.set)
    timer.start()
    try:
        while not deadline.is_set():
            try:
                buffered += lines.get(timeout=0.1)
            except queue.Empty:
                continue
            try:
                return json.loads(buffered)
            except json.JSONDecodeError:
                continue
    finally:
        timer.cancel()
    raise AssertionError(f"no JSON document on stdout within {timeout_s} s; got {buffered!r}")


@contextmanager
def pincer_serve(home: Path, *args: str, fixtures: bool = False, pincer: Path = PINCER_BIN) -> Iterator[ServerProcess]:
    """``pincer serve --port 0 --json ARGS`` under ``home`` (with the conformance fixtures when
    ``fixtures``; ``pincer``: the executable, another venv's); stopped with SIGINT at the end."""
    env = {**os.environ, "PINCER_HOME": str(home)}
    argv = ("serve", "--port", "0", "--json", *args)
    process = subprocess.Popen(
        pincer_command(*argv, fixtures=True) if fixtures else [str(pincer), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    errors: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_reader, args=(process.stdout, lines), daemon=True)
    reader.start()
    # stderr is drained as it comes, so a chatty server never blocks on a full pipe.
    error_reader = threading.Thread(target=_reader, args=(process.stderr, errors), daemon=True)
    error_reader.start()
    try:
        try:
            info = read_json_document(lines, SERVER_START_TIMEOUT_S)
        except AssertionError:
            process.kill()
            process.wait(timeout=SERVER_STOP_TIMEOUT_S)
            error_reader.join(timeout=SERVER_STOP_TIMEOUT_S)
            raise AssertionError(f"pincer serve did not start: {''.join(errors.queue)}") from None
        yield ServerProcess(process=process, info=info, home=home, stderr_lines=errors)
    finally:
        interrupt(process)
        reap(process, (reader, error_reader), SERVER_STOP_TIMEOUT_S)
