"""``/tasks``: calls that outlive their request (docs/tasks.md). ``POST /tools/{name}/call`` with
``Prefer: respond-async`` answers ``202`` and a task when the call waits for a person or runs past
``[tasks] after_s``; the task is the same row, in the same states, as an MCP task. Only the
session that made a task sees or cancels it; another session's task is answered as a missing one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request

from pincer.gateway.rest.common import RestServices, ServicesDep, SessionDep, json_body_route, refuse
from pincer.gateway.tasks import MAX_TASK_ID_CHARS, TaskReceiver, cancel_task
from pincer.gateway.tokens import GatewaySession
from pincer.store.tasks import Task

__all__ = ["router", "task_resource", "receiver_of"]

router = APIRouter(route_class=json_body_route())
_LIST_LIMIT = 100


def receiver_of(request: Request) -> TaskReceiver | None:
    receiver: TaskReceiver | None = getattr(request.app.state, "tasks", None)
    return receiver


def task_resource(services: RestServices, task: Task) -> dict[str, Any]:
    shown: dict[str, Any] = services.shown(task.to_dict())
    return shown


async def _own(services: RestServices, session: GatewaySession, task_id: str) -> Task:
    task = await services.tasks.get(task_id)
    if task is None or task.session != session.name:
        raise refuse(404, "not_found", f"no task with id {task_id!r}", "`pincer tasks list` shows the tasks")
    return task


@router.get("/tasks", summary="The tasks of this session, newest first")
async def list_tasks(services: ServicesDep, session: SessionDep) -> dict[str, Any]:
    tasks = await services.tasks.list(session=session.name, limit=_LIST_LIMIT)
    return {"tasks": [task_resource(services, t) for t in tasks]}


@router.get("/tasks/{task_id}", summary="One task: its state, and its result once it has one")
async def get_task(
    services: ServicesDep, session: SessionDep, task_id: Annotated[str, Path(max_length=MAX_TASK_ID_CHARS)]
) -> dict[str, Any]:
    return task_resource(services, await _own(services, session, task_id))


@router.delete("/tasks/{task_id}", summary="Cancel a task (its approval expires; a running call is cancelled)")
async def delete_task(
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    task_id: Annotated[str, Path(max_length=MAX_TASK_ID_CHARS)],
) -> dict[str, Any]:
    task = await _own(services, session, task_id)
    receiver = receiver_of(request)
    if receiver is not None:
        await receiver.cancel_task(task)
    else:
        await cancel_task(task, tasks=services.tasks, approvals=services.approvals)
    return task_resource(services, await _own(services, session, task_id))
