"""``pincer mcp``: configure external MCP servers, test them, import other clients' lists, re-trust
changed tool definitions; and ``pincer mcp stdio``, pincer itself as an MCP server on stdio.

Servers live in ``$PINCER_HOME/mcp/servers.json``; pins in ``$PINCER_HOME/mcp/pins.json``.
Credentials never go into either file: a literal token given to ``--env``/``--header`` under a
credential-looking name (or found by ``import``) is moved into the secret store and referred to
as ``${secret:NAME}``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.table import Table

from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, pincer_home, run, stderr
from pincer.core.errors import PincerError, UsageError

app = typer.Typer(help="Connect external MCP servers as governed tools.", no_args_is_help=True)

TEST_TIMEOUT_S = 60.0  # `mcp test` / `mcp trust`: start, handshake and tools/list together


class _Secrets:
    """Opens the secret store only when something needs it (a reference or a value to store)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._store: Any = None

    def store(self) -> Any:
        if self._store is None:
            from pincer.cli.common import secret_key
            from pincer.secrets.store import SecretStore

            self._store = SecretStore.open(self.home, key=secret_key(self.home))
        return self._store

    def find(self, name: str) -> str | None:
        return self.store().find(name)

    def scrub(self, error: PincerError) -> PincerError:
        """A server's error text (its stderr tail) may echo a secret: redact before showing it."""
        from pincer.safety.scanner import LeakScanner

        try:
            scanner = LeakScanner(self.store().values())
        except PincerError:
            return error  # no readable store: nothing of it can be in the text
        error.message, _ = scanner.scan(error.message)
        return error

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def _parse_pairs(values: list[str], sep: str, what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in values:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise UsageError(f"{what} {item!r} is not KEY{sep}VALUE", hint=f"for example {what} NAME{sep}value")
        pairs[key.strip()] = value.strip() if sep == ":" else value
    return pairs


def _target(server: Any) -> str:
    if server.transport == "stdio":
        return " ".join([server.command or "", *server.args])
    return server.url or ""


@app.command("add")
def add(
    name: str = typer.Argument(..., help="Server name; its tools are called NAME_TOOL."),
    command: str | None = typer.Option(None, "--command", help="Program that speaks MCP on stdio."),
    arg: list[str] = typer.Option([], "--arg", help="Argument for --command (repeatable)."),
    env: list[str] = typer.Option([], "--env", help="K=V for the server's environment; V may be ${secret:NAME}."),
    cwd: str | None = typer.Option(None, "--cwd", help="Working directory of the server."),
    url: str | None = typer.Option(None, "--url", help="URL of a remote server."),
    transport: str = typer.Option("http", "--transport", help="http (streamable HTTP) or sse (legacy) for --url."),
    header: list[str] = typer.Option([], "--header", help="K:V sent to a remote server; V may use ${secret:NAME}."),
    startup: str = typer.Option("lazy", "--startup", help="lazy (on first call) or eager (with pincer)."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per call (default: tools.timeout_s)."),
    read_only: bool = typer.Option(False, "--read-only", help="Its tools only read: effects narrow to network."),
    replace_existing: bool = typer.Option(False, "--replace", help="Replace a server of the same name."),
    connect: bool = typer.Option(True, "--connect/--no-connect", help="Start it now and pin its tools."),
    as_json: bool = JsonOption,
) -> None:
    """Add a server: a stdio command or a remote URL. Its tools are pinned when it first answers."""
    from pincer.runtimes.mcp import ServerConfig, ServerStore
    from pincer.runtimes.mcp.environment import check_variable_name
    from pincer.runtimes.mcp.importers import protect_env, protect_headers

    async def body() -> dict[str, Any]:
        if (command is None) == (url is None):
            raise UsageError("give exactly one of --command or --url", hint="pincer mcp add NAME --command CMD [--arg A]")
        if transport not in ("http", "sse"):
            raise UsageError(f"--transport {transport!r} is not http or sse")
        if command is None and (arg or env or cwd):
            raise UsageError("--arg, --env and --cwd go with --command")
        if url is None and header:
            raise UsageError("--header goes with --url")
        home = pincer_home()
        notes: list[str] = []
        secrets: dict[str, str] = {}
        if command is not None:
            pairs = _parse_pairs(env, "=", "--env")
            for key in pairs:  # said explicitly here: refuse rather than drop
                check_variable_name(key, source="--env")
            env_values, secrets, notes = protect_env(name, pairs)
            config = ServerConfig(
                name=name, transport="stdio", command=command, args=tuple(arg), env=env_values, cwd=cwd,
                startup=startup, timeout_s=timeout, read_only=read_only,  # type: ignore[arg-type]
            )
        else:
            header_values, secrets, notes = protect_headers(name, _parse_pairs(header, ":", "--header"))
            config = ServerConfig(
                name=name, transport=transport, url=url, headers=header_values,  # type: ignore[arg-type]
                startup=startup, timeout_s=timeout, read_only=read_only,  # type: ignore[arg-type]
            )
        store = ServerStore(home)
        holder = _Secrets(home)
        try:
            if secrets:
                for secret_name, value in secrets.items():
                    holder.store().set(secret_name, value)
            store.add(config, replace_existing=replace_existing)
            result: dict[str, Any] = {"ok": True, "server": config.to_json(), "notes": notes, "tools": None}
            if connect:
                try:
                    report = await _probe(home, config, holder, record=True)
                    result["tools"] = report["tools"]
                    result["connect_ms"] = report["connect_ms"]
                except PincerError as exc:
                    result["warning"] = f"saved, but it did not answer: {holder.scrub(exc).message}"
            return result
        finally:
            holder.close()

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    for note in result["notes"]:
        stderr.print(f"[dim]{note}[/]")
    stderr.print(f"added MCP server [bold]{name}[/]")
    if result.get("warning"):
        stderr.print(f"[yellow]warning:[/] {result['warning']}")
    elif result["tools"] is not None:
        stderr.print(f"pinned {len(result['tools'])} tools: {', '.join(t['name'] for t in result['tools'])}")


@app.command("list")
def list_servers(as_json: bool = JsonOption) -> None:
    """List the configured servers (without starting them)."""
    from pincer.runtimes.mcp import PinStore, ServerStore

    async def body() -> list[dict[str, Any]]:
        home = pincer_home()
        pins = PinStore(home)
        return [
            {**server.to_json(), "pinned_tools": sorted(pins.pins(server.name))}
            for server in ServerStore(home).load()
        ]

    servers = run(body, as_json=as_json)
    if as_json:
        emit_json(servers)
        return
    table = Table(title=f"{len(servers)} MCP servers", title_justify="left")
    for column in ("name", "transport", "target", "startup", "enabled", "pinned tools"):
        table.add_column(column)
    for server in servers:
        target = server.get("url") or " ".join([server.get("command") or "", *server.get("args", [])])
        table.add_row(
            server["name"], server["transport"], target, server["startup"],
            "yes" if server["enabled"] else "no", str(len(server["pinned_tools"])),
        )
    stderr.print(table)


@app.command("remove")
def remove(name: str, as_json: bool = JsonOption) -> None:
    """Remove a server and its pins."""
    from pincer.runtimes.mcp import PinStore, ServerStore

    async def body() -> None:
        home = pincer_home()
        ServerStore(home).remove(name)
        PinStore(home).forget(name)

    run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "name": name})
    else:
        stderr.print(f"removed MCP server {name}")


