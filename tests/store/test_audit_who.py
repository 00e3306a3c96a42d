"""The audit log says who: a record's person and the approval's answerer are covered by its
chain value when set; a record naming no one is chained as before those columns came, so the
records of an older log still verify; editing who breaks the chain at that record."""

from __future__ import annotations

import pytest

from pincer.core.errors import AuditChainBroken
from pincer.store.audit import AuditEntry
from pincer.store.sql import Sql
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


def _entry(**who: str) -> AuditEntry:
    return AuditEntry(session="main", caller="rest", tool="echo", decision="allow", reason="r", outcome="ok", **who)


async def test_who_is_chained_and_records_naming_no_one_verify_as_before(backend: Backend) -> None:
    log = await backend.audit()
    plain = await log.append(_entry(), gather=False)
    named = await log.append(_entry(person="alice", approved_by="rest:bob"), gather=False)
    assert await log.verify() == 2
    records = await log.records(person="alice")
    assert [(r.id, r.person, r.approved_by) for r in records] == [(named, "alice", "rest:bob")]
    assert [r.id for r in await log.records(person="bob")] == [named]  # the approver is named too
    assert (await log.records(tool="echo"))[0].person is None and plain < named
    db = await backend.db()
    await db.execute(Sql("UPDATE audit SET approved_by = 'rest:mallory' WHERE id = :id"), {"id": named})
    with pytest.raises(AuditChainBroken) as broken:
        await log.verify()
    assert broken.value.record_id == named
    await db.execute(Sql("UPDATE audit SET approved_by = 'rest:bob', person = 'mallory' WHERE id = :id"), {"id": named})
    with pytest.raises(AuditChainBroken):
        await log.verify()
    await db.execute(Sql("UPDATE audit SET person = 'alice' WHERE id = :id"), {"id": named})
    await db.execute(Sql("UPDATE audit SET person = 'mallory' WHERE id = :id"), {"id": plain})  # a name added later
    with pytest.raises(AuditChainBroken) as broken:
        await log.verify()
    assert broken.value.record_id == plain
