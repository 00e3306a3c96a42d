"""``pincer triggers list``: every trigger of every skill, job and webhook, with its state."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import typer

from pincer.cli.common import JsonOption, audit_key, emit_json, pincer_home, run, secret_key, stderr

if TYPE_CHECKING:
    from pincer.service import Pincer

__all__ = ["app", "open_for_triggers", "trigger_rows", "when"]

app = typer.Typer(help="Show every trigger of every skill, job and webhook, with its state.", no_args_is_help=True)


@asynccontextmanager
async def open_for_triggers() -> AsyncIterator[Pincer]:
    """A Pincer with what triggers need (config, store, audit, secrets, skills) and no tools."""
    from pincer.service import Pincer

    home = pincer_home()
    async with Pincer.open(
        home, secret_key=secret_key(home), audit_key=audit_key(home), builtins=False, external=False, scripts=False,
        wasm=False,
    ) as pincer:  # fmt: skip
        yield pincer


def when(t: float | None) -> str | None:
    if t is None:
        return None
    try:
        return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):  # a stored time past the year 9999
        return f"(not a time: {t:.4g})"


def job_row(row: Any) -> dict[str, Any]:
    """What ``cron list`` and ``triggers list`` show of a stored job; a row that no longer
    reads (stored before a bound existed, or edited by hand) is shown as broken, with the fix."""
    from pincer.core.errors import PincerError
    from pincer.triggers.jobs import JobSpec

    try:
        spec = JobSpec.from_dict(row.spec)
    except (PincerError, KeyError, TypeError, ValueError, OverflowError) as exc:
        problem = exc.message if isinstance(exc, PincerError) else f"{type(exc).__name__}: {exc}"
        fix = "fix its [[jobs]] table in config.toml" if row.source == "config" else (
            "fix the skill's schedule: trigger" if row.source.startswith("skill:") else f"pincer cron rm {row.name}, then add it again"
        )  # fmt: skip
        return {
            "name": row.name, "source": row.source, "schedule": None, "schedule_text": "(broken)", "skill": None,
            "params": {}, "message": None, "session": None, "state": f"broken: {problem}; {fix}", "next_run": None,
            "retry_at": None, "last_run": when(row.last_run), "last_status": row.last_status, "last_error": row.last_error,
            "last_run_id": row.last_run_id, "broken": problem, "fix": fix,
        }  # fmt: skip
    if row.paused:
        state = "paused"
    elif not spec.enabled:
        state = "disabled"
    elif row.next_run is None and row.retry_at is None:
        state = "done"
    else:
        state = "active"
    return {
        "name": row.name,
        "source": row.source,
        "schedule": spec.schedule.to_dict(),
        "schedule_text": spec.schedule.describe(),
        "skill": spec.skill,
        "params": dict(spec.params),
        "message": spec.message,
        "session": spec.run_session,
        "state": state,
        "next_run": when(row.next_run),
        "retry_at": when(row.retry_at),
        "last_run": when(row.last_run),
        "last_status": row.last_status,
        "last_error": row.last_error,
        "last_run_id": row.last_run_id,
    }


def hook_row(pincer: Pincer, hook: Any) -> dict[str, Any]:
    has_secret = pincer.secrets.find(hook.secret) is not None
    if hook.skill:
        runs = f"skill {hook.skill}"
    elif hook.message:
        runs = "a plain agent turn"
    else:
        runs = "every eligible skill whose webhook trigger matches"
    return {
        "name": hook.name,
        "path": f"/hooks/{hook.name}",
        "auth": hook.auth,
        "secret": hook.secret,
        "secret_set": has_secret,
        "skill": hook.skill,
        "message": hook.message,
        "events": list(hook.events),
        "params": dict(hook.params),
        "runs": runs,
        "targets": _derived_targets(pincer, hook) if not hook.skill and not hook.message else None,
        "state": "active" if has_secret else f"refuses every delivery: set the secret {hook.secret!r}",
        "replay_protection": _replay_protection(hook.auth),
    }


def _replay_protection(auth: str) -> str:
    if auth == "bearer":
        # A token is a password, not a signature: whoever saw one delivery can mint fresh
        # timestamps and nonces, so pincer offers none and says so (triggers/signatures.py).
        return ('delivery id only: a captured bearer delivery resent under a new id runs again; '
                'use auth = "standard" (signed id and timestamp) where replays matter')
    if auth == "github":
        return "the body's digest: a captured delivery resent under any id is answered from the first"
    return "signed id and timestamp: a resend within the tolerance is answered from the first, later ones refused"


_UNTRUSTED_TRIGGER = "inactive: only a trusted skill fires by its own trigger (name it with skill = NAME in {table})"


def _derived_targets(pincer: Pincer, hook: Any) -> list[str]:
    """The skills a hook without skill and message delivers to: their webhook trigger passes its filter."""
    from pincer.triggers.events import event_matches

    library = pincer.skills
    found = []
    for skill in library.eligible() if library is not None else ():
        events = [t.value for t in skill.triggers if t.kind == "webhook" and t.value and skill.trust.value == "trusted"]
        if any(not hook.events or any(event_matches(p, e) for p in hook.events) for e in events):
            found.append(skill.name)
    return found


async def trigger_rows(pincer: Pincer) -> list[dict[str, Any]]:
    """One row per trigger: skills' own (command, schedule, webhook, manual), then the jobs and
    hooks configured by hand."""
    from pincer.triggers.commands import command_name, command_table
    from pincer.triggers.events import event_matches

    library = pincer.skills
    engine = pincer.triggers
    await engine.scheduler.sync(engine.clock.now())
    jobs = {row.name: row for row in await engine.store.jobs()}
    hooks = pincer.config.hooks
    table = command_table(library.user_invocable()) if library is not None else {}
    rows: list[dict[str, Any]] = []
    schedule_index: dict[str, int] = {}
    eligible = [(skill, library.eligibility_of(skill.name)) for skill in library.skills] if library is not None else []
    for skill, eligibility in eligible:
        inactive = None if eligibility.is_eligible else "inactive: not eligible (" + "; ".join(eligibility.reasons) + ")"
        for trigger in skill.triggers:
            row: dict[str, Any] = {"owner": f"skill {skill.name}", "skill": skill.name, "kind": trigger.kind, "value": trigger.value}
            if trigger.kind == "command":
                name = command_name(trigger.value).lower()
                owner = table.get(name)
                if inactive:
                    row["state"] = inactive
                elif not skill.user_invocable:
                    row["state"] = "inactive: the skill is not user-invocable"
                elif owner is not None and owner.name != skill.name:
                    row["state"] = f"shadowed: skill {owner.name} answers {name}"
                else:
                    row["state"] = "active"
            elif trigger.kind == "schedule":
                from pincer.triggers.jobs import skill_job_name

                index = schedule_index.get(skill.name, 0)
                schedule_index[skill.name] = index + 1
                job = jobs.get(skill_job_name(skill.name, index))
                if job is None and skill.trust.value != "trusted":
                    row["state"] = inactive or _UNTRUSTED_TRIGGER.format(table="[[jobs]]")
                elif job is None:
                    row["state"] = inactive or "inactive: the schedule does not parse (`pincer skills check`)"
                else:
                    row.update({k: v for k, v in job_row(job).items() if k in ("next_run", "last_run", "last_status")})
                    row["job"] = job.name
                    row["state"] = "paused" if job.paused else "active"
            elif trigger.kind == "webhook":
                via = [
                    h.name for h in hooks
                    if h.skill == skill.name
                    or (not h.skill and not h.message and skill.trust.value == "trusted"
                        and (not h.events or any(event_matches(p, trigger.value) for p in h.events)))
                ]  # fmt: skip
                row["hooks"] = via
                # a hook whose secret is not set refuses every delivery: it delivers nothing
                unset = {h.name: h.secret for h in hooks if h.name in via and pincer.secrets.find(h.secret) is None}
                live = [name for name in via if name not in unset]
                refusing = "; ".join(f"/hooks/{name} refuses every delivery until the secret {secret!r} is set "
                                     f"(`pincer secrets set {secret}`)" for name, secret in unset.items())  # fmt: skip
                if inactive:
                    row["state"] = inactive
                elif live:
                    row["state"] = "active via " + ", ".join(f"/hooks/{name}" for name in live) + (f"; {refusing}" if refusing else "")
                elif not via and skill.trust.value != "trusted":
                    row["state"] = _UNTRUSTED_TRIGGER.format(table="[[hooks]]")
                elif via:
                    row["state"] = f"inactive: {refusing}"
                else:
                    row["state"] = "inactive: no [[hooks]] entry delivers it (add one with auth and secret)"
            else:
                row["state"] = inactive or "offered for manual runs"
            rows.append(row)
    for job in jobs.values():
        if not job.source.startswith("skill:"):
            rows.append({"owner": f"job {job.name}", "job": job.name, "kind": "schedule", **job_row(job)})
    for hook in hooks:
        rows.append({"owner": f"hook {hook.name}", "hook": hook.name, "kind": "webhook", **hook_row(pincer, hook)})
    return rows


@app.command("list")
def list_triggers(as_json: bool = JsonOption) -> None:
    """Every trigger of every skill, job and webhook, with its state (next run, last status, hooks)."""

    async def body() -> list[dict[str, Any]]:
        async with open_for_triggers() as pincer:
            # A value stored as a secret after a job (or its last error) was stored is masked here.
            rows: list[dict[str, Any]] = pincer.shown(await trigger_rows(pincer))
            return rows

    rows = run(body, as_json=as_json)
    if as_json:
        emit_json({"triggers": rows})
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(rows)} triggers", title_justify="left")
    for column in ("owner", "kind", "trigger", "state"):
        table.add_column(column, overflow="fold")
    for row in rows:
        trigger = row.get("value") or row.get("schedule_text") or row.get("path") or ""
        state = str(row.get("state", ""))
        if row.get("next_run") and state == "active":  # a paused job keeps its next run, but does not run then
            state += f" (next {row['next_run']})"
        if row.get("auth") == "bearer":
            state += f"; replays: {row['replay_protection']}"
        table.add_row(escape(str(row["owner"])), row["kind"], escape(str(trigger)), escape(state))
    stderr.print(table)
