"""``pincer mcp``: configure external MCP servers, test them, import other clients' lists, re-trust
changed tool definitions; and ``pincer mcp stdio``, pincer itself as an MCP server on stdio.

Servers live in ``$PINCER_HOME/mcp/servers.json``; pins in ``$PINCER_HOME/mcp/pins.json``.
Credentials never go into either file: a literal token given to ``--env``/``--header`` under a
credential-looking name (or found by ``import``) is moved into the secret store and referred to
as ``${secret:NAME}``.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer
from rich.table import Table

from pincer.cli.acts import record_act
from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, fail, pincer_home, print_error, run, stderr
from pincer.core.acts import ActKind
from pincer.core.errors import PincerError, UsageError

if TYPE_CHECKING:
    from pincer.secrets.store import SecretStore

app = typer.Typer(help="Connect external MCP servers as governed tools.", no_args_is_help=True)

TEST_TIMEOUT_S = 60.0  # `mcp test` / `mcp trust`: start, handshake and tools/list together


class _Secrets:
    """Opens the secret store only when something needs it (a reference or a value to store)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._store: SecretStore | None = None

    def store(self) -> SecretStore:
        if self._store is None:
            from pincer.cli.common import secret_key
            from pincer.secrets.store import SecretStore

            self._store = SecretStore.open(self.home, key=secret_key(self.home))
        return self._store

    def find(self, name: str) -> str | None:
        return self.store().find(name)

    def scanner(self) -> Any:
        """The leak scanner over the store's secrets (credential shapes only without a store)."""
        from pincer.safety.scanner import LeakScanner
        from pincer.secrets.store import SECRETS_DB_NAME

        if self._store is None and not (self.home / SECRETS_DB_NAME).exists():
            return LeakScanner(())  # no store (and none made just to look): no value can be anywhere
        try:
            return LeakScanner(self.store().values())
        except PincerError:
            return LeakScanner(())  # an unreadable store: none of its values can be used either

    def scrub(self, error: PincerError) -> PincerError:
        """A server's error text (its stderr tail) may echo a secret: redact before showing it."""
        error.message, _ = self.scanner().scan(error.message)
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


def _parse_effect_list(text: str, what: str) -> frozenset[Any]:
    from pincer.core.effects import parse_effects

    names = [part.strip() for part in text.split(",") if part.strip()]
    return parse_effects(names, source=what)


