"""A gateway listens to the store's task channel once (gateway/task_feed.py), however many of its
parts follow task changes: the tasks' sweep, the handshake-era status sender and tasks/result
waits, and the subscriptions/listen streams each read their own queue off that one listener
(tests/store/test_task_feed.py checks the queues).

Before: each of the three opened a listener of its own on the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pincer.store.tasks import TaskStore
from tests.gateway.conftest import live_gateway
from tests.gateway.test_tasks import Requester
from tests.gateway.test_tasks_notifications import listening
from tests.gateway.test_tasks_status import status_client

pytestmark = pytest.mark.anyio


async def test_a_gateway_listens_to_the_task_channel_once(
    pincer_home: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    listen = TaskStore.listen

    def counted(self: TaskStore) -> Any:
        opened.append("listen")
        return listen(self)

    monkeypatch.setattr(TaskStore, "listen", counted)
    async with live_gateway(pincer_home, config=store) as live, status_client(live) as handshake:
        # Every follower is at work: a handshake-era status notification and a listen stream's.
        made = await handshake.call_as_task("say", {"text": "told"})
        await handshake.told(made["taskId"], "completed")
        created = (await Requester(live).call("write_note", {"text": "streamed"}))["result"]
        async with listening(live, {"taskIds": [created["taskId"]]}) as stream:
            assert (await stream.next_task())["status"] == "input_required"
            await live.pincer.dispatcher.answer(
                (await live.pincer.tasks.get(created["taskId"])).approval_id or "", "allow_once", by="cli"
            )
            await stream.until(created["taskId"], "completed")
    assert opened == ["listen"], f"the gateway listened to the task channel {len(opened)} times"
