"""The gateway's one subscription to the store's task changes (gateway/task_feed.py), over a real
store on both backends: each follower reads a bounded queue of its own, a follower that never
reads is told RESYNC instead of a growing backlog while the others get every change in order.
tests/gateway/test_task_feed.py checks that a gateway listens to the task channel once.

Before: each of the gateway's three followers (the tasks' sweep, the handshake-era status sender
and tasks/result waits, the subscriptions/listen streams) opened a listener of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from pincer.gateway.task_feed import Feed, TaskFeed
from pincer.store.sql import RESYNC
from pincer.store.tasks import TaskStatus, TaskStore
from tests.gateway.test_tasks_status import within
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


async def _waiting(store: TaskStore, approval: str) -> str:
    task = await store.create(
        session="main", caller="mcp:client", tool="write_file", args={}, idempotency_key=None,
        status=TaskStatus.INPUT_REQUIRED, status_message="waits for a person", approval_id=approval, owner=None,
        ttl_ms=60_000, poll_ms=500,
    )  # fmt: skip
    return task.id


async def _next(feed: Feed, what: str) -> str:
    with within(what):
        return await anext(feed)


@asynccontextmanager
async def _running(feed: TaskFeed) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(feed.run)
        with within("the feed's listener on the store"):
            await feed.listening.wait()
        yield
        tg.cancel_scope.cancel()


async def test_a_follower_that_never_reads_holds_up_nobody_and_is_told_resync(backend: Backend) -> None:
    here, elsewhere = TaskStore(await backend.db()), TaskStore(await backend.db())
    feed = TaskFeed(lambda: here, bound=3)
    async with _running(feed):
        with feed.subscribe() as keeping, feed.subscribe() as stuck:
            made = []
            for n in range(6):  # twice the bound
                made.append(await _waiting(elsewhere, f"ap{n}"))
                assert await _next(keeping, f"the change of task {n} for the follower that reads") == made[-1]
            assert stuck.backlog == 1  # a RESYNC, not six ids
            assert await _next(stuck, "the stuck follower's RESYNC") == RESYNC
            # Caught up, it is told each change again, as the other is.
            assert await elsewhere.finish(made[0], TaskStatus.CANCELLED, approval_id="ap0", message="cancelled")
            assert await _next(stuck, "the next change for the caught-up follower") == made[0]
            assert await _next(keeping, "the same change for the other") == made[0]
        assert feed.followers() == 0


async def test_a_task_that_changes_twice_before_its_follower_reads_is_one_read(backend: Backend) -> None:
    store = TaskStore(await backend.db())
    feed = TaskFeed(lambda: store)
    async with _running(feed):
        with feed.subscribe() as follower, feed.subscribe() as witness:
            # The witness reads each change as it is made: once it has one, every follower has it
            # (the feed hands a note to all of them at once).
            one = await _waiting(store, "ap1")
            assert await _next(witness, "the witness's first change") == one
            two = await _waiting(store, "ap2")
            assert await _next(witness, "the witness's second change") == two
            assert await store.finish(one, TaskStatus.CANCELLED, approval_id="ap1", message="cancelled")
            assert await _next(witness, "the witness's third change") == one
            # Three changes, two tasks: in the order they first changed, one id each.
            assert follower.backlog == 2
            assert [await _next(follower, "the first id"), await _next(follower, "the second id")] == [one, two]
