"""MCP tasks in the handshake era (2025-11-25, ``initialize`` sessions) against a real gateway on
127.0.0.1:0: a task-augmented ``tools/call`` is a task on the same store as the 2026-07-28
extension's, read with ``tasks/get``/``tasks/list``, ended with ``tasks/result`` (the approval
asked as an elicitation meanwhile, of a main session's client only) and ``tasks/cancel``.

The official SDK's client drives what it can (``initialize``, the elicitation during
``tasks/result``, ``tasks/*`` through ``send_request`` with its own request and result models);
its 2025-11-25 surface refuses a ``CreateTaskResult`` for ``tools/call``, so that one request is
raw JSON-RPC on the same kind of session, and every raw frame is checked against the SDK's models.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.client.context import ClientRequestContext
from mcp_types.methods import validate_server_result

from pincer.core.effects import RuntimeKind
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.gateway.tokens import token_digest
from pincer.store.approvals import ApprovalStatus
from pincer.store.tasks import TaskStatus
from tests.gateway.conformance.fixtures.runtime import FixtureRuntime, FixtureTool
from tests.gateway.conftest import LiveGateway, live_gateway

pytestmark = pytest.mark.anyio

VERSION = "2025-11-25"
RELATED = "io.modelcontextprotocol/related-task"
WAIT_S = 20.0
POLL_S = 0.05


class RawSession:
    """One handshake-era MCP session in raw JSON-RPC over HTTP; every answer is checked against
    the SDK's model for it."""

    def __init__(self, live: LiveGateway, token: str, http: httpx.AsyncClient) -> None:
        self.live = live
        self.token = token
        self.http = http
        self.session_id = ""
        self._ids = 0

    def _headers(self) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if self.session_id:
            headers |= {"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": VERSION}
        return headers

    async def rpc(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        self._ids += 1
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": dict(params)}
        response = await self.http.post("/mcp", headers=self._headers(), content=json.dumps(body))
        self.session_id = self.session_id or response.headers.get("mcp-session-id", "")
        text = response.text
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            frames = [
                json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()
            ]
            (message,) = [frame for frame in frames if frame.get("id") == self._ids]
        else:
            message = json.loads(text)
        if "error" in message:
            types.JSONRPCError.model_validate(message, by_name=False)
        else:
            types.JSONRPCResponse.model_validate(message, by_name=False)
        return dict(message)

    async def open(self) -> None:
        init = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        answer = await self.rpc("initialize", init)
        validate_server_result("initialize", VERSION, answer["result"])
        self.capabilities = answer["result"]["capabilities"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.http.post("/mcp", headers=self._headers(), content=json.dumps(note))

    async def call_as_task(self, tool: str, arguments: Mapping[str, Any], task: Any = None) -> dict[str, Any]:
        params = {"name": tool, "arguments": dict(arguments), "task": {"ttl": 60_000} if task is None else task}
        answer = await self.rpc("tools/call", params)
        if "result" in answer and "task" in answer["result"]:
            types.CreateTaskResult.model_validate(answer["result"], by_name=False)
        elif "result" in answer:  # tasks off: the call's own answer
            validate_server_result("tools/call", VERSION, answer["result"])
        return answer

    async def get(self, task_id: str) -> dict[str, Any]:
        answer = await self.rpc("tasks/get", {"taskId": task_id})
        if "result" in answer:
            types.GetTaskResult.model_validate(answer["result"], by_name=False)
        return answer

    async def until(self, task_id: str, *statuses: str) -> dict[str, Any]:
        seen: list[str] = []
        with anyio.move_on_after(WAIT_S):
            while True:
                task = (await self.get(task_id))["result"]
                seen.append(task["status"])
                if task["status"] in statuses:
                    return task
                await anyio.sleep(POLL_S)
        raise AssertionError(f"task {task_id} did not reach {statuses} within {WAIT_S} s; saw {seen[-5:]}")


@asynccontextmanager
async def raw(live: LiveGateway, token: str | None = None) -> AsyncIterator[RawSession]:
    async with httpx.AsyncClient(base_url=live.info.url, trust_env=False, timeout=WAIT_S) as http:
        session = RawSession(live, token or live.token, http)
        await session.open()
        yield session


def _agent_config() -> tuple[str, str]:
    token = secrets.token_urlsafe(24)
    config = f'[[gateway.tokens]]\nsha256 = "{token_digest(token)}"\nsession = "agent"\n'
    return token, config + '[sessions.agent]\nallow = ["write_note", "say"]\n'


def _text(result: Mapping[str, Any]) -> str:
    return " ".join(block.get("text", "") for block in result.get("content", ()))


async def _approval_of(live: LiveGateway, task_id: str) -> str:
    with anyio.fail_after(WAIT_S):
        while True:
            row = await live.pincer.tasks.get(task_id)
            if row is not None and row.approval_id is not None:
                return row.approval_id
            await anyio.sleep(POLL_S)


async def _calls(live: LiveGateway, tool: str) -> list[Any]:
    return [r for r in await live.pincer.audit.records(tool=tool) if r.kind == "call"]


# -- what the server says -----------------------------------------------------------------------


async def test_the_server_declares_tasks_and_each_tools_task_support(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config='[tasks]\nonly = ["say"]\n') as live, raw(live) as client:
        listed = (await client.rpc("tools/list", {}))["result"]
        refused = await client.rpc("tools/call", {"name": "say", "arguments": {"text": "x"}})
    tasks = types.ServerCapabilities.model_validate(client.capabilities, by_name=False).tasks
    assert tasks is not None and tasks.list is not None and tasks.cancel is not None
    assert tasks.requests is not None and tasks.requests.tools is not None and tasks.requests.tools.call is not None
    support = {tool["name"]: tool["execution"]["taskSupport"] for tool in listed["tools"]}
    assert support.pop("say") == "required" and {"report", "write_note"} <= set(support)
    assert set(support.values()) == {"optional"}
    # "required": a call without params.task is -32601, as the spec says.
    assert refused["error"]["code"] == -32601 and "params.task" in refused["error"]["message"]


async def test_tasks_off_declares_nothing_and_a_task_param_is_ignored(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config="[tasks]\nenabled = false\n") as live, raw(live) as client:
        listed = (await client.rpc("tools/list", {}))["result"]
        called = await client.call_as_task("say", {"text": "plain"})
        unknown = await client.rpc("tasks/list", {})
    assert "tasks" not in client.capabilities
    assert {tool["execution"]["taskSupport"] for tool in listed["tools"]} == {"forbidden"}
    assert _text(called["result"]) == "plain"  # processed normally, as the spec says
    assert unknown["error"]["code"] == -32601


# -- the receiver -----------------------------------------------------------------------------


async def test_a_fast_call_is_a_task_whose_result_is_the_calls(gateway: LiveGateway) -> None:
    async with raw(gateway) as client:
        created = (await client.call_as_task("say", {"text": "now"}))["result"]["task"]
        assert created["status"] == "working" and created["ttl"] == 60_000 and created["pollInterval"] == 1_000
        done = await client.until(created["taskId"], "completed", "failed")
        assert done["status"] == "completed"
        result = (await client.rpc("tasks/result", {"taskId": created["taskId"]}))["result"]
    validate_server_result("tools/call", VERSION, result)
    assert _text(result) == "now" and result["_meta"][RELATED] == {"taskId": created["taskId"]}
    (record,) = await _calls(gateway, "say")
    assert record.outcome == "ok" and result["_meta"]["pincer/auditId"] == record.id


async def test_the_approval_is_asked_during_tasks_result_of_a_main_sessions_sdk_client(
    pincer_home: Path, store: str
) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    async with live_gateway(pincer_home, config=store) as live:
        async with raw(live) as client:
            created = (await client.call_as_task("write_note", {"text": "hi"}))["result"]["task"]
            waiting = await client.until(created["taskId"], "input_required")
        # The first connection is gone; a new one, with the official SDK's client, takes the result.
        async with live.mcp(mode="legacy", elicitation_callback=elicit) as sdk:
            result = await sdk.session.send_request(
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=created["taskId"])),
                types.CallToolResult,
            )
            polled = await sdk.session.send_request(
                types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=created["taskId"])), types.GetTaskResult
            )
        approval_id = await _approval_of(live, created["taskId"])
        records = await _calls(live, "write_note")
    (question,) = asked
    assert question.meta is not None and question.meta[RELATED] == {"taskId": created["taskId"]}  # type: ignore[literal-required]
    assert "write_note" in question.message and approval_id in waiting["statusMessage"]
    assert json.loads(_text(result.model_dump(by_alias=True))) == {"written": "hi"}
    assert polled.status == "completed"
    assert [r.outcome for r in records] == ["pending", "ok"]
    assert result.meta is not None and result.meta["pincer/auditId"] == records[-1].id


