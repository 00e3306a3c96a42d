"""``pincer cron``: scheduled jobs (add, list, rm, run, pause, resume, import)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, run, stderr
from pincer.cli.triggers import job_row, open_for_triggers
from pincer.config import TriggersSettings
from pincer.core.errors import PincerError, UsageError

__all__ = ["app"]

_TRIGGERS = TriggersSettings()  # the defaults shown in --help
app = typer.Typer(help="Scheduled jobs: add, list, remove, run now, pause, resume, import OpenClaw's.", no_args_is_help=True)

# `pincer cron run` with a running `pincer serve`: how long to wait for it to pick the job up.
RUN_PICKUP_TIMEOUT_S = 15.0
_PICKUP_POLL_S = 0.1


def _managed_refusal(row: Any, verb: str) -> UsageError:
    if row.source == "config":
        return UsageError(
            f"job {row.name!r} comes from config.toml; {verb} it there",
            hint="edit the [[jobs]] table in config.toml (`pincer config path` shows where it is)",
        )
    skill = row.source.partition(":")[2]
    return UsageError(
        f"job {row.name!r} is skill {skill}'s schedule trigger; {verb} it in its SKILL.md",
        hint=f"`pincer skills show {skill}` shows where the skill is",
    )


@app.command("add")
def add(
    name: str = typer.Argument(..., help="The job's name."),
    cron: str = typer.Option(None, "--cron", help='A cron expression: 5 fields, 6 with seconds first, or @daily ("0 9 * * 1-5").'),
    at: str = typer.Option(None, "--at", help="Or one run at an ISO 8601 time (UTC unless it says otherwise)."),
    every: str = typer.Option(None, "--every", help="Or a run every interval (90s, 30m, 1h30m, 2d)."),
    tz: str = typer.Option(None, "--tz", help="IANA time zone of the cron fields (default: this machine's)."),
    skill: str = typer.Option(None, "--skill", help="The skill to run."),
    param: list[str] = typer.Option(None, "--param", help="A skill parameter KEY=VALUE (repeatable)."),
    message: str = typer.Option(None, "--message", help="The message the run starts with (alone: a plain agent turn)."),
    session: str = typer.Option(None, "--session", help="The session its runs use (default cron:NAME)."),
    max_concurrent: int = typer.Option(None, "--max-concurrent", min=1, max=64, help=f"Runs of this job at once (default {_TRIGGERS.max_concurrent})."),
    retries: int = typer.Option(None, "--retries", min=0, max=20, help=f"Retries of a failed run (default {_TRIGGERS.retries})."),
    jitter: float = typer.Option(None, "--jitter", min=0, max=86_400, help="Start each run up to this many seconds late."),
    as_json: bool = JsonOption,
) -> None:
    """Add a job: when (--cron/--at/--every), what (--skill with --param, or --message)."""
    from pincer.schedule import schedule_from
    from pincer.skills.params import parse_param_pairs
    from pincer.triggers.jobs import JobSpec, check_job_name

    async def body() -> dict[str, Any]:
        if skill is None and message is None:
            raise UsageError("a job runs a skill or a message", hint='add --skill NAME (with --param k=v) or --message "..."')
        if param and skill is None:
            raise UsageError("--param needs --skill", hint="name the skill whose parameters these are")
        schedule = schedule_from(cron=cron, at=at, every=every, tz=tz)
        params = parse_param_pairs(param or [])
        async with open_for_triggers() as pincer:
            engine = pincer.triggers
            if skill is not None:
                params = dict(engine.check_request(skill, params))
            spec = JobSpec(
                name=check_job_name(name), schedule=schedule, skill=skill, params=params, message=message,
                session=session, source="cli", max_concurrent=max_concurrent, retries=retries, jitter_s=jitter,
            )  # fmt: skip
            added: dict[str, Any] = pincer.shown(job_row(await engine.scheduler.add(spec, now=engine.clock.now())))
            return added

    row = run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "job": row})
    else:
        stderr.print(f"job {row['name']!r} added: {row['schedule_text']}, next run {row['next_run']}", markup=False)


@app.command("list")
def list_jobs(as_json: bool = JsonOption) -> None:
    """Every job: schedule, next run, last run, last status, where it comes from."""

    async def body() -> list[dict[str, Any]]:
        async with open_for_triggers() as pincer:
            engine = pincer.triggers
            await engine.scheduler.sync(engine.clock.now())
            # A value stored as a secret after the job (or its last error) was stored is masked here.
            rows: list[dict[str, Any]] = pincer.shown([job_row(row) for row in await engine.store.jobs()])
            return rows

    rows = run(body, as_json=as_json)
    if as_json:
        emit_json({"jobs": rows})
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(rows)} jobs", title_justify="left")
    for column in ("name", "state", "schedule", "runs", "next run", "last run", "last status", "source"):
        table.add_column(column, overflow="fold")
    for row in rows:
        runs = f"skill {row['skill']}" if row["skill"] else "message"
        status = row["last_status"] or "-"
        if row["last_error"]:
            status += f": {row['last_error']}"
        if row.get("broken"):
            runs = "-"  # the state column says what is broken and the fix; the status stays the last run's
        # a paused job keeps its next run in the store; it does not run then, so none is shown
        next_run = "(paused)" if row["state"] == "paused" else (row["next_run"] or "-")
        cells = (row["name"], row["state"], row["schedule_text"], runs, next_run, row["last_run"] or "-", status, row["source"])
        table.add_row(*(escape(str(cell)) for cell in cells))
    stderr.print(table)


@app.command("rm")
def remove(name: str = typer.Argument(..., help="The job's name."), as_json: bool = JsonOption) -> None:
    """Remove a job added with `cron add` or `cron import`."""
    from pincer.triggers.scheduler import is_managed

    async def body() -> None:
        async with open_for_triggers() as pincer:
            store = pincer.triggers.store
            row = await store.require_job(name)
            if is_managed(row.source):
                raise _managed_refusal(row, "remove")
            await store.remove_job(name)

    run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "removed": name})
    else:
        stderr.print(f"job {name!r} removed", markup=False)


def _set_paused(name: str, paused: bool, as_json: bool) -> None:
    from pincer.triggers.jobs import JobSpec
    from pincer.triggers.scheduler import first_run

    async def body() -> dict[str, Any]:
        async with open_for_triggers() as pincer:
            engine = pincer.triggers
            await engine.scheduler.sync(engine.clock.now())
            row = await engine.store.require_job(name)
            changes: dict[str, Any] = {"paused": paused}
            if not paused:
                # A resumed job goes on from now: what came due while it was paused is not made up.
                changes["next_run"] = first_run(JobSpec.from_dict(row.spec), engine.clock.now())
            await engine.store.update_job(name, **changes)
            changed: dict[str, Any] = pincer.shown(job_row(await engine.store.require_job(name)))
            return changed

    row = run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "job": row})
    else:
        stderr.print(f"job {name!r} {'paused' if paused else 'resumed, next run ' + str(row['next_run'])}", markup=False)


@app.command("pause")
def pause(name: str = typer.Argument(..., help="The job's name."), as_json: bool = JsonOption) -> None:
    """Stop a job from running on its schedule (it is kept; `cron run` still runs it)."""
    _set_paused(name, True, as_json)


@app.command("resume")
def resume(name: str = typer.Argument(..., help="The job's name."), as_json: bool = JsonOption) -> None:
    """Run a paused job on its schedule again, from now on."""
    _set_paused(name, False, as_json)


@app.command("run")
def run_now(name: str = typer.Argument(..., help="The job's name."), as_json: bool = JsonOption) -> None:
    """Run a job now: in the running `pincer serve` (queued there), else here."""
    import anyio

    from pincer.triggers.jobs import JobSpec

    async def body() -> dict[str, Any]:
        async with open_for_triggers() as pincer:
            engine = pincer.triggers
            await engine.scheduler.sync(engine.clock.now())
            row = await engine.store.require_job(name)
            holder = await engine.store.lease_holder()
            if holder is not None and await engine.store.owners.is_alive(holder[0]) and time.time() - holder[1] < 30:
                asked = time.time()
                await engine.store.update_job(name, run_requested=asked)
                with anyio.move_on_after(RUN_PICKUP_TIMEOUT_S):
                    while True:
                        now_row = await engine.store.require_job(name)
                        if now_row.run_requested is None and now_row.last_run_id and now_row.last_run_id != row.last_run_id:
                            picked: dict[str, Any] = pincer.shown(
                                {"ok": True, "where": "pincer serve", "job": job_row(now_row), "run_id": now_row.last_run_id}
                            )
                            return picked
                        await anyio.sleep(_PICKUP_POLL_S)
                queued: dict[str, Any] = {"ok": True, "where": "pincer serve", "job": job_row(await engine.store.require_job(name)), "run_id": None,
                                          "note": f"queued; pincer serve did not pick it up within {RUN_PICKUP_TIMEOUT_S:g} s"}  # fmt: skip
                shown: dict[str, Any] = pincer.shown(queued)
                return shown
            firing = await engine.scheduler.fire(
                JobSpec.from_dict(row.spec), now=engine.clock.now(), fired_by="pincer cron run", attempt=0, here=True
            )
            outcome = await engine.run_here(firing.id) if firing.status == "queued" else None
            result = {"ok": firing.status == "queued" and outcome is not None and not outcome.is_failure,
                      "where": "here (no pincer serve is running)", "firing": firing.to_dict(),
                      "run_id": firing.run_id, "job": job_row(await engine.store.require_job(name))}  # fmt: skip
            if outcome is not None:
                result["outcome"] = {"status": outcome.status.value, "error": outcome.error}
            ran: dict[str, Any] = pincer.shown(result)
            return ran

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        where = result["where"]
        if result.get("run_id") and result.get("outcome") is None:
            stderr.print(f"job {name!r} started in {where}: run {result['run_id']}", markup=False)
        elif result.get("outcome") is not None:
            outcome = result["outcome"]
            stderr.print(f"job {name!r} ran {where}: run {result['run_id']} {outcome['status']}"
                         + (f": {outcome['error']}" if outcome["error"] else ""), markup=False)  # fmt: skip
        else:
            error = (result.get("firing") or {}).get("error") or {}
            stderr.print(result.get("note") or f"job {name!r} did not start: {error.get('message', '')}", markup=False)
    if not result.get("ok"):
        raise typer.Exit(EXIT_FAILURE)


@app.command("import")
def import_jobs(
    file: Path = typer.Argument(..., help="OpenClaw's cron.yaml or jobs JSON ({version: 1, jobs: [...]})."),
    replace: bool = typer.Option(False, "--replace", help="Replace jobs of the same name instead of skipping them."),
    as_json: bool = JsonOption,
) -> None:
    """Import OpenClaw's cron.yaml (name/schedule/message) or jobs JSON, as they are."""
    from pincer.triggers.openclaw import read_cron_file

    async def body() -> dict[str, Any]:
        imported = read_cron_file(file)
        added, skipped = [], []
        async with open_for_triggers() as pincer:
            engine = pincer.triggers
            now = engine.clock.now()
            for spec in imported.jobs:
                existing = await engine.store.job(spec.name)
                if existing is not None and not replace:
                    skipped.append({"name": spec.name, "reason": "a job of that name exists (--replace replaces it)"})
                    continue
                upcoming = imported.next_runs.get(spec.name)
                try:
                    row = await engine.scheduler.add(spec, now=now, next_run=upcoming if upcoming and upcoming > now else None,
                                               replace=existing is not None)  # fmt: skip
                except PincerError as exc:
                    skipped.append({"name": spec.name, "reason": exc.message})
                    continue
                added.append(pincer.shown(job_row(row)))
        return {"ok": True, "format": imported.format, "added": added, "skipped": skipped,
                "problems": list(imported.problems), "unknown_keys": {k: list(v) for k, v in imported.unknown_keys.items()}}  # fmt: skip

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    stderr.print(f"{file} ({result['format']}): {len(result['added'])} jobs imported, {len(result['skipped'])} skipped", markup=False)
    for row in result["added"]:
        stderr.print(f"  + {row['name']}: {row['schedule_text']}, next run {row['next_run']}", markup=False)
    for row in result["skipped"]:
        stderr.print(f"  - {row['name']}: {row['reason']}", markup=False)
    for problem in result["problems"]:
        stderr.print(f"  ! {problem}", markup=False)
    for name, keys in result["unknown_keys"].items():
        stderr.print(f"  ({name}: not used by pincer: {', '.join(keys)})", markup=False)