async def _probe_configured(home: Path, name: str) -> dict[str, Any]:
    """Probe a configured server without recording anything; errors come back scrubbed of secrets."""
    from pincer.runtimes.mcp import ServerStore

    config = ServerStore(home).get(name)
    holder = _Secrets(home)
    try:
        return await _probe(home, config, holder, record=False)
    except PincerError as exc:
        raise holder.scrub(exc) from None
    finally:
        holder.close()


async def _probe(home: Path, config: Any, secrets: _Secrets, *, record: bool) -> dict[str, Any]:
    """Start the server once, list its tools, compare them with the pins, stop it."""
    from pincer.runtimes.mcp import PinStore, ServerConnection

    conn = ServerConnection(config, secrets=secrets.find)
    started = time.perf_counter()
    try:
        with anyio.fail_after(TEST_TIMEOUT_S):
            definitions = await conn.start(timeout_s=config.connect_timeout_s)
        connect_ms = (time.perf_counter() - started) * 1000
        status = conn.status()
        started = time.perf_counter()
        with anyio.fail_after(TEST_TIMEOUT_S):
            again = await conn.list_tools()
        list_ms = (time.perf_counter() - started) * 1000
    finally:
        await conn.aclose()
    pins = PinStore(home)
    if record:
        pins.record_new(config.name, definitions)
    pinned = pins.pins(config.name)
    tools = []
    for definition in definitions:
        pin = pinned.get(definition.name)
        state = "new" if pin is None else ("trusted" if pin.hash == definition.hash else "changed")
        tools.append({"name": definition.name, "state": state, "description": definition.description})
    missing = sorted(set(pinned) - {d.name for d in definitions})
    return {
        "ok": True,
        "name": config.name,
        "protocol_version": status.protocol_version,
        "server": status.server_info,
        "connect_ms": round(connect_ms, 1),
        "list_tools_ms": round(list_ms, 1),
        "tools": tools,
        "listed_again": len(again),
        "missing": missing,
        "definitions": definitions,
    }


