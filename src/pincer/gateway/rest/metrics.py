"""``/metrics``: this gateway process's counters (main sessions only)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from pincer.gateway.rest.common import SessionDep, json_body_route, refuse

__all__ = ["router"]

router = APIRouter(route_class=json_body_route())


@router.get("/metrics", summary="Counters of this gateway process (main sessions only)")
async def gateway_metrics(request: Request, session: SessionDep) -> dict[str, Any]:
    if not session.is_main:
        raise refuse(403, "session_forbidden", f"session {session.name!r} may not read the gateway's metrics",
                     "use a main session's token")  # fmt: skip
    metrics = request.app.state.metrics
    return {"gateway": metrics() if metrics is not None else {}}