async def test_a_non_main_sessions_client_is_never_asked_and_a_person_answers(pincer_home: Path) -> None:
    agent_token, config = _agent_config()
    asked: list[Any] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    async with live_gateway(pincer_home, config=config) as live:
        async with raw(live, agent_token) as agent:
            created = (await agent.call_as_task("write_note", {"text": "agent"}))["result"]["task"]
            waiting = await agent.until(created["taskId"], "input_required")
        approval_id = await _approval_of(live, created["taskId"])
        assert f"pincer approvals approve {approval_id}" in waiting["statusMessage"]
        results: list[types.CallToolResult] = []
        async with live.mcp(mode="legacy", token=agent_token, elicitation_callback=elicit) as sdk:
            async with anyio.create_task_group() as tg:

                async def take() -> None:
                    request = types.GetTaskPayloadRequest(
                        params=types.GetTaskPayloadRequestParams(task_id=created["taskId"])
                    )
                    results.append(await sdk.session.send_request(request, types.CallToolResult))

                tg.start_soon(take)
                await anyio.sleep(1.0)  # tasks/result is blocked: it would have asked by now
                assert (await live.pincer.approvals.get(approval_id)).status is ApprovalStatus.PENDING
                await live.pincer.dispatcher.answer(approval_id, "allow_once", by="cli")
    assert asked == []
    assert json.loads(_text(results[0].model_dump(by_alias=True))) == {"written": "agent"}


