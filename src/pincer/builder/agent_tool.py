"""``build_tool``: an agent asks pincer to build a tool (effect ``modify_extension``, so it asks).

The approval shows what the build may grant at most: the description, the hosts and secrets the
agent asks to allow (a plan can only narrow them: anything else is dropped), and that
``financial``/``execute_code`` effects and wildcard hosts are refused whatever the model plans.
The tool then builds with the service's model and returns the report (hosts, secrets, effects,
tests, iterations, tokens). Registered with ``run_skill`` when a model is configured.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from pincer.core.effects import EffectKind
from pincer.core.values import HostContext, RuntimeAsk
from pincer.runtimes.native.decorator import tool
from pincer.runtimes.native.runtime import NativeRuntime

__all__ = ["builder_runtime", "RUNTIME_NAME"]

RUNTIME_NAME = "builder"


def builder_runtime(pincer: Any) -> NativeRuntime:
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
        from pincer.builder.build import BuildRequest
        from pincer.builder.service import run_build

        request = BuildRequest(description=description, name=name, hosts=tuple(hosts or ()), secrets=tuple(secrets or ()),
                               max_iterations=max_iterations, session=host.session)  # fmt: skip
        report = await run_build(pincer, request)
        data = report.to_json()
        return {k: data[k] for k in ("key", "version", "signer", "description", "hosts", "secrets", "effects", "dropped",
                                     "tests_passed", "tests_total", "iterations", "tokens", "cost_usd", "seconds")}  # fmt: skip

    async def preflight(args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
        from pincer.policy.grants import evaluate_grants

        grants = tuple(pincer.config.grants) + tuple(pincer.grants.all())
        decision = evaluate_grants(build_tool.spec, grants, now=time.time(), session=host.session,
                                   session_kind=pincer.config.session(host.session).kind.value)  # fmt: skip
        if decision.mode.value == "allow":
            return None
        hosts, secrets = list(args.get("hosts") or []), list(args.get("secrets") or [])
        return RuntimeAsk(
            reason=f"an agent wants pincer to build and register a tool: {str(args.get('description', ''))[:200]}",
            effects=(EffectKind.MODIFY_EXTENSION.value,),
            detail={
                "description": str(args.get("description", ""))[:2000],
                "name": args.get("name"),
                "hosts": hosts,
                "secrets": secrets,
                "effects": "whatever the plan declares within these hosts and secrets; financial and execute_code are refused",
                "refused": ["financial", "execute_code", "wildcard hosts", "hosts and secrets not listed here"],
            },
        )

    return NativeRuntime([build_tool.with_preflight(preflight)], name=RUNTIME_NAME)
