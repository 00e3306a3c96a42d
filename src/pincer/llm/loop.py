"""The agent loop: a model carries out a skill, and every tool call it makes goes through the chain.

    loop = AgentLoop(pincer.agent_services(), environ=os.environ)
    run = await loop.run(RunRequest(skill="code-review", params={"path": "src"}))

One run, turn by turn:

1. The system prompt is pincer's rules, the rendered skill and the skill catalog
   (``prompt.py``); the model is offered the tools the skill declares (its patterns expanded,
   trust attenuation applied), intersected with what the run's session may call, plus ``skill``.
   Names are mapped to provider-safe ones and back (``names.py``). Past ``[agent]
   max_tool_definitions`` tools it gets the skill's own tools plus ``find_tools`` and
   ``load_tools`` instead of every definition.
2. A turn streams from the provider (retried as a whole on 429/5xx/a dropped stream,
   ``retry.py``). Only a turn that ended properly yields tool calls.
3. Its tool calls run concurrently (at most ``[agent] max_parallel_tool_calls``), each an
   ordinary ``CallRequest`` with the run's session, caller ``agent``, the run id, and an
   idempotency key from run id + turn + call id; an approval pauses that call exactly as for any
   caller (``on_approval`` hears of it). Results go back wrapped as data
   (``<tool_output tool=... trusted=...>``), failures and denials as tool errors with the reason.
4. Taint: once the run has read untrusted output (a tool whose output is not trusted), its
   later calls carry ``CallRequest.taint`` and the chain makes sensitive ones ask (or refuses
   them with ``[agent] taint = "deny"``), naming that output.
5. Budgets (``policy/run_budget.py``) are checked before each turn and after it, before its tool
   calls run; the deadline is a cancel scope. Hitting one ends the run ``budget_exceeded``.

Everything the run says and does is recorded: the ``runs`` row and transcript (redacted, each tool
result with its audit id) and one audit record at the start and one at the end.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import aclosing, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from pincer.approver import ApprovalHook
from pincer.config import ModelSettings, Price
from pincer.core.errors import ArgumentsInvalid, ConfigError, ProviderError, SkillNotFound, UsageError
from pincer.core.ids import random_id
from pincer.core.offload import off_loop
from pincer.core.values import CallRequest, Taint, ToolResult, ToolSpec
from pincer.dispatch import redact_args
from pincer.llm.host import AgentServices
from pincer.llm.messages import (
    CompletionOptions,
    Message,
    Retrying,
    TextDelta,
    TokenUsage,
    ToolCall,
    ToolCallReady,
    ToolDefinition,
    TurnEnd,
    UsageReport,
)
from pincer.llm.names import ToolNames
from pincer.llm.prices import cost_of, find_price
from pincer.llm.prompt import (
    DEFAULT_MESSAGE,
    FIND_TOOLS,
    LOAD_TOOLS,
    defuse_param,
    find_tools_definition,
    load_tools_definition,
    render_value,
    system_prompt,
    wrap_output,
)
from pincer.llm.provider import Provider, open_provider, resolve_api_key
from pincer.llm.retry import complete_with_retries
from pincer.llm.run import OutsideData, Run, RunEvent, RunRequest, ToolCallRecord
from pincer.llm.tool_search import ToolIndex
from pincer.policy.run_budget import RunBudgets, first_exceeded, would_exceed_tool_calls
from pincer.policy.taint import LOCAL, asking_effects, output_reach
from pincer.policy.visibility import visible_tools
from pincer.store.audit import AuditEntry
from pincer.store.runs import RunStore
from pincer.telemetry import spans
from pincer.telemetry.tracing import TRACING

if TYPE_CHECKING:
    from pincer.policy.session import SessionPolicy
    from pincer.safety.scanner import LeakScanner
    from pincer.skills.model import Skill
    from pincer.store.approvals import ApprovalRequest

logger = logging.getLogger(__name__)

__all__ = ["AgentLoop", "AgentRun", "Outcome", "carry_out", "CANCEL_POLL_INTERVAL_S", "RUN_SKILL_TOOL"]

CANCEL_POLL_INTERVAL_S = 0.5  # how soon `pincer runs cancel` from another process is noticed
RUN_SKILL_TOOL = "run_skill"  # never offered to a model: a run must not start runs of its own
SKILL_TOOL = "skill"
_MAX_SHOWN_RAW_ARGS = 200
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")

EventHook = Callable[[RunEvent], None]
ProviderFactory = Callable[[ModelSettings, "str | None"], Provider]


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """How one exchange (a message and the turns it took) ended."""

    status: str  # done | failed | budget_exceeded | cancelled
    stop: str | None = None
    error: Mapping[str, Any] | None = None


async def carry_out(agent_run: AgentRun, message: str, *, stopped: str) -> Run:
    """Send ``message`` and close the run however the exchange ended: a bug in it ends the run
    as failed (not its caller), a cancellation as cancelled (``stopped`` says by what); the
    close is shielded, so the run's row and end record are written even then."""
    outcome = Outcome(status="cancelled", error={"code": "cancelled", "message": stopped})
    try:
        outcome = await agent_run.send(message)
    except Exception as exc:
        logger.exception("run %s failed", agent_run.id)
        outcome = Outcome(status="failed", error={"code": "error", "message": f"the run failed: {type(exc).__name__}"})
    finally:
        with anyio.CancelScope(shield=True):
            ended = await agent_run.close(outcome)
    return ended