def _parse_tool_effects(values: list[str]) -> dict[str, frozenset[Any]]:
    overrides: dict[str, frozenset[Any]] = {}
    for item in values:
        tool, found, effects = item.partition("=")
        if not found or not tool.strip():
            raise UsageError(
                f"--tool-effects {item!r} is not TOOL=EFFECT[,EFFECT]",
                hint="for example --tool-effects read_file=read_filesystem (TOOL is the server's own name)",
            )
        overrides[tool.strip()] = _parse_effect_list(effects, f"--tool-effects {tool.strip()}")
    return overrides


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
    read_only: bool = typer.Option(False, "--read-only", help="Its tools only read: the write effects are dropped."),
    effects: str | None = typer.Option(
        None, "--effects", help="What its tools do, e.g. read_filesystem,write_filesystem (replaces the default)."
    ),
    tool_effects: list[str] = typer.Option(
        [], "--tool-effects", help="TOOL=EFFECT[,EFFECT]: one tool's effects, exactly; TOOL may be a pattern with * (repeatable)."
    ),
    capability: list[str] = typer.Option([], "--capability", help="A label shown and filtered by (repeatable)."),
    force: bool = typer.Option(False, "--force", help="Save it even if its command is not found now."),
    replace_existing: bool = typer.Option(False, "--replace", help="Replace a server of the same name."),
    connect: bool = typer.Option(True, "--connect/--no-connect", help="Start it now and pin its tools."),
    as_json: bool = JsonOption,
) -> None:
    """Add a server: a stdio command or a remote URL. Its tools are pinned when it first answers."""
    from pincer.runtimes.mcp import ServerConfig, ServerStore
    from pincer.runtimes.mcp.config import check_command
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
        fitted: dict[str, Any] = {
            "startup": startup,
            "timeout_s": timeout,
            "read_only": read_only,
            "effects": _parse_effect_list(effects, "--effects") if effects is not None else None,
            "tool_effects": _parse_tool_effects(tool_effects),
            "capabilities": tuple(capability),
        }
        if command is not None:
            pairs = _parse_pairs(env, "=", "--env")
            for key in pairs:  # said explicitly here: refuse rather than drop
                check_variable_name(key, source="--env")
            env_values, secrets, notes = protect_env(name, pairs)
            config = ServerConfig(
                name=name, transport="stdio", command=command, args=tuple(arg), env=env_values, cwd=cwd, **fitted
            )
            found: str | None = None
            if force:
                try:
                    found = check_command(config)
                except PincerError as exc:
                    notes.append(f"saved with --force although {exc.message.removesuffix('; nothing was saved')}")
            else:
                found = check_command(config)
            if found is not None and "/" not in command:
                # stored absolute: the gateway (`make run`, a service) may run with another PATH
                # than this shell, where a venv's bin/ is on it
                config = dataclasses.replace(config, command=found)
                notes.append(f"found {command} at {found}; stored that path")
        else:
            header_values, secrets, notes = protect_headers(name, _parse_pairs(header, ":", "--header"))
            config = ServerConfig(
                name=name, transport=transport, url=url, headers=header_values, **fitted  # type: ignore[arg-type]
            )
        store = ServerStore(home)
        holder = _Secrets(home)
        try:
            if secrets:
                for secret_name, value in secrets.items():
                    holder.store().set(secret_name, value)
            store.add(config, replace_existing=replace_existing)
            record_act(home, ActKind.EXTENSION, subject=name, outcome="added", reason=f"MCP server {name} added",
                       args={"transport": config.transport, "replaced": replace_existing, "secrets_stored": sorted(secrets)})  # fmt: skip
            result: dict[str, Any] = {"ok": True, "server": config.to_json(), "notes": notes, "tools": None}
            if connect:
                try:
                    report = await _probe(home, config, holder, record=True, quiet=as_json)
                    result["tools"] = report["tools"]
                    result["refused"] = report["refused"]
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
    from rich.markup import escape

    for note in result["notes"]:
        stderr.print(f"[dim]{escape(note)}[/]")
    stderr.print(f"added MCP server [bold]{escape(name)}[/]")
    if result.get("warning"):
        stderr.print(f"[yellow]warning:[/] {escape(result['warning'])}")
    elif result["tools"] is not None:
        pinned = [t["name"] for t in result["tools"] if t["state"] == "trusted"]
        stderr.print(f"pinned {len(pinned)} tools: {', '.join(pinned)}", markup=False)
        _print_refused(result.get("refused") or [])


def _print_refused(refused: list[dict[str, Any]]) -> None:
    for item in refused:
        print_error(item["reason"], item["hint"], code="refused")


def _effects_text(server: dict[str, Any]) -> str:
    if server.get("effects") is not None:
        text = ", ".join(server["effects"]) or "none"
    else:
        text = "default (" + ("external_write" if server["transport"] == "stdio" else "network, external_write") + ")"
    if server.get("tools"):
        text += f"; {len(server['tools'])} tool override(s)"
    return text


