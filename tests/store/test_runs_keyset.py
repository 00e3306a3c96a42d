"""The runs list by key (issue 35: the dashboard's ``/ui/runs`` paged by number, so page N read
the newest N*per runs). ``RunStore.list(before=(created_at, id))`` reads the runs after that
position, newest first, along the ``runs_created`` index on both databases.

The index holds ``created_at`` alone (no migration was added for this): runs created at the same
instant are put in ``id`` order as they are read (SQLite: "USE TEMP B-TREE FOR RIGHT PART OF ORDER
BY"; PostgreSQL: an ``Incremental Sort`` whose presorted key is ``created_at``), a sort of one
instant's runs, never of the table. The plans checked are those of the very statements the store
runs; the walks check that pages at equal times neither skip nor repeat a run.
"""

from __future__ import annotations

from typing import Any

import pytest

from pincer.store.runs import RunStore, _list_query
from pincer.store.sql import Database
from tests.store.conftest import Backend, query_plan

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("session", [False, True])
@pytest.mark.parametrize("before", [False, True])
async def test_the_runs_list_reads_along_runs_created_and_never_sorts_the_table(
    backend: Backend, session: bool, before: bool
) -> None:
    db = await backend.db()
    params: dict[str, Any] = {"limit": 51} | ({"session": "agent"} if session else {}) | (
        {"before_at": 5.0, "before_id": "x"} if before else {})  # fmt: skip
    plan = await query_plan(db, _list_query(session, before), params)
    if db.dialect == "sqlite":
        assert "USING INDEX runs_created" in plan, plan
        assert "TEMP B-TREE FOR ORDER BY" not in plan, plan  # only the right part: one instant's runs
        if before:
            assert "SEARCH runs USING INDEX runs_created (created_at<?)" in plan, plan
    else:
        assert "Seq Scan" not in plan and "Index Scan Backward using runs_created" in plan, plan
        sorts = [line.strip() for line in plan.splitlines() if "Sort" in line and "Sort Key" not in line]
        assert sorts == ["->  Incremental Sort" + sorts[0].split("Incremental Sort", 1)[-1]], plan  # no full Sort
        assert "Presorted Key: created_at" in plan, plan


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
