"""``pincer approvals``: answer the calls waiting for a person."""

from __future__ import annotations

import datetime as dt
from typing import Any

import typer

from pincer.cli.common import JsonOption, emit_json, open_pincer, run, stderr
from pincer.core.display import honest_json, honest_text
from pincer.store.approvals import Answer, AnswerScope, ApprovalStatus
from pincer.store.paging import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, Cursor, encode_cursor, parse_cursor, parse_limit

# Arguments shown per row of `approvals list`; `approvals show ID` shows them whole.
LIST_ARGS_MAX_CHARS = 120

app = typer.Typer(help="List and answer approval requests.", no_args_is_help=True)


@app.command("list")
def list_approvals(
    all_: bool = typer.Option(False, "--all", help="Include answered and expired requests."),
    limit: str | None = typer.Option(
        None, "--limit", help=f"At most this many requests (1 to {MAX_PAGE_LIMIT}; default {DEFAULT_PAGE_LIMIT})."
    ),
    cursor: str | None = typer.Option(None, "--cursor", help="The next page: the next_cursor the page before printed."),
    as_json: bool = JsonOption,
) -> None:
    """List pending approval requests, oldest first, a page at a time: tool, args (secrets
    redacted), effects, hosts. ``--json``: ``{"approvals": [...], "next_cursor": ...}``."""

    async def body() -> dict[str, Any]:
        # Parsed inside the body: a bad value is a usage error naming the option, never echoing it.
        wanted, after = parse_limit(limit, name="--limit"), parse_cursor(cursor, name="--cursor")
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            # One more than the page: whether another follows. Read along (created_at, id), in the store.
            requests = await pincer.approvals.page(
                status=None if all_ else ApprovalStatus.PENDING, limit=wanted + 1,
                after=(after.at, after.id) if after is not None else None,
            )  # fmt: skip
            last = requests[wanted - 1] if len(requests) > wanted else None
            # A value stored as a secret after a request was made is masked here, at display.
            shown: list[dict[str, Any]] = pincer.shown([r.to_dict() for r in requests[:wanted]])
            follow = encode_cursor(Cursor(at=last.created_at, id=last.id)) if last is not None else None
            return {"approvals": shown, "next_cursor": follow}

    page = run(body, as_json=as_json)
    if as_json:
        emit_json(page)
        return
    from rich.table import Table

    requests = page["approvals"]
    table = Table(title=f"{len(requests)} approval requests", title_justify="left")
    for column in ("id", "status", "session", "tool", "args", "effects", "hosts", "expires"):
        table.add_column(column)
    for r in requests:
        args = honest_json(r["args"], LIST_ARGS_MAX_CHARS, see_all=f"`pincer approvals show {r['id']}`")
        table.add_row(
            r["id"], r["status"], r["session"], r["tool"], args, ", ".join(r["effects"]),
            ", ".join(r["hosts"]) or "-", dt.datetime.fromtimestamp(r["expires_at"]).isoformat(timespec="seconds"),
        )  # fmt: skip
    stderr.print(table, markup=False, highlight=False)
    if page["next_cursor"] is not None:
        more = (" --all" if all_ else "") + (f" --limit {limit.strip()}" if limit is not None else "")
        stderr.print(f"more follow: pincer approvals list{more} --cursor {page['next_cursor']}", markup=False, highlight=False)


@app.command("show")
def show_approval(approval_id: str, as_json: bool = JsonOption) -> None:
    """Show one approval request whole: every argument, the reason, what else the person is shown."""

    async def body() -> dict[str, Any]:
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            await pincer.approvals.expire_overdue()
            one: dict[str, Any] = pincer.shown((await pincer.approvals.get(approval_id)).to_dict())
            return one

    approval = run(body, as_json=as_json)
    if as_json:
        emit_json(approval)
        return
    lines = [
        f"approval {approval['id']}: {approval['status']}",
        f"session:  {approval['session']} ({approval['session_kind']})",
        f"run:      {approval['run_id'] or '-'}",
        f"tool:     {approval['tool']}",
        f"effects:  {', '.join(approval['effects']) or 'none'}",
        f"hosts:    {', '.join(approval['hosts']) or '-'}",
        f"why:      {honest_text(approval['reason'])}",
        *([f"tainted:  {honest_text(approval['tainted_by'])}"] if approval["tainted_by"] else []),
        "arguments:",
        honest_json(approval["args"], indent=2),
    ]
    if approval["detail"]:
        lines += ["detail:", honest_json(approval["detail"], indent=2)]
    if approval["answered_by"]:
        lines.append(f"answered by {approval['answered_by']}" + (f" (scope {approval['scope']})" if approval["scope"] else ""))
    # markup off: arguments are the caller's text, never rich markup to interpret.
    stderr.print("\n".join(lines), markup=False, highlight=False)


def _answer(approval_id: str, answer: Answer, as_json: bool, scope: AnswerScope | None = None) -> None:
    async def body() -> dict[str, Any]:
        from pincer.cli.acts import cli_actor

        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            answered: dict[str, Any] = pincer.shown(
                (await pincer.dispatcher.answer(approval_id, answer, by=str(cli_actor()), scope=scope)).to_dict()
            )
            return answered

    answered = run(body, as_json=as_json)
    if as_json:
        emit_json(answered)
    else:
        stderr.print(f"approval {approval_id}: {answered['status']} ({answered['tool']})")


@app.command("approve")
def approve(
    approval_id: str,
    always: bool = typer.Option(False, "--always", help="Also record a grant so this tool stops asking."),
    scope: AnswerScope = typer.Option(
        AnswerScope.KIND,
        "--scope",
        help="With --always: the grant covers sessions of the kind that asked (kind), only that session, or all.",
    ),
    as_json: bool = JsonOption,
) -> None:
    """Allow a pending call once, or always. Exits 1 when the call that asked is gone."""
    _answer(approval_id, Answer.ALLOW_ALWAYS if always else Answer.ALLOW_ONCE, as_json, scope if always else None)


@app.command("deny")
def deny(approval_id: str, as_json: bool = JsonOption) -> None:
    """Deny a pending call."""
    _answer(approval_id, Answer.DENY, as_json)
