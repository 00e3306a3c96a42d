"""MCP's own way to answer: an approval put to the client as an elicitation. A person's client
is asked only when their roles hold the approval; the answer is theirs. Both protocol eras, a
live gateway (tests/gateway/conftest.py)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import mcp_types as types
import pytest

from pincer.policy.roles import parse_roles
from tests.acts.support import answered_over_rest
from tests.gateway.conftest import LiveGateway, gateway  # noqa: F401 - a fixture

pytestmark = pytest.mark.anyio
ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
CALL_TIMEOUT_S = 60.0


async def _token(live: LiveGateway, name: str, role: str) -> str:
    await live.pincer.people.add(name, roles=parse_roles([role]), email=None, by="cli:test", now=time.time())
    return (await live.pincer.people.new_token(name, now=time.time())).value


@ERAS
async def test_a_viewers_client_is_never_asked_and_an_approvers_answer_is_theirs(gateway: LiveGateway, mode: str) -> None:  # noqa: F811
    vera, wes = await _token(gateway, "vera", "viewer"), await _token(gateway, "wes", "approver:tool=write_*")
    asked: list[str] = []

    async def allow(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    async with gateway.mcp(mode=mode, token=vera, elicitation_callback=allow) as client, \
            gateway.http(headers={"Authorization": f"Bearer {wes}"}) as rest:  # fmt: skip
        result, approval = await answered_over_rest(lambda: client.call_tool("write_note", {"text": "from vera"}), rest,
                                                    approvals="/api/v1/approvals", wait_s=CALL_TIMEOUT_S)  # fmt: skip
    assert asked == [] and not result.is_error
    assert (await gateway.pincer.approvals.get(approval["id"])).answered_by == "rest:wes"
    (call,) = [r for r in await gateway.pincer.audit.records(tool="write_note") if r.kind == "call"]
    assert (call.person, call.approved_by) == ("vera", "rest:wes")

    async with gateway.mcp(mode=mode, token=wes, elicitation_callback=allow) as client:
        with anyio.fail_after(CALL_TIMEOUT_S):
            mine = await client.call_tool("write_note", {"text": "from wes"})
    assert len(asked) == 1 and not mine.is_error
    answers = [r for r in await gateway.pincer.audit.records() if r.kind == "approval"]
    assert [(r.caller, r.person) for r in answers] == [("rest:wes", "wes"), ("mcp-elicitation:wes", "wes")]


async def test_a_viewers_mcp_task_is_not_answered_by_the_viewer_and_an_approvers_answer_is_theirs(gateway: LiveGateway) -> None:  # noqa: F811
    """MCP Tasks: tasks/update answers the task's approval; a person's roles must hold it."""
    from tests.gateway.test_tasks import Requester, _approval_of

    vera = await _token(gateway, "vera", "viewer")
    client = Requester(gateway, vera)
    created = (await client.call("write_note", {"text": "vera's task"}))["result"]
    assert created["status"] == "input_required"
    waiting = (await client.get(created["taskId"]))["result"]
    assert waiting["inputRequests"] == {}  # a viewer's client is not asked
    approval_id = await _approval_of(gateway, created)
    key = f"approval:{approval_id}"
    refused = await client.update(created["taskId"], {key: {"action": "accept", "content": {"decision": "allow_once"}}})
    assert "error" in refused and "may not answer approval" in refused["error"]["message"], refused
    assert (await gateway.pincer.approvals.get(approval_id)).status.value == "pending"
    await gateway.pincer.people.add("wes", roles=parse_roles(["approver:tool=write_*"]), email=None, by="cli:test", now=time.time())
    # The task is vera's (her session's); an approver answers it over REST, as wes.
    wes = (await gateway.pincer.people.new_token("wes", now=time.time())).value
    async with gateway.http(headers={"Authorization": f"Bearer {wes}"}) as rest:
        assert (await rest.post(f"/api/v1/approvals/{approval_id}", json={"decision": "allow_once"})).status_code == 200
    done = await client.until(created["taskId"], "completed", "failed")
    assert done["status"] == "completed"