class AgentLoop:
    """Makes runs over the services it is given (the service's, ``Pincer.agent_services()``).
    ``environ`` is where ``[llm] api_key_env`` is looked up."""

    def __init__(
        self,
        services: AgentServices,
        *,
        environ: Mapping[str, str] | None = None,
        provider_factory: ProviderFactory | None = None,
    ) -> None:
        self.services = services
        self.environ = environ if environ is not None else {}
        self._provider_factory = provider_factory or open_provider
        self.store: RunStore = services.runs
        # One client per model setting and key, kept across runs: making an SDK client (its HTTP
        # pool, its TLS context) costs milliseconds, and a kept connection skips the handshake.
        self._providers: dict[tuple[ModelSettings, str | None], Provider] = {}

    def provider(self, settings: ModelSettings, api_key: str | None) -> Provider:
        key = (settings, api_key)
        found = self._providers.get(key)
        if found is None:
            found = self._providers[key] = self._provider_factory(settings, api_key)
        return found

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            try:
                await provider.aclose()
            except Exception:  # closing an HTTP client must not stop the others closing
                logger.debug("closing a provider failed", exc_info=True)

    async def run(
        self,
        request: RunRequest,
        *,
        on_event: EventHook | None = None,
        on_approval: ApprovalHook | None = None,
    ) -> Run:
        """Carry out one request from start to end; never raises for what happens inside the
        run (the Run says it), only for a request that cannot start (a missing skill, bad params,
        no model configured)."""
        agent_run = await self.open_run(request, on_event=on_event, on_approval=on_approval)
        outcome = Outcome(status="cancelled", error={"code": "cancelled", "message": "the run was cancelled"})
        try:
            outcome = await agent_run.send(request.message or (DEFAULT_MESSAGE if request.skill else ""))
        finally:
            with anyio.CancelScope(shield=True):
                result = await agent_run.close(outcome)
        return result

    async def open_run(
        self,
        request: RunRequest,
        *,
        on_event: EventHook | None = None,
        on_approval: ApprovalHook | None = None,
    ) -> AgentRun:
        """Check the request and start a run (its row and its first audit record exist once
        this returns). Bad input raises before anything is written."""
        services = self.services
        config = services.config()
        skill, skill_text = None, None
        params: dict[str, Any] = {}
        if request.skill is not None:
            library = services.skills()
            if library is None:
                raise SkillNotFound(
                    f"no skill named {request.skill!r}: skills are turned off", hint="set [skills] enabled = true"
                )
            # run_skill is another agent asking; every other trigger is a person or their setup
            skill = library.invocable(request.skill, by="model" if request.trigger == "run_skill" else "person")
            eligibility = library.eligibility_of(skill.name)
            if not eligibility.is_eligible:
                raise UsageError(
                    f"skill {skill.name!r} is not available here: {eligibility.reason}",
                    hint=f"`pincer skills show {skill.name}` says what it needs",
                )
            # Parameter values are data, whoever gave them: defused before they reach the
            # template, so a value cannot close the <skill> block or open a <system> one.
            arguments = defuse_param(request.arguments) if request.arguments is not None else None
            rendered = library.render(skill.name, defuse_param(dict(request.params)), arguments=arguments)
            skill_text, params = rendered.text, dict(rendered.params)
        elif request.params:
            raise UsageError("params were given without a skill", hint="name the skill the params are for")
        settings = config.llm.resolve(request.profile)
        if not settings.model:
            raise ConfigError(
                "no model is configured for the agent loop",
                hint='set [llm] model in config.toml (and provider, base_url, api_key_secret), e.g. model = "gpt-4o-mini"',
            )
        budgets = RunBudgets.from_settings(config.agent).with_overrides(request.budgets)
        price = find_price(settings.model, config.agent.prices)
        if budgets.cost_usd is not None and price is None:
            asked = "--budget cost_usd" if request.budgets and "cost_usd" in request.budgets else "[agent] max_cost_usd"
            raise ConfigError(
                f"a cost budget ({asked}) is set but pincer has no price for the model {settings.model!r}",
                hint=f"price it under [agent.prices] in config.toml: a table [agent.prices.\"{settings.model}\"] with "
                f"input_per_mtok and output_per_mtok (US dollars per million tokens), or leave out {asked}",
            )
        session = request.session or config.agent.session
        api_key = resolve_api_key(settings, services.secrets, self.environ)
        provider = self.provider(settings, api_key)
        scanner = services.scanner()
        if api_key:
            scanner = scanner.with_values((api_key,))
        skills = services.skills()
        catalog = skills.catalog().text if skills is not None else None
        run_id = request.run_id or random_id()
        if not _RUN_ID.fullmatch(run_id):
            raise UsageError(f"not a run id: {run_id[:80]!r}", hint="leave the run id out; pincer chooses one")
        run = AgentRun(
            loop=self,
            run_id=run_id,
            request=request,
            session=session,
            skill_name=skill.name if skill is not None else None,
            settings=settings,
            provider=provider,
            budgets=budgets,
            price=price,
            scanner=scanner,
            on_event=on_event,
            on_approval=on_approval,
        )
        run.offer(await self._offered(skill, session), skill)
        policy = config.session(session)
        params_from = _params_source(request, policy)
        prompt = system_prompt(skill_name=run.skill_name, skill_text=skill_text, catalog=catalog, params=params, params_from=params_from)
        await run.begin(prompt, params)
        if request.outside:
            run.taint_from_outside(request.outside)
        if (request.params or request.arguments) and _is_strangers(request, policy):
            # A webhook's mapping or another session's caller chose these values: the run treats
            # them as it treats a fetched page, from its first call.
            run.taint_with(Taint(tool=params_from, mode=run.taint_mode, what=f"the parameters given by {params_from}"))
        return run

    async def _offered(self, skill: Skill | None, session: str) -> list[ToolSpec]:
        """The tools a run may call: the skill's (trust applied) the session may call, plus ``skill``."""
        services = self.services
        config = services.config()
        visible = [
            s for s in visible_tools(config.session(session), services.registry.list())
            if s.name != RUN_SKILL_TOOL and _model_may_call(s)
        ]  # fmt: skip
        if skill is None:
            return visible
        from pincer.skills.trust import tools_for_skill

        grants = tuple(config.grants) + await services.grants.all()
        allowed = set(tools_for_skill(skill, visible, grants).allowed)
        return [s for s in visible if s.name in allowed or s.name == SKILL_TOOL]


