"""``[retention]``: what finished long enough ago leaves the store; nothing open, nothing recent,
and never an audit record (store/retention.py). Both databases.

Before, closed approvals went by ``COALESCE(answered_at, expires_at)`` in one DELETE, in the same
transaction as the runs: a purge of 100,000 requests held the write lock for all of them, and a
row's age was not the ``closed_at`` the dashboard lists it by. Now they go by ``closed_at``,
``APPROVALS_BATCH`` rows a transaction, read along the ``(closed_at, id)`` index. Finished runs
(with their transcripts) and delivered webhook payloads went in one statement each; now in batches
too (revision 0009's ``runs_ended`` and ``trigger_firings_payload`` indexes)."""

from __future__ import annotations

from typing import Any

import pytest

from pincer.store.retention import (
    _APPROVALS,
    _APPROVALS_BATCH,
    _PAYLOADS,
    _PAYLOADS_BATCH,
    _RUN_MESSAGES,
    _RUNS,
    _RUNS_BATCH,
    APPROVALS_BATCH,
    PAYLOADS_BATCH,
    RUNS_BATCH,
    prune,
    prune_approvals,
)
from pincer.store.sql import Sql
from tests.store.conftest import Backend, query_plan

DAY = 86_400.0
NOW = 100 * DAY


def _seed(backend: Backend) -> None:
    old, recent = NOW - 40 * DAY, NOW - 1 * DAY
    for approval_id, status, answered, expires in (("old-answered", "deny", old, old), ("old-expired", "expired", None, old),
                                                   ("recent", "allow_once", recent, recent), ("open", "pending", None, old)):  # fmt: skip
        backend.tamper(
            "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
            "answered_at, session_kind, detail, closed_at) VALUES (?, ?, ?, 'main', 't', '{}', '[]', '[]', 'r', ?, ?, "
            "'main', '{}', ?)",
            (approval_id, old, expires, status, answered, None if status == "pending" else (answered or expires)),
        )
    for run_id, status, ended in (("old-run", "done", NOW - 100 * DAY + 1), ("new-run", "done", recent),
                                  ("running", "running", None)):  # fmt: skip
        backend.tamper(
            "INSERT INTO runs (id, created_at, updated_at, ended_at, params, trigger, session, provider, model, status, "
            "usage) VALUES (?, ?, ?, ?, '{}', 'cli', 'main', 'p', 'm', ?, '{}')",
            (run_id, 1.0, ended or 1.0, ended, status),
        )
        backend.tamper(
            "INSERT INTO run_messages (run_id, seq, ts, role, body) VALUES (?, 1, 1, 'user', 'hi')", (run_id,)
        )
    for firing_id, status, ts in (
        ("old-done", "done", old),
        ("old-open", "started", old),
        ("new-done", "done", recent),
    ):
        backend.tamper(
            "INSERT INTO trigger_firings (id, ts, kind, name, fired_by, session, params, payload, run_id, status) "
            "VALUES (?, ?, 'hook', 'h', 'hook:h', 'main', '{}', '{\"secret-ish\": 1}', 'r', ?)",
            (firing_id, ts, status),
        )


@pytest.mark.anyio
async def test_prune_removes_only_what_finished_long_ago(backend: Backend) -> None:
    db = await backend.db()  # made (SQLite) before rows go in behind its back
    _seed(backend)
    pruned = await prune(db, now=NOW, approvals_days=30, runs_days=90, webhook_payloads_days=30)
    assert pruned.to_dict() == {"approvals": 2, "runs": 1, "run_messages": 1, "webhook_payloads": 1}
    assert sorted(r[0] for r in await db.fetch_all(Sql("SELECT id FROM approvals"))) == ["open", "recent"]
    assert sorted(r[0] for r in await db.fetch_all(Sql("SELECT id FROM runs"))) == ["new-run", "running"]
    assert sorted(r[0] for r in await db.fetch_all(Sql("SELECT run_id FROM run_messages"))) == ["new-run", "running"]
    payloads = dict(await db.fetch_all(Sql("SELECT id, payload FROM trigger_firings")))  # type: ignore[arg-type]
    assert payloads["old-done"] is None and payloads["old-open"] and payloads["new-done"]
    kept = await prune(db, now=NOW, approvals_days=0, runs_days=0, webhook_payloads_days=0)
    assert not any(kept.to_dict().values())


