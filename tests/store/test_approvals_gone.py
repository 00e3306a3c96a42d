"""The record of a call that waited on an approval and never ran is written exactly once, on
both backends: by the caller itself when it is alive (cancelled, timed out), else by whoever
first finds its process gone, however many gateways find it at the same moment
(store/approvals.py, docs/acts.md: call-cancelled)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.errors import ApprovalGone
from pincer.store.approvals import ApprovalStatus
from pincer.store.audit import AuditEntry
from pincer.store.owners import process_token, this_host
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio
GATEWAYS = 4
THREAD_TIMEOUT_S = 60.0


def _dead_waiter() -> str:
    """The owner token of a process that ran and is gone (killed, as SIGKILL leaves it)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        token = f"{this_host()}/{process_token(child.pid)}"
    finally:
        child.kill()
        child.wait(timeout=THREAD_TIMEOUT_S)
    return token


async def _asked(backend: Backend, store: Any, *, waiter: str | None = None) -> Any:
    request = await store.create(session="main", tool="write_file", args={"path": "a.txt"}, effects=("write_filesystem",),
                                 hosts=(), reason="asks by default", timeout_s=300, caller="cli")  # fmt: skip
    if waiter is not None:
        backend.tamper("UPDATE approvals SET waiter = ? WHERE id = ?", (waiter, request.id))
    return request


async def _calls(audit: Any) -> list[Any]:
    return [r for r in await audit.records() if r.kind == "call"]


async def test_several_gateways_finding_a_dead_caller_at_once_record_its_call_once(backend: Backend) -> None:
    gateways = [await backend.audited_approvals() for _ in range(GATEWAYS)]
    first, audit = gateways[0]
    request = await _asked(backend, first, waiter=_dead_waiter())
    start = anyio.Event()

    async def sweep(store: Any) -> None:
        await start.wait()
        await store.expire_overdue()

    with anyio.fail_after(THREAD_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            for store, _ in gateways:
                tg.start_soon(sweep, store)
            await anyio.sleep(0)
            start.set()
    (call,) = await _calls(audit)
    assert (call.outcome, call.approval_id, call.caller, call.session, call.error_code) == (
        "cancelled", request.id, "cli", "main", "approval_gone")  # fmt: skip
    assert request.id in call.reason and call.args == {"path": "a.txt"} and call.effects == ["write_filesystem"]
    after = await first.get(request.id)
    assert after.status is ApprovalStatus.EXPIRED and after.gone_recorded
    for store, _ in gateways:  # looking again writes nothing more
        await store.expire_overdue()
    assert len(await _calls(audit)) == 1
    assert await audit.verify() == 1


async def test_answering_a_dead_callers_approval_says_it_is_gone_and_records_the_call_once(backend: Backend) -> None:
    store, audit = await backend.audited_approvals()
    request = await _asked(backend, store, waiter=_dead_waiter())
    for _ in range(2):
        with pytest.raises(ApprovalGone, match="has expired"):
            await store.answer(request.id, "allow_once", by="rest:main")
    assert [(c.outcome, c.approval_id) for c in await _calls(audit)] == [("cancelled", request.id)]


async def test_a_live_callers_own_record_and_a_sweep_never_both_write(backend: Backend) -> None:
    store, audit = await backend.audited_approvals()
    other, _ = await backend.audited_approvals()
    entry = AuditEntry(session="main", caller="cli", tool="write_file", decision="ask", reason="cancelled by its caller",
                       outcome="cancelled")  # fmt: skip
    # The caller records first: the request is expired with it, and nobody records it again.
    mine = await _asked(backend, store)
    recorded = await store.record_gone(mine.id, AuditEntry(**{**_fields(entry), "approval_id": mine.id}))
    assert recorded is not None and (await store.get(mine.id)).status is ApprovalStatus.EXPIRED
    await other.expire_overdue()
    assert await store.record_gone(mine.id, AuditEntry(**{**_fields(entry), "approval_id": mine.id})) is None
    # A caller taken for dead (its token names a gone process) is recorded by the sweep; its own
    # late record is then refused (None), not written twice.
    taken = await _asked(backend, store, waiter=_dead_waiter())
    await other.expire_overdue()
    assert await store.record_gone(taken.id, AuditEntry(**{**_fields(entry), "approval_id": taken.id})) is None
    assert sorted(c.approval_id for c in await _calls(audit)) == sorted([mine.id, taken.id])
    assert await audit.verify() == 2


def _fields(entry: AuditEntry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in entry.__slots__}


async def test_a_sweep_waits_for_a_held_audit_head_without_holding_the_event_loop(tmp_path: Path) -> None:
    """Another gateway holds the audit head (its batch is committing): the sweep's record waits
    for it, the event loop goes on meanwhile (before the store went async, the sweep ran on the
    loop and had to give up with NOWAIT), and the call is recorded once the head is free."""
    import psycopg

    backend = Backend("postgres", tmp_path)
    try:
        store, audit = await backend.audited_approvals()
        request = await _asked(backend, store, waiter=_dead_waiter())
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await anyio.sleep(0.01)

        with psycopg.connect(backend.url) as holder:
            holder.execute("SELECT last_id FROM audit_head WHERE one = 1 FOR UPDATE")
            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                with anyio.fail_after(THREAD_TIMEOUT_S):
                    async with anyio.create_task_group() as sweeping:
                        sweeping.start_soon(store.expire_overdue)
                        await anyio.sleep(0.3)
                        assert ticks > 5 and await _calls(audit) == []  # the loop ran; nothing recorded yet
                        holder.rollback()  # the other gateway's batch ends: the head is free
                tg.cancel_scope.cancel()
        assert [(c.outcome, c.approval_id) for c in await _calls(audit)] == [("cancelled", request.id)]
        assert (await store.get(request.id)).status is ApprovalStatus.EXPIRED
    finally:
        await backend.aclose()


async def test_a_cancelled_call_uses_its_grant_and_rate_limit_only_if_it_got_past_its_approval(backend: Backend) -> None:
    """A call let through and then cancelled may have run in part: it counts against its
    grant's max_invocations and its rate limit (before ``cancelled`` existed it was ``error``,
    and counted). One that timed out or lost its caller while asking never ran: it does not."""
    audit = await backend.audit()
    outcomes = [("ok", None, "allow"), ("cancelled", "tool_error", "allow"), ("cancelled", "approval_timeout", "ask"),
                ("cancelled", "approval_gone", "ask"), ("denied", "denied", "deny")]  # fmt: skip
    for outcome, code, decision in outcomes:
        await audit.append(AuditEntry(session="main", caller="cli", tool="write_file", decision=decision, reason="r",
                                      outcome=outcome, error_code=code, grant_id="g-1"))  # fmt: skip
    assert await audit.grant_uses("g-1") == 2
    assert len(await audit.timestamps("write_file", 0.0)) == 2
