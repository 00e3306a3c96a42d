"""``/ui/audit``: the audit records (a non-main session reads only its own, by the rule REST
applies), filtered by tool, session, person (behind the call or its approval), decision and time;
one record whole; "Verify chain".

"Verify chain" waits for the walk (a plain form without JavaScript; with it, htmx posts it and
puts the result into ``#verify-progress``, so the page stays); meanwhile ``#verify-progress`` follows ``/ui/audit/verify/events`` and fetches its fragment
(``/ui/audit/verify/progress``, server-rendered): the records walked of the total while a verify
runs in this gateway (started here, elsewhere on the dashboard or over REST), then the last
result of the dashboard's verify."""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pincer.core.display import honest_json
from pincer.core.errors import AuditChainBroken, PincerError
from pincer.gateway.access import audit_session_filter, may_read_audit_of
from pincer.gateway.rest.audit import MAX_AUDIT_LIMIT
from pincer.gateway.rest.events import event_stream
from pincer.gateway.tokens import GatewaySession
from pincer.gateway.ui.auth import UI_PREFIX, current_identity, read_form, require_csrf, require_identity
from pincer.gateway.ui.conversation import approval_wait_ms
from pincer.gateway.ui.paging import filter_value, keyset_paged, keyset_request
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.store.audit import AuditRecord

__all__ = ["AUDIT_PER_PAGE", "DECISION_MEANINGS", "VERIFY_PROGRESS_TICK_S", "routes", "visible_records"]

AUDIT_PER_PAGE = 50  # records a page shows
AUDIT_KEY = (int,)  # the audit list's sort key, which its ?before= cursor holds: the record id
# How often the progress stream looks at the running walk (an attribute in memory, no query): the
# walk moves it once a batch, far too often for an event each.
VERIFY_PROGRESS_TICK_S = 0.5
_SIGNED_IN_CHECK_S = 15.0  # how often the progress stream checks that its reader is still signed in
_DECISIONS = ("allow", "ask", "deny", "none", "allow_once", "allow_always")


# What each decision of an audit record means, where the dashboard shows decisions (legends, records).
DECISION_MEANINGS = {
    "allow": "ran: a grant or the default policy allows it, or a person allowed it",
    "ask": "a person was asked and has not allowed it: still waiting, denied, or no answer in time",
    "deny": "refused by the policy before it ran",
    "none": "no decision was reached: the call failed before the policy looked at it (an unknown tool, "
    "arguments that are not an object, a request the gateway refused)",
    "allow_once": "a person allowed this one call",
    "allow_always": "a person allowed it and added a grant",
}


def _parse_time(value: str) -> float | None:
    """A ``datetime-local`` field (``2026-12-02T01:30``, read as UTC) or Unix seconds."""
    value = value.strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        return number if math.isfinite(number) else None
    try:
        parsed = dt.datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        return parsed.timestamp()
    except (ValueError, OverflowError):
        return None


def _filters(request: Request) -> dict[str, str]:
    return {name: filter_value(request, name) for name in ("tool", "session", "person", "decision", "since", "until")}


@dataclass(frozen=True, kw_only=True, slots=True)
class Visible:
    records: list[AuditRecord]  # newest first
    error: str | None = None


async def visible_records(
    services: DashboardServices, session: GatewaySession, filters: dict[str, str], *, wanted: int = AUDIT_PER_PAGE,
    before_id: int | None = None,
) -> Visible:  # fmt: skip
    """The records the filters ask for, older than ``before_id``, as the reader may see them
    (newest first, at most ``wanted``), or an error. Every filter is in the store's read, so the
    read is ``wanted`` records along the id, however deep the page and however rare the matches."""
    asked = filters["session"] or None
    if not may_read_audit_of(session, asked):
        return Visible(records=[], error=f"session {session.name!r} may read only its own records")
    records = await services.audit.records(
        tool=filters["tool"] or None, session=audit_session_filter(session, asked), person=filters.get("person") or None,
        decision=filters["decision"] or None, since=_parse_time(filters["since"]), until=_parse_time(filters["until"]),
        limit=min(MAX_AUDIT_LIMIT, wanted), before_id=before_id,
    )  # fmt: skip
    return Visible(records=list(reversed(records)))


