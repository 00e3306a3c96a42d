"""Approvals put to MCP clients as elicitations, in both protocol eras.

Handshake era: the gateway sends ``elicitation/create`` in the middle of the call and answers
the approval with the reply (:func:`answer_from_reply`).

2026-07-28: a server may not send requests, so a call that needs a person's answer ends its
round with an ``InputRequiredResult`` asking for the decision, while the call itself stays
parked here, waiting on its approval like any other. The client's next round carries the
decision (and the approval id in the sealed ``requestState``); the gateway answers the approval
and hands back the parked call's result. Answers from REST or the CLI still count, and a client
that never comes back leaves a call that times out and is audited as such.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from pincer.core.errors import ApprovalGone
from pincer.core.values import CallRequest, ToolResult
from pincer.elicitation import (
    APPROVAL_DECISION_SCHEMA,
    ELICITATION_SOURCE,
    answer_elicited,
    answer_from_reply,
    approval_message,
)
from pincer.gateway.access import can_answer_approvals
from pincer.gateway.channel import McpChannel
from pincer.gateway.tokens import GatewaySession
from pincer.store.approvals import Answer, ApprovalRequest

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.dispatch import Dispatcher

logger = logging.getLogger(__name__)

__all__ = [
    "APPROVAL_DECISION_SCHEMA",
    "ApprovalRounds",
    "answer_from_reply",
    "approval_message",
    "PARKED_RESULT_TTL_S",
    "ELICITATION_SOURCE",
]

STATE_PREFIX = "pincer-approval:"
# A parked call that finished keeps its result this long for its client to collect.
PARKED_RESULT_TTL_S = 120.0
# Past the approval timeout, how long a collecting round waits for the call to wind up.
COLLECT_MARGIN_S = 30.0


def waiting_message(approval: ApprovalRequest, base_url: str | None) -> str:
    """What a waiting call's progress notifications say: which approval, and how to answer it."""
    rest = f", or POST {base_url.rstrip('/')}/api/v1/approvals/{approval.id}" if base_url else ""
    return (
        f"waiting for approval {approval.id} ({approval.tool}): a person answers with "
        f"`pincer approvals approve {approval.id}` or `pincer approvals deny {approval.id}`{rest}"
    )


async def answer_approval(dispatcher: Any, approval_id: str, answer: Answer, session: GatewaySession) -> None:
    await answer_elicited(dispatcher, approval_id, answer, session=session.name, person=session.person, roles=session.roles)


@dataclass(kw_only=True)
class _Parked:
    session: str
    done: anyio.Event = field(default_factory=anyio.Event)
    result: ToolResult | None = None


def _gone(message: str, hint: str) -> ToolResult:
    return ToolResult(ok=False, error=ApprovalGone(message, hint=hint).to_dict())


class ApprovalRounds:
    """Calls parked on an approval between 2026-07-28 rounds, by approval id."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        config: Callable[[], Config],
        task_group: Callable[[], anyio.abc.TaskGroup | None],
    ) -> None:
        """``dispatcher``: the call chain a parked call runs in and its answer goes through;
        ``config``: config.toml as it is now (its approval timeout bounds a round)."""
        self._dispatcher = dispatcher
        self._config = config
        self._task_group = task_group
        self._parked: dict[str, _Parked] = {}

    @staticmethod
    def continuation(channel: McpChannel) -> str | None:
        """The approval id a later round comes back for, if it is one."""
        state = channel.request_state
        if state and state.startswith(STATE_PREFIX):
            return state[len(STATE_PREFIX) :]
        return None

    def can_start(self, channel: McpChannel, session: GatewaySession) -> bool:
        # Only a main session's client (or an approving person's) may be asked: an agent must not
        # approve its own calls.
        return (
            can_answer_approvals(session)
            and channel.is_modern
            and channel.has_capability("elicitation")
            and self._task_group() is not None
        )

    async def start(
        self, request: CallRequest, channel: McpChannel, session: GatewaySession
    ) -> ToolResult | dict[str, Any]:
        """Run the call; its result if it needs no approval, else the round's InputRequiredResult."""
        task_group = self._task_group()
        assert task_group is not None  # can_start said so
        parked = _Parked(session=session.name)
        asked: list[ApprovalRequest] = []
        wake = anyio.Event()

        async def on_approval(approval: ApprovalRequest) -> None:
            asked.append(approval)
            wake.set()

        async def run() -> None:
            try:
                parked.result = await self._dispatcher.call(request, on_approval=on_approval)
            finally:
                parked.done.set()
                wake.set()
            if asked:
                await anyio.sleep(PARKED_RESULT_TTL_S)
                self._parked.pop(asked[0].id, None)

        task_group.start_soon(run)
        await wake.wait()
        if parked.done.is_set() and parked.result is not None:
            return parked.result
        approval = asked[0]
        self._parked[approval.id] = parked
        question = {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": approval_message(approval),
                "requestedSchema": APPROVAL_DECISION_SCHEMA,
            },
        }
        return channel.input_required({_key(approval.id): question}, state=STATE_PREFIX + approval.id)

    async def resume(self, approval_id: str, channel: McpChannel, session: GatewaySession) -> ToolResult:
        """Apply the client's decision and return the parked call's result."""
        parked = self._parked.get(approval_id)
        if parked is None:
            return _gone(
                f"approval {approval_id} is not waiting here any more (it expired, or its result was collected)",
                "call the tool again",
            )
        if parked.session != session.name:
            return _gone(f"approval {approval_id} belongs to another session", "answer it with the session that asked")
        answer = answer_from_reply(channel.answer(_key(approval_id)))
        if answer is not None:
            await answer_approval(self._dispatcher, approval_id, answer, session)
        with anyio.move_on_after(self._config().approval_timeout_s + COLLECT_MARGIN_S):
            await parked.done.wait()
        if parked.result is None:
            return _gone(f"the call waiting on approval {approval_id} did not finish", "call the tool again")
        self._parked.pop(approval_id, None)
        return parked.result


def _key(approval_id: str) -> str:
    return f"approval:{approval_id}"
