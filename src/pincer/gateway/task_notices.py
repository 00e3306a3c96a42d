"""``subscriptions/listen`` with the Tasks extension's status notifications (docs/tasks.md).

On 2026-07-28 a client opts in to server events with a ``subscriptions/listen`` request whose
response is the stream. The extension adds ``taskIds`` to the request's ``notifications`` filter;
the server echoes the ids it accepts in the acknowledgement and then sends
``notifications/tasks`` on that stream each time one of those tasks changes, its params the
task exactly as ``tasks/get`` shows it to the same session (``@modelcontextprotocol/ext-tasks``:
``TaskStatusNotificationV2Schema``, ``contributeTaskFilterV2``, ``readAcceptedTaskIdsV2``).

The SDK's ``ListenHandler`` serves only the core kinds and drops unknown filter keys, so this
handler serves both: the core change events off the gateway's bus exactly as the SDK's does
(the SDK's public ``event_matches``/``event_to_notification``), and task changes off the store's
notifications, read from the gateway's one :class:`~pincer.gateway.task_feed.TaskFeed`
(PostgreSQL LISTEN/NOTIFY, so a change made on another gateway reaches the stream; on SQLite
another process's commit is told as RESYNC, and every followed task is read again).

Only the listening session's own tasks are accepted: another session's id, an unknown id and an
expired one are left out of the acknowledgement alike, and a change is delivered only to streams
of the task's session (checked again at delivery).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import anyio
import anyio.streams.memory
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ServerEvent, event_matches, event_to_notification
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    ServerNotification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
)
from pydantic import BaseModel

from pincer.gateway.task_feed import Feed, TaskFeed
from pincer.gateway.tasks import MAX_TASK_ID_CHARS, TaskReceiver
from pincer.gateway.tokens import GatewaySession
from pincer.store.sql.database import RESYNC
from pincer.store.tasks import Task

logger = logging.getLogger(__name__)

__all__ = ["ListenStreams", "TASK_IDS_KEY", "TASK_NOTIFICATION", "MAX_TASK_IDS", "requested_task_ids"]

TASK_IDS_KEY = "taskIds"
TASK_NOTIFICATION = "notifications/tasks"
# The most task ids one stream may name: a client follows the few tasks it is waiting on.
MAX_TASK_IDS = 256


class _TaskNotification(BaseModel):
    """``notifications/tasks``: the SDK's typed ``send_notification`` only dumps the model."""

    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: dict[str, Any]


@dataclass(eq=False, kw_only=True)
class _Watcher:
    """One stream's interest in tasks: its session, and what it last sent of each task."""

    session: str
    offer: Callable[[Task], None]
    sent: dict[str, tuple[str, str | None]] = field(default_factory=dict)


class _TaskWatch:
    """Which open streams follow which tasks, fed by the store's task notifications."""

    def __init__(self) -> None:
        self._by_task: dict[str, set[_Watcher]] = {}

    def add(self, watcher: _Watcher, task_ids: Sequence[str]) -> Callable[[], None]:
        for task_id in task_ids:
            self._by_task.setdefault(task_id, set()).add(watcher)

        def remove() -> None:
            for task_id in task_ids:
                self.drop(watcher, task_id)

        return remove

    def drop(self, watcher: _Watcher, task_id: str) -> None:
        watchers = self._by_task.get(task_id)
        if watchers is not None:
            watchers.discard(watcher)
            if not watchers:
                del self._by_task[task_id]

    def followed(self) -> list[str]:
        return list(self._by_task)

    def watched(self, task_id: str) -> bool:
        return task_id in self._by_task

    def changed(self, task: Task) -> None:
        for watcher in list(self._by_task.get(task.id, ())):
            if watcher.session != task.session:  # never another session's task, whatever was asked
                continue
            # A status change, or a new question in the same status (a fresh approval): not a
            # row touched without either (a cancel being requested of a running call).
            state = (task.status.value, task.status_message)
            if watcher.sent.get(task.id) == state:
                continue
            watcher.sent[task.id] = state
            watcher.offer(task)
            if task.terminal:
                self.drop(watcher, task.id)


