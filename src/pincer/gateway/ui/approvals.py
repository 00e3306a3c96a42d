"""``/ui/approvals``: the calls waiting for a person, live, with Allow once / Allow always / Deny.

The list is the one REST serves (``gateway/access.py`` decides who sees which request); new
requests reach an open page over server-sent events (``/ui/approvals/events``): the stream
says "changed" when a request the page may show changes and the page (``static/dashboard.js``)
fetches the rows again. Without JavaScript the page is a plain list of plain forms.

The stream follows the store's notifications (store/approvals.py's ``changes``: LISTEN/NOTIFY on
PostgreSQL; on SQLite by id in this process and RESYNC for another process's commit, so a
request ``pincer tools call`` asks from its own process is heard too) and never re-reads the
table on a timer. On RESYNC it compares the ids of the open requests (an index read of those
alone). A page reads the open requests and the one page of answered ones it shows, never the
whole table.
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
from pincer.gateway.access import ANSWER_FORBIDDEN_HINT, approvals_seen, can_answer_approvals, may_answer, sees_approval
from pincer.gateway.rest.events import event_stream
from pincer.gateway.tokens import GatewaySession
from pincer.gateway.ui.auth import UI_PREFIX, current_identity, read_form, require_csrf, require_identity
from pincer.gateway.ui.paging import filter_value, keyset_paged, keyset_request
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.store.approvals import Answer, AnswerScope, ApprovalRequest, ApprovalStatus
from pincer.store.sql import RESYNC

__all__ = ["APPROVALS_QUIET_S", "RECENT_ANSWERED", "routes", "approval_view"]

# Without a notification for this long, a stream checks that its page is still signed in.
APPROVALS_QUIET_S = 1.0
RECENT_ANSWERED = 20  # answered and expired requests a page shows under the waiting ones
MAX_WAITING_SHOWN = 200
ANSWERED_KEY = (float, str)  # the answered list's sort key, which its ?before= cursor holds: (closed_at, id)
ANSWERED_STATUSES = ("allow_once", "allow_always", "deny", "expired")
# Where an answer from a run's page, or the tasks page, goes back to.
_NEXT = re.compile(r"^/ui/(runs/[A-Za-z0-9_-]{1,64}|tasks)$")


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


async def _waiting(services: DashboardServices, session: GatewaySession, filters: dict[str, str]) -> list[ApprovalRequest]:
    """The waiting requests the page shows (and one more: whether others wait), oldest first,
    filtered and cut in the store however many wait."""
    found = await services.approvals.page(
        status=ApprovalStatus.PENDING, limit=MAX_WAITING_SHOWN + 1, tool_glob=filters["tool"] or None,
        session=filters["session"] or (None if session.is_main else session.name),
    )  # fmt: skip
    return approvals_seen(session, found)


def _filters(request: Request, session: GatewaySession) -> dict[str, str]:
    status = request.query_params.get("status", "")
    return {
        "status": status if status in ANSWERED_STATUSES else "",
        "tool": filter_value(request, "tool"),
        "session": filter_value(request, "session") if session.is_main else "",
    }


def _wanted(approval: ApprovalRequest, filters: dict[str, str]) -> bool:
    """Whether a waiting request passes the page's tool and session filters."""
    if filters["tool"] and not fnmatch.fnmatchcase(approval.tool, filters["tool"]):
        return False
    return not filters["session"] or approval.session == filters["session"]


def _answered_key(approval: ApprovalRequest) -> tuple[float, str]:
    return (approval.closed_at or 0.0, approval.id)  # answered() reads closed rows only: closed_at is set


