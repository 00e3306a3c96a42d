"""``/ui/runs``: runs (a non-main session sees only its own, by the rule REST applies), one
run's transcript (live over server-sent events while it runs), and Cancel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pincer.core.display import honest_json
from pincer.core.errors import PincerError
from pincer.gateway.access import runs_session_filter, sees_run
from pincer.gateway.rest.events import event_stream
from pincer.gateway.ui.auth import UI_PREFIX, read_form, require_csrf, require_identity
from pincer.gateway.ui.render import pages_of, pincer_of
from pincer.store.runs import RunRow

__all__ = ["RUNS_PAGE_ROWS", "routes"]

RUNS_PAGE_ROWS = 100


def _row(request: Request, run_id: str) -> RunRow | None:
    identity = require_identity(request)
    try:
        row = pincer_of(request).runs.get(run_id)
    except PincerError:
        return None
    return row if sees_run(identity.session, row) else None


async def page(request: Request) -> Response:
    identity = require_identity(request)
    rows = pincer_of(request).runs.list(session=runs_session_filter(identity.session), limit=RUNS_PAGE_ROWS)
    return pages_of(request).render(request, "runs.html", {"runs": rows})


def _transcript(request: Request, row: RunRow) -> dict[str, Any]:
    pages = pages_of(request)
    messages = [
        {"seq": m.seq, "ts": m.ts, "role": m.role, "audit_id": m.audit_id, "body": honest_json(pages.redact(dict(m.body)), indent=2)}
        for m in pincer_of(request).runs.messages(row.id)
    ]  # fmt: skip
    return {"run": row, "messages": messages, "usage": honest_json(pages.redact(dict(row.usage)), indent=2),
            "error": honest_json(pages.redact(dict(row.error)), indent=2) if row.error else ""}  # fmt: skip


async def detail(request: Request) -> Response:
    row = _row(request, request.path_params["run_id"])
    if row is None:
        return pages_of(request).render(
            request, "run.html", {"run": None, "messages": [], "usage": "", "error": ""}, status=404
        )
    template = "run_transcript.html" if request.headers.get("hx-request") else "run.html"
    return pages_of(request).render(request, template, _transcript(request, row))


async def events(request: Request) -> Response:
    row = _row(request, request.path_params["run_id"])
    runs = request.app.state.runs
    if row is None or runs is None:
        return Response("no such run here", status_code=404, media_type="text/plain")

    async def stream() -> AsyncIterator[ServerSentEvent]:
        # Only that something happened: the page fetches the transcript as the reader may see it.
        async for cursor, event in runs.events(row.id):
            yield ServerSentEvent(data=event.kind, event="run", id=cursor.to_id())

    return event_stream(stream())


async def cancel(request: Request) -> Response:
    identity = require_identity(request)
    require_csrf(identity, await read_form(request))
    row = _row(request, request.path_params["run_id"])
    if row is None:
        return pages_of(request).render(
            request, "run.html", {"run": None, "messages": [], "usage": "", "error": ""}, status=404
        )
    if not row.is_final:
        runs = request.app.state.runs
        if runs is not None:
            runs.cancel(row.id)
        else:
            pincer_of(request).runs.request_cancel(row.id)
    return RedirectResponse(f"{UI_PREFIX}/runs/{row.id}", status_code=303)


def routes() -> list[Route]:
    return [
        Route("/runs", page, methods=["GET"]),
        Route("/runs/{run_id:str}", detail, methods=["GET"]),
        Route("/runs/{run_id:str}/events", events, methods=["GET"]),
        Route("/runs/{run_id:str}/cancel", cancel, methods=["POST"]),
    ]
