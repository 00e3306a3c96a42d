"""Retention: what is finished leaves the store after its configured age (``[retention]``).

Three kinds, each deleted (or, for a payload, cleared) oldest first in batches, each batch its own
short transaction read along an index, the loop yielding between batches: a purge of 100,000
rows never holds the write lock (all of SQLite's, or PostgreSQL's row locks) for longer than one
batch, so calls that ask, answers and runs go on between batches.

- Answered and expired approval requests go by when they closed (``closed_at``: answered,
  expired, their caller gone), never by when they were made: ``APPROVALS_BATCH`` rows a batch,
  along ``approvals_closed (closed_at, id)``.
- Finished agent runs go by when they ended, with their transcripts in the same transaction:
  ``RUNS_BATCH`` runs a batch, along ``runs_ended (ended_at, id)`` (revision 0009 gave a finished
  run without ``ended_at`` its ``updated_at``, the age it went by before).
- The payloads webhooks delivered are cleared by the firing's time (the firing itself stays, as
  history): ``PAYLOADS_BATCH`` a batch, along ``trigger_firings_payload``, which holds only the
  delivered payloads still there, so a cleared one is never read again.

Anything still open (a pending request, a running run, a firing on its way) is never touched. Any
gateway may prune (the statements are idempotent; several at once delete each row once); ``pincer
db prune`` does it at once.

The audit log is not pruned here: its records leave the database only through ``pincer audit
archive`` (store/audit_archive.py), which writes them into signed segments first.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio.lowlevel

from pincer.store.sql import Database, Sql

__all__ = [
    "APPROVALS_BATCH", "PAYLOADS_BATCH", "RUNS_BATCH", "Pruned", "prune", "prune_approvals", "prune_payloads", "prune_runs",
    "PRUNE_EVERY_S",
]  # fmt: skip

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

RUNS_BATCH = 500  # finished runs (with their transcripts) deleted in one transaction
# The oldest finished runs, along runs_ended (ended_at, id): a running run has no ended_at, so it
# is never in the range; the status test says so again in case a row was written by hand.
_RUNS_BATCH = (
    "SELECT ended_at, id FROM runs WHERE ended_at < :before AND status != 'running' ORDER BY ended_at, id LIMIT :limit"
)
# The batch read above, as a range up to its last row (``:last_at``, ``:last_id``): the transcripts
# and the runs are deleted by the same range, so a run leaves with its transcript, and a gateway
# pruning at once finds fewer or none (a run that ends now ends after ``:before``).
_BATCH_RANGE = (
    "ended_at < :before AND status != 'running' AND ended_at <= :last_at AND (ended_at < :last_at OR id <= :last_id)"
)
_RUN_MESSAGES = Sql(f"DELETE FROM run_messages WHERE run_id IN (SELECT id FROM runs WHERE {_BATCH_RANGE})")
_RUNS = Sql(f"DELETE FROM runs WHERE {_BATCH_RANGE}")

PAYLOADS_BATCH = 500  # delivered webhook payloads cleared in one transaction
# The oldest delivered payloads still held, along trigger_firings_payload (ts, id), partial on
# these very terms (schema.py; a database uses a partial index only when the query says them all).
# SQLite is told the index: without statistics it prefers trigger_firings_by_name's ``kind = ?``
# and sorts every hook firing for each batch (INDEXED BY also makes a missing index an error).
_HELD = "payload IS NOT NULL AND kind = 'hook' AND status NOT IN ('queued', 'starting', 'started')"


def _payloads_batch(hint: str) -> str:
    return f"SELECT id FROM trigger_firings{hint} WHERE {_HELD} AND ts < :before ORDER BY ts, id LIMIT :limit"


_PAYLOADS_BATCH = Sql(_payloads_batch(" INDEXED BY trigger_firings_payload"), postgresql=_payloads_batch(""))
_PAYLOADS = Sql(
    f"UPDATE trigger_firings SET payload = NULL WHERE id IN ({_PAYLOADS_BATCH.text})",
    postgresql=f"UPDATE trigger_firings SET payload = NULL WHERE id IN ({_payloads_batch('')})",
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
    if runs_days:
        counts["runs"], counts["run_messages"] = await prune_runs(db, before=now - runs_days * _DAY_S)
    if webhook_payloads_days:
        counts["webhook_payloads"] = await prune_payloads(db, before=now - webhook_payloads_days * _DAY_S)
    return Pruned(**counts)


async def prune_approvals(db: Database, *, before: float, batch: int = APPROVALS_BATCH) -> int:
    """Delete the requests that closed before ``before``, ``batch`` at a time, each batch its own
    transaction; how many went. Another gateway pruning at once deletes each row once (a batch
    whose rows it took finds fewer, or none)."""
    return await _in_batches(db, _APPROVALS, {"before": before}, batch)


async def prune_payloads(db: Database, *, before: float, batch: int = PAYLOADS_BATCH) -> int:
    """Clear the delivered webhook payloads of firings before ``before``, ``batch`` at a time;
    how many were cleared."""
    return await _in_batches(db, _PAYLOADS, {"before": before}, batch)


async def _in_batches(db: Database, statement: Sql, params: dict[str, float], batch: int) -> int:
    done = 0
    while True:
        async with db.transaction() as tx:
            gone = await tx.execute(statement, {**params, "limit": batch})
        done += gone
        if gone < batch:
            return done
        await anyio.lowlevel.checkpoint()  # what waits on the loop (a call, an answer) runs between batches


async def prune_runs(db: Database, *, before: float, batch: int = RUNS_BATCH) -> tuple[int, int]:
    """Delete the runs that ended before ``before`` and their transcripts, ``batch`` runs at a
    time, each batch (a run with its messages) its own transaction; (runs, messages) deleted."""
    runs = messages = 0
    while True:
        async with db.transaction() as tx:
            found = await tx.fetch_all(Sql(_RUNS_BATCH), {"before": before, "limit": batch})
            if found:
                last = {"before": before, "last_at": found[-1][0], "last_id": found[-1][1]}
                messages += await tx.execute(_RUN_MESSAGES, last)
                runs += await tx.execute(_RUNS, last)
        if len(found) < batch:
            return runs, messages
        await anyio.lowlevel.checkpoint()
