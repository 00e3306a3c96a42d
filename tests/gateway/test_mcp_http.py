"""MCP over streamable HTTP against a real uvicorn server, driven by the official SDK client in
both protocol eras: the handshake era (``mode="legacy"``, 2025-11-25) and 2026-07-28."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from pincer.core.effects import RuntimeKind
from pincer.core.values import ToolOutput, ToolSpec
from tests.gateway.conformance.fixtures.runtime import FixtureRuntime, FixtureTool
from tests.gateway.conftest import LiveGateway, live_gateway

pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
NOTIFICATION_TIMEOUT_S = 10.0
APPROVAL_POLL_S = 0.05
APPROVAL_APPEAR_TIMEOUT_S = 60.0  # a busy 2-core machine is slow to start the call
CALL_TIMEOUT_S = 20.0
EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def _text(result: Any) -> str:
    return " ".join(block.text for block in result.content if getattr(block, "type", None) == "text")


@ERAS
async def test_tools_list_and_call_go_through_the_dispatcher(gateway: LiveGateway, mode: str) -> None:
    async with gateway.mcp(mode=mode) as client:
        assert client.protocol_version == EXPECTED_VERSION[mode]
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"say", "report", "write_note"} <= names
        result = await client.call_tool("say", {"text": "hello"})
    assert not result.is_error
    assert _text(result) == "hello"
    audit_id = result.meta["pincer/auditId"]
    record = (await gateway.pincer.audit.records())[-1]
    assert (record.id, record.caller, record.session, record.tool, record.outcome) == (
        audit_id,
        "mcp",
        "main",
        "say",
        "ok",
    )


@ERAS
async def test_a_failing_call_is_a_tool_error_with_what_went_wrong(gateway: LiveGateway, mode: str) -> None:
    async with gateway.mcp(mode=mode) as client:
        wrong_args = await client.call_tool("say", {"txt": "typo"})
        missing = await client.call_tool("no_such_tool", {})
    assert wrong_args.is_error
    assert "text" in _text(wrong_args) and "hint:" in _text(wrong_args)
    assert wrong_args.meta["pincer/error"]["code"] == "invalid_arguments"
    assert missing.is_error and missing.meta["pincer/error"]["code"] == "tool_not_found"
    outcomes = [(r.tool, r.outcome) for r in (await gateway.pincer.audit.records())[-2:]]
    assert outcomes == [("say", "error"), ("no_such_tool", "error")]


@ERAS
async def test_a_denial_carries_its_reason(pincer_home: Path, mode: str) -> None:
    config = '[[grants]]\ntool = "write_note"\ndefault = "deny"\n'
    async with live_gateway(pincer_home, config=config) as live:
        async with live.mcp(mode=mode) as client:
            result = await client.call_tool("write_note", {"text": "x"})
        assert (await live.pincer.audit.records())[-1].outcome == "denied"
    assert result.is_error
    assert result.meta["pincer/error"]["code"] == "denied"
    assert "denied" in _text(result) and "by grant" in _text(result)


@ERAS
async def test_session_policy_hides_and_refuses_denied_tools(pincer_home: Path, mode: str) -> None:
    config = '[sessions.main]\nkind = "main"\ndeny = ["say"]\n'
    async with live_gateway(pincer_home, config=config) as live, live.mcp(mode=mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("say", {"text": "hi"})
        decisions = [r.decision for r in await live.pincer.audit.records() if r.tool == "say"]
    assert "say" not in names and "report" in names
    # Refused and audited as a denial, answered as for a missing tool (README: 404 for REST).
    assert result.is_error and result.meta["pincer/error"]["code"] == "tool_not_found"
    assert decisions == ["deny"]


@ERAS
async def test_progress_and_log_notifications_are_forwarded(gateway: LiveGateway, mode: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    # 2026-07-28 delivers logs only to requests that opt in with a level.
    async with gateway.mcp(mode=mode, logging_callback=on_log, log_level="info") as client:
        result = await client.call_tool("report", {}, progress_callback=on_progress)
    assert _text(result) == "reported"
    assert progress == [(1, 2, "half"), (2, 2, "done")]
    assert logs == ["reporting"]


async def test_idempotency_key_in_meta_replays_the_first_result(gateway: LiveGateway) -> None:
    meta = {"pincer/idempotencyKey": "note-1"}
    async with gateway.mcp(mode="legacy", elicitation_callback=_answer("allow_always")) as client:
        first = await client.call_tool("write_note", {"text": "once"}, meta=meta)
        second = await client.call_tool("write_note", {"text": "once"}, meta=meta)
    assert not first.is_error and not second.is_error
    calls = [r for r in await gateway.pincer.audit.records(tool="write_note") if r.kind == "call"]
    assert [r.cached for r in calls] == [False, True]


def _answer(decision: str | None, *, action: str = "accept") -> Any:
    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        assert "write_note" in params.message and "approval" in params.message
        if action != "accept":
            return types.ElicitResult(action=action)
        return types.ElicitResult(action="accept", content={"decision": decision})

    return elicit


@ERAS
@pytest.mark.parametrize(("decision", "action", "ok"), [("allow_once", "accept", True), (None, "decline", False)])
async def test_an_ask_goes_to_the_client_as_an_elicitation(
    gateway: LiveGateway, mode: str, decision: str | None, action: str, ok: bool
) -> None:
    # Handshake era: elicitation/create mid-call. 2026-07-28: the round ends asking for the
    # decision and the call waits, parked, for the client's next round.
    async with gateway.mcp(mode=mode, elicitation_callback=_answer(decision, action=action)) as client:
        with anyio.fail_after(CALL_TIMEOUT_S):
            result = await client.call_tool("write_note", {"text": "hi"})
    assert result.is_error is not ok
    approval = (await gateway.pincer.approvals.list(status=None))[-1]
    assert approval.answered_by == "mcp-elicitation:main"
    assert approval.status.value == ("allow_once" if ok else "deny")
    calls = [r for r in await gateway.pincer.audit.records(tool="write_note") if r.kind == "call"]
    assert [(r.approval_id, r.outcome) for r in calls] == [(approval.id, "ok" if ok else "denied")]
    # The answer is one act (docs/acts.md: approval-answer), by the MCP client's session.
    answers = [r for r in await gateway.pincer.audit.records() if r.kind == "approval"]
    assert [(r.approval_id, r.caller, r.decision) for r in answers] == [(approval.id, "mcp-elicitation:main", approval.status.value)]


async def test_2026_parked_call_answered_over_rest_is_collected_by_the_next_round(gateway: LiveGateway) -> None:
    """The client is asked, but a person answers over REST first; the next round collects."""
    answered = anyio.Event()

    async def dismiss_after_rest(context: Any, params: Any) -> types.ElicitResult:
        async with gateway.http(headers=gateway.headers) as rest:
            (pending,) = (await rest.get("/api/v1/approvals")).json()["approvals"]
            await rest.post(f"/api/v1/approvals/{pending['id']}", json={"decision": "allow_once"})
        answered.set()
        return types.ElicitResult(action="cancel")

    async with gateway.mcp(mode="auto", elicitation_callback=dismiss_after_rest) as client:
        with anyio.fail_after(CALL_TIMEOUT_S):
            result = await client.call_tool("write_note", {"text": "via rest"})
    assert answered.is_set() and not result.is_error
    assert (await gateway.pincer.approvals.list(status=None))[-1].answered_by == "rest:main"


@ERAS
async def test_approval_round_trip_over_rest_while_the_mcp_call_waits(gateway: LiveGateway, mode: str) -> None:
    results: list[Any] = []
    async with gateway.mcp(mode=mode) as client, gateway.http(headers=gateway.headers) as rest:

        async def call() -> None:
            results.append(await client.call_tool("write_note", {"text": "needs a yes"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(APPROVAL_APPEAR_TIMEOUT_S):
                while True:
                    pending = (await rest.get("/api/v1/approvals")).json()["approvals"]
                    if pending:
                        break
                    await anyio.sleep(APPROVAL_POLL_S)
            assert not results, "the call must wait for the answer"
            (approval,) = pending
            assert (approval["tool"], approval["args"], approval["effects"]) == (
                "write_note", {"text": "needs a yes"}, ["write_filesystem"],
            )  # fmt: skip
            answer = await rest.post(f"/api/v1/approvals/{approval['id']}", json={"decision": "allow_once"})
            assert answer.status_code == 200 and answer.json()["status"] == "allow_once"
            with anyio.fail_after(CALL_TIMEOUT_S):
                while not results:
                    await anyio.sleep(APPROVAL_POLL_S)
    (result,) = results
    assert not result.is_error
    assert result.structured_content is None and "needs a yes" in _text(result)
    record = (await gateway.pincer.audit.records(tool="write_note"))[-1]
    assert record.approval_id == approval["id"] and record.outcome == "ok"


def _toggle_runtime() -> FixtureRuntime:
    spec = ToolSpec(
        name="late_tool", description="Added while clients are connected", input_schema={"type": "object"},
        effects=frozenset(), runtime=RuntimeKind.NATIVE, side_effecting=False, source="tests",
    )  # fmt: skip

    async def handler(args: Any, host: Any) -> ToolOutput:
        return ToolOutput(value="late")

    return FixtureRuntime([FixtureTool(spec=spec, handler=handler)])


async def test_list_changed_reaches_a_handshake_era_client(gateway: LiveGateway) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with gateway.mcp(mode="legacy", message_handler=on_message) as client:
        assert client.session.server_capabilities.tools.list_changed
        await client.list_tools()
        await gateway.pincer.add_runtime(_toggle_runtime())
        with anyio.fail_after(NOTIFICATION_TIMEOUT_S):
            await changed.wait()
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert "late_tool" in names


async def test_list_changed_reaches_a_2026_listen_stream(gateway: LiveGateway) -> None:
    async with gateway.mcp(mode="auto") as client, client.listen(tools_list_changed=True) as subscription:
        runtime = _toggle_runtime()
        await gateway.pincer.add_runtime(runtime)
        with anyio.fail_after(NOTIFICATION_TIMEOUT_S):
            event = await subscription.__anext__()
        assert type(event).__name__ == "ToolsListChanged"
        assert "late_tool" in {tool.name for tool in (await client.list_tools()).tools}
        await gateway.pincer.remove_runtime(runtime)
        with anyio.fail_after(NOTIFICATION_TIMEOUT_S):
            await subscription.__anext__()
        assert "late_tool" not in {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools}


async def test_2026_tool_needing_sampling_is_refused_with_the_missing_capability(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, fixtures=True) as live, live.mcp(mode="auto") as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("test_missing_capability", {})
    assert caught.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert caught.value.data == {"requiredCapabilities": {"sampling": {}}}


async def test_2026_multi_round_input_is_answered_by_the_client_callbacks(pincer_home: Path) -> None:
    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada", "color": "teal"})

    async with live_gateway(pincer_home, fixtures=True) as live:
        async with live.mcp(mode="auto", elicitation_callback=elicit) as client:
            result = await client.call_tool("test_input_required_result_multi_round", {})
        # Each round is one governed call in the audit log.
        records = await live.pincer.audit.records(tool="test_input_required_result_multi_round")
    assert _text(result) == "Ada likes teal"
    assert [r.error_code for r in records] == ["input_required", "input_required", None]
