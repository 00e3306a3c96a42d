"""``pincer openapi``: an OpenAPI document's operations as governed tools."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import typer

from pincer.cli.acts import record_act
from pincer.cli.common import JsonOption, emit_json, pincer_home, run, stderr
from pincer.core.acts import ActKind
from pincer.core.errors import ManifestError, ToolError, UsageError

app = typer.Typer(help="Turn OpenAPI services into tools.", no_args_is_help=True)

FETCH_TIMEOUT_S = 30.0


def fetch_document(url: str, *, limit: int | None = None) -> bytes:
    """GET a document for `openapi add`: https, or plain http to this machine only; at most
    ``limit`` bytes ([openapi] max_document_bytes; its default when None)."""
    import ipaddress

    import httpx2

    from pincer.runtimes.openapi.document import MAX_DOCUMENT_BYTES, too_large

    limit = limit or MAX_DOCUMENT_BYTES
    from pincer.safety.egress_transport import default_ssl_context

    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise UsageError(f"{url} is not https", hint="fetch documents over https, or save the file and give its path")
    try:
        with httpx2.Client(timeout=FETCH_TIMEOUT_S, follow_redirects=False, verify=default_ssl_context()) as client:
            with client.stream("GET", url, headers={"Accept": "application/json, application/yaml"}) as response:
                if response.status_code != 200:
                    raise ManifestError(f"fetching it answered HTTP {response.status_code}", source=url)
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise too_large(limit, url)
                    chunks.append(chunk)
                return b"".join(chunks)
    except httpx2.HTTPError as exc:
        raise ManifestError(f"could not fetch it: {type(exc).__name__}: {exc}", source=url) from None


async def check_base_url(base: str) -> None:
    """Refuse at add time what every call would be refused: a scheme or an address the egress
    rule does not allow under this home's config (plain http only to loopback with
    [network] allow_private = true; private addresses only with it; metadata addresses never)."""
    from pincer.config import load_config
    from pincer.core.errors import EgressDenied
    from pincer.safety import egress

    config = load_config(pincer_home())
    allow_private = config.allow_private_network
    why = "; save it anyway with --force"
    try:
        target = egress.check_url(base, allow_plain_http=allow_private)
        policy = egress.EgressPolicy.from_hosts(
            [target.authority], allow_private_network=allow_private, allow_plain_http_loopback=allow_private
        )
        await egress.resolve_checked(target, policy)
    except EgressDenied as exc:
        raise UsageError(
            f"calls to {base} would all be refused: {exc.message}", hint=(exc.hint or "use an https base URL") + why
        ) from None
    except ToolError as exc:  # the name does not resolve now: it may later; say so, do not refuse
        stderr.print(f"[yellow]warning:[/] {exc.message}; calls will fail until it resolves")


def _parse_secrets(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        scheme, sep, name = pair.partition("=")
        if not sep or not scheme or not name:
            raise UsageError(f"--secret {pair!r} is not SCHEME=NAME", hint="for example --secret api_key=github_token")
        out[scheme] = name
    return out


def scheme_report(service: Any) -> list[dict[str, Any]]:
    """Each security scheme of a service: what it is, which operations use it, what to set."""
    rows = []
    for scheme in service.schemes:
        used = sum(1 for op in service.operations if any(scheme.key in alt for alt in op.security or ()))
        rows.append({
            "scheme": scheme.key,
            "type": scheme.type,
            "summary": scheme.summary(),
            "secret": scheme.secret,
            "secrets": list(scheme.secret_names()),
            "operations": used,
            "supported": scheme.unsupported is None,
            "how_to_set": scheme.how_to_set(service.name),
        })
    return rows


@app.command("add")
def add(
    name: str = typer.Argument(..., help="Service name (1-40 characters); its tools are called NAME_OPERATION."),
    spec: str = typer.Option(..., "--spec", help="OpenAPI 3.0/3.1 document: a file or an https URL (JSON or YAML)."),
    base_url: str | None = typer.Option(None, "--base-url", help="Where to send calls (default: the document's first server)."),
    secret: list[str] = typer.Option([], "--secret", help="SCHEME=NAME: keep security scheme SCHEME's credential in secret NAME (default: SERVICE_SCHEME)."),
    auth_secret: str | None = typer.Option(None, "--auth-secret", help="Instead of the document's schemes: one secret sent with every operation."),
    auth: str | None = typer.Option(None, "--auth", help="With --auth-secret: bearer | header:NAME | query:NAME"),
    replace_existing: bool = typer.Option(False, "--replace", help="Replace a service of the same name."),
    force: bool = typer.Option(False, "--force", help="Save even when calls to the base URL would be refused."),
    as_json: bool = JsonOption,
) -> None:
    """Read a document and store one tool per operation (parameters and body in one JSON
    Schema; refs resolved), with the document's security schemes mapped to secrets: the output
    says which schemes it found and which secrets to set. A base URL that calls could never
    reach under the current config is refused (exit 1) unless --force."""
    from pincer.runtimes.openapi import ServiceStore, load_document, server_urls
    from pincer.runtimes.openapi.document import Resolver
    from pincer.runtimes.openapi.importing import read_service

    async def body() -> dict[str, Any]:
        from pincer.config import load_config

        if (auth is None) != (auth_secret is None):
            raise UsageError("--auth-secret and --auth go together", hint="--auth-secret NAME --auth bearer")
        renames = _parse_secrets(secret)
        if renames and auth is not None:
            raise UsageError("--secret names a scheme's secret; --auth replaces the schemes", hint="give one or the other")
        limit = load_config(pincer_home()).openapi.max_document_bytes

        def fetch(url: str) -> bytes:
            return fetch_document(url, limit=limit)

        document, location = load_document(spec, fetch=fetch, limit=limit)
        resolver = Resolver(document, location, fetch=fetch, limit=limit)
        base = base_url or next(iter(server_urls(document, location)), None)
        if base is None:
            raise UsageError("the document names no server", hint="give --base-url https://api.example.com")
        imported = read_service(name, document, location, base_url=base, resolver=resolver, auth=auth,
                                auth_secret=auth_secret, secrets=renames, fetch=fetch, keep_servers=base_url is None)
        if not force:
            await check_base_url(base)
        service = imported.service
        home = pincer_home()
        ServiceStore(home).add(service, replace_existing=replace_existing)
        names = service.tool_names()
        record_act(home, ActKind.EXTENSION, subject=name, outcome="added", reason=f"OpenAPI service {name} added",
                   args={"host": urlsplit(service.base_url).hostname, "operations": len(names), "replaced": replace_existing})  # fmt: skip
        return {
            "ok": True,
            "name": name,
            "base_url": base,
            "tools": names,
            "shortened": sum(1 for n, op in zip(names, service.operations, strict=True) if not n.endswith(op.name)),
            "schemes": scheme_report(service),
            "anonymous_operations": sum(1 for op in service.operations if not service.sends_credential(op)),
            "auth": auth,
            "notes": list(imported.notes),
        }

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    from rich.markup import escape

    stderr.print(f"added {len(result['tools'])} tools from {name} ({escape(result['base_url'])})", highlight=False)
    if result["shortened"]:
        stderr.print(f"{result['shortened']} tool names were shortened to 64 characters (docs/openapi.md)")
    for row in result["schemes"]:
        stderr.print(f"scheme {escape(row['scheme'])}: {escape(row['summary'])}, used by {row['operations']} "
                     f"operations; {escape(row['how_to_set'])}", highlight=False)
    if result["schemes"] or result["auth"]:
        stderr.print(f"{result['anonymous_operations']} operations are called without credentials", highlight=False)
    for note in result["notes"]:
        stderr.print(f"[yellow]note:[/] {escape(note)}", highlight=False)


@app.command("list")
def list_services(as_json: bool = JsonOption) -> None:
    """List the OpenAPI services and their operations: tool name, method, path."""
    from pincer.runtimes.openapi import ServiceStore

    async def body() -> list[dict[str, Any]]:
        return [
            {
                "name": s.name,
                "title": s.title,
                "base_url": s.base_url,
                "spec": s.spec,
                "auth": s.auth,
                "auth_secret": s.auth_secret,
                "enabled": s.enabled,
                "schemes": scheme_report(s),
                "operations": [
                    {"tool": tool, "method": op.method, "path": op.path, "description": op.description,
                     "security": [sorted(alt) for alt in op.security] if op.security is not None else None}
                    for op, tool in zip(s.operations, s.tool_names(), strict=True)
                ],
            }
            for s in ServiceStore(pincer_home()).load()
        ]

    services = run(body, as_json=as_json)
    if as_json:
        emit_json(services)
        return
    if not services:
        stderr.print("no OpenAPI services; add one with `pincer openapi add NAME --spec FILE_OR_URL`", highlight=False)
        return
    from rich.markup import escape
    from rich.table import Table

    for s in services:
        auth = f", auth {s['auth']} from secret {s['auth_secret']}" if s["auth"] else ""
        state = "" if s["enabled"] else " [disabled]"
        title = f"{s['name']}: {s['base_url']}{auth}, {len(s['operations'])} operations{state}"
        # escaped: paths and descriptions come from the document and may hold "[...]"
        table = Table(title=escape(title), title_justify="left", title_style="bold")
        for column in ("tool", "method", "path", "description"):
            table.add_column(column, overflow="fold")
        for op in s["operations"]:
            summary = (op["description"] or "").split("\n")[0][:80]
            table.add_row(*(escape(cell) for cell in (op["tool"], op["method"], op["path"], summary)))
        stderr.print(table, highlight=False)


@app.command("remove")
def remove(name: str, as_json: bool = JsonOption) -> None:
    """Remove a service and its tools."""
    from pincer.runtimes.openapi import ServiceStore

    async def body() -> None:
        home = pincer_home()
        ServiceStore(home).remove(name)
        record_act(home, ActKind.EXTENSION, subject=name, outcome="removed", reason=f"OpenAPI service {name} removed")

    run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "name": name})
    else:
        stderr.print(f"removed OpenAPI service {name}")


@app.command("login")
def login(
    name: str = typer.Argument(..., help="The service."),
    scheme: str | None = typer.Option(None, "--scheme", help="Its oauth2 or openIdConnect scheme (default: the only one)."),
    no_browser: bool = typer.Option(False, "--no-browser", help="Print the URL and read the redirect URL from stdin."),
    timeout_s: float = typer.Option(300.0, "--timeout", help="Seconds to wait for the consent."),
    as_json: bool = JsonOption,
) -> None:
    """Log in to a service's OAuth 2.0 authorization code flow (an oauth2 scheme's, or an
    openIdConnect scheme's found by discovery) with PKCE on a loopback redirect: the access and
    refresh tokens land in the scheme's secrets and are refreshed before they expire."""
    from pincer.builtins.openapi_oauth import provider_for_scheme
    from pincer.cli.auth import _iso, oauth_login
    from pincer.runtimes.openapi import ServiceStore

    async def body() -> dict[str, Any]:
        from pincer.config import load_config

        service = next((s for s in ServiceStore(pincer_home()).load() if s.name == name), None)
        if service is None:
            raise UsageError(f"no OpenAPI service named {name!r}", hint="`pincer openapi list` shows them")
        logins = [s for s in service.schemes if s.flow("authorizationCode") is not None]
        chosen = next((s for s in logins if s.key == scheme), None) if scheme else (logins[0] if len(logins) == 1 else None)
        if chosen is None:
            found = ", ".join(s.key for s in logins) or "none"
            raise UsageError(
                f"{name}: {'no scheme ' + repr(scheme) + ' with' if scheme else 'pick the scheme with'} an authorization "
                f"code flow (schemes that have one: {found})",
                hint=f"pincer openapi login {name} --scheme SCHEME" if logins else
                "`pincer openapi list --json` shows the service's schemes and what each needs",
            )
        flow = chosen.flow("authorizationCode")
        assert flow is not None
        config = load_config(pincer_home())
        provider = provider_for_scheme(service.name, chosen)
        record = await oauth_login(provider, flow.scopes, no_browser=no_browser, timeout_s=timeout_s,
                                   allow_private_network=config.allow_private_network)
        return {"ok": True, "service": name, "scheme": chosen.key, "secret": chosen.secret,
                "scopes": list(record.scopes), "expires_at": _iso(record.expires_at), "refreshable": record.has_refresh}

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    stderr.print(f"signed in to {name} ({result['scheme']}): {result['secret']} stored (expires "
                 f"{result['expires_at'] or 'never'}{', refreshable' if result['refreshable'] else ''})", highlight=False)
