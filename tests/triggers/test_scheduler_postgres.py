"""The scheduler on PostgreSQL: two gateways on one database (two homes: two machines), one
cron job, each instant fired exactly once, also when the leader's connection dies under it
(what a SIGKILLed leader's does) and the other gateway takes over at its next tick.

Failed before issue 29: the lease lived in each home's SQLite file, so two homes on one
database had a leader each and fired every instant twice.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import psycopg
import pytest

from pincer.schedule import parse_every
from pincer.store.sql.migrate import upgrade_postgres
from pincer.store.sql.postgres import lock_number
from pincer.triggers.clock import ManualClock
from pincer.triggers.engine import TriggerEngine
from pincer.triggers.jobs import JobSpec
from tests.backends import postgres_server
from tests.triggers.recording import RecordingStarter

from .conftest import open_pincer, utc

pytestmark = pytest.mark.anyio


def _kill_leader_connection(url: str) -> int:
    """Terminate the backend holding the leader lock, as the death of its process would."""
    number = lock_number("triggers-leader")
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid = %s AND granted",
            (number >> 32, number & 0xFFFFFFFF),
        ).fetchall()
    return len(rows)


async def test_each_instant_fires_once_across_two_gateways_while_the_leader_dies(tmp_path: Path) -> None:
    url = postgres_server().new_database()
    upgrade_postgres(url)
    config = f'[store]\nurl = "{url}"\n'
    homes = [tmp_path / "a", tmp_path / "b"]
    for home in homes:
        home.mkdir()
    clock = ManualClock(utc(2026, 5, 1, 8))
    first, second = RecordingStarter(), RecordingStarter()
    async with open_pincer(homes[0], config) as one, open_pincer(homes[1], config) as two:
        engine_one = TriggerEngine.for_services(one.trigger_services(), starter=first, clock=clock)
        engine_two = TriggerEngine.for_services(two.trigger_services(), starter=second, clock=clock)
        await engine_one.scheduler.add(JobSpec(name="x", schedule=parse_every("1m"), message="m"), now=clock.now())
        async with anyio.create_task_group() as tg:
            # The leader runs in its own scope: after its connection is killed it stops too, as
            # a SIGKILLed process would. Left running, a live process whose connection alone
            # died may take the lead back at its own next tick before the other gateway's, which
            # is correct (each instant still fires once) but not the takeover this test is about.
            leader_scope = anyio.CancelScope()

            async def run_leader() -> None:
                with leader_scope:
                    await engine_one.run()

            tg.start_soon(run_leader)
            await engine_one.settle()
            await tg.start(engine_two.run)
            for _ in range(2):
                clock.advance(60)
                await engine_one.settle()
                await engine_two.settle()
            assert len(first.requests) == 2 and second.requests == []
            assert _kill_leader_connection(url) == 1
            leader_scope.cancel()
            for _ in range(3):
                clock.advance(60)
                await engine_two.settle()
            tg.cancel_scope.cancel()
    assert len(first.requests) == 2 and len(second.requests) == 3
    run_ids = [r.run_id for r in first.requests + second.requests]
    assert len(set(run_ids)) == 5  # five instants, five runs, none started twice
    with psycopg.connect(url) as conn:
        firings = conn.execute("SELECT COUNT(*), COUNT(DISTINCT ts) FROM trigger_firings WHERE name = 'x'").fetchone()
    assert firings == (5, 5)