@app.command("test")
def test(name: str, as_json: bool = JsonOption) -> None:
    """Start a server, list its tools and report timing and pin state (changes nothing)."""

    async def body() -> dict[str, Any]:
        home = pincer_home()
        report = await _probe_configured(home, name)
        report.pop("definitions")
        return report

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
        return
    stderr.print(
        f"[bold]{name}[/]: {report['server'] or 'unnamed server'}, protocol {report['protocol_version']}, "
        f"started in {report['connect_ms']:.0f} ms, tools/list in {report['list_tools_ms']:.1f} ms"
    )
    table = Table(title=f"{len(report['tools'])} tools", title_justify="left")
    for column in ("tool", "pin", "description"):
        table.add_column(column)
    for tool in report["tools"]:
        table.add_row(tool["name"], tool["state"], tool["description"][:80])
    stderr.print(table)
    if report["missing"]:
        stderr.print(f"no longer offered: {', '.join(report['missing'])}")


@app.command("trust")
def trust(
    name: str,
    tool: str | None = typer.Argument(None, help="Only this tool (default: every changed or new tool)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Trust without asking."),
    as_json: bool = JsonOption,
) -> None:
    """Show how a server's tools changed since they were trusted, and trust them as they are now."""
    from pincer.runtimes.mcp import PinStore, describe_change

    async def inspect() -> tuple[list[Any], list[dict[str, Any]]]:
        home = pincer_home()
        report = await _probe_configured(home, name)
        pinned = PinStore(home).pins(name)
        chosen = [d for d in report["definitions"] if tool is None or d.name == tool]
        if tool is not None and not chosen:
            raise UsageError(f"server {name!r} offers no tool {tool!r}", hint=f"`pincer mcp test {name}` lists them")
        changes = []
        for definition in chosen:
            pin = pinned.get(definition.name)
            if pin is None:
                changes.append({"tool": definition.name, "change": "new", "diff": ""})
            elif pin.hash != definition.hash:
                changes.append(
                    {"tool": definition.name, "change": "changed", "diff": describe_change(pin.definition, definition)}
                )
        wanted = {c["tool"] for c in changes}
        return [d for d in chosen if d.name in wanted], changes

    definitions, changes = run(inspect, as_json=as_json)
    if not changes:
        if as_json:
            emit_json({"ok": True, "name": name, "trusted": [], "changes": []})
        else:
            stderr.print(f"nothing to trust: {name}'s tools match their pins")
        return
    if not as_json:
        for change in changes:
            stderr.print(f"[bold]{name}/{change['tool']}[/]: {change['change']}")
            if change["diff"]:
                stderr.print(change["diff"], markup=False, highlight=False)
    if not yes:
        if as_json or not sys.stdin.isatty():
            error = UsageError("trusting changed tools needs a confirmation", hint="review the changes and pass --yes")
            if as_json:
                emit_json({"ok": False, "error": error.to_dict(), "changes": changes})
                raise typer.Exit(EXIT_FAILURE)
            stderr.print(f"[bold red]error:[/] {error.message}\n[dim]hint: {error.hint}[/]")
            raise typer.Exit(EXIT_FAILURE)
        if not typer.confirm(f"trust {len(changes)} tool definition(s) of {name}?", err=True):
            raise typer.Exit(EXIT_FAILURE)
    PinStore(pincer_home()).trust(name, definitions)
    if as_json:
        emit_json({"ok": True, "name": name, "trusted": [c["tool"] for c in changes], "changes": changes})
    else:
        stderr.print(f"trusted {', '.join(c['tool'] for c in changes)}")


