"""Real Pincers for the trigger tests: a store under tmp_path, the recording starter standing in
for the agent loop, a manual clock for the scheduler, a real gateway on 127.0.0.1:0."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx

from pincer.config import parse_config
from pincer.gateway.serve import ServeInfo, serve
from pincer.service import Pincer
from pincer.triggers.clock import ManualClock
from pincer.triggers.engine import TriggerEngine
from pincer.triggers.requests import RunStarter
from tests.triggers.recording import RecordingStarter

SECRET_KEY = b"t" * 32
AUDIT_KEY = b"a" * 32
SERVER_START_TIMEOUT_S = 120.0  # a loaded 2-core machine starts a gateway in ~1-2 s idle, 30+ s at load 15
SERVER_STOP_TIMEOUT_S = 15.0


def utc(*args: int) -> float:
    return dt.datetime(*args, tzinfo=dt.UTC).timestamp()


def write_skill(root: Path, name: str, frontmatter: str, body: str = "Do the thing.\n") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} skill\n{frontmatter}---\n{body}")
    return folder


@asynccontextmanager
async def open_pincer(
    home: Path, config: str = "", *, builtins: bool = False, run_starter: RunStarter | None = None
) -> AsyncIterator[Pincer]:
    parsed = parse_config(config, home=home)
    async with Pincer.open(
        home, config=parsed, secret_key=SECRET_KEY, audit_key=AUDIT_KEY, builtins=builtins, external=False,
        scripts=False, wasm=False, run_starter=run_starter,
    ) as pincer:  # fmt: skip
        yield pincer


@asynccontextmanager
async def running_engine(
    pincer: Pincer, starter: RecordingStarter, clock: ManualClock
) -> AsyncIterator[TriggerEngine]:
    engine = TriggerEngine.for_services(pincer.trigger_services(), starter=starter, clock=clock)
    async with anyio.create_task_group() as tg:
        await tg.start(engine.run)
        try:
            yield engine
        finally:
            tg.cancel_scope.cancel()


@dataclass
class LiveHooks:
    pincer: Pincer
    starter: Any  # a RecordingStarter, or the agent loop's (pincer.triggers.starter.AgentStarter)
    info: ServeInfo
    token: str

    def http(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.info.url, trust_env=False, timeout=30, **kwargs)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@asynccontextmanager
async def live_gateway(
    home: Path,
    *,
    config: str = "",
    starter: RecordingStarter | None = None,
    secrets: dict[str, str] | None = None,
    agent_loop: bool = False,
) -> AsyncIterator[LiveHooks]:
    """``pincer serve``'s gateway and trigger engine over a fresh Pincer, on 127.0.0.1:0. The
    recording starter stands in for the agent loop unless ``agent_loop`` (then runs are real
    runs of the loop, with the built-in tools, against the model ``config``'s [llm] names)."""
    from pincer.cli.serve import gateway_extensions

    recording = None if agent_loop else starter or RecordingStarter()
    async with open_pincer(home, config, builtins=agent_loop, run_starter=recording) as pincer:
        for name, value in (secrets or {}).items():
            pincer.secrets.set(name, value)
        ready: list[ServeInfo] = []
        started = anyio.Event()

        def on_ready(info: ServeInfo) -> None:
            ready.append(info)
            started.set()

        extensions = await gateway_extensions(pincer)
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await serve(pincer, settings=pincer.config.gateway, host="127.0.0.1", port=0, on_ready=on_ready,
                            extensions=extensions)  # fmt: skip

            tg.start_soon(run)
            with anyio.fail_after(SERVER_START_TIMEOUT_S):
                await started.wait()
            token = (home / "gateway.token").read_text().strip()
            try:
                yield LiveHooks(pincer=pincer, starter=pincer.triggers.starter, info=ready[0], token=token)
            finally:
                with anyio.move_on_after(SERVER_STOP_TIMEOUT_S):
                    tg.cancel_scope.cancel()
