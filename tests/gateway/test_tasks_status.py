"""``notifications/tasks/status`` and the wait of ``tasks/result`` in the handshake era
(2025-11-25) against a real gateway on 127.0.0.1:0, with the official SDK's ``ClientSession``
over streamable HTTP: the SDK receives the notification through a ``NotificationBinding`` (its
2025-11-25 surface has the type but leaves it out of the core tables), and sends every request but
the task-augmented ``tools/call`` (whose ``CreateTaskResult`` its surface refuses), which is raw
JSON-RPC on the same MCP session.

Before: no status notification was ever sent (a client learnt a task waited for a person only by
polling ``tasks/get``), and a blocked ``tasks/result`` read its task's row every 0.2 s whatever
happened instead of waking at the store's change notification.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pincer.gateway import handshake_tasks, task_status
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.gateway.test_tasks_handshake import WAIT_S, RawSession, _agent_config, _approval_of, _calls, _text

pytestmark = pytest.mark.anyio

STATUS = "notifications/tasks/status"
# The raw requests' JSON-RPC ids, far from the SDK client's own on the same MCP session.
RAW_IDS_FROM = 1_000_000


class StatusClient:
    """One MCP session: the SDK's ``ClientSession`` (which keeps the GET stream that status
    notifications ride) and a raw view of the same session for the task-augmented call."""

    def __init__(self, sdk: ClientSession, raw: RawSession, statuses: anyio.abc.ObjectReceiveStream[Any]) -> None:
        self.sdk = sdk
        self.raw = raw
        self._statuses = statuses
        self.seen: list[types.TaskStatusNotificationParams] = []

    async def call_as_task(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        answer = await self.raw.call_as_task(tool, arguments)
        task: dict[str, Any] = answer["result"]["task"]
        return task

    async def told(self, task_id: str, status: str) -> list[types.TaskStatusNotificationParams]:
        """Every status notification up to and including ``task_id`` reaching ``status``."""
        told: list[types.TaskStatusNotificationParams] = []
        try:
            with within(f"a status notification of task {task_id} saying {status}"):
                while not told or (told[-1].task_id, told[-1].status) != (task_id, status):
                    told.append(await self._statuses.receive())
        finally:
            self.seen += told
        return told

    async def get(self, task_id: str) -> types.GetTaskResult:
        request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
        return await self.sdk.send_request(request, types.GetTaskResult)

    async def result(self, task_id: str) -> types.CallToolResult:
        request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
        return await self.sdk.send_request(request, types.CallToolResult)


@contextmanager
def within(what: str) -> Iterator[None]:
    """A bounded wait that says what it waited for when it runs out."""
    try:
        with anyio.fail_after(WAIT_S):
            yield
    except TimeoutError:
        raise AssertionError(f"waited {WAIT_S} s for {what}") from None


@asynccontextmanager
async def status_client(
    live: LiveGateway, token: str | None = None, *, timeout_s: float | None = None
) -> AsyncIterator[StatusClient]:
    """``timeout_s``: how long the HTTP client waits for a byte (httpx's 5 s if None), for a
    request that may block longer (a tasks/result waiting on another process)."""
    token = token or live.token
    session_id: list[str] = []
    get_stream = anyio.Event()

    async def on_response(response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers and not session_id:
            session_id.append(response.headers["mcp-session-id"])
        if response.request.method == "GET" and response.status_code == 200:
            get_stream.set()

    send, receive = anyio.create_memory_object_stream[types.TaskStatusNotificationParams](100)

    async def told(params: types.TaskStatusNotificationParams) -> None:
        await send.send(params)

    binding = NotificationBinding(method=STATUS, params_type=types.TaskStatusNotificationParams, handler=told)
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        send,
        receive,
        httpx2.AsyncClient(
            headers=headers, trust_env=False, event_hooks={"response": [on_response]},
            **({} if timeout_s is None else {"timeout": timeout_s}),
        ) as http,
        streamable_http_client(live.info.mcp_url, http_client=http) as (read, write),
        ClientSession(read, write, notification_bindings=[binding]) as sdk,
    ):
        await sdk.initialize()
        # A notification sent before the session's GET stream is open is dropped (the SDK's
        # server keeps none for a stream nobody holds): the calls start once it is.
        with within("the session's GET stream to open"):
            await get_stream.wait()
        async with httpx.AsyncClient(base_url=live.info.url, trust_env=False, timeout=WAIT_S) as raw_http:
            raw = RawSession(live, token, raw_http)
            raw.session_id = session_id[0]
            raw._ids = RAW_IDS_FROM  # the test helper shares the SDK client's session
            yield StatusClient(sdk, raw, receive)


def _sans_meta(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    data.pop("_meta", None)
    return data


async def test_a_waiting_tasks_changes_are_told_to_the_connection_that_made_it_only(
    pincer_home: Path, store: str
) -> None:
    async with live_gateway(pincer_home, config=store) as live:
        async with status_client(live) as one, status_client(live) as two:
            created = await one.call_as_task("write_note", {"text": "secret-looking words"})
            task_id = created["taskId"]
            waiting = await one.told(task_id, "input_required")
            approval_id = await _approval_of(live, task_id)
            async with live.http(headers=live.headers) as rest:  # a person answers, over REST
                answer = await rest.post(f"/api/v1/approvals/{approval_id}", json={"decision": "allow_once"})
            assert answer.status_code == 200, answer.text
            done = await one.told(task_id, "completed")
            polled = await one.get(task_id)
            # The second connection's own task: its notification proves that connection's GET
            # stream delivers, and the gateway sends in order, so a notification of the first
            # connection's task sent to it would have arrived before this one.
            theirs = await two.call_as_task("say", {"text": "two"})
            await two.told(theirs["taskId"], "completed")
            records = await _calls(live, "write_note")
    assert created["status"] == "working"
    assert [n.status for n in waiting] == ["input_required"] and [n.task_id for n in waiting] == [task_id]
    assert approval_id in (waiting[0].status_message or "")
    # "working" in between when the notification was read before the call had ended.
    assert [n.status for n in done if n.status != "working"] == ["completed"]
    assert _sans_meta(done[-1]) == _sans_meta(polled)  # the task as tasks/get shows it
    assert {n.task_id for n in two.seen} == {theirs["taskId"]}
    # Never the call's arguments or result.
    assert "secret-looking" not in json.dumps([_sans_meta(n) for n in one.seen])
    assert [r.outcome for r in records] == ["pending", "ok"]


async def test_a_failed_task_and_a_cancelled_one_are_told(pincer_home: Path) -> None:
    async with live_gateway(pincer_home) as live, status_client(live) as client:
        denied = await client.call_as_task("write_note", {"text": "no"})
        await client.told(denied["taskId"], "input_required")
        approval_id = await _approval_of(live, denied["taskId"])
        await live.pincer.dispatcher.answer(approval_id, "deny", by="cli")
        failed = await client.told(denied["taskId"], "failed")
        waiting = await client.call_as_task("write_note", {"text": "never"})
        await client.told(waiting["taskId"], "input_required")
        cancel = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=waiting["taskId"]))
        cancelled = await client.sdk.send_request(cancel, types.CancelTaskResult)
        told = await client.told(waiting["taskId"], "cancelled")
    assert failed[-1].status == "failed" and cancelled.status == "cancelled"
    assert [n.status for n in told] == ["cancelled"]


async def test_tasks_result_wakes_at_the_store_notification_of_the_approval(
    pincer_home: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only a change notification can wake a blocked tasks/result now: its fallback look is an hour off.
    monkeypatch.setattr(handshake_tasks, "RESULT_FALLBACK_S", 3600.0)
    waiting = anyio.Event()
    wait = task_status.Wake.wait

    async def spied(self: task_status.Wake, timeout_s: float) -> None:
        waiting.set()  # tasks/result looked at its task and found it unfinished
        await wait(self, timeout_s)

    monkeypatch.setattr(task_status.Wake, "wait", spied)
    agent_token, config = _agent_config()  # a session nobody asks: a person answers
    async with live_gateway(pincer_home, config=store + config) as live:
        async with status_client(live, agent_token) as agent:
            created = await agent.call_as_task("write_note", {"text": "later"})
            await agent.told(created["taskId"], "input_required")
            approval_id = await _approval_of(live, created["taskId"])
            results: list[types.CallToolResult] = []
            answered = anyio.Event()

            async def take() -> None:
                results.append(await agent.result(created["taskId"]))
                answered.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(take)
                with within("tasks/result to block on the unfinished task"):
                    await waiting.wait()
                await live.pincer.dispatcher.answer(approval_id, "allow_once", by="cli")
                with within("tasks/result to answer after the approval"):
                    await answered.wait()
    assert json.loads(_text(results[0].model_dump(by_alias=True))) == {"written": "later"}


async def test_a_task_whose_connection_is_gone_keeps_the_others_told(pincer_home: Path) -> None:
    async with live_gateway(pincer_home) as live:
        async with status_client(live) as gone:
            created = await gone.call_as_task("write_note", {"text": "orphan"})
            await gone.told(created["taskId"], "input_required")
        # The session is closed (the SDK deletes it); the person answers afterwards.
        await live.pincer.dispatcher.answer(await _approval_of(live, created["taskId"]), "allow_once", by="cli")
        with within(f"task {created['taskId']} to complete with nobody to tell"):
            while (row := await live.pincer.tasks.get(created["taskId"])) is None or not row.terminal:
                await anyio.sleep(0.05)
        async with status_client(live) as still:
            theirs = await still.call_as_task("say", {"text": "still told"})
            told = await still.told(theirs["taskId"], "completed")
    assert row.status.value == "completed"
    assert {n.task_id for n in told} == {theirs["taskId"]}