@app.command("list")
def list_servers(
    capability: str | None = typer.Option(None, "--capability", help="Only servers with this capability label."),
    as_json: bool = JsonOption,
) -> None:
    """List the configured servers (without starting them)."""
    from pincer.runtimes.mcp import PinStore, ServerStore

    async def body() -> list[dict[str, Any]]:
        home = pincer_home()
        pins = PinStore(home)
        return [
            {**server.to_json(), "pinned_tools": sorted(pins.pins(server.name))}
            for server in ServerStore(home).load()
            if capability is None or capability in server.capabilities
        ]

    servers = run(body, as_json=as_json)
    if as_json:
        emit_json(servers)
        return
    table = Table(title=f"{len(servers)} MCP servers", title_justify="left")
    for column in ("name", "transport", "target", "startup", "enabled", "effects", "capabilities", "pinned tools"):
        table.add_column(column)
    for server in servers:
        target = server.get("url") or " ".join([server.get("command") or "", *server.get("args", [])])
        table.add_row(
            server["name"], server["transport"], target, server["startup"],
            "yes" if server["enabled"] else "no", _effects_text(server),
            ", ".join(server.get("capabilities", [])) or "-", str(len(server["pinned_tools"])),
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
        record_act(home, ActKind.EXTENSION, subject=name, outcome="removed", reason=f"MCP server {name} removed")

    run(body, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "name": name})
    else:
        stderr.print(f"removed MCP server {name}")


# Said after `pincer mcp test` itself failed to start the server: pointing at that command again
# would send the user round in a circle.
_START_FAILED_HINT = (
    "fix the server's command, arguments or env (the message above ends with its stderr): edit "
    "$PINCER_HOME/mcp/servers.json, or add it again with `pincer mcp add {name} ... --replace`"
)


async def _probe_configured(home: Path, name: str, *, quiet: bool = False) -> dict[str, Any]:
    """Probe a configured server without recording anything; errors come back scrubbed of secrets."""
    from pincer.runtimes.mcp import ServerStore

    config = ServerStore(home).get(name)
    holder = _Secrets(home)
    try:
        return await _probe(home, config, holder, record=False, quiet=quiet)
    except PincerError as exc:
        error = holder.scrub(exc)
        if error.hint and "pincer mcp test" in error.hint:
            error.hint = _START_FAILED_HINT.format(name=name)
        raise error from None
    finally:
        holder.close()


async def _probe(home: Path, config: Any, secrets: _Secrets, *, record: bool, quiet: bool = False) -> dict[str, Any]:
    """Start the server once, list its tools, decide them against the pins (leak scan included),
    stop it. ``record``: pin the tools seen for the first time. A start that takes more than a
    second says so on stderr (an npx server fetches its package first), unless ``quiet``."""
    from pincer.cli.progress import slow_wait
    from pincer.config import load_config
    from pincer.runtimes.mcp import PinStore, ServerConnection
    from pincer.runtimes.mcp.assignment import assign_tools, holds_secret
    from pincer.runtimes.mcp.person_instances import person_secret_names, without_person_secrets

    # A per-person secret's shared value is never injected: the server is tried as the gateway
    # lists its tools, without the variables and headers that name one (docs/teams.md).
    own = person_secret_names(config, load_config(home).secrets.per_person)
    conn = ServerConnection(without_person_secrets(config, own) if own else config, secrets=secrets.find)
    started = time.perf_counter()
    waiting = f"starting MCP server {config.name} (a server run with npx or uvx fetches its package first)"
    try:
        with anyio.fail_after(TEST_TIMEOUT_S), slow_wait(lambda: waiting, enabled=not quiet):
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
    scanner = secrets.scanner()
    taken = _taken_by_others(pins, config.name)
    assignment = assign_tools(config.name, pins.pins(config.name), definitions, scanner=scanner, taken=taken)
    if record:
        pins.record_new(config.name, [t.definition for t in assignment.tools if t.state == "new"])
        assignment = assign_tools(config.name, pins.pins(config.name), definitions, scanner=scanner, taken=taken)
    tools = []
    seen: set[str] = set()
    for definition in definitions:
        if definition.name in seen:
            continue
        seen.add(definition.name)
        if holds_secret(scanner, definition):
            continue  # listed under "refused", by its redacted name only
        entry = next((t for t in assignment.tools if t.upstream == definition.name), None)
        tools.append({
            "name": definition.name,
            "registry_name": entry.registry_name if entry is not None else None,
            "state": assignment.state_of(definition.name),
            "description": definition.description,
        })
    pinned = pins.pins(config.name)
    missing = sorted(scanner.scan_text(u)[0] for u in set(pinned) - seen)
    return {
        "ok": True,
        "name": config.name,
        "protocol_version": status.protocol_version,
        "server": status.server_info,
        "connect_ms": round(connect_ms, 1),
        "list_tools_ms": round(list_ms, 1),
        "tools": tools,
        "refused": [{"tool": r.tool, "kind": r.kind, "reason": r.reason, "hint": r.hint} for r in assignment.refused],
        "listed_again": len(again),
        "missing": missing,
        "assignment": assignment,
    }


