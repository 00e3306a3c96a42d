"""``pincer audit``: read and verify the hash-chained audit log."""

from __future__ import annotations

import datetime as dt
from typing import Any

import typer
from rich import box
from rich.table import Table

from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, open_pincer, run, stderr
from pincer.core.errors import AuditChainBroken

app = typer.Typer(help="Read and verify the audit log.", no_args_is_help=True)


@app.command("list")
def list_records(
    tool: str | None = typer.Option(None, "--tool", help="Only this tool."),
    session: str | None = typer.Option(None, "--session", help="Only this session."),
    limit: int = typer.Option(50, "--limit", min=1, max=100_000, help="Newest N records."),
    as_json: bool = JsonOption,
) -> None:
    """List audit records, oldest first."""

    async def body() -> list[dict[str, Any]]:
        async with open_pincer(builtins=False) as pincer:
            return [r.to_dict() for r in pincer.audit.records(tool=tool, session=session, limit=limit)]

    records = run(body, as_json=as_json)
    if as_json:
        emit_json(records)
        return
    stderr.print(render_records(records))


_COLUMNS = (("id", 4), ("time", 8), ("session", 7), ("tool", 10), ("decision", 8), ("outcome", 7), ("ms", 6))


def render_records(records: list[dict[str, Any]]) -> Table:
    table = Table(title=f"{len(records)} audit records", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column, width in _COLUMNS:
        table.add_column(column, no_wrap=True, min_width=width, overflow="ellipsis")
    table.add_column("reason / error", overflow="ellipsis", no_wrap=True)
    for r in records:
        detail = r["error"] or r["reason"]
        table.add_row(
            str(r["id"]), dt.datetime.fromtimestamp(r["ts"]).strftime("%H:%M:%S"), r["session"], r["tool"],
            r["decision"], r["outcome"] + (" (cached)" if r["cached"] else ""), f"{r['duration_ms']:.1f}",
            detail,
        )  # fmt: skip
    return table


@app.command("verify")
def verify(as_json: bool = JsonOption) -> None:
    """Check the hash chain. Exit 0 when intact, 1 naming the first bad record."""

    async def body() -> dict[str, Any]:
        async with open_pincer(builtins=False) as pincer:
            try:
                count = pincer.audit.verify()
            except AuditChainBroken as exc:
                return {"ok": False, "error": exc.to_dict(), "record_id": exc.record_id}
            return {"ok": True, "records": count}

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
    elif report["ok"]:
        stderr.print(f"audit chain intact: {report['records']} records")
    else:
        stderr.print(f"[bold red]audit chain broken at record {report['record_id']}:[/] {report['error']['message']}")
    if not report["ok"]:
        raise typer.Exit(EXIT_FAILURE)