async def test_tasks_list_is_the_sessions_own_paginated(pincer_home: Path) -> None:
    agent_token, config = _agent_config()
    async with live_gateway(pincer_home, config=config + "[tasks]\nmax_live_per_session = 1000\n") as live:
        async with raw(live) as owner, raw(live, agent_token) as agent:
            mine = {(await owner.call_as_task("say", {"text": str(n)}))["result"]["task"]["taskId"] for n in range(55)}
            theirs = (await agent.call_as_task("say", {"text": "agent"}))["result"]["task"]["taskId"]
            pages: list[dict[str, Any]] = [(await owner.rpc("tasks/list", {}))["result"]]
            while "nextCursor" in pages[-1]:
                pages.append((await owner.rpc("tasks/list", {"cursor": pages[-1]["nextCursor"]}))["result"])
            agents = (await agent.rpc("tasks/list", {}))["result"]
            forged = await owner.rpc("tasks/list", {"cursor": "not-a-cursor"})
    for page in pages:
        types.ListTasksResult.model_validate(page, by_name=False)
    listed = [task["taskId"] for page in pages for task in page["tasks"]]
    assert len(pages) == 2 and len(listed) == len(set(listed)) and set(listed) == mine
    assert [task["taskId"] for task in agents["tasks"]] == [theirs]
    assert forged["error"]["code"] == -32602 and "cursor" in forged["error"]["message"]