def _taken_by_others(pins: Any, server: str) -> set[str]:
    """Registry names other servers' pins hold (the runtime's rule: the first server by name
    keeps a name two of them pinned)."""
    every = pins.all()
    mine = {pin.registry_name for pin in every.get(server, {}).values()}
    return {
        pin.registry_name
        for other, others in every.items()
        if other != server
        for pin in others.values()
        if not (pin.registry_name in mine and server < other)
    }


@app.command("test")
def test(name: str, as_json: bool = JsonOption) -> None:
    """Start a server, list its tools and report timing and pin state (changes nothing). Exits 1
    when a tool is refused because its definition holds a secret, or its definition changed
    since it was trusted (`pincer mcp trust` shows how, and asks)."""
    from pincer.core.errors import DefinitionRefused

    async def body() -> dict[str, Any]:
        home = pincer_home()
        report = await _probe_configured(home, name, quiet=as_json)
        report.pop("assignment")
        leaks = [r for r in report["refused"] if r["kind"] == "secret"]
        if leaks:
            error = DefinitionRefused(
                f"{len(leaks)} tool definition(s) hold a secret and are refused: "
                + ", ".join(repr(r["tool"]) for r in leaks),
                source=f"MCP server {name!r}",
                hint=leaks[0]["hint"],
            )
            report["ok"] = False
            report["error"] = error.to_dict()
        changed = [t["name"] for t in report["tools"] if t["state"] in ("changed", "owner_changed")]
        if changed and report["ok"]:
            report["ok"] = False
            report["error"] = DefinitionRefused(
                f"{len(changed)} tool(s) changed since they were trusted: " + ", ".join(changed),
                source=f"MCP server {name!r}",
                hint=f"`pincer mcp trust {name}` shows what changed and asks before trusting it",
            ).to_dict()
        return report

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
        if not report["ok"]:
            raise typer.Exit(EXIT_FAILURE)
        return
    from rich.markup import escape

    # What a server says of itself is its own text: escaped, so it cannot restyle the terminal.
    server = " ".join(str(report["server"] or "").split()) or "unnamed server"
    stderr.print(
        f"[bold]{escape(name)}[/]: {escape(server)}, protocol {escape(str(report['protocol_version']))}, "
        f"started in {report['connect_ms']:.0f} ms, tools/list in {report['list_tools_ms']:.1f} ms"
    )
    table = Table(title=f"{len(report['tools'])} tools", title_justify="left")
    for column in ("tool", "pin", "description"):
        table.add_column(column)
    for tool in report["tools"]:
        table.add_row(escape(tool["name"]), tool["state"], escape(tool["description"][:80]))
    stderr.print(table)
    if report["missing"]:
        stderr.print(f"no longer offered: {', '.join(report['missing'])}", markup=False)
    _print_refused(report["refused"])
    if not report["ok"]:
        print_error(report["error"]["message"], report["error"].get("hint"))
        raise typer.Exit(EXIT_FAILURE)


