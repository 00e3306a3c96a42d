"""``call-cancelled`` on the MCP path (docs/acts.md): an MCP client that goes away while its call
waits for an approval leaves one record of the call, outcome ``cancelled``, naming the approval.
The CLI's (SIGKILL, SIGTERM, Ctrl-C, a timeout) are in test_attacks.py, REST's hang-up in
tests/gateway/test_rest_hangup.py."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.gateway.conftest import live_gateway

pytestmark = pytest.mark.anyio
WAIT_S = 60.0
POLL_S = 0.05


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_an_mcp_client_that_goes_away_while_its_call_waits_leaves_one_cancelled_record(pincer_home: Path, mode: str) -> None:
    async with live_gateway(pincer_home, config="[approvals]\ntimeout_s = 30\n") as live:
        with anyio.move_on_after(WAIT_S) as gave_up:
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    async with live.mcp(mode=mode) as client:
                        await client.call_tool("write_note", {"text": "nobody waits for this"})

                tg.start_soon(call)
                while not await live.pincer.approvals.list():
                    await anyio.sleep(POLL_S)
                tg.cancel_scope.cancel()  # the client goes away: its connection closes
        assert not gave_up.cancelled_caught, "the call never asked"
        (approval,) = await live.pincer.approvals.list(status=None)
        with anyio.fail_after(WAIT_S):
            while not [r for r in await live.pincer.audit.records(tool="write_note") if r.kind == "call"]:
                await anyio.sleep(POLL_S)
        calls = [r for r in await live.pincer.audit.records(tool="write_note") if r.kind == "call"]
        assert [(r.outcome, r.approval_id, r.caller) for r in calls] == [("cancelled", approval.id, "mcp")]
        assert (await live.pincer.approvals.get(approval.id)).status.value == "expired"
