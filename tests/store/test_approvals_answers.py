"""Answering an approval, on both backends: a wrong answer or scope is refused with what to type
and leaves the request pending; two answers at once from two gateways make one answer (and one
audit record of it); a request whose caller is gone is expired, not answered, with or without an
audit log; a page of requests is filtered and cut in the database; changes are heard."""

from __future__ import annotations

import anyio
import pytest

from pincer.core.errors import ApprovalAnswered, ApprovalGone, StoreError, UsageError
from pincer.store import Answer, ApprovalStatus, ApprovalStore
from pincer.store.approvals import AnswerScope, ApprovalRequest
from pincer.store.audit import AuditEntry
from tests.store.conftest import Backend
from tests.store.test_approvals_gone import _dead_waiter

pytestmark = pytest.mark.anyio
WAIT_S = 30  # a notification crossing to another connection


async def _ask(store: ApprovalStore, *, tool: str = "write_file", session: str = "main") -> ApprovalRequest:
    return await store.create(session=session, tool=tool, args={"path": "a.txt"}, effects=("write_filesystem",),
                              hosts=(), reason="asks by default", timeout_s=300, caller="cli")  # fmt: skip


def _answer_record(request: ApprovalRequest) -> AuditEntry:
    return AuditEntry(session=request.session, caller="ui:ann", tool=request.tool, decision=request.status.value,
                      reason=f"answered {request.id}", outcome="ok", approval_id=request.id)  # fmt: skip


async def test_an_answer_or_scope_nobody_knows_is_refused_and_the_request_still_waits(backend: Backend) -> None:
    store = await backend.approvals()
    request = await _ask(store)
    with pytest.raises(UsageError, match="unknown approval answer 'yes please'") as answer:
        await store.answer(request.id, "yes please")
    assert "allow_once, allow_always or deny" in (answer.value.hint or "")
    with pytest.raises(UsageError, match="unknown answer scope 'forever'") as scope:
        await store.answer(request.id, Answer.ALLOW_ALWAYS, scope="forever")
    assert "session, kind or all" in (scope.value.hint or "")
    assert (await store.get(request.id)).status is ApprovalStatus.PENDING
    answered = await store.answer(request.id, "allow_always", scope="session", by="ui:ann")
    assert answered.status is ApprovalStatus.ALLOW_ALWAYS and answered.scope is AnswerScope.SESSION


@pytest.mark.parametrize("recorded", [False, True], ids=["plain", "recorded"])
async def test_two_gateways_answering_at_once_make_one_answer(backend: Backend, recorded: bool) -> None:
    (first, audit), (second, _) = await backend.audited_approvals(), await backend.audited_approvals()
    request = await _ask(first)
    outcomes: list[str] = []

    async def answer(store: ApprovalStore, how: Answer) -> None:
        try:
            await store.answer(request.id, how, by=f"ui:{how.value}", record=_answer_record if recorded else None)
        except ApprovalAnswered as exc:
            assert "answered" in exc.message and "`pincer approvals " in (exc.hint or "")
            outcomes.append("refused")
        else:
            outcomes.append(how.value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer, first, Answer.ALLOW_ONCE)
        tg.start_soon(answer, second, Answer.DENY)
    assert sorted(outcomes) != ["refused", "refused"] and outcomes.count("refused") == 1
    final = await second.get(request.id)
    assert final.status.value in outcomes and final.answered_by == f"ui:{final.status.value}"
    records = [r for r in await audit.records() if r.approval_id == request.id]
    assert len(records) == (1 if recorded else 0)
    if recorded:
        assert records[0].decision == final.status.value  # the record names the answer that stood


async def test_a_store_without_an_audit_log_refuses_to_answer_with_a_record(backend: Backend) -> None:
    store = await backend.approvals()
    request = await _ask(store)
    with pytest.raises(StoreError, match="audit log it was not given"):
        await store.answer(request.id, Answer.DENY, record=_answer_record)
    assert (await store.get(request.id)).status is ApprovalStatus.PENDING


