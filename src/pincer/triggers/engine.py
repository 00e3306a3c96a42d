"""The trigger engine: every firing becomes a recorded, audited, queued run request.

One engine per Pincer (``pincer.triggers``). Whatever fires — a ``/command``, a due job, a
webhook delivery, ``pincer cron run`` — goes the same way:

1. the run request is built and checked (the skill exists and is eligible, its parameters fit
   its types); a request that cannot run is recorded as an ``error`` firing;
2. the firing is written to the store with its run id and the request (``queued``), together
   with the webhook delivery it came from and its audit record (who or what fired it, with the
   redacted parameters and payload; the firing names it), in one transaction: one commit;
3. the queue worker hands it to the :class:`~pincer.triggers.requests.RunStarter` (at most
   ``[triggers] max_running`` at a time), marks it ``started``, and records how the run ended.

A caller that got a run id (a webhook's 202) has a persisted firing behind it: if pincer dies
before the run starts, the next ``pincer serve`` starts it (the starter is idempotent on the run
id, so a firing that was being handed over when pincer died is handed again, never run twice).

Only one process runs the scheduler and the queue worker: the holder of the store's scheduler
lead (store/triggers.py; ``pincer serve``; another on the same store waits and takes over when
the first dies).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel

from pincer.core.errors import PincerError, UsageError
from pincer.core.offload import off_loop
from pincer.safety.limits import limit_output
from pincer.store.audit import AuditEntry, AuditLog
from pincer.store.triggers import DeliveryRow, FiringRow, TriggerStore
from pincer.telemetry.tracing import TRACING
from pincer.triggers.clock import Clock, SystemClock
from pincer.triggers.commands import CommandCall, command_table, parse_command
from pincer.triggers.firing import Firing
from pincer.triggers.requests import (
    Budgets,
    RunOutcome,
    RunRequest,
    RunStarter,
    RunStatus,
    TriggerKind,
    TriggerRef,
    UntrustedInput,
    new_firing_id,
    new_run_id,
)

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.safety.scanner import LeakScanner
    from pincer.skills.library import SkillLibrary

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class TriggerServices:
    """What the engine uses of the service, made by ``pincer.service.Pincer.trigger_services()``
    (the service sits above the triggers): the trigger store and the audit log, and config, the
    skill library and the leak scanner as they are now (a reload replaces config)."""

    store: TriggerStore
    audit: AuditLog
    config: Callable[[], Config]
    skills: Callable[[], SkillLibrary | None]
    scanner: Callable[[], LeakScanner]


__all__ = [
    "TriggerEngine",
    "TriggerServices",
    "Firing",
    "SCHEDULER_POLL_S",
    "LEASE_STALE_S",
    "START_TIMEOUT_S",
    "RUN_WAIT_LIMIT_S",
    "SETTLE_TIMEOUT_S",
]

SCHEDULER_POLL_S = 1.0  # how often jobs, the queue and the lease are looked at
LEASE_STALE_S = 30.0  # a lease not renewed for this long is taken over
START_TIMEOUT_S = 60.0  # a starter's start() must return within this
RUN_WAIT_LIMIT_S = 86_400.0  # a run without a deadline of its own is given up on after this
RUN_WAIT_GRACE_S = 60.0  # beyond a run's own deadline
SETTLE_TIMEOUT_S = 30.0
_PRUNE_EVERY_S = 3_600.0
_ORPHANS_EVERY_S = 5.0  # the leader looks for firings of dead owners this often (another machine's die late)
_MAX_ERROR_CHARS = 2_000


class _StatusBatch:
    """The firing updates being gathered into one transaction, and how writing it went."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.error: Exception | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class _Prepared:
    row: FiringRow
    request: RunRequest | None
    audit: AuditEntry
    firing: Firing


