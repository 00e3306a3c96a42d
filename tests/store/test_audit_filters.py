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
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


_RECORDS = st.lists(st.tuples(st.sampled_from(("allow", "deny", "ask")), st.sampled_from((1.0, 2.0, 3.0))), max_size=30)
_FILTERS = st.tuples(st.sampled_from((None, "allow", "deny")), st.sampled_from((None, 1.0, 2.0)),
                     st.sampled_from((None, 2.0, 3.0)))  # fmt: skip


def test_filtered_audit_pages_give_each_match_once_at_equal_times(tmp_path: Path) -> None:
    """Hypothesis: random records (three decisions, few distinct times, times not in id order)
    walked a page at a time of a random size under random decision and time filters: every match
    once, newest first, and each read asks for one page and one more record."""
    import anyio

    from pincer.store.sql import open_sqlite
    from tests.store.conftest import KEY

    homes = iter(range(10**6))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(made=_RECORDS, per=st.integers(min_value=1, max_value=6), asked=st.lists(_FILTERS, min_size=1, max_size=3))
    def walk(made: list[tuple[str, float]], per: int, asked: list[tuple[str | None, float | None, float | None]]) -> None:
        async def main() -> None:
            home = tmp_path / str(next(homes))
            home.mkdir()
            db = await open_sqlite(home)
            try:
                audit = await AuditLog.open(db, key=KEY)
                await audit.append_with([AuditEntry(session="main", caller="t", tool="echo", decision=d, reason="r",
                                                    outcome="ok", ts=ts) for d, ts in made])  # fmt: skip
                every = list(reversed(await audit.records()))
                for decision, since, until in asked:
                    got = await _walk(audit, per, decision=decision, since=since, until=until)
                    assert got == [r.id for r in every if decision in (None, r.decision)
                                   and (since is None or r.ts >= since) and (until is None or r.ts <= until)]  # fmt: skip
            finally:
                await db.aclose()

        anyio.run(main)

    walk()