async def test_cancelling_a_waiting_task_expires_its_approval_with_one_record(pincer_home: Path, store: str) -> None:
    async with live_gateway(pincer_home, config=store) as live, raw(live) as client:
        created = (await client.call_as_task("write_note", {"text": "never"}))["result"]["task"]
        await client.until(created["taskId"], "input_required")
        approval_id = await _approval_of(live, created["taskId"])
        cancelled = (await client.rpc("tasks/cancel", {"taskId": created["taskId"]}))["result"]
        types.CancelTaskResult.model_validate(cancelled, by_name=False)
        again = await client.rpc("tasks/cancel", {"taskId": created["taskId"]})
        result = await client.rpc("tasks/result", {"taskId": created["taskId"]})
        approval = await live.pincer.approvals.get(approval_id)
        records = await _calls(live, "write_note")
    assert cancelled["status"] == "cancelled"
    assert approval.status is ApprovalStatus.EXPIRED
    assert [r.outcome for r in records] == ["pending", "cancelled"]
    # A terminal task cannot be cancelled (-32602, the spec's), and its result is the cancellation.
    assert again["error"]["code"] == -32602 and "cancelled" in again["error"]["message"]
    assert result["error"]["code"] == -32800 and result["error"]["data"][RELATED] == {"taskId": created["taskId"]}


async def test_cancelling_a_completed_task_is_an_error(gateway: LiveGateway) -> None:
    async with raw(gateway) as client:
        created = (await client.call_as_task("say", {"text": "done"}))["result"]["task"]
        await client.until(created["taskId"], "completed")
        refused = await client.rpc("tasks/cancel", {"taskId": created["taskId"]})
        still = await client.get(created["taskId"])
    assert refused["error"]["code"] == -32602 and "completed" in refused["error"]["message"]
    assert still["result"]["status"] == "completed"


async def test_a_denied_call_is_a_failed_task_whose_result_is_the_denial(gateway: LiveGateway) -> None:
    async with raw(gateway) as client:
        created = (await client.call_as_task("write_note", {"text": "no"}))["result"]["task"]
        approval_id = await _approval_of(gateway, created["taskId"])
        await gateway.pincer.dispatcher.answer(approval_id, "deny", by="cli")
        failed = await client.until(created["taskId"], "failed", "completed")
        result = (await client.rpc("tasks/result", {"taskId": created["taskId"]}))["result"]
    assert failed["status"] == "failed"  # a CallToolResult with isError is `failed` in 2025-11-25
    assert result["isError"] is True and result["_meta"]["pincer/error"]["code"] == "approval_denied"


async def test_a_waiting_task_is_finished_by_a_restarted_gateway(pincer_home: Path, store: str) -> None:
    async with live_gateway(pincer_home, config=store) as first, raw(first) as client:
        created = (await client.call_as_task("write_note", {"text": "later"}))["result"]["task"]
        await client.until(created["taskId"], "input_required")
        approval_id = await _approval_of(first, created["taskId"])
    async with live_gateway(pincer_home, config=store) as second, raw(second) as client:
        await second.pincer.dispatcher.answer(approval_id, "allow_once", by="cli")
        await client.until(created["taskId"], "completed", "failed")
        result = (await client.rpc("tasks/result", {"taskId": created["taskId"]}))["result"]
        records = await _calls(second, "write_note")
    assert json.loads(_text(result)) == {"written": "later"}
    assert [r.outcome for r in records] == ["pending", "ok"]


# -- attacks ----------------------------------------------------------------------------------


