"""``pincer auth``: set up, show and revoke the tokens of the built-in tools (docs/builtins.md).

A token comes from the env var the tool's capabilities name (``--from-env``), stdin, or a hidden
prompt: never from argv. It is checked against the ``validation_endpoint`` before it is stored.

``google`` is an OAuth login instead (:mod:`pincer.builtins.oauth`), and so are ``slack --oauth``
(Slack's OAuth v2; without it, Slack's bot token from the app's install page is pasted like any
other) and ``github --oauth`` (an OAuth app's login; without it, a personal access token): the browser is opened on the provider's consent page (or the URL printed, ``--no-browser``:
the person pastes the redirect URL back), the scopes are shown first, and the tokens land in the
secret store. With ``--person WHO`` (the login's token secret in ``[secrets] per_person``) the same
login is WHO's own: both tokens are kept as WHO's values, refreshed as theirs (docs/teams.md).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from pincer.cli.acts import record_act
from pincer.cli.common import JsonOption, emit_json, fail, pincer_home, run, secret_key, stderr
from pincer.core.acts import ActKind
from pincer.core.errors import UsageError

app = typer.Typer(help="Set up, show and revoke the tokens of the built-in tools.", no_args_is_help=True)

MAX_TOKEN_BYTES = 65_536
LOGIN_TIMEOUT_S = 300.0  # the person consents in the browser (or pastes the redirect) within this
OAUTH_LOGINS = ("google", "slack", "github")
# Always an OAuth login; slack and github are one only with --oauth (or once set up that way): most
# Slack apps hand out a bot token on their install page (and Slack may refuse a loopback redirect
# URL), and a GitHub token is most often a pasted personal access token.
OAUTH_ONLY = ("google",)


def _is_oauth_login(name: str, *, asked: bool = False) -> bool:
    if name in OAUTH_ONLY or (name in OAUTH_LOGINS and asked):
        return True
    if name not in OAUTH_LOGINS:
        return False
    from pincer.builtins.oauth import load_record

    return load_record(pincer_home(), name) is not None


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
    name: str = typer.Argument(
        ..., help="The built-in: github, web_search, llm_context (brave: web_search's key), slack, telegram, "
        "portfolio, composio; google (OAuth)."
    ),
    oauth: bool = typer.Option(
        False, "--oauth", help="slack, github: log in with the provider's OAuth instead of pasting a token."
    ),
    from_env: bool = typer.Option(False, "--from-env", help="Take the token from the env var its capabilities name."),
    no_check: bool = typer.Option(False, "--no-check", help="Store without the validation request."),
    no_browser: bool = typer.Option(
        False, "--no-browser", help="OAuth logins: print the URL and read the redirect URL pasted back (headless)."
    ),
    timeout_s: float = typer.Option(LOGIN_TIMEOUT_S, "--timeout", min=1.0, help="OAuth logins: seconds to wait."),
    person: str | None = typer.Option(
        None, "--person", help="Store the token as this person's own ([secrets] per_person; docs/teams.md)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Store a built-in's token after checking it against its validation endpoint; for google
    (and slack or github with --oauth), run the OAuth login (browser, or --no-browser to paste the
    redirect URL). With --person: the token, or the login, is that person's own."""
    if name in OAUTH_ONLY or (oauth and name in OAUTH_LOGINS):
        _oauth_setup(name, no_browser=no_browser, timeout_s=timeout_s, as_json=as_json, person=person)
        return

    async def body() -> dict[str, Any]:
        from pincer.builtins.auth import target, validate_token

        config, settings = _settings()
        item = target(settings, name)
        value, source = _read_token(item, from_env)
        checked = None
        if not no_check:
            checked = await validate_token(item, value, allow_private_network=config.allow_private_network)
        if person is not None:  # checked like anyone's token, kept as the person's own
            from pincer.cli.secrets import set_for_person

            await set_for_person(person, item.secret_name, value, what=f" ({item.name}'s token)")
            return {"ok": True, "tool": item.name, "secret": item.secret_name, "source": source, "checked": checked,
                    "person": person}  # fmt: skip
        store = _open_store()
        try:
            store.set(item.secret_name, value)
        finally:
            store.close()
        record_act(pincer_home(), ActKind.SECRET, subject=item.secret_name, outcome="set",
                   reason=f"{item.name}'s token stored as secret {item.secret_name}", args={"tool": item.name})  # fmt: skip
        return {"ok": True, "tool": item.name, "secret": item.secret_name, "source": source, "checked": checked}

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    checked = (f", checked against {result['checked']}" if result["checked"]
               else " (not checked: --no-check)" if no_check else " (no validation endpoint)")  # fmt: skip
    whose = f" as {person}'s own" if person else ""
    stderr.print(f"stored {result['secret']} for {result['tool']}{whose} from {result['source']}{checked}")