class TriggerEngine:
    def __init__(
        self,
        *,
        store: TriggerStore,
        audit: AuditLog,
        starter: RunStarter,
        config: Callable[[], Config],
        skills: Callable[[], SkillLibrary | None],
        scanner: Callable[[], LeakScanner],
        clock: Clock | None = None,
        owner: str | None = None,
    ) -> None:
        from pincer.triggers.scheduler import Scheduler

        self.store = store
        self.audit = audit
        self.starter = starter
        self._config = config
        self._skills = skills
        self._scanner = scanner
        self.clock: Clock = clock or SystemClock()
        self.owner = owner or store.owners.token
        self.scheduler = Scheduler(self)
        self._wake = anyio.Event()
        self._inflight: set[str] = set()
        self._holds_lease = False
        self._running = False
        self._tick_lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._last_prune = 0.0
        self._last_orphans = 0.0
        self._open_estimate = 0  # firings on their way, counted at each tick plus those added since
        self._statuses: list[tuple[str, str, str | None, float | None]] = []
        self._status_batch: _StatusBatch | None = None

    @classmethod
    def for_services(cls, services: TriggerServices, *, starter: RunStarter, clock: Clock | None = None) -> TriggerEngine:
        return cls(
            store=services.store,
            audit=services.audit,
            starter=starter,
            config=services.config,
            skills=services.skills,
            scanner=services.scanner,
            clock=clock,
        )

    @property
    def config(self) -> Config:
        return self._config()

    @property
    def skills(self) -> SkillLibrary | None:
        return self._skills()

    @property
    def is_running(self) -> bool:
        """Whether this engine's worker runs here (so a firing waits for it)."""
        return self._running and self._holds_lease

    # -- firing --------------------------------------------------------------------------------

    def commands(self) -> dict[str, Any]:
        library = self.skills
        return command_table(library.user_invocable()) if library is not None else {}

    def parse_command(self, text: str) -> CommandCall:
        return parse_command(text, self.commands())

    async def fire_command(self, text: str, *, session: str, fired_by: str, here: bool = False) -> Firing:
        """``/NAME args``: parsed (unknown commands and bad arguments raise, nothing recorded),
        then fired like any trigger (``here``: to be started by this process, as ``pincer chat``
        does, with :meth:`run_here`)."""
        call = self.parse_command(text)
        return await self.fire(
            kind=TriggerKind.COMMAND, name=call.command, fired_by=fired_by, skill=call.skill.name,
            params=call.params, message=text.strip(), session=session, arguments=call.arguments or None, here=here,
        )  # fmt: skip

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
    ) -> Firing:
        """Record, audit and queue one firing; a request that cannot run is recorded (and
        audited) as an error and returned so, never raised. ``here``: the firing is this
        process's to start (with :meth:`run_here`), never picked up by a queue worker.
        ``payload``: what fired it, recorded (redacted, bounded) but not given to the run."""
        prepared = self.prepare(
            kind=kind, name=name, fired_by=fired_by, skill=skill, params=params, message=message, session=session,
            arguments=arguments, budgets=budgets, job=job, attempt=attempt, audit_args=audit_args, here=here,
            payload=payload,
        )  # fmt: skip
        await self.commit([prepared])
        return prepared.firing

    def prepare(
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
        untrusted: Sequence[UntrustedInput] = (),
        payload: Any = None,
        payload_redacted: bool = False,
        job: str | None = None,
        attempt: int = 0,
        audit_args: Mapping[str, Any] | None = None,
        here: bool = False,
    ) -> _Prepared:
        """Build one firing (nothing written yet): its row, its request, its audit entry.
        ``payload_redacted``: ``payload`` went through :meth:`redact_payload` already."""
        now = self.clock.now()
        firing_id, run_id = new_firing_id(), new_run_id()
        if TRACING.on:  # the run, when this process starts it, continues the firing's trace
            TRACING.remember(run_id)
        scanner = self._scanner()
        error: PincerError | None = None
        values: Mapping[str, Any] = dict(params)
        try:
            # a skill's own schedule (job skill:NAME) is the skill's design, not a person's pick
            own = kind is TriggerKind.SCHEDULE and skill is not None and name.split("#")[0] == f"skill:{skill}"
            values = self.check_request(skill, params, own_trigger=own)
        except PincerError as exc:
            error = exc
        shown_params = scanner.scan(dict(values))[0]
        recorded_payload = self.record_payload(payload, redacted=payload_redacted) if payload is not None else None
        ref = TriggerRef(kind=kind, name=name, firing_id=firing_id, fired_by=fired_by)
        request = None
        if error is None:
            request = RunRequest(
                run_id=run_id, skill=skill, params=values, message=message, session=session, trigger=ref,
                budgets=budgets or Budgets(), arguments=arguments, untrusted=tuple(untrusted),
            )  # fmt: skip
        row = FiringRow(
            id=firing_id, ts=now, kind=kind.value, name=name, fired_by=fired_by, session=session, run_id=run_id,
            status=("starting" if here else "queued") if error is None else "error", skill=skill, params=shown_params,
            payload=recorded_payload, error=_short(error.message) if error else None,
            request=request.to_dict() if request else None, owner=self.owner if here else None, job=job,
            attempt=attempt, ended_at=now if error else None,
        )  # fmt: skip
        args: dict[str, Any] = {"firing": firing_id, "run_id": run_id, "skill": skill, "params": shown_params}
        if message is not None:
            args["message"] = scanner.scan_text(message)[0][:_MAX_ERROR_CHARS]
        if job is not None:
            args["job"], args["attempt"] = job, attempt
        if recorded_payload is not None:
            args["payload"] = recorded_payload
        args.update(audit_args or {})
        entry = AuditEntry(
            session=session,
            caller="trigger",
            tool=f"{kind.value}:{name}",
            kind="trigger",
            decision="allow" if error is None else "error",
            reason=f"fired by {fired_by}",
            outcome="ok" if error is None else "error",
            error_code=error.code if error else None,
            error=_short(error.message) if error else None,
            args=args,
            idempotency_key=firing_id,
            ts=time.time(),
        )
        firing = Firing(
            id=firing_id, run_id=run_id, kind=kind.value, name=name, status="queued" if error is None else "error", skill=skill,
            params=shown_params, error=error.to_dict() if error else None,
        )  # fmt: skip
        return _Prepared(row=row, request=request, audit=entry, firing=firing)

    async def commit(self, prepared: Sequence[_Prepared], *, delivery: DeliveryRow | None = None) -> None:
        """Write the firings, their audit records and their delivery in one transaction (one
        durable commit, group-committed with the audit records of the same turn). Raises
        ``DeliveryExists`` for a delivery id stored already (nothing written)."""
        await self.store.insert_audited(
            [p.row for p in prepared], [p.audit for p in prepared], audit=self.audit, delivery=delivery
        )
        added = sum(1 for p in prepared if p.request is not None)
        if added:
            self._open_estimate += added
            self._wake.set()

    async def is_queue_full(self) -> bool:
        """Whether ``[triggers] max_queued`` runs are on their way (counted exactly only when
        the running estimate says so: a COUNT per delivery would cost more than the delivery)."""
        limit = self.config.triggers.max_queued
        if self._open_estimate < limit:
            return False
        self._open_estimate = await self.store.open_count()
        return self._open_estimate >= limit

    def check_request(self, skill: str | None, params: Mapping[str, Any], *, own_trigger: bool = False) -> Mapping[str, Any]:
        """The parameters checked and coerced for ``skill`` (which must exist and be eligible,
        and be one people may start unless ``own_trigger``: the skill's own schedule fired)."""
        if skill is None:
            return dict(params)
        from pincer.skills.params import coerce_params

        library = self.skills
        if library is None:
            raise UsageError(f"cannot run skill {skill!r}: skills are turned off", hint="set [skills] enabled = true")
        # commands, cron jobs and hooks a person set up
        found = library.get(skill) if own_trigger else library.invocable(skill, by="person")
        eligibility = library.eligibility_of(skill)
        if not eligibility.is_eligible:
            raise UsageError(
                f"skill {skill!r} is not eligible here: {'; '.join(eligibility.reasons)}",
                hint=f"`pincer skills show {skill}` says what it needs",
            )
        return coerce_params(found, params)

    def record_payload(self, payload: Any, *, redacted: bool = False) -> Any:
        """A payload as the store and the audit log keep it: redacted (``redacted``: it is
        already, by :meth:`redact_payload`), then bounded."""
        scanned = payload if redacted else self.redact_payload(payload)
        bounded, _cut, _size = limit_output(scanned, self.config.triggers.payload_record_bytes)
        return bounded

    def redact_payload(self, payload: Any) -> Any:
        """A payload with every stored secret value (and known secret pattern) in it masked."""
        return self._scanner().scan(payload)[0]

    async def redacted_payload(self, payload: Any) -> Any:
        """``redact_payload`` off the event loop when the payload is large (a webhook's body)."""
        scanner = self._scanner()
        return (await off_loop(scanner.scan, payload, over=payload))[0]

    # -- the queue worker ----------------------------------------------------------------------

    async def run_here(self, firing_id: str) -> RunOutcome | None:
        """Hand one firing to the starter in this process and wait for its run to end (``pincer
        cron run`` with no ``pincer serve`` running, ``pincer chat``): one fired ``here``, or a
        queued one. None when it is neither."""
        row = await self.store.firing(firing_id)
        if row is None or not (row.status == "starting" and row.owner == self.owner):
            row = await self.store.claim(firing_id, self.owner)
        if row is None:
            return None
        await self._hand_over(row)
        done = await self.store.firing(firing_id)
        status = done.status if done is not None else "lost"
        error = done.error if done is not None else None
        if status == "error":
            return RunOutcome(run_id=row.run_id, status=RunStatus.FAILED, error=error)
        try:
            return RunOutcome(run_id=row.run_id, status=RunStatus(status), error=error)
        except ValueError:
            return RunOutcome(run_id=row.run_id, status=RunStatus.LOST, error=error)

    def wake(self) -> None:
        self._wake.set()

    async def _work_loop(self) -> None:
        while True:
            if self._holds_lease:
                await self._start_claimed()
            with anyio.move_on_after(SCHEDULER_POLL_S):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def _start_claimed(self) -> None:
        free = self.config.triggers.max_running - len(self._inflight)
        if free <= 0 or self._tg is None:
            return
        for row in await self.store.claim_queued(self.owner, free):
            self._inflight.add(row.id)
            self._tg.start_soon(self._run_firing, row)

    async def _run_firing(self, row: FiringRow) -> None:
        try:
            await self._hand_over(row)
        except Exception:  # one broken firing must not stop the worker
            logger.exception("firing %s failed", row.id)
        finally:
            self._inflight.discard(row.id)
            self._wake.set()

    async def _hand_over(self, row: FiringRow) -> None:
        if row.request is None:
            await self.store.finish(row.id, "error", "the queued request was lost", now=self.clock.now())
            return
        request = RunRequest.from_dict(row.request)
        try:
            with anyio.fail_after(START_TIMEOUT_S):
                await self.starter.start(request)
        except (PincerError, TimeoutError) as exc:
            message = exc.message if isinstance(exc, PincerError) else f"the run did not start within {START_TIMEOUT_S:g} s"
            permanent = isinstance(exc, UsageError)
            await self.store.finish(row.id, "error", _short(message), now=self.clock.now())
            logger.warning("run %s (%s) did not start: %s", request.run_id, request.trigger, message)
            if row.job:
                await self.scheduler.outcome(
                    row.job, row.attempt, RunOutcome(run_id=request.run_id, status=RunStatus.FAILED, error=message),
                    permanent=permanent,
                )  # fmt: skip
            return
        await self._set_status(row.id, "started")
        limit = (request.budgets.deadline_s + RUN_WAIT_GRACE_S) if request.budgets.deadline_s else RUN_WAIT_LIMIT_S
        outcome: RunOutcome | None = None
        with anyio.move_on_after(limit):
            outcome = await self.starter.wait(request.run_id)
        if outcome is None:
            outcome = RunOutcome(run_id=request.run_id, status=RunStatus.LOST, error=f"no outcome within {limit:g} s")
        await self._set_status(row.id, outcome.status.value, _short(outcome.error) if outcome.error else None)
        if row.job:
            await self.scheduler.outcome(row.job, row.attempt, outcome)

    async def _set_status(self, firing_id: str, status: str, error: str | None = None) -> None:
        """A handed-over firing's ``started`` or how its run ended, written before this returns,
        in one transaction with the other firings' updates of the same event-loop turn (the
        first caller yields once to gather them, as the audit log does)."""
        self._statuses.append((firing_id, status, error, self.clock.now() if status != "started" else None))
        batch = self._status_batch
        if batch is not None:
            await batch.done.wait()
        else:
            batch = self._status_batch = _StatusBatch()
            try:
                await anyio.lowlevel.checkpoint()
            finally:
                # Synchronous from here: nobody joins a batch that is being written.
                updates, self._statuses, self._status_batch = self._statuses, [], None
                try:
                    await self.store.set_statuses(updates)
                except Exception as exc:  # noqa: BLE001 - every caller of the batch gets the failure
                    batch.error = exc
                finally:
                    batch.done.set()
        if batch.error is not None:
            raise batch.error

    # -- running -------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The scheduler and the queue worker, until cancelled (``pincer serve`` runs this)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._running = True
            try:
                await self.tick()
                tg.start_soon(self._work_loop)
                task_status.started()
                while True:
                    await self.clock.sleep(self._sleep_for())
                    await self.tick()
            finally:
                self._running = False
                if self._holds_lease:
                    try:
                        await self.store.release_lease(self.owner)
                    except PincerError:
                        pass
                self._holds_lease = False

    def _sleep_for(self) -> float:
        due = self.scheduler.next_due
        if due is None:
            return SCHEDULER_POLL_S
        return max(0.0, min(SCHEDULER_POLL_S, due - self.clock.now()))

    async def tick(self) -> None:
        """One look at the lease, the jobs and the queue (also called by tests)."""
        async with self._tick_lock:
            held = await self.store.acquire_lease(self.owner)
            if held and not self._holds_lease:
                self._holds_lease = True
                await self._recover()
            self._holds_lease = held
            if not held:
                return
            now = self.clock.now()
            self._open_estimate = await self.store.open_count()
            if time.monotonic() - self._last_orphans > _ORPHANS_EVERY_S:
                await self._close_orphans()
            await self.scheduler.tick(now)
            if time.time() - self._last_prune > _PRUNE_EVERY_S:
                self._last_prune = time.time()
                keep_s = self.config.triggers.delivery_retention_days * 86_400
                await self.store.prune_deliveries(time.time() - keep_s)
            self._wake.set()

    async def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Tick, then wait until nothing is queued or being handed over and every run that has
        ended is recorded (tests; bounded by ``timeout_s``)."""
        with anyio.fail_after(timeout_s):
            await self.tick()
            while True:
                self._wake.set()
                await anyio.sleep(0.005)
                queued = [
                    f for f in await self.store.open_firings()
                    if f.status == "queued" or (f.status == "starting" and f.id in self._inflight)
                ]  # fmt: skip
                if not queued and not any([await self._is_ending(i) for i in list(self._inflight)]):
                    return

    async def _is_ending(self, firing_id: str) -> bool:
        row = await self.store.firing(firing_id)
        if row is None or row.status != "started":
            return True
        is_running = getattr(self.starter, "is_running", None)
        return not callable(is_running) or not await is_running(row.run_id)

    async def _recover(self) -> None:
        """After taking the lease: audit what was queued but not audited, put back what a dead
        process was handing over, and close what it had started."""
        for row in await self.store.unaudited():
            tool = f"{row.kind}:{row.name}"
            found = await self.store.audited_firing(tool, row.id)
            if found is None:
                request = RunRequest.from_dict(row.request) if row.request else None
                entry = AuditEntry(
                    session=row.session, caller="trigger", tool=tool, kind="trigger", decision="allow",
                    reason=f"fired by {row.fired_by} (recorded after a restart)", outcome="ok",
                    args={"firing": row.id, "run_id": row.run_id, "skill": row.skill, "params": dict(row.params),
                          "payload": row.payload, "trigger": str(request.trigger) if request else tool},
                    idempotency_key=row.id,
                )  # fmt: skip
                found = await self.audit.append(entry)
            await self.store.set_audit(row.id, found)
        await self._close_orphans()

    async def _close_orphans(self) -> None:
        """Put back what a dead process was handing over, and close what it had started. At
        the takeover, and every ``_ORPHANS_EVERY_S`` after: an owner on another machine is
        known to be dead only once its heartbeat is stale, which may be after the takeover."""
        self._last_orphans = time.monotonic()
        for row in await self.store.open_firings():
            if row.owner in (None, self.owner) or await self.store.owners.is_alive(row.owner):
                continue
            if row.status == "starting":
                await self.store.requeue(row.id)
            elif row.status == "started":
                await self.store.finish(row.id, "interrupted", "pincer stopped while the run was going on", now=self.clock.now())
                if row.job:
                    await self.scheduler.outcome(
                        row.job, row.attempt,
                        RunOutcome(run_id=row.run_id, status=RunStatus.LOST, error="interrupted by a restart"),
                        permanent=True,
                    )  # fmt: skip


def _short(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"
