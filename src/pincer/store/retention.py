"""Retention: what is finished leaves the store after its configured age (``[retention]``).

Answered and expired approval requests go by when they closed (``closed_at``: answered,
expired, their caller gone), never by when they were made, in batches of ``APPROVALS_BATCH``
rows, each its own short transaction read along the ``(closed_at, id)`` index: a purge of
100,000 requests never holds the write lock (all of SQLite's, or PostgreSQL's row locks) for
longer than one batch, so calls that ask, and answers, go on between batches. Finished agent runs
with their transcripts, and the payloads webhooks delivered (the firing itself stays, as
history), are deleted in one transaction after. Anything still open (a pending request, a
running run, a firing on its way) is never touched. Any gateway may prune (the statements are
idempotent; several at once delete each row once); ``pincer db prune`` does it at once.

The audit log is not pruned here: its records leave the database only through ``pincer audit
archive`` (store/audit_archive.py), which writes them into signed segments first.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio.lowlevel

from pincer.store.sql import Database, Sql

__all__ = ["APPROVALS_BATCH", "Pruned", "prune", "prune_approvals", "PRUNE_EVERY_S"]

PRUNE_EVERY_S = 3_600.0
_DAY_S = 86_400.0

APPROVALS_BATCH = 500  # closed requests deleted in one transaction
# The oldest closed requests, along approvals_closed (closed_at, id): a range read of the batch,
# never a scan of the table. A pending request has no closed_at, so it is never in the range;
# the status test says so again in case a row was written by hand.
_APPROVALS_BATCH = (
    "SELECT id FROM approvals WHERE closed_at < :before AND status != 'pending' ORDER BY closed_at, id LIMIT :limit"
)
_APPROVALS = Sql(f"DELETE FROM approvals WHERE id IN ({_APPROVALS_BATCH})")
_ENDED_RUNS = "SELECT id FROM runs WHERE status != 'running' AND COALESCE(ended_at, updated_at) < :before"
_RUN_MESSAGES = Sql(f"DELETE FROM run_messages WHERE run_id IN ({_ENDED_RUNS})")
_RUNS = Sql("DELETE FROM runs WHERE status != 'running' AND COALESCE(ended_at, updated_at) < :before")
_PAYLOADS = Sql(
    "UPDATE trigger_firings SET payload = NULL WHERE payload IS NOT NULL AND kind = 'hook' "
    "AND status NOT IN ('queued', 'starting', 'started') AND ts < :before"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Pruned:
    approvals: int = 0
    runs: int = 0
    run_messages: int = 0
    webhook_payloads: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"approvals": self.approvals, "runs": self.runs, "run_messages": self.run_messages,
                "webhook_payloads": self.webhook_payloads}  # fmt: skip


async def prune(
    db: Database, *, now: float, approvals_days: float, runs_days: float, webhook_payloads_days: float
) -> Pruned:
    """Delete what finished more than its days ago (0 days: keep that kind forever)."""
    counts = {"approvals": 0, "runs": 0, "run_messages": 0, "webhook_payloads": 0}
    if approvals_days:
        counts["approvals"] = await prune_approvals(db, before=now - approvals_days * _DAY_S)
    async with db.transaction() as tx:
        if runs_days:
            before = {"before": now - runs_days * _DAY_S}
            counts["run_messages"] = await tx.execute(_RUN_MESSAGES, before)
            counts["runs"] = await tx.execute(_RUNS, before)
        if webhook_payloads_days:
            counts["webhook_payloads"] = await tx.execute(_PAYLOADS, {"before": now - webhook_payloads_days * _DAY_S})
    return Pruned(**counts)


async def prune_approvals(db: Database, *, before: float, batch: int = APPROVALS_BATCH) -> int:
    """Delete the requests that closed before ``before``, ``batch`` at a time, each batch its own
    transaction; how many went. Another gateway pruning at once deletes each row once (a batch
    whose rows it took finds fewer, or none)."""
    deleted = 0
    while True:
        async with db.transaction() as tx:
            gone = await tx.execute(_APPROVALS, {"before": before, "limit": batch})
        deleted += gone
        if gone < batch:
            return deleted
        await anyio.lowlevel.checkpoint()  # what waits on the loop (a call, an answer) runs between batches
