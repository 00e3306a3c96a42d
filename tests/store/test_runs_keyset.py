"""The runs list by key (issue 35: the dashboard's ``/ui/runs`` paged by number, so page N read
the newest N*per runs), and filtered in SQL (issue 35 item 4: the status and skill filters looked
through a window of 5,000 runs in Python). ``RunStore.list(before=(created_at, id), status=,
skill=, session=)`` reads the runs after that position that pass its filters, newest first, cut at
the limit, along an index on both databases.

Revision 0009: ``runs_created`` holds ``(created_at, id)`` (before, ``created_at`` alone, so runs
created at the same instant were put in ``id`` order as they were read: SQLite "USE TEMP B-TREE
FOR RIGHT PART OF ORDER BY", PostgreSQL an ``Incremental Sort``), and ``(session | status | skill,
created_at, id)`` serve a filtered page without walking the other runs' index entries or sorting.
The plans checked are those of the very statements the store runs; the walks check that pages at
equal times neither skip nor repeat a run, filtered or not.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.store.runs import RunStore, _list_query
from pincer.store.sql import Database, Sql
from tests.store.conftest import Backend, query_plan

pytestmark = pytest.mark.anyio

_FILTERS = ("session", "status", "skill")
_INDEX_OF = {"session": "runs_session_created", "status": "runs_status_created", "skill": "runs_skill_created"}


@pytest.mark.parametrize("before", [False, True])
async def test_the_runs_list_reads_along_an_index_and_never_sorts(backend: Backend, before: bool) -> None:
    """Every combination of filters, with and without a cursor: an index whose equality prefix is
    one of the filters (or ``runs_created`` with none), read newest first, no sort of any kind."""
    db = await backend.db()
    params: dict[str, Any] = {"limit": 51, "session": "agent", "status": "failed", "skill": "daily"} | (
        {"before_at": 5.0, "before_id": "x"} if before else {})  # fmt: skip
    for on in itertools.product((False, True), repeat=3):
        chosen = dict(zip(_FILTERS, on, strict=True))
        plan = await query_plan(db, _list_query(before=before, **chosen), params)
        wanted = {_INDEX_OF[f] for f in _FILTERS if chosen[f]} or {"runs_created"}
        if db.dialect == "sqlite":
            assert "TEMP B-TREE" not in plan, (chosen, plan)
            if any(on) or before:
                assert "SCAN runs" not in plan, (chosen, plan)
                assert any(f"SEARCH runs USING INDEX {index} (" in plan for index in wanted), (chosen, plan)
            else:  # the newest runs: the index from its end, cut at the limit
                assert plan == "SCAN runs USING INDEX runs_created", plan
        else:
            assert "Sort" not in plan and "Seq Scan" not in plan, (chosen, plan)
            assert any(f"using {index} on runs" in plan for index in wanted), (chosen, plan)


async def _seed(db: Database) -> list[tuple[float, str, str]]:
    """40 runs, 25 of them created at one instant (ids not in creation order), in two sessions:
    (created_at, id, session), newest first as the list orders them."""
    store = RunStore(db)
    made = [(7.0, f"{(i * 37) % 101:03d}", ("main", "agent")[i % 2]) for i in range(25)]
    made += [(float(i % 4 + 5 + (i % 4 >= 2) * 3), f"z{i:02d}", ("main", "agent")[i % 3 == 0]) for i in range(15)]
    for at, run_id, session in made:
        await store.create(run_id=run_id, skill=None, params={}, message="m", trigger="test", session=session,
                           provider="p", model="m", now=at)  # fmt: skip
    return sorted(made, reverse=True)


@pytest.mark.parametrize("per", [1, 4, 7])
async def test_pages_by_key_cover_every_run_once_at_equal_times(backend: Backend, per: int) -> None:
    db = await backend.db()
    made = await _seed(db)
    store = RunStore(db)
    for session in (None, "agent"):
        seen: list[str] = []
        before: tuple[float, str] | None = None
        while True:
            page = await store.list(session=session, limit=per, before=before)
            assert len(page) <= per
            seen += [r.id for r in page]
            if len(page) < per:
                break
            before = (page[-1].created_at, page[-1].id)
        assert seen == [run_id for _, run_id, s in made if session in (None, s)], (session, per)


_INSERT = Sql(
    "INSERT INTO runs (id, created_at, updated_at, ended_at, skill, params, trigger, session, provider, model, status, "
    "usage) VALUES (:id, :created_at, :created_at, :ended_at, :skill, '{}', 'test', :session, 'p', 'm', :status, '{}')"
)
_STATUSES = ("done", "failed", "cancelled")  # final: a listed run is never settled (its row changed) on the way
_SKILLS = ("daily", "triage", None)
_SESSIONS = ("main", "agent")
# Few distinct times, so that runs of equal times are common and cross the page boundaries.
_ROWS = st.lists(
    st.tuples(st.text(alphabet="0123456789abcdef", min_size=1, max_size=5), st.sampled_from([1.0, 2.0, 3.0]),
              st.sampled_from(_STATUSES), st.sampled_from(_SKILLS), st.sampled_from(_SESSIONS)),
    max_size=40, unique_by=lambda row: row[0],
)  # fmt: skip
_ASKED = st.tuples(st.sampled_from((None, *_STATUSES)), st.sampled_from((None, "daily", "triage")),
                   st.sampled_from((None, *_SESSIONS)))  # fmt: skip


async def _fill(db: Database, rows: list[tuple[str, float, str, str | None, str]]) -> None:
    await db.execute(Sql("DELETE FROM runs"))
    await db.execute_many(_INSERT, [{"id": rid, "created_at": at, "ended_at": at, "status": status, "skill": skill,
                                     "session": session} for rid, at, status, skill, session in rows])  # fmt: skip


async def _walk(store: RunStore, per: int, status: str | None, skill: str | None, session: str | None) -> list[str]:
    """The pages of a filtered list as the dashboard reads them (``per`` and one more), each
    Older link from the last shown run: the ids shown, in order."""
    seen: list[str] = []
    before: tuple[float, str] | None = None
    for _ in range(100):  # bounded: 40 rows take at most 40 pages
        read = await store.list(session=session, status=status, skill=skill, limit=per + 1, before=before)
        assert len(read) <= per + 1
        assert all((status in (None, r.status)) and (skill in (None, r.skill)) and (session in (None, r.session))
                   for r in read), read  # fmt: skip
        seen += [r.id for r in read[:per]]
        if len(read) <= per:
            return seen
        before = (read[per - 1].created_at, read[per - 1].id)
    raise AssertionError("the pages never ended")


def _expected(rows: list[tuple[str, float, str, str | None, str]], status: str | None, skill: str | None,
              session: str | None) -> list[str]:  # fmt: skip
    kept = [r for r in rows if status in (None, r[2]) and skill in (None, r[3]) and session in (None, r[4])]
    return [r[0] for r in sorted(kept, key=lambda r: (r[1], r[0]), reverse=True)]


def test_filtered_pages_give_each_matching_run_once_at_equal_times(tmp_path: Path) -> None:
    """Hypothesis: random runs (few distinct times, statuses, skills, sessions) walked a page at a
    time of a random size under random filters: every matching run once, newest first, ties by
    id, and no run that does not match; each read asks for one page and one more run."""
    import anyio

    from pincer.store.sql import open_sqlite

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(rows=_ROWS, per=st.integers(min_value=1, max_value=7), asked=st.lists(_ASKED, min_size=1, max_size=4))
    def walk(rows: list[tuple[str, float, str, str | None, str]], per: int,
             asked: list[tuple[str | None, str | None, str | None]]) -> None:  # fmt: skip
        async def main() -> None:
            db = await open_sqlite(tmp_path)
            try:
                await _fill(db, rows)
                store = RunStore(db)
                for status, skill, session in asked:
                    got = await _walk(store, per, status, skill, session)
                    assert got == _expected(rows, status, skill, session), (status, skill, session, per)
            finally:
                await db.aclose()

        anyio.run(main)

    walk()


async def test_filtered_pages_at_equal_times_on_both_databases(backend: Backend) -> None:
    """The same walks on PostgreSQL (and SQLite): 30 runs made at one instant, cut by pages of 4
    and 7 under each filter, plus others around them."""
    db = await backend.db()
    rows = [(f"{(i * 37) % 101:03d}", 2.0, _STATUSES[i % 3], _SKILLS[i % 3 - (i % 7 == 0)], _SESSIONS[i % 2])
            for i in range(30)]  # fmt: skip
    rows += [(f"z{i}", float(i % 3 + 1), _STATUSES[i % 2], _SKILLS[i % 2], _SESSIONS[i % 2]) for i in range(8)]
    await _fill(db, rows)
    store = RunStore(db)
    for per in (4, 7):
        for status, skill, session in ((None, None, None), ("failed", None, None), (None, "daily", None),
                                       ("done", "triage", "agent"), (None, None, "main")):  # fmt: skip
            assert await _walk(store, per, status, skill, session) == _expected(rows, status, skill, session)
