"""``pincer people``: the people of this store, their roles and their personal access tokens.

The local CLI is the owner: whoever runs it on the gateway's machine (with the home's keys) may
add, change and remove people and make or revoke their tokens. Each of these is an act, one
audit record naming the CLI user (docs/acts.md). A token is printed once and kept nowhere but as
its sha256; a record names a token by its id, never its value.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from typing import Any

import typer
from rich import box
from rich.table import Table

from pincer.cli.common import JsonOption, emit_json, open_pincer, run, stderr
from pincer.store.people import parse_expiry

app = typer.Typer(help="Manage people, their roles and their personal access tokens.", no_args_is_help=True)

@app.command("add")
def add(
    name: str = typer.Argument(..., help="The person's name (a-z, 0-9, '.', '_', '-')."),
    role: list[str] = typer.Option([], "--role", help="A role: viewer, approver[:tool=GLOB,effect=E,session=GLOB], operator, admin. Repeatable."),
    admin: bool = typer.Option(False, "--admin", help="Make the person an admin (the same as --role admin)."),
    email: str | None = typer.Option(None, "--email", help="The person's email (single sign-on matches it)."),
    as_json: bool = JsonOption,
) -> None:
    """Add a person with their roles."""
    from pincer.cli.acts import cli_actor
    from pincer.policy.roles import parse_roles
    from pincer.store.people_acts import add_person

    async def body() -> dict[str, Any]:
        roles = parse_roles([*role, *(["admin"] if admin else [])])
        async with open_pincer(builtins=False, quiet=True) as pincer:
            person = await add_person(pincer.people, pincer.audit, actor=cli_actor(), name=name, roles=roles, email=email,
                                      now=time.time())  # fmt: skip
            return person.to_dict()

    person = run(body, as_json=as_json)
    if as_json:
        emit_json(person)
    else:
        stderr.print(f"added {name} ({', '.join(person['roles'])})")


@app.command("roles")
def set_roles(
    name: str = typer.Argument(..., help="The person whose roles change."),
    role: list[str] = typer.Option([], "--role", help="A role (repeatable): the person's roles become exactly these."),
    admin: bool = typer.Option(False, "--admin", help="The same as --role admin."),
    as_json: bool = JsonOption,
) -> None:
    """Set a person's roles (they replace the ones the person had; the last admin stays one)."""
    from pincer.cli.acts import cli_actor
    from pincer.policy.roles import parse_roles
    from pincer.store.people_acts import set_person_roles

    async def body() -> list[str]:
        roles = parse_roles([*role, *(["admin"] if admin else [])])
        async with open_pincer(builtins=False, quiet=True) as pincer:
            await set_person_roles(pincer.people, pincer.audit, actor=cli_actor(), name=name, roles=roles)
            return roles.written()

    written = run(body, as_json=as_json)
    if as_json:
        emit_json({"name": name, "roles": written})
    else:
        stderr.print(f"{name}: {', '.join(written)}")


@app.command("list")
def list_people(as_json: bool = JsonOption) -> None:
    """List people and their roles."""

    async def body() -> list[dict[str, Any]]:
        async with open_pincer(builtins=False, quiet=True) as pincer:
            return [p.to_dict() for p in await pincer.people.all()]

    people = run(body, as_json=as_json)
    if as_json:
        emit_json(people)
        return
    table = Table(title=f"{len(people)} people", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("name", "roles", "email", "status"):
        table.add_column(column)
    for p in people:
        table.add_row(p["name"], ", ".join(p["roles"]), p["email"] or "", p["status"])
    stderr.print(table)


@app.command("remove")
def remove(name: str = typer.Argument(..., help="The person to remove."), as_json: bool = JsonOption) -> None:
    """Remove a person; their tokens stop working at once and their own credentials are deleted
    (the last admin stays)."""
    from pincer.cli.acts import cli_actor
    from pincer.store.people_acts import remove_person

    async def body() -> tuple[int, int]:
        async with open_pincer(builtins=False, quiet=True) as pincer:
            return await remove_person(pincer.people, pincer.audit, actor=cli_actor(), name=name,
                                       forget_credentials=pincer.secrets.delete_for)  # fmt: skip

    tokens, credentials = run(body, as_json=as_json)
    if as_json:
        emit_json({"removed": name, "tokens": tokens, "credentials": credentials})
    else:
        stderr.print(f"removed {name}, {tokens} token(s) and {credentials} credential(s)")


@app.command("token")
def token(
    name: str = typer.Argument(..., help="The person the token is for."),
    expires: str | None = typer.Option(None, "--expires", help="A duration (30d, 12h, 8w) or a date (2027-01-31); never by default."),
    session: str | None = typer.Option(None, "--session", help="The gateway session its calls run under ([gateway] session by default)."),
    role: list[str] = typer.Option([], "--role", help="Scope the token to this role of the person's (repeatable); the person's roles by default."),
    as_json: bool = JsonOption,
) -> None:
    """Make a personal access token for NAME and print it once (REST and MCP take it as a bearer token)."""
    from pincer.cli.acts import cli_actor
    from pincer.policy.roles import parse_roles
    from pincer.store.people_acts import make_token

    async def body() -> Any:
        now = time.time()
        expires_at = parse_expiry(expires, now=now)
        roles = parse_roles(role) if role else None
        async with open_pincer(builtins=False, quiet=True) as pincer:
            return await make_token(pincer.people, pincer.audit, actor=cli_actor(), person=name, now=now,
                                    expires_at=expires_at, session=session, roles=roles)  # fmt: skip

    made = run(body, as_json=as_json)
    if as_json:
        emit_json({**made.token.to_dict(), "token": made.value})
    else:
        sys.stdout.write(made.value + "\n")
        stderr.print(f"token {made.token.id} for {name}: shown once, kept only as its sha256")


@app.command("tokens")
def tokens(name: str | None = typer.Argument(None, help="Only this person's."), as_json: bool = JsonOption) -> None:
    """List personal access tokens with their last use (never their values)."""

    async def body() -> list[dict[str, Any]]:
        async with open_pincer(builtins=False, quiet=True) as pincer:
            return [t.to_dict() for t in await pincer.people.tokens(name)]

    listed = run(body, as_json=as_json)
    if as_json:
        emit_json(listed)
        return
    table = Table(title=f"{len(listed)} tokens", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("id", "person", "session", "roles", "expires", "last used", "revoked"):
        table.add_column(column)

    def when(value: float | None) -> str:
        return "" if value is None else dt.datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M")

    for t in listed:
        roles = "(theirs)" if t["roles"] is None else ", ".join(t["roles"])
        table.add_row(t["id"], t["person"], t["session"] or "", roles, when(t["expires_at"]), when(t["last_used"]), when(t["revoked_at"]))
    stderr.print(table)


@app.command("revoke")
def revoke(token_id: str = typer.Argument(..., help="The token's id (`pincer people tokens` lists them)."), as_json: bool = JsonOption) -> None:
    """Revoke a personal access token: it stops working at once, on every gateway of the store."""
    from pincer.cli.acts import cli_actor
    from pincer.store.people_acts import revoke_token

    async def body() -> str:
        async with open_pincer(builtins=False, quiet=True) as pincer:
            held = await revoke_token(pincer.people, pincer.audit, actor=cli_actor(), token_id=token_id, now=time.time())
            return held.person

    person = run(body, as_json=as_json)
    if as_json:
        emit_json({"revoked": token_id, "person": person})
    else:
        stderr.print(f"revoked token {token_id} of {person}")
