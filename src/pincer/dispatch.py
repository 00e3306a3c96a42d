"""The one call chain. Every entry point builds a CallRequest and hands it to ``Dispatcher.call``.

    1 resolve      registry: name -> ToolSpec
    2 session      session policy: allow/deny lists, groups, wildcards; deny wins
    3 authorize    grants: effects within grant? allow | ask | deny; expiry, max invocations;
                   a tainted agent run's sensitive calls ask (policy/taint.py); with
                   [idempotency] required, a side-effecting call without a key is refused
    4 validate     args against the tool's JSON Schema (cached validators)
    5 preflight    the runtime refuses what it can refuse without running (pins, egress, exec
                   deny) and may add its own ask (exec approvals)
    6 approve      grant ask + runtime ask -> one ApprovalRequest (approver.py), one timeout
    7 budget       rate limits
    8 idempotency  replay a stored result; fold concurrent duplicates; keyed per session
    9 execute      runtime.invoke(spec, args, HostContext), bounded by the tool timeout
   10 safety       leak scan (store secrets, values injected in this call, credential shapes) of
                   the output, its content blocks and forwarded progress/log text; one size limit
   11 audit        one hash-chained record, committed before the result is returned

Validation and preflight run before approval (docs/architecture.md, "The call chain"): nobody
should be asked to approve a call that cannot run. Only step 9 runs a tool; step 11 always
happens, for denials, failures and cancellations too. ``call`` never raises for a tool or policy failure: the
ToolResult says what went wrong.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import anyio

from pincer.approver import ApprovalHook, Approver
from pincer.config import Config
from pincer.core.acts import CANCELLED
from pincer.core.effects import EffectKind, Mode
from pincer.core.errors import (
    Denied,
    IdempotencyKeyRequired,
    PincerError,
    SecretError,
    StoreError,
    ToolError,
    ToolTimeout,
)
from pincer.core.offload import is_large, off_loop
from pincer.core.schema import validate_args, with_defaults
from pincer.core.values import (
    CallRequest,
    ClientChannel,
    Decision,
    HostContext,
    RuntimeAsk,
    Taint,
    ToolOutput,
    ToolResult,
    ToolSpec,
    Usage,
    canonical_json,
)
from pincer.policy.budget import HOUR_S, RateLimit, RateLimiter
from pincer.policy.grants import Grant, evaluate_grants, grant_matches
from pincer.policy.roles import Roles
from pincer.policy.session import SessionKind, evaluate_session
from pincer.policy.taint import apply_taint
from pincer.registry import Registry
from pincer.runtimes.base import Runtime
from pincer.store.approvals import Answer, AnswerScope, ApprovalRequest, ApprovalStore
from pincer.store.audit import AuditEntry, AuditLog
from pincer.store.grants import GrantStore
from pincer.store.idempotency import IdempotencyStore, args_digest, check_key
from pincer.telemetry import spans
from pincer.telemetry.tracing import TRACING, error_type

if TYPE_CHECKING:
    from pincer.secrets.store import SecretAccess
    from pincer.telemetry.metrics import Metrics

logger = logging.getLogger(__name__)

__all__ = ["Dispatcher", "ApprovalHook", "Operation", "redact_args"]

_SECRET_KEY_WORDS = ("password", "passwd", "secret", "token", "api_key", "apikey", "authorization", "private_key")
_REDACTED = "[REDACTED]"


class Scanner(Protocol):
    def scan(self, value: Any) -> tuple[Any, int]: ...

    def with_values(self, extra: Any) -> Scanner: ...


_MAX_REMEMBERED_KEYS = 4_096
# Per-dispatcher caches keyed by what callers name (sessions): cleared when they pass this.
_MAX_CACHED_DECISIONS = 65_536
_secret_key_verdicts: dict[Any, bool] = {}


def _is_secret_key(key: Any) -> bool:
    verdict = _secret_key_verdicts.get(key)
    if verdict is None:
        lowered = str(key).lower()
        verdict = any(w in lowered for w in _SECRET_KEY_WORDS)
        if len(_secret_key_verdicts) >= _MAX_REMEMBERED_KEYS:  # keys come from callers: stay bounded
            _secret_key_verdicts.clear()
        if isinstance(key, str):
            _secret_key_verdicts[key] = verdict
    return verdict


def _mask_secret_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: (_REDACTED if _is_secret_key(k) else _mask_secret_keys(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_secret_keys(v) for v in value]
    return value


def redact_args(args: Any, scanner: Scanner) -> Any:
    """Arguments as they may be stored or shown: known secrets and secret-named keys masked."""
    scanned, _ = scanner.scan(args)
    return _mask_secret_keys(scanned)


def _taint_shown(taint: Taint | None, scanner: Scanner) -> str | None:
    """What tainted the run, as an approval shows it: masked like the arguments (a webhook's
    parameters or a skill's name are text from outside), None when the rule does not apply."""
    if taint is None or taint.mode == "off":
        return None
    shown, _ = scanner.scan(taint.describe())
    return str(shown)


def planned_hosts(spec: ToolSpec, args: Mapping[str, Any]) -> tuple[str, ...]:
    """The hosts a call may reach, shown in approvals: the tool's allowlist, or its ``url`` arg."""
    hosts: list[str] = []
    caps = spec.capabilities
    http = getattr(caps, "http", None) if caps is not None else None
    if http is not None:
        hosts.extend(p.host for p in http.allowlist)
    url = args.get("url") if isinstance(args, Mapping) else None
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:
            host = port = None
        if host:
            # An explicit port stays: approving http://127.0.0.1:8080/ approves that port only
            # (the hosts become the call's allowlist, and an allow_always grant's hosts).
            shown = f"[{host.lower()}]" if ":" in host else host.lower()
            hosts.append(f"{shown}:{port}" if port is not None else host.lower())
    return tuple(dict.fromkeys(hosts))


@dataclass(frozen=True, kw_only=True, slots=True)
class Operation:
    """A call through the chain to something the registry does not list as a tool: an upstream
    MCP server's ``resources/read`` or ``prompts/get`` (``runtimes/mcp/operations.py``). It runs
    every step as a tool of ``spec.name`` would (session policy, grants, approval, budget,
    leak scan, audit); its output is limited by ``[output] max_resource_bytes`` instead of
    ``max_bytes``, since what it returns goes to a client (an MCP App's page, a document), not
    into a model's context by itself."""

    spec: ToolSpec
    runtime: Runtime


def _refuse_unset_credential(tool: str, args: Mapping[str, Any], host: HostContext) -> None:
    """Step 5 for every tool with declared credentials (the built-ins' tokens, an OpenAPI
    service's --auth, [[credentials]] for http): one that its call would miss is refused here,
    before anyone is asked to approve a call that cannot run."""
    http = getattr(host.capabilities, "http", None)
    credentials = tuple(getattr(http, "credentials", ()) or ())
    if http is None or not credentials or host.secrets is None:
        return
    url = args.get("url") if isinstance(args, Mapping) else None
    targets = [url] if isinstance(url, str) else [p.host for p in http.allowlist]
    from pincer.secrets.injection import unset_credential

    missing = unset_credential(credentials, targets, has=host.secrets.has)
    if missing is None:
        return
    if host.capabilities is not None and not host.capabilities.is_secret_allowed(missing):
        # Setting it would change nothing: the tool may not read it (the manifest's own mistake).
        raise SecretError(
            f"{tool}: its credential's secret {missing!r} is not allowed for this tool, so the call cannot run",
            hint="list it under secrets.allowed_names in the tool's capabilities (or in a credentials rule in config.toml)",
        )
    from pincer.secrets.access import per_person_refusal

    refusal = per_person_refusal(host.secrets, missing, tool=tool)  # the person's own, never the host's login
    if refusal is not None:
        raise refusal
    auth = getattr(host.capabilities, "auth", None)
    # One login may serve several tools (``provider``: the six Google tools share ``google``).
    login = getattr(auth, "provider", None) or tool
    setup = f"`pincer auth setup {login}` (or `pincer secrets set {missing}`)" if auth is not None else f"`pincer secrets set {missing}`"
    raise SecretError(f"{tool}: its credential is not set up: secret {missing!r} is not set, so the call cannot run",
                      hint=f"set it with {setup}, then call again")  # fmt: skip


@dataclass(kw_only=True, slots=True)
class _Trace:
    """What the audit record will say; filled in as the call moves down the chain."""

    spec: ToolSpec | None = None
    effects: frozenset[EffectKind] | None = None  # the call's (ToolSpec.effects_for)
    decision: Decision | None = None
    approval_id: str | None = None
    args: Any = None  # as recorded (redact_args); None until the chain has scanned them
    large_args: bool | None = None  # is_large(the call's arguments), measured once for every step
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    # What operators see of it (telemetry/): the record and its id, the runtime's own time and
    # the audit append's, and which store failed (a "store_error" result from the rate limiter
    # is Redis').
    entry: AuditEntry | None = None
    audit_id: int | None = None
    tool_s: float | None = None
    audit_s: float = 0.0
    failed_store: str | None = None
    approval_wait_ms: float = 0.0  # how long the call waited for a person's answer (part of its duration)
    approved_by: str | None = None  # who answered the approval that let it through


class Dispatcher:
    def __init__(
        self,
        *,
        registry: Registry,
        config: Config,
        audit: AuditLog,
        approvals: ApprovalStore,
        grants: GrantStore,
        idempotency: IdempotencyStore,
        scanner: Callable[[], Scanner],
        secret_access: Callable[[ToolSpec, str | None], SecretAccess] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry
        self.config = config
        self.audit = audit
        self.approvals = approvals
        self.grants = grants
        self.idempotency = idempotency
        self._scanner = scanner
        self._secret_access = secret_access
        self._clock = clock
        self._limiter = RateLimiter()
        # [cache] url: the limits are counted in Redis across every gateway (store/cache.py)
        # instead of in this process's windows. Set by the service after construction.
        self.shared_limiter: Any = None
        # The gateway's Prometheus metrics (telemetry/metrics.py), set by the gateway; None: none kept.
        self.metrics: Metrics | None = None
        self._grant_uses: dict[str, int] = {}
        self._in_flight = 0
        # The config is immutable: its per-tool answers are computed once.
        self._limits: dict[str, RateLimit] = {}
        self._sessions: dict[tuple[str, str], Decision] = {}
        self._grant_cache: dict[tuple[str, str, frozenset[EffectKind]], tuple[tuple[Grant, ...], Decision]] = {}
        self._merged_grants: tuple[tuple[Grant, ...] | None, tuple[Grant, ...]] = (None, ())
        self._config_grants: tuple[Grant, ...] = config.grants
        self.approver = Approver(
            approvals=approvals,
            grants=grants,
            audit=audit,
            session_kind=lambda session: self.config.session(session).kind,
            timeout_s=lambda: self.config.approval_timeout_s,
        )

    def reconfigure(self, config: Config) -> None:
        """Decide under ``config`` from now on; every answer computed from the old one is dropped."""
        self.config = config
        self._limits.clear()
        self._sessions.clear()
        self._grant_cache.clear()
        self._config_grants = config.grants
        self._merged_grants = (None, ())

    # -- the chain ---------------------------------------------------------------------------

    async def call(
        self, request: CallRequest, *, on_approval: ApprovalHook | None = None, operation: Operation | None = None
    ) -> ToolResult:
        if not TRACING.on and self.metrics is None:
            return await self._call(request, on_approval, _Trace(), operation)
        # Observed: the call's span is current while it runs (nested calls and upstream requests
        # are its children), and both it and the metrics read the audit record at the end.
        trace = _Trace()
        span = spans.start_call(request) if TRACING.on else None
        result: ToolResult | None = None
        try:
            result = await self._call(request, on_approval, trace, operation)
            return result
        finally:
            self._observe(trace, result, span)

    async def _call(
        self, request: CallRequest, on_approval: ApprovalHook | None, trace: _Trace, operation: Operation | None
    ) -> ToolResult:
        started = time.perf_counter()
        scanner = self._scanner()
        self._in_flight += 1
        try:
            try:
                try:
                    result = await self._run(request, trace, scanner, on_approval, operation)
                except PincerError as exc:
                    result = await self._failed(exc, scanner)
                except Exception as exc:  # a bug in a runtime must not take the caller down unrecorded
                    logger.exception("unexpected failure calling %s", request.tool)
                    error = ToolError(f"{request.tool} failed unexpectedly: {type(exc).__name__}")
                    result = self._failure(error, scanner)
                await self._scan_args(request, trace, scanner)  # a call refused before its scan
            except anyio.get_cancelled_exc_class():
                # The caller went away (a client disconnected, a task group ended, SIGTERM): the
                # call is still recorded, shielded so the cancellation cannot skip the record.
                cancelled = self._failure(ToolError(f"{request.tool} was cancelled by its caller"), scanner)
                with anyio.CancelScope(shield=True):
                    await self._scan_args(request, trace, scanner)
                    entry = trace.entry = self._audit_entry(
                        request, trace, cancelled, cancelled.usage, scanner, outcome=CANCELLED
                    )
                    trace.audit_id = await self._record(entry)
                raise
        finally:
            self._in_flight -= 1
        usage = result.usage
        usage = Usage(
            duration_ms=(time.perf_counter() - started) * 1000,
            output_bytes=usage.output_bytes,
            truncated=usage.truncated,
            redactions=usage.redactions,
            extra=usage.extra,
        )
        entry = trace.entry = self._audit_entry(request, trace, result, usage, scanner)
        appending = time.perf_counter()
        try:
            audit_id = trace.audit_id = await self._record(entry)
        except StoreError:
            trace.failed_store = "database"
            raise
        trace.audit_s = time.perf_counter() - appending
        return ToolResult(
            ok=result.ok,
            output=result.output,
            error=result.error,
            content=result.content,
            usage=usage,
            audit_id=audit_id,
            cached=result.cached,
        )

    async def _record(self, entry: AuditEntry) -> int | None:
        """Step 10. A call that never ran after it asked is recorded with its approval marked, in
        one transaction, so that a process finding this one gone later does not record it again
        (store/approvals.py); None when such a process already did."""
        if entry.outcome == CANCELLED and entry.approval_id is not None:
            return await self.approvals.record_gone(entry.approval_id, entry)
        # Yielding once lets concurrent callers join this commit (group commit). With another
        # call in flight it is worth it; else the log decides from what its last yields found.
        return await self.audit.append(entry, gather=True if self._in_flight > 0 else None)

    async def reject(self, request: CallRequest, error: PincerError) -> ToolResult:
        """Record a call an entry point refused before it could be built (malformed JSON args)."""
        scanner = self._scanner()
        result = await self._failed(error, scanner)
        trace = _Trace()
        span = spans.start_call(request) if TRACING.on else None
        try:
            await self._scan_args(request, trace, scanner)
            entry = trace.entry = self._audit_entry(request, trace, result, result.usage, scanner)
            audit_id = trace.audit_id = await self.audit.append(entry)
        finally:
            if span is not None or self.metrics is not None:
                self._observe(trace, result, span)
        return replace(result, audit_id=audit_id)

    def _observe(self, trace: _Trace, result: ToolResult | None, span: spans.CallSpan | None) -> None:
        """End the call's span and count it, from its audit record."""
        entry = trace.entry
        runtime = trace.spec.runtime.value if trace.spec is not None else None
        if span is not None:
            shown = None
            if result is not None and TRACING.record_content:
                shown = result.output if result.ok else result.error
            spans.end_call(span, entry, trace.audit_id, runtime=runtime, result=shown)
        metrics = self.metrics
        if metrics is None or entry is None:
            return
        metrics.call_finished(
            tool=entry.tool if trace.spec is not None else None,
            runtime=runtime,
            decision=entry.decision,
            outcome=entry.outcome,
            seconds=entry.duration_ms / 1000,
            tool_seconds=trace.tool_s,
            audit_seconds=trace.audit_s if trace.audit_id is not None else None,
        )
        if trace.failed_store is not None or entry.error_code == "store_error":
            metrics.store_error(trace.failed_store or "database")

    @contextmanager
    def _approval_observed(self, spec: ToolSpec, trace: _Trace) -> Iterator[None]:
        """The wait for an answer as operators see it: its own span, the approvals this gateway
        waits on, how the wait ended and how long it took."""
        metrics = self.metrics
        if metrics is None and not TRACING.on:
            yield
            return
        started = time.perf_counter()
        ended = "allowed"
        if metrics is not None:
            metrics.approval_waiting(1)
        try:
            with spans.approval_span(spec.name) if TRACING.on else nullcontext():
                yield
        except BaseException as exc:
            ended = error_type(exc)
            raise
        finally:
            if metrics is not None:
                metrics.approval_waiting(-1)
                metrics.approval_ended(
                    ended, tool=spec.name, runtime=spec.runtime.value, seconds=time.perf_counter() - started
                )

    async def _run(
        self,
        request: CallRequest,
        trace: _Trace,
        scanner: Scanner,
        on_approval: ApprovalHook | None,
        operation: Operation | None = None,
    ) -> ToolResult:
        spec, runtime = (operation.spec, operation.runtime) if operation else self.registry.resolve(request.tool)
        trace.spec = spec
        # The schema's defaults for required arguments left out: decided, validated, approved,
        # recorded and sent with them (core/schema.py says why only required ones).
        args = with_defaults(spec, request.args)
        if args is not request.args:
            request = replace(request, args=args)
        await self._scan_args(request, trace, scanner)
        if request.idempotency_key is not None:
            check_key(request.idempotency_key)
        if request.depth > self.config.max_call_depth:
            raise Denied(
                f"tool-invoke nesting deeper than {self.config.max_call_depth} calls",
                hint="a tool that calls tools is looping; raise tools.max_depth only if that is intended",
            )

        verdict = self._session_verdict(request.session, spec.name)
        if verdict.mode is Mode.DENY:
            trace.decision = verdict
            raise Denied(verdict.reason, hint="change the session's allow/deny lists in config.toml")

        # The call's own effects (an http GET reads, a POST writes) decide from here on: grants,
        # taint, the approval and the audit record all see the same set.
        effects = trace.effects = spec.effects_for(request.args)
        if not request.may_change_policy and effects & _POLICY_EFFECTS:
            raise Denied(
                f"{request.person or request.session} may not call {spec.name}: it changes what pincer may do "
                f"({', '.join(sorted(e.value for e in effects & _POLICY_EFFECTS))})",
                hint="ask an admin for the operator role (`pincer people add NAME --role operator`)",
            )
        grants = await self._all_grants()
        await self._count_uses(grants, spec.name)
        decision = self._grant_decision(spec, grants, request.session, effects)
        denial_hint = "a grant in config.toml denies this; change it to allow or ask"
        if request.taint is not None:
            tainted = apply_taint(decision, effects, request.taint)
            if tainted.mode is Mode.DENY and decision.mode is not Mode.DENY:
                denial_hint = 'set [agent] taint = "ask" to be asked instead of refused'
            decision = tainted
        trace.decision = decision
        if decision.mode is Mode.DENY:
            raise Denied(decision.reason, hint=denial_hint)
        if request.idempotency_key is None and spec.side_effecting and self.config.idempotency_required:
            raise _key_required(spec.name, request.caller)

        await off_loop(validate_args, spec, request.args, large=trace.large_args)

        key = request.idempotency_key
        if key is not None and spec.side_effecting:
            # A replay runs nothing: it needs no approval (and is this session's own result).
            digest = await off_loop(args_digest, request.args, large=trace.large_args)
            stored = await self.idempotency.lookup(request.session, spec.name, key, digest)
            if stored is not None:
                trace.cached = True
                return _replayed(stored)

        # The hosts a person would be shown (and an asked call would get): only an ask needs them.
        hosts = planned_hosts(spec, request.args) if decision.mode is Mode.ASK else None
        runtime_ask, host = await self._preflight(request, spec, runtime, decision, hosts or (), scanner)
        approval: str | None = None
        if decision.mode is Mode.ASK or runtime_ask is not None:
            host = None  # the call runs under the decision the approval step makes
            if hosts is None:
                hosts = planned_hosts(spec, request.args)

            def note(created: ApprovalRequest) -> None:
                trace.approval_id = created.id

            asking = time.perf_counter()
            try:
                with self._approval_observed(spec, trace):
                    asked = await self.approver.ask(
                        binding=await off_loop(_call_binding, request, large=trace.large_args),
                        session=request.session,
                        spec=spec,
                        effects=effects,
                        args_shown=trace.args,
                        hosts=hosts,
                        grant_decision=decision,
                        runtime_ask=runtime_ask,
                        on_approval=on_approval,
                        on_created=note,
                        run_id=request.run_id,
                        tainted_by=_taint_shown(request.taint, scanner),
                        caller=request.caller,
                    )
            finally:
                trace.approval_wait_ms = (time.perf_counter() - asking) * 1000
            decision, approval = asked.decision, asked.approval
            trace.approved_by = asked.answered_by
            trace.decision = decision

        limit = self._limits.get(spec.name)
        if limit is None:
            limit = self._limits[spec.name] = self.config.rate_limit(spec.name)
        if self.shared_limiter is not None:
            try:
                await self.shared_limiter.reserve(spec.name, limit, self._clock())
            except StoreError:
                trace.failed_store = "redis"
                raise
        else:
            if not limit.is_unlimited and not self._limiter.knows(spec.name):
                self._limiter.seed(spec.name, await self.audit.timestamps(spec.name, self._clock() - HOUR_S))
            self._limiter.reserve(spec.name, limit, self._clock())
        if decision.grant_id is not None:
            self._grant_uses[decision.grant_id] = self._uses(decision.grant_id) + 1

        max_bytes = self.config.output.max_resource_bytes if operation is not None else self.config.max_output_bytes
        if key is not None and spec.side_effecting:
            return await self._run_once(request, spec, runtime, decision, key, trace, scanner, approval, max_bytes)
        return await self._execute(request, spec, runtime, decision, trace, scanner, approval, max_bytes, host)

    async def _preflight(
        self,
        request: CallRequest,
        spec: ToolSpec,
        runtime: Runtime,
        decision: Decision,
        hosts: tuple[str, ...],
        scanner: Scanner,
    ) -> tuple[RuntimeAsk | None, HostContext | None]:
        """Step 5: what the runtime refuses or asks before anyone is asked. The hosts it checks
        are the ones the call would get if approved (the grant's, else the call's own). Also
        returns the HostContext it checked with (the call's own when nobody is asked)."""
        if decision.mode is Mode.ASK and decision.hosts is None:
            decision = replace(decision, hosts=hosts or None)
        host = self._host_context(request, spec, decision, None, scanner)
        asked = await runtime.preflight(spec, request.args, host)
        _refuse_unset_credential(spec.name, request.args, host)  # after the runtime's egress refusals
        return (asked if isinstance(asked, RuntimeAsk) else None), host

    async def _run_once(
        self,
        request: CallRequest,
        spec: ToolSpec,
        runtime: Runtime,
        decision: Decision,
        key: str,
        trace: _Trace,
        scanner: Scanner,
        approval: str | None,
        max_bytes: int,
    ) -> ToolResult:
        digest = await off_loop(args_digest, request.args, large=trace.large_args)
        session = request.session
        while True:
            stored = await self.idempotency.lookup(session, spec.name, key, digest)
            if stored is not None:
                trace.cached = True
                return _replayed(stored)
            if await self.idempotency.claim(session, spec.name, key):
                break
        try:
            # A result or the tool's own error (all _execute returns) is kept for the key;
            # anything else raised (a timeout, a refusal on the way) leaves the key free.
            result = await self._execute(request, spec, runtime, decision, trace, scanner, approval, max_bytes)
            await self.idempotency.store(
                session,
                spec.name,
                key,
                digest,
                {
                    "ok": result.ok,
                    "output": result.output,
                    "error": dict(result.error) if result.error else None,
                    "content": list(result.content) if result.content else None,
                },
            )
            return result
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled call's claim must still go
                await self.idempotency.release(session, spec.name, key)

    async def _execute(
        self,
        request: CallRequest,
        spec: ToolSpec,
        runtime: Runtime,
        decision: Decision,
        trace: _Trace,
        scanner: Scanner,
        approval: str | None,
        max_bytes: int,
        host: HostContext | None = None,
    ) -> ToolResult:
        if host is None:
            host = self._host_context(request, spec, decision, approval, scanner)
        secrets = host.secrets
        started = time.perf_counter()
        output: ToolOutput | None = None
        try:
            # A bare deadline scope: cheaper than fail_after on this hot path, and a tool's own
            # TimeoutError (a socket timeout) is not mistaken for the tool timeout.
            with anyio.CancelScope(deadline=anyio.current_time() + self.config.tool_timeout_s) as scope:
                output = await runtime.invoke(spec, request.args, host)
        finally:
            injected = tuple(getattr(secrets, "injected", ()) or ())
        if output is None and scope.cancelled_caught:
            raise ToolTimeout(
                f"{spec.name} did not finish within {self.config.tool_timeout_s:g} s",
                hint="raise tools.timeout_s in config.toml if the tool needs longer",
            )
        if output is None:
            raise ToolError(f"{spec.name} returned nothing", hint="a runtime must return a ToolOutput")
        duration_ms = (time.perf_counter() - started) * 1000
        trace.tool_s = duration_ms / 1000
        scanner = scanner.with_values(injected) if injected else scanner
        return await off_loop(self._finish, output, scanner, duration_ms, max_bytes, over=(output.value, output.content))

    def _host_context(
        self, request: CallRequest, spec: ToolSpec, decision: Decision, approval: str | None, scanner: Scanner
    ) -> HostContext:
        secrets = self._secret_access(spec, request.person) if self._secret_access else None
        client = request.client
        if client is not None:
            # What a tool reports while it runs reaches the client as text: scanned like its
            # output, with the values injected in this very call among the secrets.
            client = _ScannedChannel(client, scanner, secrets)
        return HostContext(
            session=request.session,
            tool=spec.name,
            network_hosts=decision.hosts,
            allow_private_network=self.config.allow_private_network,
            workspace=self.config.workspace,
            home=self.config.home,
            timeout_s=self.config.tool_timeout_s,
            max_output_bytes=self.config.max_output_bytes,
            capabilities=spec.capabilities or self.config.credential_capabilities,
            secrets=secrets,
            invoke=self._nested_invoker(request),
            client=client,
            depth=request.depth,
            run_id=request.run_id,
            taint=request.taint,
            approval=approval,
            caller=request.caller,
            person=request.person,
            may_change_policy=request.may_change_policy,
            speaks_for_person=client is not None
            and (request.person is not None or self.is_main_session(request.session)),
        )

    def _finish(self, output: ToolOutput, scanner: Scanner, duration_ms: float, max_bytes: int) -> ToolResult:
        from pincer.safety.limits import limit_result

        value, redactions = scanner.scan(output.value)
        content = None
        if output.content is not None:
            scanned_content, more = scanner.scan([dict(block) for block in output.content])
            content = tuple(scanned_content)
            redactions += more
        # One limit over everything the result carries: its value and its content blocks.
        value, content, truncated, size = limit_result(value, content, max_bytes)
        usage = Usage(
            duration_ms=duration_ms,
            output_bytes=size,
            truncated=truncated,
            redactions=redactions,
            extra=dict(output.usage) if output.usage else {},
        )
        if output.is_error:
            # Text as it is; anything else as JSON, never a Python repr.
            message = value if isinstance(value, str) else canonical_json(value)
            return ToolResult(
                ok=False, error={"code": "tool_error", "message": message}, content=content, usage=usage
            )
        return ToolResult(ok=True, output=value, content=content, usage=usage)

    # -- approvals ---------------------------------------------------------------------------

    async def answer(
        self,
        approval_id: str,
        answer: Answer | str,
        *,
        by: str,
        as_session: str | None = None,
        scope: AnswerScope | str | None = None,
        roles: Roles | None = None,
        person: str | None = None,
    ) -> ApprovalRequest:
        """Answer an approval (audited). ``as_session``: the gateway session answering, which
        must be a main session; None for a person at the CLI. ``roles``: the answering
        ``person``'s, which must hold the approval (approver.py)."""
        return await self.approver.answer(approval_id, answer, by=by, as_session=as_session, scope=scope, roles=roles,
                                          person=person)  # fmt: skip

    def is_main_session(self, session: str) -> bool:
        return self.config.session(session).kind is SessionKind.MAIN

    # -- helpers -----------------------------------------------------------------------------

    def redact(self, args: Any) -> Any:
        """Arguments as they may be stored or shown (approvals of a runtime's own asks)."""
        return redact_args(args, self._scanner())

    def _session_verdict(self, session: str, tool: str) -> Decision:
        key = (session, tool)
        verdict = self._sessions.get(key)
        if verdict is None:
            verdict = evaluate_session(self.config.session(session), tool)
            if len(self._sessions) >= _MAX_CACHED_DECISIONS:  # session names come from callers: stay bounded
                self._sessions.clear()
            self._sessions[key] = verdict
        return verdict

    def _grant_decision(
        self, spec: ToolSpec, grants: tuple[Grant, ...], session: str, effects: frozenset[EffectKind]
    ) -> Decision:
        """Grants decide per call; the answer is reused while the grant set is the same object
        and no matching grant can expire or run out (those depend on the clock and the count).
        The cache key is the tool's policy hash and the call's effects: a tool whose effects
        change is decided anew, and a write of a tool is never answered from one of its reads."""
        cache_key = (spec.policy_hash, session, effects)
        cached = self._grant_cache.get(cache_key)
        if cached is not None and cached[0] is grants:
            return cached[1]
        decision = evaluate_grants(
            spec,
            grants,
            now=self._clock(),
            uses=self._uses,
            session=session,
            session_kind=self.config.session(session).kind.value,
            effects=effects,
        )
        is_stable = not any(
            (g.expires_at is not None or g.max_invocations is not None) and grant_matches(g, spec.name)
            for g in grants
        )
        if is_stable:
            if len(self._grant_cache) >= _MAX_CACHED_DECISIONS:
                self._grant_cache.clear()
            self._grant_cache[cache_key] = (grants, decision)
        return decision

    async def _all_grants(self) -> tuple[Grant, ...]:
        stored = await self.grants.all()
        if not stored:
            return self._config_grants
        if self._merged_grants[0] is not stored:  # one merged tuple per version of the store
            self._merged_grants = (stored, self._config_grants + stored)
        return self._merged_grants[1]

    async def _count_uses(self, grants: tuple[Grant, ...], tool: str) -> None:
        """The uses of every grant with a use limit that matches ``tool``, read from the audit log
        once per process and counted here after (what ``evaluate_grants`` checks)."""
        for grant in grants:
            if grant.max_invocations is not None and grant.id not in self._grant_uses and grant_matches(grant, tool):
                self._grant_uses[grant.id] = await self.audit.grant_uses(grant.id)

    def _uses(self, grant_id: str) -> int:
        return self._grant_uses.get(grant_id, 0)

    def _nested_invoker(self, parent: CallRequest) -> Callable[[CallRequest], Awaitable[ToolResult]]:
        async def invoke(child: CallRequest) -> ToolResult:
            # The child runs under the caller's session, one level deeper, through the whole chain,
            # for the caller's run and with what that run had read (its taint): a tool a tainted
            # run calls cannot do through another tool what the run's own call would ask for.
            nested = replace(
                child, session=parent.session, depth=parent.depth + 1, caller=f"{parent.tool}", run_id=parent.run_id, taint=parent.taint,
                person=parent.person, may_change_policy=parent.may_change_policy,
            )
            return await self.call(nested)

        return invoke

    def _failure(self, exc: PincerError, scanner: Scanner) -> ToolResult:
        error, _ = scanner.scan(exc.to_dict())
        return ToolResult(ok=False, error=error)

    async def _failed(self, exc: PincerError, scanner: Scanner) -> ToolResult:
        """``_failure`` off the event loop when the error is large (a tool's error text)."""
        return await off_loop(self._failure, exc, scanner, over=exc.message)  # the hint is ours: short

    async def _scan_args(self, request: CallRequest, trace: _Trace, scanner: Scanner) -> None:
        """The arguments as the audit record and an approval show them (once per call)."""
        if trace.args is None:
            args = request.args
            if trace.large_args is None:
                trace.large_args = is_large(args)
            trace.args = await off_loop(redact_args, args, scanner, large=trace.large_args) if isinstance(args, Mapping) else {}

    def _audit_entry(
        self, request: CallRequest, trace: _Trace, result: ToolResult, usage: Usage, scanner: Scanner,
        *, outcome: str | None = None,
    ) -> AuditEntry:  # fmt: skip
        decision = trace.decision
        error = result.error or {}
        code = error.get("code")
        outcome = outcome or _outcome_of(code, ok=result.ok)
        args = trace.args
        if args is None:  # only when scanning them failed: recorded scanned all the same
            args = redact_args(request.args, scanner) if isinstance(request.args, Mapping) else {}
        return AuditEntry(
            session=request.session,
            caller=request.caller,
            tool=request.tool,
            decision=decision.mode.value if decision else "none",
            reason=decision.reason if decision else str(error.get("message", "")),
            grant_id=decision.grant_id if decision else None,
            outcome=outcome,
            error_code=code,
            error=error.get("message") if error else None,
            args=args,
            effects=_effect_names(trace.effects if trace.effects is not None else trace.spec.effects) if trace.spec else (),
            duration_ms=usage.duration_ms,
            usage=_usage_record(usage, trace),
            idempotency_key=request.idempotency_key,
            cached=result.cached,
            approval_id=trace.approval_id,
            run_id=request.run_id,
            person=request.person,
            approved_by=trace.approved_by,
        )


# What a person who is no operator may not call: a tool that changes what pincer may do.
_POLICY_EFFECTS = frozenset({EffectKind.MODIFY_EXTENSION, EffectKind.MODIFY_APPROVAL})


def _outcome_of(code: Any, *, ok: bool) -> str:
    """A finished call's audit outcome, from its error code."""
    if code == "approval_pending":
        return "pending"  # returned at once; the same call made again runs it
    if code == "approval_timeout":
        return CANCELLED  # nobody answered: the call was dropped, not refused by anyone
    if code in ("denied", "approval_denied", "budget_exceeded", "egress_denied"):
        return "denied"
    return "ok" if ok else "error"


def _usage_record(usage: Usage, trace: _Trace) -> dict[str, Any]:
    """The audit record's usage: ``duration_ms`` is the whole call as its caller waited for it;
    ``approval_wait_ms``, when a person was asked, is the part of it spent waiting for the answer
    (the tool's own time is the difference), so no view mistakes a person's pause for a slow tool."""
    data = usage.to_dict()
    if trace.approval_id is not None:
        data["approval_wait_ms"] = round(trace.approval_wait_ms, 3)
    return data


def _key_required(tool: str, caller: str) -> IdempotencyKeyRequired:
    """The refusal names where this caller puts a key."""
    if caller == "rest":
        where = "an Idempotency-Key header"
        hint = "send the call again with an Idempotency-Key header (or idempotency_key in the body)"
    elif caller == "mcp":
        where = '_meta["pincer/idempotencyKey"]'
        hint = 'send the call again with _meta["pincer/idempotencyKey"] set in the tools/call params'
    elif caller == "cli":
        where = "--idempotency-key"
        hint = "call it again with `pincer tools call NAME --idempotency-key KEY`"
    else:
        where = "an idempotency key"
        hint = "pass idempotency_key on the CallRequest, or set [idempotency] required = false"
    return IdempotencyKeyRequired(
        f"{tool} is side-effecting and [idempotency] required = true: the call needs {where}", hint=hint
    )




_effect_names_of: dict[frozenset[EffectKind], tuple[str, ...]] = {}


def _effect_names(effects: frozenset[EffectKind]) -> tuple[str, ...]:
    names = _effect_names_of.get(effects)
    if names is None:
        names = tuple(sorted(e.value for e in effects))
        if len(_effect_names_of) < _MAX_REMEMBERED_KEYS:  # effect sets are few; stay bounded anyway
            _effect_names_of[effects] = names
    return names


def _replayed(stored: Mapping[str, Any]) -> ToolResult:
    return ToolResult(
        ok=stored["ok"],
        output=stored.get("output"),
        error=stored.get("error"),
        content=tuple(stored["content"]) if stored.get("content") else None,
        cached=True,
    )


def _call_binding(request: CallRequest) -> str:
    """Which call an approval belongs to: session, tool, arguments and idempotency key."""
    return args_digest(
        {"session": request.session, "tool": request.tool, "args": request.args, "key": request.idempotency_key}
    )


class _ScannedChannel:
    """A ClientChannel whose progress and log text is leak-scanned before it leaves. Other
    capabilities of the underlying channel (elicitation, sampling) pass through."""

    def __init__(self, inner: ClientChannel, scanner: Scanner, secrets: SecretAccess | None) -> None:
        self.inner = inner
        self._scanner = scanner
        self._secrets = secrets

    async def _scan(self, text: str) -> str:
        injected = tuple(getattr(self._secrets, "injected", ()) or ())
        scanner = self._scanner.with_values(injected) if injected else self._scanner
        scanned, _ = await off_loop(scanner.scan, text, over=text)
        return scanned if isinstance(scanned, str) else str(scanned)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await self.inner.progress(progress, total, await self._scan(message) if message else message)

    async def log(self, level: str, message: str) -> None:
        await self.inner.log(level, await self._scan(message))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