class ListenStreams:
    """Serves ``subscriptions/listen``: one call is one stream of the core change events it
    asked for and of ``notifications/tasks`` for the tasks it named."""

    def __init__(
        self,
        bus: SubscriptionBus,
        *,
        session_of: Callable[[ServerRequestContext[Any, Any]], GatewaySession],
        tasks: Callable[[], TaskReceiver | None],
        feed: TaskFeed,
        max_subscriptions: int = 1024,
        max_buffered_events: int = 1024,
    ) -> None:
        self._bus = bus
        self._session_of = session_of
        self._tasks = tasks
        self._feed = feed
        self._max_subscriptions = max_subscriptions
        self._max_buffered_events = max_buffered_events
        self._streams: set[anyio.streams.memory.MemoryObjectSendStream[ServerEvent | Task]] = set()
        self._watch = _TaskWatch()
        # follow_tasks's own feed, once it runs: a new stream's tasks are read through it too.
        self._notes: Feed | None = None

    async def follow_tasks(self) -> None:
        """Deliver task changes to the streams that follow them (the store's notifications
        carry the task id; the row is read once per change, and only when a stream follows it)."""
        receiver = self._tasks()
        if receiver is None:
            return
        with self._feed.subscribe() as notes:
            self._notes = notes
            try:
                await self._deliver(receiver, notes)
            finally:
                self._notes = None

    async def _deliver(self, receiver: TaskReceiver, notes: Feed) -> None:
        async for note in notes:
            # Fallen behind, the listener is told RESYNC instead: read every followed task.
            for task_id in self._watch.followed() if note == RESYNC else [note]:
                if not self._watch.watched(task_id):
                    continue
                try:
                    task = await receiver.store.get(task_id)
                except Exception:  # a store hiccup: the stream's client can still poll tasks/get
                    logger.exception("reading task %s for its notification failed", task_id)
                    continue
                if task is not None:
                    self._watch.changed(task)

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
        requested = requested_task_ids(params.notifications)
        if len(self._streams) >= self._max_subscriptions:
            raise MCPError(INTERNAL_ERROR, "Subscription limit reached")
        receiver = self._tasks()
        session = self._session_of(ctx)
        accepted = await receiver.watchable(session, requested) if receiver is not None and requested else []
        honored = _honored(params.notifications, [task.id for task in accepted])
        uris = frozenset(honored.resource_subscriptions or ())
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, recv = anyio.create_memory_object_stream[ServerEvent | Task](self._max_buffered_events)

        def offer(item: ServerEvent | Task) -> None:
            try:
                send.send_nowait(item)
            except anyio.ClosedResourceError:
                pass  # closed by close(): the loop below is unwinding
            except anyio.WouldBlock:
                logger.warning("listen stream %r backlog full; ending the stream", subscription_id)
                self._streams.discard(send)
                send.close()

        def deliver(event: ServerEvent) -> None:
            if event_matches(honored, uris, event):
                offer(event)

        watcher = _Watcher(session=session.name, offer=offer)
        # Subscribed before the ack so nothing published while it is written is lost; each
        # accepted task's current state comes first, so a change made before the stream opened
        # is not missed either (the same state is never sent twice). That state is read once the
        # stream follows the task, by the loop that reads its changes (follow_tasks): a change
        # made while the rows above were read, which that loop may have passed over before this
        # stream followed the task, is in it, and no older row can be sent after a newer one.
        unsubscribe = self._bus.subscribe(deliver)
        unwatch = self._watch.add(watcher, [task.id for task in accepted])
        self._streams.add(send)
        notes = self._notes
        for task in accepted:
            if notes is not None:
                notes.put(task.id)
            else:  # the loop is not running (a gateway stopping): the rows read above
                self._watch.changed(task)
        try:
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
                ),
                related_request_id=subscription_id,
            )
            async for item in recv:
                if isinstance(item, Task):
                    assert receiver is not None  # only a receiver's tasks are queued
                    task_params = {**receiver.detailed(item, session), "_meta": meta}
                    notification = cast("ServerNotification", _TaskNotification(params=task_params))
                else:
                    notification = event_to_notification(item, meta)
                await ctx.session.send_notification(notification, related_request_id=subscription_id)
        finally:
            unsubscribe()
            unwatch()
            self._streams.discard(send)
            send.close()
            recv.close()
        return SubscriptionsListenResult(_meta=meta)

    def close(self) -> None:
        """End every open stream gracefully (each sends its listen result as its last frame)."""
        for stream in list(self._streams):
            stream.close()


def requested_task_ids(requested: SubscriptionFilter) -> list[str]:
    raw = (requested.model_extra or {}).get(TASK_IDS_KEY)
    if raw is None:
        return []
    if (
        not isinstance(raw, list)
        or len(raw) > MAX_TASK_IDS
        or not all(isinstance(task_id, str) and 0 < len(task_id) <= MAX_TASK_ID_CHARS for task_id in raw)
    ):
        raise MCPError(
            INVALID_PARAMS,
            f"notifications.{TASK_IDS_KEY} must be a list of at most {MAX_TASK_IDS} task ids "
            f"(strings of 1-{MAX_TASK_ID_CHARS} characters) as tools/call returned them",
        )
    return list(dict.fromkeys(raw))


def _honored(requested: SubscriptionFilter, task_ids: Sequence[str]) -> SubscriptionFilter:
    """What the acknowledgement echoes: every core kind asked for (as the SDK's handler
    does), and of the task ids only the accepted ones."""
    extra: dict[str, Any] = {TASK_IDS_KEY: list(task_ids)} if TASK_IDS_KEY in (requested.model_extra or {}) else {}
    return SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(requested.resource_subscriptions) if requested.resource_subscriptions else None,
        **extra,
    )
