"""``pincer runs``: the agent runs recorded in the store."""

from __future__ import annotations

import datetime as dt
from typing import Any

import typer

from pincer.cli.common import JsonOption, emit_json, open_pincer, run, stderr

app = typer.Typer(help="List, show and cancel agent runs.", no_args_is_help=True)


def _tokens(row: dict[str, Any]) -> str:
    usage = row["usage"]
    return f"{usage.get('input_tokens', 0):,} / {usage.get('output_tokens', 0):,}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


@app.command("list")
def list_runs(
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="At most this many, newest first."),
    as_json: bool = JsonOption,
) -> None:
    """List runs, newest first: id, status, skill, trigger, session, model, tokens, cost."""

    async def body() -> list[dict[str, Any]]:
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            rows: list[dict[str, Any]] = pincer.shown([r.to_dict() for r in await pincer.runs.list(limit=limit)])
            return rows

    rows = run(body, as_json=as_json)
    if as_json:
        emit_json(rows)
        return
    from rich.table import Table

    table = Table(title=f"{len(rows)} runs", title_justify="left")
    for column in ("id", "status", "skill", "trigger", "session", "model", "tokens in / out", "cost", "started"):
        table.add_column(column)
    for r in rows:
        status = r["status"] + (f" ({r['stop']})" if r["stop"] and r["status"] != "done" else "")
        started = dt.datetime.fromtimestamp(r["created_at"]).isoformat(timespec="seconds")
        table.add_row(r["id"], status, r["skill"] or "-", r["trigger"], r["session"], r["model"], _tokens(r), _cost(r["cost_usd"]), started)
    stderr.print(table, markup=False, highlight=False)


@app.command("show")
def show_run(run_id: str, as_json: bool = JsonOption) -> None:
    """Show one run: how it ended, its usage and cost, every message and tool call with its audit record."""

    async def body() -> dict[str, Any]:
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            row = (await pincer.runs.get(run_id)).to_dict()
            row["messages"] = [m.to_dict() for m in await pincer.runs.messages(run_id)]
            # A value stored as a secret after the run recorded it is masked here, at display.
            shown: dict[str, Any] = pincer.shown(row)
            return shown

    data = run(body, as_json=as_json)
    if as_json:
        emit_json(data)
        return
    from pincer.core.display import honest_block, honest_json

    lines = [
        f"run {data['id']}: {data['status']}" + (f" ({data['stop']})" if data["stop"] else ""),
        f"skill:    {data['skill'] or '-'}  params: {honest_json(data['params'], 200)}",
        f"trigger:  {data['trigger']}  session: {data['session']}  model: {data['provider']}/{data['model']}",
        f"tokens:   {_tokens(data)} (in / out)  turns: {data['usage'].get('turns', 0)}  "
        f"tool calls: {data['usage'].get('tool_calls', 0)}  cost: {_cost(data['cost_usd'])}  took {data['duration_s']} s",
    ]
    if data["error"]:
        lines.append(f"error:    {data['error'].get('code')}: {data['error'].get('message')}")
    lines.append("")
    for m in data["messages"]:
        if m["role"] == "system":
            lines.append(f"[{m['seq']}] system: {len(m['content']):,} characters (--json shows them)")
            continue
        audit = f" [audit {m['audit_id']}]" if m.get("audit_id") else ""
        text = honest_block(m.get("content") or "")
        # A message of several lines starts on the next line, each line indented under its header.
        shown = text if "\n" not in text else "\n" + "\n".join("      " + line if line else "" for line in text.split("\n"))
        lines.append(f"[{m['seq']}] {m['role']}{audit}: {shown}")
        for call in m.get("tool_calls", []):
            lines.append(f"      call {call['name']} {honest_json(call['arguments'] if call['arguments'] is not None else call.get('raw_arguments'), 300)}")
    stderr.print("\n".join(lines), markup=False, highlight=False)


@app.command("cancel")
def cancel_run(run_id: str, as_json: bool = JsonOption) -> None:
    """Cancel a running run (also one in another process: it stops within a second)."""

    async def body() -> dict[str, Any]:
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            cancelled: dict[str, Any] = pincer.shown((await pincer.runs.request_cancel(run_id)).to_dict())
            return cancelled

    data = run(body, as_json=as_json)
    if as_json:
        emit_json(data)
    elif data["status"] != "running":
        stderr.print(f"run {run_id} had already ended: {data['status']}", markup=False)
    else:
        stderr.print(f"run {run_id}: cancel requested; it stops within a second", markup=False)
