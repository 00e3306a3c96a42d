"""Handshake-era (2025-11-25) task changes on one gateway: ``notifications/tasks/status`` to the
connection whose ``tools/call`` made each task, and the waits of ``tasks/result`` and
``tasks/cancel`` (docs/tasks.md).

Both ride the store's task notifications (:data:`~pincer.store.tasks.TASK_CHANNEL`: PostgreSQL
LISTEN/NOTIFY, so a change made on another gateway is heard here; on SQLite this process's own
changes by id and another process's as RESYNC), read from the gateway's one
:class:`~pincer.gateway.task_feed.TaskFeed` and fanned out here by task id. RESYNC (a listener
that fell behind or reconnected, a commit of another SQLite process) wakes everyone; a waiter
also looks at its row again after at most the bound it waits with, should a notification be
missed all the same.

A status notification goes only to the MCP connection that created the task: never another
connection, whether of the same pincer session or not (the spec's requestor is the party that
sent the request). It carries the task as ``tasks/get`` shows it, so never the call's arguments,
result or error. Sending is best-effort (the SDK drops a notification for a connection without
an open GET stream) and never holds up the listener: changed ids are coalesced for one sender,
which gives each send at most :data:`SEND_TIMEOUT_S`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.session import ServerSession

from pincer.gateway.task_feed import TaskFeed
from pincer.store.sql import RESYNC
from pincer.store.tasks import Task, TaskStore

logger = logging.getLogger(__name__)

__all__ = ["TaskChanges", "Wake", "SEND_TIMEOUT_S", "STATUS_NOTIFICATION"]

STATUS_NOTIFICATION = "notifications/tasks/status"
# How long one status notification may take to leave (a client not reading its GET stream
# must not hold up every other task's notification).
SEND_TIMEOUT_S = 5.0


class Wake:
    """One waiter's flag: set when its task changed (or RESYNC) since it last waited."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    @property
    def changed(self) -> bool:
        """Whether a change came since the last wait (the next one then returns at once)."""
        return self._event.is_set()

    async def wait(self, timeout_s: float) -> None:
        """Until the task changes, or ``timeout_s`` (then the caller reads its row anyway)."""
        with anyio.move_on_after(timeout_s):
            await self._event.wait()
        self._event = anyio.Event()


@dataclass(eq=False, kw_only=True)
class _Followed:
    """A task whose changes its creating connection is told: what it was last told."""

    connection: ServerSession
    owner: str  # the pincer session of the task, checked again at each delivery
    sent: tuple[str, str | None]
    expires_at: float


class TaskChanges:
    """One gateway's fan-out of the store's task notifications by task id."""

    def __init__(
        self, feed: TaskFeed, store: Callable[[], TaskStore], shape: Callable[[Task], dict[str, Any]]
    ) -> None:
        self._feed = feed
        self._store = store
        self._shape = shape  # the task as tasks/get shows it (handshake_tasks.wire_task)
        self._waiters: dict[str, set[Wake]] = {}
        self._followed: dict[str, _Followed] = {}
        # Changed ids waiting for the sender, in order, each once (a dict as an ordered set):
        # bounded by the tasks followed, however many notifications arrive.
        self._pending: dict[str, None] = {}
        self._wanted = anyio.Event()
        # Set once run() follows the feed and the feed listens: a change written before then is
        # heard by nobody here.
        self.listening = anyio.Event()

    @contextmanager
    def watch(self, task_id: str) -> Iterator[Wake]:
        """A :class:`Wake` for ``task_id``'s changes. Watch before reading the row: a change
        made after the read then sets it, and the next wait returns at once."""
        wake = Wake()
        self._waiters.setdefault(task_id, set()).add(wake)
        try:
            yield wake
        finally:
            waiters = self._waiters.get(task_id)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiters[task_id]

    def follow(self, task: Task, connection: ServerSession) -> None:
        """Tell ``connection`` (the one whose request made ``task``) each change of its status."""
        now = time.time()
        for task_id in [tid for tid, followed in self._followed.items() if followed.expires_at < now]:
            del self._followed[task_id]  # its connection was never told it ended: it expired
        self._followed[task.id] = _Followed(
            connection=connection, owner=task.session, sent=self._state(task), expires_at=task.expires_at
        )
        # A change made between the task's creation and now was heard before it was followed.
        self.noted(task.id)

    def followed(self) -> list[str]:
        return list(self._followed)

    def noted(self, note: str) -> None:
        """A store notification: ``note`` is a task id, or RESYNC (anything may have changed)."""
        waiting = list(self._waiters) if note == RESYNC else [note]
        for task_id in waiting:
            for wake in self._waiters.get(task_id, ()):
                wake.set()
        for task_id in list(self._followed) if note == RESYNC else [note]:
            if task_id in self._followed:
                self._pending[task_id] = None
                self._wanted.set()

    async def run(self) -> None:
        """Follow the gateway's task feed and send the status notifications, until cancelled."""
        with self._feed.subscribe() as notes:
            await self._feed.listening.wait()
            self.listening.set()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._tell)
                async for note in notes:
                    self.noted(note)

    async def _tell(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted = anyio.Event()
            pending, self._pending = list(self._pending), {}
            for task_id in pending:
                await self._tell_one(task_id)

    async def _tell_one(self, task_id: str) -> None:
        followed = self._followed.get(task_id)
        if followed is None:
            return
        try:
            task = await self._store().get(task_id)
        except Exception:  # a store hiccup: the client can still poll tasks/get
            logger.exception("reading task %s for its status notification failed", task_id)
            return
        if task is None or task.session != followed.owner:  # pruned (or, never, another's)
            self._followed.pop(task_id, None)
            return
        state = self._state(task)
        # A status change, or a new question in the same status (a fresh approval): not a row
        # touched without either (a cancel being requested of a running call).
        if state == followed.sent:
            return
        followed.sent = state
        if task.terminal:
            self._followed.pop(task_id, None)
        try:
            params = types.TaskStatusNotificationParams.model_validate(self._shape(task), by_name=False)
            # The SDK's typed send only dumps the model; its ServerNotification union leaves this
            # 2025-11-25 notification out (types only), as it leaves out every tasks/* message.
            notification = cast("types.ServerNotification", types.TaskStatusNotification(params=params))
            with anyio.move_on_after(SEND_TIMEOUT_S):
                await followed.connection.send_notification(notification)
        except Exception as exc:  # best-effort (a closed connection): tasks/get still answers  # noqa: BLE001
            logger.info("task %s: its status notification was not sent: %s", task_id, exc)

    def _state(self, task: Task) -> tuple[str, str | None]:
        shown = self._shape(task)
        return str(shown["status"]), shown.get("statusMessage")
