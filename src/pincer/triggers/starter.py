"""The run starter firings are handed to: the agent loop.

:class:`AgentStarter` turns a trigger's :class:`~pincer.triggers.requests.RunRequest` into a run
of the agent loop (``pincer.llm``): the run id the trigger promised its caller, the skill with
its params and ``/command`` arguments, the message, the session, the budgets, and a webhook's
payload as untrusted data that taints the run from its start.

The engine hands a request over with ``start`` and then waits with ``wait`` in the same task
(its queue worker, or ``run_here`` for ``pincer chat`` and ``pincer cron run``), so ``wait`` is
where a run of this process is carried out; a run that another process started (a ``pincer
serve`` that died and whose queue this one took over) is followed in the store, where a run
whose process is gone ends as failed (``run_orphaned``). ``start`` is idempotent on the run id:
a run the store already has is not started again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio

from pincer.core.errors import RunNotFound
from pincer.triggers.requests import RunOutcome, RunRequest, RunStarter, RunStatus

if TYPE_CHECKING:
    from pincer.approver import ApprovalHook
    from pincer.llm.loop import AgentRun, EventHook
    from pincer.llm.run import RunRequest as LoopRequest
    from pincer.llm.services import RunnerServices

__all__ = ["AgentStarter", "default_starter", "STORE_POLL_S", "llm_request"]

STORE_POLL_S = 0.5  # following a run of another process: how often the store is read

# The trigger's budget names -> the agent loop's (pincer run --budget NAME=VALUE).
_BUDGET_NAMES = {
    "max_turns": "turns",
    "max_tool_calls": "tool_calls",
    "max_input_tokens": "input_tokens",
    "max_output_tokens": "output_tokens",
    "max_cost_usd": "cost_usd",
    "deadline_s": "deadline_s",
}
_STATUSES = {s.value: s for s in RunStatus}


def llm_request(request: RunRequest) -> LoopRequest:
    """The agent loop's request for a trigger's."""
    from pincer.llm.prompt import defuse
    from pincer.llm.run import OutsideData
    from pincer.llm.run import RunRequest as LoopRequest

    budgets = {_BUDGET_NAMES[name]: value for name, value in request.budgets.to_dict().items()}
    tool = str(request.trigger)
    params, message = dict(request.params), request.message
    if request.untrusted:
        # A webhook's message and params are templates rendered over its payload, and they
        # reach the prompt outside the untrusted block (the message as the user's words, params
        # in the skill's text): the sender's text must not open or close a block there.
        params = {k: defuse(v) if isinstance(v, str) else v for k, v in params.items()}
        message = defuse(message) if message else message
    return LoopRequest(
        skill=request.skill,
        params=params,
        message=message,
        session=request.session,
        trigger=tool,
        budgets=budgets or None,
        run_id=request.run_id,
        arguments=request.arguments,
        outside=tuple(OutsideData(tool=tool, source=u.source, content=u.content) for u in request.untrusted),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Attached:
    on_event: EventHook | None = None
    on_approval: ApprovalHook | None = None
    profile: str | None = None


@dataclass(kw_only=True, slots=True)
class _Started:
    run: AgentRun
    message: str
    done: anyio.Event = field(default_factory=anyio.Event)
    driving: bool = False
    outcome: RunOutcome | None = None


class AgentStarter:
    """Carries firings out with the agent loop of ``pincer``.

    ``attach(run_id, on_event=..., on_approval=...)`` before the run starts shows its events and
    asks its approvals where the person is (``pincer chat``'s ``/NAME``)."""

    def __init__(self, services: RunnerServices) -> None:
        self.services = services
        self._started: dict[str, _Started] = {}
        self._attached: dict[str, _Attached] = {}

    def attach(
        self,
        run_id: str,
        *,
        on_event: EventHook | None = None,
        on_approval: ApprovalHook | None = None,
        profile: str | None = None,
    ) -> None:
        """Before ``start``: the run's events go to ``on_event``, its approvals to ``on_approval``
        (a person at this terminal), and it uses the model profile ``profile``."""
        self._attached[run_id] = _Attached(on_event=on_event, on_approval=on_approval, profile=profile)

    async def start(self, request: RunRequest) -> str:
        from pincer.llm.prompt import DEFAULT_MESSAGE

        run_id = request.run_id
        if run_id in self._started or await self._in_store(run_id):
            return run_id
        attached = self._attached.pop(run_id, _Attached())
        loop_request = llm_request(request)
        if attached.profile is not None:
            loop_request = replace(loop_request, profile=attached.profile)
        # Bad input (an unknown skill, a params mismatch, no model configured) raises here,
        # before the store has a row; the engine records the firing as not started.
        agent_run = await self.services.agent().open_run(
            loop_request, on_event=attached.on_event, on_approval=attached.on_approval
        )
        message = loop_request.message or (DEFAULT_MESSAGE if request.skill else "")
        self._started[run_id] = _Started(run=agent_run, message=message)
        return run_id

    async def wait(self, run_id: str) -> RunOutcome:
        started = self._started.get(run_id)
        if started is None:
            return await self._follow(run_id)
        if started.driving:
            await started.done.wait()
        else:
            await self._drive(started)
        assert started.outcome is not None
        return started.outcome

    async def is_running(self, run_id: str) -> bool:
        started = self._started.get(run_id)
        if started is not None:
            return started.outcome is None
        try:
            return not (await self.services.runs.get(run_id)).is_final
        except RunNotFound:
            return False

    def cancel(self, run_id: str) -> None:
        started = self._started.get(run_id)
        if started is not None and started.outcome is None:
            started.run.cancel()

    async def _drive(self, started: _Started) -> None:
        from pincer.llm.loop import carry_out

        started.driving = True
        try:
            ended = await carry_out(started.run, started.message, stopped="the process stopped")
            started.outcome = _outcome(started.run.id, ended.status, ended.error, ended.stop)
        finally:
            if started.outcome is None:  # cancelled: carry_out closed the run as cancelled
                started.outcome = RunOutcome(run_id=started.run.id, status=RunStatus.CANCELLED, error="the process stopped")
            started.done.set()
            self._started.pop(started.run.id, None)  # the store answers for it from now on

    async def _follow(self, run_id: str) -> RunOutcome:
        while True:
            try:
                row = await self.services.runs.get(run_id)  # a run whose process died is settled as failed
            except RunNotFound:
                return RunOutcome(run_id=run_id, status=RunStatus.LOST, error="no run with this id was recorded")
            if row.is_final:
                return _outcome(run_id, row.status, row.error, row.stop)
            await anyio.sleep(STORE_POLL_S)

    async def _in_store(self, run_id: str) -> bool:
        try:
            await self.services.runs.get(run_id)
        except RunNotFound:
            return False
        return True


def _outcome(run_id: str, status: str, error: Any, stop: str | None) -> RunOutcome:
    message = None
    if status == RunStatus.BUDGET_EXCEEDED.value and stop:
        message = f"the run's {stop} budget is spent"
    elif isinstance(error, Mapping):
        message = str(error.get("message") or error.get("code") or "") or None
    elif error:
        message = str(error)
    return RunOutcome(run_id=run_id, status=_STATUSES.get(status, RunStatus.LOST), error=message)


def default_starter(services: RunnerServices) -> RunStarter:
    return AgentStarter(services)
