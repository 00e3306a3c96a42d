"""The chain's one approval step: every ask, whoever raised it, becomes one approval request.

A grant that says ``ask`` and a runtime's own ask (exec approvals, returned by its preflight)
fold into one :class:`~pincer.store.approvals.ApprovalRequest`, with one timeout
(``approvals.timeout_s``), one audit record for the answer, and every way to answer it (the CLI,
REST, MCP elicitation, later the dashboard).

Who may answer: a person (the CLI) or a *main* session. A non-main session is an agent that
must not approve its own calls, so its answers are refused here, at the one place every answer
passes, not only at the REST door.

What an answer does: ``deny`` refuses the call; ``allow_once`` lets it run; ``allow_always``
also records a grant — limited to the kind of session that asked (``kind``), or to that one
session, or to every session when the answerer widens it on purpose — and asks the runtime to
remember its own part (the exec allowlist).

An approval belongs to its call: when the call is gone (cancelled by its caller, or the wait
timed out), the request is marked expired, so a later answer is refused instead of pretending
somebody acted on it (a cancelled call's request is expired by the chain, in the transaction
that records the call). The one exception is a caller that leaves on
purpose: an ``on_approval`` hook that raises :class:`ApprovalPending` (an MCP client that cannot
be asked, with ``[approvals] when_no_elicitation = "return"``) detaches the request, bound to the
call; the same call made again (same session, tool, arguments, idempotency key) finds it, waits
no longer if it was answered, and uses the answer once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from pincer.core.effects import EffectKind, Mode
from pincer.core.errors import ApprovalDenied, ApprovalPending, ApprovalTimeout, Denied, PincerError
from pincer.core.values import Decision, HostContext, RuntimeAsk, ToolSpec
from pincer.policy.grants import Grant
from pincer.policy.roles import Roles
from pincer.policy.session import SessionKind
from pincer.store.approvals import Answer, AnswerScope, ApprovalRequest, ApprovalStatus, ApprovalStore
from pincer.store.audit import AuditEntry, AuditLog
from pincer.store.grants import GrantStore

logger = logging.getLogger(__name__)

__all__ = ["Approver", "ApprovalHook", "Asked", "approved_detail"]

ApprovalHook = Callable[[ApprovalRequest], Awaitable[None]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Asked:
    """What the approval step concluded: the decision the call runs under, and the approval id
    (or "ask_fallback") that let it through."""

    decision: Decision
    approval: str
    answered_by: str | None = None  # who answered it (None: a standing answer, the fallback)


class Approver:
    def __init__(
        self,
        *,
        approvals: ApprovalStore,
        grants: GrantStore,
        audit: AuditLog,
        session_kind: Callable[[str], SessionKind],
        timeout_s: Callable[[], float],
    ) -> None:
        self.approvals = approvals
        self.grants = grants
        self.audit = audit
        self._session_kind = session_kind
        self._timeout_s = timeout_s  # read per ask: a reloaded config applies to the next one

    @property
    def timeout_s(self) -> float:
        return self._timeout_s()

    async def ask(
        self,
        *,
        session: str,
        spec: ToolSpec,
        effects: frozenset[EffectKind] | None = None,
        args_shown: object,
        hosts: tuple[str, ...],
        grant_decision: Decision,
        runtime_ask: RuntimeAsk | None,
        on_approval: ApprovalHook | None,
        on_created: Callable[[ApprovalRequest], None] | None = None,
        binding: str,
        run_id: str | None = None,
        tainted_by: str | None = None,
        caller: str | None = None,
    ) -> Asked:
        """Create the request, tell ``on_approval`` (the gateway), wait for an answer. Raises
        ApprovalDenied, ApprovalTimeout or ApprovalPending; the request is expired when the call
        is cancelled. ``binding`` identifies the call, for a detached request made earlier.
        ``effects`` are the call's (``ToolSpec.effects_for``): what the person is shown and what
        "allow always" records; the tool's whole set when not given. ``run_id``: the agent run
        whose call asks; ``tainted_by``: for a tainted run, what tainted it (already redacted)."""
        call_effects = spec.effects if effects is None else effects
        earlier = await self.approvals.find_detached(binding)
        if earlier is not None:
            if on_created is not None:
                on_created(earlier)
            if earlier.status is ApprovalStatus.PENDING:
                raise _pending(earlier)
            if not await self.approvals.consume(earlier.id):
                raise ApprovalDenied(
                    f"approval {earlier.id} was already used by another call",
                    hint="call again without the earlier approval: a new one is asked",
                )
            return Asked(decision=await self._apply(earlier, spec, call_effects, hosts, grant_decision, runtime_ask),
                         approval=earlier.id, answered_by=earlier.answered_by)  # fmt: skip
        reasons = []
        if grant_decision.mode is Mode.ASK:
            reasons.append(grant_decision.reason)
        if runtime_ask is not None:
            reasons.append(runtime_ask.reason)
        shown = {e.value for e in call_effects}
        if runtime_ask is not None:
            shown.update(runtime_ask.effects)
        kind = self._session_kind(session)
        approval = await self.approvals.create(
            session=session,
            session_kind=kind.value,
            tool=spec.name,
            args=args_shown,
            effects=tuple(sorted(shown)),
            hosts=hosts,
            reason="; ".join(reasons),
            timeout_s=self.timeout_s,
            detail=runtime_ask.detail if runtime_ask is not None else None,
            run_id=run_id,
            tainted_by=tainted_by,
            caller=caller,
        )
        if on_created is not None:
            on_created(approval)
        try:
            if on_approval is not None:
                try:
                    await on_approval(approval)
                except ApprovalPending:
                    # The caller leaves now and calls again after the answer: keep the request.
                    await self.approvals.detach(approval.id, binding)
                    raise _pending(approval) from None
                except Exception:  # the hook is a convenience; the request stays answerable elsewhere
                    logger.exception("approval hook failed for %s", approval.id)
        except (ApprovalPending, anyio.get_cancelled_exc_class()):
            # Cancelled while the hook asked (a terminal prompt, an elicitation): the call is
            # gone, and the chain expires the request with its record (one transaction).
            raise
        except BaseException:
            with anyio.CancelScope(shield=True):  # nothing can skip it
                await self.approvals.expire(approval.id)
            raise
        try:
            answered = await self.approvals.wait(approval.id, self.timeout_s)
        except ApprovalTimeout:
            if runtime_ask is not None and runtime_ask.fallback_allows and grant_decision.mode is not Mode.ASK:
                return Asked(
                    decision=Decision(
                        mode=Mode.ALLOW,
                        reason=f"nobody answered approval {approval.id}; the exec policy's ask_fallback allows it",
                        grant_id=grant_decision.grant_id,
                        hosts=grant_decision.hosts,
                    ),
                    approval="ask_fallback",
                )
            raise
        except anyio.get_cancelled_exc_class():
            # The caller went away (cancelled): nobody will act on an answer any more. The chain
            # records the call and expires the request in one transaction (Dispatcher._record),
            # so a kill between the two cannot leave an expired request with no record.
            raise
        except BaseException:
            with anyio.CancelScope(shield=True):  # nothing can skip it
                await self.approvals.expire(approval.id)
            raise
        return Asked(decision=await self._apply(answered, spec, call_effects, hosts, grant_decision, runtime_ask),
                     approval=approval.id, answered_by=answered.answered_by)  # fmt: skip

    async def _apply(
        self,
        answered: ApprovalRequest,
        spec: ToolSpec,
        effects: frozenset[EffectKind],
        hosts: tuple[str, ...],
        grant_decision: Decision,
        runtime_ask: RuntimeAsk | None,
    ) -> Decision:
        who = answered.answered_by or "a person"
        if answered.status is ApprovalStatus.DENY:
            raise ApprovalDenied(f"{spec.name} was denied by {who} (approval {answered.id})")
        if answered.status is ApprovalStatus.EXPIRED:
            raise ApprovalTimeout(
                f"approval {answered.id} for {spec.name} expired before it was answered",
                hint="answer sooner with `pincer approvals approve ID`, or raise approvals.timeout_s in config.toml",
            )
        if answered.status is ApprovalStatus.ALLOW_ALWAYS:
            if runtime_ask is not None and runtime_ask.remember is not None:
                try:
                    runtime_ask.remember()
                except Exception:  # the call is allowed now either way; only the memory failed
                    logger.exception("remembering the answer to approval %s failed", answered.id)
            if grant_decision.mode is Mode.ASK:
                grant = Grant(
                    tool=spec.name,
                    # The call's effects only: "always" for an http GET is no grant for a POST.
                    effects=dict.fromkeys(effects, Mode.ALLOW),
                    hosts=(hosts or None) if EffectKind.NETWORK in effects else None,
                    sessions=_scope_sessions(answered),
                    source=f"approval {answered.id}",
                )
                await self.grants.add(grant)
                return Decision(
                    mode=Mode.ALLOW,
                    reason=f"allowed always by {who} (approval {answered.id}, {_scope_text(answered)})",
                    grant_id=grant.id,
                    hosts=grant.hosts,
                )
        return Decision(
            mode=Mode.ALLOW,
            reason=f"allowed once by {who} (approval {answered.id})",
            grant_id=grant_decision.grant_id,
            hosts=(hosts or None) if grant_decision.mode is Mode.ASK else grant_decision.hosts,
        )

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
        """Answer an approval, as a person (``as_session`` None: the CLI, the dashboard) or as a
        gateway session, which must be a main session. ``roles``: a person's (policy/roles.py),
        who answers by them whatever the session: they must hold this approval. Audited."""
        if roles is not None:
            asked = await self.approvals.get(approval_id)
            if not roles.may_answer(tool=asked.tool, effects=asked.effects, session=asked.session):
                raise Denied(
                    f"{by} may not answer approval {approval_id} of {asked.tool} (session {asked.session}): "
                    f"no role of theirs ({', '.join(roles.written()) or 'none'}) holds it",
                    hint="ask an admin for an approver role that holds it (`pincer people add NAME --role approver:tool=GLOB`)",
                )
        elif as_session is not None and self._session_kind(as_session) is not SessionKind.MAIN:
            raise Denied(
                f"session {as_session!r} is not a main session and may not answer approvals "
                "(an agent must not approve its own calls)",
                hint="answer with `pincer approvals approve ID`, or with a main session's token",
            )

        def record(answered: ApprovalRequest) -> AuditEntry:
            return AuditEntry(
                session=answered.session,
                caller=by,
                tool=answered.tool,
                kind="approval",
                decision=answered.status.value,
                reason=f"approval {answered.id} answered {answered.status.value} by {by}"
                + (f" ({_scope_text(answered)})" if answered.status is ApprovalStatus.ALLOW_ALWAYS else ""),
                outcome="answered",
                args=answered.args,
                effects=answered.effects,
                approval_id=answered.id,
                person=person,
            )

        return await self.approvals.answer(approval_id, answer, by=by, scope=scope, record=record)


async def approved_detail(approvals: ApprovalStore, host: HostContext | None) -> Mapping[str, Any]:
    """What the approval that let this call through showed (its ``RuntimeAsk.detail``), so a
    tool can do exactly what was approved; empty when no person approved this call."""
    if host is None or not host.approval or host.approval == "ask_fallback":
        return {}
    try:
        detail = (await approvals.get(host.approval)).detail
    except PincerError:
        return {}
    return detail if isinstance(detail, Mapping) else {}


def _pending(approval: ApprovalRequest) -> ApprovalPending:
    return ApprovalPending(
        f"{approval.tool} needs approval {approval.id}, which this client cannot answer; it waits for a person",
        approval_id=approval.id,
        hint=f"a person answers with `pincer approvals approve {approval.id}` (or `deny {approval.id}`); "
        "then make the same call again, with the same arguments and idempotency key",
    )


def _scope_sessions(answered: ApprovalRequest) -> tuple[str, ...] | None:
    scope = answered.scope or AnswerScope.KIND
    if scope is AnswerScope.ALL:
        return None
    if scope is AnswerScope.SESSION:
        # Matched as a pattern: glob characters in the name are made literal.
        return (re.sub(r"([*?\[])", r"[\1]", answered.session),)
    return (f"kind:{answered.session_kind}",)


def _scope_text(answered: ApprovalRequest) -> str:
    scope = answered.scope or AnswerScope.KIND
    if scope is AnswerScope.ALL:
        return "for every session"
    if scope is AnswerScope.SESSION:
        return f"for session {answered.session!r} only"
    return f"for {answered.session_kind} sessions"