@app.command("trust")
def trust(
    name: str,
    tool: str | None = typer.Argument(None, help="Only this tool (default: every changed or new tool)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Trust without asking."),
    as_json: bool = JsonOption,
) -> None:
    """Show how a server's tools changed since they were trusted (definition, effect annotations,
    which upstream tool holds a name), and trust them as they are now."""
    from pincer.core.errors import DefinitionRefused
    from pincer.runtimes.mcp import PinStore, describe_change

    async def inspect() -> tuple[list[Any], list[dict[str, Any]]]:
        home = pincer_home()
        report = await _probe_configured(home, name, quiet=as_json)
        assignment = report["assignment"]
        chosen = [c for c in assignment.candidates if tool is None or c.definition.name == tool]
        if tool is not None and not chosen:
            refusal = next((r for r in assignment.refused if r.tool == tool), None)
            if refusal is not None:
                raise DefinitionRefused(refusal.reason, source=f"MCP server {name!r}", hint=refusal.hint)
            if any(t["name"] == tool for t in report["tools"]):
                return [], []
            raise UsageError(f"server {name!r} offers no tool {tool!r}", hint=f"`pincer mcp test {name}` lists them")
        changes = []
        for candidate in chosen:
            change: dict[str, Any] = {"tool": candidate.definition.name, "change": candidate.change, "diff": ""}
            if candidate.pinned is not None:
                change["diff"] = describe_change(candidate.pinned, candidate.definition)
            if candidate.change == "owner_changed" and candidate.pinned is not None:
                change["replaces"] = candidate.pinned.name
            changes.append(change)
        return [c.definition for c in chosen], changes

    definitions, changes = run(inspect, as_json=as_json)
    if not changes:
        if as_json:
            emit_json({"ok": True, "name": name, "trusted": [], "changes": []})
        else:
            stderr.print(f"nothing to trust: {name}'s tools match their pins")
        return
    if not as_json:
        for change in changes:
            label = change["change"].replace("_", " ")
            if change.get("replaces"):
                label += f": takes the name of {change['replaces']!r}"
            stderr.print(f"[bold]{name}/{change['tool']}[/]: {label}", markup=True, highlight=False)
            if change["diff"]:
                stderr.print(change["diff"], markup=False, highlight=False)
    if not yes:
        if as_json or not sys.stdin.isatty():
            error = UsageError("trusting changed tools needs a confirmation", hint="review the changes and pass --yes")
            if as_json:
                emit_json({"ok": False, "error": error.to_dict(), "changes": changes})
                raise typer.Exit(EXIT_FAILURE)
            print_error(error.message, error.hint)
            raise typer.Exit(EXIT_FAILURE)
        if not typer.confirm(f"trust {len(changes)} tool definition(s) of {name}?", err=True):
            raise typer.Exit(EXIT_FAILURE)
    home = pincer_home()
    PinStore(home).trust(name, definitions)
    from pincer.cli.acts import cli_actor, record_entries
    from pincer.store.acts import trusted_definition

    actor = cli_actor()
    try:
        record_entries(home, [
            trusted_definition(actor, server=name, tool=change["tool"], change=change["change"], definition_hash=definition.hash)
            for definition, change in zip(definitions, changes, strict=True)
        ])  # fmt: skip
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, "name": name, "trusted": [c["tool"] for c in changes], "changes": changes})
    else:
        stderr.print(f"trusted {', '.join(c['tool'] for c in changes)}")