@app.command("status")
def status(as_json: bool = JsonOption) -> None:
    """Which built-in tokens are set up (never their values)."""

    async def body() -> list[dict[str, Any]]:
        from pincer.builtins.auth import status as auth_status

        config, settings = _settings()
        store = _open_store()
        try:
            logins = _oauth_status(settings, store)
            by_login = {row["tool"] for row in logins}
            rows = [row for row in auth_status(settings, store, os.environ) if row["tool"] not in by_login] + logins
            owners: dict[str, list[str]] = {}
            for info in store.person_names():
                owners.setdefault(info.name, []).append(info.person)
        finally:
            store.close()
        for row in rows:  # a per-person token: who connected theirs (its shared value is never used)
            per_person = row["secret"] in config.secrets.per_person
            row["kind"] = "per-person" if per_person else "shared"
            if per_person:
                row["people"] = owners.get(row["secret"], [])
                row["stored"] = bool(row["people"])
        return rows

    rows = run(body, as_json=as_json)
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        state = "stored" if row["stored"] else "not set up"
        if row["kind"] == "per-person":
            state = f"per person: {', '.join(row['people']) or 'no one has connected theirs'}"
        env = f"; {row['env_var']} is set" if row["env_var_set"] else ""
        expiry = ""
        if row.get("login") == "oauth" and row["stored"]:
            expiry = f"; expires {row['expires_at'] or 'never'}" + (" (expired)" if row["expired"] else "")
            expiry += "; refreshable" if row["refreshable"] else "; no refresh token"
        stderr.print(f"{row['tool']}: {row['secret']} {state}{env}{expiry}")


