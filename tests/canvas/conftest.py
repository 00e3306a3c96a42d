"""What the canvas tests share: one Chromium per module (Debian's, through Playwright), a real
``pincer serve`` with the canvas on, a model that follows a plan, and the run's events."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from pincer.demo.model_server import ReceivedRequest, ScriptedCall, Turn, serve_models
from tests.chromium import chromium
from tests.gateway.conftest import ServerProcess, pincer_serve
from tests.gateway.ui.conftest import sign_in

HTTP_TIMEOUT_S = 60.0
STEP_TIMEOUT_S = 60.0  # one step of a browser test: a page to show, a run to reach a state
POLL_S = 0.1


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@dataclass
class Plan:
    """A model that follows steps, one per turn: ("call", name, args) makes that call;
    ("until", text) calls ``canvas wait`` until ``text`` shows up in what the model was sent
    (a wait's result or a next turn's input), then goes on; ("hold",) blocks the turn until
    ``release`` is set (so an event arrives while no wait is open); the end is text."""

    steps: Sequence[tuple[Any, ...]]
    index: int = 0
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    seen: list[str] = field(default_factory=list)

    def __call__(self, request: ReceivedRequest) -> Turn:
        sent = json.dumps(request.body.get("messages", []))
        self.seen.append(sent)
        while self.index < len(self.steps):
            step = self.steps[self.index]
            if step[0] == "until":
                if step[1] in sent:
                    self.index += 1
                    continue
                return Turn(calls=(ScriptedCall(name="canvas", arguments={"action": "wait", "timeout_s": STEP_TIMEOUT_S}),))
            self.index += 1
            if step[0] == "hold":
                self.held.set()
                self.release.wait(STEP_TIMEOUT_S)
                return Turn(calls=(ScriptedCall(name="canvas", arguments={"action": "present"}),))
            return Turn(calls=(ScriptedCall(name=step[1], arguments=step[2]),))
        return Turn(text="done")


@dataclass
class CanvasServer:
    server: ServerProcess
    client: httpx.Client  # the REST API, with the bearer token
    ui: httpx.Client  # the pages, signed in to the dashboard (a session cookie)

    @property
    def url(self) -> str:
        return str(self.server.info["url"])

    @property
    def token(self) -> str:
        return self.server.token

    def start_run(self, message: str = "draw") -> str:
        started = self.client.post("/api/v1/runs", json={"message": message})
        assert started.status_code == 202, started.text
        return str(started.json()["run_id"])

    def state(self, session: str = "main") -> dict[str, Any]:
        answer = self.ui.get(f"/ui/canvas/{session}/state", params={"after": -1})
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def wait_for_state(self, check: Callable[[dict[str, Any]], bool], session: str = "main") -> dict[str, Any]:
        import time

        deadline = time.monotonic() + STEP_TIMEOUT_S
        while time.monotonic() < deadline:
            state = self.state(session)
            if check(state):
                return state
            time.sleep(POLL_S)
        raise AssertionError(f"the canvas never got there; last state {state}")

    def finished_run(self, run_id: str) -> dict[str, Any]:
        import time

        deadline = time.monotonic() + STEP_TIMEOUT_S
        while time.monotonic() < deadline:
            run = self.client.get(f"/api/v1/runs/{run_id}").json()
            if run["status"] != "running":
                return dict(run)
            time.sleep(POLL_S)
        raise AssertionError(f"run {run_id} did not end")

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """Every event of the run, read to its end over ``GET /api/v1/runs/{id}/events``."""
        events: list[dict[str, Any]] = []
        with self.client.stream("GET", f"/api/v1/runs/{run_id}/events") as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
        return events


@contextmanager
def canvas_server(
    home: Path, plan: Callable[[ReceivedRequest], Turn], *, extra_config: str = "", gateway_config: str = ""
) -> Iterator[CanvasServer]:
    """``pincer serve`` with ``[gateway] canvas = true`` (and ``gateway_config``'s keys) and the
    plan (a :class:`Plan`, or any responder) as its model."""
    with serve_models(plan) as models:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'[gateway]\ncanvas = true\n{gateway_config}\n[llm]\nmodel = "scripted-model"\nbase_url = "{models.openai_url}"\n\n'
            f"[approvals]\ntimeout_s = 30\n{extra_config}"
        )
        with pincer_serve(home) as server:
            headers = {"Authorization": f"Bearer {server.token}"}
            url = server.info["url"]
            with httpx.Client(base_url=url, headers=headers, trust_env=False, timeout=HTTP_TIMEOUT_S) as client, \
                    httpx.Client(base_url=url, trust_env=False, timeout=HTTP_TIMEOUT_S) as ui:  # fmt: skip
                assert sign_in(ui, server.token).status_code == 303
                yield CanvasServer(server=server, client=client, ui=ui)
