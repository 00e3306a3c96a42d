"""``pincer secrets``: values come from stdin or a hidden prompt, never from argv, and are never printed."""

from __future__ import annotations

import sys
from typing import Any

import typer

from pincer.cli.acts import record_act
from pincer.cli.common import JsonOption, emit_json, open_pincer, pincer_home, run, secret_key, stderr
from pincer.core.acts import ActKind
from pincer.core.errors import UsageError

app = typer.Typer(help="Manage the encrypted secret store.", no_args_is_help=True)

MAX_SECRET_BYTES = 65_536


def _open_store() -> Any:
    from pincer.secrets.store import SecretStore

    home = pincer_home()
    return SecretStore.open(home, key=secret_key(home))


def _read_value(name: str) -> str:
    if sys.stdin.isatty():
        value: str = typer.prompt(f"value for {name}", hide_input=True, confirmation_prompt=True)
    else:
        value = sys.stdin.read(MAX_SECRET_BYTES + 1)
        if len(value.encode()) > MAX_SECRET_BYTES:
            raise UsageError(f"the value on stdin is longer than {MAX_SECRET_BYTES} bytes")
        value = value.rstrip("\r\n")
    if not value:
        raise UsageError("the secret value is empty", hint=f"pipe it in: printf %s \"$TOKEN\" | pincer secrets set {name}")
    return value


_PERSON_HELP = "A person's own value of a per-person secret ([secrets] per_person; docs/teams.md)."


@app.command("set")
def set_secret(
    name: str,
    person: str | None = typer.Option(None, "--person", help=_PERSON_HELP),
    as_json: bool = JsonOption,
) -> None:
    """Store a secret (or, with --person, that person's own value); read from stdin or a hidden prompt."""

    async def body() -> None:
        value = _read_value(name)
        if person is not None:
            await set_for_person(person, name, value)
            return
        store = _open_store()
        try:
            had = any(info.name == name for info in store.names())
            store.set(name, value)
        finally:
            store.close()
        # Never the value: the record says which secret, and that it changed.
        record_act(pincer_home(), ActKind.SECRET, subject=name, outcome="replaced" if had else "set",
                   reason=f"secret {name} {'replaced' if had else 'set'}")  # fmt: skip

    run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "name": name, **({"person": person} if person else {})})
    else:
        stderr.print(f"stored secret {name}" + (f" for {person}" if person else ""))


async def set_for_person(person: str, name: str, value: str, *, what: str = "") -> None:
    """A person's own value, through the one act every path uses (store/people_acts.py)."""
    from pincer.cli.acts import cli_actor
    from pincer.store.people_acts import set_own_credential

    async with open_pincer(builtins=False, quiet=True) as pincer:
        await set_own_credential(pincer.people, pincer.audit, pincer.secrets, actor=cli_actor(), person=person, name=name,
                                 value=value, per_person=pincer.config.secrets.per_person, what=what)  # fmt: skip


@app.command("list")
def list_secrets(as_json: bool = JsonOption) -> None:
    """List secret names and dates (never values): shared ones, and each person's own values of
    the per-person ones."""

    async def body() -> list[dict[str, Any]]:
        from pincer.config import load_config

        home = pincer_home()
        per_person = set(load_config(home).secrets.per_person)
        store = _open_store()
        try:
            # A shared value of a per-person name is never injected: listed as unused, so it can be removed.
            rows = [(i.name, "unused (per person)" if i.name in per_person else "shared", None, i.updated_at)
                    for i in store.names()]  # fmt: skip
            rows += [(i.name, "per-person", i.person, i.updated_at) for i in store.person_names()]
        finally:
            store.close()
        return [{"name": n, "kind": k, "person": p, "updated_at": u} for n, k, p, u in sorted(rows, key=lambda r: (r[0], r[2] or ""))]

    infos = run(body, as_json=as_json)
    if as_json:
        emit_json(infos)
        return
    from rich.table import Table

    table = Table(title=f"{len(infos)} secrets", title_justify="left")
    for column in ("name", "kind", "person", "updated"):
        table.add_column(column)
    import datetime as dt

    for info in infos:
        updated = dt.datetime.fromtimestamp(info["updated_at"]).isoformat(timespec="seconds")
        table.add_row(info["name"], info["kind"], info["person"] or "", updated)
    stderr.print(table)


@app.command("rm")
def remove_secret(
    name: str,
    person: str | None = typer.Option(None, "--person", help=_PERSON_HELP),
    as_json: bool = JsonOption,
) -> None:
    """Delete a secret (with --person: that person's own value of it)."""

    async def body() -> None:
        if person is not None:  # the one act every path uses (store/people_acts.py)
            from pincer.cli.acts import cli_actor
            from pincer.store.people_acts import remove_own_credential

            async with open_pincer(builtins=False, quiet=True) as pincer:
                await remove_own_credential(pincer.audit, pincer.secrets, actor=cli_actor(), person=person, name=name)
            return
        store = _open_store()
        try:
            store.delete(name)
        finally:
            store.close()
        record_act(pincer_home(), ActKind.SECRET, subject=name, outcome="removed", reason=f"secret {name} removed")

    run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "name": name, **({"person": person} if person else {})})
    else:
        stderr.print(f"removed secret {name}" + (f" of {person}" if person else ""))
