"""MCP Tasks (``io.modelcontextprotocol/tasks``, 2026-07-28) against a real gateway on
127.0.0.1:0, in raw JSON-RPC (the SDK has no requester side of the extension): a call that waits
for a person comes back as a task its session polls, answers and cancels; nobody else can."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from pincer.core.effects import RuntimeKind
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.gateway.tokens import token_digest
from pincer.store.approvals import ApprovalStatus
from tests.gateway.conformance.fixtures.runtime import FixtureRuntime, FixtureTool
from tests.gateway.conftest import LiveGateway, live_gateway

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
WAIT_S = 20.0
POLL_S = 0.05


def _meta(*, tasks: bool = True) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"extensions": {TASKS: {}}} if tasks else {}
    return {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


def _headers(method: str, name: str, token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
        "Mcp-Name": name,
    }


class Requester:
    """One client of the extension over plain HTTP: a fresh connection per request, as a
    client that disconnected and came back would make."""

    def __init__(self, live: LiveGateway, token: str | None = None, *, tasks: bool = True) -> None:
        self.live = live
        self.token = token or live.token
        self.tasks = tasks
        self._ids = 0

    async def rpc(self, method: str, params: Mapping[str, Any], *, name: str = "") -> dict[str, Any]:
        self._ids += 1
        body = {
            "jsonrpc": "2.0",
            "id": self._ids,
            "method": method,
            "params": {**params, "_meta": _meta(tasks=self.tasks)},
        }
        async with httpx.AsyncClient(base_url=self.live.info.url, trust_env=False) as http:
            response = await http.post("/mcp", headers=_headers(method, name, self.token), content=json.dumps(body))
        text = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            text = [line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip()][-1]
        message: dict[str, Any] = json.loads(text)
        return message

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return await self.rpc("tools/call", {"name": tool, "arguments": dict(arguments)}, name=tool)

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.rpc("tasks/get", {"taskId": task_id}, name=task_id)

    async def update(self, task_id: str, responses: Mapping[str, Any]) -> dict[str, Any]:
        return await self.rpc("tasks/update", {"taskId": task_id, "inputResponses": dict(responses)}, name=task_id)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.rpc("tasks/cancel", {"taskId": task_id}, name=task_id)

    async def until(self, task_id: str, *statuses: str) -> dict[str, Any]:
        """Poll tasks/get until the task is in one of ``statuses``."""
        seen: list[str] = []
        with anyio.move_on_after(WAIT_S):
            while True:
                result = (await self.get(task_id))["result"]
                seen.append(result["status"])
                if result["status"] in statuses:
                    return result
                await anyio.sleep(POLL_S)
        raise AssertionError(f"task {task_id} did not reach {statuses} within {WAIT_S} s; saw {seen[-5:]}")


def _agent_config() -> tuple[str, str]:
    token = secrets.token_urlsafe(24)
    config = f'[[gateway.tokens]]\nsha256 = "{token_digest(token)}"\nsession = "agent"\n'
    return token, config + '[sessions.agent]\nallow = ["write_note", "say"]\n'


async def _approval_of(live: LiveGateway, task: Mapping[str, Any]) -> str:
    row = await live.pincer.tasks.get(task["taskId"])
    assert row is not None and row.approval_id is not None
    return row.approval_id


def _text(result: Mapping[str, Any]) -> str:
    return " ".join(block.get("text", "") for block in result.get("content", ()))


# -- the receiver ----------------------------------------------------------------------------


async def test_a_call_that_needs_an_approval_is_a_task_answered_through_tasks_update(
    pincer_home: Path, store: str
) -> None:
    async with live_gateway(pincer_home, config=store) as gateway:
        await _answered_through_tasks_update(gateway)


async def _answered_through_tasks_update(gateway: LiveGateway) -> None:
    client = Requester(gateway)
    created = (await client.call("write_note", {"text": "hi"}))["result"]
    assert created["resultType"] == "task" and created["status"] == "input_required"
    assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 1_000
    # Durable before the handle left: the row is there, and a fresh connection reads it.
    waiting = await client.get(created["taskId"])
    assert waiting["result"]["resultType"] == "complete"
    ((key, question),) = waiting["result"]["inputRequests"].items()
    assert question["method"] == "elicitation/create" and "write_note" in question["params"]["message"]
    acked = await client.update(created["taskId"], {key: {"action": "accept", "content": {"decision": "allow_once"}}})
    assert acked["result"] == {"resultType": "complete", **{k: v for k, v in acked["result"].items() if k == "_meta"}}
    done = await client.until(created["taskId"], "completed", "failed")
    assert done["status"] == "completed", done
    assert json.loads(_text(done["result"])) == {"written": "hi"} and not done["result"].get("isError")
    records = [r for r in await gateway.pincer.audit.records(tool="write_note") if r.kind == "call"]
    # The ask (returned at once, "pending") and the one record of the call that ran.
    assert [r.outcome for r in records] == ["pending", "ok"]
    assert done["result"]["_meta"]["pincer/auditId"] == records[-1].id


async def test_an_answer_from_the_cli_side_moves_the_task_on(gateway: LiveGateway) -> None:
    client = Requester(gateway)
    created = (await client.call("write_note", {"text": "by a person"}))["result"]
    approval_id = await _approval_of(gateway, created)
    await gateway.pincer.dispatcher.answer(approval_id, "allow_once", by="cli")
    done = await client.until(created["taskId"], "completed", "failed")
    assert json.loads(_text(done["result"])) == {"written": "by a person"}


async def test_a_denied_approval_completes_the_task_with_the_denial(gateway: LiveGateway) -> None:
    client = Requester(gateway)
    created = (await client.call("write_note", {"text": "no"}))["result"]
    approval_id = await _approval_of(gateway, created)
    await gateway.pincer.dispatcher.answer(approval_id, "deny", by="cli")
    done = await client.until(created["taskId"], "completed", "failed")
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert done["result"]["_meta"]["pincer/error"]["code"] == "approval_denied"


async def test_a_fast_call_is_answered_directly_even_when_the_client_takes_tasks(gateway: LiveGateway) -> None:
    result = (await Requester(gateway).call("say", {"text": "now"}))["result"]
    assert result["resultType"] == "complete" and _text(result) == "now"


async def test_a_client_without_the_extension_gets_todays_answer(gateway: LiveGateway) -> None:
    # 2026-07-28 without the extension and without elicitation: no task, today's behaviour.
    client = Requester(gateway, tasks=False)
    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            answered: list[dict[str, Any]] = []

            async def call() -> None:
                answered.append(await client.call("write_note", {"text": "old way"}))

            tg.start_soon(call)
            with anyio.fail_after(WAIT_S):
                while not await gateway.pincer.approvals.list_pending():
                    await anyio.sleep(POLL_S)
            (pending,) = await gateway.pincer.approvals.list_pending()
            await gateway.pincer.dispatcher.answer(pending.id, "allow_once", by="cli")
    assert answered[0]["result"]["resultType"] == "complete"
    assert await gateway.pincer.tasks.list() == []


async def test_a_task_only_tool_refuses_a_client_without_the_extension(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config='[tasks]\nonly = ["say"]\n') as live:
        refused = await Requester(live, tasks=False).call("say", {"text": "x"})
        as_task = await Requester(live).call("say", {"text": "x"})
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert TASKS in refused["error"]["message"]
    assert as_task["result"]["resultType"] == "task"


async def test_a_long_call_becomes_a_task_after_the_threshold(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config="[tasks]\nafter_s = 0\n") as live:
        client = Requester(live)
        created = (await client.call("say", {"text": "later"}))["result"]
        assert created["resultType"] == "task"
        done = await client.until(created["taskId"], "completed", "failed")
    assert _text(done["result"]) == "later"


async def test_the_server_announces_the_extension(gateway: LiveGateway) -> None:
    discovered = await Requester(gateway).rpc("server/discover", {})
    assert discovered["result"]["capabilities"]["extensions"][TASKS] == {}


# -- attacks ---------------------------------------------------------------------------------


async def test_another_sessions_task_is_answered_as_an_unknown_one(pincer_home: Path, store: str) -> None:
    agent_token, config = _agent_config()
    async with live_gateway(pincer_home, config=store + config) as live:
        owner = Requester(live)
        created = (await owner.call("write_note", {"text": "mine"}))["result"]
        thief = Requester(live, agent_token)
        foreign = [
            await thief.get(created["taskId"]),
            await thief.update(created["taskId"], {"x": {"action": "accept"}}),
            await thief.cancel(created["taskId"]),
        ]
        unknown = await thief.get("no-such-task")
        still = (await owner.get(created["taskId"]))["result"]
    for answer in foreign:
        assert answer["error"] == unknown["error"], answer
    assert unknown["error"]["code"] == -32602 and "not found" in unknown["error"]["message"]
    assert still["status"] == "input_required"


async def test_a_non_main_sessions_task_waits_for_a_person_and_refuses_its_own_answer(
    pincer_home: Path, store: str
) -> None:
    agent_token, config = _agent_config()
    async with live_gateway(pincer_home, config=store + config) as live:
        agent = Requester(live, agent_token)
        created = (await agent.call("write_note", {"text": "agent"}))["result"]
        waiting = (await agent.get(created["taskId"]))["result"]
        assert waiting["status"] == "input_required" and waiting["inputRequests"] == {}
        approval_id = await _approval_of(live, created)
        assert f"pincer approvals approve {approval_id}" in waiting["statusMessage"]
        refused = await agent.update(
            created["taskId"], {f"approval:{approval_id}": {"action": "accept", "content": {"decision": "allow_once"}}}
        )
        assert refused["error"]["code"] == -32602 and "not a main session" in refused["error"]["message"]
        assert (await live.pincer.approvals.get(approval_id)).status is ApprovalStatus.PENDING
        await live.pincer.dispatcher.answer(approval_id, "allow_once", by="cli")
        done = await agent.until(created["taskId"], "completed", "failed")
    assert json.loads(_text(done["result"])) == {"written": "agent"}


@pytest.mark.parametrize(
    "params",
    [{}, {"taskId": 7}, {"taskId": ""}, {"taskId": "x" * 500}, {"taskId": "a", "extra": 1}, {"taskId": None}],
    ids=["missing", "number", "empty", "huge", "extra-key", "null"],
)
async def test_malformed_tasks_params_are_invalid_params(gateway: LiveGateway, params: dict[str, Any]) -> None:
    client = Requester(gateway)
    for method in ("tasks/get", "tasks/cancel"):
        answer = await client.rpc(method, params, name="x")
        # Refused as malformed, before any task is looked up.
        assert answer["error"]["code"] == -32602 and "not found" not in answer["error"]["message"], (method, answer)
    answer = await client.rpc("tasks/update", {"taskId": "x", "inputResponses": "no"}, name="x")
    assert answer["error"]["code"] == -32602 and "not found" not in answer["error"]["message"], answer


async def test_tasks_methods_refuse_a_client_without_the_extension(gateway: LiveGateway) -> None:
    answer = await Requester(gateway, tasks=False).get("whatever")
    assert answer["error"]["code"] == -32021


async def test_oversized_input_responses_are_refused_and_change_nothing(gateway: LiveGateway) -> None:
    client = Requester(gateway)
    created = (await client.call("write_note", {"text": "big"}))["result"]
    approval_id = await _approval_of(gateway, created)
    answer = await client.update(
        created["taskId"],
        {
            f"approval:{approval_id}": {"action": "accept", "content": {"decision": "allow_once"}},
            "padding": {"action": "accept", "content": {"x": "y" * 100_000}},
        },
    )
    assert answer["error"]["code"] == -32602 and "larger than" in answer["error"]["message"]
    assert (await gateway.pincer.approvals.get(approval_id)).status is ApprovalStatus.PENDING


async def test_a_flood_of_task_creations_is_bounded_per_session(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config="[tasks]\nmax_live_per_session = 3\n") as live:
        client = Requester(live)
        made = [(await client.call("write_note", {"text": str(n)}))["result"] for n in range(3)]
        refused = (await client.call("write_note", {"text": "one too many"}))["result"]
        pending = await live.pincer.approvals.list_pending()
    assert all(task["resultType"] == "task" for task in made)
    assert refused["isError"] is True
    error = refused["_meta"]["pincer/error"]
    assert error["code"] == "too_many_tasks" and error["retry_after_s"] > 0
    assert "max_live_per_session" in error["hint"]
    assert len(pending) == 3  # the refused call asked nobody


async def test_an_expired_task_is_gone(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config="[tasks]\nttl_s = 0.5\n") as live:
        client = Requester(live)
        created = (await client.call("write_note", {"text": "soon gone"}))["result"]
        assert created["ttlMs"] == 500
        await anyio.sleep(0.6)
        answer = await client.get(created["taskId"])
    assert answer["error"]["code"] == -32602 and "expired" in answer["error"]["message"]


async def test_cancelling_a_waiting_task_expires_its_approval_with_one_record(pincer_home: Path, store: str) -> None:
    async with live_gateway(pincer_home, config=store) as gateway:
        await _cancel_waiting(gateway)


async def _cancel_waiting(gateway: LiveGateway) -> None:
    client = Requester(gateway)
    created = (await client.call("write_note", {"text": "never"}))["result"]
    approval_id = await _approval_of(gateway, created)
    assert (await client.cancel(created["taskId"]))["result"]["resultType"] == "complete"
    done = (await client.get(created["taskId"]))["result"]
    assert done["status"] == "cancelled"
    assert (await gateway.pincer.approvals.get(approval_id)).status is ApprovalStatus.EXPIRED
    records = [r for r in await gateway.pincer.audit.records(tool="write_note") if r.kind == "call"]
    assert [r.outcome for r in records] == ["pending", "cancelled"]
    # A second cancel is an acknowledgement that changes nothing.
    assert (await client.cancel(created["taskId"]))["result"]["resultType"] == "complete"
    assert len([r for r in await gateway.pincer.audit.records(tool="write_note") if r.kind == "call"]) == 2


async def test_cancelling_a_running_task_cancels_the_tool_with_one_record(pincer_home: Path, store: str) -> None:
    started, seen = anyio.Event(), []

    async def handler(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise
        return ToolOutput(value="never")

    spec = ToolSpec(
        name="slow", description="Runs until cancelled", input_schema={"type": "object"},
        effects=frozenset(), runtime=RuntimeKind.NATIVE, side_effecting=False, source="tests",
    )  # fmt: skip
    async with live_gateway(pincer_home, config=store + "[tasks]\nafter_s = 0.05\n") as live:
        await live.pincer.add_runtime(FixtureRuntime([FixtureTool(spec=spec, handler=handler)]))
        client = Requester(live)
        created = (await client.call("slow", {}))["result"]
        assert created["resultType"] == "task" and created["status"] == "working"
        with anyio.fail_after(WAIT_S):
            await started.wait()
        assert (await client.cancel(created["taskId"]))["result"]["resultType"] == "complete"
        done = await client.until(created["taskId"], "cancelled", "completed", "failed")
        records = [r for r in await live.pincer.audit.records(tool="slow") if r.kind == "call"]
    assert done["status"] == "cancelled" and seen == ["cancelled"]
    assert [r.outcome for r in records] == ["cancelled"]


# -- REST ------------------------------------------------------------------------------------


async def _rest_until(http: httpx.AsyncClient, task_id: str, *statuses: str) -> dict[str, Any]:
    seen: list[str] = []
    with anyio.move_on_after(WAIT_S):
        while True:
            task: dict[str, Any] = (await http.get(f"/api/v1/tasks/{task_id}")).json()
            seen.append(task["status"])
            if task["status"] in statuses:
                return task
            await anyio.sleep(POLL_S)
    raise AssertionError(f"task {task_id} did not reach {statuses} within {WAIT_S} s; saw {seen[-5:]}")


async def test_rest_respond_async_makes_a_task_that_rest_reads_answers_and_cancels(
    pincer_home: Path, store: str
) -> None:
    agent_token, config = _agent_config()
    async with live_gateway(pincer_home, config=store + config) as live, live.http(headers=live.headers) as http:
        prefer = {"Prefer": "respond-async"}
        made = await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "rest"}}, headers=prefer)
        assert made.status_code == 202, made.text
        task = made.json()
        assert made.headers["Location"] == f"/api/v1/tasks/{task['id']}" and task["status"] == "input_required"
        # Another session's token sees no such task, and cannot cancel it.
        other = {"Authorization": f"Bearer {agent_token}"}
        assert (await http.get(made.headers["Location"], headers=other)).status_code == 404
        assert (await http.delete(made.headers["Location"], headers=other)).status_code == 404
        answered = await http.post(f"/api/v1/approvals/{task['approval_id']}", json={"decision": "allow_once"})
        assert answered.status_code == 200, answered.text
        done = await _rest_until(http, task["id"], "completed", "failed")
        assert json.loads(_text(done["result"])) == {"written": "rest"}
        # A fast call with the same preference is answered at once, as without it.
        quick = await http.post("/api/v1/tools/say/call", json={"args": {"text": "now"}}, headers=prefer)
        assert quick.status_code == 200 and quick.json()["output"] == "now"
        second = (
            await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "drop"}}, headers=prefer)
        ).json()
        cancelled = await http.delete(f"/api/v1/tasks/{second['id']}")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        mine = (await http.get("/api/v1/tasks")).json()["tasks"]
    assert {t["id"]: t["status"] for t in mine} == {task["id"]: "completed", second["id"]: "cancelled"}


async def test_an_approval_nobody_answers_completes_the_task_with_the_timeout_and_one_record(
    pincer_home: Path, store: str
) -> None:
    async with live_gateway(pincer_home, config=store + "[approvals]\ntimeout_s = 1\n") as live:
        client = Requester(live)
        created = (await client.call("write_note", {"text": "nobody"}))["result"]
        done = await client.until(created["taskId"], "completed", "failed", "cancelled")
        records = [r for r in await live.pincer.audit.records(tool="write_note") if r.kind == "call"]
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert done["result"]["_meta"]["pincer/error"]["code"] == "approval_timeout"
    assert [(r.outcome, r.error_code) for r in records] == [
        ("pending", "approval_pending"),
        ("cancelled", "approval_timeout"),
    ]
    assert done["result"]["_meta"]["pincer/auditId"] == records[-1].id


async def test_rest_refuses_a_flood_of_tasks_with_429_and_retry_after(pincer_home: Path) -> None:
    config = "[tasks]\nmax_live_per_session = 1\n"
    async with live_gateway(pincer_home, config=config) as live, live.http(headers=live.headers) as http:
        prefer = {"Prefer": "respond-async"}
        first = await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "1"}}, headers=prefer)
        second = await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "2"}}, headers=prefer)
    assert first.status_code == 202
    assert second.status_code == 429 and int(second.headers["Retry-After"]) >= 1
    assert second.json()["error"]["code"] == "too_many_tasks"


async def test_polling_faster_than_poll_interval_is_answered_from_one_read_per_window(pincer_home: Path) -> None:
    agent_token, config = _agent_config()
    async with live_gateway(pincer_home, config=config) as live:
        owner = Requester(live)
        created = (await owner.call("write_note", {"text": "polled"}))["result"]
        store = live.pincer.tasks
        reads: list[str] = []
        read = store.get

        async def counted(task_id: str) -> Any:
            reads.append(task_id)
            return await read(task_id)

        store.get = counted  # counts the reads the store serves; each still goes to the real store
        try:
            started = anyio.current_time()
            answers = [(await owner.get(created["taskId"]))["result"] for _ in range(20)]
            elapsed = anyio.current_time() - started
            polled_reads = len(reads)
            # Within a window the row read last answers, but never to another session.
            foreign = await Requester(live, agent_token).get(created["taskId"])
            acked = await owner.update(
                created["taskId"], {"x": {"action": "accept", "content": {"decision": "allow_once"}}}
            )
        finally:
            del store.get
    assert all(answer["status"] == "input_required" and answer["inputRequests"] for answer in answers)
    window_s = min(created["pollIntervalMs"] / 1000, 1.0)
    assert 1 <= polled_reads <= 1 + int(elapsed / window_s), (polled_reads, elapsed)
    assert foreign["error"]["code"] == -32602 and "not found" in foreign["error"]["message"]
    assert "error" not in acked
