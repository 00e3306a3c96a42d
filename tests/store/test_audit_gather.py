"""Group commit decides when yielding is worth it: a caller alone commits at once, callers
queueing up are noticed and share a transaction, and every record is committed before its
append returns either way."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pincer.store import AuditEntry, AuditLog, open_database

pytestmark = pytest.mark.anyio

PROBE_EVERY = 32  # store/audit.py _PROBE_EVERY


def _entry(i: int) -> AuditEntry:
    return AuditEntry(session="main", caller="test", tool="t", decision="allow", reason="r", outcome="ok", args={"i": i})


async def test_a_lone_caller_stops_yielding_once_a_yield_found_nobody(tmp_path: Path) -> None:
    """Failed on main before the adaptive gather: every append yielded to the event loop once,
    also for a caller that was alone (a loop turn on every call's hot path)."""
    log = AuditLog(open_database(tmp_path), key=b"g" * 32)
    await log.append(_entry(0), gather=None)  # yields (nothing known yet) and finds nobody
    ran: list[int] = []

    async def other() -> None:
        ran.append(1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        for i in range(1, PROBE_EVERY + 1):
            await log.append(_entry(i), gather=None)
        assert ran == []  # none of those appends let the other task run
        await log.append(_entry(PROBE_EVERY + 1), gather=None)  # the probe yields once
        assert ran == [1]
    assert log.verify() == PROBE_EVERY + 2


async def test_callers_queueing_up_are_noticed_and_share_a_transaction(tmp_path: Path) -> None:
    conn = open_database(tmp_path)
    transactions: list[str] = []
    conn.set_trace_callback(lambda sql: transactions.append(sql) if sql.startswith("BEGIN") else None)
    log = AuditLog(conn, key=b"g" * 32)
    await log.append(_entry(0), gather=None)  # from now on it believes it is alone
    ids: list[int] = []

    async def one(i: int) -> None:
        ids.append(await log.append(_entry(i), gather=None))

    async with anyio.create_task_group() as tg:
        for i in range(1, 65):
            tg.start_soon(one, i)
    assert sorted(ids) == list(range(2, 66))
    assert transactions, "the probe should have gathered the callers queued behind it into one transaction"
    assert AuditLog(open_database(tmp_path), key=b"g" * 32).verify() == 65  # all committed, as another process sees it
