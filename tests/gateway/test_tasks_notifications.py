"""``notifications/tasks`` on ``subscriptions/listen`` streams (2026-07-28, the Tasks extension)
against a real gateway on 127.0.0.1:0, in raw JSON-RPC over streamable HTTP (the SDK's listen
driver has no ``taskIds``): a stream that names its session's tasks is told each change, as
``tasks/get`` would show it, however and wherever the change was made; nobody else is."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from pincer.gateway.tokens import token_digest
from pincer.store.sql.migrate import upgrade_postgres
from tests.backends import postgres_server
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.gateway.test_tasks import WAIT_S, Requester, _approval_of, _headers, _meta
from tests.gateway.test_tasks_status import within

pytestmark = pytest.mark.anyio

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
# What @modelcontextprotocol/ext-tasks' TaskStatusNotificationV2Schema requires of every status,
# and of each status besides (DetailedTaskV2Schema).
BASE_KEYS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"}
STATUS_KEYS = {"input_required": "inputRequests", "completed": "result", "failed": "error"}


class Stream:
    """One open ``subscriptions/listen`` stream: its acknowledgement, then its frames."""

    def __init__(self, ack: dict[str, Any], frames: anyio.abc.ObjectReceiveStream[dict[str, Any]]) -> None:
        self.ack = ack
        self._frames = frames
        self.received: list[dict[str, Any]] = []  # the whole frames, as they came

    async def next_task(self) -> dict[str, Any]:
        """The next ``notifications/tasks`` params (any other frame fails the test)."""
        with anyio.fail_after(WAIT_S):
            frame = await self._frames.receive()
        self.received.append(frame)
        assert frame["method"] == "notifications/tasks", frame
        params: dict[str, Any] = frame["params"]
        return params

    async def until(self, task_id: str, status: str) -> list[dict[str, Any]]:
        """Every notification up to and including ``task_id`` reaching ``status``."""
        seen: list[dict[str, Any]] = []
        while not seen or (seen[-1]["taskId"], seen[-1]["status"]) != (task_id, status):
            seen.append(await self.next_task())
        return seen


@asynccontextmanager
async def listening(live: LiveGateway, notifications: Mapping[str, Any], *, token: str | None = None) -> AsyncIterator[Stream]:
    body = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"notifications": dict(notifications), "_meta": _meta()},
    }
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](100)
    async with send, receive, httpx.AsyncClient(base_url=live.info.url, trust_env=False, timeout=WAIT_S) as http:
        headers = _headers("subscriptions/listen", "", token or live.token)
        async with http.stream("POST", "/mcp", headers=headers, content=json.dumps(body)) as response:
            assert response.status_code == 200, await response.aread()

            async def read() -> None:
                async for line in response.aiter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        await send.send(json.loads(line[5:]))

            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                with anyio.fail_after(WAIT_S):
                    ack = await receive.receive()
                assert ack["method"] == "notifications/subscriptions/acknowledged", ack
                yield Stream(ack["params"], receive)
                tg.cancel_scope.cancel()


def _agent(config: str = "") -> tuple[str, str]:
    token = secrets.token_urlsafe(24)
    text = f'[[gateway.tokens]]\nsha256 = "{token_digest(token)}"\nsession = "agent"\n'
    return token, config + text + '[sessions.agent]\nallow = ["write_note", "say"]\n'


def _check_shape(note: Mapping[str, Any]) -> None:
    assert set(note) >= BASE_KEYS, note
    assert note["_meta"] == {SUBSCRIPTION_ID: "listen-1"}
    extra = STATUS_KEYS.get(note["status"])
    assert extra is None or extra in note, note


async def test_a_stream_is_told_each_change_of_its_task_as_tasks_get_shows_it(pincer_home: Path, store: str) -> None:
    async with live_gateway(pincer_home, config=store) as live:
        client = Requester(live)
        created = (await client.call("write_note", {"text": "notify me"}))["result"]
        task_id = created["taskId"]
        async with listening(live, {"taskIds": [task_id], "toolsListChanged": True}) as stream:
            assert stream.ack["notifications"] == {"taskIds": [task_id], "toolsListChanged": True}
            assert stream.ack["_meta"] == {SUBSCRIPTION_ID: "listen-1"}
            # Its state when the stream opened: nothing that happened before is missed.
            waiting = await stream.next_task()
            _check_shape(waiting)
            assert waiting["taskId"] == task_id and waiting["status"] == "input_required"
            assert waiting["inputRequests"]  # a main session is asked, as tasks/get asks it
            # A person answers from elsewhere (the CLI's path): the stream follows to the end.
            await live.pincer.dispatcher.answer(await _approval_of(live, created), "allow_once", by="cli")
            seen = await stream.until(task_id, "completed")
        for note in seen:
            _check_shape(note)
        assert {note["status"] for note in seen} <= {"working", "completed"}
        done = seen[-1]
        polled = (await client.get(task_id))["result"]
        # Exactly the task tasks/get returns, but for the envelope.
        assert {k: v for k, v in done.items() if k != "_meta"} == {k: v for k, v in polled.items() if k not in ("resultType", "_meta")}
        assert json.loads(done["result"]["content"][0]["text"]) == {"written": "notify me"}


async def test_a_change_made_on_another_gateway_reaches_the_stream(pincer_home: Path) -> None:
    # Two gateways on one PostgreSQL (one home, so one token: the same session on both). The
    # stream is on the second; the task is made and cancelled on the first, so the second hears
    # of it only through the store's LISTEN/NOTIFY.
    url = postgres_server().new_database()
    upgrade_postgres(url)
    config = f'[store]\nurl = "{url}"\n'
    async with live_gateway(pincer_home, config=config) as first, live_gateway(pincer_home, config=config) as second:
        client = Requester(first)
        created = (await client.call("write_note", {"text": "far"}))["result"]
        async with listening(second, {"taskIds": [created["taskId"]]}) as stream:
            assert stream.ack["notifications"] == {"taskIds": [created["taskId"]]}
            assert (await stream.next_task())["status"] == "input_required"
            assert (await client.cancel(created["taskId"]))["result"]["resultType"] == "complete"
            seen = await stream.until(created["taskId"], "cancelled")
    # One notification of the change: the cancel's request and its end are one status change.
    assert [note["status"] for note in seen] == ["cancelled"]
    cancelled = seen[-1]
    _check_shape(cancelled)
    assert cancelled["taskId"] == created["taskId"] and cancelled["status"] == "cancelled"


REPO = Path(__file__).resolve().parents[2]
EXT_TASKS = REPO / ".cache" / "npm-ext-tasks" / "node_modules"
NODE = REPO / ".cache" / "npm" / "node_modules" / ".bin" / "node"
NODE_TIMEOUT_S = 60.0


@pytest.mark.skipif(
    not (EXT_TASKS / "@modelcontextprotocol" / "ext-tasks").is_dir() or not NODE.exists(),
    reason="`make mcp-deps` installs @modelcontextprotocol/ext-tasks and Node 22",
)
async def test_the_official_tasks_package_parses_every_frame(pincer_home: Path, tmp_path: Path) -> None:
    async with live_gateway(pincer_home) as live:
        client = Requester(live)
        denied = (await client.call("write_note", {"text": "denied"}))["result"]
        allowed = (await client.call("write_note", {"text": "allowed"}))["result"]
        async with listening(live, {"taskIds": [denied["taskId"], allowed["taskId"]]}) as stream:
            await stream.next_task()
            await stream.next_task()
            await live.pincer.dispatcher.answer(await _approval_of(live, denied), "deny", by="cli")
            await stream.until(denied["taskId"], "completed")
            await live.pincer.dispatcher.answer(await _approval_of(live, allowed), "allow_once", by="cli")
            await stream.until(allowed["taskId"], "completed")
    # ESM resolves packages from the script's place: the script beside a node_modules holding them.
    place = tmp_path / "checker"
    place.mkdir()
    (place / "node_modules").symlink_to(EXT_TASKS)
    shutil.copy(Path(__file__).with_name("tasks_requester") / "notifications.mjs", place / "notifications.mjs")
    checked = subprocess.run(
        [str(NODE), str(place / "notifications.mjs")], input=json.dumps({"ack": stream.ack, "frames": stream.received}),
        capture_output=True, text=True, timeout=NODE_TIMEOUT_S,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    verdict = json.loads(checked.stdout)
    assert verdict["accepted"] == [denied["taskId"], allowed["taskId"]]
    assert all(frame["ok"] for frame in verdict["frames"]), verdict["frames"]
    assert {frame["status"] for frame in verdict["frames"]} >= {"input_required", "completed"}


# -- attacks ---------------------------------------------------------------------------------


async def test_another_session_never_hears_of_my_task(pincer_home: Path, store: str) -> None:
    agent_token, config = _agent(store)
    async with live_gateway(pincer_home, config=config) as live:
        mine = (await Requester(live).call("write_note", {"text": "mine"}))["result"]
        agent = Requester(live, agent_token)
        theirs = (await agent.call("write_note", {"text": "theirs"}))["result"]
        # The agent names my task and its own: only its own is accepted (mine is answered as an
        # unknown id would be), and a change of mine never reaches its stream.
        names = [mine["taskId"], theirs["taskId"], "no-such-task"]
        async with listening(live, {"taskIds": names}, token=agent_token) as stream:
            assert stream.ack["notifications"] == {"taskIds": [theirs["taskId"]]}
            assert (await stream.next_task())["taskId"] == theirs["taskId"]
            await live.pincer.dispatcher.answer(await _approval_of(live, mine), "allow_once", by="cli")
            assert (await Requester(live).until(mine["taskId"], "completed"))["status"] == "completed"
            # The store's notifications are handed on in order: once the agent's own later
            # change arrives, any notification of mine would have come before it.
            assert (await agent.cancel(theirs["taskId"]))["result"]["resultType"] == "complete"
            seen = await stream.until(theirs["taskId"], "cancelled")
        assert {note["taskId"] for note in seen} == {theirs["taskId"]}, seen
        # A non-main session is not asked to approve its own call, on the stream as on tasks/get.
        assert all(not note.get("inputRequests") for note in seen)


async def test_a_notification_carries_no_argument_value_and_no_secret(pincer_home: Path, store: str) -> None:
    async with live_gateway(pincer_home, config=store) as live:
        secret = "sk-" + secrets.token_hex(20)
        live.pincer.secrets.set("notify_key", secret)
        marker = "argument-" + secrets.token_hex(8)
        client = Requester(live)
        created = (await client.call("write_note", {"text": f"{marker} {secret}"}))["result"]
        async with listening(live, {"taskIds": [created["taskId"]]}) as stream:
            waiting = await stream.next_task()
            await live.pincer.dispatcher.answer(await _approval_of(live, created), "allow_once", by="cli")
            seen = [waiting, *await stream.until(created["taskId"], "completed")]
        for note in seen:
            text = json.dumps(note)
            assert secret not in text, note
            assert "args" not in note and "arguments" not in note
            if note["status"] != "completed":  # the status and its message, never the call's arguments
                assert marker not in text, note
        # The completed one carries the result, the leak-scanned one tasks/get returns: the
        # secret the tool echoed is redacted there as on every other path.
        assert marker in json.dumps(seen[-1]["result"])


@pytest.mark.parametrize(
    "task_ids",
    [
        "one-id",
        [1, 2],
        [""],
        ["x" * 129],
        [f"id-{n}" for n in range(257)],
    ],
)
async def test_malformed_task_ids_are_invalid_params_before_any_stream(gateway: LiveGateway, task_ids: Any) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": task_ids}, "_meta": _meta()},
    }
    # Bounded: a server that took the ids would answer with a stream that never ends.
    with anyio.fail_after(WAIT_S):
        async with gateway.http() as http:
            response = await http.post(
                "/mcp", headers=_headers("subscriptions/listen", "", gateway.token), content=json.dumps(body)
            )
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip()][-1]
    answer = json.loads(text)
    assert answer["error"]["code"] == -32602, answer
    assert "taskIds" in answer["error"]["message"]


async def test_a_change_made_while_a_stream_opens_reaches_it(
    pincer_home: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second stream is held after it read its task's row and before it follows the task;
    # the task is cancelled then, and the first stream (already following) proves the gateway
    # has handed that change on. The second stream must still end up told `cancelled`.
    from pincer.gateway.tasks import TaskReceiver

    held, go_on = anyio.Event(), anyio.Event()
    reads = 0
    watchable = TaskReceiver.watchable

    async def spied(self: TaskReceiver, session: Any, task_ids: Any) -> Any:
        nonlocal reads
        rows = await watchable(self, session, task_ids)
        reads += 1
        if reads == 2:
            held.set()
            await go_on.wait()
        return rows

    monkeypatch.setattr(TaskReceiver, "watchable", spied)
    seen: list[dict[str, Any]] = []
    async with live_gateway(pincer_home, config=store) as live:
        client = Requester(live)
        task_id = (await client.call("write_note", {"text": "raced"}))["result"]["taskId"]
        async with listening(live, {"taskIds": [task_id]}) as first, anyio.create_task_group() as tg:
            assert (await first.next_task())["status"] == "input_required"

            async def second_stream() -> None:
                async with listening(live, {"taskIds": [task_id]}) as second:
                    with within("the second stream to be told the task was cancelled"):
                        seen.extend(await second.until(task_id, "cancelled"))

            tg.start_soon(second_stream)
            with within("the second stream to read its task"):
                await held.wait()
            assert (await client.cancel(task_id))["result"]["resultType"] == "complete"
            with within("the first stream to be told of the cancel"):
                await first.until(task_id, "cancelled")
            go_on.set()
    assert seen[-1]["status"] == "cancelled"
