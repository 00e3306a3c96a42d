"""Whether the stores can serve: what ``GET /readyz`` asks of them (docs/operations.md).

Each check answers with one word, never a URL, a host or a driver's message (``/readyz`` needs no
token): ``ok``; ``unreachable`` (no answer within :data:`PROBE_TIMEOUT_S`); ``schema_mismatch``
(the database answers at another schema than this pincer's: ``pincer db upgrade``, or an older
pincer); ``backlog`` (more than :data:`AUDIT_BACKLOG_MAX` audit records wait for their commit).
The reason behind a failed check is logged.

The database is asked through the stores' own database object (store/sql): its reads run off the
event loop (SQLite's reader threads, PostgreSQL's async pool), and the probe gives up after
:data:`PROBE_TIMEOUT_S`, so a hung server costs the probe its timeout, not the gateway.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from pincer.store.sql.database import Database
from pincer.store.sql.migrate import is_current

logger = logging.getLogger(__name__)

__all__ = ["database_check", "cache_check", "audit_check", "PROBE_TIMEOUT_S", "AUDIT_BACKLOG_MAX"]

PROBE_TIMEOUT_S = 2.0
AUDIT_BACKLOG_MAX = 1_000


async def database_check(db: Database) -> str:
    """The stores' database (SQLite under the home, or PostgreSQL): it answers, at this schema."""
    with anyio.move_on_after(PROBE_TIMEOUT_S):
        try:
            current = await is_current(db)
        except Exception as exc:  # the drivers' errors and the pool's timeout alike: not reachable now  # noqa: BLE001
            logger.warning("readiness: the database does not answer (%s)", type(exc).__name__)
            return "unreachable"
        if current:
            return "ok"
        logger.warning("readiness: the database is not at this pincer's schema")
        return "schema_mismatch"
    logger.warning("readiness: the database did not answer within %.0f s", PROBE_TIMEOUT_S)
    return "unreachable"


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
