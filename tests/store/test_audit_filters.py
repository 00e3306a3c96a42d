"""The audit's decision and time filters in SQL (issue 35 item 4: a gateway that never stalls).

Before, ``/ui/audit?decision=`` (and ``since``/``until``) read up to 10,000 records before its
cursor and kept the matches in Python; a page could show none of them and lead on from the oldest
record read. Now ``AuditLog.records(decision=, since=, until=)`` puts them in the statement's
WHERE, so a page's read returns its page and one more record, along the id (newest first, no sort)
on both databases. No index was added for them: each audit index is one more page written per
commit, on the hot path, and the plans here need none (the filters ride the id walk, or the
``(tool, ts)`` index when a tool is asked).
"""

from __future__ import annotations

import itertools

import pytest

from pincer.store.audit import AuditEntry, AuditLog, AuditRecord, _records_query
from tests.store.conftest import Backend, query_plan

pytestmark = pytest.mark.anyio

_PARAMS = {"after_id": 0, "before_id": 5_000, "tool": "echo", "session": "main", "run_id": "r", "limit": 51,
           "person": "ann", "decision": "deny", "since": 10.0, "until": 20.0}  # fmt: skip


@pytest.mark.parametrize("before", [False, True])
async def test_decision_and_time_filters_read_along_the_id_and_never_sort_or_scan(backend: Backend, before: bool) -> None:
    db = await backend.db()
    for decision, since, until in itertools.product((False, True), repeat=3):
        if not (decision or since or until):
            continue
        for tool, session in ((False, False), (False, True), (True, False)):
            sql = _records_query(tool, session, False, True, False, before, decision=decision, since=since, until=until)
            plan = await query_plan(db, sql, _PARAMS, sorts=tool)
            assert "SCAN audit\n" not in plan + "\n" and "Seq Scan on audit" not in plan, plan
            if tool:
                # The tool's records by (tool, ts), the time bounds cutting that range, sorted
                # by id (bounded by the filter, as a tool-filtered page was before), or the id walk.
                assert "audit_tool_ts" in plan or "audit_pkey" in plan, plan
                continue
            assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan
            if db.dialect == "sqlite":
                assert "SEARCH audit USING INTEGER PRIMARY KEY (rowid>?" in plan, plan
            else:
                assert "Index Scan Backward using audit_pkey on audit" in plan, plan
        person = _records_query(False, False, False, True, True, before, decision=decision, since=since, until=until)
        plan = await query_plan(db, person, _PARAMS, sorts=True)
        assert "SCAN audit\n" not in plan + "\n" and "Seq Scan on audit" not in plan, plan


async def _seed(audit: AuditLog) -> list[AuditRecord]:
    """60 records: decisions in turn, a third of them at one instant, times not in id order;
    newest first."""
    decisions = ("allow", "deny", "ask", "allow", "none")
    entries = [AuditEntry(session=("main", "agent")[n % 2], caller="test", tool=f"tool_{n % 3}",
                          decision=decisions[n % 5], reason="seeded", outcome="ok",
                          ts=15.0 if n % 3 == 0 else 1.0 + (n * 7) % 30) for n in range(60)]  # fmt: skip
    await audit.append_with(entries)
    return list(reversed(await audit.records()))


async def _walk(audit: AuditLog, per: int, **filters: object) -> list[int]:
    """The pages as the dashboard reads them (``per`` and one more, newest first), each Older link
    from the last shown record: the ids shown, in order."""
    seen: list[int] = []
    before: int | None = None
    for _ in range(100):
        read = list(reversed(await audit.records(limit=per + 1, before_id=before, **filters)))  # type: ignore[arg-type]
        assert len(read) <= per + 1
        seen += [r.id for r in read[:per]]
        if len(read) <= per:
            return seen
        before = read[per - 1].id
    raise AssertionError("the pages never ended")


@pytest.mark.parametrize("per", [1, 4, 9])
async def test_filtered_pages_give_each_matching_record_once_newest_first(backend: Backend, per: int) -> None:
    audit = await backend.audit()
    made = await _seed(audit)
    for decision, since, until, session, tool in (("deny", None, None, None, None), (None, 15.0, None, None, None),
                                                  (None, None, 15.0, None, None), ("allow", 10.0, 20.0, None, None),
                                                  ("ask", None, 15.0, "agent", None), (None, 14.0, 16.0, None, "tool_0"),
                                                  ("none", 1.0, 31.0, "main", "tool_1")):  # fmt: skip
        got = await _walk(audit, per, decision=decision, since=since, until=until, session=session, tool=tool)
        wanted = [r.id for r in made if decision in (None, r.decision) and (since is None or r.ts >= since)
                  and (until is None or r.ts <= until) and session in (None, r.session) and tool in (None, r.tool)]  # fmt: skip
        assert got == wanted and got, (decision, since, until, session, tool, per)
