"""The fan-out of the store's task notifications that a handshake-era ``tasks/result`` waits on
(gateway/task_status.py), over a real store on both backends: a change written through another
database connection (another gateway's) wakes the waiters of that task and no other, RESYNC
wakes every waiter, and a wait nobody wakes still ends at its bound.

Before: a blocked ``tasks/result`` slept 0.2 s between reads of its row whatever happened."""

from __future__ import annotations

import anyio
import pytest

from pincer.gateway.handshake_tasks import wire_task
from pincer.gateway.task_feed import TaskFeed
from pincer.gateway.task_status import TaskChanges
from pincer.store.sql import RESYNC
from pincer.store.tasks import TaskStatus, TaskStore
from tests.gateway.test_tasks_status import within
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


async def _waiting(store: TaskStore, approval: str) -> str:
    task = await store.create(
        session="main", caller="mcp:client", tool="write_file", args={"path": "notes.txt"}, idempotency_key=None,
        status=TaskStatus.INPUT_REQUIRED, status_message="waits for a person", approval_id=approval, owner=None,
        ttl_ms=60_000, poll_ms=500,
    )  # fmt: skip
    return task.id


async def test_a_change_written_elsewhere_wakes_that_tasks_waiters_only(backend: Backend) -> None:
    here, elsewhere = TaskStore(await backend.db()), TaskStore(await backend.db())
    feed = TaskFeed(lambda: here)
    changes = TaskChanges(feed, lambda: here, wire_task)
    one, two = await _waiting(elsewhere, "ap1"), await _waiting(elsewhere, "ap2")
    async with anyio.create_task_group() as tg:
        tg.start_soon(feed.run)
        tg.start_soon(changes.run)
        with within("the gateway's listener on the store"):
            await changes.listening.wait()
        with changes.watch(one) as woken, changes.watch(two) as untouched, changes.watch(one) as also:
            assert await elsewhere.finish(one, TaskStatus.CANCELLED, approval_id="ap1", message="cancelled")
            with within(f"the change of task {one} to wake its waiter"):
                await woken.wait(3600.0)  # the bound is an hour off: only the notification ends it
            assert also.changed and not untouched.changed
            changes.noted(RESYNC)  # a listener that missed notifications: everyone reads again
            assert untouched.changed
        tg.cancel_scope.cancel()


async def test_a_wait_nobody_wakes_ends_at_its_bound_and_an_ended_watch_is_forgotten(backend: Backend) -> None:
    store = TaskStore(await backend.db())
    changes = TaskChanges(TaskFeed(lambda: store), lambda: store, wire_task)
    task_id = await _waiting(store, "ap1")
    with changes.watch(task_id) as wake:
        with within("a wait bounded at 0.01 s to end"):
            await wake.wait(0.01)
        assert not wake.changed
    changes.noted(task_id)  # nobody watches it any more, and nobody follows it
    assert not wake.changed and changes.followed() == []
