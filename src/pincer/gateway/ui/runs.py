"""``/ui/runs``: runs (a non-main session sees only its own, by the rule REST applies), filtered
by status, skill and session, a page at a time; one run as a conversation (``conversation.py``),
live over server-sent events while it runs, with the approvals it waits on answerable in place;
and Cancel, offered only while the run can be cancelled."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pincer.core.display import honest_json
from pincer.core.errors import PincerError
from pincer.gateway.access import (
    ANSWER_FORBIDDEN_HINT,
    approvals_seen,
    audit_session_filter,
    can_answer_approvals,
    rerun_request,
    runs_session_filter,
    sees_approval,
    sees_run,
)  # fmt: skip
from pincer.gateway.rest.events import event_stream
from pincer.gateway.ui.approvals import approval_view
from pincer.gateway.ui.auth import UI_PREFIX, UiIdentity, read_form, require_csrf, require_identity
from pincer.gateway.ui.conversation import conversation
from pincer.gateway.ui.paging import filter_value, keyset_paged, keyset_request
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import services_of
from pincer.store.approvals import AnswerScope, ApprovalStatus
from pincer.store.runs import RUN_STATUSES, RunRow

__all__ = ["RUNS_PER_PAGE", "routes"]

RUNS_PER_PAGE = 50
RUNS_KEY = (float, str)  # the list's sort key, which its ?before= cursor holds: (created_at, id)


def _key(row: RunRow) -> tuple[float, str]:
    return (row.created_at, row.id)


async def _row(request: Request, run_id: str) -> RunRow | None:
    identity = await require_identity(request)
    try:
        row = await services_of(request).runs.get(run_id)
    except PincerError:
        return None
    return row if sees_run(identity.session, row) else None


def _filters(request: Request, identity: UiIdentity) -> dict[str, str]:
    status = request.query_params.get("status", "")
    return {
        "status": status if status in RUN_STATUSES else "",
        "skill": filter_value(request, "skill"),
        "session": filter_value(request, "session") if identity.is_main else "",
    }


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    filters = _filters(request, identity)
    path = f"{UI_PREFIX}/runs"
    # Paged by key: a page reads its own runs (and one more) from just past the cursor along an
    # index, however deep; the status and skill filters are in that read, so it is one page too.
    wanted = keyset_request(request, per=RUNS_PER_PAGE, kinds=RUNS_KEY, path=path)
    before = (float(wanted.before[0]), str(wanted.before[1])) if wanted.before else None
    rows = await services_of(request).runs.list(
        session=filters["session"] or runs_session_filter(identity.session), status=filters["status"] or None,
        skill=filters["skill"] or None, limit=wanted.wanted, before=before,
    )  # fmt: skip
    shown = keyset_paged(rows, wanted, path, filters, key=_key, default_per=RUNS_PER_PAGE, noun="runs")
    context = {"runs": shown, "filters": filters, "statuses": RUN_STATUSES}
    return pages_of(request).render(request, "runs.html", context)


async def _waiting(request: Request, identity: UiIdentity, row: RunRow) -> list[dict[str, Any]]:
    if row.is_final:
        return []
    services, pages, now = services_of(request), pages_of(request), time.time()
    return [approval_view(pages, a, now) for a in approvals_seen(identity.session, await services.approvals.list_pending())
            if a.run_id == row.id and a.status is ApprovalStatus.PENDING and a.expires_at > now]  # fmt: skip


async def _transcript(request: Request, identity: UiIdentity, row: RunRow) -> dict[str, Any]:
    services, pages = services_of(request), pages_of(request)
    records = await services.audit.records(run_id=row.id, session=audit_session_filter(identity.session, None))
    waiting = await _waiting(request, identity, row)
    turns, unplaced = conversation(await services.runs.messages(row.id), records, waiting, pages.redact)
    usage = dict(row.usage)
    return {
        "run": row, "turns": turns, "waiting": waiting, "unplaced": unplaced, "usage": usage,
        "tokens_in": int(usage.get("input_tokens", 0) or 0), "tokens_out": int(usage.get("output_tokens", 0) or 0),
        "error": pages.redact(dict(row.error)) if row.error else None,
        "raw_usage": honest_json(pages.redact(usage), indent=2),
        "can_answer": can_answer_approvals(identity.session), "answer_hint": ANSWER_FORBIDDEN_HINT,
        "scopes": [s.value for s in AnswerScope], "notice": await _answered_notice(request, identity),
        "can_rerun": request.app.state.runs is not None,
    }  # fmt: skip


async def _answered_notice(request: Request, identity: UiIdentity) -> str | None:
    done = request.query_params.get("answered")
    if not done:
        return None
    try:
        answered = await services_of(request).approvals.get(done)
    except PincerError:
        return None
    if not sees_approval(identity.session, answered):
        return None
    return f"approval {answered.id} ({answered.tool}): {answered.status.value.replace('_', ' ')}"


def _not_found(request: Request) -> Response:
    return pages_of(request).render(request, "run.html", {"run": None}, status=404)


async def detail(request: Request) -> Response:
    identity = await require_identity(request)
    row = await _row(request, request.path_params["run_id"])
    if row is None:
        return _not_found(request)
    template = "run_transcript.html" if request.headers.get("hx-request") else "run.html"
    return pages_of(request).render(request, template, await _transcript(request, identity, row))


async def events(request: Request) -> Response:
    row = await _row(request, request.path_params["run_id"])
    runs = request.app.state.runs
    if row is None or runs is None:
        return Response("no such run here", status_code=404, media_type="text/plain")

    async def stream() -> AsyncIterator[ServerSentEvent]:
        # Only that something happened: the page fetches the transcript as the reader may see it.
        async for cursor, event in runs.events(row.id):
            yield ServerSentEvent(data=event.kind, event="run", id=cursor.to_id())

    return event_stream(stream())


async def cancel(request: Request) -> Response:
    identity = await require_identity(request)
    require_csrf(identity, await read_form(request))
    row = await _row(request, request.path_params["run_id"])
    if row is None:
        return _not_found(request)
    if not row.is_final:
        runs = request.app.state.runs
        if runs is not None:
            await runs.cancel(row.id)
        else:
            await services_of(request).runs.request_cancel(row.id)
    return RedirectResponse(f"{UI_PREFIX}/runs/{row.id}", status_code=303)


async def rerun(request: Request) -> Response:
    """Run again: a new run of the same skill, parameters and message, for whoever asks (its
    person and session are theirs, not the first run's)."""
    identity = await require_identity(request)
    require_csrf(identity, await read_form(request))
    row = await _row(request, request.path_params["run_id"])
    runs = request.app.state.runs
    if row is None or runs is None:
        return _not_found(request)
    run_id = await runs.start(rerun_request(services_of(request).config(), identity.session, row, trigger="dashboard"))
    return RedirectResponse(f"{UI_PREFIX}/runs/{run_id}", status_code=303)


def routes() -> list[Route]:
    return [
        Route("/runs", page, methods=["GET"]),
        Route("/runs/{run_id:str}", detail, methods=["GET"]),
        Route("/runs/{run_id:str}/events", events, methods=["GET"]),
        Route("/runs/{run_id:str}/cancel", cancel, methods=["POST"]),
        Route("/runs/{run_id:str}/rerun", rerun, methods=["POST"]),
    ]
