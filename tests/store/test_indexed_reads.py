"""The dashboard's answered approvals and the audit filtered by person read along an index, on
both databases (issue 35 item 4: a gateway that never stalls; issue 41 item 4: the audit by person).

Before (revision 0007): the answered list was ``ORDER BY COALESCE(answered_at, expires_at) DESC``,
which no index serves, so every page sorted the whole answered table (SQLite: ``USE TEMP B-TREE
FOR ORDER BY`` over ``SCAN approvals``; PostgreSQL: a ``Sort`` over a ``Seq Scan``); and a person's
records were one ``OR`` over the whole audit table (no index on ``person``). Each test reads the
plan the database makes for the very statement the store runs (EXPLAIN QUERY PLAN on SQLite;
EXPLAIN on PostgreSQL with sequential scans and sorts priced out, so a plan still holding one
has no index that serves the read).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.store.approvals import Answer, ApprovalRequest, ApprovalStatus, ApprovalStore, _answered_query
from pincer.store.audit import AuditEntry, _records_query
from pincer.store.sql import Database, Sql
from tests.store.conftest import Backend, query_plan

pytestmark = pytest.mark.anyio


def _assert_no_table_sort(plan: str, table: str) -> None:
    assert "TEMP B-TREE" not in plan and f"SCAN {table}\n" not in plan + "\n", plan  # SQLite
    assert "Sort" not in plan and "Seq Scan" not in plan, plan  # PostgreSQL


_ANSWERED = {"limit": 50, "session": "agent", "status": "deny", "tool": "write%", "before_at": 5.0, "before_id": "x"}


@pytest.mark.parametrize("session", [False, True])
@pytest.mark.parametrize("before", [False, True])
async def test_the_answered_list_reads_along_an_index_and_never_sorts_the_table(
    backend: Backend, session: bool, before: bool
) -> None:
    db = await backend.db()
    for status in (False, True):
        for tool in (False, True):
            plan = await query_plan(db, _answered_query(session, status, tool, before), _ANSWERED)
            _assert_no_table_sort(plan, "approvals")
            # One of the (…, closed_at, id) indexes: the one whose equality prefix the filters give.
            wanted = {"approvals_closed"} | ({"approvals_session_closed"} if session else set()) | (
                {"approvals_status_closed"} if status else set())  # fmt: skip
            assert any(f"{index} " in plan for index in wanted), (wanted, plan)


async def test_a_persons_records_read_along_the_person_index(backend: Backend) -> None:
    """The person's own records: along ``audit_person`` from the newest, cut at the limit with no
    sort; the calls their answers let through: from their answer records, by ``audit_approval``.
    No read of the whole log, whatever other filter comes with the person."""
    db = await backend.db()
    params = {"after_id": 0, "tool": "echo", "session": "main", "run_id": "r", "limit": 100, "person": "ann"}
    for tool, session, run_id in ((False, False, False), (True, False, False), (False, True, False),
                                  (True, True, True)):  # fmt: skip
        plan = await query_plan(db, _records_query(tool, session, run_id, True, True), params, sorts=True)
        assert "SCAN audit\n" not in plan + "\n" and "Seq Scan on audit" not in plan, plan
        if db.dialect == "sqlite":
            assert "SEARCH audit USING INDEX audit_person (person=? AND id>?)" in plan, plan
            assert "SEARCH audit USING INDEX audit_approval (approval_id=?" in plan, plan
            mine = plan.split("CO-ROUTINE approved")[0]
            assert "TEMP B-TREE" not in mine.split("CO-ROUTINE mine")[1].split("SCAN mine")[0], plan
        else:
            assert "Index Scan Backward using audit_person on audit" in plan, plan
            assert "using audit_approval" in plan or "using audit_person on audit audit_2" in plan, plan


@pytest.mark.parametrize("person", [False, True])
async def test_an_audit_page_by_key_reads_along_the_id_not_the_log(backend: Backend, person: bool) -> None:
    """``/ui/audit?before=``: the records older than the cursor, newest first, cut at the page,
    are never a scan of the whole log, whatever filter comes with the cursor."""
    db = await backend.db()
    params = {"after_id": 0, "before_id": 5_000, "tool": "echo", "session": "main", "run_id": "r", "limit": 51,
              "person": "ann"}  # fmt: skip
    for tool, session in ((False, False), (True, False), (False, True), (True, True)):
        plan = await query_plan(db, _records_query(tool, session, False, True, person, True), params, sorts=person)
        assert "SCAN audit\n" not in plan + "\n" and "Seq Scan on audit" not in plan, plan
        if not (person or tool or session):
            # Unfiltered: the id range, newest first, cut at the page with no sort. (A tool or a
            # session filter reads that tool's or session's records by its (…, ts) index and
            # sorts those: bounded by the filter, not by the page.)
            assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan


async def test_closing_a_request_any_way_stamps_when_and_the_list_is_newest_closed_first(backend: Backend) -> None:
    """Answered, expired by time, expired by its caller, and cancelled by its caller: each gets
    ``closed_at`` in the same write as its status, so the list shows it (a request whose close
    did not set it would be missing from the list)."""
    approvals, _audit = await backend.audited_approvals()
    made = [await approvals.create(session="main", tool="write_note", args={"n": i}, effects=("write",), hosts=(),
                                   reason="asks", timeout_s=600) for i in range(4)]  # fmt: skip
    await approvals.answer(made[0].id, Answer.DENY)
    await approvals.expire(made[1].id)
    await approvals.record_gone(made[2].id, AuditEntry(session="main", caller="cli", tool="write_note",
                                decision="ask", reason="asks", outcome="cancelled", approval_id=made[2].id))  # fmt: skip
    overdue = await approvals.create(session="main", tool="write_note", args={}, effects=(), hosts=(), reason="asks",
                                     timeout_s=-1)  # fmt: skip
    await approvals.expire_overdue()
    listed = await approvals.answered(limit=10)
    assert {r.id for r in listed} == {made[0].id, made[1].id, made[2].id, overdue.id}, listed
    assert all(r.closed_at is not None for r in listed)
    assert [(r.closed_at, r.id) for r in listed] == sorted(((r.closed_at, r.id) for r in listed), reverse=True)
    assert next(r for r in listed if r.id == overdue.id).closed_at == overdue.expires_at
    assert (await approvals.get(made[3].id)).closed_at is None  # still waiting
    assert [r.status for r in await approvals.answered(limit=10, status="deny")] == [ApprovalStatus.DENY]


async def test_a_database_migrated_from_0007_lists_its_closed_requests_in_their_old_order(backend: Backend) -> None:
    """The backfill: rows closed before revision 0008 take COALESCE(answered_at, expires_at)."""
    approvals = await backend.approvals()
    db = await backend.db()
    for rid, status, answered_at, expires_at in (("a", "deny", 30.0, 99.0), ("b", "expired", None, 20.0),
                                                 ("c", "pending", None, 10.0**10)):  # fmt: skip
        await db.execute(Sql(
            "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, "
            "answered_at) VALUES (:id, 1, :expires_at, 'main', 't', '{}', '[]', '[]', 'r', :status, :answered_at)"
        ), {"id": rid, "status": status, "answered_at": answered_at, "expires_at": expires_at})  # fmt: skip
    await db.execute(Sql("UPDATE approvals SET closed_at = NULL"))
    migration = _migration_0008()
    await db.execute(Sql(migration.BACKFILL))
    assert [(r.id, r.closed_at) for r in await approvals.answered(limit=10)] == [("a", 30.0), ("b", 20.0)]


def _migration_0008() -> Any:
    import importlib.util

    from pincer.store.sql.migrate import MIGRATIONS_DIR

    (path,) = (MIGRATIONS_DIR / "versions").glob("0008_*.py")
    spec = importlib.util.spec_from_file_location("pincer_migration_0008", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_INSERT = Sql(
    "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, status, closed_at) "
    "VALUES (:id, :created_at, 9e9, :session, 'write_note', '{}', '[]', '[]', 'asks', :status, :closed_at)"
)
_SESSIONS = ("main", "agent", "other")
# Few distinct times, so that runs of equal times are common and cross the page boundaries.
_ROWS = st.lists(
    st.tuples(st.text(alphabet="0123456789abcdef", min_size=1, max_size=5), st.sampled_from([1.0, 2.0, 3.0]),
              st.sampled_from([1.0, 2.0]), st.sampled_from(_SESSIONS), st.booleans()),
    max_size=40, unique_by=lambda row: row[0],
)  # fmt: skip


async def _fill(db: Database, rows: list[tuple[str, float, float, str, bool]]) -> None:
    """``rows`` as (id, closed_at, created_at, session, closed) inserted in the order given."""
    await db.execute(Sql("DELETE FROM approvals"))
    for rid, closed_at, created_at, session, closed in rows:
        await db.execute(_INSERT, {"id": rid, "created_at": created_at, "session": session,
                                   "status": "deny" if closed else "pending", "closed_at": closed_at if closed else None})  # fmt: skip


async def _walk_answered(approvals: ApprovalStore, limit: int, session: str | None) -> list[ApprovalRequest]:
    walked: list[ApprovalRequest] = []
    before: tuple[float, str] | None = None
    for _ in range(100):  # bounded: 40 rows take at most 40 pages
        page = await approvals.answered(limit=limit, session=session, before=before)
        walked += page
        if len(page) < limit:
            return walked
        assert page[-1].closed_at is not None
        before = (page[-1].closed_at, page[-1].id)
    raise AssertionError("the answered pages never ended")


async def _walk_pages(approvals: ApprovalStore, limit: int, session: str | None) -> list[ApprovalRequest]:
    walked: list[ApprovalRequest] = []
    after: tuple[float, str] | None = None
    for _ in range(100):
        page = await approvals.page(status=None, limit=limit, after=after, session=session)
        walked += page
        if len(page) < limit:
            return walked
        after = (page[-1].created_at, page[-1].id)
    raise AssertionError("the pages never ended")


async def _check_walks(db: Database, rows: list[tuple[str, float, float, str, bool]], limit: int) -> None:
    await _fill(db, rows)
    approvals = ApprovalStore(db)
    for session in (None, *_SESSIONS):
        mine = [r for r in rows if session is None or r[3] == session]
        answered = await _walk_answered(approvals, limit, session)
        # Every closed row once, newest closed first, ties by id (descending): none skipped or repeated.
        assert [r.id for r in answered] == [r[0] for r in sorted((r for r in mine if r[4]), key=lambda r: (r[1], r[0]),
                                                                   reverse=True)], (session, limit)  # fmt: skip
        assert all(r.session == session for r in answered) if session else True
        paged = await _walk_pages(approvals, limit, session)
        assert [r.id for r in paged] == [r[0] for r in sorted(mine, key=lambda r: (r[2], r[0]))], (session, limit)
        assert all(r.session == session for r in paged) if session else True


def test_keyset_pages_neither_skip_nor_repeat_a_row_at_equal_times_and_keep_to_a_session(tmp_path: Path) -> None:
    """Hypothesis: random rows (ids, few distinct times, three sessions) in a random insert
    order, walked a page at a time of a random size: the answered list (newest closed first) and
    the list of GET /approvals and ``pincer approvals list`` (oldest first) each give every row
    once in order, and a session's walk only its own rows on every page."""
    import anyio

    from pincer.store.sql import open_sqlite

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(rows=_ROWS, limit=st.integers(min_value=1, max_value=7))
    def walk(rows: list[tuple[str, float, float, str, bool]], limit: int) -> None:
        async def main() -> None:
            db = await open_sqlite(tmp_path)
            try:
                await _check_walks(db, rows, limit)
            finally:
                await db.aclose()

        anyio.run(main)

    walk()


async def test_pages_at_equal_times_on_both_databases(backend: Backend) -> None:
    """The same walks on PostgreSQL (and SQLite): a run of 25 requests closed and made at one
    instant, cut by pages of 4 and 7, plus others around it."""
    db = await backend.db()
    rows = [(f"{(i * 37) % 101:03d}", 2.0, 1.0, _SESSIONS[i % 3], i % 5 != 0) for i in range(25)]
    rows += [(f"z{i}", float(i % 3 + 1), float(i % 2 + 1), _SESSIONS[i % 2], True) for i in range(6)]
    for limit in (4, 7):
        await _check_walks(db, rows, limit)
