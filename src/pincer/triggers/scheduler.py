"""The persistent scheduler: which jobs are due, what happened to their runs, when to retry.

On every tick (``SCHEDULER_POLL_S``, or sooner when a job is due) the scheduler reads the jobs
from the store, so ``pincer cron add`` in another process is seen within a second, and:

- brings the jobs of ``[[jobs]]`` and of skills' ``schedule:`` triggers in line with the
  config and the skills in force (a changed schedule gets a new next run, other edits keep it);
- fires a job asked for by ``pincer cron run`` at once (even a paused one);
- fires a job whose next run has come. The next run is moved on *before* the firing, to the
  first instant after now: a job that was due several times while pincer was down runs once,
  and only when it is less than the misfire grace late (older runs are recorded as missed);
- skips a due run while the job still has ``max_concurrent`` runs going (default 1);
- retries a failed run up to ``retries`` times (3), ``retry_backoff_s`` doubling each time up
  to ``retry_backoff_max_s``. A run that could not start for a reason a retry cannot fix (the
  skill is gone, its parameters do not fit) is not retried.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pincer.core.errors import PincerError, UsageError
from pincer.store.triggers import JobRow, TriggerStore
from pincer.triggers.clock import Clock
from pincer.triggers.firing import Firing
from pincer.triggers.jobs import JobSpec, jobs_from_config, jobs_from_skills, with_anchor
from pincer.triggers.requests import Budgets, RunOutcome, RunStatus, TriggerKind

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.skills.library import SkillLibrary

logger = logging.getLogger(__name__)

__all__ = ["Scheduler", "first_run", "is_managed"]


def first_run(spec: JobSpec, now: float) -> float | None:
    """The first run of ``spec`` after ``now``, its jitter added."""
    found = spec.schedule.next_after(now)
    jitter = spec.jitter_s or 0.0
    if found is not None and jitter > 0:
        found += random.uniform(0.0, jitter)
    return found


def is_managed(source: str) -> bool:
    """Jobs that follow config.toml or a skill, and are not added or removed by hand."""
    return source == "config" or source.startswith("skill:")


class SchedulerEngine(Protocol):
    """What the scheduler uses of the engine that drives it (``TriggerEngine`` is one): a
    Protocol, so that the scheduler does not import the engine that imports it."""

    store: TriggerStore
    clock: Clock

    @property
    def config(self) -> Config: ...

    @property
    def skills(self) -> SkillLibrary | None: ...

    async def fire(
        self,
        *,
        kind: TriggerKind,
        name: str,
        fired_by: str,
        skill: str | None,
        params: Mapping[str, Any],
        message: str | None,
        session: str,
        arguments: str | None = None,
        budgets: Budgets | None = None,
        job: str | None = None,
        attempt: int = 0,
        audit_args: Mapping[str, Any] | None = None,
        here: bool = False,
        payload: Any = None,
    ) -> Firing: ...


class Scheduler:
    def __init__(self, engine: SchedulerEngine) -> None:
        self.engine = engine
        self.next_due: float | None = None
        # what the last sync saw: the config object and each eligible skill (name, content hash)
        self._synced: tuple[int, tuple[tuple[str, str], ...]] | None = None
        self._warned: set[str] = set()

    # -- keeping config and skill jobs in line ---------------------------------------------------

    async def sync(self, now: float) -> None:
        """Bring the ``config`` and ``skill:*`` jobs in line with what declares them."""
        engine = self.engine
        config = engine.config
        library = engine.skills
        eligible = tuple(library.eligible()) if library is not None else ()
        key = (id(config), tuple((s.name, s.content_hash) for s in eligible))
        if key == self._synced:
            return
        desired = jobs_from_config(config.jobs)
        skill_jobs, problems = jobs_from_skills(eligible)
        for skill, problem in problems:
            if skill not in self._warned:
                self._warned.add(skill)
                logger.warning("skill %s: its schedule trigger is not used: %s", skill, problem)
        desired += skill_jobs
        store = engine.store
        existing = {row.name: row for row in await store.jobs()}
        stale = {name for name, row in existing.items() if is_managed(row.source)}
        for spec in desired:
            row = existing.get(spec.name)
            if row is not None and not is_managed(row.source):
                if spec.name not in self._warned:
                    self._warned.add(spec.name)
                    logger.warning("job %r of %s is not used: a job of that name was added by hand", spec.name, spec.source)
                continue
            stale.discard(spec.name)
            try:
                if row is None:
                    spec = with_anchor(spec, now)
                    await store.add_job(
                        name=spec.name, source=spec.source, spec=spec.to_dict(), spec_hash=spec.spec_hash(),
                        next_run=first_run(spec, now), now=now,
                    )  # fmt: skip
                    continue
                old = JobSpec.from_dict(row.spec)
                spec = with_anchor(spec, old.schedule.anchor if old.schedule.anchor is not None else now)
                if row.spec_hash == spec.spec_hash():
                    continue
                keep = old.schedule_hash() == spec.schedule_hash()
                changes: dict[str, Any] = {"spec": spec.to_dict(), "spec_hash": spec.spec_hash(), "source": spec.source}
                if not keep:
                    changes["next_run"] = first_run(spec, now)
                await store.update_job(spec.name, **changes)
            except PincerError as exc:  # another process synced the same job a moment ago
                logger.info("syncing job %s: %s", spec.name, exc)
        for name in stale:
            await store.remove_job(name)
        self._synced = key

    # -- firing due jobs -------------------------------------------------------------------------

    async def tick(self, now: float) -> None:
        engine = self.engine
        settings = engine.config.triggers
        await self.sync(now)
        next_due: float | None = None
        for row in await engine.store.jobs():
            try:
                spec = JobSpec.from_dict(row.spec)
            except (PincerError, KeyError, TypeError, ValueError) as exc:
                await engine.store.update_job(row.name, last_status="error", last_error=f"unreadable job: {exc}", next_run=None)
                continue
            if row.run_requested is not None:
                await engine.store.update_job(row.name, run_requested=None)
                await self.fire(spec, now=now, fired_by="pincer cron run", attempt=0)
            if row.paused or not spec.enabled:
                continue
            if row.next_run is not None and row.next_run <= now:
                await self._due(spec, row, now, grace_s=settings.misfire_grace_s)
            elif (
                row.retry_at is not None
                and row.retry_at <= now
                and await engine.store.open_count(job=row.name) < (spec.max_concurrent or settings.max_concurrent)
            ):
                await engine.store.update_job(row.name, retry_at=None)
                await self.fire(spec, now=now, fired_by="scheduler (retry)", attempt=row.attempt)
        for row in await engine.store.jobs():
            if row.paused:
                continue
            for when in (row.next_run, row.retry_at):
                if when is not None and (next_due is None or when < next_due):
                    next_due = when
        self.next_due = next_due

    async def _due(self, spec: JobSpec, row: JobRow, now: float, *, grace_s: float) -> None:
        store = self.engine.store
        settings = self.engine.config.triggers
        late = now - float(row.next_run or now)
        upcoming = first_run(spec, now)
        due = float(row.next_run or now)
        if late > grace_s:
            await store.move_next_run(
                row.name, due=due, to=upcoming, last_status="missed",
                last_error=f"the run due at {_iso(row.next_run)} was {late:.0f} s late, past the misfire grace of {grace_s:g} s",
            )  # fmt: skip
            return
        # Moved on before the firing: whatever happens next, this instant never fires again; and
        # only by the one process whose move it was (another that also thought it led fires none).
        if not await store.move_next_run(row.name, due=due, to=upcoming):
            logger.info("job %s: the run due at %s was fired by another process", row.name, _iso(due))
            return
        limit = spec.max_concurrent or settings.max_concurrent
        if await store.open_count(job=row.name) >= limit:
            await store.update_job(
                row.name, last_status="skipped",
                last_error=f"the run due at {_iso(row.next_run)} was skipped: {limit} still going (max_concurrent {limit})",
            )  # fmt: skip
            return
        await store.update_job(row.name, retry_at=None, attempt=0)
        await self.fire(spec, now=now, fired_by="scheduler", attempt=0, due=due)

    async def fire(
        self, spec: JobSpec, *, now: float, fired_by: str, attempt: int, here: bool = False, due: float | None = None
    ) -> Firing:
        """Fire ``spec`` once; ``due``: the scheduled instant this firing stands for, recorded as
        its payload (``{"due": ..., "due_at": ...}``) in the firing and its audit record."""
        firing = await self.engine.fire(
            kind=TriggerKind.SCHEDULE, name=spec.name, fired_by=fired_by, skill=spec.skill, params=spec.params,
            message=spec.message, session=spec.run_session, budgets=spec.budgets, job=spec.name, attempt=attempt,
            here=here, payload={"due": due, "due_at": _iso(due)} if due is not None else None,
        )  # fmt: skip
        error = (firing.error or {}).get("message") if firing.error else None
        await self.engine.store.update_job(
            spec.name, last_run=now, last_run_id=firing.run_id, last_status=firing.status, last_error=error
        )
        return firing

    # -- how runs ended --------------------------------------------------------------------------

    async def outcome(self, job: str, attempt: int, outcome: RunOutcome, *, permanent: bool = False) -> None:
        """Record how a job's run ended; a failure is retried with backoff unless ``permanent``."""
        engine = self.engine
        row = await engine.store.job(job)
        if row is None:
            return  # removed meanwhile
        settings = engine.config.triggers
        now = engine.clock.now()
        try:
            retries = JobSpec.from_dict(row.spec).retries
        except (PincerError, KeyError, TypeError, ValueError):
            retries = None
        retries = settings.retries if retries is None else retries
        if outcome.status is RunStatus.DONE:
            await engine.store.update_job(job, last_status="done", last_error=None, attempt=0)
        elif outcome.is_failure and not permanent and attempt < retries:
            delay = min(settings.retry_backoff_s * (2**attempt), settings.retry_backoff_max_s)
            await engine.store.update_job(
                job, last_status="failed", attempt=attempt + 1, retry_at=now + delay,
                last_error=f"{outcome.error or outcome.status.value}; retry {attempt + 1} of {retries} in {delay:g} s",
            )  # fmt: skip
        else:
            await engine.store.update_job(job, last_status=outcome.status.value, last_error=outcome.error, attempt=0)

    # -- by hand ---------------------------------------------------------------------------------

    async def add(self, spec: JobSpec, *, now: float, next_run: float | None = None, replace: bool = False) -> JobRow:
        """Add a job made by hand (``pincer cron add``, ``pincer cron import``)."""
        spec = with_anchor(spec, now)
        upcoming = next_run if next_run is not None else first_run(spec, now)
        if upcoming is None:
            raise UsageError(
                f"job {spec.name!r} would never run: {spec.schedule.describe()} is in the past",
                hint="give a time that is still to come",
            )
        await self.engine.store.add_job(
            name=spec.name, source=spec.source, spec=spec.to_dict(), spec_hash=spec.spec_hash(), next_run=upcoming,
            paused=not spec.enabled, now=now, replace=replace,
        )  # fmt: skip
        return await self.engine.store.require_job(spec.name)


def _iso(t: float | None) -> str:
    if t is None:
        return "(never)"
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
