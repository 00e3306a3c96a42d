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
    # "rest:bob" is who answered, but no approval record names a person bob: not bob's (issue 41).
    assert await log.records(person="bob") == []
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


async def test_the_person_filter_is_exact_a_session_named_like_a_person_is_not_that_person(backend: Backend) -> None:
    """A configured token's session named ``alice`` answers as ``rest:alice`` too; only records
    naming the person alice (behind the call, or behind the approval that let it through) are hers."""
    log = await backend.audit()

    def answer(approval_id: str, person: str | None) -> AuditEntry:
        return AuditEntry(session="main", caller="rest:alice", tool="write_file", kind="approval", decision="allow_once",
                          reason="answered", outcome="answered", approval_id=approval_id, person=person)  # fmt: skip

    def call(approval_id: str | None = None, **who: str) -> AuditEntry:
        return AuditEntry(session="agent", caller="mcp", tool="write_file", decision="ask", reason="r", outcome="ok",
                          approval_id=approval_id, **who)  # fmt: skip

    await log.append(answer("ap_session", None), gather=False)  # the session alice answered
    await log.append(call("ap_session", approved_by="rest:alice"), gather=False)
    hers = [await log.append(answer("ap_person", "alice"), gather=False),  # the person alice answered
            await log.append(call("ap_person", approved_by="rest:alice"), gather=False),
            await log.append(call(person="alice"), gather=False)]  # fmt: skip
    await log.append(call(person="alicia"), gather=False)
    assert [r.id for r in await log.records(person="alice")] == hers
    assert [r.id for r in await log.records(person="alice", limit=1)] == hers[-1:]
    assert await log.records(person="ali") == []
