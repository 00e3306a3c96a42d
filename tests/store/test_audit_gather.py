"""Group commit decides when yielding is worth it: a caller alone commits at once, callers
queueing up are noticed and share a transaction, and every record is committed before its
append returns either way."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pincer.store import AuditEntry
from tests.store.conftest import Opener

pytestmark = pytest.mark.anyio

PROBE_EVERY = 32  # store/audit.py _PROBE_EVERY
KEY = b"g" * 32


def _entry(i: int) -> AuditEntry:
    return AuditEntry(session="main", caller="test", tool="t", decision="allow", reason="r", outcome="ok", args={"i": i})


async def test_a_lone_caller_commits_each_record_in_a_transaction_of_its_own(tmp_path: Path, opened: Opener) -> None:
    """Alone, nobody is waited for: each append is its own transaction, committed before it
    returns (every append waits for the writer thread's answer, so it yields to the loop then
    anyway; the gather only decides whether to wait one more turn before committing)."""
    transactions: list[str] = []
    log = await opened.audit(tmp_path, key=KEY, trace=lambda sql: transactions.append(sql) if sql.startswith("BEGIN") else None)
    transactions.clear()
    for i in range(PROBE_EVERY + 2):
        assert await log.append(_entry(i), gather=None) == i + 1
    assert len(transactions) == PROBE_EVERY + 2
    assert await log.verify() == PROBE_EVERY + 2


async def test_callers_queueing_up_are_noticed_and_share_a_transaction(tmp_path: Path, opened: Opener) -> None:
    transactions: list[str] = []
    log = await opened.audit(tmp_path, key=KEY, trace=lambda sql: transactions.append(sql) if sql.startswith("BEGIN") else None)
    await log.append(_entry(0), gather=None)  # from now on it believes it is alone
    transactions.clear()
    ids: list[int] = []

    async def one(i: int) -> None:
        ids.append(await log.append(_entry(i), gather=None))

    async with anyio.create_task_group() as tg:
        for i in range(1, 65):
            tg.start_soon(one, i)
    assert sorted(ids) == list(range(2, 66))
    assert 0 < len(transactions) < 64, "the probe should have gathered the callers queued behind it into one transaction"
    assert await (await opened.audit(tmp_path, key=KEY)).verify() == 65  # all committed, as another process sees it