async def test_another_sessions_task_id_is_an_unknown_one_everywhere(pincer_home: Path, store: str) -> None:
    agent_token, config = _agent_config()
    async with live_gateway(pincer_home, config=store + config) as live:
        async with raw(live) as owner, raw(live, agent_token) as thief:
            created = (await owner.call_as_task("write_note", {"text": "mine"}))["result"]["task"]
            await owner.until(created["taskId"], "input_required")
            foreign = [
                await thief.rpc(m, {"taskId": created["taskId"]}) for m in ("tasks/get", "tasks/result", "tasks/cancel")
            ]
            unknown = [
                await thief.rpc(m, {"taskId": "no-such-task"}) for m in ("tasks/get", "tasks/result", "tasks/cancel")
            ]
            listed = (await thief.rpc("tasks/list", {}))["result"]
            still = (await owner.get(created["taskId"]))["result"]
        row = await live.pincer.tasks.get(created["taskId"])
    assert [answer["error"] for answer in foreign] == [answer["error"] for answer in unknown]
    assert unknown[0]["error"]["code"] == -32602 and "not found" in unknown[0]["error"]["message"]
    assert listed["tasks"] == [] and still["status"] == "input_required"
    assert row is not None and row.status is TaskStatus.INPUT_REQUIRED and not row.cancel_requested


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ({"ttl": -1}, "params.task.ttl must be a whole number of milliseconds from 0 to"),
        ({"ttl": 10**20}, "params.task.ttl must be a whole number of milliseconds from 0 to"),
        ({"ttl": "60000"}, "got str"),
        ({"ttl": 1.5}, "got 1.5"),
        ({"ttl": True}, "got true"),
        ([], "params.task must be an object"),
        ({"ttl": 1, "id": "x"}, "unknown fields ['id']"),
    ],
)
async def test_a_malformed_task_param_is_invalid_params_and_nothing_runs(
    gateway: LiveGateway, task: Any, says: str
) -> None:
    async with raw(gateway) as client:
        refused = await client.call_as_task("write_note", {"text": "x"}, task=task)
    assert refused["error"]["code"] == -32602 and says in refused["error"]["message"], refused
    assert await gateway.pincer.tasks.list() == [] and await gateway.pincer.approvals.list_pending() == []


@pytest.mark.parametrize("task_id", [None, "", 7, "x" * 129])
async def test_a_malformed_task_id_is_invalid_params(gateway: LiveGateway, task_id: Any) -> None:
    async with raw(gateway) as client:
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            refused = await client.rpc(method, {} if task_id is None else {"taskId": task_id})
            assert refused["error"]["code"] == -32602 and "params.taskId" in refused["error"]["message"]


async def test_a_requested_ttl_is_capped_by_the_gateways(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config="[tasks]\nttl_s = 10\n") as live, raw(live) as client:
        capped = (await client.call_as_task("say", {"text": "x"}, task={"ttl": 3_600_000}))["result"]["task"]
        default = (await client.call_as_task("say", {"text": "y"}, task={}))["result"]["task"]
    assert capped["ttl"] == 10_000 and default["ttl"] == 10_000


@pytest.mark.parametrize("store", ["postgresql"], indirect=True)
async def test_a_task_made_on_one_gateway_is_read_answered_and_ended_on_another(tmp_path: Path, store: str) -> None:
    # Two gateways on one PostgreSQL at once: the task is the store's, not the connection's.
    asked: list[Any] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    async with live_gateway(tmp_path / "a", config=store) as one:
        (tmp_path / "b").mkdir()  # gateways sharing a store share its audit key
        (tmp_path / "b" / "audit.key").write_bytes((tmp_path / "a" / "audit.key").read_bytes())
        (tmp_path / "b" / "audit.key").chmod(0o600)
        async with live_gateway(tmp_path / "b", config=store) as two:
            await _across(one, two, elicit, asked)


async def _across(one: LiveGateway, two: LiveGateway, elicit: Any, asked: list[Any]) -> None:
    """Made on ``one``; polled, listed, answered (during tasks/result) and ended on ``two``."""
    async with raw(one) as client:
        created = (await client.call_as_task("write_note", {"text": "across"}))["result"]["task"]
    async with raw(two) as client:
        waiting = await client.until(created["taskId"], "input_required")
        listed = (await client.rpc("tasks/list", {}))["result"]
    async with two.mcp(mode="legacy", elicitation_callback=elicit) as sdk:
        result = await sdk.session.send_request(
            types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=created["taskId"])),
            types.CallToolResult,
        )
    records = await _calls(two, "write_note")
    assert waiting["taskId"] == created["taskId"] and [t["taskId"] for t in listed["tasks"]] == [created["taskId"]]
    assert len(asked) == 1 and json.loads(_text(result.model_dump(by_alias=True))) == {"written": "across"}
    assert [r.outcome for r in records] == ["pending", "ok"]


