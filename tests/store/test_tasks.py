"""The MCP tasks a call can become (store/tasks.py) on both backends: a task waiting on an
approval is taken by one gateway only, a cancel stops it being taken, it ends once and only by
whoever runs it or for the approval it waits on, and every change is told to the other gateways."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from pincer.store.sql import Sql
from pincer.store.tasks import TaskStatus, TaskStore
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio

WAIT_S = 30  # a notification crossing to another connection


async def _stores(backend: Backend) -> tuple[TaskStore, TaskStore]:
    return TaskStore(await backend.db()), TaskStore(await backend.db())


async def _waiting(store: TaskStore, *, session: str = "main", approval: str = "ap1", **extra: Any) -> str:
    task = await store.create(
        session=session, caller="mcp:client", tool="write_file", args={"path": "notes.txt"}, idempotency_key=None,
        status=TaskStatus.INPUT_REQUIRED, status_message="waits for a person", approval_id=approval, owner=None,
        ttl_ms=60_000, poll_ms=500, **extra,
    )  # fmt: skip
    return task.id


async def test_a_task_waiting_on_an_approval_is_taken_by_one_gateway_only(backend: Backend) -> None:
    first, second = await _stores(backend)
    task_id = await _waiting(first)
    won: list[str] = []

    async def claim(store: TaskStore, owner: str) -> None:
        if await store.claim(task_id, approval_id="ap1", owner=owner, message="running"):
            won.append(owner)

    async with anyio.create_task_group() as tg:
        tg.start_soon(claim, first, "gw-a")
        tg.start_soon(claim, second, "gw-b")
    assert len(won) == 1
    task = await second.get(task_id)
    assert task is not None and task.status is TaskStatus.WORKING and task.owner == won[0]
    assert [t.id for t in await first.running()] == [task_id] and await first.waiting() == []


async def test_a_cancelled_or_answered_elsewhere_task_is_not_taken(backend: Backend) -> None:
    first, second = await _stores(backend)
    task_id = await _waiting(first)
    assert not await second.claim(task_id, approval_id="another", owner="gw-b", message="running")
    assert await first.request_cancel(task_id)
    assert not await second.claim(task_id, approval_id="ap1", owner="gw-b", message="running")
    task = await first.get(task_id)
    assert task is not None and task.cancel_requested and task.status is TaskStatus.INPUT_REQUIRED
    assert await first.finish(task_id, TaskStatus.CANCELLED, approval_id="ap1", message="cancelled")
    assert not await first.request_cancel(task_id)  # an ended task has nothing to cancel


async def test_a_task_ends_once_and_only_by_its_runner(backend: Backend) -> None:
    first, second = await _stores(backend)
    task_id = await _waiting(first)
    assert await first.claim(task_id, approval_id="ap1", owner="gw-a", message="running")
    assert not await second.finish(task_id, TaskStatus.FAILED, owner="gw-b", error={"message": "not mine"})
    assert not await second.wait_for(task_id, approval_id="ap2", owner="gw-b", message="asks again")
    assert await first.wait_for(task_id, approval_id="ap2", owner="gw-a", message="asks again")
    assert not await second.finish(task_id, TaskStatus.COMPLETED, approval_id="ap1", result={"ok": True})
    assert await first.claim(task_id, approval_id="ap2", owner="gw-a", message="running again")
    assert await first.finish(task_id, TaskStatus.COMPLETED, owner="gw-a", result={"content": "done"})
    assert not await second.finish(task_id, TaskStatus.FAILED, error={"message": "too late"})
    task = await second.get(task_id)
    assert task is not None and task.terminal and task.result == {"content": "done"} and task.error is None
    shown = task.to_dict()
    assert shown["status"] == "completed" and shown["approval_id"] == "ap2" and "args" not in shown


async def test_live_tasks_are_counted_and_listed_per_session_and_expired_ones_pruned(backend: Backend) -> None:
    first, second = await _stores(backend)
    assert await first.live_count("main") == 0 and await first.oldest_live("main") is None
    one = await _waiting(first, session="main", person="ann")
    two = await _waiting(first, session="main", approval="ap2")
    other = await _waiting(first, session="side")
    assert await second.live_count("main") == 2
    created = await second.get(one)
    assert created is not None and created.person == "ann"
    assert await second.oldest_live("main") == created.created_at
    assert {t.id for t in await second.list(session="main")} == {one, two}
    assert len(await second.list(limit=2)) == 2 and len(await second.list()) == 3
    assert await second.finish(two, TaskStatus.FAILED, error={"message": "refused"})
    assert await second.live_count("main") == 1
    await (await backend.db()).execute(Sql("UPDATE tasks SET expires_at = 0 WHERE id = :id"), {"id": other})
    await first.prune()
    assert await first.get(other) is None and await first.get(one) is not None
    assert await first.get("no-such-task") is None


async def test_every_change_is_told_to_the_other_gateways_and_a_refused_one_is_not(backend: Backend) -> None:
    first, second = await _stores(backend)
    async with second.listen() as told:
        asked = await _waiting(first)
        assert not await first.claim(asked, approval_id="another", owner="gw-a", message="running")  # refused
        task_id = await _waiting(first, approval="ap2")
        assert await first.claim(task_id, approval_id="ap2", owner="gw-a", message="running")
        with anyio.fail_after(WAIT_S):
            # the refused claim told nobody: the next after `asked` being made is the other task
            assert [await anext(told), await anext(told), await anext(told)] == [asked, task_id, task_id]
        assert await first.finish(task_id, TaskStatus.COMPLETED, owner="gw-a", result={})
        with anyio.fail_after(WAIT_S):
            assert await anext(told) == task_id


def test_a_task_id_never_reads_as_a_command_line_option() -> None:
    """CI broke on `pincer tasks show -T13bW...`: url-safe base64 ids start with "-" one time in 64,
    and the CLI took such an id for an option. Ids are hex now, as approvals' are."""
    from pincer.store.tasks import new_task_id

    ids = {new_task_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(task_id) == 48 and set(task_id) <= set("0123456789abcdef") for task_id in ids)
