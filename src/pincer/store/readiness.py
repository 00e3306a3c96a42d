"""Whether the stores can serve: what ``GET /readyz`` asks of them (docs/operations.md).

Each check answers with one word, never a URL, a host or a driver's message (``/readyz`` needs no
token): ``ok``; ``unreachable`` (no answer within :data:`PROBE_TIMEOUT_S`); ``schema_mismatch``
(the database answers at another schema than this pincer's: ``pincer db upgrade``, or an older
pincer); ``backlog`` (more than :data:`AUDIT_BACKLOG_MAX` audit records wait for their commit).
The reason behind a failed check is logged.

The database is asked on a connection of its own in a worker thread: a probe never waits on the
event loop, and a hung server costs the probe its timeout, not the gateway.
"""

from __future__ import annotations

import logging
import sqlite3
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from pincer.store.db import _SCHEMA_VERSION, DB_FILENAME

logger = logging.getLogger(__name__)

__all__ = ["database_check", "cache_check", "audit_check", "PROBE_TIMEOUT_S", "AUDIT_BACKLOG_MAX"]

PROBE_TIMEOUT_S = 2.0
AUDIT_BACKLOG_MAX = 1_000


async def database_check(home: Path, pools: Any = None) -> str:
    """The SQLite database under ``home``, or PostgreSQL through ``pools`` (``PgPools``) when set."""
    check = partial(_postgres, pools) if pools is not None else partial(_sqlite, home / DB_FILENAME)
    with anyio.move_on_after(PROBE_TIMEOUT_S + 1.0):
        return await anyio.to_thread.run_sync(check, abandon_on_cancel=True)
    logger.warning("readiness: the database did not answer within %.0f s", PROBE_TIMEOUT_S + 1.0)
    return "unreachable"


def _sqlite(path: Path) -> str:
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=PROBE_TIMEOUT_S)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        logger.warning("readiness: the SQLite database cannot be read: %s", exc)
        return "unreachable"
    return _schema(version, _SCHEMA_VERSION)


def _postgres(pools: Any) -> str:
    from pincer.store.pg.schema import SCHEMA_VERSION, schema_version

    try:
        with pools.sync.connection(timeout=PROBE_TIMEOUT_S) as conn:
            version = schema_version(conn)
    except Exception as exc:  # psycopg's errors and the pool's timeout alike: not reachable now  # noqa: BLE001
        logger.warning("readiness: PostgreSQL does not answer (%s)", type(exc).__name__)
        return "unreachable"
    return _schema(version, SCHEMA_VERSION)


def _schema(found: int, known: int) -> str:
    if found == known:
        return "ok"
    logger.warning("readiness: the database is at schema %d, this pincer's is %d", found, known)
    return "schema_mismatch"


async def cache_check(limiter: Any) -> str:
    """Redis behind ``[cache] url`` (``SharedRateLimiter``): it answers a PING."""
    with anyio.move_on_after(PROBE_TIMEOUT_S):
        return "ok" if await limiter.ping() else "unreachable"
    logger.warning("readiness: Redis did not answer within %.0f s", PROBE_TIMEOUT_S)
    return "unreachable"


def audit_check(queue_depth: int) -> str:
    """The audit writer keeps up: few records wait for their commit."""
    if queue_depth <= AUDIT_BACKLOG_MAX:
        return "ok"
    logger.warning("readiness: %d audit records wait for their commit", queue_depth)
    return "backlog"
