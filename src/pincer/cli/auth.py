"""``pincer auth``: set up, show and revoke the tokens of the built-in tools (docs/builtins.md).

A token comes from the env var the tool's capabilities name (``--from-env``), stdin, or a hidden
prompt: never from argv. It is checked against the ``validation_endpoint`` before it is stored.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from pincer.cli.common import JsonOption, emit_json, pincer_home, run, secret_key, stderr
from pincer.core.errors import UsageError

app = typer.Typer(help="Set up, show and revoke the tokens of the built-in tools.", no_args_is_help=True)

MAX_TOKEN_BYTES = 65_536


def _settings() -> tuple[Any, Any]:
    from pincer.config import load_config

    config = load_config(pincer_home())
    return config, config.builtins


def _open_store() -> Any:
    from pincer.secrets.store import SecretStore

    home = pincer_home()
    return SecretStore.open(home, key=secret_key(home))


def _read_token(item: Any, from_env: bool) -> tuple[str, str]:
    if from_env:
        if not item.env_var or not os.environ.get(item.env_var):
            raise UsageError(
                f"--from-env: {item.env_var or 'no env var'} is not set",
                hint=f"export {item.env_var or 'the token'} first, or pipe the token: pincer auth setup {item.name}",
            )
        return os.environ[item.env_var].strip(), f"env var {item.env_var}"
    if sys.stdin.isatty():
        for line in (item.instructions, item.setup_url and f"get one at {item.setup_url}", item.token_hint):
            if line:
                stderr.print(line)
        value = typer.prompt(item.prompt or f"{item.display_name} token", hide_input=True)
    else:
        value = sys.stdin.read(MAX_TOKEN_BYTES + 1)
        if len(value.encode()) > MAX_TOKEN_BYTES:
            raise UsageError(f"the token on stdin is longer than {MAX_TOKEN_BYTES} bytes")
    value = value.strip()
    if not value:
        raise UsageError("the token is empty", hint=f'pipe it in: printf %s "$TOKEN" | pincer auth setup {item.name}')
    return value, "stdin" if not sys.stdin.isatty() else "prompt"


@app.command("setup")
def setup(
    name: str = typer.Argument(..., help="The built-in: github, web_search, llm_context (brave: web_search's key)."),
    from_env: bool = typer.Option(False, "--from-env", help="Take the token from the env var its capabilities name."),
    no_check: bool = typer.Option(False, "--no-check", help="Store without the validation request."),
    as_json: bool = JsonOption,
) -> None:
    """Store a built-in's token after checking it against its validation endpoint."""

    async def body() -> dict[str, Any]:
        from pincer.builtins.auth import target, validate_token

        config, settings = _settings()
        item = target(settings, name)
        value, source = _read_token(item, from_env)
        checked = None
        if not no_check:
            checked = await validate_token(item, value, allow_private_network=config.allow_private_network)
        store = _open_store()
        try:
            store.set(item.secret_name, value)
        finally:
            store.close()
        return {"ok": True, "tool": item.name, "secret": item.secret_name, "source": source, "checked": checked}

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    checked = f", checked against {result['checked']}" if result["checked"] else " (no validation endpoint)"
    stderr.print(f"stored {result['secret']} for {result['tool']} from {result['source']}{checked}")


@app.command("status")
def status(as_json: bool = JsonOption) -> None:
    """Which built-in tokens are set up (never their values)."""

    async def body() -> list[dict[str, Any]]:
        from pincer.builtins.auth import status as auth_status

        _config, settings = _settings()
        store = _open_store()
        try:
            return auth_status(settings, store, os.environ)
        finally:
            store.close()

    rows = run(body, as_json=as_json)
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        state = "stored" if row["stored"] else "not set up"
        env = f"; {row['env_var']} is set" if row["env_var_set"] else ""
        stderr.print(f"{row['tool']}: {row['secret']} {state}{env}")


@app.command("revoke")
def revoke(
    name: str = typer.Argument(..., help="The built-in whose token to forget."),
    as_json: bool = JsonOption,
) -> None:
    """Forget a built-in's token here; revoke it on the provider's site too (the output says where)."""

    async def body() -> dict[str, Any]:
        from pincer.builtins.auth import target

        _config, settings = _settings()
        item = target(settings, name)
        store = _open_store()
        try:
            had = store.find(item.secret_name) is not None
            if had:
                store.delete(item.secret_name)
        finally:
            store.close()
        return {"ok": True, "tool": item.name, "secret": item.secret_name, "removed": had,
                "revoke_at": item.setup_url}

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    what = "forgot" if result["removed"] else "had no"
    where = f"; revoke it at {result['revoke_at']} too" if result["revoke_at"] else ""
    stderr.print(f"{what} {result['secret']} for {result['tool']}{where}")
