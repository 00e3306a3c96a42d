"""``/audit``: the records (a non-main session reads only its own), the chain's verification,
and a signed checkpoint of its head (main sessions only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from pincer.core.errors import PincerError
from pincer.gateway.access import audit_session_filter, may_read_audit_of
from pincer.gateway.rest.common import ServicesDep, SessionDep, json_body_route, refuse

__all__ = ["MAX_AUDIT_LIMIT", "router"]

MAX_AUDIT_LIMIT = 10_000

router = APIRouter(route_class=json_body_route())


@router.get("/audit", summary="Audit records, newest last")
async def audit(
    services: ServicesDep,
    session: SessionDep,
    tool: Annotated[str | None, Query(max_length=256)] = None,
    session_name: Annotated[str | None, Query(alias="session", max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_LIMIT)] = 100,
    person: Annotated[str | None, Query(max_length=64, description="Only the records naming this person, behind the call or its approval.")] = None,
) -> dict[str, Any]:
    if not may_read_audit_of(session, session_name):
        raise refuse(403, "session_forbidden", f"session {session.name!r} may read only its own records")
    records = await services.audit.records(tool=tool, session=audit_session_filter(session, session_name), limit=limit,
                                         person=person)  # fmt: skip
    # A value stored as a secret after its call was recorded is masked here, at display.
    return {"records": services.shown([r.to_dict() for r in records])}


@router.get("/audit/verify", summary="Verify the audit chain (from where the last verify ended; full=1: all of it)")
async def verify(
    services: ServicesDep, session: SessionDep, full: Annotated[bool, Query(description="walk every record")] = False
) -> JSONResponse:
    try:
        head = await services.audit.verify_chain(incremental=not full)
    except PincerError as exc:
        return JSONResponse({"ok": False, "error": exc.to_dict()}, status_code=409)
    return JSONResponse({"ok": True, "full": full, **head.to_dict()})


@router.get("/audit/verify/progress", summary="How far the verify running in this gateway has come")
async def verify_progress(services: ServicesDep, session: SessionDep) -> dict[str, Any]:
    running = services.audit.verifying
    return {"running": running is not None, **(running.to_dict() if running is not None else {})}


@router.get("/audit/checkpoint", summary="A signed head of the audit log, to keep elsewhere (main sessions only)")
async def checkpoint(services: ServicesDep, session: SessionDep) -> JSONResponse:
    if not session.is_main:
        raise refuse(403, "session_forbidden", f"session {session.name!r} may not take audit checkpoints",
                     "use a main session's token, or `pincer audit checkpoint`")  # fmt: skip
    try:
        made = await services.audit.checkpoint()
    except PincerError as exc:
        return JSONResponse({"ok": False, "error": exc.to_dict()}, status_code=409)
    return JSONResponse(made.to_dict())