@app.command("import")
def import_servers(
    path: Path = typer.Argument(..., help="mcp-servers.json, a registry entry (or a directory of them), or an mcpServers file."),
    replace_existing: bool = typer.Option(False, "--replace", help="Replace servers of the same names."),
    as_json: bool = JsonOption,
) -> None:
    """Import MCP servers from IronClaw's and desktop clients' files. All or nothing."""
    from pincer.runtimes.mcp import ServerStore
    from pincer.runtimes.mcp.importers import import_path

    async def body() -> dict[str, Any]:
        home = pincer_home()
        result = import_path(path)
        if not result.servers:
            raise UsageError(f"{path} holds no MCP server pincer can use", hint="; ".join(result.notes) or None)
        store = ServerStore(home)
        existing = {s.name for s in store.load()}
        clashes = sorted(existing & {s.name for s in result.servers})
        if clashes and not replace_existing:
            raise UsageError(
                f"servers already configured: {', '.join(clashes)}; nothing was imported",
                hint="remove them first, or import with --replace",
            )
        holder = _Secrets(home)
        try:
            for name, value in result.secrets.items():
                holder.store().set(name, value)
        finally:
            holder.close()
        store.add_many(result.servers, replace_existing=replace_existing)
        return {
            "ok": True,
            "format": result.format,
            "imported": [s.name for s in result.servers],
            "secrets_stored": sorted(result.secrets),
            "notes": result.notes,
        }

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    for note in result["notes"]:
        stderr.print(f"[dim]{note}[/]")
    stderr.print(f"imported {len(result['imported'])} servers ({result['format']}): {', '.join(result['imported'])}")


@app.command("stdio")
def stdio(
    session: str = typer.Option(None, "--session", help="Session the calls run under (default: [gateway] session)."),
    conformance_fixtures: bool = typer.Option(
        False, "--conformance-fixtures", help="Also serve the MCP conformance suite's fixtures."
    ),
) -> None:
    """Serve every tool over MCP on stdin/stdout (for clients that launch their servers)."""
    import logging

    # stdout carries MCP messages only: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    async def body() -> None:
        from pincer.cli.common import open_pincer
        from pincer.cli.serve import gateway_extensions
        from pincer.gateway.stdio import serve_stdio

        async with open_pincer() as pincer:
            fixtures = conformance_fixtures or pincer.config.gateway.conformance_fixtures
            extensions = await gateway_extensions(pincer, fixtures=fixtures)
            await serve_stdio(pincer, session=session or pincer.config.gateway.session, extensions=extensions)

    run(body)
