"""Instances: a row per process on a shared store, with a heartbeat, so that a gateway on one
machine can tell whether the owner of a claim, an approval wait, a run or the scheduler's leader
lock on another machine still runs.

Each process that opens a shared (PostgreSQL) store registers ``pincer_instances`` row ``id`` =
its owner token (``host/pid:start``, store/owners.py) and moves the row's ``heartbeat_at`` every
``INSTANCE_HEARTBEAT_S`` (:meth:`Instances.heartbeat`, a task of the process that opened the
stores). Closing the stores marks the row stopped. An owner on another host is dead when its row
is stopped or its heartbeat is older than ``INSTANCE_STALE_S`` (both read on the database's
clock, so the machines' clocks never matter), alive while it beats, and unknown (so alive: the
timeouts decide) when it has no row (a pincer from before instances were kept).

The heartbeat is a task on the event loop: a loop busy for a moment beats late, not never; one
stalled for ``INSTANCE_STALE_S`` (a process stopped with SIGSTOP, or hung) stops beating and is
then taken over as a dead one would be. A SQLite store is one machine's: it needs no instances
(this machine's owners are read from /proc), but the table and this store work on it too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass

import anyio

from pincer.core.errors import StoreError
from pincer.store.owners import Owners
from pincer.store.sql import Database
from pincer.store.sql.dialects import with_clock
from pincer.store.sql.statement import Sql

logger = logging.getLogger(__name__)

__all__ = ["Instances", "LiveInstance", "INSTANCE_HEARTBEAT_S", "INSTANCE_STALE_S", "INSTANCE_KEEP_S", "instance_tag"]

INSTANCE_HEARTBEAT_S = 2.0  # how often a process moves its row's heartbeat
INSTANCE_STALE_S = 10.0  # a row not moved for this long: its process is taken to be dead
INSTANCE_KEEP_S = 86_400.0  # rows stopped or stale for this long are deleted
_LOOKUP_CACHE_S = 1.0  # one owner's row is read at most this often per process
_SEEN_MAX = 10_000

_FORGET = with_clock("DELETE FROM pincer_instances WHERE COALESCE(stopped_at, heartbeat_at) < {now} - :keep")
_REGISTER = with_clock(
    "INSERT INTO pincer_instances (id, tag, host, pid, started_at, heartbeat_at, kind, home) "
    "VALUES (:id, :tag, :host, :pid, {now}, {now}, 'command', :home) ON CONFLICT (id) DO UPDATE "
    "SET heartbeat_at = excluded.heartbeat_at, stopped_at = NULL, home = excluded.home"
)
_SERVING = Sql("UPDATE pincer_instances SET kind = 'gateway', url = :url WHERE id = :id")
_BEAT = with_clock("UPDATE pincer_instances SET heartbeat_at = {now} WHERE id = :id")
_STOP = with_clock("UPDATE pincer_instances SET stopped_at = {now} WHERE id = :id")
_ALIVE = with_clock(
    "SELECT CASE WHEN stopped_at IS NULL AND heartbeat_at >= {now} - :stale THEN 1 ELSE 0 END "
    "FROM pincer_instances WHERE id = :id"
)
_STALE = with_clock("SELECT tag FROM pincer_instances WHERE stopped_at IS NOT NULL OR heartbeat_at < {now} - :stale")


@dataclass(frozen=True, kw_only=True, slots=True)
class LiveInstance:
    """A process that beats on the store now, as ``pincer doctor`` reports it."""

    host: str
    pid: int
    kind: str | None  # 'gateway', 'command', or None: a pincer from before kinds were kept
    home: str | None
    url: str | None

    def __str__(self) -> str:
        return f"{self.host}/pid {self.pid}"


_LIVE = with_clock(
    "SELECT host, pid, kind, home, url FROM pincer_instances "
    "WHERE stopped_at IS NULL AND heartbeat_at >= {now} - :stale ORDER BY started_at"
)


def instance_tag(token: str) -> str:
    """A short, fixed-length name of an owner token (a connection's application_name holds
    63 bytes, a host name alone may hold more)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:24]


class Instances:
    """This process's instance row and the rule for others' (``owners``)."""

    def __init__(self, db: Database, *, host: str | None = None, home: str | None = None) -> None:
        """``home``: this process's PINCER_HOME (resolved), so its gateway is told from others'."""
        self._db = db
        self._home = home
        self.owners = Owners(host, remote=self._remote_alive)
        self.tag = instance_tag(self.owners.token)
        self._seen: dict[str, tuple[float, bool | None]] = {}  # token -> (read at, alive)

    async def register(self) -> None:
        """Register this process's row (and forget rows long dead)."""
        async with self._db.transaction() as tx:
            tx.add(_FORGET, {"keep": INSTANCE_KEEP_S})
            tx.add(_REGISTER, {
                "id": self.owners.token, "tag": self.tag, "host": self.owners.host, "pid": os.getpid(), "home": self._home,
            })  # fmt: skip

    async def serving(self, url: str) -> None:
        """This process is a gateway, listening at ``url`` (a command never says so)."""
        await self._db.execute(_SERVING, {"id": self.owners.token, "url": url})

    async def heartbeat(self) -> None:
        """Move the row's heartbeat every ``INSTANCE_HEARTBEAT_S``, until cancelled."""
        while True:
            await anyio.sleep(INSTANCE_HEARTBEAT_S)
            try:
                await self._db.execute(_BEAT, {"id": self.owners.token})
            except StoreError as exc:  # the store is away a while: beat again next time
                logger.warning("the instance heartbeat failed (other gateways may take this one for dead): %s", exc)

    async def stop(self) -> None:
        """Mark the row stopped: what this process owned is free at once for the others."""
        try:
            await self._db.execute(_STOP, {"id": self.owners.token})
        except StoreError as exc:  # closing: the heartbeat's staleness says it soon anyway
            logger.info("could not mark this instance stopped: %s", exc)

    async def _remote_alive(self, token: str) -> bool | None:
        """Whether another machine's owner still beats (None: it has no row)."""
        now = time.monotonic()
        seen = self._seen.get(token)
        if seen is not None and now - seen[0] < _LOOKUP_CACHE_S:
            return seen[1]
        row = await self._db.fetch_one(_ALIVE, {"stale": INSTANCE_STALE_S, "id": token})
        alive = None if row is None else bool(row[0])
        if len(self._seen) > _SEEN_MAX:
            self._seen.clear()
        self._seen[token] = (now, alive)
        return alive

    @staticmethod
    async def live(db: Database) -> list[LiveInstance]:
        """The processes that beat on ``db`` now, oldest first."""
        rows = await db.fetch_all(_LIVE, {"stale": INSTANCE_STALE_S})
        return [LiveInstance(host=str(r[0]), pid=int(r[1]), kind=r[2], home=r[3], url=r[4]) for r in rows]

    async def stale_tags(self, tags: list[str]) -> set[str]:
        """Which of these instance tags name a row that is stopped or no longer beats."""
        if not tags:
            return set()
        rows = await self._db.fetch_all(_STALE, {"stale": INSTANCE_STALE_S})
        return {str(row[0]) for row in rows} & set(tags)
