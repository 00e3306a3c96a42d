"""The scheduler with a manual clock: right instants across DST, next runs across a restart, a
missed run once, retries with backoff, no second start of a long job, config and skill jobs."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from pincer.config import parse_config
from pincer.schedule import parse_cron, parse_every
from pincer.store.owners import process_token
from pincer.triggers.clock import ManualClock
from pincer.triggers.engine import TriggerEngine
from pincer.triggers.jobs import JobSpec
from pincer.triggers.requests import RunOutcome, RunRequest, RunStatus
from tests.triggers.recording import RecordingStarter

from .conftest import open_pincer, running_engine, utc, write_skill

pytestmark = pytest.mark.anyio


def _fired(starter: RecordingStarter) -> list[str]:
    return [r.trigger.name for r in starter.requests]


async def test_a_berlin_job_fires_at_the_right_instants_across_the_spring_change(pincer_home: Path) -> None:
    clock = ManualClock(utc(2026, 3, 28, 0))
    starter = RecordingStarter()
    async with open_pincer(pincer_home) as pincer, running_engine(pincer, starter, clock) as engine:
        await engine.scheduler.add(
            JobSpec(name="nightly", schedule=parse_cron("30 2 * * *", tz="Europe/Berlin"), message="night shift"),
            now=clock.now(),
        )
        # 02:30 CET = 01:30 UTC; the next night 02:30 does not exist: 03:00 CEST = 01:00 UTC; then 00:30 UTC.
        for instant in (utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)):
            before = len(starter.requests)
            clock.set(instant - 1)
            await engine.settle()
            assert len(starter.requests) == before, "fired early"
            clock.set(instant)
            await engine.settle()
            assert len(starter.requests) == before + 1
            assert (await engine.store.job("nightly")).last_status == "done"  # type: ignore[union-attr]
        request = starter.requests[0]
        assert request.message == "night shift" and request.session == "cron:nightly" and request.skill is None
        assert request.trigger.kind == "schedule" and request.trigger.fired_by == "scheduler"
        records = [r for r in await pincer.audit.records() if r.kind == "trigger"]
        assert [r.tool for r in records] == ["schedule:nightly"] * 3
        assert {r.args["run_id"] for r in records} == {r.run_id for r in starter.requests}
        assert await pincer.audit.verify() == len(await pincer.audit.records())


async def test_next_run_survives_a_restart_and_a_missed_run_runs_once(pincer_home: Path) -> None:
    clock = ManualClock(utc(2026, 5, 1, 9, 15))
    async with open_pincer(pincer_home) as pincer, running_engine(pincer, RecordingStarter(), clock) as engine:
        await engine.scheduler.add(JobSpec(name="hourly", schedule=parse_cron("0 * * * *", tz="UTC"), message="m"), now=clock.now())
        planned = (await engine.store.job("hourly")).next_run  # type: ignore[union-attr]
    assert planned == utc(2026, 5, 1, 10)
    # pincer is down from 09:15 until 14:20: the 10:00..14:00 runs were missed.
    clock = ManualClock(utc(2026, 5, 1, 14, 20))
    starter = RecordingStarter()
    async with open_pincer(pincer_home) as pincer:
        assert (await pincer.triggers.store.job("hourly")).next_run == planned  # type: ignore[union-attr]
        async with running_engine(pincer, starter, clock) as engine:
            await engine.settle()
            await engine.settle()
            assert len(starter.requests) == 1, "a missed run runs once, never N times"
            assert (await engine.store.job("hourly")).next_run == utc(2026, 5, 1, 15)  # type: ignore[union-attr]


async def test_a_run_missed_by_more_than_the_grace_is_skipped(pincer_home: Path) -> None:
    config = "[triggers]\nmisfire_grace_s = 600\n"
    clock = ManualClock(utc(2026, 5, 1, 9, 15))
    async with open_pincer(pincer_home, config) as pincer, running_engine(pincer, RecordingStarter(), clock) as engine:
        await engine.scheduler.add(JobSpec(name="j", schedule=parse_cron("0 10 * * *", tz="UTC"), message="m"), now=clock.now())
    clock = ManualClock(utc(2026, 5, 1, 10, 30))
    starter = RecordingStarter()
    async with open_pincer(pincer_home, config) as pincer, running_engine(pincer, starter, clock) as engine:
        await engine.settle()
        row = await engine.store.job("j")
        assert starter.requests == [] and row is not None and row.last_status == "missed"
        assert "past the misfire grace of 600 s" in (row.last_error or "")
        assert row.next_run == utc(2026, 5, 2, 10)


async def test_a_failing_job_retries_with_backoff_then_stops(pincer_home: Path) -> None:
    def fail(request: RunRequest) -> RunOutcome:
        return RunOutcome(run_id=request.run_id, status=RunStatus.FAILED, error="the model said no")

    clock = ManualClock(utc(2026, 5, 1, 8))
    starter = RecordingStarter(decide=fail)
    async with open_pincer(pincer_home) as pincer, running_engine(pincer, starter, clock) as engine:
        await engine.scheduler.add(JobSpec(name="flaky", schedule=parse_cron("0 9 * * *", tz="UTC"), message="m"), now=clock.now())
        t = utc(2026, 5, 1, 9)
        clock.set(t)
        await engine.settle()
        for attempt, delay in ((1, 30), (2, 60), (3, 120)):
            row = await engine.store.job("flaky")
            assert row is not None and row.retry_at == clock.now() + delay, (attempt, row)
            assert f"retry {attempt} of 3" in (row.last_error or "")
            clock.set(row.retry_at - 1)
            await engine.settle()
            assert len(starter.requests) == attempt, "retried early"
            clock.set(row.retry_at)
            await engine.settle()
            assert len(starter.requests) == attempt + 1
            assert starter.requests[-1].trigger.fired_by == "scheduler (retry)"
        row = await engine.store.job("flaky")
        assert row is not None and row.retry_at is None and row.last_status == "failed" and row.attempt == 0
        clock.advance(3_600)
        await engine.settle()
        assert len(starter.requests) == 4, "three retries, then it waits for its next run"
        assert [f.attempt for f in await engine.store.firings(kind="schedule")] == [0, 1, 2, 3]


async def test_a_long_job_is_not_started_twice(pincer_home: Path) -> None:
    clock = ManualClock(utc(2026, 5, 1, 8))
    starter = RecordingStarter(hold=True)
    async with open_pincer(pincer_home) as pincer, running_engine(pincer, starter, clock) as engine:
        await engine.scheduler.add(JobSpec(name="slow", schedule=parse_every("1m"), message="m"), now=clock.now())
        for _ in range(3):
            clock.advance(60)
            await engine.settle()
        assert len(starter.requests) == 1
        row = await engine.store.job("slow")
        assert row is not None and row.last_status == "skipped" and "max_concurrent 1" in (row.last_error or "")
        starter.finish(starter.requests[0].run_id)
        await engine.settle()
        clock.advance(60)
        await engine.settle()
        assert len(starter.requests) == 2


async def test_max_concurrent_two_and_jitter(pincer_home: Path) -> None:
    start = utc(2026, 5, 1, 8)
    clock = ManualClock(start)
    starter = RecordingStarter(hold=True)
    async with open_pincer(pincer_home) as pincer, running_engine(pincer, starter, clock) as engine:
        await engine.scheduler.add(
            JobSpec(name="wide", schedule=parse_every("1m"), message="m", max_concurrent=2, jitter_s=20), now=start
        )
        for minute in range(1, 5):
            row = await engine.store.job("wide")
            assert row is not None and row.next_run is not None
            assert start + 60 * minute <= row.next_run <= start + 60 * minute + 20, "jitter stays within 20 s"
            clock.set(row.next_run)
            await engine.settle()
        assert len(starter.requests) == 2, "two at a time"


async def test_paused_jobs_wait_and_cron_run_runs_one_now(pincer_home: Path) -> None:
    clock = ManualClock(utc(2026, 5, 1, 8))
    starter = RecordingStarter()
    async with open_pincer(pincer_home) as pincer, running_engine(pincer, starter, clock) as engine:
        await engine.scheduler.add(JobSpec(name="p", schedule=parse_cron("0 9 * * *", tz="UTC"), message="m"), now=clock.now())
        await engine.store.update_job("p", paused=True)
        clock.set(utc(2026, 5, 1, 9))
        await engine.settle()
        assert starter.requests == []
        await engine.store.update_job("p", run_requested=clock.now())  # what `pincer cron run p` does
        await engine.settle()
        assert len(starter.requests) == 1 and starter.requests[0].trigger.fired_by == "pincer cron run"
        assert (await engine.store.job("p")).run_requested is None  # type: ignore[union-attr]


async def test_config_jobs_follow_a_reloaded_config(pincer_home: Path) -> None:
    clock = ManualClock(utc(2026, 5, 1, 8))
    starter = RecordingStarter()
    first = '[[jobs]]\nname = "brief"\ncron = "0 9 * * *"\ntz = "UTC"\nmessage = "morning"\n'
    async with open_pincer(pincer_home, first) as pincer, running_engine(pincer, starter, clock) as engine:
        await engine.settle()
        row = await engine.store.job("brief")
        assert row is not None and row.source == "config" and row.next_run == utc(2026, 5, 1, 9)
        # another message: the next run stays; another time: a new next run
        await pincer.apply_config(parse_config(first.replace("morning", "good morning"), home=pincer_home))
        await engine.settle()
        assert (await engine.store.job("brief")).next_run == utc(2026, 5, 1, 9)  # type: ignore[union-attr]
        await pincer.apply_config(parse_config(first.replace("morning", "good morning").replace("0 9", "30 10"), home=pincer_home))
        await engine.settle()
        assert (await engine.store.job("brief")).next_run == utc(2026, 5, 1, 10, 30)  # type: ignore[union-attr]
        clock.set(utc(2026, 5, 1, 10, 30))
        await engine.settle()
        assert [r.message for r in starter.requests] == ["good morning"]
        await pincer.apply_config(parse_config("", home=pincer_home))
        await engine.settle()
        assert await engine.store.job("brief") is None


async def test_a_skills_schedule_trigger_is_a_job(pincer_home: Path) -> None:
    workspace = pincer_home / "skills"  # the operator's own, trusted
    # A workspace skill is installed-level (an agent can write there): it does not schedule itself.
    write_skill(pincer_home / "workspace" / "skills", "planted", "triggers:\n  - schedule: '* * * * *'\n")
    write_skill(workspace, "digest", "parameters:\n  - {name: since, type: string, default: yesterday}\n"
                "triggers:\n  - schedule: '0 7 * * *'\n")  # fmt: skip
    write_skill(workspace, "broken-digest", "parameters:\n  - {name: since, type: string, required: true}\n"
                "triggers:\n  - schedule: '0 7 * * *'\n")  # fmt: skip
    clock = ManualClock(utc(2026, 5, 1, 6))
    starter = RecordingStarter()
    async with open_pincer(pincer_home) as pincer, running_engine(pincer, starter, clock) as engine:
        await engine.settle()
        row = await engine.store.job("skill:digest")
        assert row is not None and row.source == "skill:digest"
        assert await engine.store.job("skill:planted") is None
        clock.set(row.next_run or 0)
        await engine.settle()
        assert [(r.skill, dict(r.params)) for r in starter.requests] == [("digest", {"since": "yesterday"})]
        broken = await engine.store.job("skill:broken-digest")
        assert broken is not None and broken.last_status == "error" and "needs parameter 'since'" in (broken.last_error or "")
        errors = [r for r in await pincer.audit.records() if r.tool == "schedule:skill:broken-digest"]
        assert len(errors) == 1 and errors[0].outcome == "error" and errors[0].error_code == "invalid_arguments"
        assert broken.retry_at is None, "a request that cannot run is not retried"


async def test_only_the_lease_holder_fires(pincer_home: Path) -> None:
    clock = ManualClock(utc(2026, 5, 1, 8))
    first, second = RecordingStarter(), RecordingStarter()
    async with open_pincer(pincer_home) as one, open_pincer(pincer_home) as two:
        engine_one = TriggerEngine.for_services(one.trigger_services(), starter=first, clock=clock)
        engine_two = TriggerEngine.for_services(two.trigger_services(), starter=second, clock=clock)
        engine_two.owner = process_token(os.getppid())  # a live process that is not this one
        await engine_one.scheduler.add(JobSpec(name="x", schedule=parse_every("1m"), message="m"), now=clock.now())
        async with anyio.create_task_group() as tg:
            await tg.start(engine_one.run)
            await tg.start(engine_two.run)
            for _ in range(3):
                clock.advance(60)
                await engine_one.settle()
                await engine_two.tick()
            tg.cancel_scope.cancel()
        assert len(first.requests) == 3 and second.requests == []
