"""Instances: a row per process on the shared PostgreSQL store, with a heartbeat, so that a
gateway on one machine can tell whether the owner of a claim, an approval wait, a run or the
scheduler lease on another machine still runs.

Each process that opens the PostgreSQL stores registers ``pincer_instances`` row ``id`` = its
owner token (``host/pid:start``, store/owners.py), and a thread of its own moves the row's
``heartbeat_at`` every ``INSTANCE_HEARTBEAT_S``. Closing the stores marks the row stopped. An
owner on another host is dead when its row is stopped or its heartbeat is older than
``INSTANCE_STALE_S`` (both read on the database's clock, so the machines' clocks never matter),
alive while it beats, and unknown (so alive: the timeouts decide) when it has no row (a pincer
from before issue 29).

The heartbeat runs on a thread, not the event loop: a gateway whose loop is busy for a moment
is not declared dead for it; a process that is stopped (SIGSTOP) or hung as a whole stops
beating, and is then taken over as a dead one would be.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from typing import Any

from pincer.store.owners import Owners
from pincer.store.pg.connect import PgPools

logger = logging.getLogger(__name__)

__all__ = ["PgInstances", "INSTANCE_HEARTBEAT_S", "INSTANCE_STALE_S", "INSTANCE_KEEP_S", "instance_tag"]

INSTANCE_HEARTBEAT_S = 2.0  # how often a process moves its row's heartbeat
INSTANCE_STALE_S = 10.0  # a row not moved for this long: its process is taken to be dead
INSTANCE_KEEP_S = 86_400.0  # rows stopped or stale for this long are deleted
_LOOKUP_CACHE_S = 1.0  # one owner's row is read at most this often per process
_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"


def instance_tag(token: str) -> str:
    """A short, fixed-length name of an owner token (a connection's application_name holds
    63 bytes, a host name alone may hold more)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:24]


class PgInstances:
    """This process's instance row and the rule for others' (``owners``)."""

    def __init__(self, pools: PgPools, *, host: str | None = None) -> None:
        self._pools = pools
        self.owners = Owners(host, remote=self._remote_alive)
        self.tag = instance_tag(self.owners.token)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen: dict[str, tuple[float, bool | None]] = {}  # token -> (read at, alive)
        self._lock = threading.Lock()

    def start(self) -> None:
        """Register this process's row and start its heartbeat."""
        with self._pools.sync.connection() as conn:
            conn.execute(
                f"DELETE FROM pincer_instances WHERE COALESCE(stopped_at, heartbeat_at) < {_NOW} - %s",
                (INSTANCE_KEEP_S,),
            )
            conn.execute(
                "INSERT INTO pincer_instances (id, tag, host, pid, started_at, heartbeat_at) "
                f"VALUES (%s, %s, %s, %s, {_NOW}, {_NOW}) ON CONFLICT (id) DO UPDATE "
                "SET heartbeat_at = EXCLUDED.heartbeat_at, stopped_at = NULL",
                (self.owners.token, self.tag, self.owners.host, os.getpid()),
            )
        self._thread = threading.Thread(target=self._beat, name="pincer-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(INSTANCE_HEARTBEAT_S):
            try:
                with self._pools.sync.connection() as conn:
                    conn.execute(
                        f"UPDATE pincer_instances SET heartbeat_at = {_NOW} WHERE id = %s", (self.owners.token,)
                    )
            except Exception as exc:  # noqa: BLE001 - psycopg.Error or the pool's timeout: beat again next time
                logger.warning("the instance heartbeat failed (other gateways may take this one for dead): %s", exc)

    def stop(self) -> None:
        """Stop the heartbeat and mark the row stopped: what this process owned is free at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=INSTANCE_HEARTBEAT_S * 5)
        try:
            with self._pools.sync.connection() as conn:
                conn.execute(f"UPDATE pincer_instances SET stopped_at = {_NOW} WHERE id = %s", (self.owners.token,))
        except Exception as exc:  # noqa: BLE001 - closing: the heartbeat's staleness says it soon anyway
            logger.info("could not mark this instance stopped: %s", exc)

    def _remote_alive(self, token: str) -> bool | None:
        """Whether another machine's owner still beats (None: it has no row)."""
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(token)
        if seen is not None and now - seen[0] < _LOOKUP_CACHE_S:
            return seen[1]
        with self._pools.sync.connection() as conn:
            row = conn.execute(
                f"SELECT stopped_at IS NULL AND heartbeat_at >= {_NOW} - %s FROM pincer_instances WHERE id = %s",
                (INSTANCE_STALE_S, token),
            ).fetchone()
        alive = None if row is None else bool(row[0])
        with self._lock:
            if len(self._seen) > 10_000:
                self._seen.clear()
            self._seen[token] = (now, alive)
        return alive

    def stale_tags(self, tags: list[str]) -> set[str]:
        """Which of these instance tags name a row that is stopped or no longer beats."""
        if not tags:
            return set()
        with self._pools.sync.connection() as conn:
            rows: list[Any] = conn.execute(
                f"SELECT tag FROM pincer_instances WHERE tag = ANY(%s) "
                f"AND (stopped_at IS NOT NULL OR heartbeat_at < {_NOW} - %s)",
                (tags, INSTANCE_STALE_S),
            ).fetchall()
        return {str(row[0]) for row in rows}
