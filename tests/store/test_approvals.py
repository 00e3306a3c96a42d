from __future__ import annotations

import anyio
import pytest

from pincer.core.errors import ApprovalAnswered, ApprovalGone, ApprovalTimeout, UsageError
from pincer.store import Answer, ApprovalStatus, ApprovalStore
from tests.store.conftest import Backend


async def make(store: ApprovalStore, timeout_s: float = 5.0):  # type: ignore[no-untyped-def]
    return await store.create(
        session="main", tool="http", args={"url": "https://x.test"}, effects=("network",),
        hosts=("x.test",), reason="asks by default", timeout_s=timeout_s,
    )  # fmt: skip


@pytest.mark.anyio
async def test_answer_in_process_wakes_waiter(backend: Backend) -> None:
    store = await backend.approvals()
    request = await make(store)
    assert [r.id for r in await store.list_pending()] == [request.id]

    async def answer_soon() -> None:
        await anyio.sleep(0.01)
        await store.answer(request.id, "allow_once", by="test")

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_soon)
        with anyio.fail_after(5):
            answered = await store.wait(request.id, timeout_s=5)
    assert answered.status is ApprovalStatus.ALLOW_ONCE
    assert answered.answered_by == "test"
    assert await store.list_pending() == []


@pytest.mark.anyio
async def test_answer_from_another_connection_is_seen(backend: Backend) -> None:
    store = await backend.approvals()
    other = await backend.approvals()
    request = await make(store)

    async def answer_soon() -> None:
        await anyio.sleep(0.05)
        await other.answer(request.id, Answer.DENY, by="cli")

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_soon)
        with anyio.fail_after(5):
            answered = await store.wait(request.id, timeout_s=5)
    assert answered.status is ApprovalStatus.DENY


@pytest.mark.anyio
async def test_timeout_expires_request(backend: Backend) -> None:
    store = await backend.approvals()
    request = await make(store, timeout_s=0.1)
    with pytest.raises(ApprovalTimeout, match="within 0.1 s"):
        await store.wait(request.id, timeout_s=0.1)
    assert (await store.get(request.id)).status is ApprovalStatus.EXPIRED
    with pytest.raises(ApprovalGone, match="has expired"):
        await store.answer(request.id, "allow_once")


@pytest.mark.anyio
async def test_bad_answers(backend: Backend) -> None:
    store = await backend.approvals()
    request = await make(store)
    with pytest.raises(UsageError, match="unknown approval answer"):
        await store.answer(request.id, "maybe")
    with pytest.raises(UsageError, match="no approval request"):
        await store.answer("nope", "deny")
    await store.answer(request.id, "deny")
    with pytest.raises(ApprovalAnswered, match=r"already answered \(deny\)"):
        await store.answer(request.id, "allow_once")


@pytest.mark.anyio
async def test_a_page_of_answered_requests_is_read_newest_first_and_filtered_in_the_database(backend: Backend) -> None:
    """What the approvals page reads: only the rows it shows, the newest answered first, with the
    tool pattern's ``*``/``?`` as wildcards and LIKE's own ``%``/``_`` taken literally."""
    store = await backend.approvals()
    made = []
    for tool in ("http_get", "http", "httpXget", "files"):
        request = await store.create(session="main" if tool != "files" else "agent", tool=tool, args={},
                                     effects=(), hosts=(), reason="asks", timeout_s=60)  # fmt: skip
        await store.answer(request.id, Answer.DENY if tool == "http" else Answer.ALLOW_ONCE, by="test")
        made.append(request.id)
        await anyio.sleep(0.002)  # answered_at orders them
    still = await make(store)
    newest = await store.answered(limit=2)
    assert [r.id for r in newest] == [made[3], made[2]] and still.id not in {r.id for r in newest}
    assert [r.tool for r in await store.answered(limit=10, tool_glob="http_get")] == ["http_get"]  # "_" literal
    assert {r.tool for r in await store.answered(limit=10, tool_glob="http*")} == {"http_get", "http", "httpXget"}
    assert [r.tool for r in await store.answered(limit=10, tool_glob="http?get")] == ["httpXget", "http_get"]
    assert [r.tool for r in await store.answered(limit=10, status="deny")] == ["http"]
    assert [r.tool for r in await store.answered(limit=10, session="agent")] == ["files"]
    assert await store.answered(limit=10, tool_glob="%") == []
    assert [i for i, _ in await store.pending_ids()] == [still.id]