async def test_a_dead_callers_request_is_expired_not_answered_without_an_audit_log(backend: Backend) -> None:
    store = await backend.approvals()
    orphan = await _ask(store)
    backend.tamper("UPDATE approvals SET waiter = ? WHERE id = ?", (_dead_waiter(), orphan.id))
    with pytest.raises(ApprovalGone, match="the call that asked is gone") as info:
        await store.answer(orphan.id, Answer.ALLOW_ONCE)
    assert "run the call again" in (info.value.hint or "")
    assert (await store.get(orphan.id)).status is ApprovalStatus.EXPIRED
    # and a listing sweeps them too
    second = await _ask(store)
    backend.tamper("UPDATE approvals SET waiter = ? WHERE id = ?", (_dead_waiter(), second.id))
    assert await store.list() == []
    assert (await store.get(second.id)).status is ApprovalStatus.EXPIRED


async def test_a_page_is_filtered_and_cut_in_the_database(backend: Backend) -> None:
    store = await backend.approvals()
    made = [await _ask(store, tool=tool, session=session)
            for tool, session in (("http_get", "main"), ("httpXget", "main"), ("files", "agent"), ("http_get", "agent"))]  # fmt: skip
    await store.answer(made[1].id, Answer.DENY)
    everything = await store.page(status=None, limit=10)
    assert [r.id for r in everything] == sorted((r.id for r in made), key=lambda i: [m.id for m in made].index(i))
    first = await store.page(status=None, limit=2)
    rest = await store.page(status=None, limit=10, after=(first[-1].created_at, first[-1].id))
    assert [r.id for r in first + rest] == [r.id for r in everything]  # no row twice, none left out
    pending = await store.page(status=ApprovalStatus.PENDING, limit=10, session="agent")
    assert [r.tool for r in pending] == ["files", "http_get"]
    assert [r.id for r in await store.page(status=None, limit=10, tool_glob="http_get")] == [made[0].id, made[3].id]
    assert [r.tool for r in await store.page(status=ApprovalStatus.DENY, limit=10, tool_glob="http?get")] == [
        "httpXget"
    ]


async def test_changes_are_heard_and_a_wait_sleeps_through_other_requests(backend: Backend) -> None:
    store, other = await backend.approvals(), await backend.approvals()
    async with store.changes() as heard:
        mine = await _ask(store)
        with anyio.fail_after(WAIT_S):
            assert await anext(heard) == mine.id
    unrelated = await _ask(store)
    result: list[ApprovalRequest] = []

    async def wait() -> None:
        result.append(await store.wait(mine.id, timeout_s=WAIT_S))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        await other.answer(unrelated.id, Answer.DENY)  # heard by the waiter, and not its own
        await anyio.sleep(0.05)
        assert result == []
        await other.answer(mine.id, Answer.ALLOW_ONCE, by="cli:bo")
    assert result[0].status is ApprovalStatus.ALLOW_ONCE and result[0].answered_by == "cli:bo"


async def test_a_request_past_its_time_is_expired_when_answered_or_listed_and_that_is_heard(backend: Backend) -> None:
    store = await backend.approvals()
    late, swept = await _ask(store), await _ask(store)
    backend.tamper("UPDATE approvals SET expires_at = 0 WHERE id IN (?, ?)", (late.id, swept.id))
    with pytest.raises(ApprovalGone, match=f"approval {late.id} for write_file has expired"):
        await store.answer(late.id, Answer.ALLOW_ONCE)
    async with store.changes() as heard:
        assert await store.list() == []
        with anyio.fail_after(WAIT_S):
            assert await anext(heard) == swept.id
    assert {(await store.get(i)).status for i in (late.id, swept.id)} == {ApprovalStatus.EXPIRED}


async def test_a_detached_requests_answer_is_used_once_by_the_call_that_comes_back(backend: Backend) -> None:
    """The caller left on purpose (an MCP task, a REST call told to come back): the answer given
    meanwhile is used by the first call with the same binding, and by no second one."""
    store, other = await backend.approvals(), await backend.approvals()
    request = await _ask(store)
    await store.detach(request.id, "binding-1")
    assert await other.find_detached("binding-2") is None
    found = await other.find_detached("binding-1")
    assert found is not None and found.id == request.id and found.waiter is None
    await other.answer(request.id, Answer.ALLOW_ONCE)  # no waiter: nobody to find gone
    used: list[bool] = []

    async def consume(on: ApprovalStore) -> None:
        used.append(await on.consume(request.id))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume, store)
        tg.start_soon(consume, other)
    assert sorted(used) == [False, True]
    assert await store.consume(request.id) is False and await store.find_detached("binding-1") is None
