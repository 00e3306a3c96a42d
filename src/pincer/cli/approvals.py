"""``pincer approvals``: answer the calls waiting for a person."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import typer
from rich.table import Table

from pincer.cli.common import JsonOption, emit_json, open_pincer, run, stderr
from pincer.store.approvals import Answer

app = typer.Typer(help="List and answer approval requests.", no_args_is_help=True)


@app.command("list")
def list_approvals(
    all_: bool = typer.Option(False, "--all", help="Include answered and expired requests."),
    as_json: bool = JsonOption,
) -> None:
    """List pending approval requests: tool, args (secrets redacted), effects, hosts."""

    async def body() -> list[dict[str, Any]]:
        async with open_pincer(builtins=False) as pincer:
            requests = pincer.approvals.list(status=None) if all_ else pincer.approvals.list_pending()
            return [r.to_dict() for r in requests]

    requests = run(body, as_json=as_json)
    if as_json:
        emit_json(requests)
        return
    table = Table(title=f"{len(requests)} approval requests", title_justify="left")
    for column in ("id", "status", "session", "tool", "args", "effects", "hosts", "expires"):
        table.add_column(column)
    for r in requests:
        table.add_row(
            r["id"], r["status"], r["session"], r["tool"], json.dumps(r["args"])[:80], ", ".join(r["effects"]),
            ", ".join(r["hosts"]) or "-", dt.datetime.fromtimestamp(r["expires_at"]).isoformat(timespec="seconds"),
        )  # fmt: skip
    stderr.print(table)


def _answer(approval_id: str, answer: Answer, as_json: bool) -> None:
    async def body() -> dict[str, Any]:
        async with open_pincer(builtins=False) as pincer:
            return pincer.dispatcher.answer(approval_id, answer, by="cli").to_dict()

    answered = run(body, as_json=as_json)
    if as_json:
        emit_json(answered)
    else:
        stderr.print(f"approval {approval_id}: {answered['status']} ({answered['tool']})")


@app.command("approve")
def approve(
    approval_id: str,
    always: bool = typer.Option(False, "--always", help="Also record a grant so this tool stops asking."),
    as_json: bool = JsonOption,
) -> None:
    """Allow a pending call once, or always."""
    _answer(approval_id, Answer.ALLOW_ALWAYS if always else Answer.ALLOW_ONCE, as_json)


@app.command("deny")
def deny(approval_id: str, as_json: bool = JsonOption) -> None:
    """Deny a pending call."""
    _answer(approval_id, Answer.DENY, as_json)