@app.command("revoke")
def revoke(
    name: str = typer.Argument(..., help="The built-in whose token to forget."),
    person: str | None = typer.Option(
        None, "--person", help="Revoke and forget this person's own login only (docs/teams.md)."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Forget a built-in's token here; revoke it on the provider's site too (the output says where).
    For an OAuth login (google, slack set up with --oauth): revoked at the provider's revocation
    endpoint, then forgotten here. With --person: that person's own login only."""
    if person is not None:
        if name not in OAUTH_LOGINS:
            fail(UsageError(f"--person: {name} has no OAuth login; a person's pasted token is a secret of theirs",
                            hint=f"forget it with `pincer secrets rm NAME --person {person}`"), as_json=as_json)  # fmt: skip
        _oauth_revoke(name, as_json=as_json, person=person)
        return
    if _is_oauth_login(name):
        _oauth_revoke(name, as_json=as_json)
        return

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
        if had:
            record_act(pincer_home(), ActKind.SECRET, subject=item.secret_name, outcome="removed",
                       reason=f"{item.name}'s token (secret {item.secret_name}) forgotten", args={"tool": item.name})  # fmt: skip
        return {"ok": True, "tool": item.name, "secret": item.secret_name, "removed": had,
                "revoke_at": item.setup_url}

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    what = "forgot" if result["removed"] else "had no"
    where = f"; revoke it at {result['revoke_at']} too" if result["revoke_at"] else ""
    stderr.print(f"{what} {result['secret']} for {result['tool']}{where}")


# ------------------------------------------------------------------------------------ OAuth logins


def _client_value(store: Any, secret: str, env: str, *, prompt: str | None, required: bool) -> str | None:
    value = (os.environ.get(env, "").strip() if env else "") or store.find(secret)
    if not value and prompt is not None and sys.stdin.isatty():
        value = typer.prompt(prompt, hide_input=secret.endswith("secret"), default="" if not required else None)
        value = (value or "").strip()
    if not value and required:
        raise UsageError(
            f"no OAuth client id: set {env} or store it" if env else f"no OAuth client id: store it in {secret}",
            hint=f"create an OAuth client (Desktop app), then `pincer secrets set {secret}`" + (f" or export {env}" if env else ""),
        )
    return value or None


async def oauth_login(
    provider: Any, scopes: Any, *, no_browser: bool, timeout_s: float, allow_private_network: bool,
    client_env: tuple[str, str] | None = None, person: str | None = None,
) -> Any:
    """One OAuth login (authorization code with PKCE on a loopback redirect, or the redirect URL
    pasted with ``no_browser``), its tokens stored (as ``person``'s own values when given);
    returns the TokenRecord. The client id and secret (the app's, shared) come from
    ``client_env`` (two env var names), the store, or a prompt, and are stored.
    Shared by ``pincer auth setup`` and ``pincer openapi login``."""
    import anyio

    from pincer.builtins.oauth import begin_login, code_from_redirect, exchange_code
    from pincer.builtins.oauth_loopback import LoopbackRedirect

    id_env, secret_env = client_env or ("", "")
    store = _open_store()
    try:
        client_id = _client_value(store, provider.client_id_secret, id_env, required=True,
                                  prompt=f"{provider.display_name} OAuth client id (from {provider.console_url})") or ""
        client_secret = _client_value(store, provider.client_secret_secret, secret_env,
                                      required=False, prompt=f"{provider.display_name} OAuth client secret")
        store.set(provider.client_id_secret, client_id)
        if client_secret:
            store.set(provider.client_secret_secret, client_secret)
        async with LoopbackRedirect() as loop:
            start = begin_login(provider, client_id=client_id, scopes=scopes, redirect_uri=loop.redirect_uri)
            stderr.print(f"{provider.display_name} will ask you to allow these scopes:", highlight=False)
            for scope in scopes:
                stderr.print(f"  {scope}", highlight=False)
            stderr.print(f"open this URL to sign in:\n{start.url}", soft_wrap=True, highlight=False)
            if no_browser:
                stderr.print("after consenting, paste the address the browser was sent to (it may show an error):")
                with anyio.fail_after(timeout_s):
                    pasted = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                code = code_from_redirect(start, pasted[:MAX_TOKEN_BYTES])
            else:
                _open_browser(start.url)
                stderr.print(f"waiting for the redirect on {loop.redirect_uri} (if no browser opens, open the URL yourself)")
                code = await loop.wait(lambda url: code_from_redirect(start, url), timeout_s)
        return await exchange_code(provider, start, code, client_id=client_id, client_secret=client_secret,
                                   store=store, home=pincer_home(), allow_private_network=allow_private_network,
                                   person=person)  # fmt: skip
    finally:
        store.close()


def _open_browser(url: str) -> None:
    """Open ``url`` in the person's browser without waiting for it: ``webbrowser.open`` returns
    only when a BROWSER command that waits (a console browser) ends, and the redirect it brings
    must be answered meanwhile. A daemon thread, so a browser still open never holds the command."""
    import threading
    import webbrowser

    threading.Thread(target=webbrowser.open, args=(url,), name="pincer-browser", daemon=True).start()


async def _require_person_login(provider: Any, person: str) -> None:
    """A person's own login: its token's secret is per person, and the person is one of the store
    (checked before anyone opens a browser; a value kept for no one would be injected for whoever
    is given that name later)."""
    from pincer.cli.common import open_pincer
    from pincer.store.people_acts import require_per_person

    async with open_pincer(builtins=False, quiet=True) as pincer:
        require_per_person(provider.access_secret, pincer.config.secrets.per_person)
        if await pincer.people.get(person) is None:
            raise UsageError(f"no person named {person!r}", hint=f"add them first: `pincer people add {person} --role viewer`")


def _oauth_setup(name: str, *, no_browser: bool, timeout_s: float, as_json: bool, person: str | None = None) -> None:
    async def body() -> dict[str, Any]:
        from pincer.builtins.oauth import login_scopes, provider_for

        config, settings = _settings()
        provider = provider_for(name, settings)
        if person is not None:
            await _require_person_login(provider, person)
        scopes = login_scopes(name, settings)
        record = await oauth_login(provider, scopes, no_browser=no_browser, timeout_s=timeout_s,
                                   allow_private_network=config.allow_private_network,
                                   client_env=(provider.client_id_env, provider.client_secret_env), person=person)
        whose = f" as {person}'s own" if person is not None else ""
        args: dict[str, Any] = {"tool": name, "scopes": list(record.scopes)}
        if person is not None:
            args["person"] = person
        record_act(pincer_home(), ActKind.SECRET, subject=provider.access_secret, outcome="set",
                   reason=f"{name} signed in with OAuth{whose}; its tokens stored", args=args)  # fmt: skip
        result = {"ok": True, "login": name, "secret": provider.access_secret, "scopes": list(record.scopes),
                  "expires_at": _iso(record.expires_at), "refreshable": record.has_refresh}
        if person is not None:
            result["person"] = person
        return result

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    whose = f" as {person}'s own" if person is not None else ""
    stderr.print(f"signed in to {name}: {result['secret']} stored{whose} (expires {result['expires_at'] or 'never'}"
                 f"{', refreshable' if result['refreshable'] else ''})")



def _iso(when: float | None) -> str | None:
    import datetime as dt

    if when is None:
        return None
    return dt.datetime.fromtimestamp(when, tz=dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _oauth_status(settings: Any, store: Any) -> list[dict[str, Any]]:
    import time

    from pincer.builtins.oauth import load_record, provider_for

    stored = {info.name: info for info in store.names()}
    rows = []
    for name in OAUTH_LOGINS:
        if not _is_oauth_login(name):
            continue  # slack with a pasted bot token: the token row shows it
        provider = provider_for(name, settings)
        info = stored.get(provider.access_secret)
        record = load_record(pincer_home(), name)
        expires = record.expires_at if record is not None else None
        rows.append({
            "tool": name,
            "login": "oauth",
            "secret": provider.access_secret,
            "stored": info is not None,
            "updated_at": info.updated_at if info is not None else None,
            "expires_at": _iso(expires),
            "expired": expires is not None and expires <= time.time(),
            "refreshable": provider.refresh_secret in stored,
            "scopes": list(record.scopes) if record is not None else [],
            "env_var": None,
            "env_var_set": False,
            "base_url": None,
        })
    return rows


def _oauth_revoke(name: str, *, as_json: bool, person: str | None = None) -> None:
    async def body() -> dict[str, Any]:
        from pincer.builtins.oauth import provider_for, revoke_login

        config, settings = _settings()
        provider = provider_for(name, settings)
        if person is not None:
            from pincer.store.people import check_person_name

            check_person_name(person)
        store = _open_store()
        try:
            outcome = await revoke_login(provider, store=store, home=pincer_home(),
                                         allow_private_network=config.allow_private_network, person=person)
        finally:
            store.close()
        if outcome["forgot_locally"]:
            whose = f"{person}'s own" if person is not None else f"{name}'s"
            record_act(pincer_home(), ActKind.SECRET, subject=provider.access_secret, outcome="removed",
                       reason=f"{whose} OAuth login ({name}) revoked and forgotten",
                       args={"tool": name} | ({"person": person} if person is not None else {}))  # fmt: skip
        result = {"ok": True, "tool": name, "secret": provider.access_secret, "removed": outcome["forgot_locally"],
                  "revoked_at_server": outcome["revoked_at_server"], "server_error": outcome["server_error"],
                  "revoke_at": provider.console_url}
        if person is not None:
            result["person"] = person
        return result

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    server = {True: "revoked at the provider", False: f"the provider answered {result['server_error']}",
              None: "nothing to revoke at the provider"}[result["revoked_at_server"]]
    what = "forgot" if result["removed"] else "had no"
    stderr.print(f"{server}; {what} {result['secret']} for {name}")
