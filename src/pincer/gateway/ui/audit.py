"""``/ui/audit``: the audit records (a non-main session reads only its own, by the rule REST
applies), filtered by tool, session, person (behind the call or its approval), decision and time;
one record whole; "Verify chain"."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pincer.core.display import honest_json
from pincer.core.errors import AuditChainBroken, PincerError
from pincer.gateway.access import audit_session_filter, may_read_audit_of
from pincer.gateway.rest.audit import MAX_AUDIT_LIMIT
from pincer.gateway.tokens import GatewaySession
from pincer.gateway.ui.auth import UI_PREFIX, read_form, require_csrf, require_identity
from pincer.gateway.ui.conversation import approval_wait_ms
from pincer.gateway.ui.paging import filter_value, page_request, paged
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.store.audit import AuditRecord

__all__ = ["AUDIT_PER_PAGE", "DECISION_MEANINGS", "routes", "visible_records"]

AUDIT_PER_PAGE = 50  # records a page shows
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


async def visible_records(
    services: DashboardServices, session: GatewaySession, filters: dict[str, str], *, wanted: int = AUDIT_PER_PAGE
) -> tuple[list[AuditRecord], str | None]:
    """The records the filters ask for, as the reader may see them (newest first), or an error:
    at least ``wanted`` of them when there are that many, at most ``MAX_AUDIT_LIMIT``."""
    asked = filters["session"] or None
    if not may_read_audit_of(session, asked):
        return [], f"session {session.name!r} may read only its own records"
    since, until = _parse_time(filters["since"]), _parse_time(filters["until"])
    decision = filters["decision"]
    narrowed = bool(decision or since or until)
    records = await services.audit.records(
        tool=filters["tool"] or None, session=audit_session_filter(session, asked), person=filters.get("person") or None,
        limit=MAX_AUDIT_LIMIT if narrowed else min(MAX_AUDIT_LIMIT, wanted),
    )  # fmt: skip
    kept = [
        r for r in records
        if (not decision or r.decision == decision) and (since is None or r.ts >= since) and (until is None or r.ts <= until)
    ]  # fmt: skip
    return list(reversed(kept)), None


async def _listing(request: Request, identity: Any, **extra: Any) -> tuple[dict[str, Any], int]:
    filters = _filters(request)
    wanted = page_request(request, per=AUDIT_PER_PAGE)
    records, error = await visible_records(services_of(request), identity.session, filters, wanted=wanted.wanted)
    shown = paged(records, wanted, f"{UI_PREFIX}/audit", filters, default_per=AUDIT_PER_PAGE, noun="records")
    waits = {r.id: wait for r in shown.rows if (wait := approval_wait_ms(r))}
    context = {"records": shown, "waits": waits, "filters": filters, "decisions": _DECISIONS, "error": error, "verify": None,
               "window_full": len(records) >= MAX_AUDIT_LIMIT, "max_records": MAX_AUDIT_LIMIT, **extra}  # fmt: skip
    return context, 403 if error else 200


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
    context, _ = await _listing(request, identity, verify=result)
    return pages_of(request).render(request, "audit.html", context, status=200 if result["ok"] else 409)


def routes() -> list[Route]:
    return [
        Route("/audit", page, methods=["GET"]),
        Route("/audit/verify", verify, methods=["POST"]),
        Route("/audit/{record_id:int}", detail, methods=["GET"]),
    ]
