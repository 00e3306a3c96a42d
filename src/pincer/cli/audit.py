"""``pincer audit``: read and verify the keyed audit chain; write checkpoints of its head."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.table import Table

from pincer.cli.common import EXIT_FAILURE, JsonOption, audit_key, emit_json, open_pincer, pincer_home, run, stderr
from pincer.core.errors import AuditChainBroken, UsageError
from pincer.store.chain import ChainKey
from pincer.store.checkpoint import MAX_CHECKPOINT_BYTES, AuditCheckpoint
from pincer.store.db import DB_FILENAME
from pincer.store.jsonfile import write_bytes_atomic

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
            records = await pincer.audit.records(tool=tool, session=session, limit=limit)
            # A value stored as a secret after its call was recorded is masked here, at display.
            shown: list[dict[str, Any]] = pincer.shown([r.to_dict() for r in records])
            return shown

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
def verify(
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        help="Also prove that no record up to this checkpoint (from `pincer audit checkpoint`) changed or is gone.",
        dir_okay=False,
    ),
    # Full by default: this is what a person runs when they suspect the log, off the gateway's
    # loop, and a walk from the last mark cannot see an edit made before it. The dashboard and
    # REST walk from the mark (a gateway must not stall) and offer the full walk beside it.
    since_mark: bool = typer.Option(
        False,
        "--since-mark",
        help="Walk only the records after the last intact verify (its signed mark): faster, but an edit "
        "made before that mark is not seen.",
    ),
    archive: Path | None = typer.Option(
        None,
        "--archive",
        help="Walk the records `pincer audit archive` moved into this directory first, then "
        "the database's (every record).",
        file_okay=False,
    ),
    as_json: bool = JsonOption,
) -> None:
    """Check the chain. Exit 0 when intact (and, with --checkpoint, holding it), 1 naming the first bad record."""

    async def body() -> dict[str, Any]:
        expected = _read_checkpoint(checkpoint) if checkpoint is not None else None
        home = pincer_home()
        if expected is not None and not (home / DB_FILENAME).exists():
            # Never create an empty log to verify: a missing one is what the checkpoint is for.
            expected.check_signature(ChainKey(audit_key(home)))
            if expected.records:
                return _broken(
                    AuditChainBroken(
                        f"{home / DB_FILENAME} is missing, but the checkpoint of {expected.created_at} "
                        f"counted {expected.records} records",
                        record_id=1,
                        hint="restore pincer.db from a backup (the log was deleted), or set PINCER_HOME to its home",
                    )
                )
            return {"ok": True, "records": 0, "checkpoint": expected.to_dict()}
        async with open_pincer(builtins=False) as pincer:
            try:
                audit = pincer.audit
                if expected is None:
                    head = await audit.verify_chain(incremental=since_mark and archive is None, archive=archive)
                else:
                    head = await audit.verify_checkpoint(expected, archive=archive)
            except AuditChainBroken as exc:
                return _broken(exc)
        walked_all = not since_mark or expected is not None or archive is not None
        report: dict[str, Any] = {"ok": True, "full": walked_all, **head.to_dict()}
        if expected is not None:
            report["checkpoint"] = expected.to_dict()
        return report

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
    elif report["ok"]:
        walked = "" if report["full"] else " (walked from the last intact verify; without --since-mark every record is walked)"
        stderr.print(f"audit chain intact: {report['records']} records{walked}")
        if report.get("plain_records"):
            stderr.print(
                f"  records 1 to {report['plain_records']} were written before the audit key existed "
                "(plain SHA-256 chain, pinned by the keyed marker since)"
            )
        if checkpoint is not None:
            stderr.print(
                f"  and it holds the checkpoint of {report['checkpoint']['created_at']} "
                f"({report['checkpoint']['records']} records)"
            )
        else:
            stderr.print(
                "  [dim]a deleted tail or database shows only against a checkpoint: "
                "pincer audit verify --checkpoint FILE[/]"
            )
    else:
        from rich.markup import escape

        stderr.print(
            f"[bold red]audit chain broken at record {report['record_id']}:[/] {escape(report['error']['message'])}"
        )
        if report["error"].get("hint"):
            stderr.print(f"[dim]hint: {escape(report['error']['hint'])}[/]")
    if not report["ok"]:
        raise typer.Exit(EXIT_FAILURE)


@app.command("archive")
def archive(
    directory: Path = typer.Argument(
        ..., help="Where the segment files go (made if missing); keep copies elsewhere.", file_okay=False
    ),
    before: str | None = typer.Option(
        None,
        "--before",
        help="Only records older than this: a date or time (2026-11-01, 2026-11-01T12:00:00Z) or an age (90d, 12h).",
    ),
    as_json: bool = JsonOption,
) -> None:
    """Move the oldest records out of the database into signed segment files (verified first;
    removed only once the segments are written and read back). `pincer audit verify --archive DIR`
    verifies across them."""

    async def body() -> dict[str, Any]:
        cutoff = parse_before(before) if before is not None else None
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            try:
                done = await pincer.audit.archive(directory, before=cutoff)
            except AuditChainBroken as exc:
                return _broken(exc)
            except OSError as exc:
                raise UsageError(f"cannot write the archive to {directory}: {exc.strerror or exc}",
                                 hint="choose a writable directory; nothing left the database") from None  # fmt: skip
        return {"ok": True, "directory": str(directory), **done.to_dict()}

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
    elif report["ok"] and report["records"]:
        stderr.print(f"archived records {report['first_id']} to {report['last_id']} into {len(report['segments'])} "
                     f"segment(s) in {directory}; they left the database")  # fmt: skip
    elif report["ok"]:
        stderr.print("nothing to archive: no record older than --before that is still in the database")
    else:
        stderr.print(f"[bold red]not archived: the chain is broken at record {report['record_id']}:[/] "
                     f"{report['error']['message']}")  # fmt: skip
    if not report["ok"]:
        raise typer.Exit(EXIT_FAILURE)


_AGE = {"d": 86_400, "h": 3_600, "m": 60}


def parse_before(text: str, *, now: float | None = None) -> float:
    """``--before``: an ISO 8601 date or time (UTC unless it says) or an age such as ``90d``/``12h``/``30m``."""
    value = text.strip()
    if value[:-1].isdigit() and value[-1:] in _AGE:
        return (now if now is not None else dt.datetime.now(dt.UTC).timestamp()) - int(value[:-1]) * _AGE[value[-1]]
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--before {text!r} is neither a date/time nor an age",
            hint="pass a date such as 2026-11-01 (or 2026-11-01T12:00:00Z) or an age such as 90d or 12h",
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()


@app.command("checkpoint")
def checkpoint(
    output: Path | None = typer.Option(
        None, "-o", "--output", help="Write the checkpoint to this file (default: stdout).", dir_okay=False
    ),
    as_json: bool = JsonOption,
) -> None:
    """Write a signed head of the log (records, last id and chain value, time, key id) to ship elsewhere."""

    async def body() -> str:
        async with open_pincer(builtins=False) as pincer:
            text = (await pincer.audit.checkpoint()).to_json()
        if output is not None:
            try:
                write_bytes_atomic(output, text.encode(), mode=0o644)  # not a secret: a MAC and counts
            except OSError as exc:
                raise UsageError(
                    f"cannot write {output}: {exc.strerror or exc}", hint="choose a writable path"
                ) from None
        return text

    text = run(body, as_json=as_json)
    made = json.loads(text)
    if output is not None:
        stderr.print(
            f"checkpoint of {made['records']} records written to {output}; "
            "keep copies where the writers of pincer.db cannot reach"
        )
    if as_json:
        emit_json({"ok": True, "checkpoint": made, **({"file": str(output)} if output is not None else {})})
    elif output is None:
        sys.stdout.write(text)


def _read_checkpoint(path: Path) -> AuditCheckpoint:
    try:
        with path.open("rb") as handle:
            text = handle.read(MAX_CHECKPOINT_BYTES + 1)
    except OSError as exc:
        raise UsageError(
            f"cannot read the checkpoint {path}: {exc.strerror or exc}",
            hint="give the file `pincer audit checkpoint -o FILE` wrote",
        ) from None
    return AuditCheckpoint.from_text(text, source=f"the checkpoint {path}")


def _broken(exc: AuditChainBroken) -> dict[str, Any]:
    return {"ok": False, "error": exc.to_dict(), "record_id": exc.record_id}