@app.command("import")
def import_servers(
    path: Path = typer.Argument(
        ..., help="mcp-servers.json, a registry entry (or a directory of them), an mcpServers file or openclaw.json."
    ),
    replace_existing: bool = typer.Option(False, "--replace", help="Replace servers of the same names."),
    as_json: bool = JsonOption,
) -> None:
    """Import MCP servers from IronClaw's, OpenClaw's and desktop clients' files. All or nothing.
    Entries that describe an OpenAPI document (``specPath``) become OpenAPI services."""
    from pincer.cli.openapi import fetch_document
    from pincer.runtimes.mcp import ServerStore
    from pincer.runtimes.mcp.importers import import_path
    from pincer.runtimes.openapi import ServiceStore

    async def body() -> dict[str, Any]:
        home = pincer_home()
        result = import_path(path, fetch=fetch_document)
        if not result.servers and not result.services:
            raise UsageError(f"{path} holds no MCP server pincer can use", hint="; ".join(result.notes) or None)
        store = ServerStore(home)
        services = ServiceStore(home)
        existing = {s.name for s in store.load()}
        clashes = sorted(existing & {s.name for s in result.servers})
        existing_services = {s.name for s in services.load()}
        clashes += sorted(f"{s.name} (OpenAPI)" for s in result.services if s.name in existing_services)
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
        if result.servers:
            store.add_many(result.servers, replace_existing=replace_existing)
        for service in result.services:
            services.add(service, replace_existing=replace_existing)
        record_act(home, ActKind.EXTENSION, subject=f"import:{path.name}", outcome="imported",
                   reason=f"{len(result.servers)} MCP server(s) and {len(result.services)} OpenAPI service(s) imported from {path.name}",
                   args={"servers": [s.name for s in result.servers], "openapi_services": [s.name for s in result.services],
                         "replaced": replace_existing, "secrets_stored": sorted(result.secrets)})  # fmt: skip
        return {
            "ok": True,
            "format": result.format,
            "imported": [s.name for s in result.servers],
            "openapi_services": [s.name for s in result.services],
            "capabilities": {s.name: list(s.capabilities) for s in result.servers if s.capabilities},
            "secrets_stored": sorted(result.secrets),
            "unknown_keys": result.unknown_keys,
            "notes": result.notes,
        }

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
        return
    from rich.markup import escape

    for note in result["notes"]:
        stderr.print(f"[dim]{escape(note)}[/]")
    for entry, keys in result["unknown_keys"].items():
        stderr.print(f"[yellow]not imported:[/] {escape(f'{entry}: unknown keys ' + ', '.join(keys))}")
    imported = f"imported {len(result['imported'])} servers ({result['format']}): {', '.join(result['imported'])}"
    if result["openapi_services"]:
        imported += f"; OpenAPI services: {', '.join(result['openapi_services'])}"
    stderr.print(imported)


@app.command("stdio")
def stdio(
    session: str = typer.Option(None, "--session", help="Session the calls run under (default: [gateway] session)."),
) -> None:
    """Serve every tool over MCP on stdin/stdout (for clients that launch their servers)."""
    import logging

    # stdout carries MCP messages only: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    async def body() -> None:
        from contextlib import AsyncExitStack

        import pincer.cli.serve as serve_module
        from pincer.cli.common import open_pincer
        from pincer.config import load_config
        from pincer.gateway.stdio_prelude import claim_stdio, handshake_capabilities, run_prelude

        if serve_module.gateway_extensions is not serve_module.GATEWAY_EXTENSIONS:
            # Extensions installed by a wrapper (the conformance fixtures' launcher): what they add
            # to the handshake is known only to the SDK server, which then answers all of it.
            async with open_pincer() as pincer:
                await _serve_stdio(pincer, session, None)
            return
        config = load_config(pincer_home())
        async with AsyncExitStack() as stack, claim_stdio() as wire:
            opened: list[Any] = []

            async def ensure_open() -> Any:
                if not opened:
                    opened.append(await stack.enter_async_context(open_pincer(config=config, quiet=True)))
                return opened[0]

            async def list_tools() -> list[dict[str, Any]]:
                from pincer.gateway.wire import add_task_support, tool_to_wire
                from pincer.policy.visibility import visible_tools

                pincer = await ensure_open()
                name = session or config.gateway.session
                policy = config.session(name)
                tools = [tool_to_wire(spec, session=name) for spec in visible_tools(policy, pincer.registry.list())]
                return add_task_support(tools, enabled=config.tasks.enabled, only=config.tasks.only)

            capabilities = handshake_capabilities(tasks=config.tasks.enabled)
            handover = await run_prelude(wire, capabilities=capabilities, list_tools=list_tools)
            if handover is not None:
                await _serve_stdio(await ensure_open(), session, (handover, wire))

    run(body)


async def _serve_stdio(pincer: Any, session: str | None, handover: Any) -> None:
    from pincer.cli.serve import gateway_extensions
    from pincer.gateway.stdio import serve_stdio

    extensions = await gateway_extensions(pincer)
    await serve_stdio(pincer, session=session or pincer.config.gateway.session, extensions=extensions, handover=handover)
