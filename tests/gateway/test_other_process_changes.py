"""A change made by ANOTHER process on a SQLite home reaches the gateway at once: an approval
answered by ``pincer approvals approve`` and a task cancelled by ``pincer tasks cancel``, each a
process of its own, while the gateway (``serve`` on 127.0.0.1:0 in the test's process, over the
home's pincer.db) holds a blocked ``tasks/result``, a ``notifications/tasks/status`` sender, a
``subscriptions/listen`` stream, a running task's call, a plain ``tools/call`` waiting for its
approval and the dashboard's live approvals stream.

Every fallback look that could find such a change by reading again is an hour off here
(``RESULT_FALLBACK_S``, the task sweep's ``SWEEP_INTERVAL_S``, ``APPROVAL_POLL_INTERVAL_S``, the
dashboard stream's ``APPROVALS_QUIET_S``), so only the store's notification of the other
process's commit can end these waits.

Before: the SQLite driver's notifications were an in-process signal, so each of these waits
ended only at its fallback look (here: never, the test fails at its bound).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from pincer.gateway import handshake_tasks, task_status, tasks
from pincer.gateway.ui import approvals as approvals_page
from pincer.store import approvals
from pincer.store.approvals import APPROVAL_CHANNEL
from pincer.store.tasks import TaskStatus
from tests.gateway.conformance.fixtures.runtime import FixtureRuntime
from tests.gateway.conftest import SECRET_KEY, LiveGateway, live_gateway
from tests.gateway.test_tasks import Requester
from tests.gateway.test_tasks import _approval_of as _approval_of_task
from tests.gateway.test_tasks_handshake import _agent_config, _approval_of, _text
from tests.gateway.test_tasks_notifications import listening
from tests.gateway.test_tasks_status import status_client, within
from tests.gateway.test_tasks_status_across import Slow
from tests.gateway.ui.conftest import csrf_of, dashboard_config

pytestmark = pytest.mark.anyio

AN_HOUR_S = 3600.0
CLI_TIMEOUT_S = 120.0  # a loaded machine starts a Python process slowly; the CLI opens the home


@pytest.fixture
def no_fallback_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a notification can wake a wait: every look made without one is an hour off."""
    monkeypatch.setattr(handshake_tasks, "RESULT_FALLBACK_S", AN_HOUR_S)
    monkeypatch.setattr(tasks, "SWEEP_INTERVAL_S", AN_HOUR_S)
    monkeypatch.setattr(approvals, "APPROVAL_POLL_INTERVAL_S", AN_HOUR_S)
    monkeypatch.setattr(approvals_page, "APPROVALS_QUIET_S", AN_HOUR_S)


async def _cli(home: Path, *argv: str) -> str:
    """``pincer ARGV`` as a process of its own on ``home``; its stdout (it must succeed)."""
    # The gateway's Pincer was opened with the tests' secret key: the CLI opens the same stores.
    env = {**os.environ, "PINCER_HOME": str(home), "PINCER_SECRET_KEY": SECRET_KEY.hex()}
    try:
        with anyio.fail_after(CLI_TIMEOUT_S):
            done = await anyio.run_process([sys.executable, "-m", "pincer.cli", *argv], env=env, check=False)
    except TimeoutError:
        raise AssertionError(f"waited {CLI_TIMEOUT_S} s for `pincer {' '.join(argv)}` to exit") from None
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


