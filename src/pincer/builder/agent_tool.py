"""``build_tool``: an agent asks pincer to build a tool (effect ``modify_extension``, so it asks).

When the call asks, the model's plan is made first (the plan stage, before anyone is asked: a
refused plan is refused without asking) and the approval shows it: the tool's name, what it
does, the hosts it will reach, the secrets it will use and where they go, its effects, what was
dropped, and what is refused whatever the model plans (``financial``/``execute_code`` effects,
wildcard hosts, hosts and secrets the agent did not list). The approved call then builds from
exactly that plan (its capabilities are fixed by it) and returns the report. Registered with
``run_skill`` when a model is configured.
"""

from __future__ import annotations

import secrets as random_ids
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from pincer.core.effects import EffectKind
from pincer.core.values import HostContext, RuntimeAsk
from pincer.runtimes.native import NativeRuntime, tool

if TYPE_CHECKING:
    from pincer.builder.host import BuilderServices

__all__ = ["builder_runtime", "RUNTIME_NAME", "MAX_PENDING_PLANS", "PENDING_GRACE_S"]

RUNTIME_NAME = "builder"
MAX_PENDING_PLANS = 32  # plans shown in approvals not answered yet, per Pincer
PENDING_GRACE_S = 60.0  # a plan is kept this long past the approval timeout


def builder_runtime(services: BuilderServices) -> NativeRuntime:
    # plan id -> (when it was made, the planned build): the conversation an approved call goes on
    # from. The plan itself is also in the approval's detail, which says which plan id it showed.
    pending: dict[str, tuple[float, Any]] = {}

    def forget_old() -> None:
        keep_s = services.config().approval_timeout_s + PENDING_GRACE_S
        now = time.monotonic()
        for plan_id in [k for k, (made, _) in pending.items() if now - made > keep_s]:
            del pending[plan_id]
        while len(pending) >= MAX_PENDING_PLANS:
            del pending[next(iter(pending))]

    async def approved_plan(host: HostContext) -> tuple[Any, Mapping[str, Any] | None]:
        """The planned build the approval of this call showed (or None), and what it showed."""
        from pincer.approver import approved_detail

        detail = await approved_detail(services.approvals, host)
        plan_id = detail.get("plan_id")
        if not isinstance(plan_id, str):
            return None, None
        found = pending.pop(plan_id, None)
        shown = detail.get("plan") if isinstance(detail.get("plan"), Mapping) else None
        return (found[1] if found else None), shown

    @tool(name="build_tool", effects=(EffectKind.MODIFY_EXTENSION,), side_effecting=True)
    async def build_tool(
        description: Annotated[str, Field(min_length=1, max_length=4000)],
        host: HostContext,
        name: Annotated[str | None, Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")] = None,
        hosts: Annotated[list[str] | None, Field(max_length=20)] = None,
        secrets: Annotated[list[str] | None, Field(max_length=20)] = None,
        max_iterations: Annotated[int, Field(ge=1, le=8)] = 4,
    ) -> dict[str, Any]:
        """Build a new tool from a description: pincer plans it, writes it, tests it in its WASM sandbox,
        signs and registers it. A person approves the build first.

        Args:
            description: What the tool should do, in plain words.
            name: The tool's name (lower-case); the builder picks one when left out.
            hosts: Hosts the tool may call over https (exact names).
            secrets: Names of secrets in pincer's store the tool may use (injected by the host; it never sees them).
            max_iterations: How many times the model may fix failing tests.
        """
        from pincer.builder.service import run_build

        request = _request(description, name, hosts, secrets, max_iterations, host.session)
        planned, shown = await approved_plan(host)
        if planned is None and shown is not None:
            # The approval showed a plan this process no longer holds (it restarted, or the plan
            # aged out): build anew, allowed no more than what the approval showed.
            from dataclasses import replace

            shown_secrets = {str(s.get("name")) for s in shown.get("secrets") or () if isinstance(s, Mapping)}
            request = replace(request, hosts=tuple(h for h in request.hosts if h in set(shown.get("hosts") or ())),
                              secrets=tuple(s for s in request.secrets if s in shown_secrets))  # fmt: skip
        report = await run_build(services, request, actor=host.actor, planned=planned, approval_id=host.approval)
        data = report.to_json()
        return {k: data[k] for k in ("key", "version", "signer", "description", "hosts", "secrets", "effects", "dropped",
                                     "tests_passed", "tests_total", "iterations", "tokens", "cost_usd", "seconds")}  # fmt: skip

    async def preflight(args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
        from pincer.builder.service import plan_build
        from pincer.policy.grants import evaluate_grants

        config = services.config()
        grants = tuple(config.grants) + await services.grants.all()
        decision = evaluate_grants(build_tool.spec, grants, now=time.time(), session=host.session,
                                   session_kind=config.session(host.session).kind.value)  # fmt: skip
        if decision.mode.value == "allow":
            return None
        request = _request(str(args.get("description", "")), args.get("name"), args.get("hosts"), args.get("secrets"),
                           int(args.get("max_iterations", 4)), host.session)  # fmt: skip
        # The plan is made before anyone is asked: a refused plan (financial, wildcard hosts)
        # raises here, and the person approves the plan itself, not a description of it.
        planned = await plan_build(services, request)
        plan = planned.plan
        forget_old()
        plan_id = random_ids.token_hex(12)
        pending[plan_id] = (time.monotonic(), planned)
        secrets_shown = [f"{s.name} (sent to {s.host} in {s.location.get('type', 'a header')})" for s in plan.secrets]
        return RuntimeAsk(
            reason=(f"an agent wants pincer to build and register the tool {plan.name!r}: {plan.description[:160]}; "
                    f"it would reach {', '.join(plan.hosts) or 'no host'} and use {', '.join(s.name for s in plan.secrets) or 'no secret'}"),
            effects=(EffectKind.MODIFY_EXTENSION.value,),
            detail={
                "plan_id": plan_id,
                "plan": plan.to_json(),
                "name": plan.name,
                "description": plan.description[:2000],
                "hosts": list(plan.hosts),
                "secrets": secrets_shown,
                "effects": list(plan.effects),
                "dropped": list(plan.dropped),
                "refused": ["financial", "execute_code", "wildcard hosts", "hosts and secrets the agent did not list"],
            },
        )  # fmt: skip

    return NativeRuntime([build_tool.with_preflight(preflight)], name=RUNTIME_NAME)


def _request(description: str, name: Any, hosts: Any, secrets: Any, max_iterations: int, session: str) -> Any:
    from pincer.builder.build import BuildRequest

    return BuildRequest(description=description, name=name, hosts=tuple(hosts or ()), secrets=tuple(secrets or ()),
                        max_iterations=max_iterations, session=session)  # fmt: skip