async def _context(request: Request, session: GatewaySession, **extra: Any) -> dict[str, Any]:
    services, pages = services_of(request), pages_of(request)
    filters = _filters(request, session)
    now = time.time()
    waiting = [a for a in await _waiting(services, session, filters) if _wanted(a, filters)]
    # Paged by key: a page reads its own answered rows (and one more) along the (closed_at, id)
    # index from just past the cursor, however deep in the table it is.
    path = f"{UI_PREFIX}/approvals"
    wanted = keyset_request(request, per=RECENT_ANSWERED, kinds=ANSWERED_KEY, path=path)
    before = (float(wanted.before[0]), str(wanted.before[1])) if wanted.before else None
    answered = await services.approvals.answered(
        limit=wanted.wanted, session=filters["session"] or (None if session.is_main else session.name),
        status=filters["status"] or None, tool_glob=filters["tool"] or None, before=before,
    )  # fmt: skip
    shown = keyset_paged(answered, wanted, path, filters, key=_answered_key, default_per=RECENT_ANSWERED,
                         noun="answered requests")  # fmt: skip
    query = urlencode(
        {k: v for k, v in request.query_params.items() if k in ("status", "tool", "session", "before", "per")}
    )
    return {
        "waiting": [approval_view(pages, a, now) for a in waiting[:MAX_WAITING_SHOWN]],
        "waiting_more": len(waiting) > MAX_WAITING_SHOWN,
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
            answered = await services_of(request).approvals.get(done)
        except PincerError:
            answered = None
        if answered is not None and sees_approval(identity.session, answered):
            notice = f"approval {answered.id} ({answered.tool}): {answered.status.value}"
    return pages_of(request).render(request, "approvals.html", await _context(request, identity.session, notice=notice))


async def rows(request: Request) -> Response:
    identity = await require_identity(request)
    return pages_of(request).render(request, "approval_rows.html", await _context(request, identity.session))


async def events(request: Request) -> Response:
    identity = await require_identity(request)
    services = services_of(request)
    session = identity.session

    async def stream() -> AsyncIterator[ServerSentEvent]:
        number = 0
        async with services.approvals.changes() as changes:  # in place before the first read
            seen = await _open_ids(services, session)
            while True:
                changed = await _next_change(changes)
                if await current_identity(request, touch=False) is None:
                    return  # signed out or expired: the stream ends with the sign-in
                if changed is None:
                    continue  # every process's changes are notified: nothing to read
                now = await _open_ids(services, session)
                moved, seen = now != seen, now
                if changed == RESYNC:
                    # Missed notifications, or another SQLite process committed something: the
                    # open requests tell whether anything this page shows changed.
                    if not moved:
                        continue
                elif not await _sees(services, session, changed):
                    continue
                number += 1
                yield ServerSentEvent(data="changed", event="approvals", id=str(number))

    return event_stream(stream())


async def _open_ids(services: DashboardServices, session: GatewaySession) -> list[str]:
    return [i for i, owner in await services.approvals.pending_ids() if session.is_main or owner == session.name]


async def _next_change(changes: AsyncIterator[str]) -> str | None:
    """The next changed request's id (or RESYNC); None after ``APPROVALS_QUIET_S`` without one."""
    with anyio.move_on_after(APPROVALS_QUIET_S):
        async for changed in changes:
            return changed
    return None


async def _sees(services: DashboardServices, session: GatewaySession, approval_id: str) -> bool:
    if session.is_main:
        return True
    try:
        return sees_approval(session, await services.approvals.get(approval_id))
    except PincerError:
        return False  # gone (pruned) meanwhile: nothing this page shows changed


async def answer(request: Request) -> Response:
    identity = await require_identity(request)
    form = await read_form(request)
    require_csrf(identity, form)
    services = services_of(request)
    approval_id = request.path_params["approval_id"]
    if not can_answer_approvals(identity.session):
        context = await _context(request, identity.session,
                           error=f"{identity.session.actor('ui')} may not answer approvals: {ANSWER_FORBIDDEN_HINT}")  # fmt: skip
        return pages_of(request).render(request, "approvals.html", context, status=403)
    try:
        approval = await services.approvals.get(approval_id)
    except PincerError:
        approval = None
    decision = form.get("decision", "")
    if approval is None or decision not in {a.value for a in Answer}:
        what = f"no approval request with id {approval_id!r}" if approval is None else f"unknown decision {decision!r}"
        return pages_of(request).render(request, "approvals.html", await _context(request, identity.session, error=what),
                                        status=404 if approval is None else 400)  # fmt: skip
    if not may_answer(identity.session, approval):
        error = f"{identity.session.actor('ui')} may not answer approval {approval_id} ({approval.tool}): no role of theirs holds it"
        return pages_of(request).render(request, "approvals.html", await _context(request, identity.session, error=error),
                                        status=403)  # fmt: skip
    scope_value = form.get("scope") or None
    scope = (
        AnswerScope(scope_value)
        if decision == Answer.ALLOW_ALWAYS and scope_value in {s.value for s in AnswerScope}
        else None
    )
    try:
        await services.dispatcher.answer(
            approval_id, Answer(decision), by=str(identity.actor), as_session=identity.name, scope=scope,
            roles=identity.session.roles, person=identity.session.person,
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
