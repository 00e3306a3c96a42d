"""An approval put to a person as an MCP elicitation: the question (:func:`approval_message`), the
decision's schema, reading the reply (:func:`answer_from_reply`) and applying the answer
(:func:`answer_elicited`).

Used by the gateway's MCP server (``gateway/approvals.py``, both protocol eras) and by ``run_skill``
(``llm/delegate.py``), whose runs ask the calling client the same way; it lives below both so that
neither imports the other and there is one copy of each.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pincer.core.display import honest_detail, honest_json, honest_text
from pincer.core.errors import PincerError
from pincer.store.approvals import Answer, ApprovalRequest

logger = logging.getLogger(__name__)

__all__ = [
    "APPROVAL_DECISION_SCHEMA",
    "ELICITATION_SOURCE",
    "MESSAGE_ARGS_MAX_CHARS",
    "approval_message",
    "answer_from_reply",
    "answer_elicited",
]

ELICITATION_SOURCE = "mcp-elicitation"
APPROVAL_DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "oneOf": [
                {"const": Answer.ALLOW_ONCE.value, "title": "Allow once"},
                {"const": Answer.ALLOW_ALWAYS.value, "title": "Always allow this tool"},
                {"const": Answer.DENY.value, "title": "Deny"},
            ],
        }
    },
    "required": ["decision"],
}


# How much of a call's arguments an elicitation shows before cutting (with a visible note).
MESSAGE_ARGS_MAX_CHARS = 2_000
MESSAGE_DETAIL_MAX_CHARS = 1_000


def approval_message(approval: ApprovalRequest) -> str:
    """What the person is asked, made honest (core/display.py): long whitespace runs counted,
    invisible characters named, and any cut marked with the command that shows the whole. The
    detail a runtime asked with follows, a line each (a skill's version, source, signer,
    fingerprint, scanner verdict and findings, requested tools; a build's plan)."""
    see_all = f"`pincer approvals show {approval.id}`"
    args = honest_json(approval.args, MESSAGE_ARGS_MAX_CHARS, see_all=see_all)
    effects = ", ".join(approval.effects) or "no declared effects"
    hosts = f"; hosts: {', '.join(approval.hosts)}" if approval.hosts else ""
    asked = (
        f"pincer asks: allow {approval.tool} for session {approval.session}? "
        f"Effects: {effects}{hosts}. Arguments: {args}. Why asked: {honest_text(approval.reason)}. "
        f"(approval {approval.id})"
    )
    details = honest_detail(approval.detail, MESSAGE_DETAIL_MAX_CHARS, see_all=see_all)
    return "\n".join([asked, "Details:", *(f"- {line}" for line in details)]) if details else asked


def answer_from_reply(reply: Any) -> Answer | None:
    """The decision in an ElicitResult: accept with a decision, decline (deny), or None when the
    user dismissed it (the approval stays pending for another way to answer)."""
    if not isinstance(reply, Mapping):
        return None
    content = reply.get("content")
    decision = content.get("decision") if isinstance(content, Mapping) else None
    if reply.get("action") == "accept" and decision in {a.value for a in Answer}:
        return Answer(decision)
    if reply.get("action") == "decline":
        return Answer.DENY
    return None


async def answer_elicited(
    dispatcher: Any, approval_id: str, answer: Answer, *, session: str, person: str | None = None, roles: Any = None
) -> bool:
    """Answer ``approval_id`` as ``session``'s client did (a person's client: as that person, by
    their ``roles``); False (logged) when it was answered meanwhile, expired, or the person's
    roles do not hold it, so that the caller falls back to saying how else to answer."""
    by = f"{ELICITATION_SOURCE}:{person if person is not None else session}"
    try:
        await dispatcher.answer(approval_id, answer, by=by, as_session=session, roles=roles, person=person)
    except PincerError as exc:  # answered meanwhile, or expired
        logger.info("elicitation answer for %s not applied: %s", approval_id, exc.message)  # never a token: names only
        return False
    return True