async def _listing(request: Request, identity: Any, **extra: Any) -> tuple[dict[str, Any], int]:
    filters = _filters(request)
    path = f"{UI_PREFIX}/audit"
    wanted = keyset_request(request, per=AUDIT_PER_PAGE, kinds=AUDIT_KEY, path=path)
    before_id = int(wanted.before[0]) if wanted.before else None
    found = await visible_records(services_of(request), identity.session, filters, wanted=wanted.wanted,
                                  before_id=before_id)  # fmt: skip
    shown = keyset_paged(found.records, wanted, path, filters, key=lambda r: (r.id,), default_per=AUDIT_PER_PAGE,
                         noun="records")  # fmt: skip
    waits = {r.id: wait for r in shown.rows if (wait := approval_wait_ms(r))}
    context = {"records": shown, "waits": waits, "filters": filters, "decisions": _DECISIONS, "error": found.error,
               "verify": _last_verify(request), "verifying": _verifying(request), **extra}  # fmt: skip
    return context, 403 if found.error else 200


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    context, status = await _listing(request, identity)
    template = "audit_rows.html" if request.headers.get("hx-request") else "audit.html"
    return pages_of(request).render(request, template, context, status=status)


async def detail(request: Request) -> Response:
    identity = await require_identity(request)
    services = services_of(request)
    record_id = int(request.path_params["record_id"])
    found = await services.audit.records(
        after_id=record_id - 1, session=audit_session_filter(identity.session, None), limit=None
    )
    record = next((r for r in found if r.id == record_id), None)
    if record is None:
        context: dict[str, Any] = {"record": None, "record_id": record_id}
        return pages_of(request).render(request, "audit_record.html", context, status=404)
    pages = pages_of(request)
    shown = pages.redact(record.to_dict())
    usage = shown.get("usage") if isinstance(shown.get("usage"), dict) else {}
    wait = approval_wait_ms(record)
    context = {
        "record": record, "record_id": record_id, "args": shown.get("args"), "usage": usage,
        "wait_ms": wait, "tool_ms": max(0.0, record.duration_ms - wait),
        "raw": honest_json(shown, indent=2), "decision_meaning": DECISION_MEANINGS.get(record.decision, ""),
    }  # fmt: skip
    return pages.render(request, "audit_record.html", context)


async def verify(request: Request) -> Response:
    identity = await require_identity(request)
    form = await read_form(request)
    require_csrf(identity, form)
    services = services_of(request)
    full = form.get("full") == "1"
    result: dict[str, Any]
    try:
        head = await services.audit.verify_chain(incremental=not full)
    except AuditChainBroken as exc:
        result = {"ok": False, "message": exc.message, "hint": exc.hint, "record_id": exc.record_id}
    except PincerError as exc:
        result = {"ok": False, "message": exc.message, "hint": exc.hint, "record_id": None}
    else:
        result = {"ok": True, "records": head.records, "head": head.to_dict(), "full": full}
    request.app.state.last_verify = result  # what the progress fragment shows once the walk is over
    if request.headers.get("hx-request"):  # the page's own button: the result into #verify-progress
        # 200 either way: htmx swaps only a 2xx answer in, and the fragment says broken or intact
        return pages_of(request).render(request, "audit_verify.html", {"verify": result, "verifying": None})
    context, _ = await _listing(request, identity, verify=result, verifying=None)
    return pages_of(request).render(request, "audit.html", context, status=200 if result["ok"] else 409)


def _last_verify(request: Request) -> dict[str, Any] | None:
    last: dict[str, Any] | None = getattr(request.app.state, "last_verify", None)
    return last


def _verifying(request: Request) -> dict[str, int | bool] | None:
    """The verify running in this gateway now: the records walked of those it walks."""
    running = services_of(request).audit.verifying
    if running is None:
        return None
    return {"full": running.full, "walked": max(0, running.checked - running.start), "of": max(0, running.total - running.start)}


async def verify_progress(request: Request) -> Response:
    await require_identity(request)
    context = {"verify": _last_verify(request), "verifying": _verifying(request)}
    return pages_of(request).render(request, "audit_verify.html", context)


async def verify_events(request: Request) -> Response:
    """An event each time the running verify moves, starts or ends; the page fetches the fragment."""
    await require_identity(request)
    audit = services_of(request).audit

    async def stream() -> AsyncIterator[ServerSentEvent]:
        number, seen, checked_at = 0, None, time.monotonic()
        while True:
            running = audit.verifying
            now = None if running is None else (running.full, running.start, running.checked, running.total)
            if now != seen:
                number += 1
                yield ServerSentEvent(data="changed", event="verify", id=str(number))
                seen = now
            await anyio.sleep(VERIFY_PROGRESS_TICK_S)
            if time.monotonic() - checked_at >= _SIGNED_IN_CHECK_S:
                if await current_identity(request, touch=False) is None:
                    return  # signed out or expired: the stream ends with the sign-in
                checked_at = time.monotonic()

    return event_stream(stream())


def routes() -> list[Route]:
    return [
        Route("/audit", page, methods=["GET"]),
        Route("/audit/verify", verify, methods=["POST"]),
        Route("/audit/verify/progress", verify_progress, methods=["GET"]),
        Route("/audit/verify/events", verify_events, methods=["GET"]),
        Route("/audit/{record_id:int}", detail, methods=["GET"]),
    ]
