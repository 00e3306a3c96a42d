"""``pincer secrets``: values come from stdin or a hidden prompt, never from argv, and are never printed."""

from __future__ import annotations

import sys
from typing import Any

import typer

from pincer.cli.acts import record_act
from pincer.cli.common import JsonOption, emit_json, pincer_home, run, secret_key, stderr
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


@app.command("set")
def set_secret(name: str, as_json: bool = JsonOption) -> None:
    """Store a secret; the value is read from stdin or a hidden prompt."""

    async def body() -> None:
        value = _read_value(name)
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
        emit_json({"ok": True, "name": name})
    else:
        stderr.print(f"stored secret {name}")


@app.command("list")
def list_secrets(as_json: bool = JsonOption) -> None:
    """List secret names and dates (never values)."""

    async def body() -> list[dict[str, Any]]:
        store = _open_store()
        try:
            return [
                {"name": info.name, "created_at": info.created_at, "updated_at": info.updated_at}
                for info in store.names()
            ]
        finally:
            store.close()

    infos = run(body, as_json=as_json)
    if as_json:
        emit_json(infos)
        return
    from rich.table import Table

    table = Table(title=f"{len(infos)} secrets", title_justify="left")
    table.add_column("name")
    table.add_column("updated")
    import datetime as dt

    for info in infos:
        table.add_row(info["name"], dt.datetime.fromtimestamp(info["updated_at"]).isoformat(timespec="seconds"))
    stderr.print(table)


@app.command("rm")
def remove_secret(name: str, as_json: bool = JsonOption) -> None:
    """Delete a secret."""

    async def body() -> None:
        store = _open_store()
        try:
            store.delete(name)
        finally:
            store.close()
        record_act(pincer_home(), ActKind.SECRET, subject=name, outcome="removed", reason=f"secret {name} removed")

    run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "name": name})
    else:
        stderr.print(f"removed secret {name}")
