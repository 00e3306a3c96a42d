"""``pincer tasks``: the calls handed back to their clients as tasks (MCP Tasks and REST
``Prefer: respond-async``; docs/tasks.md). A person sees every session's tasks here."""

from __future__ import annotations

import datetime as dt
from typing import Any

import typer

from pincer.cli.common import JsonOption, emit_json, open_pincer, run, stderr
from pincer.core.display import honest_json, honest_text
from pincer.core.errors import UsageError

app = typer.Typer(help="List, show and cancel tasks (calls that outlive their connection).", no_args_is_help=True)


async def _task(pincer: Any, task_id: str) -> Any:
    task = await pincer.tasks.get(task_id)
    if task is None:
        raise UsageError(f"no task with id {task_id!r}", hint="`pincer tasks list` shows the tasks")
    return task


@app.command("list")
def list_tasks(
    session: str | None = typer.Option(None, "--session", help="Only this session's tasks."),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="Show at most this many, newest first."),
    as_json: bool = JsonOption,
) -> None:
    """List tasks, newest first: id, status, session, tool, the approval it waits for."""

    async def body() -> list[dict[str, Any]]:
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            tasks = await pincer.tasks.list(session=session, limit=limit)
            shown: list[dict[str, Any]] = pincer.shown([t.to_dict() for t in tasks])
            return shown

    tasks = run(body, as_json=as_json)
    if as_json:
        emit_json(tasks)
        return
    from rich.table import Table

    table = Table(title=f"{len(tasks)} tasks", title_justify="left")
    for column in ("id", "status", "session", "tool", "approval", "created"):
        table.add_column(column)
    for t in tasks:
        table.add_row(
            t["id"], t["status"], t["session"], t["tool"], t["approval_id"] or "-",
            dt.datetime.fromtimestamp(t["created_at"]).isoformat(timespec="seconds"),
        )  # fmt: skip
    stderr.print(table, markup=False, highlight=False)


@app.command("show")
def show_task(task_id: str, as_json: bool = JsonOption) -> None:
    """Show one task: its state, what it waits for, its result or error."""

    async def body() -> dict[str, Any]:
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            one: dict[str, Any] = pincer.shown((await _task(pincer, task_id)).to_dict())
            return one

    task = run(body, as_json=as_json)
    if as_json:
        emit_json(task)
        return
    lines = [
        f"task {task['id']}: {task['status']}",
        f"session:  {task['session']} ({task['caller']})",
        f"tool:     {task['tool']}",
        f"approval: {task['approval_id'] or '-'}",
        f"message:  {honest_text(task['status_message'] or '-')}",
    ]
    if task["result"] is not None:
        lines += ["result:", honest_json(task["result"], indent=2)]
    if task["error"] is not None:
        lines += ["error:", honest_json(task["error"], indent=2)]
    stderr.print("\n".join(lines), markup=False, highlight=False)


@app.command("cancel")
def cancel_task_command(task_id: str, as_json: bool = JsonOption) -> None:
    """Cancel a task: one waiting for an approval ends now (the approval expires); a running call
    is cancelled by the gateway running it as soon as it hears of the mark."""

    async def body() -> dict[str, Any]:
        from pincer.gateway.tasks import cancel_task

        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            await cancel_task(await _task(pincer, task_id), tasks=pincer.tasks, approvals=pincer.approvals)
            one: dict[str, Any] = pincer.shown((await _task(pincer, task_id)).to_dict())
            return one

    task = run(body, as_json=as_json)
    if as_json:
        emit_json(task)
        return
    stderr.print(f"task {task['id']}: {task['status']}", markup=False, highlight=False)
