"""``pincer openapi``: an OpenAPI document's operations as governed tools."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import typer

from pincer.cli.common import JsonOption, emit_json, pincer_home, run, stderr
from pincer.core.errors import ManifestError, ToolError, UsageError

app = typer.Typer(help="Turn OpenAPI services into tools.", no_args_is_help=True)

FETCH_TIMEOUT_S = 30.0
MAX_FETCH_BYTES = 8 * 1024 * 1024


def fetch_document(url: str) -> bytes:
    """GET a document for `openapi add`: https, or plain http to this machine only; bounded."""
    import ipaddress

    import httpx2

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
                    if size > MAX_FETCH_BYTES:
                        raise ManifestError(f"larger than {MAX_FETCH_BYTES} bytes", source=url)
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


@app.command("add")
def add(
    name: str = typer.Argument(..., help="Service name; its tools are called NAME_OPERATION."),
    spec: str = typer.Option(..., "--spec", help="OpenAPI 3.0/3.1 document: a file or an https URL (JSON or YAML)."),
    base_url: str | None = typer.Option(None, "--base-url", help="Where to send calls (default: the document's first server)."),
    auth_secret: str | None = typer.Option(None, "--auth-secret", help="Secret store entry holding the credential."),
    auth: str | None = typer.Option(None, "--auth", help="bearer | header:NAME | query:NAME"),
    replace_existing: bool = typer.Option(False, "--replace", help="Replace a service of the same name."),
    force: bool = typer.Option(False, "--force", help="Save even when calls to the base URL would be refused."),
    as_json: bool = JsonOption,
) -> None:
    """Read a document and store one tool per operation (path, query, header and body
    parameters in one JSON Schema; local and file-relative $refs resolved). A base URL that
    calls could never reach under the current config is refused (exit 1) unless --force."""
    from pincer.runtimes.openapi import ServiceConfig, ServiceStore, extract_operations, load_document, server_urls
    from pincer.runtimes.openapi.config import parse_auth, tool_name
    from pincer.runtimes.openapi.document import Resolver

    async def body() -> dict[str, Any]:
        if (auth is None) != (auth_secret is None):
            raise UsageError("--auth-secret and --auth go together", hint="--auth-secret NAME --auth bearer")
        credential = None
        if auth is not None:
            kind, param = parse_auth(auth)
            credential = (kind, param) if param else None
        fetch = fetch_document
        document, location = load_document(spec, fetch=fetch)
        resolver = Resolver(document, location, fetch=fetch)
        operations = extract_operations(resolver, credential=credential)
        if not operations:
            raise ManifestError("the document has no operations", source=str(location))
        base = base_url or next(iter(server_urls(document, location)), None)
        if base is None:
            raise UsageError("the document names no server", hint="give --base-url https://api.example.com")
        if not force:
            await check_base_url(base)
        info = document.get("info") if isinstance(document.get("info"), dict) else {}
        service = ServiceConfig(
            name=name,
            spec=str(location),
            base_url=base,
            operations=tuple(operations),
            auth_secret=auth_secret,
            auth=auth,
            title=info.get("title") if isinstance(info.get("title"), str) else None,
        )
        ServiceStore(pincer_home()).add(service, replace_existing=replace_existing)
        return {
            "ok": True,
            "name": name,
            "base_url": base,
            "tools": [tool_name(name, op.name) for op in operations],
        }

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        stderr.print(f"added {len(result['tools'])} tools from {name} ({result['base_url']})")


@app.command("list")
def list_services(as_json: bool = JsonOption) -> None:
    """List the OpenAPI services and their operations: tool name, method, path."""
    from pincer.runtimes.openapi import ServiceStore
    from pincer.runtimes.openapi.config import tool_name

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
                "operations": [
                    {"tool": tool_name(s.name, op.name), "method": op.method, "path": op.path, "description": op.description}
                    for op in s.operations
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
        ServiceStore(pincer_home()).remove(name)

    run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "name": name})
    else:
        stderr.print(f"removed OpenAPI service {name}")