_INSERT = Sql(
    "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
    "answered_at, session_kind, detail, closed_at) VALUES (:id, :created, :expires, 'main', 't', '{}', '[]', '[]', "
    "'r', :status, :answered, 'main', '{}', :closed)"
)
MANY = 2 * APPROVALS_BATCH + 234  # three batches: two full, one not


def _row(approval_id: str, *, created: float, closed: float | None, answered: float | None = None,
         status: str = "deny") -> dict[str, object]:  # fmt: skip
    return {"id": approval_id, "created": created, "expires": created + 60, "status": status,
            "answered": answered if answered is not None else closed, "closed": closed}  # fmt: skip


@pytest.mark.anyio
async def test_approvals_go_by_when_they_closed_in_batches_whatever_their_creation(backend: Backend) -> None:
    db = await backend.db()
    cutoff, old, recent = NOW - 30 * DAY, NOW - 40 * DAY, NOW - 1 * DAY
    rows = [
        _row("made-now-closed-long-ago", created=recent, closed=old),  # goes: it closed long ago
        _row("made-long-ago-closed-now", created=old, closed=recent),  # stays: it closed lately
        _row("answered-long-ago-closed-now", created=old, closed=recent, answered=old),  # closed_at decides
        _row("pending-since-long-ago", created=old - DAY, closed=None, status="pending"),  # never
        _row("pending-just-made", created=recent, closed=None, status="pending"),
        _row("closed-just-after-the-cutoff", created=old, closed=cutoff + 1),
    ]
    rows += [_row(f"old-{n:05d}", created=recent - n, closed=old + n // 7, status=("deny", "expired")[n % 2])
             for n in range(MANY)]  # fmt: skip
    await db.execute_many(_INSERT, rows)
    if backend.kind == "postgres":
        # Each deleted row writes down the transaction that deleted it (behind the store's back).
        backend.tamper("CREATE TABLE deleted_by (id TEXT, xact BIGINT)")
        backend.tamper(
            "CREATE FUNCTION note_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO deleted_by VALUES (OLD.id, txid_current()); RETURN OLD; END $$"
        )
        backend.tamper("CREATE TRIGGER note_delete AFTER DELETE ON approvals FOR EACH ROW EXECUTE FUNCTION note_delete()")
    pruned = await prune(db, now=NOW, approvals_days=30, runs_days=0, webhook_payloads_days=0)
    assert pruned.approvals == MANY + 1
    left = sorted(r[0] for r in await db.fetch_all(Sql("SELECT id FROM approvals")))
    assert left == sorted(["made-long-ago-closed-now", "answered-long-ago-closed-now", "pending-since-long-ago",
                           "pending-just-made", "closed-just-after-the-cutoff"])  # fmt: skip
    if backend.kind == "postgres":
        sizes = [int(r[0]) for r in await db.fetch_all(Sql("SELECT count(*) FROM deleted_by GROUP BY xact ORDER BY 1 DESC"))]
        assert sizes == [APPROVALS_BATCH, APPROVALS_BATCH, MANY + 1 - 2 * APPROVALS_BATCH], sizes
    assert await prune_approvals(db, before=NOW) == 3  # the three closed lately; the pending ones never
    assert sorted(r[0] for r in await db.fetch_all(Sql("SELECT id FROM approvals"))) == [
        "pending-just-made", "pending-since-long-ago"]  # fmt: skip


@pytest.mark.anyio
async def test_a_batch_is_read_along_the_closed_at_index_not_the_table(backend: Backend) -> None:
    """The plan of the batch's SELECT and of the DELETE around it: a range on ``approvals_closed``
    (closed_at, id), never a scan of the table (on PostgreSQL sequential scans priced out, as in
    test_indexed_reads.py: a plan that still scans has no index for the read)."""
    db = await backend.db()
    params = {"before": NOW, "limit": APPROVALS_BATCH}
    for sql in (Sql(_APPROVALS_BATCH), _APPROVALS):
        plan = await query_plan(db, sql, params, sorts=False)
        assert "SCAN approvals" not in plan and "Seq Scan" not in plan and "Sort" not in plan, plan
        if db.dialect == "sqlite":
            assert "USING INDEX approvals_closed (closed_at<?)" in plan, plan
        else:
            assert "approvals_closed on approvals" in plan and "Index Cond: (closed_at <" in plan, plan


def _note_transactions(backend: Backend, table: str, event: str, key: str) -> None:
    """On PostgreSQL: each row of ``table`` deleted or updated writes down the transaction that did
    it, in ``touched_by`` (behind the store's back)."""
    backend.tamper("CREATE TABLE IF NOT EXISTS touched_by (tab TEXT, id TEXT, xact BIGINT)")
    backend.tamper(
        f"CREATE FUNCTION note_{table}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO touched_by VALUES ('{table}', OLD.{key}, txid_current()); RETURN OLD; END $$"
    )
    backend.tamper(f"CREATE TRIGGER note_{table} AFTER {event} ON {table} FOR EACH ROW EXECUTE FUNCTION note_{table}()")


async def _batch_sizes(db: Any, table: str) -> list[int]:
    rows = await db.fetch_all(Sql(f"SELECT count(*) FROM touched_by WHERE tab = '{table}' GROUP BY xact ORDER BY 1 DESC"))
    return [int(r[0]) for r in rows]


_RUN = Sql(
    "INSERT INTO runs (id, created_at, updated_at, ended_at, params, trigger, session, provider, model, status, usage) "
    "VALUES (:id, :created, COALESCE(:ended, :created), :ended, '{}', 'cli', 'main', 'p', 'm', :status, '{}')"
)
_MESSAGE = Sql("INSERT INTO run_messages (run_id, seq, ts, role, body) VALUES (:run_id, :seq, 1, 'user', 'hi')")
_FIRING = Sql(
    "INSERT INTO trigger_firings (id, ts, kind, name, fired_by, session, params, payload, run_id, status) "
    "VALUES (:id, :ts, :kind, 'h', 'hook:h', 'main', '{}', '{\"body\": 1}', 'r', :status)"
)
MANY_RUNS = 2 * RUNS_BATCH + 117
MANY_PAYLOADS = 2 * PAYLOADS_BATCH + 61


@pytest.mark.anyio
async def test_runs_and_their_transcripts_go_in_batches_by_when_they_ended(backend: Backend) -> None:
    """Finished runs older than the cutoff, and their transcripts, ``RUNS_BATCH`` runs a
    transaction (on PostgreSQL each deleted row names its transaction); a run created long ago
    that ended lately, and a running one, stay."""
    db = await backend.db()
    cutoff, old, recent = NOW - 90 * DAY, NOW - 100 * DAY, NOW - DAY
    runs = [{"id": f"old-{n:05d}", "created": old - n, "ended": old + n // 5, "status": ("done", "failed")[n % 2]}
            for n in range(MANY_RUNS)]  # fmt: skip
    runs += [{"id": "made-long-ago-ended-lately", "created": old, "ended": recent, "status": "done"},
             {"id": "running-since-long-ago", "created": old, "ended": None, "status": "running"},
             {"id": "ended-just-after-the-cutoff", "created": old, "ended": cutoff + 1, "status": "cancelled"}]  # fmt: skip
    await db.execute_many(_RUN, runs)
    await db.execute_many(_MESSAGE, [{"run_id": r["id"], "seq": s} for r in runs for s in (1, 2)])
    if backend.kind == "postgres":
        _note_transactions(backend, "runs", "DELETE", "id")
        _note_transactions(backend, "run_messages", "DELETE", "run_id")
    pruned = await prune(db, now=NOW, approvals_days=0, runs_days=90, webhook_payloads_days=0)
    assert (pruned.runs, pruned.run_messages) == (MANY_RUNS, 2 * MANY_RUNS)
    left = sorted(r[0] for r in await db.fetch_all(Sql("SELECT id FROM runs")))
    assert left == ["ended-just-after-the-cutoff", "made-long-ago-ended-lately", "running-since-long-ago"]
    assert sorted(r[0] for r in await db.fetch_all(Sql("SELECT DISTINCT run_id FROM run_messages"))) == left
    if backend.kind == "postgres":
        wanted = [RUNS_BATCH, RUNS_BATCH, MANY_RUNS - 2 * RUNS_BATCH]
        assert await _batch_sizes(db, "runs") == wanted
        assert await _batch_sizes(db, "run_messages") == [2 * n for n in wanted]
        # A run and its transcript leave in the same transaction.
        apart = await db.fetch_one(Sql(
            "SELECT count(*) FROM touched_by r JOIN touched_by m ON m.tab = 'run_messages' AND m.id = r.id "
            "WHERE r.tab = 'runs' AND m.xact != r.xact"))  # fmt: skip
        assert apart is not None and apart[0] == 0


@pytest.mark.anyio
async def test_delivered_payloads_go_in_batches_and_the_firings_stay(backend: Backend) -> None:
    db = await backend.db()
    cutoff, old, recent = NOW - 30 * DAY, NOW - 40 * DAY, NOW - DAY
    firings = [{"id": f"old-{n:05d}", "ts": old + n // 9, "kind": "hook", "status": ("done", "failed")[n % 2]}
               for n in range(MANY_PAYLOADS)]  # fmt: skip
    firings += [{"id": "recent", "ts": recent, "kind": "hook", "status": "done"},
                {"id": "old-on-its-way", "ts": old, "kind": "hook", "status": "started"},
                {"id": "old-queued", "ts": old, "kind": "hook", "status": "queued"},
                {"id": "old-cron", "ts": old, "kind": "cron", "status": "done"},
                {"id": "just-after-the-cutoff", "ts": cutoff + 1, "kind": "hook", "status": "done"}]  # fmt: skip
    await db.execute_many(_FIRING, firings)
    if backend.kind == "postgres":
        _note_transactions(backend, "trigger_firings", "UPDATE", "id")
    pruned = await prune(db, now=NOW, approvals_days=0, runs_days=0, webhook_payloads_days=30)
    assert pruned.webhook_payloads == MANY_PAYLOADS
    held = sorted(r[0] for r in await db.fetch_all(Sql("SELECT id FROM trigger_firings WHERE payload IS NOT NULL")))
    assert held == ["just-after-the-cutoff", "old-cron", "old-on-its-way", "old-queued", "recent"]
    count = await db.fetch_one(Sql("SELECT count(*) FROM trigger_firings"))
    assert count is not None and count[0] == len(firings)  # the firings themselves stay, as history
    if backend.kind == "postgres":
        assert await _batch_sizes(db, "trigger_firings") == [PAYLOADS_BATCH, PAYLOADS_BATCH, MANY_PAYLOADS - 2 * PAYLOADS_BATCH]
    assert (await prune(db, now=NOW, approvals_days=0, runs_days=0, webhook_payloads_days=30)).webhook_payloads == 0


@pytest.mark.anyio
async def test_the_runs_and_payload_batches_are_read_along_an_index_not_the_table(backend: Backend) -> None:
    """The batch reads and the writes around them: a range on ``runs_ended`` (ended_at, id) and on
    ``trigger_firings_payload`` (the delivered payloads still held, by ts), never a scan."""
    db = await backend.db()
    params = {"before": NOW, "limit": RUNS_BATCH, "last_at": NOW, "last_id": "x"}
    for table, index, statements in (("runs", "runs_ended", (Sql(_RUNS_BATCH), _RUNS, _RUN_MESSAGES)),
                                     ("trigger_firings", "trigger_firings_payload", (_PAYLOADS_BATCH, _PAYLOADS))):  # fmt: skip
        for sql in statements:
            plan = await query_plan(db, sql, params)
            assert f"SCAN {table}" not in plan and "Seq Scan" not in plan and "Sort" not in plan, plan
            assert "TEMP B-TREE" not in plan, plan
            if db.dialect == "sqlite":
                assert f"USING INDEX {index} (" in plan or f"USING COVERING INDEX {index} (" in plan, plan
            else:
                assert f"{index} on {table}" in plan or f"Bitmap Index Scan on {index}" in plan, plan
