"""``/ui/tasks``: the calls that outlive their connection (MCP Tasks, REST ``Prefer:
respond-async``; docs/tasks.md), newest first, by the rule runs follow (a non-main session sees
only its own). A task waiting for a person shows its approval with the approvals page's own
card and forms: an answer goes to ``/ui/approvals/{id}`` (its CSRF and role checks, then
``Approver.answer`` through the dispatcher) and comes back here; the task moves on as it does
after an answer from any other path."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pincer.core.display import honest_text
from pincer.core.errors import PincerError
from pincer.gateway.access import ANSWER_FORBIDDEN_HINT, approvals_seen, can_answer_approvals, tasks_session_filter
from pincer.gateway.ui.approvals import approval_view
from pincer.gateway.ui.auth import require_identity
from pincer.gateway.ui.render import Pages, pages_of
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.store.approvals import AnswerScope, ApprovalRequest, ApprovalStatus
from pincer.store.tasks import Task, TaskStatus

__all__ = ["MAX_TASKS_SHOWN", "routes"]

MAX_TASKS_SHOWN = 200  # the newest tasks a page lists; older ones stay in `pincer tasks list`


def _view(pages: Pages, task: Task, pending: dict[str, ApprovalRequest], now: float) -> dict[str, Any]:
    waiting_on = pending.get(task.approval_id or "") if task.status is TaskStatus.INPUT_REQUIRED else None
    return {
        "id": task.id,
        "status": task.status.value,
        "tool": task.tool,
        "session": task.session,
        "caller": task.caller,
        "message": honest_text(pages.redact(task.status_message)) if task.status_message else "",
        "created_at": task.created_at,
        "updated_at": task.updated_at,
        "approval": approval_view(pages, waiting_on, now) if waiting_on is not None else None,
    }


async def _waiting_on(services: DashboardServices, tasks: list[Task]) -> list[ApprovalRequest]:
    """The pending approvals of the shown tasks that wait for one: read one by one (at most
    ``MAX_TASKS_SHOWN``), never the whole approvals table."""
    found = []
    for task in tasks:
        if task.status is TaskStatus.INPUT_REQUIRED and task.approval_id:
            try:
                approval = await services.approvals.get(task.approval_id)
            except PincerError:
                continue  # pruned or gone: the task shows without a card
            if approval.status is ApprovalStatus.PENDING:
                found.append(approval)
    return found


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    services, pages, now = services_of(request), pages_of(request), time.time()
    tasks = await services.tasks.list(session=tasks_session_filter(identity.session), limit=MAX_TASKS_SHOWN)
    pending = {a.id: a for a in approvals_seen(identity.session, await _waiting_on(services, tasks))}
    rows = [_view(pages, task, pending, now) for task in tasks]
    context = {
        "tasks": rows,
        "waiting": [row for row in rows if row["approval"] is not None],
        "shown_all": len(tasks) < MAX_TASKS_SHOWN,
        "can_answer": can_answer_approvals(identity.session),
        "answer_hint": ANSWER_FORBIDDEN_HINT,
        "scopes": [s.value for s in AnswerScope],
    }
    return pages.render(request, "tasks.html", context)


def routes() -> list[Route]:
    return [Route("/tasks", page, methods=["GET"])]
