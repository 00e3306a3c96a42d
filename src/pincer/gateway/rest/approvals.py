"""``/approvals``: list, read and answer approval requests. A non-main session sees only its
own; answering takes a main session (an agent must not approve its own calls). Each request comes
with ``message``: the text an MCP client's elicitation shows, its detail included."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict

from pincer.core.errors import UsageError
from pincer.gateway.access import ANSWER_FORBIDDEN_HINT, approvals_seen, can_answer_approvals, sees_approval
from pincer.gateway.approvals import approval_message
from pincer.gateway.rest.common import (
    Refused,
    RestServices,
    ServicesDep,
    SessionDep,
    json_body_route,
    pincer_error_response,
    refuse,
)
from pincer.store.approvals import Answer, AnswerScope, ApprovalRequest, ApprovalStatus
from pincer.store.paging import (
    DEFAULT_PAGE_LIMIT,
    MAX_PAGE_LIMIT,
    Cursor,
    encode_cursor,
    parse_cursor,
    parse_limit,
)

__all__ = ["ApprovalBody", "router"]

router = APIRouter(route_class=json_body_route())


class ApprovalBody(BaseModel):
    """``POST /approvals/{id}``. ``scope`` says how far an ``allow_always`` grant reaches:
    ``kind`` (default: sessions of the kind that asked), ``session`` (only that session), or
    ``all`` (every session)."""

    model_config = ConfigDict(extra="forbid")
    decision: Answer
    scope: AnswerScope | None = None


def _who(session: SessionDep) -> str:
    return f"person {session.person!r}" if session.person is not None else f"session {session.name!r}"


def _shown(services: RestServices, approval: ApprovalRequest) -> dict[str, Any]:
    # A value stored as a secret after the request was made is masked here, at display.
    shown: dict[str, Any] = services.shown({**approval.to_dict(), "message": approval_message(approval)})
    return shown


async def _find_approval(services: RestServices, approval_id: str) -> ApprovalRequest:
    try:
        return await services.approvals.get(approval_id)
    except UsageError as exc:
        raise Refused(pincer_error_response(exc, 404)) from None


@router.get(
    "/approvals",
    summary="List approval requests (pending unless status=all), oldest first, a page at a time",
    description=f"At most `limit` requests (default {DEFAULT_PAGE_LIMIT}, at most {MAX_PAGE_LIMIT}); "
    "`next_cursor`, when more follow, is the `cursor` of the next page. A bad `limit` or `cursor` is a 400.",
)
async def list_approvals(
    services: ServicesDep,
    session: SessionDep,
    status: Annotated[str, Query(pattern="^(pending|all)$")] = "pending",
    limit: Annotated[str | None, Query(description=f"1 to {MAX_PAGE_LIMIT}")] = None,
    cursor: Annotated[str | None, Query(description="next_cursor of the page before")] = None,
) -> dict[str, Any]:
    try:
        wanted, after = parse_limit(limit), parse_cursor(cursor)
    except UsageError as exc:
        raise refuse(400, "invalid_request", exc.message, exc.hint) from None
    # One more than the page: whether another follows. A non-main session's own, in the store.
    requests = await services.approvals.page(
        status=None if status == "all" else ApprovalStatus.PENDING, limit=wanted + 1,
        after=(after.at, after.id) if after is not None else None,
        session=None if session.is_main else session.name,
    )  # fmt: skip
    shown = approvals_seen(session, requests[:wanted])
    last = requests[wanted - 1] if len(requests) > wanted else None
    return {
        "approvals": [_shown(services, r) for r in shown],
        "next_cursor": encode_cursor(Cursor(at=last.created_at, id=last.id)) if last is not None else None,
    }


@router.get("/approvals/{approval_id}", summary="One approval request")
async def get_approval(
    services: ServicesDep, session: SessionDep, approval_id: Annotated[str, Path(max_length=100)]
) -> dict[str, Any]:
    approval = await _find_approval(services, approval_id)
    if not sees_approval(session, approval):
        raise refuse(404, "not_found", f"no approval request with id {approval_id!r}")
    return _shown(services, approval)


@router.post("/approvals/{approval_id}", summary="Answer an approval request (main sessions only)")
async def answer_approval(
    services: ServicesDep, session: SessionDep, approval_id: Annotated[str, Path(max_length=100)], body: ApprovalBody
) -> dict[str, Any]:
    if not can_answer_approvals(session):
        raise refuse(
            403, "session_forbidden", f"{_who(session)} may not answer approvals", ANSWER_FORBIDDEN_HINT
        )
    approval = await _find_approval(services, approval_id)
    if not sees_approval(session, approval):
        raise refuse(404, "not_found", f"no approval request with id {approval_id!r}")
    answered = await services.dispatcher.answer(
        approval_id, body.decision, by=f"rest:{session.principal}", as_session=session.name, scope=body.scope,
        roles=session.roles, person=session.person,
    )
    shown: dict[str, Any] = services.shown(answered.to_dict())
    return shown
