"""``run_skill``: another agent delegates a skill to pincer's loop, as a tool (over MCP, REST).

Registered when ``[llm]`` names a model. The run goes under the caller's session, one level
deeper (``[tools] max_depth`` bounds runs that start runs; ``run_skill`` is never offered to a
model anyway), and its every tool call through the chain as always. A tool call is bounded by
``[tools] timeout_s``, so the run's deadline is kept inside it. Its effect is
``dispatch_capability``: under the default policy a client is asked before delegating, until a
grant (``tool = "run_skill"``) allows it. An approval the run needs is put to the calling MCP
client as an elicitation when it can take one mid-call and its session is a main session (as for
the client's own calls); it stays answerable with ``pincer approvals`` and ``POST
/api/v1/approvals/{id}``, and a client that asked for progress is told so.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pincer.core.effects import EffectKind
from pincer.core.values import HostContext
from pincer.llm.run import RunRequest
from pincer.runtimes.native import NativeRuntime, tool

if TYPE_CHECKING:
    from pincer.llm.services import DelegateServices

__all__ = ["run_skill_runtime", "RUN_SKILL_MARGIN_S"]

logger = logging.getLogger(__name__)

RUN_SKILL_MARGIN_S = 2.0  # room left inside the tool timeout to record how the run ended


def run_skill_runtime(services: DelegateServices) -> NativeRuntime:
    @tool(name="run_skill", effects=[EffectKind.DISPATCH_CAPABILITY], side_effecting=True)
    async def run_skill(
        skill: str,
        host: HostContext,
        params: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Run one of pincer's skills with pincer's agent loop: a model follows the skill and calls tools,
        each through pincer's policy and audit. Returns the model's final text, the run's status and usage.

        Args:
            skill: The skill's name (see the server's prompts, or `pincer skills list`).
            params: Values for the skill's declared parameters.
            message: What to do, in the user's words.
        """
        deadline = max(1.0, host.timeout_s - RUN_SKILL_MARGIN_S)
        client: Any = host.client  # the gateway's MCP channel can also elicit

        async def tell(approval: Any) -> None:
            if client is not None and getattr(client, "can_ask", False) and services.dispatcher.is_main_session(host.session):
                # The client is the gateway's MCP channel: its approval question and answers.
                from pincer.elicitation import (
                    APPROVAL_DECISION_SCHEMA,
                    answer_elicited,
                    answer_from_reply,
                    approval_message,
                )

                try:
                    reply = await client.elicit(approval_message(approval), APPROVAL_DECISION_SCHEMA, key=f"approval:{approval.id}")
                except Exception as exc:  # noqa: BLE001 - the approval stays answerable over REST and the CLI
                    logger.info("approval %s could not be put to the client: %s", approval.id, exc)
                    reply = None
                answer = answer_from_reply(reply)
                if answer is not None and await answer_elicited(services.dispatcher, approval.id, answer, session=host.session):
                    return
            if client is not None:
                await client.progress(
                    0, None,
                    f"the run waits for approval {approval.id} ({approval.tool}): "
                    f"`pincer approvals approve {approval.id}` or POST /api/v1/approvals/{approval.id}",
                )  # fmt: skip

        run = await services.agent().run(
            RunRequest(
                skill=skill, params=params or {}, message=message, session=host.session, trigger="run_skill",
                budgets={"deadline_s": min(deadline, services.config().agent.deadline_s)}, depth=host.depth + 1,
                person=host.person, may_change_policy=host.may_change_policy,
            ),
            on_approval=tell,
        )  # fmt: skip
        return {
            "run_id": run.id,
            "status": run.status,
            "stop": run.stop,
            "text": run.text,
            "usage": run.to_dict()["usage"],
            "cost_usd": run.cost_usd,
            "error": dict(run.error) if run.error else None,
        }

    return NativeRuntime([run_skill], name="agent")
