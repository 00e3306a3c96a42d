"""Runs started over REST: each in the background of the gateway, with its events to follow.

``POST /api/v1/runs`` answers 202 with the run id at once; the run goes on in the manager's task
group (entered by the gateway's lifespan) and ``GET /api/v1/runs/{id}/events`` follows it as
server-sent events. The events of a run in this process are kept (at most ``MAX_KEPT_EVENTS``)
for ``KEEP_FINISHED_S`` after it ends; a run of another process, or one finished longer ago, is
told from the store: its transcript, then how it ended. Approvals a run waits for are answered
as any other: ``pincer approvals``, ``POST /api/v1/approvals/{id}`` or MCP elicitation.

Every event comes with a :class:`RunCursor` (its server-sent event id), so a follower that lost
its connection resumes after the last event it saw (``Last-Event-ID``): from the kept events of a
run of this process, else from the stored transcript after the last message it had seen.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.abc

from pincer.core.errors import RunNotFound, UsageError
from pincer.llm.loop import AgentLoop, AgentRun, carry_out
from pincer.llm.prompt import DEFAULT_MESSAGE
from pincer.llm.run import OutsideData, RunEvent, RunRequest
from pincer.store.runs import RunRow, RunStore

__all__ = ["RunManager", "RunCursor", "MAX_KEPT_EVENTS", "KEEP_FINISHED_S", "STORE_POLL_INTERVAL_S"]

MAX_KEPT_EVENTS = 10_000
KEEP_FINISHED_S = 600.0
STORE_POLL_INTERVAL_S = 0.5  # following a run of another process: how often the store is read


_CURSOR = re.compile(r"^(-1|0|[1-9][0-9]{0,17})(?:\.(0|[1-9][0-9]{0,17}))?$")


@dataclass(frozen=True, kw_only=True, slots=True)
class RunCursor:
    """Where in a run an event is: ``seq``, the last stored message before it (-1: none yet),
    and ``index``, its place among the events of a run of this process (None for an event told
    from the store). Written as ``SEQ`` or ``SEQ.INDEX``."""

    seq: int = -1
    index: int | None = None

    def to_id(self) -> str:
        return str(self.seq) if self.index is None else f"{self.seq}.{self.index}"

    @classmethod
    def parse(cls, text: str) -> RunCursor:
        """The cursor of an event id this server sent; UsageError for anything else."""
        found = _CURSOR.match(text.strip())
        if found is None:
            shown = text[:40] + ("..." if len(text) > 40 else "")
            raise UsageError(
                f"Last-Event-ID {shown!r} is not an event id of a run's events (SEQ or SEQ.INDEX)",
                hint="send back the id of the last event received, or leave the header out to start from the beginning",
            )
        seq, index = found.group(1), found.group(2)
        return cls(seq=int(seq), index=int(index) if index is not None else None)


class _Live:
    """One run of this process: its events so far, and a way to wait for the next."""

    def __init__(self) -> None:
        self.events: deque[tuple[int, RunEvent]] = deque(maxlen=MAX_KEPT_EVENTS)  # (seq, event)
        self.first = 0  # the index of events[0] among every event the run had
        self.changed = anyio.Event()
        self.run: AgentRun | None = None
        self.ended_at: float | None = None

    def add(self, event: RunEvent) -> None:
        if len(self.events) == self.events.maxlen:
            self.first += 1
        self.events.append((self.run.last_seq if self.run is not None else -1, event))
        changed, self.changed = self.changed, anyio.Event()
        changed.set()


class RunManager:
    def __init__(self, *, agent: Callable[[], AgentLoop], runs: RunStore) -> None:
        """``agent``: the service's agent loop, asked for at each start (it is made on first
        use); ``runs``: the store the runs are kept in."""
        self._agent = agent
        self._runs = runs
        self._live: dict[str, _Live] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[RunManager]:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                self._tg = None
                for live in self._live.values():
                    if live.run is not None and live.ended_at is None:
                        live.run.cancel()
                tg.cancel_scope.cancel()

    async def start(self, request: RunRequest) -> str:
        """Open the run (bad input raises here, before anything is written) and carry it out
        in the background; returns its id."""
        if self._tg is None:
            raise UsageError("runs can be started only while the gateway serves", hint="start it with `pincer serve`")
        self._forget_old()
        live = _Live()
        agent_run = await self._agent().open_run(request, on_event=live.add)
        live.run = agent_run
        self._live[agent_run.id] = live
        self._tg.start_soon(self._drive, agent_run, request, live)
        return agent_run.id

    async def _drive(self, agent_run: AgentRun, request: RunRequest, live: _Live) -> None:
        message = request.message or (DEFAULT_MESSAGE if request.skill else "")
        try:
            await carry_out(agent_run, message, stopped="the gateway stopped")
        finally:
            live.ended_at = time.monotonic()
            live.add(RunEvent(kind="closed"))

    def deliver(self, run_id: str, event: RunEvent, note: OutsideData | None = None, *, trusted: bool = False) -> bool:
        """Something from outside the run while it goes (a person's click on its canvas): ``event``
        joins the run's events; ``note``, when given, is the input of its next turn (untrusted
        unless ``trusted``). False when the run is not carried out here or has ended."""
        live = self._live.get(run_id)
        if live is None or live.run is None or live.ended_at is not None:
            return False
        live.add(event)
        if note is not None:
            live.run.deliver(note, trusted=trusted)
        return True

    async def cancel(self, run_id: str) -> RunRow:
        live = self._live.get(run_id)
        if live is not None and live.run is not None and live.ended_at is None:
            live.run.cancel()
        return await self._runs.request_cancel(run_id)

    def _forget_old(self) -> None:
        now = time.monotonic()
        for run_id in [k for k, v in self._live.items() if v.ended_at is not None and now - v.ended_at > KEEP_FINISHED_S]:
            del self._live[run_id]

    async def events(self, run_id: str, after: RunCursor | None = None) -> AsyncIterator[tuple[RunCursor, RunEvent]]:
        """Every event of the run (or those after ``after``), then new ones as they come, ending
        with ``ended``; each with its cursor."""
        live = self._live.get(run_id)
        never_sent = live is not None and after is not None and after.index is not None and after.index >= live.first + len(live.events)
        if live is None or (after is not None and after.index is None) or never_sent:
            async for item in self._from_store(run_id, after_seq=after.seq if after is not None else -1):
                yield item
            return
        index = live.first if after is None or after.index is None else after.index + 1
        while True:
            if index < live.first:
                index = live.first  # the oldest were dropped (MAX_KEPT_EVENTS)
            pending = list(live.events)[index - live.first :]
            waiter = live.changed
            for seq, event in pending:
                index += 1
                if event.kind == "closed":
                    return
                yield RunCursor(seq=seq, index=index - 1), event
            await waiter.wait()

    async def _from_store(self, run_id: str, *, after_seq: int) -> AsyncIterator[tuple[RunCursor, RunEvent]]:
        store = self._runs
        row = await store.get(run_id)  # RunNotFound for an unknown id
        seq = after_seq
        while True:
            for message in await store.messages(run_id, after_seq=seq):
                seq = message.seq
                yield RunCursor(seq=seq), RunEvent(kind="message", data=message.to_dict())
            row = await store.get(run_id)
            if row.is_final:
                ended = {"status": row.status, "stop": row.stop, "error": row.error, "usage": dict(row.usage), "cost_usd": row.cost_usd}
                yield RunCursor(seq=seq), RunEvent(kind="ended", data=ended)
                return
            await anyio.sleep(STORE_POLL_INTERVAL_S)

    async def is_known(self, run_id: str) -> bool:
        if run_id in self._live:
            return True
        try:
            await self._runs.get(run_id)
        except RunNotFound:
            return False
        return True
