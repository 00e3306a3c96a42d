"""``/ui/approvals``: the calls waiting for a person, live, with Allow once / Allow always / Deny.

The list is the one REST serves (``gateway/access.py`` decides who sees which request); new
requests reach an open page over server-sent events (``/ui/approvals/events``): the stream
says "changed" when the visible set changes and the page (``static/dashboard.js``) fetches
the rows again. Without JavaScript the page is a plain list of plain forms. Requests are
written by other processes too (``pincer tools call`` asks through the same database), so the
stream reads the store every ``APPROVALS_POLL_S``.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import anyio
from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pincer.core.display import honest_json, honest_text
from pincer.core.errors import PincerError
from pincer.gateway.access import ANSWER_FORBIDDEN_HINT, approvals_seen, can_answer_approvals, sees_approval
from pincer.gateway.rest.events import event_stream
from pincer.gateway.tokens import GatewaySession
from pincer.gateway.ui.auth import UI_PREFIX, current_identity, read_form, require_csrf, require_identity
from pincer.gateway.ui.paging import filter_value, page_request, paged
from pincer.gateway.ui.render import pages_of, pincer_of
from pincer.service import Pincer
from pincer.store.approvals import Answer, AnswerScope, ApprovalRequest, ApprovalStatus

__all__ = ["APPROVALS_POLL_S", "RECENT_ANSWERED", "routes", "approval_view"]

APPROVALS_POLL_S = 0.2  # how often an open page's stream reads the store (as the CLI's waiters do)
RECENT_ANSWERED = 20  # answered and expired requests a page shows under the waiting ones
MAX_WAITING_SHOWN = 200
ANSWERED_STATUSES = ("allow_once", "allow_always", "deny", "expired")
_NEXT = re.compile(r"^/ui/runs/[A-Za-z0-9_-]{1,64}$")  # where an answer from a run's page goes back to


def approval_view(pages: Any, approval: ApprovalRequest, now: float) -> dict[str, Any]:
    """What a row shows: every argument whole, with the honesty markers of `pincer approvals show`."""
    expired = approval.status is ApprovalStatus.EXPIRED or (
        approval.status is ApprovalStatus.PENDING and approval.expires_at <= now
    )
    return {
        "id": approval.id,
        "status": "expired" if expired else approval.status.value,
        "is_pending": approval.status is ApprovalStatus.PENDING and not expired,
        "tool": approval.tool,
        "session": approval.session,
        "session_kind": approval.session_kind,
        "run_id": approval.run_id,
        "tainted_by": honest_text(pages.redact(approval.tainted_by)) if approval.tainted_by else None,
        "effects": list(approval.effects),
        "hosts": list(approval.hosts),
        "reason": honest_text(approval.reason),
        "args": honest_json(pages.redact(approval.args), indent=2),
        "args_value": pages.redact(approval.args),
        "detail_value": pages.redact(dict(approval.detail)) if approval.detail else None,
        "created_at": approval.created_at,
        "expires_at": approval.expires_at,
        "answered_by": approval.answered_by,
        "scope": approval.scope.value if approval.scope else None,
    }


async def _visible(pincer: Pincer, session: GatewaySession) -> tuple[list[ApprovalRequest], list[ApprovalRequest]]:
    seen = approvals_seen(session, await pincer.approvals.list(status=None))
    waiting = [a for a in seen if a.status is ApprovalStatus.PENDING]
    answered = sorted((a for a in seen if a.status is not ApprovalStatus.PENDING),
                      key=lambda a: a.answered_at or a.expires_at, reverse=True)  # fmt: skip
    return waiting, answered


def _filters(request: Request, session: GatewaySession) -> dict[str, str]:
    status = request.query_params.get("status", "")
    return {
        "status": status if status in ANSWERED_STATUSES else "",
        "tool": filter_value(request, "tool"),
        "session": filter_value(request, "session") if session.is_main else "",
    }


def _matches(approval: ApprovalRequest, filters: dict[str, str], now: float) -> bool:
    if filters["tool"] and not fnmatch.fnmatchcase(approval.tool, filters["tool"]):
        return False
    if filters["session"] and approval.session != filters["session"]:
        return False
    if filters["status"]:
        expired = approval.status is ApprovalStatus.EXPIRED or approval.expires_at <= now
        status = "expired" if expired and approval.status in (ApprovalStatus.PENDING, ApprovalStatus.EXPIRED) else approval.status.value
        return status == filters["status"]
    return True


async def _context(request: Request, session: GatewaySession, **extra: Any) -> dict[str, Any]:
    pincer, pages = pincer_of(request), pages_of(request)
    filters = _filters(request, session)
    waiting, answered = await _visible(pincer, session)
    now = time.time()
    waiting = [a for a in waiting if _matches(a, {**filters, "status": ""}, now)]
    answered = [a for a in answered if _matches(a, filters, now)]
    shown = paged(answered, page_request(request, per=RECENT_ANSWERED), f"{UI_PREFIX}/approvals", filters,
                  default_per=RECENT_ANSWERED, noun="answered requests")  # fmt: skip
    query = urlencode({k: v for k, v in request.query_params.items() if k in ("status", "tool", "session", "page", "per")})
    return {
        "waiting": [approval_view(pages, a, now) for a in waiting[:MAX_WAITING_SHOWN]],
        "waiting_more": max(0, len(waiting) - MAX_WAITING_SHOWN),
        "answered": [approval_view(pages, a, now) for a in shown.rows],
        "answered_page": shown,
        "filters": filters,
        "statuses": ANSWERED_STATUSES,
        "rows_url": f"{UI_PREFIX}/approvals/rows" + (f"?{query}" if query else ""),
        "can_answer": can_answer_approvals(session),
        "answer_hint": ANSWER_FORBIDDEN_HINT,
        "scopes": [s.value for s in AnswerScope],
        "notice": None,
        "error": None,
        **extra,
    }


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    notice = None
    done = request.query_params.get("answered")
    if done:
        try:
            answered = await pincer_of(request).approvals.get(done)
        except PincerError:
            answered = None
        if answered is not None and sees_approval(identity.session, answered):
            notice = f"approval {answered.id} ({answered.tool}): {answered.status.value}"
    return pages_of(request).render(request, "approvals.html", await _context(request, identity.session, notice=notice))


async def rows(request: Request) -> Response:
    identity = await require_identity(request)
    return pages_of(request).render(request, "approval_rows.html", await _context(request, identity.session))


async def _fingerprint(pincer: Pincer, session: GatewaySession) -> tuple[tuple[str, str], ...]:
    now = time.time()
    waiting, answered = await _visible(pincer, session)
    answered = answered[:RECENT_ANSWERED]
    return tuple((a.id, "expired" if a.expires_at <= now and a.status is ApprovalStatus.PENDING else a.status.value)
                 for a in (*waiting, *answered))  # fmt: skip


async def events(request: Request) -> Response:
    identity = await require_identity(request)
    pincer = pincer_of(request)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        seen = await _fingerprint(pincer, identity.session)
        number = 0
        while True:
            await anyio.sleep(APPROVALS_POLL_S)
            if await current_identity(request, touch=False) is None:
                return  # signed out or expired: the stream ends with the sign-in
            now = await _fingerprint(pincer, identity.session)
            if now != seen:
                seen = now
                number += 1
                yield ServerSentEvent(data=str(len(now)), event="approvals", id=str(number))

    return event_stream(stream())


async def answer(request: Request) -> Response:
    identity = await require_identity(request)
    form = await read_form(request)
    require_csrf(identity, form)
    pincer = pincer_of(request)
    approval_id = request.path_params["approval_id"]
    if not can_answer_approvals(identity.session):
        context = await _context(request, identity.session,
                           error=f"session {identity.name!r} may not answer approvals: {ANSWER_FORBIDDEN_HINT}")  # fmt: skip
        return pages_of(request).render(request, "approvals.html", context, status=403)
    try:
        approval = await pincer.approvals.get(approval_id)
    except PincerError:
        approval = None
    decision = form.get("decision", "")
    if approval is None or decision not in {a.value for a in Answer}:
        what = f"no approval request with id {approval_id!r}" if approval is None else f"unknown decision {decision!r}"
        return pages_of(request).render(request, "approvals.html", await _context(request, identity.session, error=what),
                                        status=404 if approval is None else 400)  # fmt: skip
    scope_value = form.get("scope") or None
    scope = (
        AnswerScope(scope_value)
        if decision == Answer.ALLOW_ALWAYS and scope_value in {s.value for s in AnswerScope}
        else None
    )
    try:
        await pincer.dispatcher.answer(
            approval_id, Answer(decision), by=f"ui:{identity.name}", as_session=identity.name, scope=scope
        )
    except PincerError as exc:
        message = f"approval {approval_id} ({approval.tool}): {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        return pages_of(request).render(request, "approvals.html", await _context(request, identity.session, error=message),
                                        status=409)  # fmt: skip
    back = form.get("next", "")
    target = back if _NEXT.match(back) else f"{UI_PREFIX}/approvals"
    return RedirectResponse(f"{target}?answered={approval_id}", status_code=303)


def routes() -> list[Route]:
    return [
        Route("/approvals", page, methods=["GET"]),
        Route("/approvals/rows", rows, methods=["GET"]),
        Route("/approvals/events", events, methods=["GET"]),
        Route("/approvals/{approval_id:str}", answer, methods=["POST"]),
    ]
