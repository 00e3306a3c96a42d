"""Approvals never leave an MCP caller hanging blind (newcomer item 2), against a real gateway.

Failed on main before the fix: a client without elicitation waited silently until its own
timeout; there was no way to get the approval id at once; an approval outlived its caller.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from pincer.store import ApprovalStatus
from tests.gateway.conftest import live_gateway

pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
CALL_TIMEOUT_S = 30.0


@ERAS
async def test_a_waiting_call_reports_how_to_answer_it(pincer_home: Path, mode: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    async with live_gateway(pincer_home, config="[approvals]\ntimeout_s = 30\n") as live:

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total, message))
            if len(progress) == 2:
                (pending,) = await live.pincer.approvals.list_pending()
                await live.pincer.dispatcher.answer(pending.id, "allow_once", by="cli")

        async with live.mcp(mode=mode) as client:  # no elicitation callback: it cannot be asked
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await client.call_tool("write_note", {"text": "hi"}, progress_callback=on_progress)
    assert not result.is_error
    assert len(progress) >= 2
    _value, total, message = progress[0]
    assert total == pytest.approx(30.0) and message is not None
    approval_id = message.split("waiting for approval ")[1].split(" ")[0]
    assert f"pincer approvals approve {approval_id}" in message
    assert f"/api/v1/approvals/{approval_id}" in message


@ERAS
async def test_when_no_elicitation_return_answers_at_once_and_a_retry_runs_after_approval(
    pincer_home: Path, mode: str
) -> None:
    config = '[approvals]\ntimeout_s = 30\nwhen_no_elicitation = "return"\n'
    async with live_gateway(pincer_home, config=config) as live:
        meta = {"pincer/idempotencyKey": "note-1"}
        async with live.mcp(mode=mode) as client:
            with anyio.fail_after(CALL_TIMEOUT_S):
                first = await client.call_tool("write_note", {"text": "later"}, meta=meta)
            assert first.is_error
            error = first.meta["pincer/error"]
            assert error["code"] == "approval_pending"
            approval_id = error["approval_id"]
            assert approval_id in error["hint"] and "same" in error["hint"]
            assert (await live.pincer.approvals.get(approval_id)).status is ApprovalStatus.PENDING

            # Asked again before anyone answered: the same approval, still pending, no second one.
            with anyio.fail_after(CALL_TIMEOUT_S):
                again = await client.call_tool("write_note", {"text": "later"}, meta=meta)
            assert again.meta["pincer/error"]["approval_id"] == approval_id
            assert len(await live.pincer.approvals.list(status=None)) == 1

            await live.pincer.dispatcher.answer(approval_id, "allow_once", by="cli")
            with anyio.fail_after(CALL_TIMEOUT_S):
                retry = await client.call_tool("write_note", {"text": "later"}, meta=meta)
            assert not retry.is_error, retry
            # The same call once more replays its result (nothing runs, nobody is asked) ...
            with anyio.fail_after(CALL_TIMEOUT_S):
                replay = await client.call_tool("write_note", {"text": "later"}, meta=meta)
            assert not replay.is_error
            # ... and the approval was used once: a new call (another key) asks anew.
            with anyio.fail_after(CALL_TIMEOUT_S):
                fresh = await client.call_tool("write_note", {"text": "later"}, meta={"pincer/idempotencyKey": "note-2"})
            assert fresh.meta["pincer/error"]["approval_id"] != approval_id
        calls = [r for r in await live.pincer.audit.records(tool="write_note") if r.kind == "call"]
        assert [(r.outcome, r.cached) for r in calls] == [
            ("pending", False), ("pending", False), ("ok", False), ("ok", True), ("pending", False),
        ]  # fmt: skip


async def test_the_other_kind_of_arguments_is_another_call(pincer_home: Path) -> None:
    """A detached approval is bound to its call: other arguments never use it."""
    config = '[approvals]\ntimeout_s = 30\nwhen_no_elicitation = "return"\n'
    async with live_gateway(pincer_home, config=config) as live:
        async with live.mcp(mode="legacy") as client:
            first = await client.call_tool("write_note", {"text": "a"})
            approval_id = first.meta["pincer/error"]["approval_id"]
            await live.pincer.dispatcher.answer(approval_id, "allow_once", by="cli")
            other = await client.call_tool("write_note", {"text": "b"})
    assert other.is_error and other.meta["pincer/error"]["approval_id"] != approval_id



@ERAS
async def test_an_approval_expires_when_its_mcp_caller_leaves(pincer_home: Path, mode: str) -> None:
    async with live_gateway(pincer_home, config="[approvals]\ntimeout_s = 60\n") as live:
        async with live.mcp(mode=mode) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "write_note", {"text": "abandoned"})
                with anyio.fail_after(CALL_TIMEOUT_S):
                    while not await live.pincer.approvals.list_pending():
                        await anyio.sleep(0.05)
                (pending,) = await live.pincer.approvals.list_pending()
                tg.cancel_scope.cancel()
        # The client session is closed: the gateway's call is cancelled and its approval expires.
        with anyio.fail_after(CALL_TIMEOUT_S):
            while (await live.pincer.approvals.get(pending.id)).status is ApprovalStatus.PENDING:
                await anyio.sleep(0.05)
        assert (await live.pincer.approvals.get(pending.id)).status is ApprovalStatus.EXPIRED
    # Approving it now, from another process, says the caller is gone and exits 1.
    approve = subprocess.run(
        [sys.executable, "-m", "pincer.cli", "approvals", "approve", pending.id],
        env={**os.environ, "PINCER_HOME": str(pincer_home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert approve.returncode == 1, approve.stderr
    assert "expired" in approve.stderr and "the call that asked is gone" in approve.stderr
