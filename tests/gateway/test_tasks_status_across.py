"""Handshake-era (2025-11-25) tasks across two gateways on one PostgreSQL store, with the
official SDK's ``ClientSession`` on each: a task made through gateway A and cancelled through
gateway B stops, both sessions see ``cancelled``, and A's session is told so by
``notifications/tasks/status`` even when B wrote the change (heard through LISTEN/NOTIFY).

Before: no status notification was sent at all, so A's client learnt of a cancel made elsewhere
only by polling ``tasks/get``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from pincer.core.effects import RuntimeKind
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.store.approvals import ApprovalStatus
from pincer.store.sql.migrate import upgrade_postgres
from tests.backends import postgres_server
from tests.gateway.conformance.fixtures.runtime import FixtureRuntime, FixtureTool
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.gateway.test_tasks_handshake import _approval_of, _calls
from tests.gateway.test_tasks_status import StatusClient, status_client, within

pytestmark = pytest.mark.anyio


class Slow:
    """A tool that runs until it is cancelled, and says when it started and when it stopped."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.stopped = anyio.Event()

    async def handler(self, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.stopped.set()
        return ToolOutput(value="never")

    def tool(self) -> FixtureTool:
        spec = ToolSpec(
            name="slow", description="Runs until cancelled", input_schema={"type": "object"},
            effects=frozenset(), runtime=RuntimeKind.NATIVE, side_effecting=False, source="tests",
        )  # fmt: skip
        return FixtureTool(spec=spec, handler=self.handler)


@asynccontextmanager
async def two_gateways(tmp_path: Path) -> AsyncIterator[tuple[LiveGateway, LiveGateway]]:
    url = postgres_server().new_database()
    upgrade_postgres(url)
    store = f'[store]\nurl = "{url}"\n'
    async with live_gateway(tmp_path / "a", config=store) as one:
        (tmp_path / "b").mkdir()  # gateways sharing a store share its audit key
        (tmp_path / "b" / "audit.key").write_bytes((tmp_path / "a" / "audit.key").read_bytes())
        (tmp_path / "b" / "audit.key").chmod(0o600)
        async with live_gateway(tmp_path / "b", config=store) as two:
            yield one, two


async def _cancel(client: StatusClient, task_id: str) -> types.CancelTaskResult:
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    return await client.sdk.send_request(request, types.CancelTaskResult)


async def test_a_running_task_made_on_a_and_cancelled_through_b_stops_and_both_see_it(tmp_path: Path) -> None:
    slow = Slow()
    async with two_gateways(tmp_path) as (one, two):
        await one.pincer.add_runtime(FixtureRuntime([slow.tool()]))
        await two.pincer.add_runtime(FixtureRuntime([Slow().tool()]))
        async with status_client(one) as on_a, status_client(two) as on_b:
            created = await on_a.call_as_task("slow", {})
            with within("the tool to start on gateway A"):
                await slow.started.wait()
            cancelled = await _cancel(on_b, created["taskId"])
            with within("the tool on gateway A to stop"):
                await slow.stopped.wait()
            told = await on_a.told(created["taskId"], "cancelled")
            seen_on_a = await on_a.get(created["taskId"])
            seen_on_b = await on_b.get(created["taskId"])
            records = await _calls(one, "slow")
    assert cancelled.status == "cancelled"
    assert [n.status for n in told] == ["cancelled"]
    assert seen_on_a.status == seen_on_b.status == "cancelled"
    assert [r.outcome for r in records] == ["cancelled"]  # one record, whichever gateway wrote it


async def test_a_waiting_task_cancelled_on_b_is_told_on_a_from_bs_change(tmp_path: Path) -> None:
    async with two_gateways(tmp_path) as (one, two), status_client(one) as on_a, status_client(two) as on_b:
        created = await on_a.call_as_task("write_note", {"text": "never"})
        await on_a.told(created["taskId"], "input_required")
        approval_id = await _approval_of(one, created["taskId"])
        # A waiting task is cancelled by whoever is asked: gateway B writes `cancelled` itself.
        cancelled = await _cancel(on_b, created["taskId"])
        told = await on_a.told(created["taskId"], "cancelled")
        approval = await one.pincer.approvals.get(approval_id)
        records = await _calls(one, "write_note")
    assert cancelled.status == "cancelled" and [n.status for n in told] == ["cancelled"]
    assert approval.status is ApprovalStatus.EXPIRED
    assert [r.outcome for r in records] == ["pending", "cancelled"]
