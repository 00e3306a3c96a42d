"""What the trigger engine commits: a firing and its audit record in one transaction, and the
queue worker's ``started`` / ended states of firings handed over together in one transaction.

Failed before: each firing took its insert, its audit record and the firing's audit id (three
commits), and each handed-over firing two commits of its own (``started``, then how it ended).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pincer.store.sql.sqlite import SqliteDatabase
from pincer.triggers.clock import ManualClock
from pincer.triggers.requests import TriggerKind
from tests.triggers.conftest import open_pincer, running_engine, utc
from tests.triggers.recording import RecordingStarter

pytestmark = pytest.mark.anyio
SETTLE_TIMEOUT_S = 60.0
FIRINGS = 16


async def test_firings_handed_over_together_record_their_states_in_shared_transactions(pincer_home: Path) -> None:
    async with open_pincer(pincer_home) as pincer:
        starter = RecordingStarter()
        async with running_engine(pincer, starter, ManualClock(utc(2026, 12, 2, 6))) as engine:
            statements: list[str] = []
            assert isinstance(pincer.db, SqliteDatabase)
            await pincer.db.trace(statements.append)
            try:
                with anyio.fail_after(SETTLE_TIMEOUT_S):
                    async with anyio.create_task_group() as tg:
                        for n in range(FIRINGS):
                            tg.start_soon(lambda n=n: engine.fire(
                                kind=TriggerKind.MANUAL, name=f"t{n}", fired_by="test", skill=None, params={},
                                message="hello", session="main"))  # fmt: skip
                    await engine.settle()
            finally:
                await pincer.db.trace(None)
        firings = await pincer.trigger_store.firings(limit=100)
        assert len(firings) == FIRINGS and all(f.status == "done" for f in firings)
        records = {r.id: r.idempotency_key for r in await pincer.audit.records()}
        assert all(records[f.audit_id] == f.id for f in firings if f.audit_id is not None)
        assert all(f.audit_id is not None for f in firings)
        assert _state_commits(statements) < 2 * FIRINGS, statements
        started = [s for s in statements if s.startswith("UPDATE trigger_firings SET status = 'started'")]
        ended = [s for s in statements if s.startswith("UPDATE trigger_firings SET status") and "ended_at" in s]
        assert len(started) == len(ended) == FIRINGS  # each firing's states recorded
        # Firings and their records share the audit log's commits; the states share theirs.
        assert not any(s.startswith("UPDATE trigger_firings SET audit_id") for s in statements)
        assert _state_commits(statements) < 2 * FIRINGS, statements


def _state_commits(statements: list[str]) -> int:
    """Commits that wrote a firing's started or ended state (a write outside BEGIN is its own)."""
    commits, in_tx, wrote = 0, False, False
    for statement in statements:
        is_state = statement.startswith("UPDATE trigger_firings SET status") and (
            "'started'" in statement or "ended_at" in statement
        )
        if statement.startswith("BEGIN"):
            in_tx, wrote = True, False
        elif statement in ("COMMIT", "ROLLBACK"):
            commits += int(wrote and statement == "COMMIT")
            in_tx = False
        elif is_state:
            if in_tx:
                wrote = True
            else:
                commits += 1
    return commits