async def test_cancelling_a_running_task_cancels_the_tool_with_one_record(pincer_home: Path) -> None:
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
    async with live_gateway(pincer_home) as live, raw(live) as client:
        await live.pincer.add_runtime(FixtureRuntime([FixtureTool(spec=spec, handler=handler)]))
        created = (await client.call_as_task("slow", {}))["result"]["task"]
        with anyio.fail_after(WAIT_S):
            await started.wait()
        cancelled = (await client.rpc("tasks/cancel", {"taskId": created["taskId"]}))["result"]
        records = await _calls(live, "slow")
    # The spec: the task is `cancelled` before the response; the tool saw the cancellation.
    assert cancelled["status"] == "cancelled" and seen == ["cancelled"]
    assert [r.outcome for r in records] == ["cancelled"]


async def test_a_task_result_is_leak_scanned_and_audited_once(pincer_home: Path, store: str) -> None:
    async with live_gateway(pincer_home, config=store) as live, raw(live) as client:
        secret = "sk-" + secrets.token_hex(20)
        live.pincer.secrets.set("task_key", secret)
        created = (await client.call_as_task("say", {"text": f"the key is {secret}"}))["result"]["task"]
        result = (await client.rpc("tasks/result", {"taskId": created["taskId"]}))["result"]
        again = (await client.rpc("tasks/result", {"taskId": created["taskId"]}))["result"]
        polled = await client.get(created["taskId"])
        records = await _calls(live, "say")
    assert secret not in json.dumps(result) and "the key is" in _text(result)
    assert secret not in json.dumps(polled) and again == result
    (record,) = records
    assert result["_meta"]["pincer/auditId"] == record.id


async def test_a_flood_of_task_creations_is_bounded_per_session(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config="[tasks]\nmax_live_per_session = 1\n") as live, raw(live) as client:
        first = (await client.call_as_task("write_note", {"text": "one"}))["result"]["task"]
        await client.until(first["taskId"], "input_required")
        refused = await client.call_as_task("write_note", {"text": "two"})
        listed = (await client.rpc("tasks/list", {}))["result"]
        records = await _calls(live, "write_note")
    assert refused["error"]["code"] == -32600 and "unfinished tasks" in refused["error"]["message"]
    assert refused["error"]["data"]["code"] == "too_many_tasks" and refused["error"]["data"]["retry_after_s"] >= 1
    assert [task["taskId"] for task in listed["tasks"]] == [first["taskId"]]
    assert refused["error"]["data"]["auditId"] == records[-1].id and records[-1].outcome != "ok"


async def test_the_result_of_a_failed_task_is_its_error(gateway: LiveGateway) -> None:
    async with raw(gateway) as client:
        created = (await client.call_as_task("write_note", {"text": "x"}))["result"]["task"]
        await client.until(created["taskId"], "input_required")
        # What a gateway does to a task whose process died mid-call (tasks.py: _INTERRUPTED).
        error = {"code": -32603, "message": "the gateway running this call stopped before it finished"}
        assert await gateway.pincer.tasks.finish(created["taskId"], TaskStatus.FAILED, error=error, message="stopped")
        failed = await client.until(created["taskId"], "failed")  # polls within a window see the row read last
        result = await client.rpc("tasks/result", {"taskId": created["taskId"]})
    assert failed["statusMessage"] == "stopped"
    assert result["error"]["code"] == -32603 and result["error"]["message"] == error["message"]
    assert result["error"]["data"][RELATED] == {"taskId": created["taskId"]}