async def test_an_approval_answered_by_another_process_completes_the_task_and_tells_its_client(
    pincer_home: Path, no_fallback_looks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = anyio.Event()
    wait = task_status.Wake.wait

    async def spied(self: task_status.Wake, timeout_s: float) -> None:
        blocked.set()  # tasks/result looked at its task and found it unfinished
        await wait(self, timeout_s)

    monkeypatch.setattr(task_status.Wake, "wait", spied)
    agent_token, config = _agent_config()  # a session nobody asks: a person answers
    async with (
        live_gateway(pincer_home, config=config) as live,
        status_client(live, agent_token, timeout_s=CLI_TIMEOUT_S) as agent,
    ):
        created = await agent.call_as_task("write_note", {"text": "from afar"})
        task_id = created["taskId"]
        await agent.told(task_id, "input_required")
        approval_id = await _approval_of(live, task_id)
        results: list[types.CallToolResult | Exception] = []
        answered = anyio.Event()

        async def take() -> None:
            try:
                results.append(await agent.result(task_id))
            except Exception as exc:  # the client gave up waiting: said below
                results.append(exc)
            answered.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(take)
            with within("tasks/result to block on the unfinished task"):
                await blocked.wait()
            await _cli(pincer_home, "approvals", "approve", approval_id)
            told = await agent.told(task_id, "completed")
            with within("tasks/result to answer after the approval made by another process"):
                await answered.wait()
    assert [n.status for n in told if n.status != "working"] == ["completed"]
    (result,) = results
    assert not isinstance(result, Exception), f"tasks/result failed waiting for the approval: {result!r}"
    assert json.loads(_text(result.model_dump(by_alias=True))) == {"written": "from afar"}


async def test_a_task_cancelled_by_another_process_reaches_a_listen_stream(
    pincer_home: Path, no_fallback_looks: None
) -> None:
    async with live_gateway(pincer_home) as live:
        client = Requester(live)
        created = (await client.call("write_note", {"text": "never"}))["result"]
        task_id = created["taskId"]
        async with listening(live, {"taskIds": [task_id]}) as stream:
            assert (await stream.next_task())["status"] == "input_required"
            shown = json.loads(await _cli(pincer_home, "tasks", "cancel", task_id, "--json"))
            with within(f"the stream to be told task {task_id} was cancelled by another process"):
                seen = await stream.until(task_id, "cancelled")
    assert shown["status"] == "cancelled"
    assert [note["status"] for note in seen] == ["cancelled"]


async def test_a_running_task_cancelled_by_another_process_stops_its_tool(
    pincer_home: Path, no_fallback_looks: None
) -> None:
    slow = Slow()
    async with live_gateway(pincer_home, config="[tasks]\nafter_s = 0.05\n") as live:
        await live.pincer.add_runtime(FixtureRuntime([slow.tool()]))
        client = Requester(live)
        created = (await client.call("slow", {}))["result"]
        assert created["status"] == "working"
        with within("the tool to start"):
            await slow.started.wait()
        # The CLI only marks a running task; the gateway running it sees the mark and stops it.
        await _cli(pincer_home, "tasks", "cancel", created["taskId"])
        with within("the tool to be cancelled after `pincer tasks cancel` in another process"):
            await slow.stopped.wait()
        done = await _until(live, created["taskId"])
    assert done is TaskStatus.CANCELLED


async def test_a_plain_call_waiting_for_its_approval_hears_another_processes_answer(
    gateway: LiveGateway, pincer_home: Path, no_fallback_looks: None
) -> None:
    # Over REST (the same wait as an MCP tools/call), with a client that waits as long as the test.
    answers: list[Any] = []
    async with gateway.http(headers=gateway.headers, timeout=CLI_TIMEOUT_S) as http, anyio.create_task_group() as tg:

        async def call() -> None:
            answers.append(await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "plain"}}))

        tg.start_soon(call)
        with within("the call's approval to be asked"):
            while not (pending := await gateway.pincer.approvals.list_pending()):
                await anyio.sleep(0.05)
        await _cli(pincer_home, "approvals", "approve", pending[0].id)
        with within("the waiting call to answer after another process approved it"):
            while not answers:
                await anyio.sleep(0.05)
    assert answers[0].status_code == 200, answers[0].text
    assert answers[0].json()["ok"] is True


async def test_a_waiting_task_moves_on_at_an_answer_from_another_process(
    pincer_home: Path, no_fallback_looks: None
) -> None:
    # The 2026-07-28 path: the gateway takes the answered task and runs it, nobody polling.
    async with live_gateway(pincer_home) as live:
        client = Requester(live)
        created = (await client.call("write_note", {"text": "moved"}))["result"]
        await _cli(pincer_home, "approvals", "approve", await _approval_of_task(live, created))
        done = await _until(live, created["taskId"])
    assert done is TaskStatus.COMPLETED


async def test_the_dashboards_live_approvals_hear_another_processes_answer(
    pincer_home: Path, no_fallback_looks: None
) -> None:
    async with live_gateway(pincer_home, config=dashboard_config()) as live, live.http() as http:
        form = await http.get("/ui/login")
        signed = await http.post("/ui/login", data={"token": live.token, "csrf_token": csrf_of(form.text)})
        assert signed.status_code in (302, 303), signed.text
        # Requests that wait without holding a connection: tasks waiting for their approvals.
        first = (await Requester(live).call("write_note", {"text": "first"}))["result"]
        approval_id = await _approval_of_task(live, first)
        async with http.stream("GET", "/ui/approvals/events") as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()

            async def event(what: str) -> None:
                with within(what):
                    async for line in lines:
                        if line == "event: approvals":
                            return

            # One notice made here (a main session's page hears every one) says the stream
            # follows: its first reading of the open requests is done.
            await live.pincer.db.notify(APPROVAL_CHANNEL, approval_id)
            await event("the stream to tell of a notice made in this process")
            await _cli(pincer_home, "approvals", "approve", approval_id)
            await event("the stream to tell of the first request answered by another process")


async def _until(live: LiveGateway, task_id: str) -> TaskStatus:
    """The task's status once it is terminal (read from the store, bounded)."""
    with within(f"task {task_id} to end"):
        while True:
            row = await live.pincer.tasks.get(task_id)
            if row is not None and row.terminal:
                return row.status
            await anyio.sleep(0.05)