class AgentRun:
    """One run in progress. ``send`` carries out one message (``pincer chat`` sends many);
    ``close`` records how it ended and returns the :class:`Run`."""

    def __init__(
        self,
        *,
        loop: AgentLoop,
        run_id: str,
        request: RunRequest,
        session: str,
        skill_name: str | None,
        settings: ModelSettings,
        provider: Provider,
        budgets: RunBudgets,
        price: Price | None,
        scanner: LeakScanner,
        on_event: EventHook | None,
        on_approval: ApprovalHook | None,
    ) -> None:
        self.loop = loop
        self.services = loop.services
        self.store = loop.store
        self.id = run_id
        self.request = request
        self.session = session
        self.skill_name = skill_name
        self.settings = settings
        self.provider = provider
        self.budgets = budgets
        self.price = price
        self.scanner = scanner
        self.on_event = on_event
        self.on_approval = on_approval
        agent = self.services.config().agent
        self.taint_mode = agent.taint
        self.trusted_patterns = tuple(p.lower() for p in agent.trusted_output)
        self.max_parallel = agent.max_parallel_tool_calls
        self.messages: list[Message] = []
        self.usage = TokenUsage()
        self.cost_usd: float | None = cost_of(self.usage, price)
        self.turns = 0
        self.records: list[ToolCallRecord] = []
        self.taint: Taint | None = None
        self.text = ""
        self.started_at = time.time()
        self._seq = 0
        self._unwritten: list[tuple[int, str, Mapping[str, Any], int | None]] = []
        self._scope: anyio.CancelScope | None = None
        self._cancelled = False
        self._closed = False
        self._outside: tuple[OutsideData, ...] = ()
        self._delivered: list[tuple[OutsideData, bool]] = []
        # The run's invoke_agent span: current while it works (send), ended by close.
        self._span: Any = None
        if TRACING.on:
            self._span = spans.start_run(
                agent=skill_name or "chat", run_id=run_id, session=session, provider=settings.provider,
                model=settings.model or "",
            )  # fmt: skip

    # -- setting up -----------------------------------------------------------------------------

    def offer(self, specs: Sequence[ToolSpec], skill: Skill | None) -> None:
        self.offered: dict[str, ToolSpec] = {s.name: s for s in specs}
        threshold = self.services.config().agent.max_tool_definitions
        self.is_lazy = len(specs) > threshold
        reserved = (FIND_TOOLS, LOAD_TOOLS) if self.is_lazy else ()
        self.names = ToolNames(self.offered, reserved=reserved)
        self._definitions: dict[str, ToolDefinition] = {}
        self.index: ToolIndex | None = None
        if not self.is_lazy:
            for spec in specs:
                self._load(spec)
            return
        named = [p for p in (skill.tools if skill is not None else ()) if not any(ch in p for ch in "*?[")]
        first = [name for name in dict.fromkeys([*named, SKILL_TOOL]) if name in self.offered][: max(threshold - 2, 0)]
        for name in first:
            self._load(self.offered[name])
        self.index = ToolIndex([(self.names.safe(s.name), s.description, s.input_schema) for s in specs])

    def _load(self, spec: ToolSpec) -> None:
        self._definitions[spec.name] = ToolDefinition(
            name=self.names.safe(spec.name), description=spec.description, parameters=spec.input_schema
        )

    def definitions(self) -> list[ToolDefinition]:
        tools = list(self._definitions.values())
        if self.is_lazy:
            tools += [find_tools_definition(len(self.offered) - len(self._definitions)), load_tools_definition()]
        return tools

    async def begin(self, system: str, params: Mapping[str, Any]) -> None:
        """Write the run's row and its start record; nothing failed before this point wrote any."""
        shown = await off_loop(redact_args, dict(params), self.scanner, over=params)
        await self.store.create(
            run_id=self.id,
            skill=self.skill_name,
            params=shown,
            message=await self._scanned(self.request.message) if self.request.message else None,
            trigger=self.request.trigger,
            session=self.session,
            provider=self.settings.provider,
            model=self.settings.model or "",
            person=self.request.person,
        )
        await self.services.audit.append(
            AuditEntry(
                session=self.session,
                caller="agent",
                tool=f"run:{self.skill_name or 'chat'}",
                kind="run",
                decision="none",
                reason=f"run {self.id} started ({self.request.trigger}): "
                f"{self.skill_name or 'no skill'} on {self.settings.provider}/{self.settings.model}",
                outcome="started",
                args=shown,
                run_id=self.id,
                person=self.request.person,
            )
        )
        await self._append(Message(role="system", content=system))
        await self._flush()
        self._emit(
            "started",
            run_id=self.id, skill=self.skill_name, session=self.session, provider=self.settings.provider,
            model=self.settings.model, tools=len(self.offered), lazy_tools=self.is_lazy,
        )  # fmt: skip

    def taint_from_outside(self, outside: Sequence[OutsideData]) -> None:
        """The run starts with data from outside (a webhook's payload): the model gets it with the
        first message as untrusted output, and the run is tainted before its first call, so a
        payload that talks the model into a side effect meets an approval naming it."""
        self._outside = tuple(outside)
        if self.taint is None and self._outside and self.taint_mode != "off":
            first = self._outside[0]
            self.taint_with(Taint(tool=first.tool, mode=self.taint_mode))

    @property
    def last_seq(self) -> int:
        """The seq of the last message added to the conversation (-1 before the first): what a
        follower of the run's events has seen of its stored transcript."""
        return self._seq - 1

    # -- running ----------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the exchange in progress (its tool calls are cancelled and recorded as such)."""
        self._cancelled = True
        if self._scope is not None:
            self._scope.cancel()

    async def send(self, text: str) -> Outcome:
        """One message, and as many turns as the model needs (within the budgets)."""
        if self._span is None:
            return await self._send(text)
        token = TRACING.attach(self._span)
        try:
            return await self._send(text)
        finally:
            TRACING.detach(token)

    async def _send(self, text: str) -> Outcome:
        if self._closed:
            raise UsageError(f"run {self.id} has ended", hint="start a new run")
        if self._outside:
            blocks = [wrap_output(o.tool, f"({o.source})\n{o.content}", trusted=False) for o in self._outside]
            text = "\n\n".join([text, *blocks])
            self._outside = ()
        await self._append(Message(role="user", content=text))
        await self._flush()
        self._cancelled = False
        outcome: Outcome | None = None
        with anyio.CancelScope(deadline=anyio.current_time() + self.budgets.deadline_s) as scope:
            self._scope = scope
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_cancel, scope)
                try:
                    outcome = await self._exchange()
                except ProviderError as exc:
                    outcome = Outcome(status="failed", error=self._scan(exc.to_dict()))
                finally:
                    tg.cancel_scope.cancel()
        self._scope = None
        if outcome is None:  # the scope was cancelled: by a person, or by the deadline
            await self._answer_open_calls("the run was stopped before this call ran")
            if self._cancelled:
                outcome = Outcome(status="cancelled", error={"code": "cancelled", "message": "the run was cancelled"})
            else:
                outcome = Outcome(status="budget_exceeded", stop="deadline")
        return outcome

    def deliver(self, note: OutsideData, *, trusted: bool) -> None:
        """Data from outside that arrived while the run goes (a person's action on its canvas):
        the model reads it before its next turn, wrapped as tool output; untrusted data taints
        the run like any untrusted output."""
        self._delivered.append((note, trusted))

    async def _take_delivered(self) -> None:
        pending, self._delivered = self._delivered, []
        if not pending:
            return
        blocks = [wrap_output(note.tool, f"({note.source})\n{note.content}", trusted=trusted) for note, trusted in pending]
        await self._append(Message(role="user", content="\n\n".join(blocks)))
        await self._flush()
        for note, trusted in pending:
            if not trusted:
                self.taint_with(Taint(tool=note.tool, mode=self.taint_mode, what=f"input from {note.source}"))

    async def _watch_cancel(self, scope: anyio.CancelScope) -> None:
        while True:
            await anyio.sleep(CANCEL_POLL_INTERVAL_S)
            if await self.store.is_cancel_requested(self.id):
                self.cancel()
                return

    async def _exchange(self) -> Outcome:
        turns = calls_done = 0
        while True:
            spent = self._spent(turns, before_turn=True)
            if spent:
                return Outcome(status="budget_exceeded", stop=spent)
            await self._take_delivered()
            stop, calls = await self._turn()
            turns += 1
            spent = self._spent(turns, before_turn=False)
            if spent:
                await self._answer_open_calls(f"not run: the run's {spent} budget is spent")
                return Outcome(status="budget_exceeded", stop=spent)
            if not calls:
                return Outcome(status="done", stop=stop)
            if would_exceed_tool_calls(self.budgets, done=calls_done, requested=len(calls)):
                await self._answer_open_calls("not run: the run's tool_calls budget is spent")
                return Outcome(status="budget_exceeded", stop="tool_calls")
            calls_done += len(calls)
            await self._run_calls(calls)

    def _spent(self, turns: int, *, before_turn: bool) -> str | None:
        return first_exceeded(
            self.budgets,
            turns=turns,
            input_tokens=self.usage.input_tokens,
            output_tokens=self.usage.output_tokens,
            cost_usd=self.cost_usd,
            about_to_start_turn=before_turn,
        )

    async def _turn(self) -> tuple[str, list[ToolCall]]:
        remaining = max(1, self.budgets.output_tokens - self.usage.output_tokens)
        options = CompletionOptions(
            model=self.settings.model or "",
            max_output_tokens=min(self.settings.max_output_tokens, remaining),
            stream=self.settings.stream,
            parallel_tool_calls=self.max_parallel > 1,
        )
        text: list[str] = []
        calls: list[ToolCall] = []
        usage = TokenUsage()
        stop = "other"
        traced = spans.chat_span(
            provider=self.settings.provider, model=options.model, base_url=self.settings.base_url,
            max_tokens=options.max_output_tokens,
        ) if TRACING.on else nullcontext()  # fmt: skip
        with traced as span:
            events = complete_with_retries(
                self.provider, self.messages, self.definitions(), options, max_retries=self.settings.max_retries
            )
            async with aclosing(events):
                async for event in events:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                        if self.on_event is not None:
                            self._emit("text", text=self._scan(event.text))
                    elif isinstance(event, ToolCallReady):
                        calls.append(event.call)
                    elif isinstance(event, UsageReport):
                        usage = event.usage
                    elif isinstance(event, TurnEnd):
                        stop = event.stop
                    elif isinstance(event, Retrying):
                        # What arrived of the failed attempt is dropped; no call of it ever runs.
                        text.clear()
                        calls.clear()
                        self._emit("retrying", attempt=event.attempt, after_s=event.after_s, reason=self._scan(event.reason), code=event.code)
            if span is not None:
                spans.end_chat(span, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, finish=stop)
        self.turns += 1
        self.usage = self.usage + usage
        self.cost_usd = cost_of(self.usage, self.price)
        calls = _unique_ids(calls)
        self.text = "".join(text)
        await self._append(Message(role="assistant", content=self.text, tool_calls=tuple(calls)))
        await self._flush()
        await self.store.update(self.id, usage=self._usage_dict(), cost_usd=self.cost_usd)
        self._emit("turn", turn=self.turns, stop=stop, usage=usage.to_dict(), cost_usd=self.cost_usd)
        return stop, calls

    async def _run_calls(self, calls: list[ToolCall]) -> None:
        taint = self.taint if self.taint_mode != "off" else None
        results: list[tuple[Message, int | None, Taint | None] | None] = [None] * len(calls)
        if len(calls) == 1:
            results[0] = await self._one_call(calls[0], taint)
        else:
            limiter = anyio.CapacityLimiter(self.max_parallel)

            async def one(index: int, call: ToolCall) -> None:
                async with limiter:
                    results[index] = await self._one_call(call, taint)

            async with anyio.create_task_group() as tg:
                for index, call in enumerate(calls):
                    tg.start_soon(one, index, call)
        for done in results:
            if done is None:  # cannot happen: every task stores its result or raises
                continue
            message, audit_id, tainted_by = done
            await self._append(message, audit_id=audit_id)
            if tainted_by is not None:
                self.taint_with(tainted_by)
        await self._flush()

    def taint_with(self, taint: Taint) -> None:
        """Taint the run (the first output that did names it), or widen a local taint to an
        outside one; the event names the effects that now ask."""
        if self.taint_mode == "off" or (self.taint is not None and not (self.taint.reach == LOCAL and taint.reach != LOCAL)):
            return
        self.taint = taint
        asks = sorted(e.value for e in asking_effects(taint))
        self._emit("tainted", tool=taint.tool, audit_id=taint.audit_id, call_id=taint.call_id, reach=taint.reach,
                   asks=asks, mode=self.taint_mode, what=taint.describe())  # fmt: skip

    async def _one_call(self, call: ToolCall, taint: Taint | None) -> tuple[Message, int | None, Taint | None]:
        """The message answering one call, the call's audit record, and the taint its output
        brings (None when trusted, or when no output came)."""
        real = self.names.real(call.name)
        if self.is_lazy and real in (FIND_TOOLS, LOAD_TOOLS):
            return self._lazy_tool(call, real), None, None
        if real is None or real not in self.offered:
            offered = ", ".join(sorted(d.name for d in self.definitions()))[:500]
            text = f"no tool named {call.name!r} is offered in this run; use one of: {offered}"
            return self._error(call, "tool_not_found", text), None, None
        spec = self.offered[real]
        request = CallRequest(
            tool=real,
            args=call.arguments if call.arguments is not None else {},
            session=self.session,
            idempotency_key=self._key(call.id),
            caller="agent",
            run_id=self.id,
            taint=taint,
            depth=self.request.depth,
            call_id=call.id,
            person=self.request.person,
            may_change_policy=self.request.may_change_policy,
        )
        dispatcher = self.services.dispatcher
        if call.arguments is None:
            shown = call.raw_arguments[:_MAX_SHOWN_RAW_ARGS]
            rejected = await dispatcher.reject(
                request,
                ArgumentsInvalid(
                    f"the arguments of {real} are not a JSON object: {shown!r}",
                    hint="send the arguments again as one JSON object",
                ),
            )
            return self._result_message(call, spec, rejected, {}, trusted=True), rejected.audit_id, None
        arguments = dict(call.arguments)
        shown_args: Mapping[str, Any] = await off_loop(redact_args, arguments, self.scanner, over=arguments)
        self._emit("tool_call", call_id=call.id, tool=real, args=shown_args)
        result = await dispatcher.call(request, on_approval=self._approval)
        trusted = self._is_trusted(spec, call.arguments)
        message = self._result_message(call, spec, result, shown_args, trusted=trusted)
        produced = result.ok or (result.error or {}).get("code") == "tool_error"
        tainted_by = None
        if produced and not trusted:
            reach = output_reach(spec, spec.effects_for(request.args))  # the call's own: http's GET has network
            tainted_by = Taint(tool=real, audit_id=result.audit_id, call_id=call.id, mode=self.taint_mode, reach=reach)
        return message, result.audit_id, tainted_by

    async def _approval(self, approval: ApprovalRequest) -> None:
        self._emit("approval", **approval.to_dict())
        if self.on_approval is not None:
            await self.on_approval(approval)

    def _result_message(
        self, call: ToolCall, spec: ToolSpec, result: ToolResult, shown: Mapping[str, Any], *, trusted: bool
    ) -> Message:
        """``shown``: the call's arguments as recorded (redacted)."""
        error = dict(result.error or {})
        code = error.get("code")
        self.records.append(
            ToolCallRecord(
                call_id=call.id, tool=spec.name, args=dict(shown),
                ok=result.ok, error_code=code, audit_id=result.audit_id, cached=result.cached, turn=self.turns,
            )
        )  # fmt: skip
        self._emit(
            "tool_result", call_id=call.id, tool=spec.name, ok=result.ok, error_code=code,
            error=error.get("message"), audit_id=result.audit_id, cached=result.cached,
            duration_ms=round(result.usage.duration_ms, 3),
        )  # fmt: skip
        if result.ok:
            body = render_value(result.output)
            if result.output is None and result.content:
                body = "\n".join(str(b.get("text", "")) for b in result.content if b.get("type") == "text")
            content = wrap_output(spec.name, body, trusted=trusted)
            return Message(role="tool", content=content, tool_call_id=call.id, name=call.name, is_error=False)
        text = str(error.get("message", "the call failed"))
        if code == "tool_error":
            # The tool's own words: as untrusted as its output.
            content = wrap_output(spec.name, text, trusted=trusted, error=True)
        else:
            hint = f" (hint: {error['hint']})" if error.get("hint") else ""
            verdict = "denied" if code in ("denied", "approval_denied", "approval_timeout", "egress_denied") else "error"
            content = f"{verdict} ({code}): {text}{hint}"
        return Message(role="tool", content=content, tool_call_id=call.id, name=call.name, is_error=True)

    def _error(self, call: ToolCall, code: str, text: str) -> Message:
        self._emit("tool_result", call_id=call.id, tool=call.name, ok=False, error_code=code, error=text, audit_id=None, cached=False)
        return Message(role="tool", content=f"error ({code}): {text}", tool_call_id=call.id, name=call.name, is_error=True)

    def _lazy_tool(self, call: ToolCall, which: str) -> Message:
        args = call.arguments
        if args is None:
            return self._error(call, "invalid_arguments", f"the arguments of {which} are not a JSON object")
        assert self.index is not None
        if which == FIND_TOOLS:
            query = args.get("query")
            limit = args.get("limit", 8)
            if not isinstance(query, str) or not query.strip():
                return self._error(call, "invalid_arguments", "find_tools needs a query, e.g. {\"query\": \"open a github issue\"}")
            limit = limit if isinstance(limit, int) and 1 <= limit <= 25 else 8
            hits = self.index.search(query, limit)
            loaded = {d.name for d in self._definitions.values()}
            found = [{"name": h.name, "description": h.description, "loaded": h.name in loaded} for h in hits]
            body = render_value({"tools": found, "note": "load the ones you need with load_tools"})
        else:
            names = args.get("names")
            if not isinstance(names, list) or not names:
                return self._error(call, "invalid_arguments", "load_tools needs names, e.g. {\"names\": [\"github_create_issue\"]}")
            loaded_now, unknown = [], []
            for name in names[:25]:
                real = self.names.real(str(name))
                if real is None or real not in self.offered:
                    unknown.append(str(name))
                    continue
                self._load(self.offered[real])
                loaded_now.append(str(name))
            body = render_value({"loaded": loaded_now, "unknown": unknown})
        self._emit("tool_result", call_id=call.id, tool=which, ok=True, error_code=None, error=None, audit_id=None, cached=False)
        return Message(role="tool", content=wrap_output(which, body, trusted=True), tool_call_id=call.id, name=call.name)

    def _is_trusted(self, spec: ToolSpec, args: Mapping[str, Any]) -> bool:
        if spec.name == SKILL_TOOL:
            library = self.services.skills()
            name = args.get("name")
            if library is None or not isinstance(name, str) or name not in library:
                return False
            return library.get(name).trust.value == "trusted"
        if spec.output_trusted:
            return True
        lowered = spec.name.lower()
        return any(fnmatch.fnmatchcase(lowered, p) for p in self.trusted_patterns)

    def _key(self, call_id: str) -> str:
        """The call's idempotency key: run id + turn + call id, so the same call of the same
        turn never has its side effect twice."""
        tag = call_id if call_id.isascii() and call_id.isprintable() and len(call_id) <= 96 else hashlib.sha256(call_id.encode()).hexdigest()[:32]
        return f"run:{self.id}:{self.turns}:{tag}"

    async def _answer_open_calls(self, why: str) -> None:
        """Give every tool call of the last turn without an answer one, so the transcript stays
        well-formed (a provider refuses a conversation with a call left unanswered)."""
        last = next((m for m in reversed(self.messages) if m.role == "assistant"), None)
        if last is None or not last.tool_calls:
            return
        answered = {m.tool_call_id for m in self.messages if m.role == "tool"}
        for call in last.tool_calls:
            if call.id not in answered:
                await self._append(Message(role="tool", content=f"not run ({why})", tool_call_id=call.id, name=call.name, is_error=True))

    # -- recording --------------------------------------------------------------------------------

    def _emit(self, kind: str, **data: Any) -> None:
        if self.on_event is not None:
            try:
                self.on_event(RunEvent(kind=kind, data=data))
            except Exception:  # a display that fails must not stop the run
                logger.exception("run event hook failed for %s", kind)

    def _scan(self, value: Any) -> Any:
        scanned, _ = self.scanner.scan(value)
        return scanned

    async def _scanned(self, value: Any) -> Any:
        """``_scan`` off the event loop when ``value`` is large (a tool's output in a message)."""
        return await off_loop(self._scan, value, over=value)

    async def _append(self, message: Message, audit_id: int | None = None) -> None:
        """Add a message to the conversation; it reaches the store (redacted) at the next flush."""
        self.messages.append(message)
        seq = self._seq
        self._seq += 1
        # Shielded: a message of the conversation is never left out of its transcript (a stop
        # waits for the scan of a large one to end).
        value = message.to_dict()
        body = await off_loop(self._scan, value, over=value, shield=True)
        body.pop("role", None)
        self._unwritten.append((seq, message.role, body, audit_id))

    async def _flush(self) -> None:
        """Write the messages added since the last flush: one commit per step, not per message."""
        pending, self._unwritten = self._unwritten, []
        await self.store.append_messages(self.id, pending)

    def _usage_dict(self) -> dict[str, Any]:
        return {**self.usage.to_dict(), "turns": self.turns, "tool_calls": len(self.records)}

    async def close(self, outcome: Outcome) -> Run:
        """Record how the run ended (its row, its end record). The provider stays open for the
        next run (the loop closes it with the Pincer)."""
        if not self._closed:
            self._closed = True
            await self._flush()
            error = dict(outcome.error) if outcome.error else None
            await self.store.update(
                self.id, usage=self._usage_dict(), cost_usd=self.cost_usd, status=outcome.status, stop=outcome.stop,
                error=error,
            )  # fmt: skip
            cost = f", ${self.cost_usd:.6f}" if self.cost_usd is not None else ""
            await self.services.audit.append(
                AuditEntry(
                    session=self.session,
                    caller="agent",
                    tool=f"run:{self.skill_name or 'chat'}",
                    kind="run",
                    decision="none",
                    reason=f"run {self.id} ended {outcome.status}"
                    + (f" ({outcome.stop})" if outcome.stop else "")
                    + f": {self.turns} turns, {len(self.records)} tool calls, "
                    f"{self.usage.input_tokens} input and {self.usage.output_tokens} output tokens{cost}",
                    outcome=outcome.status,
                    error_code=str(error.get("code")) if error else None,
                    error=str(error.get("message")) if error else None,
                    usage=self._usage_dict() | {"cost_usd": self.cost_usd},
                    run_id=self.id,
                    duration_ms=(time.time() - self.started_at) * 1000,
                    person=self.request.person,
                )
            )
            self._emit("ended", status=outcome.status, stop=outcome.stop, error=error, usage=self._usage_dict(), cost_usd=self.cost_usd)
            self._observe_end(outcome)
        return Run(
            id=self.id,
            status=outcome.status,
            stop=outcome.stop,
            text=await self._scanned(self.text),
            skill=self.skill_name,
            session=self.session,
            provider=self.settings.provider,
            model=self.settings.model or "",
            usage=self.usage,
            cost_usd=self.cost_usd,
            turns=self.turns,
            tool_calls=tuple(self.records),
            error=outcome.error,
            started_at=self.started_at,
            ended_at=time.time(),
        )


    def _observe_end(self, outcome: Outcome) -> None:
        """The run's span ends and the gateway's metrics count it."""
        tokens = {"input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens}
        if self._span is not None:
            code = str(outcome.error.get("code")) if outcome.error else None
            spans.end_run(self._span, status=outcome.status, cost_usd=self.cost_usd, error=code, **tokens)
            self._span = None
        metrics = self.services.metrics()
        if metrics is not None:
            metrics.run_ended(status=outcome.status, cost_usd=self.cost_usd, **tokens)

def _model_may_call(spec: ToolSpec) -> bool:
    """False for a tool only an MCP Apps view calls (``_meta.ui.visibility`` without "model"),
    such as ``canvas_event``: a model must not report people's clicks itself."""
    ui = spec.annotations.get("pincer/ui")
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    return not isinstance(visibility, (list, tuple)) or "model" in visibility


def _params_source(request: RunRequest, policy: SessionPolicy) -> str:
    """Who gave a run's parameters, as the prompt and a taint name it."""
    trigger = str(request.trigger)
    return trigger if trigger.startswith(("webhook", "schedule")) or _is_main(policy) else f"session {policy.name} ({trigger})"


def _is_main(policy: SessionPolicy) -> bool:
    from pincer.policy.session import SessionKind

    return bool(policy.kind is SessionKind.MAIN)


def _is_strangers(request: RunRequest, policy: SessionPolicy) -> bool:
    """Parameters from a webhook (its mapping renders the sender's payload) or a non-main
    session (a token that is not the operator's). A schedule's job (``cron:NAME`` sessions are
    non-main) runs with the parameters a person wrote into it."""
    trigger = str(request.trigger)
    if trigger.startswith("webhook") or request.outside:
        return True
    return not trigger.startswith("schedule:") and not _is_main(policy)


def _unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Call ids unique within the turn (some servers number every turn's calls from 0)."""
    seen: set[str] = set()
    out = []
    for index, call in enumerate(calls):
        call_id = call.id or f"call_{index}"
        if call_id in seen:
            call_id = f"{call_id}_{index}"
        seen.add(call_id)
        out.append(call if call_id == call.id else ToolCall(id=call_id, name=call.name, arguments=call.arguments, raw_arguments=call.raw_arguments))
    return out
